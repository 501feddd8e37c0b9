# duda/: the Duda web service framework (docs/duda.md). Included by the
# top-level CMakeLists.txt when MK_DUDA is on (not in a static build: a
# static binary cannot load shared objects).
#
#   build/plugins/monkey-duda.so   the plugin (Load it in plugins.load)
#   build/bin/duda                 the helper, for services built against this tree
#   include/duda/duda.h            the services' header (installed with the helper)
add_library(plugin-duda MODULE duda/duda.c duda/service.c duda/objects.c duda/session.c
            duda/runtime.c duda/router.c duda/socket.c)
target_include_directories(plugin-duda PRIVATE include)
target_link_libraries(plugin-duda PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(plugin-duda PROPERTIES PREFIX "monkey-" OUTPUT_NAME duda)
install(TARGETS plugin-duda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/monkey/plugins)
install(DIRECTORY include/duda DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING
        PATTERN "*.h")

# The helper: the same script, with the paths of the tree or of the installation.
set(DUDA_MONKEY ${CMAKE_BINARY_DIR}/bin/monkey)
set(DUDA_PLUGIN ${CMAKE_BINARY_DIR}/plugins/monkey-duda.so)
set(DUDA_INCLUDE ${CMAKE_SOURCE_DIR}/include)
set(DUDA_CFLAGS "${CMAKE_C_FLAGS}")
if(MK_SANITIZE)
  set(DUDA_CFLAGS "${DUDA_CFLAGS} -fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
configure_file(tools/duda.in ${CMAKE_BINARY_DIR}/bin/duda @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
               WORLD_READ WORLD_EXECUTE)
set(DUDA_MONKEY ${CMAKE_INSTALL_FULL_SBINDIR}/monkey)
set(DUDA_PLUGIN ${MK_PLUGINDIR}/monkey-duda.so)
set(DUDA_INCLUDE ${CMAKE_INSTALL_FULL_INCLUDEDIR})
set(DUDA_CFLAGS "")
configure_file(tools/duda.in ${CMAKE_BINARY_DIR}/install-bin/duda @ONLY)
install(PROGRAMS ${CMAKE_BINARY_DIR}/install-bin/duda DESTINATION ${CMAKE_INSTALL_BINDIR})
