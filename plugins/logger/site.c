/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * site.c: a site's [LOGGER] section (AccessLog, Format, ErrorLog), with
 * the defaults of logger.conf for what it does not say: site_init opens
 * the site's log files (monkey -t only checks them) and compiles its
 * format, site_free lets go of them. Controlling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "logger.h"

/* site_free: let go of a site's files (closed later, once unused) and its format. Any thread. */
void logger_site_free(void *data)
{
    struct logger_site *ls = data;

    if (!ls) {
        return;
    }
    if (ls->access) {
        logger_file_release(ls->access);
    }
    if (ls->error) {
        logger_file_release(ls->error);
    }
    logger_format_free(ls->format);
    free(ls);
}

/* Open (or, when checking, only check) one log of a site; the message names file:line. */
static int logger_site_file(const struct logger_settings *s, const char *path, const char *where,
                            const char *key, struct logger_file **out, char *err, size_t errlen)
{
    char why[512];

    if (logger_api->checking()) {
        if (logger_path_check(path, why, sizeof(why)) == MK_OK) {
            return MK_OK;
        }
    }
    else {
        struct logger_state *lg = logger_api->self(MK_PLUGIN_SELF(logger));
        *out = lg ? logger_file_open(lg, path, s->pipe_size, why, sizeof(why)) : NULL;
        if (*out) {
            return MK_OK;
        }
        if (!lg) {
            snprintf(why, sizeof(why), "the logger of this server did not start");
        }
    }
    snprintf(err, errlen, "%s: %s: %s", where, key, why);
    return MK_ERR;
}

/* The [LOGGER] entries of one site file. */
struct logger_site_conf {
    char *access, *error; /* resolved; "" for Off; NULL: not given */
    int access_line, error_line;
    const char *format; /* the Format value as written */
    int format_line;
};

/* Collect the [LOGGER] entries of a site file into sc; MK_ERR with "file:line: reason". */
static int logger_site_read(const struct mk_conf *conf, struct logger_site_conf *sc, char *err,
                            size_t errlen)
{
    const char *section, *key, *value;
    void *cursor = NULL;
    char why[512], at[MK_CONF_AT_LEN];
    int line, rc = MK_OK;

    while (rc == MK_OK && logger_api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "LOGGER") != 0) {
            continue; /* [HOST] and other plugins' sections */
        }
        if (strcasecmp(key, "AccessLog") == 0) {
            rc = logger_set_path(&sc->access, &sc->access_line, key, value, line, why, sizeof(why));
        }
        else if (strcasecmp(key, "ErrorLog") == 0) {
            rc = logger_set_path(&sc->error, &sc->error_line, key, value, line, why, sizeof(why));
        }
        else if (strcasecmp(key, "Format") == 0) {
            if (sc->format) {
                snprintf(why, sizeof(why), "Format is given twice");
                rc = MK_ERR;
            }
            sc->format = value;
            sc->format_line = line;
        }
        else {
            snprintf(why, sizeof(why), "[LOGGER] has no key '%s' (AccessLog, ErrorLog, Format)",
                     key);
            rc = MK_ERR;
        }
        if (rc != MK_OK) {
            snprintf(err, errlen, "%s: %s", mk_api_conf_at(logger_api, conf, line, at, sizeof(at)),
                     why);
        }
    }
    return rc;
}

/*
 * site_init: the site's logs, from its [LOGGER] section and the defaults of
 * logger.conf, opened (or only checked with monkey -t). *data stays NULL for
 * a site that logs nothing. Controlling thread.
 */
int logger_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data, char *err,
                     size_t errlen)
{
    /* logger.conf of the configuration being built. */
    const struct logger_settings *s = logger_api->plugin_conf(site, MK_PLUGIN_SELF(logger));
    const char *file = logger_api->conf_path(conf);
    struct logger_site_conf sc = {0};
    struct logger_site *ls = NULL;
    char why[512], access_at[MK_CONF_AT_LEN], error_at[MK_CONF_AT_LEN], at[MK_CONF_AT_LEN];
    int rc = MK_ERR;

    *data = NULL;
    if (logger_site_read(conf, &sc, err, errlen) != MK_OK) {
        goto done;
    }
    /* What the site says, else the plugin-wide default; "" is Off. */
    const char *access = sc.access ? sc.access : s->access;
    const char *error = sc.error ? sc.error : s->error;
    mk_api_conf_at(logger_api, conf, sc.access_line, access_at, sizeof(access_at));
    mk_api_conf_at(logger_api, conf, sc.error_line, error_at, sizeof(error_at));
    const char *access_where = sc.access ? access_at : s->access_where;
    const char *error_where = sc.error ? error_at : s->error_where;
    access = access && access[0] ? access : NULL;
    error = error && error[0] ? error : NULL;

    const char *spec = s->format;
    if (sc.format) {
        spec = logger_format_named(s, sc.format, why, sizeof(why));
        if (spec && !access) {
            snprintf(why, sizeof(why), "Format without an access log (AccessLog)");
            spec = NULL;
        }
        if (!spec) {
            snprintf(err, errlen, "%s: %s",
                     mk_api_conf_at(logger_api, conf, sc.format_line, at, sizeof(at)), why);
            goto done;
        }
    }
    if (!access && !error) {
        rc = MK_OK; /* nothing to log for this site */
        goto done;
    }
    ls = calloc(1, sizeof(*ls));
    if (!ls) {
        snprintf(err, errlen, "%s: out of memory", file);
        goto done;
    }
    if (access && logger_format_compile(spec, &ls->format, why, sizeof(why)) != MK_OK) {
        if (sc.format) {
            snprintf(err, errlen, "%s: Format: %s",
                     mk_api_conf_at(logger_api, conf, sc.format_line, at, sizeof(at)), why);
        }
        else {
            snprintf(err, errlen, "%s: Format: %s", s->format_where, why);
        }
        goto done;
    }
    if (access &&
        logger_site_file(s, access, access_where, "AccessLog", &ls->access, err, errlen) != MK_OK) {
        goto done;
    }
    if (error &&
        logger_site_file(s, error, error_where, "ErrorLog", &ls->error, err, errlen) != MK_OK) {
        goto done;
    }
    *data = ls;
    ls = NULL;
    rc = MK_OK;

done:
    logger_site_free(ls);
    free(sc.access);
    free(sc.error);
    return rc;
}
