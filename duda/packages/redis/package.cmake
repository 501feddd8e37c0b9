# The redis package (README.md): hiredis (libhiredis-dev), optional.
if(MK_DUDA_HIREDIS)
  duda_package(redis SOURCES redis.c LIBS duda-redis-loop duda-session-parse)
endif()
