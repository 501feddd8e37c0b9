# The base64 package: libcrypto (OpenSSL 3).
if(OPENSSL_FOUND)
  duda_package(base64 SOURCES base64.c b64.c LIBS OpenSSL::Crypto TESTS test_b64.c TEST_SOURCES b64.c)
endif()
