# Remove every file install_manifest.txt lists (cmake -DMANIFEST=... -P).
# The manifest holds the installed paths without DESTDIR: run it with the
# DESTDIR of the installation (make uninstall DESTDIR=...). Directories
# are left in place: they may hold files the administrator added (logs, sites).
if(NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "${MANIFEST} not found: nothing was installed from this build")
endif()
file(STRINGS "${MANIFEST}" files)
foreach(f IN LISTS files)
  set(f "$ENV{DESTDIR}${f}")
  if(EXISTS "${f}" OR IS_SYMLINK "${f}")
    message(STATUS "Removing ${f}")
    file(REMOVE "${f}")
  endif()
endforeach()
