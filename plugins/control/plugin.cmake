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
if(MK_PLUGIN_SHARED)
  target_sources(plugin-${MK_PLUGIN} PRIVATE ${MK_CONTROL_SOURCES})
  target_link_libraries(plugin-${MK_PLUGIN} PRIVATE Threads::Threads)
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_CONTROL_SOURCES})
endif()
add_executable(monkey-ctl ${CMAKE_CURRENT_LIST_DIR}/monkey-ctl.c)
set_target_properties(monkey-ctl PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_compile_definitions(monkey-ctl PRIVATE MK_CTL_DEFAULT_CONFDIR="${MK_CONFDIR}"
                           MK_CTL_VERSION="${PROJECT_VERSION}")
if(MK_STATIC)
  target_link_options(monkey-ctl PRIVATE -static)
endif()
