# The redis package (README.md): hiredis (libhiredis-dev), optional.
if(MK_DUDA_HIREDIS)
  duda_package(redis SOURCES redis.c ../../redis_loop.c ../../session_parse.c
               LIBS ${HIREDIS_LIBRARY} INCLUDES ${HIREDIS_INCLUDE_DIR})
endif()
