/*
 * duda/packages/sqlite/sqlite_core.h: the sqlite package's parts that need
 * no request: a pool of connections to one database file, running one
 * statement with its parameters into a result held in memory, and that
 * result as JSON. Thread-safe: the pool is under a mutex and a connection
 * is used by one thread at a time. tests/test_sqlite_core.c tests it.
 */
#ifndef DUDA_PKG_SQLITE_CORE_H
#define DUDA_PKG_SQLITE_CORE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define DUDA_SQLITE_PARAMS_MAX 99
#define DUDA_SQLITE_RESULT_MAX (16u << 20) /* bytes of one result: cells, text and blobs */
#define DUDA_SQLITE_CACHE 8                /* prepared statements kept per connection */

/* A value: a bound parameter or a result's cell. type: SQLITE_INTEGER ... SQLITE_NULL. */
struct duda_sqlite_value {
    int type;
    int64_t i;
    double d;
    char *s; /* text or blob, NUL terminated (owned) */
    size_t len;
};

/* What one statement gave. */
struct duda_sqlite_result {
    int code;    /* SQLite's primary result code: 0 when it ran */
    char *error; /* the message, or NULL */
    int n_rows, n_cols, cap_rows;
    char **names;                    /* n_cols column names */
    struct duda_sqlite_value *cells; /* n_rows * n_cols */
    int64_t changes, last_insert_id;
    size_t bytes;
};

struct duda_sqlite_conn;

/* The connections to one database file. */
struct duda_sqlite_pool {
    char *path;
    pthread_mutex_t lock;
    struct duda_sqlite_conn *idle; /* connections no thread uses */
    unsigned n_idle;
};

/* Open the database at path (created) in WAL mode. 0, or -1 with the reason in why. */
int duda_sqlite_core_pool_init(struct duda_sqlite_pool *pool, const char *path, char *why,
                               size_t whylen);
/* Close every idle connection and release the pool (none may be in use). */
void duda_sqlite_core_pool_close(struct duda_sqlite_pool *pool);

/* Run a script (statements without parameters) on one connection. 0, or -1 with why. */
int duda_sqlite_core_pool_exec(struct duda_sqlite_pool *pool, const char *sql, char *why,
                               size_t whylen);

/*
 * Run `sql` (one statement) with params[0..n) bound to ?1..?n into res
 * (zeroed by the caller; res->code 0, or the error). Blocks: a task thread's
 * work.
 */
void duda_sqlite_core_run(struct duda_sqlite_pool *pool, const char *sql,
                          const struct duda_sqlite_value *params, int n,
                          struct duda_sqlite_result *res);

/* Release what res holds (not res itself). */
void duda_sqlite_core_result_clear(struct duda_sqlite_result *res);

/*
 * res as JSON with a newline, malloc'd, its length in *len: rows (an array
 * of objects), one row (flags & 1: the first row as an object; NULL when
 * there is none) or changes (flags & 2: {"changes": n, "last_insert_id":
 * id}). Integers as integers, floats with 17 digits (null when not
 * finite), text escaped, blobs as hex strings. NULL when out of memory.
 */
char *duda_sqlite_core_result_json(const struct duda_sqlite_result *res, unsigned flags,
                                   size_t *len);

/* {"error": message} with a newline, malloc'd, its length in *len; NULL when out of memory. */
char *duda_sqlite_core_error_json(const char *message, size_t *len);

/* s (len bytes) as a JSON string, with the quotes, appended to the buffer *buf of *n / *cap. */
int duda_sqlite_core_json_string(char **buf, size_t *n, size_t *cap, const char *s, size_t len);

#endif
