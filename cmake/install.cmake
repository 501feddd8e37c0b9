# Installation rules (docs/packaging.md). Included by CMakeLists.txt after
# every target exists.
#
#   SBINDIR   monkey, monkey-ctl            BINDIR   monkey-passwd
#   LIBDIR/monkey/plugins   the plugins (MK_PLUGIN_DIR, compiled in)
#   INCLUDEDIR/monkey       the public headers
#   SYSCONFDIR/monkey       the configuration (MK_DEFAULT_CONFDIR, compiled in)
#   DATADIR/monkey/htdocs   the default site
#   LOCALSTATEDIR/log/monkey  the logs (an empty directory)
#   MANDIR                  monkey(8), monkey.conf(5), monkey-ctl(8), monkey-passwd(1)
#   MK_SYSTEMD_UNITDIR      monkey.service and the monkey.socket example
#
# The installed configuration is conf/ with its relative paths replaced by
# the installed ones (cmake/install-conf.cmake, run at configure time), so
# the bundled conf/ keeps working from the tree (`make run`).
# `cmake --build BUILD --target uninstall` removes what install_manifest.txt
# lists.

set(MK_SYSTEMD_UNITDIR "${CMAKE_INSTALL_PREFIX}/lib/systemd/system"
    CACHE PATH "where monkey.service is installed")
set(MK_INSTALL_USER "" CACHE STRING
    "User of the installed monkey.conf (a root-started server switches to it); empty: none")

install(TARGETS monkey RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
if(TARGET monkey-ctl)
  install(TARGETS monkey-ctl RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
endif()
if(TARGET monkey-passwd)
  install(TARGETS monkey-passwd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY include/monkey DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING
        PATTERN "*.h")
install(DIRECTORY htdocs/ DESTINATION ${MK_SITEDIR})
install(DIRECTORY DESTINATION ${MK_LOGDIR})

# The installed configuration, generated from conf/.
set(MK_INSTALL_CONF ${CMAKE_BINARY_DIR}/install-conf)
include(${CMAKE_SOURCE_DIR}/cmake/install-conf.cmake)
install(DIRECTORY ${MK_INSTALL_CONF}/ DESTINATION ${MK_CONFDIR})

# systemd units, with the installed paths.
set(MK_SBINDIR ${CMAKE_INSTALL_FULL_SBINDIR})
foreach(unit monkey.service monkey.socket)
  configure_file(packaging/systemd/${unit}.in ${CMAKE_BINARY_DIR}/systemd/${unit} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/systemd/${unit} DESTINATION ${MK_SYSTEMD_UNITDIR})
endforeach()

# Manual pages: roff sources in man/.
foreach(page monkey.8 monkey.conf.5 monkey-ctl.8 monkey-passwd.1)
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()

add_custom_target(uninstall
  COMMAND ${CMAKE_COMMAND} -DMANIFEST=${CMAKE_BINARY_DIR}/install_manifest.txt
          -P ${CMAKE_SOURCE_DIR}/cmake/uninstall.cmake
  COMMENT "removing the files of install_manifest.txt")
