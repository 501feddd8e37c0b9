# Part of `cmake --install` (cmake/libmonkey.cmake): install monkey.pc for
# the prefix installed to, and make the new libmonkey.so.0 known to the
# dynamic linker, so that a program built with `pkg-config --libs monkey`
# runs without LD_LIBRARY_PATH.
#
#   LIBDIR a directory the dynamic linker searches (MK_LD_DIRS)
#          monkey.pc as it is; then, installing for real (no DESTDIR) as
#          root on the machine built for, `ldconfig` updates its cache
#   any other LIBDIR
#          monkey.pc with -Wl,-rpath,${libdir} in Libs
#
# Set by the caller: MK_LIBDIR (CMAKE_INSTALL_LIBDIR), MK_LD_DIRS, MK_PC_DIR
# (where the two generated monkey.pc are), MK_CROSSCOMPILING.
if(IS_ABSOLUTE "${MK_LIBDIR}")
  set(libdir "${MK_LIBDIR}")
else()
  set(libdir "${CMAKE_INSTALL_PREFIX}/${MK_LIBDIR}")
endif()
string(REGEX REPLACE "/+$" "" libdir "${libdir}")
string(REGEX REPLACE "/+" "/" libdir "${libdir}")
set(searched OFF)
foreach(d IN LISTS MK_LD_DIRS)
  string(REGEX REPLACE "/+$" "" d "${d}")
  if(libdir STREQUAL d)
    set(searched ON)
  endif()
endforeach()
if(searched)
  set(pc "${MK_PC_DIR}/monkey.pc")
else()
  set(pc "${MK_PC_DIR}/rpath/monkey.pc")
  message(STATUS "monkey.pc: ${libdir} is not searched by the dynamic linker: "
                 "-Wl,-rpath,\${libdir} in Libs")
endif()
file(INSTALL DESTINATION "${libdir}/pkgconfig" TYPE FILE FILES "${pc}")

if(searched AND "$ENV{DESTDIR}" STREQUAL "" AND NOT MK_CROSSCOMPILING)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_program(MK_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
  if(uid STREQUAL "0" AND MK_LDCONFIG)
    message(STATUS "Running ldconfig: ${libdir}/libmonkey.so.0 for the dynamic linker")
    execute_process(COMMAND ${MK_LDCONFIG} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(WARNING "ldconfig failed (${rc}): run it, or programs will not find libmonkey.so.0")
    endif()
  else()
    message(STATUS "Not root: run ldconfig as root so that programs find ${libdir}/libmonkey.so.0")
  endif()
endif()
