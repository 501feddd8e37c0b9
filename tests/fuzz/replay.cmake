# The fuzz targets' corpora replayed in every unit-test build (tests/fuzz/README.md,
# "Replaying the corpus"): each target's source is built with the build's own
# compiler and flags (gcc; build-asan/ adds ASan and UBSan) against
# tests/fuzz/replay.c, a main() that feeds every file of
# tests/fuzz/corpus/NAME/ to LLVMFuzzerTestOneInput, and ctest runs it as
# fuzz_replay_NAME. A target whose code or libraries this build leaves out is
# left out, as in tests/fuzz/CMakeLists.txt.
#
# mk_fuzz_replay(NAME [SOURCES src...] [LIBS lib...] [INCLUDES dir...])
function(mk_fuzz_replay name)
  cmake_parse_arguments(R "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(fuzz ${CMAKE_SOURCE_DIR}/tests/fuzz)
  add_executable(replay_${name} ${fuzz}/fuzz_${name}.c ${fuzz}/replay.c ${R_SOURCES})
  target_include_directories(replay_${name} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/include
                             ${R_INCLUDES})
  target_link_libraries(replay_${name} PRIVATE ${R_LIBS})
  set_target_properties(replay_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests/fuzz-replay)
  add_test(NAME fuzz_replay_${name} COMMAND replay_${name} ${fuzz}/corpus/${name})
endfunction()

# The pure parsers of the core and the server: in monkeylib (the
# supervisor's, the PROXY header's and the real-IP walk's when this build
# has them: MK_SUPERVISOR, MK_REALIP, MK_REQID).
foreach(name http_request path fields config accept_encoding priority route util)
  mk_fuzz_replay(${name} LIBS monkeylib)
endforeach()
if(MK_SUPERVISOR)
  mk_fuzz_replay(supervisor LIBS monkeylib)
endif()
if(MK_RULES)
  mk_fuzz_replay(rules LIBS monkeylib)
  mk_fuzz_replay(ratelimit LIBS monkeylib)
endif()
if(MK_REALIP)
  mk_fuzz_replay(proxy_protocol LIBS monkeylib)
  mk_fuzz_replay(realip LIBS monkeylib)
endif()
if(MK_REQID)
  mk_fuzz_replay(reqid LIBS monkeylib)
endif()

# h2c upgrades: pure, in monkeylib only when this build has HTTP/2.
mk_fuzz_replay(h2_upgrade SOURCES ${CMAKE_SOURCE_DIR}/server/proto/h2_upgrade.c LIBS monkeylib)
target_compile_definitions(replay_h2_upgrade PRIVATE MK_HAVE_H2)

# The gateway plugins' parsers, with no dependency.
mk_fuzz_replay(gw_head SOURCES ${CMAKE_SOURCE_DIR}/plugins/gateway/gw_head.c)
mk_fuzz_replay(fcgi SOURCES ${CMAKE_SOURCE_DIR}/plugins/fastcgi/fcgi_proto.c)
mk_fuzz_replay(px_http SOURCES ${CMAKE_SOURCE_DIR}/plugins/proxy/px_http.c)
mk_fuzz_replay(px_fields SOURCES ${CMAKE_SOURCE_DIR}/plugins/proxy/px_fields.c
               ${CMAKE_SOURCE_DIR}/plugins/proxy/px_http.c)

# What the tls plugin reads from a client without OpenSSL: built with or without it.
mk_fuzz_replay(tls SOURCES ${CMAKE_SOURCE_DIR}/plugins/tls/tls_parse.c)
# What the ACME client reads from a CA: pure, built with or without ACME.
mk_fuzz_replay(acme SOURCES ${CMAKE_SOURCE_DIR}/plugins/tls/tls_acme_parse.c)

# The example FastCGI responder's parsers (the example is included by the target).
mk_fuzz_replay(fcgi_responder)

# The auth plugin's password file.
mk_fuzz_replay(auth_users SOURCES ${CMAKE_SOURCE_DIR}/plugins/auth/auth_users.c)

# The logger's formats and lines, through the target's own struct mk_api.
mk_fuzz_replay(logger SOURCES ${CMAKE_SOURCE_DIR}/plugins/logger/format.c)

# Duda's parsers, when this build has Duda, and its packages' when their
# libraries were found (the packages' targets exist).
if(TARGET plugin-duda)
  mk_fuzz_replay(duda_session SOURCES ${CMAKE_SOURCE_DIR}/duda/session_parse.c)
  mk_fuzz_replay(duda_qs SOURCES ${CMAKE_SOURCE_DIR}/duda/qs.c)
  mk_fuzz_replay(ws SOURCES ${CMAKE_SOURCE_DIR}/duda/packages/websocket/ws_proto.c)
  if(TARGET duda-pkg-json AND TARGET duda-pkg-sqlite)
    mk_fuzz_replay(duda_json
      SOURCES ${CMAKE_SOURCE_DIR}/duda/packages/json/json_core.c
              ${CMAKE_SOURCE_DIR}/duda/packages/sqlite/sqlite_core.c
      LIBS ${CJSON_LIB} ${SQLITE3_LIB} m Threads::Threads
      INCLUDES ${CJSON_INCLUDE} ${SQLITE3_INCLUDE})
  endif()
  if(TARGET duda-pkg-base64)
    mk_fuzz_replay(duda_base64 SOURCES ${CMAKE_SOURCE_DIR}/duda/packages/base64/b64.c
                   LIBS OpenSSL::Crypto)
  endif()
endif()

# HTTP/2 frames into a whole server (the loopback harness), when this build has HTTP/2.
if(MK_H2 AND NGHTTP2_FOUND)
  mk_fuzz_replay(h2 SOURCES ${CMAKE_SOURCE_DIR}/tests/unit/server/loopback.c LIBS monkeylib
                 INCLUDES ${CMAKE_SOURCE_DIR}/tests/unit/server)
endif()
