# The json package: cJSON (libcjson-dev).
find_library(CJSON_LIB cjson)
find_path(CJSON_INCLUDE cjson/cJSON.h)
if(CJSON_LIB AND CJSON_INCLUDE)
  duda_package(json SOURCES json.c json_core.c LIBS ${CJSON_LIB} m INCLUDES ${CJSON_INCLUDE}
               TESTS test_json_core.c TEST_SOURCES json_core.c)
else()
  message(STATUS "cJSON not found (libcjson-dev): the Duda json package is left out")
endif()
