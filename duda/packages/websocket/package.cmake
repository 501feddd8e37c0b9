# duda/packages/websocket: RFC 6455 for services (README.md). Needs libcrypto
# (the handshake's SHA-1 and base64) and zlib (permessage-deflate); without
# them the package is left out and its tests skip.
find_package(ZLIB QUIET)
if(OPENSSL_FOUND AND ZLIB_FOUND)
  duda_package(websocket SOURCES websocket.c ws_proto.c LIBS OpenSSL::Crypto ZLIB::ZLIB)
else()
  message(STATUS "duda package websocket: needs libssl-dev and zlib1g-dev, left out")
endif()
