# plugins/logger: its parts (logger.h lists them) and the thread library
# (the logger thread). Included by the top-level CMakeLists with MK_PLUGIN=logger.
set(MK_LOGGER_SOURCES
  ${CMAKE_SOURCE_DIR}/plugins/logger/config.c
  ${CMAKE_SOURCE_DIR}/plugins/logger/format.c
  ${CMAKE_SOURCE_DIR}/plugins/logger/site.c
  ${CMAKE_SOURCE_DIR}/plugins/logger/writer.c)
if(MK_PLUGIN_SHARED)
  target_sources(plugin-logger PRIVATE ${MK_LOGGER_SOURCES})
  target_link_libraries(plugin-logger PRIVATE Threads::Threads)
endif()
if(MK_PLUGIN_BUILTIN)
  target_sources(monkeybuiltins PRIVATE ${MK_LOGGER_SOURCES})
endif()
