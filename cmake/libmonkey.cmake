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
# MK_LIBMONKEY=OFF builds neither (the Debian packages: docs/packaging.md).
option(MK_LIBMONKEY "build libmonkey.so and monkey.pc (the library API as a shared object)" ON)
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
set(MK_PC_REQUIRES_PRIVATE "")
if(MK_H2 AND NGHTTP2_FOUND)
  list(APPEND MK_PC_REQUIRES_PRIVATE "libnghttp2")
endif()
if(MK_BROTLI AND BROTLIENC_FOUND)
  list(APPEND MK_PC_REQUIRES_PRIVATE "libbrotlienc")
endif()
if(MK_ZLIB AND ZLIB_FOUND)
  list(APPEND MK_PC_REQUIRES_PRIVATE "zlib")
endif()
string(REPLACE ";" ", " MK_PC_REQUIRES_PRIVATE "${MK_PC_REQUIRES_PRIVATE}")
set(MK_PC_LIBS_EXTRA "")
if(MK_SANITIZE)
  set(MK_PC_LIBS_EXTRA "-fsanitize=address,undefined")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/monkey.pc.in ${CMAKE_BINARY_DIR}/lib/pkgconfig/monkey.pc
               @ONLY)

install(TARGETS monkeyshared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_BINARY_DIR}/lib/pkgconfig/monkey.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
