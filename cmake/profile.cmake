# Profiles, the parts of the server that compile out, and the size flags
# (docs/packaging.md, "The embedded profile"). Included by CMakeLists.txt
# after cmake/auto.cmake, before anything reads the options.
#
#   MK_PROFILE     a set of defaults: empty (the whole server) or embedded
#                  (the static-file server of a small system: see below)
#   MK_SUPERVISOR  the supervisor: Supervisor On, monkey -S (server/process/supervisor.c,
#                  supervisor_msg.c); needs MK_SYSTEMD, whose socket passing
#                  hands its sockets to the child
#   MK_SYSTEMD     readiness notification and socket activation
#                  (server/runtime/systemd.c) and the installed systemd units
#   MK_COMPRESS    compression on the fly: the site keys Compress... and the
#                  server key CompressCache (server/static/static_compress.c,
#                  compress.c, compress_cache.c); precompressed variants
#                  (Precompressed) stay. MK_BROTLI and MK_ZLIB need it
#   MK_FAIR        Balancing fair: the acceptor thread (server/runtime/listener.c)
#   MK_REALIP      the client's address behind a balancer: Listen ... proxy_protocol
#                  and RealIPFrom, RealIPHeader (server/http/proxy_protocol.c,
#                  realip.c)
#   MK_RULES       request rules: the [RULE] sections of site files
#                  (server/http/rules.c, config/conf_rules.c,
#                  request/request_rules.c), their RateLimit
#                  (core/ratelimit.c, http/ratelimit.c, config/conf_ratelimit.c,
#                  request/request_limit.c) and MaxConnectionsPerClient
#                  (core/keycount.c); MK_PCRE2 needs it
#   MK_REQID       request IDs and W3C trace context: RequestId, RequestIdHeader,
#                  RequestIdFrom, RequestIdEcho, TraceContext (server/http/reqid.c,
#                  server/request/request_trace.c)
#   MK_METRICS     request counters by site, method, status and protocol, the
#                  histograms of the time to the first and last byte
#                  (server/request/metrics.c) and the control plugin's
#                  Prometheus endpoint, MetricsPath (plugins/control/metrics.c);
#                  the request and byte totals of the status stay
#   MK_LIBMONKEY   library mode: the program's handlers of mk_lib.h
#                  (server/plugin/lib.c), libmonkey.so and monkey.pc
#   MK_SMALL       build for size: link-time optimisation, unused functions
#                  and data collected, no unwind tables, packed relocations
#
# A part left out is compiled out whole (its code, its fields, its calls);
# what a plugin reaches of it through struct mk_api answers "none" (the
# ABI keeps its entries), and a configuration that asks for it is refused
# with the file and line: "monkey.conf:12: Supervisor On: this server was
# built without the supervisor".
#
# Like the optional features of auto.cmake, every value here is the
# build's until given: each configure derives it from MK_PROFILE again, and
# -DMK_FAIR=ON (or OFF) keeps it from then on (-DMK_FAIR=auto gives it
# back). So `-DMK_PROFILE=embedded -DMK_TLS=ON -DMK_SHARED_PLUGINS=tls` is
# the embedded profile with TLS as a loadable plugin.
#
# The embedded profile: MinSizeRel with MK_SMALL; the logger, access,
# dirlisting and control plugins built in and none as shared objects; no
# HTTP/2, TLS, compression on the fly, Duda, library mode, supervisor,
# systemd support, fair balancing, client's address behind a balancer (PROXY
# protocol, RealIPFrom), request rules, request IDs and trace context or
# metrics; no unit tests. `make embedded` builds it
# into build-embedded/, `make static` the same linked statically with musl,
# and CMakePresets.json has it as the preset "embedded" for a cross build
# with another toolchain (cmake --preset embedded -DCMAKE_TOOLCHAIN_FILE=...).

set(MK_PROFILE "" CACHE STRING "a set of defaults: empty (the whole server) or embedded")
set_property(CACHE MK_PROFILE PROPERTY STRINGS "" embedded)
if(NOT MK_PROFILE STREQUAL "" AND NOT MK_PROFILE STREQUAL "embedded")
  message(FATAL_ERROR "MK_PROFILE=${MK_PROFILE}: expected embedded, or empty for the whole server")
endif()
set(MK_EMBEDDED OFF)
if(MK_PROFILE STREQUAL "embedded")
  set(MK_EMBEDDED ON)
endif()

# The features of auto.cmake the profile leaves out, whatever is installed
# (mk_feature reads this list).
set(MK_PROFILE_LEAVES_OUT "")
if(MK_EMBEDDED)
  set(MK_PROFILE_LEAVES_OUT MK_TLS MK_ACME MK_H2 MK_BROTLI MK_ZLIB MK_PCRE2)
  if(NOT CMAKE_BUILD_TYPE)
    set(CMAKE_BUILD_TYPE MinSizeRel)
  endif()
endif()

# mk_part(VAR DEFAULT DOC): a part of the server that compiles out, on by
# DEFAULT unless given. MK_WHY_<VAR> says why, for BUILD/features.txt.
function(mk_part var default doc)
  mk_auto_cache(${var} BOOL "${default}" "${doc}")
  if(${var} AND MK_FROM_${var} STREQUAL "user")
    set(why "${var}=ON given")
  elseif(${var})
    set(why "built in")
  elseif(MK_FROM_${var} STREQUAL "user")
    set(why "${var}=OFF given")
  else()
    set(why "left out by MK_PROFILE=${MK_PROFILE}")
  endif()
  set(MK_WHY_${var} "${why}" PARENT_SCOPE)
endfunction()

set(mk_whole ON)
if(MK_EMBEDDED)
  set(mk_whole OFF)
endif()
mk_part(MK_SYSTEMD ${mk_whole} "readiness notification, socket activation and the systemd units")
mk_part(MK_SUPERVISOR ${mk_whole} "the supervisor (Supervisor On, monkey -S); needs MK_SYSTEMD")
if(MK_SUPERVISOR AND NOT MK_SYSTEMD)
  if(MK_FROM_MK_SUPERVISOR STREQUAL "user")
    message(FATAL_ERROR "MK_SUPERVISOR=ON needs MK_SYSTEMD=ON: the supervisor hands its sockets "
                        "to the server as socket activation does")
  endif()
  mk_auto_cache(MK_SUPERVISOR BOOL OFF "the supervisor (Supervisor On, monkey -S); needs MK_SYSTEMD")
  set(MK_WHY_MK_SUPERVISOR "MK_SYSTEMD=OFF (the supervisor passes its sockets through it)")
endif()
mk_part(MK_COMPRESS ${mk_whole} "compression of static files on the fly (Compress)")
mk_part(MK_FAIR ${mk_whole} "Balancing fair: the acceptor thread")
mk_part(MK_REALIP ${mk_whole}
        "the client's address behind a balancer: PROXY protocol and RealIPFrom")
mk_part(MK_RULES ${mk_whole} "request rules: [RULE] sections (Redirect, Return, Rewrite, RateLimit), MaxConnectionsPerClient")
mk_part(MK_REQID ${mk_whole} "request IDs and W3C trace context (RequestId, TraceContext)")
mk_part(MK_METRICS ${mk_whole}
        "request counters by site and class, latency histograms, the control plugin's MetricsPath")
# Library mode has nothing to offer a static binary (no libmonkey.so).
set(mk_lib ${mk_whole})
if(MK_STATIC)
  set(mk_lib OFF)
endif()
mk_part(MK_LIBMONKEY ${mk_lib} "library mode: mk_lib.h (server/plugin/lib.c), libmonkey.so and monkey.pc")
if(MK_STATIC AND NOT MK_FROM_MK_LIBMONKEY STREQUAL "user")
  set(MK_WHY_MK_LIBMONKEY "static build")
endif()
mk_part(MK_DUDA ${mk_whole} "the Duda framework (duda/, tools/duda)")
mk_part(MK_TESTS ${mk_whole} "the unit tests (cmocka)")
mk_part(MK_SMALL ${MK_EMBEDDED}
        "build for size: LTO, sections collected, no unwind tables, packed relocations")
if(NOT MK_FROM_MK_SMALL STREQUAL "user")
  if(MK_SMALL)
    set(MK_WHY_MK_SMALL "MK_PROFILE=embedded")
  else()
    set(MK_WHY_MK_SMALL "built for speed (MK_SMALL is on in the embedded profile)")
  endif()
endif()

if(MK_EMBEDDED)
  mk_auto_cache(MK_BUILTIN_PLUGINS STRING "logger;access;dirlisting;control"
                "plugins built into the binary")
  mk_auto_cache(MK_SHARED_PLUGINS STRING "none"
                "plugins built as shared objects (all: every plugin; none)")
else()
  mk_auto_cache(MK_BUILTIN_PLUGINS STRING "skeleton" "plugins built into the binary")
  mk_auto_cache(MK_SHARED_PLUGINS STRING "all"
                "plugins built as shared objects (all: every plugin; none)")
endif()

# ---- building for size ---------------------------------------------------------
# Every build (docs/packaging.md, "What each part costs"): each function and
# object in a section of its own, so that the linker drops those nothing
# calls; identical constants merged (the digit pairs of mk_util.h's inline
# mk_u64_dec are one copy per file otherwise); relative relocations packed
# (DT_RELR, glibc 2.36 and later: 8 KB of .rela.dyn in the default build).
# None of them costs a cycle at run time.
#
# MK_SMALL adds: link-time optimisation (with MinSizeRel's -Os, the
# profile's build type), no .eh_frame (C needs no unwind tables: the
# server neither throws nor unwinds, and a debugger reads the unstripped
# binary's DWARF), no page padding between the code and the read-only data,
# calls to the C library through the GOT without PLT stubs (full RELRO).
# The other builds keep their unwind tables: perf, gdb and core dumps walk
# the stack of an -O2 binary without frame pointers with them.
include(CheckCCompilerFlag)
include(CheckLinkerFlag)
add_compile_options(-ffunction-sections -fdata-sections -fmerge-all-constants)
add_link_options(-Wl,--gc-sections)
# mk_link_flag(FLAG): add -Wl,FLAG when the linker takes it without a
# warning (ld for 32-bit ARM ignores -z pack-relative-relocs, and says so).
function(mk_link_flag flag)
  string(MAKE_C_IDENTIFIER "MK_LD_OK_${flag}" var)
  check_linker_flag(C "-Wl,--fatal-warnings,${flag}" ${var})
  if(${var})
    add_link_options(-Wl,${flag})
  endif()
endfunction()
mk_link_flag(-z,pack-relative-relocs)

if(MK_SMALL AND NOT MK_SANITIZE)
  include(CheckIPOSupported)
  add_compile_options(-fno-asynchronous-unwind-tables -fno-unwind-tables)
  add_link_options(-Wl,-O1 -Wl,--as-needed)
  check_c_compiler_flag(-fno-plt MK_HAVE_NO_PLT)
  if(MK_HAVE_NO_PLT)
    add_compile_options(-fno-plt)
    add_link_options(-Wl,-z,now)
  endif()
  mk_link_flag(-z,noseparate-code)
  # A compiler wrapper (musl-gcc for make static) has no gcc-ar of its
  # name, and check_ipo_supported's test project fails for want of one: the
  # host's gcc-ar handles the same LTO objects.
  set(mk_ipo_why "")
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_C_COMPILER_AR)
    find_program(MK_GCC_AR gcc-ar)
    find_program(MK_GCC_RANLIB gcc-ranlib)
    if(MK_GCC_AR AND MK_GCC_RANLIB)
      # The rules project() wrote with the missing tool's name.
      set(CMAKE_C_ARCHIVE_CREATE_IPO "\"${MK_GCC_AR}\" cr <TARGET> <LINK_FLAGS> <OBJECTS>")
      set(CMAKE_C_ARCHIVE_APPEND_IPO "\"${MK_GCC_AR}\" r <TARGET> <LINK_FLAGS> <OBJECTS>")
      set(CMAKE_C_ARCHIVE_FINISH_IPO "\"${MK_GCC_RANLIB}\" <TARGET>")
      set(MK_IPO ON)
    endif()
  endif()
  if(NOT MK_IPO)
    check_ipo_supported(RESULT MK_IPO OUTPUT mk_ipo_why LANGUAGES C)
  endif()
  if(MK_IPO)
    set(CMAKE_INTERPROCEDURAL_OPTIMIZATION ON)
  else()
    message(STATUS "MK_SMALL: no link-time optimisation with this compiler: ${mk_ipo_why}")
  endif()
endif()

# mk_parts_notes(): the parts' lines of BUILD/features.txt.
function(mk_parts_notes)
  if(MK_PROFILE STREQUAL "")
    mk_feature_note(profile none "MK_PROFILE empty: the whole server")
  else()
    mk_feature_note(profile ${MK_PROFILE} "MK_PROFILE=${MK_PROFILE} (cmake/profile.cmake)")
  endif()
  foreach(p supervisor:MK_SUPERVISOR systemd:MK_SYSTEMD compress:MK_COMPRESS fair:MK_FAIR
            realip:MK_REALIP rules:MK_RULES reqid:MK_REQID metrics:MK_METRICS small:MK_SMALL)
    string(REPLACE ":" ";" p "${p}")
    list(GET p 0 name)
    list(GET p 1 var)
    if(${var})
      set(state on)
    else()
      set(state off)
    endif()
    mk_feature_note(${name} ${state} "${MK_WHY_${var}}")
  endforeach()
endfunction()
