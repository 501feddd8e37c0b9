/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_sqlite_core.c: the sqlite package's pool, statements and JSON
 * (sqlite_core.c) on a database in a temporary folder: parameters, types,
 * errors, the statement cache, concurrent writers, and the JSON forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sqlite_core.h"

static char dir[64];
static struct duda_sqlite_pool pool;

static int setup(void **state)
{
    char path[128], why[256];
    (void) state;
    snprintf(dir, sizeof(dir), "/tmp/duda-sqlite-XXXXXX");
    if (!mkdtemp(dir)) {
        return -1;
    }
    snprintf(path, sizeof(path), "%s/t.db", dir);
    if (duda_sqlite_core_pool_init(&pool, path, why, sizeof(why)) != 0 ||
        duda_sqlite_core_pool_exec(&pool,
                                   "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, "
                                   "score REAL, data BLOB)",
                                   why, sizeof(why)) != 0) {
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void) state;
    duda_sqlite_core_pool_close(&pool);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void run(const char *sql, const struct duda_sqlite_value *params, int n,
                struct duda_sqlite_result *res)
{
    memset(res, 0, sizeof(*res));
    duda_sqlite_core_run(&pool, sql, params, n, res);
}

static void test_insert_select_with_parameters(void **state)
{
    (void) state;
    struct duda_sqlite_result res;
    struct duda_sqlite_value p[3] = {
        {.type = SQLITE_TEXT, .s = "a \"quoted\"\n name", .len = 16},
        {.type = SQLITE_FLOAT, .d = 2.5},
        {.type = SQLITE_NULL},
    };
    run("INSERT INTO t (name, score, data) VALUES (?, ?, ?)", p, 3, &res);
    assert_int_equal(res.code, 0);
    assert_int_equal(res.changes, 1);
    int64_t id = res.last_insert_id;
    assert_true(id > 0);
    duda_sqlite_core_result_clear(&res);

    struct duda_sqlite_value q = {.type = SQLITE_INTEGER, .i = id};
    run("SELECT id, name, score, data FROM t WHERE id = ?1", &q, 1, &res);
    assert_int_equal(res.code, 0);
    assert_int_equal(res.n_rows, 1);
    assert_int_equal(res.n_cols, 4);
    assert_string_equal(res.names[1], "name");
    assert_int_equal(res.cells[0].type, SQLITE_INTEGER);
    assert_int_equal(res.cells[0].i, id);
    assert_string_equal(res.cells[1].s, "a \"quoted\"\n name");
    assert_int_equal(res.cells[3].type, SQLITE_NULL);
    size_t len;
    char *json = duda_sqlite_core_result_json(&res, 1, &len);
    char want[160];
    snprintf(want, sizeof(want),
             "{\"id\":%lld,\"name\":\"a \\\"quoted\\\"\\n name\",\"score\":2.5,\"data\":null}\n",
             (long long) id);
    assert_string_equal(json, want);
    assert_int_equal(len, strlen(want));
    free(json);
    duda_sqlite_core_result_clear(&res);
}

static void test_errors_and_codes(void **state)
{
    (void) state;
    struct duda_sqlite_result res;
    struct duda_sqlite_value p = {.type = SQLITE_TEXT, .s = "dup", .len = 3};
    run("INSERT INTO t (name) VALUES (?)", &p, 1, &res);
    assert_int_equal(res.code, 0);
    duda_sqlite_core_result_clear(&res);
    run("INSERT INTO t (name) VALUES (?)", &p, 1, &res);
    assert_int_equal(res.code, SQLITE_CONSTRAINT);
    assert_non_null(strstr(res.error, "UNIQUE"));
    duda_sqlite_core_result_clear(&res);
    run("SELEKT 1", NULL, 0, &res);
    assert_int_equal(res.code, SQLITE_ERROR);
    assert_non_null(strstr(res.error, "syntax error"));
    duda_sqlite_core_result_clear(&res);
    /* A result beyond 16 MiB: many small rows count too. */
    run("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) "
        "SELECT x FROM c",
        NULL, 0, &res);
    assert_int_equal(res.code, SQLITE_TOOBIG);
    assert_string_equal(res.error, "the result is larger than 16 MiB");
    assert_true(res.n_rows < 1000000);
    duda_sqlite_core_result_clear(&res);
    /* A parameter beyond the statement's. */
    struct duda_sqlite_value two[2] = {{.type = SQLITE_INTEGER, .i = 1},
                                       {.type = SQLITE_INTEGER, .i = 2}};
    run("SELECT ?", two, 2, &res);
    assert_int_equal(res.code, SQLITE_RANGE);
    duda_sqlite_core_result_clear(&res);
}

static void test_json_forms(void **state)
{
    (void) state;
    struct duda_sqlite_result res;
    size_t len;
    run("SELECT 1 AS a, 'x' AS b, x'00ff' AS c, 1e999 AS d UNION ALL SELECT 2, NULL, NULL, 0.5",
        NULL, 0, &res);
    assert_int_equal(res.code, 0);
    char *json = duda_sqlite_core_result_json(&res, 0, &len);
    assert_string_equal(json, "[{\"a\":1,\"b\":\"x\",\"c\":\"00ff\",\"d\":null},"
                              "{\"a\":2,\"b\":null,\"c\":null,\"d\":0.5}]\n");
    free(json);
    duda_sqlite_core_result_clear(&res);
    run("SELECT 1 WHERE 0", NULL, 0, &res);
    json = duda_sqlite_core_result_json(&res, 0, &len);
    assert_string_equal(json, "[]\n");
    free(json);
    assert_null(duda_sqlite_core_result_json(&res, 1, &len));
    duda_sqlite_core_result_clear(&res);
    json = duda_sqlite_core_error_json("bad \x01 \\ thing", &len);
    assert_string_equal(json, "{\"error\":\"bad \\u0001 \\\\ thing\"}\n");
    free(json);
}

static void *writer(void *arg)
{
    int base = (int) (intptr_t) arg;
    for (int i = 0; i < 250; i++) {
        struct duda_sqlite_result res;
        char name[32];
        snprintf(name, sizeof(name), "w%d-%d", base, i);
        struct duda_sqlite_value p = {.type = SQLITE_TEXT, .s = name, .len = strlen(name)};
        run("INSERT INTO t (name) VALUES (?)", &p, 1, &res);
        if (res.code != 0) {
            fprintf(stderr, "writer: %s\n", res.error);
            duda_sqlite_core_result_clear(&res);
            return (void *) 1;
        }
        duda_sqlite_core_result_clear(&res);
    }
    return NULL;
}

static void test_concurrent_writers_lose_nothing(void **state)
{
    (void) state;
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, writer, (void *) (intptr_t) i), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        assert_null(rc);
    }
    struct duda_sqlite_result res;
    run("SELECT count(*) FROM t WHERE name LIKE 'w%'", NULL, 0, &res);
    assert_int_equal(res.cells[0].i, 1000);
    duda_sqlite_core_result_clear(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_select_with_parameters),
        cmocka_unit_test(test_errors_and_codes),
        cmocka_unit_test(test_json_forms),
        cmocka_unit_test(test_concurrent_writers_lose_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
