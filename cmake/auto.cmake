# Cache entries that the build computes at each configure unless the user
# chose them: the optional features (what is installed) and the paths
# derived from the install prefix. Included by CMakeLists.txt before any.
#
# A value in CMakeCache.txt is either the build's or the user's, and the
# cache does not say which: option(MK_H2 ... ${NGHTTP2_FOUND}) wrote OFF on
# a first configure made before libnghttp2-dev was installed, and every
# later configure kept that OFF as if the user had asked for it (a build
# without HTTP/2 after `make run` then `make test`). mk_auto_cache()
# remembers it instead, in _MK_FROM_<VAR> (INTERNAL):
#
#   auto   the value is the build's: computed again at every configure
#          (a library installed since is found, a new CMAKE_INSTALL_PREFIX
#          moves the path)
#   user   the value was given with -D<VAR>=... (on any configure) or
#          changed in ccmake/cmake-gui: kept as it is from then on
#
# -D<VAR>=auto gives the value back to the build. A build directory made
# before this file existed has no _MK_FROM_<VAR>: its values are taken as
# the build's (option() cannot tell either), once.

# mk_auto_cache(VAR TYPE VALUE DOC): set the cache entry VAR (BOOL, PATH,
# STRING) to VALUE unless it is the user's; MK_FROM_<VAR> (a normal
# variable) says which it is.
function(mk_auto_cache var type value doc)
  set(from auto)
  if(type STREQUAL "BOOL")
    if(value)
      set(value ON)
    else()
      set(value OFF)
    endif()
  endif()
  if(DEFINED CACHE{${var}})
    get_property(t CACHE ${var} PROPERTY TYPE)
    get_property(h CACHE ${var} PROPERTY HELPSTRING)
    set(cur "$CACHE{${var}}")
    string(TOLOWER "${cur}" lcur)
    if(lcur STREQUAL "auto")
      set(from auto)
    elseif(t STREQUAL "UNINITIALIZED" OR h STREQUAL "No help, variable specified on the command line.")
      set(from user) # -DVAR=... on this configure
    elseif("$CACHE{_MK_FROM_${var}}" STREQUAL "user")
      set(from user)
    elseif(DEFINED CACHE{_MK_AUTO_${var}})
      # The build's value last time: changed since (ccmake) means the user's.
      set(last "$CACHE{_MK_AUTO_${var}}")
      if(type STREQUAL "BOOL")
        if((cur AND NOT last) OR (last AND NOT cur))
          set(from user)
        endif()
      elseif(NOT cur STREQUAL last)
        set(from user)
      endif()
    endif()
    if(from STREQUAL "user")
      set(value "${cur}")
      if(type STREQUAL "BOOL")
        if(cur)
          set(value ON)
        else()
          set(value OFF)
        endif()
      endif()
    elseif(NOT lcur STREQUAL "auto" AND NOT DEFINED CACHE{_MK_AUTO_${var}})
      # A build directory of before: its value was option()'s, taken once as the build's.
      if(type STREQUAL "BOOL" AND ((cur AND NOT value) OR (value AND NOT cur)))
        message(STATUS "${var}: ${cur} in the cache came from an earlier configure, now "
                       "${value} (-D${var}=${cur} keeps ${cur})")
      endif()
    endif()
  endif()
  if(from STREQUAL "auto")
    set(_MK_AUTO_${var} "${value}" CACHE INTERNAL "the value mk_auto_cache() computed")
  endif()
  set(_MK_FROM_${var} ${from} CACHE INTERNAL "auto: computed at each configure; user: given")
  set(${var} "${value}" CACHE ${type} "${doc} (-D${var}=auto: follow the build)" FORCE)
  set(MK_FROM_${var} ${from} PARENT_SCOPE)
endfunction()

# mk_feature(VAR FOUND WHAT DOC): an optional feature, built when VAR is ON.
# VAR follows FOUND (its library is there) unless the user set it; a user's
# ON without the library stops the configure step, naming WHAT (the library
# and its Debian package). MK_WHY_<VAR> says why it is on or off, for
# BUILD/features.txt (mk_feature_note).
#
# A feature the profile leaves out (MK_PROFILE_LEAVES_OUT, cmake/profile.cmake)
# is off unless given, whatever is installed; MK_LEFT_OUT_BY_<VAR>, when set,
# says why instead of the profile (MK_BROTLI: "MK_COMPRESS=OFF").
function(mk_feature var found what doc)
  set(want "${found}")
  if(var IN_LIST MK_PROFILE_LEAVES_OUT)
    set(want OFF)
  endif()
  mk_auto_cache(${var} BOOL "${want}" "${doc}")
  if(${var} AND NOT found)
    message(FATAL_ERROR "${var}=ON, but ${what} is not found: install it, or configure with "
                        "-D${var}=auto (built when found) or -D${var}=OFF")
  endif()
  if(${var})
    set(why "found: ${what}")
  elseif(MK_FROM_${var} STREQUAL "user")
    set(why "${var}=OFF given")
  elseif(var IN_LIST MK_PROFILE_LEAVES_OUT AND DEFINED MK_LEFT_OUT_BY_${var})
    set(why "${MK_LEFT_OUT_BY_${var}}")
  elseif(var IN_LIST MK_PROFILE_LEAVES_OUT)
    set(why "left out by MK_PROFILE=${MK_PROFILE}")
  elseif(MK_STATIC)
    set(why "static build")
  else()
    set(why "not found: ${what}")
  endif()
  set(MK_WHY_${var} "${why}" PARENT_SCOPE)
endfunction()

# mk_feature_note(NAME on|off WHY): one line of BUILD/features.txt.
function(mk_feature_note name state why)
  set_property(GLOBAL APPEND PROPERTY MK_FEATURE_LINES "${name}\t${state}\t${why}")
endfunction()

# mk_features_write(): BUILD/features.txt, NAME<TAB>on|off<TAB>why, one line
# per optional feature, and the same at the end of the configure output.
# tests/integration/install/test_features.py reads it, and `make test` prints it.
function(mk_features_write)
  get_property(lines GLOBAL PROPERTY MK_FEATURE_LINES)
  set(text "# The optional features of this build (written at each configure; docs/packaging.md)\n")
  set(shown "")
  foreach(l IN LISTS lines)
    string(APPEND text "${l}\n")
    string(REPLACE "\t" " " l "${l}")
    string(APPEND shown "\n  ${l}")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/features.txt "${text}")
  message(STATUS "Features (${CMAKE_BINARY_DIR}/features.txt):${shown}")
endfunction()
