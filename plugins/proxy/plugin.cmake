# plugins/proxy: the HTTP/1.1 reverse proxy, the third backend of the gateway
# job. Included by the top-level CMakeLists with MK_PLUGIN=proxy. Its parts
# (proxy.h lists them) and the gateway core (plugins/gateway/gateway.cmake).
include(${CMAKE_SOURCE_DIR}/plugins/gateway/gateway.cmake)
set(MK_PX_SOURCES
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_buf.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_conf.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_fconf.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_fields.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_health.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_http.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_metrics.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_pick.c
  ${CMAKE_SOURCE_DIR}/plugins/proxy/px_req.c)
# tls:// upstreams (px_tls.c) with OpenSSL, when the build has it (MK_TLS).
set(MK_PX_TLS OFF)
if(MK_TLS AND OPENSSL_FOUND)
  set(MK_PX_TLS ON)
  list(APPEND MK_PX_SOURCES ${CMAKE_SOURCE_DIR}/plugins/proxy/px_tls.c)
endif()
if(MK_PLUGIN_SHARED)
  # px_conf.c parses Health durations and numbers with core/strings.c, which
  # the server keeps hidden: the shared object has its own copy (a built-in
  # proxy uses monkeylib's).
  target_sources(plugin-proxy PRIVATE ${MK_PX_SOURCES} ${MK_GW_SOURCES}
                 ${CMAKE_SOURCE_DIR}/core/strings.c)
  target_include_directories(plugin-proxy PRIVATE ${MK_GW_DIR})
  # Its thread-locals (the worker's pools, jobs and address cache: 120
  # bytes) in the static TLS block: an access is one load off %fs, not a
  # __tls_get_addr call (12
  # of them a request, 132 instructions). A dlopen'ed object may do so while
  # its block fits the room glibc keeps for them (glibc.rtld.optional_static_tls,
  # 512 bytes); past it the load fails, and the server says so and stops.
  target_compile_options(plugin-proxy PRIVATE -ftls-model=initial-exec)
  if(MK_PX_TLS)
    target_compile_definitions(plugin-proxy PRIVATE PX_TLS)
    target_link_libraries(plugin-proxy PRIVATE OpenSSL::SSL)
  endif()
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_PX_SOURCES} ${MK_GW_SOURCES})
  target_include_directories(monkeybuiltins PRIVATE ${MK_GW_DIR})
  if(MK_PX_TLS)
    # The object library takes OpenSSL's headers from the link; the link
    # itself is monkeylib's: objects taken in by $<TARGET_OBJECTS> bring no
    # libraries of theirs along (as plugins/tls does built in).
    target_compile_definitions(monkeybuiltins PRIVATE PX_TLS)
    target_link_libraries(monkeybuiltins PRIVATE OpenSSL::SSL)
    target_link_libraries(monkeylib PUBLIC OpenSSL::SSL)
  endif()
endif()

if(MK_TESTS AND CMOCKA_LIB AND CMOCKA_INCLUDE)
  add_executable(test_px_http ${CMAKE_SOURCE_DIR}/plugins/proxy/tests/test_px_http.c
                 ${CMAKE_SOURCE_DIR}/plugins/proxy/px_http.c)
  target_include_directories(test_px_http PRIVATE ${CMAKE_SOURCE_DIR}/plugins/proxy
                             ${CMAKE_SOURCE_DIR}/include ${CMOCKA_INCLUDE})
  target_link_libraries(test_px_http PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_px_http PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_px_http COMMAND test_px_http)
  add_executable(test_px_fields ${CMAKE_SOURCE_DIR}/plugins/proxy/tests/test_px_fields.c
                 ${CMAKE_SOURCE_DIR}/plugins/proxy/px_fields.c
                 ${CMAKE_SOURCE_DIR}/plugins/proxy/px_http.c)
  target_include_directories(test_px_fields PRIVATE ${CMAKE_SOURCE_DIR}/plugins/proxy
                             ${CMAKE_SOURCE_DIR}/include ${CMOCKA_INCLUDE})
  target_link_libraries(test_px_fields PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_px_fields PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_px_fields COMMAND test_px_fields)
  add_executable(test_px_buf ${CMAKE_SOURCE_DIR}/plugins/proxy/tests/test_px_buf.c
                 ${CMAKE_SOURCE_DIR}/plugins/proxy/px_buf.c ${MK_GW_SOURCES})
  target_include_directories(test_px_buf PRIVATE ${CMAKE_SOURCE_DIR}/plugins/proxy
                             ${MK_GW_DIR} ${CMAKE_SOURCE_DIR}/include ${CMOCKA_INCLUDE})
  target_link_libraries(test_px_buf PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_px_buf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_px_buf COMMAND test_px_buf)
endif()
