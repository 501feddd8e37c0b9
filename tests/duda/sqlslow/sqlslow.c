/*
 * The sqlite package's run() with on_row and on_done, and a query as slow
 * as asked: GET /sqlslow/count?n=N counts to N with a recursive CTE on a
 * task thread and answers "rows=R sum=S" (R rows seen by on_row).
 * GET /sqlslow/error answers the message of a failing statement.
 */
#include <duda/duda.h>
#include <duda/packages/sqlite.h>
#include <stdlib.h>
#include <string.h>

DUDA_REGISTER("sqlite package test", "sqlslow");

static const struct duda_sqlite_api *sqlite;
static duda_sqlite_db_t *db;

struct tally {
    int rows;
    long long sum;
};

static void on_row(duda_request_t *dr, const duda_sqlite_result_t *res, int row, void *arg)
{
    struct tally *t = arg;
    (void) dr;
    t->rows++;
    t->sum += sqlite->get_int(res, row, 0);
}

static void on_done(duda_request_t *dr, const duda_sqlite_result_t *res, void *arg)
{
    struct tally *t = arg;
    if (!dr) {
        return; /* the request went away: t is freed with it */
    }
    response->http_content_type(dr, "text/plain");
    if (sqlite->error(res)) {
        response->http_status(dr, 500);
        response->printf(dr, "error %d: %s\n", sqlite->error_code(res), sqlite->error(res));
    }
    else {
        response->http_status(dr, 200);
        response->printf(dr, "rows=%d sum=%lld\n", t->rows, t->sum);
    }
    response->end(dr, NULL);
}

static void cb_count(duda_request_t *dr)
{
    const char *n = qs->get(dr, "n");
    struct tally *t = gc->alloc(dr, sizeof(*t));
    duda_sqlite_stmt_t *st = sqlite->prepare(
        dr, db,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1) "
        "SELECT count(*) FROM c UNION ALL SELECT 7");
    sqlite->bind_int(st, 1, n ? atoll(n) : 10);
    sqlite->run(st, on_row, on_done, t);
}

static void cb_error(duda_request_t *dr)
{
    struct tally *t = gc->alloc(dr, sizeof(*t));
    sqlite->run(sqlite->prepare(dr, db, "SELECT * FROM no_such_table"), on_row, on_done, t);
}

int duda_main(void)
{
    if (!duda_load_package(sqlite, "sqlite") || !(db = sqlite->open("slow.db"))) {
        return -1;
    }
    router->map("/count", DUDA_GET, cb_count);
    router->map("/error", DUDA_GET, cb_error);
    return 0;
}

void duda_exit(void)
{
    sqlite->close(db);
}
