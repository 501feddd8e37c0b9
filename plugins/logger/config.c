/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.c: the plugin-wide logger.conf (AccessLog, ErrorLog, Format,
 * LogFormat, BufferLimit, PipeSize) as declared keys, which the server
 * reads into every configuration it builds and checks with the file and
 * line of every error; and the path and format checks the sites share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "logger.h"

#define LOGGER_SIZE_MIN 16384
#define LOGGER_SIZE_MAX (1024ul << 20)
#define LOGGER_DEFAULT_PIPE (1ul << 20)
#define LOGGER_DEFAULT_FORMAT "combined"
#define LOGGER_NAME_MAX 64

/* The configuration directory (relative paths are resolved against it), set by init(). */

/* Release what the schema's callbacks stored in plugin-wide settings (schema free). */
static void logger_settings_release(void *obj, int site)
{
    struct logger_settings *s = obj;

    if (site) {
        return;
    }
    for (size_t i = 0; i < s->n_named; i++) {
        free(s->named[i].name);
        free(s->named[i].spec);
    }
    free(s->named);
    free(s->access);
    free(s->error);
    free(s->format);
    free(s->format_value);
}

/* `value` made absolute: relative to the configuration directory. NULL: no memory. */
static char *logger_resolve_path(const char *value)
{
    /* The configuration directory of the server that reads it, once its logger started. */
    const struct logger_state *lg = logger_api ? logger_api->self(MK_PLUGIN_SELF(logger)) : NULL;
    char *out;

    if (value[0] == '/' || !lg || !lg->conf_dir) {
        return strdup(value);
    }
    if (asprintf(&out, "%s/%s", lg->conf_dir, value) < 0) {
        return NULL;
    }
    return out;
}

/*
 * The format string a Format value names: "common", "combined", "json",
 * "custom FORMAT" or a LogFormat name of `s`. NULL with the reason in err.
 * FORMAT (of custom and LogFormat) may begin with escape=json, escape=none
 * or escape=default (format.c).
 */
const char *logger_format_named(const struct logger_settings *s, const char *value, char *err,
                                size_t errlen)
{
    const char *spec = logger_format_builtin(value);

    if (spec) {
        return spec;
    }
    if (strncasecmp(value, "custom", 6) == 0 && (value[6] == ' ' || value[6] == '\t')) {
        spec = value + 6;
        spec += strspn(spec, " \t");
        return spec;
    }
    for (size_t i = 0; s && i < s->n_named; i++) {
        if (strcasecmp(s->named[i].name, value) == 0) {
            return s->named[i].spec;
        }
    }
    snprintf(err, errlen,
             "Format: unknown format '%s' (common, combined, json, custom FORMAT, or a LogFormat "
             "name of logger.conf)",
             value);
    return NULL;
}

/* Does `spec` compile? The reason in err when not. */
static int logger_format_check(const char *spec, char *err, size_t errlen)
{
    struct logger_format *f;

    if (logger_format_compile(spec, &f, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    logger_format_free(f);
    return MK_OK;
}

/* "LogFormat NAME FORMAT": add it to s. */
static int logger_add_named(struct logger_settings *s, const char *value, char *err, size_t errlen)
{
    size_t nlen = strcspn(value, " \t");
    const char *spec = value + nlen + strspn(value + nlen, " \t");
    struct logger_named *named;

    if (nlen == 0 || nlen > LOGGER_NAME_MAX || !*spec) {
        snprintf(err, errlen, "LogFormat takes a name and a format string");
        return MK_ERR;
    }
    for (size_t i = 0; i < nlen; i++) {
        char c = value[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.')) {
            snprintf(err, errlen, "LogFormat: '%.*s' is not a name (letters, digits, _ - .)",
                     (int) nlen, value);
            return MK_ERR;
        }
    }
    char *name = strndup(value, nlen);
    if (!name) {
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    if (logger_format_builtin(name) || strcasecmp(name, "custom") == 0 ||
        strcasecmp(name, "off") == 0) {
        snprintf(err, errlen, "LogFormat: '%s' is a reserved name", name);
        free(name);
        return MK_ERR;
    }
    for (size_t i = 0; i < s->n_named; i++) {
        if (strcasecmp(s->named[i].name, name) == 0) {
            snprintf(err, errlen, "LogFormat: '%s' is defined twice", name);
            free(name);
            return MK_ERR;
        }
    }
    char why[256];
    if (logger_format_check(spec, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "LogFormat %s: %s", name, why);
        free(name);
        return MK_ERR;
    }
    named = realloc(s->named, (s->n_named + 1) * sizeof(*named));
    if (!named) {
        free(name);
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    s->named = named;
    named[s->n_named].name = name;
    named[s->n_named].spec = strdup(spec);
    if (!named[s->n_named].spec) {
        free(name);
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    s->n_named++;
    return MK_OK;
}

/* A path key (AccessLog, ErrorLog) given at most once; "off" stores "". */
int logger_set_path(char **slot, int *slot_line, const char *key, const char *value, int line,
                    char *err, size_t errlen)
{
    if (*slot) {
        snprintf(err, errlen, "%s is given twice", key);
        return MK_ERR;
    }
    *slot = strcasecmp(value, "off") == 0 ? strdup("") : logger_resolve_path(value);
    *slot_line = line;
    if (!*slot) {
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

/* AccessLog and ErrorLog of logger.conf: a path, or Off (no default). */
static int logger_set_default_log(void *obj, const struct mk_conf_key *k, const char *value,
                                  const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct logger_settings *s = obj;
    bool access = strcasecmp(k->name, "AccessLog") == 0;
    char **slot = access ? &s->access : &s->error;
    char *where = access ? s->access_where : s->error_where;

    free(*slot);
    *slot = NULL;
    /* Relative to the configuration directory (the server reads this file before init()). */
    if (strcasecmp(value, "off") != 0 &&
        (value[0] == '/' || !origin->confdir
             ? !(*slot = strdup(value))
             : asprintf(slot, "%s/%s", origin->confdir, value) < 0)) {
        *slot = NULL;
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    snprintf(where, PATH_MAX + 32, "%s", origin->where);
    return MK_OK;
}

/* Format of logger.conf: kept as written; logger_settings_finish resolves it. */
static int logger_set_default_format(void *obj, const struct mk_conf_key *k, const char *value,
                                     const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct logger_settings *s = obj;

    (void) k;
    free(s->format_value);
    if (!(s->format_value = strdup(value))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    snprintf(s->format_where, sizeof(s->format_where), "%s", origin->where);
    return MK_OK;
}

/* LogFormat NAME FORMAT (repeatable). */
static int logger_set_named(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    (void) k;
    (void) origin;
    return logger_add_named(obj, value, reason, len);
}

/* Once every line is read: the default Format names a format that compiles. */
static int logger_settings_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct logger_settings *s = obj;

    (void) site;
    *key = "Format";
    const char *spec = logger_format_named(s, s->format_value, reason, len);
    if (!spec || logger_format_check(spec, reason, len) != MK_OK) {
        return MK_ERR;
    }
    if (!(s->format = strdup(spec))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

#define LOGGER_KEY(m) MK_CONF_FIELD(struct logger_settings, m)

/* logger.conf; the sites' [LOGGER] sections are read by logger_site_read(). */
static const struct mk_conf_key logger_keys[] = {
    {"AccessLog", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = logger_set_default_log},
    {"ErrorLog", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = logger_set_default_log},
    {"Format", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, LOGGER_DEFAULT_FORMAT,
     .set = logger_set_default_format},
    {"LogFormat", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = logger_set_named},
    {"BufferLimit", MK_CONF_SIZE, 0, LOGGER_KEY(buffer_limit), LOGGER_SIZE_MIN, LOGGER_SIZE_MAX,
     "8M"},
    {"PipeSize", MK_CONF_SIZE, 0, LOGGER_KEY(pipe_size), LOGGER_SIZE_MIN, LOGGER_SIZE_MAX, "1M"},
    {NULL},
};

const struct mk_conf_schema logger_schema = {
    .section = "LOGGER",
    .file = "logger.conf",
    .keys = logger_keys,
    .size = sizeof(struct logger_settings),
    .free = logger_settings_release,
    .finish = logger_settings_finish,
};
