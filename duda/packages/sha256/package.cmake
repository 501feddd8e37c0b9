# The sha256 package: libcrypto (OpenSSL 3), with sha1's sha.c.
if(OPENSSL_FOUND)
  duda_package(sha256 SOURCES sha256.c ../sha1/sha.c LIBS OpenSSL::Crypto)
endif()
