# plugins/dirlisting: its parts (dirlisting.h lists them). Included by the
# top-level CMakeLists.txt with MK_PLUGIN=dirlisting.
set(MK_DIRLISTING_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/config.c
  ${CMAKE_CURRENT_LIST_DIR}/html.c
  ${CMAKE_CURRENT_LIST_DIR}/read.c)
if(MK_PLUGIN_SHARED)
  target_sources(plugin-dirlisting PRIVATE ${MK_DIRLISTING_SOURCES})
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_DIRLISTING_SOURCES})
endif()
