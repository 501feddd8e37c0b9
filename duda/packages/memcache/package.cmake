# The memcache package (README.md): libmemcached (libmemcached-dev), optional.
find_path(MEMCACHED_INCLUDE_DIR libmemcached-1.0/memcached.h)
find_library(MEMCACHED_LIBRARY memcached)
find_library(MEMCACHEDUTIL_LIBRARY memcachedutil)
if(MEMCACHED_INCLUDE_DIR AND MEMCACHED_LIBRARY AND MEMCACHEDUTIL_LIBRARY)
  duda_package(memcache SOURCES memcache.c LIBS ${MEMCACHEDUTIL_LIBRARY} ${MEMCACHED_LIBRARY}
               INCLUDES ${MEMCACHED_INCLUDE_DIR})
else()
  message(STATUS "duda: no libmemcached (libmemcached-dev): no memcache package")
endif()
