/*
 * duda/packages/sqlite/sqlite_core.c: see sqlite_core.h.
 */
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_core.h"

/* A connection and its prepared statements. */
struct duda_sqlite_conn {
    sqlite3 *db;
    struct {
        char *sql;
        sqlite3_stmt *st;
    } cache[DUDA_SQLITE_CACHE];
    unsigned next; /* the cache slot to reuse */
    struct duda_sqlite_conn *next_idle;
};

#define DUDA_SQLITE_IDLE_MAX 16
#define DUDA_SQLITE_BUSY_MS 10000

static void duda_sqlite_conn_close(struct duda_sqlite_conn *c)
{
    for (unsigned i = 0; i < DUDA_SQLITE_CACHE; i++) {
        sqlite3_finalize(c->cache[i].st);
        free(c->cache[i].sql);
    }
    sqlite3_close(c->db);
    free(c);
}

/* A new connection to path. NULL with the reason in why. */
static struct duda_sqlite_conn *duda_sqlite_conn_open(const char *path, char *why, size_t whylen)
{
    struct duda_sqlite_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    int rc = sqlite3_open_v2(path, &c->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                 SQLITE_OPEN_EXRESCODE,
                             NULL);
    if (rc != SQLITE_OK) {
        snprintf(why, whylen, "%s: %s", path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        duda_sqlite_conn_close(c);
        return NULL;
    }
    sqlite3_busy_timeout(c->db, DUDA_SQLITE_BUSY_MS);
    /* WAL: readers and the writer do not block each other; NORMAL is safe with WAL. */
    char *err = NULL;
    if (sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, &err) != SQLITE_OK) {
        snprintf(why, whylen, "%s: %s", path, err ? err : "PRAGMA synchronous refused");
        sqlite3_free(err);
        duda_sqlite_conn_close(c);
        return NULL;
    }
    return c;
}

static struct duda_sqlite_conn *duda_sqlite_acquire(struct duda_sqlite_pool *pool, char *why,
                                                    size_t whylen)
{
    pthread_mutex_lock(&pool->lock);
    struct duda_sqlite_conn *c = pool->idle;
    if (c) {
        pool->idle = c->next_idle;
        pool->n_idle--;
    }
    pthread_mutex_unlock(&pool->lock);
    return c ? c : duda_sqlite_conn_open(pool->path, why, whylen);
}

static void duda_sqlite_release(struct duda_sqlite_pool *pool, struct duda_sqlite_conn *c)
{
    pthread_mutex_lock(&pool->lock);
    if (pool->n_idle < DUDA_SQLITE_IDLE_MAX) {
        c->next_idle = pool->idle;
        pool->idle = c;
        pool->n_idle++;
        c = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (c) {
        duda_sqlite_conn_close(c);
    }
}

int duda_sqlite_core_pool_init(struct duda_sqlite_pool *pool, const char *path, char *why,
                               size_t whylen)
{
    memset(pool, 0, sizeof(*pool));
    pool->path = strdup(path);
    if (!pool->path) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&pool->lock, NULL);
    if (duda_sqlite_core_pool_exec(pool, "PRAGMA journal_mode=WAL", why, whylen) != 0) {
        duda_sqlite_core_pool_close(pool);
        return -1;
    }
    return 0;
}

void duda_sqlite_core_pool_close(struct duda_sqlite_pool *pool)
{
    while (pool->idle) {
        struct duda_sqlite_conn *c = pool->idle;
        pool->idle = c->next_idle;
        duda_sqlite_conn_close(c);
    }
    pool->n_idle = 0;
    if (pool->path) {
        pthread_mutex_destroy(&pool->lock);
    }
    free(pool->path);
    pool->path = NULL;
}

int duda_sqlite_core_pool_exec(struct duda_sqlite_pool *pool, const char *sql, char *why,
                               size_t whylen)
{
    struct duda_sqlite_conn *c = duda_sqlite_acquire(pool, why, whylen);
    if (!c) {
        return -1;
    }
    char *err = NULL;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK) {
        snprintf(why, whylen, "%s", err ? err : sqlite3_errstr(rc));
    }
    sqlite3_free(err);
    duda_sqlite_release(pool, c);
    return rc == SQLITE_OK ? 0 : -1;
}

/* The cached statement of sql on c, reset, or a new one (cached). NULL with res's error. */
static sqlite3_stmt *duda_sqlite_stmt(struct duda_sqlite_conn *c, const char *sql,
                                      struct duda_sqlite_result *res)
{
    for (unsigned i = 0; i < DUDA_SQLITE_CACHE; i++) {
        if (c->cache[i].sql && !strcmp(c->cache[i].sql, sql)) {
            sqlite3_reset(c->cache[i].st);
            sqlite3_clear_bindings(c->cache[i].st);
            return c->cache[i].st;
        }
    }
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, &tail);
    if (rc != SQLITE_OK || !st) {
        res->code = rc != SQLITE_OK ? rc & 0xff : SQLITE_MISUSE;
        res->error = strdup(rc != SQLITE_OK ? sqlite3_errmsg(c->db) : "no statement in the SQL");
        sqlite3_finalize(st);
        return NULL;
    }
    char *copy = strdup(sql);
    if (!copy) {
        return st; /* not cached: finalized by the caller */
    }
    unsigned slot = c->next++ % DUDA_SQLITE_CACHE;
    sqlite3_finalize(c->cache[slot].st);
    free(c->cache[slot].sql);
    c->cache[slot].sql = copy;
    c->cache[slot].st = st;
    return st;
}

static bool duda_sqlite_cached(const struct duda_sqlite_conn *c, const sqlite3_stmt *st)
{
    for (unsigned i = 0; i < DUDA_SQLITE_CACHE; i++) {
        if (c->cache[i].st == st) {
            return true;
        }
    }
    return false;
}

static void duda_sqlite_fail(struct duda_sqlite_result *res, int code, const char *msg)
{
    if (!res->error) {
        res->code = code & 0xff;
        res->error = strdup(msg);
    }
}

static int duda_sqlite_bind(sqlite3_stmt *st, const struct duda_sqlite_value *params, int n)
{
    for (int i = 0; i < n; i++) {
        const struct duda_sqlite_value *p = &params[i];
        int rc;
        switch (p->type) {
        case SQLITE_INTEGER:
            rc = sqlite3_bind_int64(st, i + 1, p->i);
            break;
        case SQLITE_FLOAT:
            rc = sqlite3_bind_double(st, i + 1, p->d);
            break;
        case SQLITE_TEXT:
            rc = sqlite3_bind_text64(st, i + 1, p->s, p->len, SQLITE_STATIC, SQLITE_UTF8);
            break;
        default:
            rc = sqlite3_bind_null(st, i + 1);
            break;
        }
        if (rc != SQLITE_OK) {
            return rc;
        }
    }
    return SQLITE_OK;
}

/* Append the current row of st to res. 0, or -1 (res's error set). */
static int duda_sqlite_row(sqlite3_stmt *st, struct duda_sqlite_result *res)
{
    if (res->n_rows == res->cap_rows) {
        int cap = res->cap_rows ? res->cap_rows * 2 : 8;
        struct duda_sqlite_value *v =
            realloc(res->cells, (size_t) cap * (size_t) res->n_cols * sizeof(*v));
        if (!v) {
            duda_sqlite_fail(res, SQLITE_NOMEM, "out of memory");
            return -1;
        }
        res->cells = v;
        res->cap_rows = cap;
    }
    struct duda_sqlite_value *row = &res->cells[(size_t) res->n_rows * (size_t) res->n_cols];
    memset(row, 0, (size_t) res->n_cols * sizeof(*row));
    res->n_rows++;
    /* The cells count too: a query of many small rows is bounded like one of long texts. */
    res->bytes += (size_t) res->n_cols * sizeof(*row);
    if (res->bytes > DUDA_SQLITE_RESULT_MAX) {
        duda_sqlite_fail(res, SQLITE_TOOBIG, "the result is larger than 16 MiB");
        return -1;
    }
    for (int c = 0; c < res->n_cols; c++) {
        struct duda_sqlite_value *v = &row[c];
        v->type = sqlite3_column_type(st, c);
        if (v->type == SQLITE_INTEGER) {
            v->i = sqlite3_column_int64(st, c);
        }
        else if (v->type == SQLITE_FLOAT) {
            v->d = sqlite3_column_double(st, c);
        }
        else if (v->type == SQLITE_TEXT || v->type == SQLITE_BLOB) {
            const void *p = v->type == SQLITE_TEXT ? (const void *) sqlite3_column_text(st, c)
                                                   : sqlite3_column_blob(st, c);
            v->len = (size_t) sqlite3_column_bytes(st, c);
            res->bytes += v->len;
            if (res->bytes > DUDA_SQLITE_RESULT_MAX) {
                duda_sqlite_fail(res, SQLITE_TOOBIG, "the result is larger than 16 MiB");
                return -1;
            }
            v->s = malloc(v->len + 1);
            if (!v->s) {
                duda_sqlite_fail(res, SQLITE_NOMEM, "out of memory");
                return -1;
            }
            if (v->len) {
                memcpy(v->s, p, v->len);
            }
            v->s[v->len] = '\0';
        }
    }
    return 0;
}

static int duda_sqlite_names(sqlite3_stmt *st, struct duda_sqlite_result *res)
{
    res->n_cols = sqlite3_column_count(st);
    if (res->n_cols == 0) {
        return 0;
    }
    res->names = calloc((size_t) res->n_cols, sizeof(char *));
    if (!res->names) {
        duda_sqlite_fail(res, SQLITE_NOMEM, "out of memory");
        return -1;
    }
    for (int c = 0; c < res->n_cols; c++) {
        const char *name = sqlite3_column_name(st, c);
        res->names[c] = strdup(name ? name : "");
        if (!res->names[c]) {
            duda_sqlite_fail(res, SQLITE_NOMEM, "out of memory");
            return -1;
        }
    }
    return 0;
}

void duda_sqlite_core_run(struct duda_sqlite_pool *pool, const char *sql,
                          const struct duda_sqlite_value *params, int n,
                          struct duda_sqlite_result *res)
{
    char why[512];
    struct duda_sqlite_conn *c = duda_sqlite_acquire(pool, why, sizeof(why));
    if (!c) {
        duda_sqlite_fail(res, SQLITE_CANTOPEN, why);
        return;
    }
    sqlite3_stmt *st = duda_sqlite_stmt(c, sql, res);
    if (!st) {
        duda_sqlite_release(pool, c);
        return;
    }
    int rc = duda_sqlite_bind(st, params, n);
    if (rc != SQLITE_OK) {
        duda_sqlite_fail(res, rc, sqlite3_errmsg(c->db));
    }
    else if (duda_sqlite_names(st, res) == 0) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (duda_sqlite_row(st, res) != 0) {
                break;
            }
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
            duda_sqlite_fail(res, rc, sqlite3_errmsg(c->db));
        }
    }
    res->changes = sqlite3_changes64(c->db);
    res->last_insert_id = sqlite3_last_insert_rowid(c->db);
    /* A statement left mid-way holds its read transaction: reset it now. */
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (!duda_sqlite_cached(c, st)) {
        sqlite3_finalize(st);
    }
    duda_sqlite_release(pool, c);
}

void duda_sqlite_core_result_clear(struct duda_sqlite_result *res)
{
    size_t cells = (size_t) res->n_rows * (size_t) res->n_cols;
    for (size_t i = 0; i < cells; i++) {
        free(res->cells[i].s);
    }
    for (int c = 0; res->names && c < res->n_cols; c++) {
        free(res->names[c]);
    }
    free(res->names);
    free(res->cells);
    free(res->error);
    memset(res, 0, sizeof(*res));
}

/* ---- JSON ------------------------------------------------------------------- */

static int duda_sqlite_reserve(char **buf, size_t *n, size_t *cap, size_t more)
{
    if (*n + more + 1 <= *cap) {
        return 0;
    }
    size_t want = *cap ? *cap : 256;
    while (want < *n + more + 1) {
        want *= 2;
    }
    char *p = realloc(*buf, want);
    if (!p) {
        return -1;
    }
    *buf = p;
    *cap = want;
    return 0;
}

static int duda_sqlite_put(char **buf, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (duda_sqlite_reserve(buf, n, cap, len) != 0) {
        return -1;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = '\0';
    return 0;
}

static int duda_sqlite_printf(char **buf, size_t *n, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int duda_sqlite_printf(char **buf, size_t *n, size_t *cap, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    return len < 0 ? -1 : duda_sqlite_put(buf, n, cap, tmp, (size_t) len);
}

int duda_sqlite_core_json_string(char **buf, size_t *n, size_t *cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    /* At most 6 bytes per input byte, and the quotes. */
    if (len > ((size_t) -1 - 3) / 6 || duda_sqlite_reserve(buf, n, cap, 6 * len + 2) != 0) {
        return -1;
    }
    char *o = *buf + *n;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) s[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char) ch;
        }
        else if (ch == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        }
        else if (ch == '\r') {
            *o++ = '\\';
            *o++ = 'r';
        }
        else if (ch == '\t') {
            *o++ = '\\';
            *o++ = 't';
        }
        else if (ch < 0x20 || ch == 0x7f) {
            memcpy(o, "\\u00", 4);
            o[4] = hex[ch >> 4];
            o[5] = hex[ch & 0xf];
            o += 6;
        }
        else {
            *o++ = (char) ch;
        }
    }
    *o++ = '"';
    *o = '\0';
    *n = (size_t) (o - *buf);
    return 0;
}

static int duda_sqlite_json_value(char **buf, size_t *n, size_t *cap,
                                  const struct duda_sqlite_value *v)
{
    static const char hex[] = "0123456789abcdef";
    switch (v->type) {
    case SQLITE_INTEGER:
        return duda_sqlite_printf(buf, n, cap, "%lld", (long long) v->i);
    case SQLITE_FLOAT:
        return isfinite(v->d) ? duda_sqlite_printf(buf, n, cap, "%.17g", v->d)
                              : duda_sqlite_put(buf, n, cap, "null", 4);
    case SQLITE_TEXT:
        return duda_sqlite_core_json_string(buf, n, cap, v->s, v->len);
    case SQLITE_BLOB:
        if (v->len > ((size_t) -1 - 3) / 2 || duda_sqlite_reserve(buf, n, cap, 2 * v->len + 2)) {
            return -1;
        }
        (*buf)[(*n)++] = '"';
        for (size_t i = 0; i < v->len; i++) {
            (*buf)[(*n)++] = hex[(unsigned char) v->s[i] >> 4];
            (*buf)[(*n)++] = hex[(unsigned char) v->s[i] & 0xf];
        }
        return duda_sqlite_put(buf, n, cap, "\"", 1);
    default:
        return duda_sqlite_put(buf, n, cap, "null", 4);
    }
}

static int duda_sqlite_json_row(char **buf, size_t *n, size_t *cap,
                                const struct duda_sqlite_result *res, int row)
{
    const struct duda_sqlite_value *cells = &res->cells[(size_t) row * (size_t) res->n_cols];
    if (duda_sqlite_put(buf, n, cap, "{", 1) != 0) {
        return -1;
    }
    for (int c = 0; c < res->n_cols; c++) {
        if ((c && duda_sqlite_put(buf, n, cap, ",", 1) != 0) ||
            duda_sqlite_core_json_string(buf, n, cap, res->names[c], strlen(res->names[c])) != 0 ||
            duda_sqlite_put(buf, n, cap, ":", 1) != 0 ||
            duda_sqlite_json_value(buf, n, cap, &cells[c]) != 0) {
            return -1;
        }
    }
    return duda_sqlite_put(buf, n, cap, "}", 1);
}

char *duda_sqlite_core_result_json(const struct duda_sqlite_result *res, unsigned flags,
                                   size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc;

    if (flags & 0x2u) {
        rc = duda_sqlite_printf(&buf, &n, &cap, "{\"changes\":%lld,\"last_insert_id\":%lld}",
                                (long long) res->changes, (long long) res->last_insert_id);
    }
    else if (flags & 0x1u) {
        if (res->n_rows == 0) {
            return NULL;
        }
        rc = duda_sqlite_json_row(&buf, &n, &cap, res, 0);
    }
    else {
        rc = duda_sqlite_put(&buf, &n, &cap, "[", 1);
        for (int r = 0; rc == 0 && r < res->n_rows; r++) {
            if (r) {
                rc = duda_sqlite_put(&buf, &n, &cap, ",", 1);
            }
            if (rc == 0) {
                rc = duda_sqlite_json_row(&buf, &n, &cap, res, r);
            }
        }
        if (rc == 0) {
            rc = duda_sqlite_put(&buf, &n, &cap, "]", 1);
        }
    }
    if (rc != 0 || duda_sqlite_put(&buf, &n, &cap, "\n", 1) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

char *duda_sqlite_core_error_json(const char *message, size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    const char *m = message ? message : "";

    if (duda_sqlite_put(&buf, &n, &cap, "{\"error\":", 9) != 0 ||
        duda_sqlite_core_json_string(&buf, &n, &cap, m, strlen(m)) != 0 ||
        duda_sqlite_put(&buf, &n, &cap, "}\n", 2) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}
