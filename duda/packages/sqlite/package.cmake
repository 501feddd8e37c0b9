# The sqlite package: SQLite 3 (libsqlite3-dev).
find_library(SQLITE3_LIB sqlite3)
find_path(SQLITE3_INCLUDE sqlite3.h)
if(SQLITE3_LIB AND SQLITE3_INCLUDE)
  duda_package(sqlite SOURCES sqlite.c sqlite_core.c LIBS ${SQLITE3_LIB} m
               INCLUDES ${SQLITE3_INCLUDE} TESTS test_sqlite_core.c TEST_SOURCES sqlite_core.c)
else()
  message(STATUS "SQLite not found (libsqlite3-dev): the Duda sqlite package is left out")
endif()
