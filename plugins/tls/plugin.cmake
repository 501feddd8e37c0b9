# plugins/tls: its parts (tls.h lists them), OpenSSL, and a self-signed
# certificate for localhost made at build time into build/tls/ (never
# committed) for `make run` (conf/ refers to it). Included by the top-level
# CMakeLists with MK_PLUGIN=tls, only when OpenSSL 3 was found (MK_TLS).
set(MK_TLS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tls_certs.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_conf.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_ocsp.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_parse.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_send.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_session.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_site.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_stats.c
  ${CMAKE_CURRENT_LIST_DIR}/tls_verify.c)
# ACME (MK_ACME, tls_acme.h): certificates from an ACME CA, with cJSON.
set(MK_TLS_DEFS "")
set(MK_TLS_LIBS "")
if(MK_ACME AND CJSON_LIB AND CJSON_INCLUDE)
  list(APPEND MK_TLS_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/tls_acme.c
    ${CMAKE_CURRENT_LIST_DIR}/tls_acme_client.c
    ${CMAKE_CURRENT_LIST_DIR}/tls_acme_crypto.c
    ${CMAKE_CURRENT_LIST_DIR}/tls_acme_parse.c)
  set(MK_TLS_DEFS TLS_HAVE_ACME TLS_ACME_STATEDIR="${MK_ACME_STATEDIR}")
  set(MK_TLS_LIBS ${CJSON_LIB})
endif()
if(MK_PLUGIN_SHARED)
  target_sources(plugin-tls PRIVATE ${MK_TLS_SOURCES})
  target_compile_definitions(plugin-tls PRIVATE ${MK_TLS_DEFS})
  target_link_libraries(plugin-tls PRIVATE OpenSSL::SSL Threads::Threads ${MK_TLS_LIBS})
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_TLS_SOURCES})
  if(MK_TLS_DEFS)
    set_property(SOURCE ${MK_TLS_SOURCES} APPEND PROPERTY COMPILE_DEFINITIONS ${MK_TLS_DEFS})
  endif()
  target_link_libraries(monkeylib PUBLIC OpenSSL::SSL ${MK_TLS_LIBS})
endif()
find_program(MK_OPENSSL_TOOL openssl)
if(MK_OPENSSL_TOOL)
  set(MK_TLS_DIR ${CMAKE_BINARY_DIR}/tls)
  add_custom_command(
    OUTPUT ${MK_TLS_DIR}/localhost.crt ${MK_TLS_DIR}/localhost.key
    COMMAND ${CMAKE_COMMAND} -E make_directory ${MK_TLS_DIR}
    COMMAND ${MK_OPENSSL_TOOL} req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1
            -nodes -days 825 -subj /CN=localhost
            -addext subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
            -keyout ${MK_TLS_DIR}/localhost.key -out ${MK_TLS_DIR}/localhost.crt
    COMMENT "Making a self-signed certificate for localhost (tls/localhost.crt)"
    VERBATIM)
  add_custom_target(tls-localhost-cert ALL
                    DEPENDS ${MK_TLS_DIR}/localhost.crt ${MK_TLS_DIR}/localhost.key)
endif()
