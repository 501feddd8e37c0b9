/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_duda_json.c: libFuzzer target for the Duda json package's parser
 * (duda/packages/json/json_core.c: a request body, outside input) and the
 * sqlite package's JSON string writer (duda/packages/sqlite/sqlite_core.c:
 * database text, which a client may have stored).
 *
 * Invariants (each a crash when broken):
 *  - a refused input comes with a reason; an accepted one prints, compact
 *    and pretty, to text that parses back and prints to the same text;
 *  - any bytes written as a JSON string by the sqlite package parse back
 *    as a string with those very bytes when they hold no NUL (cJSON's
 *    strings are NUL terminated; cJSON passes bytes >= 0x80 through).
 */
#include <stdlib.h>
#include <string.h>

#include "duda/packages/json/json_core.h"
#include "duda/packages/sqlite/sqlite_core.h"

#include "fuzz_check.h"

static void check_round_trip(const cJSON *v, int pretty)
{
    size_t len = 0;
    char why[96];
    char *text = duda_json_core_print(v, pretty, &len);
    if (!text) {
        return; /* out of memory, or a number cJSON cannot print */
    }
    MK_FUZZ_CHECK(len == strlen(text) && len > 0 && text[len - 1] == '\n');
    cJSON *again = duda_json_core_parse(text, len, why, sizeof(why));
    MK_FUZZ_CHECK(again != NULL);
    /* Printed again, the same text (a value with a key twice compares unequal to itself). */
    size_t len2 = 0;
    char *text2 = duda_json_core_print(again, pretty, &len2);
    MK_FUZZ_CHECK(text2 && len2 == len && memcmp(text, text2, len) == 0);
    free(text2);
    cJSON_Delete(again);
    free(text);
}

static void check_string_writer(const uint8_t *data, size_t size)
{
    char *buf = NULL, why[96];
    size_t n = 0, cap = 0;
    MK_FUZZ_CHECK(duda_sqlite_core_json_string(&buf, &n, &cap, (const char *) data, size) == 0);
    MK_FUZZ_CHECK(n >= 2 && buf[0] == '"' && buf[n - 1] == '"' && strlen(buf) == n);
    if (!memchr(data, 0, size)) {
        cJSON *s = duda_json_core_parse(buf, n, why, sizeof(why));
        MK_FUZZ_CHECK(s != NULL && cJSON_IsString(s));
        MK_FUZZ_CHECK(strlen(s->valuestring) == size && memcmp(s->valuestring, data, size) == 0);
        cJSON_Delete(s);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[96];
    why[0] = '\0';
    cJSON *v = duda_json_core_parse((const char *) data, size, why, sizeof(why));
    if (!v) {
        MK_FUZZ_CHECK(why[0] != '\0');
    }
    else {
        check_round_trip(v, 0);
        check_round_trip(v, 1);
        cJSON_Delete(v);
    }
    check_string_writer(data, size);
    return 0;
}
