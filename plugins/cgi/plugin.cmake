# plugins/cgi: CGI/1.1 (RFC 3875). Included by the top-level CMakeLists with
# MK_PLUGIN=cgi. Its parts (cgi.h lists them) and the gateway core shared
# with plugins/fastcgi (plugins/gateway/gateway.cmake).
include(${CMAKE_SOURCE_DIR}/plugins/gateway/gateway.cmake)
set(MK_CGI_SOURCES
  ${CMAKE_SOURCE_DIR}/plugins/cgi/cgi_conf.c
  ${CMAKE_SOURCE_DIR}/plugins/cgi/cgi_map.c
  ${CMAKE_SOURCE_DIR}/plugins/cgi/cgi_job.c)
if(MK_PLUGIN_SHARED)
  target_sources(plugin-cgi PRIVATE ${MK_CGI_SOURCES} ${MK_GW_SOURCES})
  target_include_directories(plugin-cgi PRIVATE ${MK_GW_DIR})
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_CGI_SOURCES} ${MK_GW_SOURCES})
  target_include_directories(monkeybuiltins PRIVATE ${MK_GW_DIR})
endif()
