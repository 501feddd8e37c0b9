/*
 * duda/packages/json/json_core.h: the json package's parts that need no
 * request (on cJSON): parsing with a reason, printing into a buffer.
 * Thread-safe (cJSON's global error pointer is never used);
 * tests/test_json_core.c tests them, tests/fuzz/fuzz_duda_json.c fuzzes
 * the parser.
 */
#ifndef DUDA_PKG_JSON_CORE_H
#define DUDA_PKG_JSON_CORE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/*
 * Parse exactly len bytes as one JSON value (surrounding white space
 * allowed). The value (the caller's: cJSON_Delete), or NULL with the
 * reason in why (a message with the byte offset). A number beyond a double
 * (1e999) is refused rather than read as infinity.
 */
cJSON *duda_json_core_parse(const char *text, size_t len, char *why, size_t whylen);

/* v printed (pretty or compact) with a newline, in a malloc'd string; its length in *len. */
char *duda_json_core_print(const cJSON *v, int pretty, size_t *len);

#endif
