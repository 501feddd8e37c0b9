# plugins/fastcgi: FastCGI responders (php-fpm). Included by the top-level
# CMakeLists with MK_PLUGIN=fastcgi. Its parts (fastcgi.h lists them) and the
# gateway core shared with plugins/cgi (plugins/gateway/gateway.cmake).
include(${CMAKE_SOURCE_DIR}/plugins/gateway/gateway.cmake)
set(MK_FCGI_SOURCES
  ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_conf.c
  ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_pool.c
  ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_proto.c
  ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_req.c)
if(MK_PLUGIN_SHARED)
  target_sources(plugin-fastcgi PRIVATE ${MK_FCGI_SOURCES} ${MK_GW_SOURCES})
  target_include_directories(plugin-fastcgi PRIVATE ${MK_GW_DIR})
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_FCGI_SOURCES} ${MK_GW_SOURCES})
  target_include_directories(monkeybuiltins PRIVATE ${MK_GW_DIR})
endif()

if(MK_TESTS AND CMOCKA_LIB AND CMOCKA_INCLUDE)
  add_executable(test_fcgi_proto ${CMAKE_SOURCE_DIR}/plugins/fastcgi/tests/test_fcgi_proto.c
                 ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_proto.c)
  target_include_directories(test_fcgi_proto PRIVATE ${CMAKE_SOURCE_DIR}/plugins/fastcgi
                             ${CMAKE_SOURCE_DIR}/include ${CMOCKA_INCLUDE})
  target_link_libraries(test_fcgi_proto PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_fcgi_proto PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_fcgi_proto COMMAND test_fcgi_proto)
endif()
