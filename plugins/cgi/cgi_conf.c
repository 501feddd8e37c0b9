/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi_conf.c: the CGI plugin's declared keys. cgi.conf holds the
 * plugin-wide limits; a site's [CGI] section says which paths run scripts.
 * The server reads and checks them for every configuration (start, reload,
 * monkey -t) and reports errors with file and line; the checks here make
 * `monkey -t` find directories and interpreters that do not exist.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgi.h"

/* Split "A B" into two words; MK_ERR unless there are exactly two. */
static int cgi_two_words(const char *value, char **a, char **b, char *reason, size_t len)
{
    char w1[4096], w2[4096], extra[2];
    if (strlen(value) >= sizeof(w1) || sscanf(value, "%4095s %4095s %1s", w1, w2, extra) != 2) {
        snprintf(reason, len, "expected two words, got '%s'", value);
        return MK_ERR;
    }
    *a = strdup(w1);
    *b = strdup(w2);
    if (!*a || !*b) {
        free(*a);
        free(*b);
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

/* ScriptAlias /cgi-bin/ /srv/cgi-bin: the directory must exist. */
static int cgi_set_alias(void *obj, const struct mk_conf_key *k, const char *value,
                         const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct cgi_site_conf *sc = obj;
    char *prefix, *dir;
    struct stat st;

    (void) k;
    (void) origin;
    if (cgi_two_words(value, &prefix, &dir, reason, len) != MK_OK) {
        return MK_ERR;
    }
    size_t plen = strlen(prefix), dlen = strlen(dir);
    const char *why = NULL;
    if (prefix[0] != '/' || prefix[plen - 1] != '/') {
        why = "the URL prefix must start and end with '/'";
    }
    else if (dir[0] != '/') {
        why = "the directory must be an absolute path";
    }
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        why = "the directory does not exist";
    }
    if (why) {
        snprintf(reason, len, "%s: '%s'", why, value);
        free(prefix);
        free(dir);
        return MK_ERR;
    }
    while (dlen > 1 && dir[dlen - 1] == '/') {
        dir[--dlen] = '\0';
    }
    struct cgi_alias *v = realloc(sc->aliases, (sc->n_aliases + 1) * sizeof(*v));
    if (!v) {
        free(prefix);
        free(dir);
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->aliases = v;
    v[sc->n_aliases++] = (struct cgi_alias){prefix, dir};
    return MK_OK;
}

/* Match REGEX (POSIX extended), against the path of files under the document root. */
static int cgi_set_match(void *obj, const struct mk_conf_key *k, const char *value,
                         const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct cgi_site_conf *sc = obj;

    (void) k;
    (void) origin;
    return mk_gw_match_add(&sc->matches, &sc->n_matches, value, reason, len);
}

/* Interpreter .py /usr/bin/python3: the program must be executable. */
static int cgi_set_interp(void *obj, const struct mk_conf_key *k, const char *value,
                          const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct cgi_site_conf *sc = obj;
    char *ext, *program;

    (void) k;
    (void) origin;
    if (cgi_two_words(value, &ext, &program, reason, len) != MK_OK) {
        return MK_ERR;
    }
    const char *why = NULL;
    if (ext[0] != '.' || ext[1] == '\0' || strchr(ext, '/')) {
        why = "the extension must start with '.'";
    }
    else if (program[0] != '/' || access(program, X_OK) != 0) {
        why = "the interpreter is not an executable absolute path";
    }
    if (why) {
        snprintf(reason, len, "%s: '%s'", why, value);
        free(ext);
        free(program);
        return MK_ERR;
    }
    struct cgi_interp *v = realloc(sc->interps, (sc->n_interps + 1) * sizeof(*v));
    if (!v) {
        free(ext);
        free(program);
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->interps = v;
    v[sc->n_interps++] = (struct cgi_interp){ext, program};
    return MK_OK;
}

static void cgi_schema_free(void *obj, int site)
{
    struct cgi_site_conf *sc = obj;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < sc->n_aliases; i++) {
        free(sc->aliases[i].prefix);
        free(sc->aliases[i].dir);
    }
    free(sc->aliases);
    for (size_t i = 0; i < sc->n_matches; i++) {
        regfree(&sc->matches[i]);
    }
    free(sc->matches);
    for (size_t i = 0; i < sc->n_interps; i++) {
        free(sc->interps[i].ext);
        free(sc->interps[i].program);
    }
    free(sc->interps);
}

#define CGI_G(m) MK_CONF_FIELD(struct cgi_conf, m)

static const struct mk_conf_key cgi_keys[] = {
    {"MaxScripts", MK_CONF_INT, 0, CGI_G(max_scripts), 1, 65535, "64",
     .doc = "scripts running at once in the whole server; past it 503"},
    {"Timeout", MK_CONF_DURATION, 0, CGI_G(timeout_ms), 1, 3600000, "10",
     .doc = "time a script has to print its header block; past it 504"},
    {"KillGrace", MK_CONF_DURATION, 0, CGI_G(kill_grace_ms), 1, 60000, "2",
     .doc = "time between SIGTERM and SIGKILL of a script given up"},
    {"ScriptAlias", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = cgi_set_alias, .doc = "URL prefix and directory of scripts"},
    {"Match", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = cgi_set_match,
     .doc = "regular expression of script paths under the document root"},
    {"Interpreter", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = cgi_set_interp, .doc = "extension and the program that runs such scripts"},
    {"PassAuthorization", MK_CONF_BOOL, MK_CONF_SITE,
     MK_CONF_FIELD(struct cgi_site_conf, pass_authorization), 0, 0, "Off",
     .doc = "give scripts the Authorization and Proxy-Authorization headers (HTTP_AUTHORIZATION, "
            "HTTP_PROXY_AUTHORIZATION), for scripts that check credentials themselves"},
    {NULL},
};

const struct mk_conf_schema cgi_schema = {
    .section = "CGI",
    .file = "cgi.conf",
    .keys = cgi_keys,
    .size = sizeof(struct cgi_conf),
    .site_size = sizeof(struct cgi_site_conf),
    .free = cgi_schema_free,
};
