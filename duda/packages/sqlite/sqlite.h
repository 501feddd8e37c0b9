/*
 * <duda/packages/sqlite.h>: the sqlite package (duda/packages/sqlite/README.md):
 * SQLite databases in the service's DataDir, queried on the task threads so
 * that a worker never waits for the disk or a lock.
 *
 *     static const struct duda_sqlite_api *sqlite;
 *     static duda_sqlite_db_t *db;
 *
 *     duda_load_package(sqlite, "sqlite");          in duda_main(), then
 *     db = sqlite->open("notes.db");
 *     sqlite->exec(db, "CREATE TABLE IF NOT EXISTS ...");
 *
 * A query belongs to a request: prepare() it, bind its parameters, run()
 * it. The callback returns at once; the statement runs on a task thread
 * and its result comes back to the request's worker, row by row through
 * on_row() and whole through on_done(), where the service answers.
 * respond_json() does all of it and answers JSON.
 */
#ifndef DUDA_PACKAGES_SQLITE_H
#define DUDA_PACKAGES_SQLITE_H

#include <duda/duda.h>
#include <stdint.h>

typedef struct duda_sqlite_db duda_sqlite_db_t;
typedef struct duda_sqlite_stmt duda_sqlite_stmt_t;
typedef struct duda_sqlite_result duda_sqlite_result_t;

/* Column types of a value (SQLite's numbers). */
#define DUDA_SQLITE_INTEGER 1
#define DUDA_SQLITE_FLOAT 2
#define DUDA_SQLITE_TEXT 3
#define DUDA_SQLITE_BLOB 4
#define DUDA_SQLITE_NULL 5

/* respond_json() */
#define DUDA_SQLITE_JSON_ROWS 0x0u    /* an array of objects, one per row */
#define DUDA_SQLITE_JSON_ONE 0x1u     /* the first row as an object; 404 when there is none */
#define DUDA_SQLITE_JSON_CHANGES 0x2u /* {"changes": n, "last_insert_id": id} */

/* on_row(dr, res, row, arg): row `row` (from 0) of res is there. */
typedef void (*duda_sqlite_row_cb)(duda_request_t *dr, const duda_sqlite_result_t *res, int row,
                                   void *arg);
/* on_done(dr, res, arg): the statement ran (or failed: sqlite->error(res)). */
typedef void (*duda_sqlite_done_cb)(duda_request_t *dr, const duda_sqlite_result_t *res, void *arg);

struct duda_sqlite_api {
    size_t size;

    /* ---- databases: in duda_main() and duda_exit(), never on a worker ---- */
    /*
     * Open (create) DataDir/name of the current service, in WAL mode. name
     * is a file name (no '/'). NULL when the service has no DataDir or
     * SQLite refuses; the reason is logged with the service's name.
     */
    duda_sqlite_db_t *(*open)(const char *name);
    /* Run sql (one or more statements, no parameters) now, blocking: for setting up a schema. 0
     * or -1 (logged). */
    int (*exec)(duda_sqlite_db_t *db, const char *sql);
    /* Close it (in duda_exit(), once no request uses it). */
    void (*close)(duda_sqlite_db_t *db);

    /* ---- queries: in a callback, on the request's worker ---- */
    /* A statement of `sql` (copied) for dr. NULL when out of memory. */
    duda_sqlite_stmt_t *(*prepare)(duda_request_t *dr, duda_sqlite_db_t *db, const char *sql);
    /* Bind parameter i (from 1, as in "?1" or the i-th "?"): 0, or -1 (i out of 1..99). Copied. */
    int (*bind_int)(duda_sqlite_stmt_t *st, int i, int64_t v);
    int (*bind_double)(duda_sqlite_stmt_t *st, int i, double v);
    int (*bind_text)(duda_sqlite_stmt_t *st, int i, const char *s, size_t len);
    int (*bind_null)(duda_sqlite_stmt_t *st, int i);
    /*
     * Run st on a task thread; the callback returns after this. Then, on
     * the request's worker: on_row (may be NULL) for each row, then
     * on_done, which answers and ends the response. res lives until
     * on_done returns. on_done runs exactly once: with dr NULL when the
     * request went away meanwhile (release arg only), and at once, before
     * run() returns -1, when the query cannot be queued (error "busy").
     * 0 or -1.
     */
    int (*run)(duda_sqlite_stmt_t *st, duda_sqlite_row_cb on_row, duda_sqlite_done_cb on_done,
               void *arg);
    /*
     * Run st and answer JSON (Content-Type application/json) with `status`
     * (204: no body) in the form of `flags`. Errors answer {"error": ...}:
     * 404 for no row with DUDA_SQLITE_JSON_ONE, 409 for a constraint, 503
     * when busy, 500 otherwise. 0 or -1 (answered at once).
     */
    int (*respond_json)(duda_sqlite_stmt_t *st, int status, unsigned flags);

    /* ---- results, in on_row and on_done ---- */
    const char *(*error)(const duda_sqlite_result_t *res); /* NULL: it ran */
    int (*error_code)(const duda_sqlite_result_t *res);    /* SQLite's primary code, or 0 */
    int (*rows)(const duda_sqlite_result_t *res);
    int (*columns)(const duda_sqlite_result_t *res);
    const char *(*column_name)(const duda_sqlite_result_t *res, int col);
    int (*type)(const duda_sqlite_result_t *res, int row, int col); /* DUDA_SQLITE_* */
    int64_t (*get_int)(const duda_sqlite_result_t *res, int row, int col);
    double (*get_double)(const duda_sqlite_result_t *res, int row, int col);
    /* Text (or blob) of a value, NUL terminated, its length in *len (may be NULL); NULL for NULL.
     */
    const char *(*get_text)(const duda_sqlite_result_t *res, int row, int col, size_t *len);
    int64_t (*changes)(const duda_sqlite_result_t *res);        /* rows changed */
    int64_t (*last_insert_id)(const duda_sqlite_result_t *res); /* rowid of the last insert */
};

#endif
