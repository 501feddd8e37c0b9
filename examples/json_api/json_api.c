/*
 * json_api: a REST API of notes on SQLite, answering JSON (duda -w
 * examples/json_api, then the routes under /json_api/notes; README.md).
 *
 * Every query runs on the task threads through the sqlite package, so a
 * slow query never holds up the worker; the json package reads and checks
 * the request bodies.
 */
#include <duda/duda.h>
#include <duda/packages/json.h>
#include <duda/packages/sqlite.h>
#include <string.h>

DUDA_REGISTER("Notes, a JSON API on SQLite", "json_api");

#define TITLE_MAX 200
#define BODY_MAX 65536

static const struct duda_json_api *json;
static const struct duda_sqlite_api *sqlite;
static duda_sqlite_db_t *db;

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS notes ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " title TEXT NOT NULL,"
    " body TEXT NOT NULL DEFAULT '',"
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')))";

#define NOTE_COLUMNS "id, title, body, created, updated"

/* The :id of the route, or -1 after answering 400. */
static long note_id(duda_request_t *dr)
{
    long id;
    if (param->get_number(dr, "id", &id) != 0 || id < 1) {
        json->respond_error(dr, 400, "id: a positive whole number");
        return -1;
    }
    return id;
}

/*
 * The request's JSON object, or NULL after answering 400: not JSON, not an
 * object, or a field of the wrong type or size.
 */
static duda_json_t *note_input(duda_request_t *dr)
{
    const char *why = NULL;
    duda_json_t *in = json->parse_body(dr, &why);
    if (!in) {
        json->respond_error(dr, 400, why ? why : "not JSON");
        return NULL;
    }
    if (json->type(in) != DUDA_JSON_OBJECT) {
        json->respond_error(dr, 400, "the body must be a JSON object");
        return NULL;
    }
    static const struct {
        const char *name;
        size_t max;
    } fields[] = {{"title", TITLE_MAX}, {"body", BODY_MAX}};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        duda_json_t *v = json->get(in, fields[i].name);
        if (!v) {
            continue;
        }
        const char *s = json->string_value(v);
        if (!s) {
            json->respond_error(dr, 400,
                                strcmp(fields[i].name, "title") ? "body: must be a string"
                                                                : "title: must be a string");
            return NULL;
        }
        if (strlen(s) > fields[i].max) {
            json->respond_error(dr, 400,
                                strcmp(fields[i].name, "title") ? "body: longer than 65536 bytes"
                                                                : "title: longer than 200 bytes");
            return NULL;
        }
    }
    return in;
}

/* POST /notes {"title": "...", "body": "..."}: 201 and the note. */
static void cb_create(duda_request_t *dr)
{
    duda_json_t *in = note_input(dr);
    if (!in) {
        return;
    }
    const char *title = json->get_string(in, "title");
    const char *body = json->get_string(in, "body");
    if (!title || !*title) {
        json->respond_error(dr, 400, "missing field: title");
        return;
    }
    duda_sqlite_stmt_t *st = sqlite->prepare(
        dr, db, "INSERT INTO notes (title, body) VALUES (?1, ?2) RETURNING " NOTE_COLUMNS);
    if (!st) {
        json->respond_error(dr, 500, "out of memory");
        return;
    }
    sqlite->bind_text(st, 1, title, strlen(title));
    sqlite->bind_text(st, 2, body ? body : "", body ? strlen(body) : 0);
    sqlite->respond_json(st, 201, DUDA_SQLITE_JSON_ONE);
}

/* GET /notes: 200 and every note, oldest first. */
static void cb_list(duda_request_t *dr)
{
    duda_sqlite_stmt_t *st =
        sqlite->prepare(dr, db, "SELECT " NOTE_COLUMNS " FROM notes ORDER BY id");
    if (!st) {
        json->respond_error(dr, 500, "out of memory");
        return;
    }
    sqlite->respond_json(st, 200, DUDA_SQLITE_JSON_ROWS);
}

/* GET /notes/:id: 200 and the note, or 404. */
static void cb_get(duda_request_t *dr)
{
    long id = note_id(dr);
    if (id < 0) {
        return;
    }
    duda_sqlite_stmt_t *st =
        sqlite->prepare(dr, db, "SELECT " NOTE_COLUMNS " FROM notes WHERE id = ?1");
    if (!st) {
        json->respond_error(dr, 500, "out of memory");
        return;
    }
    sqlite->bind_int(st, 1, id);
    sqlite->respond_json(st, 200, DUDA_SQLITE_JSON_ONE);
}

/* PUT (or PATCH) /notes/:id with "title" and/or "body": 200 and the note, or 404. */
static void cb_update(duda_request_t *dr)
{
    long id = note_id(dr);
    if (id < 0) {
        return;
    }
    duda_json_t *in = note_input(dr);
    if (!in) {
        return;
    }
    const char *title = json->get_string(in, "title");
    const char *body = json->get_string(in, "body");
    if (!title && !body) {
        json->respond_error(dr, 400, "missing field: title or body");
        return;
    }
    if (title && !*title) {
        json->respond_error(dr, 400, "title: must not be empty");
        return;
    }
    duda_sqlite_stmt_t *st = sqlite->prepare(
        dr, db,
        "UPDATE notes SET title = coalesce(?1, title), body = coalesce(?2, body),"
        " updated = strftime('%Y-%m-%dT%H:%M:%SZ','now') WHERE id = ?3 RETURNING " NOTE_COLUMNS);
    if (!st) {
        json->respond_error(dr, 500, "out of memory");
        return;
    }
    if (title) {
        sqlite->bind_text(st, 1, title, strlen(title));
    }
    if (body) {
        sqlite->bind_text(st, 2, body, strlen(body));
    }
    sqlite->bind_int(st, 3, id);
    sqlite->respond_json(st, 200, DUDA_SQLITE_JSON_ONE);
}

/* DELETE /notes/:id: 204, or 404. */
static void cb_delete(duda_request_t *dr)
{
    long id = note_id(dr);
    if (id < 0) {
        return;
    }
    duda_sqlite_stmt_t *st =
        sqlite->prepare(dr, db, "DELETE FROM notes WHERE id = ?1 RETURNING id");
    if (!st) {
        json->respond_error(dr, 500, "out of memory");
        return;
    }
    sqlite->bind_int(st, 1, id);
    sqlite->respond_json(st, 204, DUDA_SQLITE_JSON_ONE);
}

int duda_main(void)
{
    if (!duda_load_package(json, "json") || !duda_load_package(sqlite, "sqlite")) {
        return -1;
    }
    db = sqlite->open("notes.db");
    if (!db || sqlite->exec(db, schema) != 0) {
        return -1;
    }
    router->map("/notes", DUDA_POST, cb_create);
    router->map("/notes", DUDA_GET, cb_list);
    router->map("/notes/:id", DUDA_GET, cb_get);
    router->map("/notes/:id", DUDA_PUT | DUDA_PATCH, cb_update);
    router->map("/notes/:id", DUDA_DELETE, cb_delete);
    return 0;
}

void duda_exit(void)
{
    sqlite->close(db);
}
