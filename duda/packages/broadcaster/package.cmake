# duda/packages/broadcaster: channels of WebSocket connections across the
# workers (README.md). Built on the websocket package, and left out with it
# (packages are included in name order: test what websocket needs).
find_package(ZLIB QUIET)
if(OPENSSL_FOUND AND ZLIB_FOUND)
  duda_package(broadcaster SOURCES broadcaster.c)
endif()
