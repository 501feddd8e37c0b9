/*
 * duda/packages/json/json.c: the json package (README.md): the API of
 * <duda/packages/json.h> on cJSON and json_core.c. Values made with a
 * request are freed when it ends (gc->add_fn, cJSON_Delete).
 */
#include <duda/duda_package.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "json_core.h"

/* v freed with dr's request (when there is a dr). NULL if that cannot be arranged. */
static cJSON *json_own(duda_request_t *dr, cJSON *v)
{
    if (v && dr && gc->add_fn(dr, (void (*)(void *)) cJSON_Delete, v) != 0) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static cJSON *json_parse(duda_request_t *dr, const char *text, size_t len, const char **err)
{
    char why[96];
    cJSON *v = duda_json_core_parse(text, len, why, sizeof(why));
    if (!v) {
        if (err) {
            /* The reason lives with the request (or, without one, is a fixed text). */
            *err = dr ? gc->alloc(dr, sizeof(why)) : "not JSON";
            if (dr && *err) {
                memcpy((char *) *err, why, sizeof(why));
            }
        }
        return NULL;
    }
    return json_own(dr, v);
}

static cJSON *json_parse_body(duda_request_t *dr, const char **err)
{
    size_t len = 0;
    const char *body = dr ? request->body(dr, &len) : NULL;
    if (!body) {
        if (err) {
            *err = "no request body";
        }
        return NULL;
    }
    return json_parse(dr, body, len, err);
}

static cJSON *json_object(duda_request_t *dr)
{
    return json_own(dr, cJSON_CreateObject());
}

static cJSON *json_array(duda_request_t *dr)
{
    return json_own(dr, cJSON_CreateArray());
}

static cJSON *json_string(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *json_number(double n)
{
    return cJSON_CreateNumber(n);
}

static cJSON *json_boolean(int b)
{
    return cJSON_CreateBool(b != 0);
}

static cJSON *json_null(void)
{
    return cJSON_CreateNull();
}

static int json_add(cJSON *object, const char *key, cJSON *item)
{
    if (!cJSON_IsObject(object) || !key || !item) {
        cJSON_Delete(item);
        return -1;
    }
    return cJSON_AddItemToObject(object, key, item) ? 0 : -1;
}

static int json_push(cJSON *array, cJSON *item)
{
    if (!cJSON_IsArray(array) || !item) {
        cJSON_Delete(item);
        return -1;
    }
    return cJSON_AddItemToArray(array, item) ? 0 : -1;
}

static int json_add_string(cJSON *object, const char *key, const char *s)
{
    return json_add(object, key, json_string(s));
}

static int json_add_number(cJSON *object, const char *key, double n)
{
    return json_add(object, key, cJSON_CreateNumber(n));
}

static int json_add_bool(cJSON *object, const char *key, int b)
{
    return json_add(object, key, cJSON_CreateBool(b != 0));
}

static int json_type(const cJSON *v)
{
    if (!v) {
        return DUDA_JSON_INVALID;
    }
    switch (v->type & 0xff) {
    case cJSON_NULL:
        return DUDA_JSON_NULL;
    case cJSON_False:
        return DUDA_JSON_FALSE;
    case cJSON_True:
        return DUDA_JSON_TRUE;
    case cJSON_Number:
        return DUDA_JSON_NUMBER;
    case cJSON_String:
        return DUDA_JSON_STRING;
    case cJSON_Array:
        return DUDA_JSON_ARRAY;
    case cJSON_Object:
        return DUDA_JSON_OBJECT;
    default:
        return DUDA_JSON_INVALID;
    }
}

static cJSON *json_get(const cJSON *object, const char *key)
{
    return cJSON_IsObject(object) && key ? cJSON_GetObjectItemCaseSensitive(object, key) : NULL;
}

static const char *json_get_string(const cJSON *object, const char *key)
{
    const cJSON *v = json_get(object, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int json_get_number(const cJSON *object, const char *key, double *out)
{
    const cJSON *v = json_get(object, key);
    if (!cJSON_IsNumber(v)) {
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

static const char *json_string_value(const cJSON *v)
{
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double json_number_value(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int json_count(const cJSON *v)
{
    return cJSON_IsArray(v) || cJSON_IsObject(v) ? cJSON_GetArraySize(v) : 0;
}

static cJSON *json_item(const cJSON *v, int i)
{
    return (cJSON_IsArray(v) || cJSON_IsObject(v)) && i >= 0 ? cJSON_GetArrayItem(v, i) : NULL;
}

static const char *json_key(const cJSON *member)
{
    return member ? member->string : NULL;
}

static char *json_print(duda_request_t *dr, const cJSON *v, int pretty)
{
    size_t len;
    if (!v) {
        return NULL;
    }
    char *s = duda_json_core_print(v, pretty, &len);
    if (s) {
        s[len - 1] = '\0'; /* print() gives the text alone */
        if (dr && gc->add(dr, s) != 0) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static int json_respond(duda_request_t *dr, int status, const cJSON *v, int pretty)
{
    size_t len;
    if (!dr || !v) {
        return -1;
    }
    char *s = duda_json_core_print(v, pretty, &len);
    if (!s) {
        return -1;
    }
    int rc = response->http_status(dr, status);
    if (rc == 0) {
        rc = response->http_content_type(dr, "application/json");
    }
    if (rc == 0) {
        rc = response->print(dr, s, len);
    }
    free(s);
    return rc == 0 ? response->end(dr, NULL) : -1;
}

static int json_respond_error(duda_request_t *dr, int status, const char *message)
{
    cJSON *v = cJSON_CreateObject();
    if (!v || !cJSON_AddStringToObject(v, "error", message ? message : "")) {
        cJSON_Delete(v);
        return -1;
    }
    int rc = json_respond(dr, status, v, DUDA_JSON_COMPACT);
    cJSON_Delete(v);
    return rc;
}

static void json_free(cJSON *v)
{
    cJSON_Delete(v);
}

static const struct duda_json_api json_api = {
    .size = sizeof(json_api),
    .parse = json_parse,
    .parse_body = json_parse_body,
    .object = json_object,
    .array = json_array,
    .string = json_string,
    .number = json_number,
    .boolean = json_boolean,
    .null = json_null,
    .add = json_add,
    .push = json_push,
    .add_string = json_add_string,
    .add_number = json_add_number,
    .add_bool = json_add_bool,
    .type = json_type,
    .get = json_get,
    .get_string = json_get_string,
    .get_number = json_get_number,
    .string_value = json_string_value,
    .number_value = json_number_value,
    .count = json_count,
    .item = json_item,
    .key = json_key,
    .print = json_print,
    .respond = json_respond,
    .respond_error = json_respond_error,
    .free = json_free,
};

DUDA_PACKAGE("json", "1.0", &json_api, NULL, NULL);
