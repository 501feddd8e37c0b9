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
#   MK_SYSTEMD_UNITDIR      monkey.service and the monkey.socket example (MK_SYSTEMD)
#   MK_SYSUSERSDIR          monkey.conf: the system user "monkey" of the unit
#   MK_TMPFILESDIR          monkey.conf: the runtime (control socket) and log
#                           directories, owned by that user
#
# The three directories follow CMAKE_INSTALL_PREFIX (PREFIX/lib/systemd/system,
# PREFIX/lib/sysusers.d, PREFIX/lib/tmpfiles.d, which systemd reads for the
# prefixes /usr and /usr/local) unless given (cmake/auto.cmake): a build
# configured once without a prefix and installed with PREFIX=/usr puts them
# under /usr. After `make install`, `systemd-sysusers` creates the user and
# `systemd-tmpfiles --create` the directories (docs/packaging.md).
#
# The installed configuration is conf/ with its relative paths replaced by
# the installed ones (cmake/install-conf.cmake, run at configure time), so
# the bundled conf/ keeps working from the tree (`make run`).
# `cmake --build BUILD --target uninstall` removes what install_manifest.txt
# lists.

mk_auto_cache(MK_SYSTEMD_UNITDIR PATH "${CMAKE_INSTALL_PREFIX}/lib/systemd/system"
              "where monkey.service is installed")
mk_auto_cache(MK_SYSUSERSDIR PATH "${CMAKE_INSTALL_PREFIX}/lib/sysusers.d"
              "where the sysusers.d entry of the monkey user is installed")
mk_auto_cache(MK_TMPFILESDIR PATH "${CMAKE_INSTALL_PREFIX}/lib/tmpfiles.d"
              "where the tmpfiles.d entry of the runtime and log directories is installed")
set(MK_INSTALL_USER "" CACHE STRING
    "User of the installed monkey.conf (a root-started server switches to it); empty: none")
# The certificate pair the installed sites/default names in its commented
# [TLS] section: the snakeoil pair of Debian's ssl-cert.
set(MK_INSTALL_TLS_CERT /etc/ssl/certs/ssl-cert-snakeoil.pem CACHE STRING
    "Certificate of the installed sites/default's commented [TLS] section")
set(MK_INSTALL_TLS_KEY /etc/ssl/private/ssl-cert-snakeoil.key CACHE STRING
    "CertificateKey of the installed sites/default's commented [TLS] section")

install(TARGETS monkey RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
if(TARGET monkey-ctl)
  install(TARGETS monkey-ctl RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
endif()
if(TARGET monkey-passwd)
  install(TARGETS monkey-passwd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY include/monkey DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT libmonkey
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY htdocs/ DESTINATION ${MK_SITEDIR})
install(DIRECTORY DESTINATION ${MK_LOGDIR})

# The installed configuration, generated from conf/.
set(MK_INSTALL_CONF ${CMAKE_BINARY_DIR}/install-conf)
include(${CMAKE_SOURCE_DIR}/cmake/install-conf.cmake)
install(DIRECTORY ${MK_INSTALL_CONF}/ DESTINATION ${MK_CONFDIR})

# systemd units, with the installed paths. The runtime directory (the
# control socket) is the unit's RuntimeDirectory= when it lies in /run (the
# prefix /usr, Debian's RUNSTATEDIR=/run), else a ReadWritePaths= of the
# sandbox that tmpfiles.d creates; the log directory likewise with
# LogsDirectory= in /var/log.
set(MK_SBINDIR ${CMAKE_INSTALL_FULL_SBINDIR})
set(MK_SERVICE_USER monkey)
string(REGEX REPLACE "^/var/run/" "/run/" MK_RUNDIR_REAL "${MK_RUNDIR}")
set(MK_UNIT_DIRS "")
if(MK_RUNDIR_REAL MATCHES "^/run/(.+)$")
  string(APPEND MK_UNIT_DIRS "RuntimeDirectory=${CMAKE_MATCH_1}\nRuntimeDirectoryMode=0755\n")
else()
  string(APPEND MK_UNIT_DIRS "ReadWritePaths=-${MK_RUNDIR}\n")
endif()
if(MK_LOGDIR MATCHES "^/var/log/(.+)$")
  string(APPEND MK_UNIT_DIRS "LogsDirectory=${CMAKE_MATCH_1}\n")
endif()
string(APPEND MK_UNIT_DIRS "ReadWritePaths=${MK_LOGDIR}")
# A server built without MK_SYSTEMD sends no readiness message: the units
# (Type=notify) would wait for it in vain, so none is installed.
if(MK_SYSTEMD)
  foreach(unit monkey.service monkey.socket)
    configure_file(packaging/systemd/${unit}.in ${CMAKE_BINARY_DIR}/systemd/${unit} @ONLY)
    install(FILES ${CMAKE_BINARY_DIR}/systemd/${unit} DESTINATION ${MK_SYSTEMD_UNITDIR})
  endforeach()
endif()
# The unit's user (sysusers.d) and its directories (tmpfiles.d).
foreach(f sysusers tmpfiles)
  configure_file(packaging/systemd/${f}.conf.in ${CMAKE_BINARY_DIR}/systemd/${f}.d/monkey.conf @ONLY)
endforeach()
install(FILES ${CMAKE_BINARY_DIR}/systemd/sysusers.d/monkey.conf DESTINATION ${MK_SYSUSERSDIR})
install(FILES ${CMAKE_BINARY_DIR}/systemd/tmpfiles.d/monkey.conf DESTINATION ${MK_TMPFILESDIR})

# Manual pages: roff sources in man/.
foreach(page monkey.8 monkey.conf.5 monkey-ctl.8 monkey-passwd.1)
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()

add_custom_target(uninstall
  COMMAND ${CMAKE_COMMAND} -DMANIFEST=${CMAKE_BINARY_DIR}/install_manifest.txt
          -P ${CMAKE_SOURCE_DIR}/cmake/uninstall.cmake
  COMMENT "removing the files of install_manifest.txt")
