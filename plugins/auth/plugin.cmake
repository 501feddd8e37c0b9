# plugins/auth: HTTP Basic authentication. Included by the top-level
# CMakeLists.txt with MK_PLUGIN=auth; see plugins/auth/README.md.
#
# Needs libcrypt (Debian: libcrypt-dev) for crypt_rn and crypt_gensalt_rn.
# Builds the plugin's helper sources into whichever form the plugin takes,
# the monkey-passwd tool, and the plugin's unit test (test_auth_units).
set(MK_AUTH_SOURCES plugins/auth/auth_users.c plugins/auth/auth_digest.c)

if(MK_PLUGIN_SHARED)
  target_sources(plugin-auth PRIVATE ${MK_AUTH_SOURCES})
  target_link_libraries(plugin-auth PRIVATE crypt)
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_AUTH_SOURCES})
  target_link_libraries(monkeylib PUBLIC crypt)
endif()

add_executable(monkey-passwd plugins/auth/monkey-passwd.c plugins/auth/auth_users.c)
target_link_libraries(monkey-passwd PRIVATE crypt)
set_target_properties(monkey-passwd PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

if(MK_TESTS)
  add_executable(test_auth_units plugins/auth/tests/test_auth_units.c ${MK_AUTH_SOURCES})
  target_include_directories(test_auth_units PRIVATE ${CMAKE_SOURCE_DIR}/plugins/auth)
  set_target_properties(test_auth_units PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_auth_units COMMAND test_auth_units)
endif()
