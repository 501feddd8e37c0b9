# Generate the installed configuration into MK_INSTALL_CONF from conf/: the
# same files, with the paths that are relative in the tree (the site, the
# plugins, the control socket, the logs) replaced by installed ones. Each
# replaced line must be found as written, so a change to conf/ that this
# script does not know about stops the configure step instead of installing
# a configuration pointing at the build tree.
#
# MK_INSTALL_USER (empty by default) names the user a root-started server
# switches to: the Debian package sets it to monkey, the user its postinst
# creates. Left empty, the installed configuration keeps conf/'s commented
# example, since User names a user that must exist.
#
# plugins/duda.conf names the installed ServicesRoot and PackagesRoot
# (MK_DUDA_SERVICESDIR, MK_DUDA_PACKAGESDIR of duda/duda.cmake); a build
# without Duda installs no duda.conf and no commented Load line for it.
file(REMOVE_RECURSE ${MK_INSTALL_CONF})
file(GLOB_RECURSE mk_conf_files RELATIVE ${CMAKE_SOURCE_DIR}/conf ${CMAKE_SOURCE_DIR}/conf/*)
list(FILTER mk_conf_files EXCLUDE REGEX "\\.sock$")
if(NOT TARGET plugin-duda)
  list(REMOVE_ITEM mk_conf_files plugins/duda.conf)
endif()

function(mk_conf_replace text_var file from to)
  string(FIND "${${text_var}}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "cmake/install-conf.cmake: conf/${file} no longer contains '${from}'")
  endif()
  string(REPLACE "${from}" "${to}" text "${${text_var}}")
  set(${text_var} "${text}" PARENT_SCOPE)
endfunction()

foreach(f IN LISTS mk_conf_files)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/conf/${f})
  file(READ ${CMAKE_SOURCE_DIR}/conf/${f} text)
  if(f STREQUAL "monkey.conf")
    mk_conf_replace(text ${f} "    Listen 2001\n" "    Listen 80\n")
    # HTTPS needs a certificate of the site's own: left for the administrator.
    mk_conf_replace(text ${f} "    Listen 2443 tls\n" "    # Listen 443 tls\n")
    if(MK_INSTALL_USER)
      mk_conf_replace(text ${f} "    # User www-data\n" "    User ${MK_INSTALL_USER}\n")
    endif()
  elseif(f STREQUAL "sites/default")
    mk_conf_replace(text ${f} "    # Relative to the configuration directory.\n    DocumentRoot ../htdocs\n"
                    "    # The default page, installed with the server.\n    DocumentRoot ${MK_SITEDIR}\n")
    # The tree's certificate is the build's (build/tls/); an installed site
    # names one of its own, commented out until monkey.conf's TLS Listen line
    # is: Debian's ssl-cert makes the snakeoil pair, as for its other servers.
    mk_conf_replace(text ${f}
                    "# HTTPS for this site (see plugins/tls/README.md): the self-signed certificate\n# for localhost that the build makes in build/tls/ (never committed).\n[TLS]\n    Certificate ../build/tls/localhost.crt\n    CertificateKey ../build/tls/localhost.key\n"
                    "# HTTPS for this site (plugins/tls/README.md), with the tls plugin's line of\n# plugins.load and the \"Listen 443 tls\" line of monkey.conf uncommented: a\n# certificate and key for the site's names. On Debian and Ubuntu the ssl-cert\n# package makes a self-signed pair for this host, named below (make-ssl-cert\n# generate-default-snakeoil makes it again); its key is readable by the group\n# ssl-cert, which the server's user must be in (the Debian package puts its\n# monkey user there).\n# [TLS]\n#     Certificate ${MK_INSTALL_TLS_CERT}\n#     CertificateKey ${MK_INSTALL_TLS_KEY}\n")
  elseif(f STREQUAL "plugins.load")
    # The tree's own [PLUGINS] (HTTPS for make run) goes; the commented list becomes it.
    mk_conf_replace(text ${f}
                    "\n[PLUGINS]\n    Load ../build/plugins/monkey-logger.so       # access and error logs in ../build/log/\n    Load ../build/plugins/monkey-control.so      # monkey-ctl -c conf status\n    Load ../build/plugins/monkey-tls.so          # HTTPS on port 2443 (make run)\n"
                    "\n")
    if(NOT TARGET plugin-duda)
      string(REGEX REPLACE "#[^\n]*monkey-duda\\.so[^\n]*\n" "" text "${text}")
    endif()
    mk_conf_replace(text ${f} "Load ../build/plugins/" "Load ${MK_PLUGINDIR}/")
    # The installed server logs and answers monkey-ctl.
    foreach(p logger control)
      mk_conf_replace(text ${f} "#     Load ${MK_PLUGINDIR}/monkey-${p}.so"
                      "    Load ${MK_PLUGINDIR}/monkey-${p}.so")
    endforeach()
    mk_conf_replace(text ${f} "# [PLUGINS]\n" "[PLUGINS]\n")
  elseif(f STREQUAL "plugins/logger.conf")
    mk_conf_replace(text ${f} "them a site without [LOGGER] is not logged). make run logs into\n    # build/log/ (the build makes it).\n"
                    "them a site without [LOGGER] is not logged).\n")
    mk_conf_replace(text ${f} "    AccessLog ../build/log/access.log\n"
                    "    AccessLog ${MK_LOGDIR}/access.log\n")
    mk_conf_replace(text ${f} "    ErrorLog ../build/log/error.log\n"
                    "    ErrorLog ${MK_LOGDIR}/error.log\n")
  elseif(f STREQUAL "plugins/duda.conf")
    mk_conf_replace(text ${f} "# Not loaded by default: add \"Load ../build/plugins/monkey-duda.so\" to\n# plugins.load."
                    "# Not loaded by default: uncomment its Load line in plugins.load (or add\n# \"Load duda\").")
    mk_conf_replace(text ${f} "relative to the configuration directory. make run's is\n    # build/duda-services/ (the build makes it, empty).\n"
                    "relative to the configuration directory.\n")
    mk_conf_replace(text ${f} "    ServicesRoot ../build/duda-services\n"
                    "    ServicesRoot ${MK_DUDA_SERVICESDIR}\n")
    mk_conf_replace(text ${f} "    PackagesRoot ../build/duda-packages\n"
                    "    PackagesRoot ${MK_DUDA_PACKAGESDIR}\n")
  elseif(f STREQUAL "plugins/control.conf")
    mk_conf_replace(text ${f} "    Socket monkey.sock\n" "    Socket ${MK_RUNDIR}/monkey.sock\n")
  endif()
  file(WRITE ${MK_INSTALL_CONF}/${f} "${text}")
endforeach()
