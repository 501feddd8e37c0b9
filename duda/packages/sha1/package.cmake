# The sha1 package: libcrypto (OpenSSL 3); sha.c and sha_api.c are shared with sha256.
if(OPENSSL_FOUND)
  duda_package(sha1 SOURCES sha1.c sha.c sha_api.c LIBS OpenSSL::Crypto TESTS test_sha.c
               TEST_SOURCES sha.c)
endif()
