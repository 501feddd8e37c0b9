# plugins/gateway: the gateway core shared by plugins/cgi and
# plugins/fastcgi (header block parser, meta-variables). Not a plugin: each
# gateway plugin compiles these sources into itself. Included once.
include_guard(GLOBAL)
set(MK_GW_DIR ${CMAKE_SOURCE_DIR}/plugins/gateway)
set(MK_GW_SOURCES ${MK_GW_DIR}/gw.c ${MK_GW_DIR}/gw_head.c)
