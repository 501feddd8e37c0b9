# The control plugin (plugins/control/README.md): its socket runs on a thread
# of its own, and monkey-ctl, its client, is built next to the monkey binary.
if(MK_PLUGIN_SHARED)
  target_link_libraries(plugin-${MK_PLUGIN} PRIVATE Threads::Threads)
endif()
add_executable(monkey-ctl ${CMAKE_CURRENT_LIST_DIR}/monkey-ctl.c)
set_target_properties(monkey-ctl PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_compile_definitions(monkey-ctl PRIVATE MK_CTL_DEFAULT_CONFDIR="${MK_CONFDIR}"
                           MK_CTL_VERSION="${PROJECT_VERSION}")
if(MK_STATIC)
  target_link_options(monkey-ctl PRIVATE -static)
endif()
