# The sha256 package: libcrypto (OpenSSL 3), with sha1's sha.c and sha_api.c.
if(OPENSSL_FOUND)
  duda_package(sha256 SOURCES sha256.c ../sha1/sha.c ../sha1/sha_api.c LIBS OpenSSL::Crypto)
endif()
