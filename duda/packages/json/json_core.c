/*
 * duda/packages/json/json_core.c: see json_core.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_core.h"

/* Does v hold a number too large for a double (parsed as infinity)? Depth <= cJSON's 1000. */
static int duda_json_has_infinity(const cJSON *v)
{
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
            return 1;
        }
        if (v->child && duda_json_has_infinity(v->child)) {
            return 1;
        }
    }
    return 0;
}

cJSON *duda_json_core_parse(const char *text, size_t len, char *why, size_t whylen)
{
    const char *end = NULL;

    if (!text || len == 0) {
        snprintf(why, whylen, "empty: no JSON value");
        return NULL;
    }
    /* JSON allows no raw control character but white space; cJSON would take NUL for white
       space and keep others in strings. */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) text[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            snprintf(why, whylen, "not JSON: a control character at byte %zu", i);
            return NULL;
        }
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
    /* cJSON reads 1e999 as infinity and would print it as null: refuse it. */
    if (duda_json_has_infinity(v)) {
        cJSON_Delete(v);
        snprintf(why, whylen, "a number too large (beyond a double)");
        return NULL;
    }
    return v;
}

char *duda_json_core_print(const cJSON *v, int pretty, size_t *len)
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
