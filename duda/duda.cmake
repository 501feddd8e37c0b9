# duda/: the Duda web service framework (docs/duda.md). Included by the
# top-level CMakeLists.txt when MK_DUDA is on (not in a static build: a
# static binary cannot load shared objects).
#
#   build/plugins/monkey-duda.so   the plugin (Load it in plugins.load)
#   build/bin/duda                 the helper, for services built against this tree
#                                  (installed with its manual page, man/duda.1)
#   include/duda/duda.h            the services' header (installed with the helper)
#   build/duda-packages/NAME.dpkg  the packages (duda/packages/), PackagesRoot of `duda -w`
#   build/duda-packages/include/duda/packages/NAME.h   their headers, for services
#   build/duda-services/           ServicesRoot of conf/plugins/duda.conf (make run), empty
#
# Installed: the plugin, the packages (MK_DUDA_PACKAGESDIR), the helper, the
# headers, an empty MK_DUDA_SERVICESDIR for the system server's services, and
# plugins/duda.conf naming both (cmake/install-conf.cmake; docs/packaging.md).

# ---- Libraries: what the plugin and the packages of the tree share -------------
# duda_library(NAME SOURCES src... [LIBS lib...] [INCLUDES dir...]) makes the
# static library duda-NAME of src (paths from the top of the tree), whose
# header is beside its first source. It is how code is shared between the
# plugin and a package, or between two packages: a package's own SOURCES are
# in its folder (duda_package() refuses others), and the plugin's other files
# are out of its reach (duda_internal.h does not compile in a package). Each
# shared object that names the library in LIBS gets its own copy, with its own
# statics, hidden as the rest of it (position-independent, as every target).
function(duda_library name)
  cmake_parse_arguments(LIB "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  list(TRANSFORM LIB_SOURCES PREPEND ${CMAKE_SOURCE_DIR}/)
  list(GET LIB_SOURCES 0 first)
  get_filename_component(dir ${first} DIRECTORY)
  add_library(duda-${name} STATIC ${LIB_SOURCES})
  target_include_directories(duda-${name} PUBLIC ${dir} ${LIB_INCLUDES})
  target_link_libraries(duda-${name} PUBLIC ${LIB_LIBS})
  set_target_properties(duda-${name} PROPERTIES C_VISIBILITY_PRESET hidden)
endfunction()

# hiredis (libhiredis-dev), optional: the Redis session store ([DUDA] SessionStore
# redis://...) and the redis package. Without it the only store is memory.
find_path(HIREDIS_INCLUDE_DIR hiredis/async.h)
find_library(HIREDIS_LIBRARY hiredis)
if(HIREDIS_INCLUDE_DIR AND HIREDIS_LIBRARY)
  set(MK_DUDA_HIREDIS ON)
else()
  set(MK_DUDA_HIREDIS OFF)
  message(STATUS "duda: no hiredis (libhiredis-dev): no Redis session store, no redis package")
endif()

# session_parse.h: the redis:// addresses of SessionStore and redis->connect, and
# the Cookie pairs (pure; unit tested and fuzzed alone).
duda_library(session-parse SOURCES duda/session_parse.c)
# redis_loop.h: a hiredis connection on a worker's loop, with reconnection: the
# Redis session store's and the redis package's.
if(MK_DUDA_HIREDIS)
  duda_library(redis-loop SOURCES duda/redis_loop.c LIBS ${HIREDIS_LIBRARY}
               INCLUDES ${HIREDIS_INCLUDE_DIR})
endif()

# ---- The plugin -----------------------------------------------------------------
add_library(
  plugin-duda MODULE
  # the plugin, its services and packages
  duda/duda.c duda/service.c duda/package.c
  # a request's life, and the objects of the service API (docs/duda.md)
  duda/request.c duda/response.c duda/socket.c duda/router_object.c duda/param.c
  duda/qs_object.c duda/cookie.c duda/session.c duda/gc.c duda/static.c duda/global.c
  duda/worker.c duda/event.c duda/console.c duda/logger.c duda/data.c duda/conf.c duda/fconf.c
  duda/xtime.c
  # pure parts, unit tested alone (qs.c fuzzed too)
  duda/router.c duda/qs.c)
target_include_directories(plugin-duda PRIVATE include)
target_link_libraries(plugin-duda PRIVATE Threads::Threads ${CMAKE_DL_LIBS} duda-session-parse)
if(MK_DUDA_HIREDIS)
  target_sources(plugin-duda PRIVATE duda/session_redis.c)
  target_compile_definitions(plugin-duda PRIVATE DUDA_HAVE_HIREDIS)
  target_link_libraries(plugin-duda PRIVATE duda-redis-loop)
endif()
set_target_properties(plugin-duda PROPERTIES PREFIX "monkey-" OUTPUT_NAME duda)
install(TARGETS plugin-duda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/monkey/plugins)
install(DIRECTORY include/duda DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING
        PATTERN "*.h")

# ---- Packages -----------------------------------------------------------------
# duda_package(NAME SOURCES src... [HEADER h] [LIBS lib...] [INCLUDES dir...]
#              [TESTS test.c... TEST_SOURCES src...])
# builds duda/packages/NAME/ (SOURCES and TEST_SOURCES are in that folder; LIBS
# may name duda_library() ones) into build/duda-packages/NAME.dpkg, copies its
# public header (default duda/packages/NAME/NAME.h) to
# build/duda-packages/include/duda/packages/NAME.h and installs both
# (LIBDIR/monkey/duda-packages, INCLUDEDIR/duda/packages). TESTS are cmocka
# unit tests of the package's pure parts (in NAME/tests/, linked with
# TEST_SOURCES and LIBS), run by ctest. Each package's
# duda/packages/NAME/package.cmake is one call of it, behind a check of the
# libraries it needs: without them the package (and its tests) is left out.
set(DUDA_PACKAGES_DIR ${CMAKE_BINARY_DIR}/duda-packages)
set(DUDA_PACKAGES_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/monkey/duda-packages)
set(MK_DUDA_PACKAGESDIR ${CMAKE_INSTALL_FULL_LIBDIR}/monkey/duda-packages)
# The installed ServicesRoot: services the administrator builds and deploys
# are variable data of the server, not files of a package (/usr stays the
# package manager's): LOCALSTATEDIR/lib, as Debian's servers keep deployed
# applications (docs/packaging.md).
set(MK_DUDA_SERVICESDIR ${CMAKE_INSTALL_FULL_LOCALSTATEDIR}/lib/monkey/duda/services)
install(DIRECTORY DESTINATION ${MK_DUDA_SERVICESDIR})
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/duda-services)
file(MAKE_DIRECTORY ${DUDA_PACKAGES_DIR}/include/duda/packages)
add_custom_target(duda-packages ALL)
function(duda_package name)
  cmake_parse_arguments(PKG "" "HEADER" "SOURCES;LIBS;INCLUDES;TESTS;TEST_SOURCES" ${ARGN})
  set(dir ${CMAKE_SOURCE_DIR}/duda/packages/${name})
  foreach(src ${PKG_SOURCES} ${PKG_TEST_SOURCES})
    if(src MATCHES "(^|/)\\.\\.(/|$)" OR IS_ABSOLUTE ${src})
      message(FATAL_ERROR "duda_package(${name}): ${src} is not in duda/packages/${name}/; "
                          "code a package shares is a library (duda_library)")
    endif()
  endforeach()
  list(TRANSFORM PKG_SOURCES PREPEND ${dir}/)
  if(NOT PKG_HEADER)
    set(PKG_HEADER ${name}.h)
  endif()
  add_library(duda-pkg-${name} MODULE ${PKG_SOURCES})
  target_include_directories(duda-pkg-${name} PRIVATE include ${DUDA_PACKAGES_DIR}/include
                                                      ${PKG_INCLUDES})
  target_link_libraries(duda-pkg-${name} PRIVATE Threads::Threads ${PKG_LIBS})
  # duda_internal.h, the plugin's, refuses to compile here
  target_compile_definitions(duda-pkg-${name} PRIVATE DUDA_PACKAGE_BUILD)
  set_target_properties(
    duda-pkg-${name}
    PROPERTIES PREFIX "" OUTPUT_NAME ${name} SUFFIX ".dpkg" C_VISIBILITY_PRESET hidden
               LIBRARY_OUTPUT_DIRECTORY ${DUDA_PACKAGES_DIR})
  configure_file(${dir}/${PKG_HEADER} ${DUDA_PACKAGES_DIR}/include/duda/packages/${name}.h
                 COPYONLY)
  add_dependencies(duda-packages duda-pkg-${name})
  install(TARGETS duda-pkg-${name} LIBRARY DESTINATION ${DUDA_PACKAGES_INSTALL_DIR})
  install(FILES ${dir}/${PKG_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duda/packages
          RENAME ${name}.h)
  if(NOT MK_TESTS OR NOT CMOCKA_LIB OR NOT CMOCKA_INCLUDE)
    return()
  endif()
  list(TRANSFORM PKG_TEST_SOURCES PREPEND ${dir}/)
  foreach(t ${PKG_TESTS})
    get_filename_component(tname ${t} NAME_WE)
    add_executable(${tname} ${dir}/tests/${t} ${PKG_TEST_SOURCES})
    target_include_directories(${tname} PRIVATE ${dir} ${CMAKE_SOURCE_DIR}/include
                                                ${CMOCKA_INCLUDE} ${PKG_INCLUDES})
    target_link_libraries(${tname} PRIVATE ${CMOCKA_LIB} ${PKG_LIBS})
    set_target_properties(${tname} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    add_test(NAME ${tname} COMMAND ${tname})
  endforeach()
endfunction()
if(MK_TESTS)
  find_library(CMOCKA_LIB cmocka)
  find_path(CMOCKA_INCLUDE cmocka.h)
  # The seam of duda_library(): the plugin's header, compiled as a package
  # compiles (DUDA_PACKAGE_BUILD), stops with its #error.
  add_test(NAME duda_internal_refused_in_packages
           COMMAND ${CMAKE_C_COMPILER} -fsyntax-only -DDUDA_PACKAGE_BUILD
                   -I${CMAKE_SOURCE_DIR}/include -x c ${CMAKE_SOURCE_DIR}/duda/duda_internal.h)
  set_tests_properties(duda_internal_refused_in_packages
                       PROPERTIES PASS_REGULAR_EXPRESSION "duda_internal.h is the plugin's")
endif()
file(GLOB DUDA_PACKAGE_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/duda/packages/*/package.cmake)
list(SORT DUDA_PACKAGE_FILES)
foreach(f ${DUDA_PACKAGE_FILES})
  include(${f})
endforeach()

# The helper: the same script, with the paths of the tree or of the installation.
set(DUDA_MONKEY ${CMAKE_BINARY_DIR}/bin/monkey)
set(DUDA_PLUGIN ${CMAKE_BINARY_DIR}/plugins/monkey-duda.so)
set(DUDA_INCLUDE ${CMAKE_SOURCE_DIR}/include)
set(DUDA_PACKAGES ${DUDA_PACKAGES_DIR})
set(DUDA_PACKAGES_INCLUDE ${DUDA_PACKAGES_DIR}/include)
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
set(DUDA_PACKAGES ${MK_DUDA_PACKAGESDIR})
set(DUDA_PACKAGES_INCLUDE ${CMAKE_INSTALL_FULL_INCLUDEDIR})
set(DUDA_CFLAGS "")
configure_file(tools/duda.in ${CMAKE_BINARY_DIR}/install-bin/duda @ONLY)
install(PROGRAMS ${CMAKE_BINARY_DIR}/install-bin/duda DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES man/duda.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
