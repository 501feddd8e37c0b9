/*
 * duda/packages/sqlite/sqlite.c: the sqlite package (README.md): the API of
 * <duda/packages/sqlite.h> on sqlite_core.c. A statement belongs to its
 * request (freed with it, gc->add_fn); it runs through worker->task(), so
 * its work happens on a task thread and its callbacks on the request's
 * worker.
 */
#include <duda/duda_package.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"
#include "sqlite_core.h"

struct duda_sqlite_db {
    struct duda_sqlite_pool pool;
};

struct duda_sqlite_stmt {
    duda_request_t *dr;
    duda_sqlite_db_t *db;
    char *sql;
    struct duda_sqlite_value *params;
    int n_params;
    bool running;
    struct duda_sqlite_result res;
    duda_sqlite_row_cb on_row;
    duda_sqlite_done_cb on_done;
    void *arg;
    int json_status; /* respond_json */
    unsigned json_flags;
};

/* ---- databases ------------------------------------------------------------- */

static duda_sqlite_db_t *sqlite_open(const char *name)
{
    char path[4096], why[4400];
    const char *dir = data->get_path();

    if (!name || !*name || strchr(name, '/')) {
        console->debug(NULL, "sqlite->open('%s'): a file name of DataDir, without '/'",
                       name ? name : "(null)");
        return NULL;
    }
    if (!dir) {
        console->debug(NULL, "sqlite->open('%s'): the service has no DataDir", name);
        return NULL;
    }
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    duda_sqlite_db_t *db = calloc(1, sizeof(*db));
    if (n < 0 || (size_t) n >= sizeof(path) || !db) {
        free(db);
        console->debug(NULL, "sqlite->open('%s'): the path is too long", name);
        return NULL;
    }
    if (duda_sqlite_core_pool_init(&db->pool, path, why, sizeof(why)) != 0) {
        console->debug(NULL, "sqlite->open(): %s", why);
        free(db);
        return NULL;
    }
    return db;
}

static int sqlite_exec(duda_sqlite_db_t *db, const char *sql)
{
    char why[512];
    if (!db || !sql) {
        return -1;
    }
    if (duda_sqlite_core_pool_exec(&db->pool, sql, why, sizeof(why)) != 0) {
        console->debug(NULL, "sqlite->exec(): %s", why);
        return -1;
    }
    return 0;
}

static void sqlite_close(duda_sqlite_db_t *db)
{
    if (db) {
        duda_sqlite_core_pool_close(&db->pool);
        free(db);
    }
}

/* ---- statements ------------------------------------------------------------ */

static void sqlite_stmt_free(void *p)
{
    duda_sqlite_stmt_t *st = p;
    for (int i = 0; i < st->n_params; i++) {
        free(st->params[i].s);
    }
    free(st->params);
    free(st->sql);
    duda_sqlite_core_result_clear(&st->res);
    free(st);
}

static duda_sqlite_stmt_t *sqlite_prepare(duda_request_t *dr, duda_sqlite_db_t *db, const char *sql)
{
    if (!dr || !db || !sql) {
        return NULL;
    }
    duda_sqlite_stmt_t *st = calloc(1, sizeof(*st));
    if (!st || !(st->sql = strdup(sql)) || gc->add_fn(dr, sqlite_stmt_free, st) != 0) {
        if (st) {
            free(st->sql);
        }
        free(st);
        return NULL;
    }
    st->dr = dr;
    st->db = db;
    return st;
}

/* The slot of parameter i (1-based), emptied. NULL when i is out of range or memory is short. */
static struct duda_sqlite_value *sqlite_param(duda_sqlite_stmt_t *st, int i)
{
    if (!st || st->running || i < 1 || i > DUDA_SQLITE_PARAMS_MAX) {
        return NULL;
    }
    if (i > st->n_params) {
        struct duda_sqlite_value *v = realloc(st->params, (size_t) i * sizeof(*v));
        if (!v) {
            return NULL;
        }
        memset(&v[st->n_params], 0, (size_t) (i - st->n_params) * sizeof(*v));
        for (int k = st->n_params; k < i; k++) {
            v[k].type = SQLITE_NULL;
        }
        st->params = v;
        st->n_params = i;
    }
    struct duda_sqlite_value *p = &st->params[i - 1];
    free(p->s);
    memset(p, 0, sizeof(*p));
    p->type = SQLITE_NULL;
    return p;
}

static int sqlite_bind_int(duda_sqlite_stmt_t *st, int i, int64_t v)
{
    struct duda_sqlite_value *p = sqlite_param(st, i);
    if (!p) {
        return -1;
    }
    p->type = SQLITE_INTEGER;
    p->i = v;
    return 0;
}

static int sqlite_bind_double(duda_sqlite_stmt_t *st, int i, double v)
{
    struct duda_sqlite_value *p = sqlite_param(st, i);
    if (!p) {
        return -1;
    }
    p->type = SQLITE_FLOAT;
    p->d = v;
    return 0;
}

static int sqlite_bind_text(duda_sqlite_stmt_t *st, int i, const char *s, size_t len)
{
    struct duda_sqlite_value *p = sqlite_param(st, i);
    if (!p || (!s && len)) {
        return -1;
    }
    p->s = malloc(len + 1);
    if (!p->s) {
        return -1;
    }
    if (len) {
        memcpy(p->s, s, len);
    }
    p->s[len] = '\0';
    p->len = len;
    p->type = SQLITE_TEXT;
    return 0;
}

static int sqlite_bind_null(duda_sqlite_stmt_t *st, int i)
{
    return sqlite_param(st, i) ? 0 : -1;
}

/* On a task thread. */
static void sqlite_work(void *arg)
{
    duda_sqlite_stmt_t *st = arg;
    duda_sqlite_core_run(&st->db->pool, st->sql, st->params, st->n_params, &st->res);
}

/* On the request's worker (dr NULL: the request is gone). */
static void sqlite_done(duda_request_t *dr, void *arg)
{
    duda_sqlite_stmt_t *st = arg;
    if (dr && st->on_row && st->res.code == 0) {
        for (int r = 0; r < st->res.n_rows; r++) {
            st->on_row(dr, &st->res, r, st->arg);
        }
    }
    st->on_done(dr, &st->res, st->arg);
    duda_sqlite_core_result_clear(&st->res);
    st->running = false;
}

static int sqlite_run(duda_sqlite_stmt_t *st, duda_sqlite_row_cb on_row,
                      duda_sqlite_done_cb on_done, void *arg)
{
    if (!st || !on_done || st->running) {
        return -1;
    }
    duda_sqlite_core_result_clear(&st->res);
    st->on_row = on_row;
    st->on_done = on_done;
    st->arg = arg;
    st->running = true;
    if (worker->task(st->dr, sqlite_work, sqlite_done, st) != 0) {
        st->res.code = SQLITE_BUSY;
        st->res.error = strdup("busy: the server's task queue is full");
        sqlite_done(st->dr, st);
        return -1;
    }
    return 0;
}

/* ---- answering JSON ---------------------------------------------------------- */

static void sqlite_answer(duda_request_t *dr, int status, const char *body, size_t len)
{
    response->http_status(dr, status);
    if (status == 503) {
        response->http_header(dr, "Retry-After", "1"); /* as the server's own 503s */
    }
    if (body) {
        response->http_content_type(dr, "application/json");
        response->print(dr, body, len);
    }
    response->end(dr, NULL);
}

static void sqlite_answer_error(duda_request_t *dr, int status, const char *message)
{
    size_t len;
    char *body = duda_sqlite_core_error_json(message, &len);
    sqlite_answer(dr, body ? status : 500, body, body ? len : 0);
    free(body);
}

static int sqlite_status_of(int code)
{
    switch (code) {
    case SQLITE_CONSTRAINT:
        return 409;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return 503;
    default:
        return 500;
    }
}

static void sqlite_json_done(duda_request_t *dr, const duda_sqlite_result_t *res, void *arg)
{
    duda_sqlite_stmt_t *st = arg;
    size_t len;

    if (!dr) {
        return;
    }
    if (res->code != 0) {
        console->debug(dr, "sqlite: %s", res->error ? res->error : "error");
        sqlite_answer_error(dr, sqlite_status_of(res->code), res->error);
        return;
    }
    if ((st->json_flags & DUDA_SQLITE_JSON_ONE) && res->n_rows == 0) {
        sqlite_answer_error(dr, 404, "not found");
        return;
    }
    if (st->json_status == 204) {
        sqlite_answer(dr, 204, NULL, 0);
        return;
    }
    char *body = duda_sqlite_core_result_json(res, st->json_flags, &len);
    if (!body) {
        sqlite_answer_error(dr, 500, "out of memory");
        return;
    }
    sqlite_answer(dr, st->json_status, body, len);
    free(body);
}

static int sqlite_respond_json(duda_sqlite_stmt_t *st, int status, unsigned flags)
{
    if (!st || status < 200 || status > 599) {
        return -1;
    }
    st->json_status = status;
    st->json_flags = flags;
    return sqlite_run(st, NULL, sqlite_json_done, st);
}

/* ---- results --------------------------------------------------------------------- */

static const struct duda_sqlite_value *sqlite_cell(const duda_sqlite_result_t *res, int row,
                                                   int col)
{
    if (!res || row < 0 || row >= res->n_rows || col < 0 || col >= res->n_cols) {
        return NULL;
    }
    return &res->cells[(size_t) row * (size_t) res->n_cols + (size_t) col];
}

static const char *sqlite_error(const duda_sqlite_result_t *res)
{
    return res && res->code ? (res->error ? res->error : "error") : NULL;
}

static int sqlite_error_code(const duda_sqlite_result_t *res)
{
    return res ? res->code : 0;
}

static int sqlite_rows(const duda_sqlite_result_t *res)
{
    return res ? res->n_rows : 0;
}

static int sqlite_columns(const duda_sqlite_result_t *res)
{
    return res ? res->n_cols : 0;
}

static const char *sqlite_column_name(const duda_sqlite_result_t *res, int col)
{
    return res && col >= 0 && col < res->n_cols ? res->names[col] : NULL;
}

static int sqlite_type(const duda_sqlite_result_t *res, int row, int col)
{
    const struct duda_sqlite_value *v = sqlite_cell(res, row, col);
    return v ? v->type : DUDA_SQLITE_NULL;
}

static int64_t sqlite_get_int(const duda_sqlite_result_t *res, int row, int col)
{
    const struct duda_sqlite_value *v = sqlite_cell(res, row, col);
    if (!v) {
        return 0;
    }
    return v->type == SQLITE_INTEGER ? v->i
           : v->type == SQLITE_FLOAT ? (int64_t) v->d
           : v->s                    ? strtoll(v->s, NULL, 10)
                                     : 0;
}

static double sqlite_get_double(const duda_sqlite_result_t *res, int row, int col)
{
    const struct duda_sqlite_value *v = sqlite_cell(res, row, col);
    if (!v) {
        return 0;
    }
    return v->type == SQLITE_FLOAT     ? v->d
           : v->type == SQLITE_INTEGER ? (double) v->i
           : v->s                      ? strtod(v->s, NULL)
                                       : 0;
}

static const char *sqlite_get_text(const duda_sqlite_result_t *res, int row, int col, size_t *len)
{
    const struct duda_sqlite_value *v = sqlite_cell(res, row, col);
    if (!v || !v->s) {
        if (len) {
            *len = 0;
        }
        return NULL;
    }
    if (len) {
        *len = v->len;
    }
    return v->s;
}

static int64_t sqlite_changes(const duda_sqlite_result_t *res)
{
    return res ? res->changes : 0;
}

static int64_t sqlite_last_insert_id(const duda_sqlite_result_t *res)
{
    return res ? res->last_insert_id : 0;
}

static int sqlite_init(const struct duda_api *api)
{
    (void) api;
    /* The connections are used by one thread at a time (SQLITE_OPEN_NOMUTEX): any threading mode
     * but single-thread will do. */
    return sqlite3_threadsafe() ? 0 : -1;
}

static const struct duda_sqlite_api sqlite_api = {
    .size = sizeof(sqlite_api),
    .open = sqlite_open,
    .exec = sqlite_exec,
    .close = sqlite_close,
    .prepare = sqlite_prepare,
    .bind_int = sqlite_bind_int,
    .bind_double = sqlite_bind_double,
    .bind_text = sqlite_bind_text,
    .bind_null = sqlite_bind_null,
    .run = sqlite_run,
    .respond_json = sqlite_respond_json,
    .error = sqlite_error,
    .error_code = sqlite_error_code,
    .rows = sqlite_rows,
    .columns = sqlite_columns,
    .column_name = sqlite_column_name,
    .type = sqlite_type,
    .get_int = sqlite_get_int,
    .get_double = sqlite_get_double,
    .get_text = sqlite_get_text,
    .changes = sqlite_changes,
    .last_insert_id = sqlite_last_insert_id,
};

DUDA_PACKAGE("sqlite", "1.0", &sqlite_api, sqlite_init, NULL);
