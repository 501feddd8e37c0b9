# The sha1 package: libcrypto (OpenSSL 3). sha.c and sha_api.c are the library
# duda-sha, which the sha256 package links too (and test_sha.c, for sha.c).
if(OPENSSL_FOUND)
  duda_library(sha SOURCES duda/packages/sha1/sha.c duda/packages/sha1/sha_api.c
               LIBS OpenSSL::Crypto INCLUDES ${CMAKE_SOURCE_DIR}/include)
  duda_package(sha1 SOURCES sha1.c LIBS duda-sha TESTS test_sha.c)
endif()
