/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_schema.h: declarative configuration keys (included by mk_plugin.h).
 *
 * Whoever reads a configuration section (the server for [SERVER], a plugin
 * for its file and its site sections) declares the keys it accepts in a
 * constant table, as nginx's ngx_command_t does: name, type, range, default,
 * once or repeatable, scope and the place in a typed struct the value goes
 * to. The server parses the files, checks every value, fills the struct and
 * reports every error as "file:line: reason". Defaults are written as
 * configuration text and go through the same checks as a file's lines, so a
 * default can never be a value a file would be refused for.
 *
 * What each type fills (the field is named with MK_CONF_FIELD):
 *   MK_CONF_BOOL     bool                 On/Off, Yes/No, True/False, 1/0
 *   MK_CONF_INT      any integer type     a whole number within [min, max]
 *   MK_CONF_SIZE     any integer type     bytes, with a K, M or G suffix
 *                                         (powers of 1024), within [min, max]
 *   MK_CONF_DURATION any integer type     milliseconds, written "500ms", "2s",
 *                                         "1m" or "1h" (a plain number is
 *                                         seconds), within [min, max] ms
 *   MK_CONF_STRING   char *               the value as written; max: the
 *                                         longest length accepted (0: any)
 *   MK_CONF_PATH     char *               a path, made absolute against the
 *                                         configuration directory
 *   MK_CONF_ENUM     any integer type     the index in `words` of the value
 *                                         (compared without case)
 *   MK_CONF_ADDRESS  struct mk_conf_address   [HOST:]PORT, [IPV6]:PORT, *:PORT
 *   MK_CONF_WORDS    struct mk_conf_words     the value split at white space;
 *                                         a repeatable key adds every line's
 *   MK_CONF_CUSTOM   whatever set() fills
 * Strings and word lists are owned by the struct and freed with it.
 */
#ifndef MONKEY_MK_SCHEMA_H
#define MONKEY_MK_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum mk_conf_type {
    MK_CONF_BOOL = 1,
    MK_CONF_INT,
    MK_CONF_SIZE,
    MK_CONF_STRING,
    MK_CONF_PATH,
    MK_CONF_ENUM,
    MK_CONF_ADDRESS,
    MK_CONF_WORDS,
    MK_CONF_CUSTOM,
    MK_CONF_DURATION,
};

/* Key flags. */
#define MK_CONF_MULTI 0x1 /* may be given on several lines; else a second line is an error */
#define MK_CONF_SITE 0x2  /* per site: read from site files, not from the plugin's own file */

/* An MK_CONF_ADDRESS value. */
struct mk_conf_address {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool any; /* no host or "*": every address, IPv6 and IPv4 */
};

/* An MK_CONF_WORDS value: n words, v[n] is NULL. */
struct mk_conf_words {
    char **v;
    size_t n;
};

struct mk_conf_key;

/*
 * Where a value comes from, for the callbacks: the place as "file:line"
 * ("command line", "built-in default"), and the configuration directory
 * (NULL when serving built-in defaults).
 */
struct mk_conf_origin {
    const char *where;
    const char *confdir;
};

/*
 * Check a value's text further, after its type accepted it (each word of
 * MK_CONF_WORDS on its own): MK_OK, or MK_ERR with the reason (no file or
 * line: the server adds them) in reason.
 */
typedef int (*mk_conf_check_cb)(const char *value, char *reason, size_t len);
/*
 * Store an MK_CONF_CUSTOM value into `obj` (the whole struct): MK_OK or
 * MK_ERR with the reason in reason. A repeatable key is called once a line.
 */
typedef int (*mk_conf_set_cb)(void *obj, const struct mk_conf_key *key, const char *value,
                              const struct mk_conf_origin *origin, char *reason, size_t len);

struct mk_conf_key {
    const char *name;    /* compared without case; NULL ends a table */
    int type;            /* enum mk_conf_type */
    unsigned flags;      /* MK_CONF_MULTI, MK_CONF_SITE */
    size_t offset, size; /* of the field: MK_CONF_FIELD(struct, member) */
    long long min, max; /* INT, SIZE, DURATION (ms): the range; STRING: max is the longest length */
    const char *fallback;     /* the default as configuration text; NULL: none (field zero) */
    const char *const *words; /* ENUM: the values accepted, NULL terminated */
    mk_conf_check_cb check;   /* optional */
    mk_conf_set_cb set;       /* MK_CONF_CUSTOM only */
    const char *doc;          /* one line for people, optional */
};

#define MK_CONF_FIELD(type, member) offsetof(type, member), sizeof(((type *) 0)->member)

/*
 * A schema: the keys of one section. Plugin-wide keys fill a struct of
 * `size` bytes, MK_CONF_SITE keys one of `site_size` bytes per site. For a
 * plugin, plugin-wide keys are read from the file `file` of the plugins/
 * folder of the configuration directory (absent: every key takes its
 * default) and site keys from the sections named `section` of site files.
 * free(), when set, releases what set() callbacks stored in a struct (the
 * server frees strings and word lists itself). finish(), when set, checks
 * the keys together once a struct is filled: MK_OK, or MK_ERR with the
 * reason in reason; the server names the file and the line where the key
 * named in *key (if finish() sets it) was first given, else the section's.
 */
struct mk_conf_schema {
    const char *section; /* without brackets, e.g. "SKELETON" */
    const char *file;    /* e.g. "skeleton.conf"; NULL: no plugin-wide file */
    const struct mk_conf_key *keys;
    size_t size;
    size_t site_size;
    void (*free)(void *obj, int site);
    int (*finish)(void *obj, int site, const char **key, char *reason, size_t len);
};

/*
 * One section of a repeated site section ([WEB_SERVICE] once per service),
 * filled from the schema a plugin lists in section_schemas (plugin ABI
 * 3.4): api->site_sections() returns them in file order.
 */
struct mk_conf_instance {
    const void *obj; /* the typed struct, schema->site_size bytes */
    int line;        /* the line of the section's [HEADER] */
};

#endif
