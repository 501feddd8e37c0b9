# libmonkey.so: the library API (include/monkey/monkey.h, mk_lib.h) as a
# shared object, for programs that embed the server (docs/library.md).
# Included by CMakeLists.txt once monkeylib exists.
#
# It is monkeylib whole (the same objects as the static library and the
# monkey binary), linked with a version script (cmake/libmonkey.map) that
# exports mk_server_* and mk_http_* and nothing else; the server's own
# functions are hidden already (-fvisibility=hidden; the public headers
# mark their declarations default). SONAME libmonkey.so.MAJOR.
#
# monkey.pc (cmake/monkey.pc.in) finds it through pkg-config; its prefix is
# relative to the .pc file, so an installation moved with DESTDIR or
# `cmake --install --prefix` still builds against itself. A library built
# with MK_SANITIZE asks its users to link the sanitizer runtimes too.
#
# A program built with `pkg-config --libs monkey` runs as it is, without
# LD_LIBRARY_PATH (docs/library.md, "Building and linking"): when the
# installed LIBDIR is a directory the dynamic linker searches (its trusted
# directories and those of /etc/ld.so.conf: /usr/lib/<multiarch>,
# /usr/local/lib ...), the installation runs ldconfig so that its cache
# knows the new library (unless DESTDIR stages it, or not as root); any
# other LIBDIR (a prefix such as /opt/monkey) gets an rpath in the
# installed monkey.pc's Libs (-Wl,-rpath,${libdir}). Which one is decided
# at install time, for the prefix installed to (cmake/libmonkey-install.cmake).
#
# MK_LIBMONKEY=OFF (cmake/profile.cmake) builds neither, and leaves library
# mode (server/plugin/lib.c) out of the server.
if(MK_STATIC OR NOT MK_LIBMONKEY)
  return() # a static (musl) build makes no shared objects
endif()

# CMake wants a source of its own: an empty one, generated.
file(WRITE ${CMAKE_BINARY_DIR}/generated/libmonkey.c
     "/* libmonkey.so is monkeylib whole: see cmake/libmonkey.cmake */\n")
add_library(monkeyshared SHARED ${CMAKE_BINARY_DIR}/generated/libmonkey.c)
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.24)
  target_link_libraries(monkeyshared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,monkeylib>")
else() # the same by hand, for the CMake 3.18 the build allows
  target_link_libraries(monkeyshared PRIVATE -Wl,--whole-archive monkeylib -Wl,--no-whole-archive)
endif()
set(MK_LIBMONKEY_MAP ${CMAKE_SOURCE_DIR}/cmake/libmonkey.map)
target_link_options(monkeyshared PRIVATE "-Wl,--version-script=${MK_LIBMONKEY_MAP}"
                    -Wl,--no-undefined)
set_target_properties(monkeyshared PROPERTIES
  OUTPUT_NAME monkey
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
  LINK_DEPENDS ${MK_LIBMONKEY_MAP})

# monkey.pc
file(RELATIVE_PATH MK_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" MK_PC_TO_PREFIX "${MK_PC_TO_PREFIX}")
# No Requires.private: libmonkey.so links nghttp2, libbrotlienc and zlib
# itself, and no static libmonkey is installed; naming them would make
# `pkg-config --cflags monkey` fail wherever their .pc files (their -dev
# packages) are not installed.
set(MK_PC_LIBS_EXTRA "")
if(MK_SANITIZE)
  set(MK_PC_LIBS_EXTRA "-fsanitize=address,undefined")
endif()
# Two of them: without and with the rpath; the install picks one.
set(MK_PC_RPATH "")
configure_file(${CMAKE_SOURCE_DIR}/cmake/monkey.pc.in ${CMAKE_BINARY_DIR}/lib/pkgconfig/monkey.pc
               @ONLY)
set(MK_PC_RPATH "-Wl,-rpath,\${libdir} ")
configure_file(${CMAKE_SOURCE_DIR}/cmake/monkey.pc.in
               ${CMAKE_BINARY_DIR}/lib/pkgconfig/rpath/monkey.pc @ONLY)

# The directories the dynamic linker searches on this machine: its trusted
# ones and those /etc/ld.so.conf lists (with its include lines). A cross
# build knows only the trusted ones of the target.
set(MK_LD_DIRS /lib /usr/lib /lib64 /usr/lib64)
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(APPEND MK_LD_DIRS /lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
endif()
function(mk_ld_conf file)
  if(NOT EXISTS "${file}")
    return()
  endif()
  file(STRINGS "${file}" lines)
  foreach(l IN LISTS lines)
    string(REGEX REPLACE "#.*" "" l "${l}")
    string(STRIP "${l}" l)
    if(l MATCHES "^include[ \t]+(.+)$")
      file(GLOB incs "${CMAKE_MATCH_1}")
      list(SORT incs)
      foreach(i IN LISTS incs)
        mk_ld_conf("${i}")
      endforeach()
    elseif(l MATCHES "^/")
      set_property(GLOBAL APPEND PROPERTY MK_LD_CONF_DIRS "${l}")
    endif()
  endforeach()
endfunction()
if(NOT CMAKE_CROSSCOMPILING)
  mk_ld_conf(/etc/ld.so.conf)
  get_property(mk_conf_dirs GLOBAL PROPERTY MK_LD_CONF_DIRS)
  list(APPEND MK_LD_DIRS ${mk_conf_dirs})
endif()

# COMPONENT libmonkey: the library, monkey.pc and the headers (install.cmake),
# alone with `cmake --install BUILD --component libmonkey [--prefix DIR]`.
install(TARGETS monkeyshared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libmonkey
        NAMELINK_COMPONENT libmonkey)
install(CODE "set(MK_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
set(MK_LD_DIRS \"${MK_LD_DIRS}\")
set(MK_PC_DIR \"${CMAKE_BINARY_DIR}/lib/pkgconfig\")
set(MK_CROSSCOMPILING \"${CMAKE_CROSSCOMPILING}\")
include(\"${CMAKE_SOURCE_DIR}/cmake/libmonkey-install.cmake\")" COMPONENT libmonkey)
