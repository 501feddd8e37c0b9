/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.c: the dirlisting plugin's declared keys (Sort, MaxEntries and
 * Stylesheet in dirlisting.conf; Enable, Path and ShowHidden in a site's
 * [DIRLISTING] section), checked by the server with file and line, and
 * each site's data built from them (site_init, controlling thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dirlisting.h"

/* Does `s` hold a byte below 0x20, DEL, or (with no_space) a space? */
static bool dirlisting_has_control(const char *s, bool no_space)
{
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f || (no_space && *p == ' ')) {
            return true;
        }
    }
    return false;
}

/* Stylesheet URL: no spaces or control bytes, at most DIRLISTING_URL_MAX - 1 bytes. */
static int dirlisting_set_stylesheet(void *obj, const struct mk_conf_key *k, const char *value,
                                     const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct dirlisting_settings *out = obj;

    (void) k;
    (void) origin;
    if (!value[0] || strlen(value) >= DIRLISTING_URL_MAX || dirlisting_has_control(value, true)) {
        snprintf(reason, len, "expected a URL (no spaces, at most %d bytes), got '%s'",
                 DIRLISTING_URL_MAX - 1, value);
        return MK_ERR;
    }
    snprintf(out->stylesheet, sizeof(out->stylesheet), "%s", value);
    return MK_OK;
}

void dirlisting_site_free(void *data)
{
    struct dirlisting_site *s = data;

    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->n_prefixes; i++) {
        free(s->prefixes[i]);
    }
    free(s->prefixes);
    free(s);
}

/*
 * Normalise a Path value into `out`: repeated slashes collapsed, no trailing
 * slash ("" for "/"). Returns NULL or the reason it is refused.
 */
static const char *dirlisting_prefix_norm(const char *value, char *out, size_t outlen)
{
    size_t w = 0;

    if (value[0] != '/') {
        return "Path must start with '/'";
    }
    if (strlen(value) >= outlen || dirlisting_has_control(value, false)) {
        return "Path is too long or holds control characters";
    }
    for (const char *p = value; *p;) {
        while (*p == '/') {
            p++;
        }
        const char *seg = p;
        while (*p && *p != '/') {
            p++;
        }
        size_t n = (size_t) (p - seg);
        if (n == 0) {
            break;
        }
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
            return "Path may not hold '.' or '..' segments";
        }
        out[w++] = '/';
        memcpy(out + w, seg, n);
        w += n;
    }
    out[w] = '\0';
    return NULL;
}

/* Path PREFIX (repeatable): one more normalised prefix of the site. */
static int dirlisting_set_path(void *obj, const struct mk_conf_key *k, const char *value,
                               const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct dirlisting_site_conf *sc = obj;
    char prefix[DIRLISTING_PREFIX_MAX];
    const char *why;

    (void) k;
    (void) origin;
    if ((why = dirlisting_prefix_norm(value, prefix, sizeof(prefix)))) {
        snprintf(reason, len, "%s: '%s'", why, value);
        return MK_ERR;
    }
    char **v = realloc(sc->prefixes, (sc->n_prefixes + 1) * sizeof(*v));
    if (!v) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->prefixes = v;
    if (!(v[sc->n_prefixes] = strdup(prefix))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->n_prefixes++;
    return MK_OK;
}

/* Release the prefixes dirlisting_set_path() stored. */
static void dirlisting_schema_free(void *obj, int site)
{
    struct dirlisting_site_conf *sc = obj;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < sc->n_prefixes; i++) {
        free(sc->prefixes[i]);
    }
    free(sc->prefixes);
}

static const char *const dirlisting_sort_words[] = {"bytes", "nocase", NULL};

#define DIRLISTING_G(m) MK_CONF_FIELD(struct dirlisting_settings, m)
#define DIRLISTING_S(m) MK_CONF_FIELD(struct dirlisting_site_conf, m)

/* dirlisting.conf (plugin-wide) and the [DIRLISTING] section of site files. */
static const struct mk_conf_key dirlisting_keys[] = {
    {"Sort", MK_CONF_ENUM, 0, DIRLISTING_G(sort), 0, 0, "bytes", dirlisting_sort_words},
    {"MaxEntries", MK_CONF_INT, 0, DIRLISTING_G(max_entries), 1, DIRLISTING_MAX_ENTRIES_LIMIT,
     "100000"},
    {"Stylesheet", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = dirlisting_set_stylesheet},
    {"Enable", MK_CONF_BOOL, MK_CONF_SITE, DIRLISTING_S(whole_site), 0, 0, "Off"},
    {"ShowHidden", MK_CONF_BOOL, MK_CONF_SITE, DIRLISTING_S(show_hidden), 0, 0, "Off"},
    {"Path", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = dirlisting_set_path},
    {NULL},
};

const struct mk_conf_schema dirlisting_schema = {
    .section = "DIRLISTING",
    .file = "dirlisting.conf",
    .keys = dirlisting_keys,
    .size = sizeof(struct dirlisting_settings),
    .site_size = sizeof(struct dirlisting_site_conf),
    .free = dirlisting_schema_free,
};

/*
 * Build a site's data from its [DIRLISTING] keys (the server checked them);
 * the site's Symlinks setting decides whether links are listed. A site that
 * lists nothing itself gets data too from a server that tells a request
 * rule's DirectoryListing (api->listing, ABI 3.19): a rule may list below
 * it; from an older server *data is then NULL.
 */
int dirlisting_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                         char *err, size_t errlen)
{
    const struct dirlisting_site_conf *sc =
        dirlisting_api->site_conf(site, MK_PLUGIN_SELF(dirlisting));

    (void) conf;
    *data = NULL;
    if (!sc->whole_site && sc->n_prefixes == 0 && !MK_API_HAS(dirlisting_api, listing)) {
        return MK_OK;
    }
    struct dirlisting_site *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", dirlisting_api->site_file(site));
        return MK_ERR;
    }
    s->settings = *(const struct dirlisting_settings *) dirlisting_api->plugin_conf(
        site, MK_PLUGIN_SELF(dirlisting));
    s->symlinks = dirlisting_api->site_symlinks(site);
    s->hide_dotfiles = dirlisting_api->site_hide_dotfiles(site);
    s->whole_site = sc->whole_site;
    s->show_hidden = sc->show_hidden;
    for (size_t i = 0; i < sc->n_prefixes; i++) {
        char **v = realloc(s->prefixes, (s->n_prefixes + 1) * sizeof(*v));
        if (v) {
            s->prefixes = v;
            v[s->n_prefixes] = strdup(sc->prefixes[i]);
        }
        if (!v || !v[s->n_prefixes]) {
            snprintf(err, errlen, "%s: out of memory", dirlisting_api->site_file(site));
            dirlisting_site_free(s);
            return MK_ERR;
        }
        s->n_prefixes++;
    }
    *data = s;
    return MK_OK;
}
