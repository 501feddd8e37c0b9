# plugins/gateway: the gateway core shared by plugins/cgi and
# plugins/fastcgi (the gateway job, header block parser, meta-variables).
# Not a plugin: each gateway plugin compiles these sources into itself.
# Included once.
include_guard(GLOBAL)
set(MK_GW_DIR ${CMAKE_SOURCE_DIR}/plugins/gateway)
set(MK_GW_SOURCES ${MK_GW_DIR}/gw.c ${MK_GW_DIR}/gw_head.c ${MK_GW_DIR}/gw_job.c
                   ${MK_GW_DIR}/gw_log.c ${MK_GW_DIR}/gw_map.c ${MK_GW_DIR}/gw_spool.c
                   ${MK_GW_DIR}/gw_metrics.c)

if(MK_TESTS)
  find_library(CMOCKA_LIB cmocka)
  find_path(CMOCKA_INCLUDE cmocka.h)
endif()
if(MK_TESTS AND CMOCKA_LIB AND CMOCKA_INCLUDE)
  add_executable(test_gw_head ${MK_GW_DIR}/tests/test_gw_head.c ${MK_GW_DIR}/gw_head.c)
  target_include_directories(test_gw_head PRIVATE ${MK_GW_DIR} ${CMAKE_SOURCE_DIR}/include
                             ${CMOCKA_INCLUDE})
  target_link_libraries(test_gw_head PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_gw_head PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_gw_head COMMAND test_gw_head)
  add_executable(test_gw_stderr_spool ${MK_GW_DIR}/tests/test_gw_stderr_spool.c
                 ${MK_GW_DIR}/gw_log.c ${MK_GW_DIR}/gw_spool.c)
  target_include_directories(test_gw_stderr_spool PRIVATE ${MK_GW_DIR} ${CMAKE_SOURCE_DIR}/include
                             ${CMOCKA_INCLUDE})
  target_link_libraries(test_gw_stderr_spool PRIVATE ${CMOCKA_LIB})
  set_target_properties(test_gw_stderr_spool PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME test_gw_stderr_spool COMMAND test_gw_stderr_spool)
endif()
