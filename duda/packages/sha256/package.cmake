# The sha256 package: libcrypto (OpenSSL 3), with sha1's sha.c and sha_api.c (duda-sha).
if(OPENSSL_FOUND)
  duda_package(sha256 SOURCES sha256.c LIBS duda-sha)
endif()
