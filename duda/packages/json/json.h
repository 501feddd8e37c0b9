/*
 * <duda/packages/json.h>: the json package (duda/packages/json/README.md):
 * parse, build and print JSON, and answer with it, on cJSON (libcjson).
 *
 *     static const struct duda_json_api *json;
 *     duda_load_package(json, "json");               in duda_main()
 *
 * Values are opaque (duda_json_t). A value made with a request (parse,
 * parse_body, object and array with a dr) is freed when the request ends,
 * with everything added to it; one made with a NULL dr is the caller's, to
 * release with json->free(). A value added to an object or an array
 * belongs to it from then on (never free it, nor add it twice).
 */
#ifndef DUDA_PACKAGES_JSON_H
#define DUDA_PACKAGES_JSON_H

#include <duda/duda.h>

typedef struct cJSON duda_json_t;

/* json->type() */
#define DUDA_JSON_INVALID 0
#define DUDA_JSON_NULL 1
#define DUDA_JSON_FALSE 2
#define DUDA_JSON_TRUE 3
#define DUDA_JSON_NUMBER 4
#define DUDA_JSON_STRING 5
#define DUDA_JSON_ARRAY 6
#define DUDA_JSON_OBJECT 7

/* Printing */
#define DUDA_JSON_COMPACT 0
#define DUDA_JSON_PRETTY 1

struct duda_json_api {
    size_t size;

    /* ---- parsing ---- */
    /*
     * Parse len bytes (the whole of them: trailing text is an error). The
     * value, or NULL with the reason ("offset 12: ...", static) in *err
     * (may be NULL). Nesting is limited to 1000 levels.
     */
    duda_json_t *(*parse)(duda_request_t *dr, const char *text, size_t len, const char **err);
    /*
     * The request body as JSON (a router->map route). NULL when there is
     * none or it is not JSON; *err says why. The Content-Type is not
     * checked (request->is_content_type does that).
     */
    duda_json_t *(*parse_body)(duda_request_t *dr, const char **err);

    /* ---- building (NULL when out of memory) ---- */
    duda_json_t *(*object)(duda_request_t *dr);
    duda_json_t *(*array)(duda_request_t *dr);
    duda_json_t *(*string)(const char *s); /* copied */
    duda_json_t *(*number)(double n);
    duda_json_t *(*boolean)(int b);
    duda_json_t *(*null)(void);
    /* Add item under key (copied) to an object, or at the end of an array: 0 or -1. */
    int (*add)(duda_json_t *object, const char *key, duda_json_t *item);
    int (*push)(duda_json_t *array, duda_json_t *item);
    /* Shorthands: add a new string, number or boolean to an object. 0 or -1. */
    int (*add_string)(duda_json_t *object, const char *key, const char *s);
    int (*add_number)(duda_json_t *object, const char *key, double n);
    int (*add_bool)(duda_json_t *object, const char *key, int b);

    /* ---- reading ---- */
    int (*type)(const duda_json_t *v); /* DUDA_JSON_*; INVALID for NULL */
    duda_json_t *(*get)(const duda_json_t *object, const char *key); /* member (case matters) */
    /* A member's value when it is a string (NUL terminated; lives with the value), or NULL. */
    const char *(*get_string)(const duda_json_t *object, const char *key);
    /* A member's value when it is a number: 0, or -1 when absent or not a number. */
    int (*get_number)(const duda_json_t *object, const char *key, double *out);
    /* The string of a string value, the number of a number value (0 otherwise). */
    const char *(*string_value)(const duda_json_t *v);
    double (*number_value)(const duda_json_t *v);
    /* Elements of an array (members of an object), and the i-th of them (NULL past the end). */
    int (*count)(const duda_json_t *v);
    duda_json_t *(*item)(const duda_json_t *v, int i);
    /* The key of a member reached through item() on an object, or NULL. */
    const char *(*key)(const duda_json_t *member);

    /* ---- printing and answering ---- */
    /* v as text (DUDA_JSON_COMPACT or _PRETTY): freed with dr, or the caller's (free()). */
    char *(*print)(duda_request_t *dr, const duda_json_t *v, int pretty);
    /*
     * Answer `status` with v as the body (a newline after it),
     * Content-Type application/json, and end the response. 0 or -1.
     */
    int (*respond)(duda_request_t *dr, int status, const duda_json_t *v, int pretty);
    /* Answer `status` with {"error": message} the same way. 0 or -1. */
    int (*respond_error)(duda_request_t *dr, int status, const char *message);
    /* Release a value of the caller's (not one freed with a request, nor an added one). */
    void (*free)(duda_json_t *v);
};

#endif
