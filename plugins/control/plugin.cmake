# The control plugin (plugins/control/README.md): its parts (control.h lists
# them), its socket thread (the thread library), and monkey-ctl, its client,
# built next to the monkey binary.
set(MK_CONTROL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/config.c
  ${CMAKE_CURRENT_LIST_DIR}/documents.c
  ${CMAKE_CURRENT_LIST_DIR}/http.c
  ${CMAKE_CURRENT_LIST_DIR}/json.c
  ${CMAKE_CURRENT_LIST_DIR}/protocol.c
  ${CMAKE_CURRENT_LIST_DIR}/socket.c)
# MetricsPath (metrics.c) with the server's metrics (MK_METRICS); the
# features of monkey_build_info: the parts and libraries this build has.
set(MK_CONTROL_DEFS "")
if(MK_METRICS)
  list(APPEND MK_CONTROL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics.c)
  set(mk_features "")
  foreach(part IN LISTS MK_PARTS)
    string(REPLACE "MK_HAVE_" "" part "${part}")
    string(TOLOWER "${part}" part)
    list(APPEND mk_features ${part})
  endforeach()
  if(MK_H2 AND NGHTTP2_FOUND)
    list(APPEND mk_features h2)
  endif()
  if(MK_BROTLI AND BROTLIENC_FOUND)
    list(APPEND mk_features brotli)
  endif()
  if(MK_ZLIB AND ZLIB_FOUND)
    list(APPEND mk_features zlib)
  endif()
  list(SORT mk_features)
  string(REPLACE ";" "," mk_features "${mk_features}")
  set(MK_CONTROL_DEFS CONTROL_HAVE_METRICS CONTROL_FEATURES="${mk_features}")
endif()
if(MK_PLUGIN_SHARED)
  target_sources(plugin-${MK_PLUGIN} PRIVATE ${MK_CONTROL_SOURCES})
  target_compile_definitions(plugin-${MK_PLUGIN} PRIVATE ${MK_CONTROL_DEFS})
  target_link_libraries(plugin-${MK_PLUGIN} PRIVATE Threads::Threads)
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_CONTROL_SOURCES})
  set_property(SOURCE ${MK_CONTROL_SOURCES} APPEND PROPERTY COMPILE_DEFINITIONS ${MK_CONTROL_DEFS})
endif()
add_executable(monkey-ctl ${CMAKE_CURRENT_LIST_DIR}/monkey-ctl.c)
set_target_properties(monkey-ctl PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_compile_definitions(monkey-ctl PRIVATE MK_CTL_DEFAULT_CONFDIR="${MK_CONFDIR}"
                           MK_CTL_VERSION="${PROJECT_VERSION}")
if(MK_STATIC)
  target_link_options(monkey-ctl PRIVATE -static)
endif()
