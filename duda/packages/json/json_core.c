/*
 * duda/packages/json/json_core.c: see json_core.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_core.h"

cJSON *duda_json_parse(const char *text, size_t len, char *why, size_t whylen)
{
    const char *end = NULL;

    if (!text || len == 0) {
        snprintf(why, whylen, "empty: no JSON value");
        return NULL;
    }
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!v) {
        size_t off = end && end >= text ? (size_t) (end - text) : 0;
        snprintf(why, whylen, "not JSON: a syntax error at byte %zu", off);
        return NULL;
    }
    /* cJSON stops after the value: what follows it may only be white space. */
    size_t off = (size_t) (end - text);
    while (off < len && strchr(" \t\r\n", text[off]) && text[off]) {
        off++;
    }
    if (off < len) {
        cJSON_Delete(v);
        snprintf(why, whylen, "not JSON: text after the value at byte %zu", off);
        return NULL;
    }
    return v;
}

char *duda_json_print(const cJSON *v, int pretty, size_t *len)
{
    char *s = pretty ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
    if (!s) {
        return NULL;
    }
    size_t n = strlen(s);
    char *out = realloc(s, n + 2);
    if (!out) {
        free(s);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
    return out;
}
