/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.c: reader for the indented configuration format (see config.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory.h"
#include "strings.h"

#define MK_CONF_MAX_FILE (4u << 20) /* configuration files are small */

/*
 * One reading: the configuration being built and the files open on the way
 * down (for the cycle check), innermost last.
 */
struct mk_conf_reader {
    struct mk_conf *conf;
    bool files;     /* Include allowed (mk_conf_load, not mk_conf_parse) */
    unsigned depth; /* files open below the first */
    unsigned file;  /* index of the file being read in conf->files */
    int local;      /* its line being read */
    dev_t dev[MK_CONF_MAX_DEPTH + 1];
    ino_t ino[MK_CONF_MAX_DEPTH + 1];
    char *err;
    size_t errlen;
};

static bool mk_conf_read(struct mk_conf_reader *rd, struct mk_conf_section **cur, const char *buf,
                         size_t len);

const char *mk_conf_where(const struct mk_conf *conf, int line, int *file_line)
{
    unsigned lo = 0, hi;

    if (file_line) {
        *file_line = line;
    }
    if (!conf) {
        return "?";
    }
    hi = conf->n_spans;
    if (line <= 0 || hi == 0 || line > conf->n_lines || line < conf->spans[0].first) {
        return conf->path;
    }
    while (hi - lo > 1) { /* the last span starting at or before `line` */
        unsigned mid = lo + (hi - lo) / 2;
        if (conf->spans[mid].first <= line) {
            lo = mid;
        }
        else {
            hi = mid;
        }
    }
    if (file_line) {
        *file_line = conf->spans[lo].line + (line - conf->spans[lo].first);
    }
    return conf->files[conf->spans[lo].file].path;
}

bool mk_conf_error(const struct mk_conf *conf, int line, char *err, size_t errlen, const char *fmt,
                   ...)
{
    va_list ap;
    int n, file_line;
    const char *file;

    if (!err || errlen == 0) {
        return false;
    }
    file = mk_conf_where(conf, line, &file_line);
    n = snprintf(err, errlen, "%s:%d: ", file, file_line);
    if (n < 0 || (size_t) n >= errlen) {
        return false;
    }
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t) n, fmt, ap);
    va_end(ap);
    return false;
}

static bool mk_is_space(char c)
{
    return c == ' ' || c == '\t';
}

static bool mk_is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || mk_is_digit(c) || c == '_' ||
           c == '-' || c == '.' || c == '/';
}

static bool mk_is_env_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && mk_is_digit(c));
}

void mk_conf_free(struct mk_conf *conf)
{
    struct mk_list *it, *tmp, *eit, *etmp;

    if (!conf) {
        return;
    }
    mk_list_foreach_safe (it, tmp, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        mk_list_foreach_safe (eit, etmp, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            mk_free(e->key);
            mk_free(e->value);
            mk_free(e);
        }
        mk_free(s->name);
        mk_free(s);
    }
    for (unsigned i = 0; i < conf->n_files; i++) {
        mk_free(conf->files[i].path);
    }
    mk_free(conf->files);
    mk_free(conf->spans);
    mk_free(conf->path);
    mk_free(conf);
}

/* From position conf->n_lines + 1 on, lines are rd->file's, from rd->local + 1 on. */
static void mk_conf_span_open(struct mk_conf_reader *rd)
{
    struct mk_conf *conf = rd->conf;
    conf->spans = mk_realloc(conf->spans, (conf->n_spans + 1) * sizeof(*conf->spans));
    conf->spans[conf->n_spans++] =
        (struct mk_conf_span){.first = conf->n_lines + 1, .line = rd->local + 1, .file = rd->file};
}

static unsigned mk_conf_file_add(struct mk_conf *conf, const char *path, unsigned parent,
                                 int parent_line)
{
    conf->files = mk_realloc(conf->files, (conf->n_files + 1) * sizeof(*conf->files));
    conf->files[conf->n_files] = (struct mk_conf_file){
        .path = mk_strdup(path), .parent = parent, .parent_line = parent_line};
    return conf->n_files++;
}

/*
 * Expand ${NAME}, ${NAME:-default} and $${ in the value [v, vend) of the
 * line at position `line`. Returns the new string, or NULL with the error.
 */
static char *mk_conf_expand(struct mk_conf_reader *rd, int line, const char *v, const char *vend)
{
    size_t cap = (size_t) (vend - v) + 1, n = 0;
    char *out = mk_alloc(cap);

    for (const char *p = v; p < vend;) {
        const char *add = p;
        size_t add_len = 1;
        if (*p == '$' && vend - p >= 3 && p[1] == '$' && p[2] == '{') {
            add = "${";
            add_len = 2;
            p += 3;
        }
        else if (*p == '$' && vend - p >= 2 && p[1] == '{') {
            const char *name = p + 2, *q = name, *close;
            while (q < vend && mk_is_env_char(*q, q == name)) {
                q++;
            }
            close = memchr(q, '}', (size_t) (vend - q));
            if (!close) {
                mk_conf_error(rd->conf, line, rd->err, rd->errlen, "'${' without a closing '}'");
                mk_free(out);
                return NULL;
            }
            bool has_default = vend - q >= 2 && q[0] == ':' && q[1] == '-';
            if (q == name || (q != close && !has_default)) {
                mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                              "'%.*s' is not a variable: expected ${NAME} or ${NAME:-default}",
                              (int) (close + 1 - p), p);
                mk_free(out);
                return NULL;
            }
            char var[128];
            if ((size_t) (q - name) >= sizeof(var)) {
                mk_conf_error(rd->conf, line, rd->err, rd->errlen, "variable name too long");
                mk_free(out);
                return NULL;
            }
            memcpy(var, name, (size_t) (q - name));
            var[q - name] = '\0';
            const char *val = getenv(var);
            if (val && *val) {
                add = val;
                add_len = strlen(val);
            }
            else if (has_default) {
                add = q + 2;
                add_len = (size_t) (close - add);
            }
            else {
                mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                              "environment variable %s is not set (write ${%s:-default} "
                              "for a default)",
                              var, var);
                mk_free(out);
                return NULL;
            }
            for (size_t i = 0; i < add_len; i++) {
                if (add[i] == '\n' || add[i] == '\r') {
                    mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                                  "environment variable %s holds a line break", var);
                    mk_free(out);
                    return NULL;
                }
            }
            p = close + 1;
        }
        else {
            p++;
        }
        if (n + add_len + 1 > cap) {
            cap = (n + add_len + 1) * 2;
            out = mk_realloc(out, cap);
        }
        memcpy(out + n, add, add_len);
        n += add_len;
    }
    out[n] = '\0';
    return out;
}

/*
 * Read the file at `path` (at most MK_CONF_MAX_FILE bytes) into a new
 * buffer. Returns the buffer and its length, or NULL with "PATH: reason"
 * written into err.
 */
static char *mk_conf_slurp(const char *path, size_t *len, struct stat *st, char *err, size_t errlen)
{
    size_t got = 0;
    char *buf;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t) st->st_size > MK_CONF_MAX_FILE) {
        snprintf(err, errlen, "%s: file too large", path);
        close(fd);
        return NULL;
    }
    buf = mk_alloc((size_t) st->st_size + 1);
    while (got < (size_t) st->st_size) {
        ssize_t n = read(fd, buf + got, (size_t) st->st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t) n;
    }
    close(fd);
    *len = got;
    return buf;
}

/*
 * Read one included file `name` for the Include at position `line`. It is
 * named (and opened) by its real path, so that messages read
 * "/etc/monkey/site.d/a.conf", not "/etc/monkey/sites/../site.d/a.conf".
 */
static bool mk_conf_include_file(struct mk_conf_reader *rd, struct mk_conf_section **cur,
                                 const char *name, int line)
{
    char why[MK_CONF_ERR_LEN], real[PATH_MAX];
    const char *path = realpath(name, real) ? real : name;
    struct stat st;
    size_t len;
    char *buf = mk_conf_slurp(path, &len, &st, why, sizeof(why));

    if (!buf) {
        return mk_conf_error(rd->conf, line, rd->err, rd->errlen, "Include: %s", why);
    }
    for (unsigned i = 0; i <= rd->depth; i++) {
        if (rd->dev[i] == st.st_dev && rd->ino[i] == st.st_ino) {
            mk_free(buf);
            return mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                                 "Include: %s includes itself (through %s)", path,
                                 rd->conf->files[rd->file].path);
        }
    }
    if (rd->depth == MK_CONF_MAX_DEPTH) {
        mk_free(buf);
        return mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                             "Include: %s is nested deeper than %d files", path, MK_CONF_MAX_DEPTH);
    }

    unsigned saved_file = rd->file;
    int saved_local = rd->local;
    struct mk_conf_section *saved_cur = *cur;
    rd->depth++;
    rd->dev[rd->depth] = st.st_dev;
    rd->ino[rd->depth] = st.st_ino;
    rd->file = mk_conf_file_add(rd->conf, path, saved_file, line);
    rd->local = 0;
    mk_conf_span_open(rd);
    bool ok = mk_conf_read(rd, cur, buf, len);
    mk_free(buf);
    rd->depth--;
    rd->file = saved_file;
    rd->local = saved_local;
    *cur = saved_cur;
    mk_conf_span_open(rd);
    return ok;
}

/* Append `s`, with the glob characters *?[\ escaped, to `out` of size cap. */
static bool mk_conf_glob_escape(char *out, size_t cap, size_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        bool special = strchr("*?[\\", s[i]) != NULL;
        if (*n + 2 + special >= cap) {
            return false;
        }
        if (special) {
            out[(*n)++] = '\\';
        }
        out[(*n)++] = s[i];
    }
    out[*n] = '\0';
    return true;
}

/* An "Include PATTERN" at position `line` (the pattern expanded already). */
static bool mk_conf_include(struct mk_conf_reader *rd, struct mk_conf_section **cur,
                            const char *pattern, int line)
{
    const char *self = rd->conf->files[rd->file].path, *slash = strrchr(self, '/');
    bool wild = strpbrk(pattern, "*?[") != NULL;
    char full[PATH_MAX];
    size_t n = 0;
    glob_t g;

    if (!rd->files) {
        return mk_conf_error(rd->conf, line, rd->err, rd->errlen,
                             "Include is not allowed here: %s is not read from a file",
                             rd->conf->path);
    }
    full[0] = '\0';
    if (pattern[0] != '/' && slash) {
        size_t dlen = (size_t) (slash + 1 - self);
        bool fits =
            wild ? mk_conf_glob_escape(full, sizeof(full), &n, self, dlen) : dlen < sizeof(full);
        if (!fits) {
            return mk_conf_error(rd->conf, line, rd->err, rd->errlen, "Include: path too long");
        }
        if (!wild) {
            memcpy(full, self, dlen);
            n = dlen;
        }
    }
    if (n + strlen(pattern) >= sizeof(full)) {
        return mk_conf_error(rd->conf, line, rd->err, rd->errlen, "Include: path too long");
    }
    memcpy(full + n, pattern, strlen(pattern) + 1);
    if (!wild) {
        return mk_conf_include_file(rd, cur, full, line);
    }

    int rc = glob(full, GLOB_MARK, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        return true; /* a wildcard may match nothing */
    }
    if (rc != 0) {
        return mk_conf_error(rd->conf, line, rd->err, rd->errlen, "Include: cannot read '%s'",
                             full);
    }
    bool ok = true;
    for (size_t i = 0; ok && i < g.gl_pathc; i++) {
        size_t plen = strlen(g.gl_pathv[i]);
        if (plen > 0 && g.gl_pathv[i][plen - 1] == '/') {
            continue; /* GLOB_MARK: a directory */
        }
        ok = mk_conf_include_file(rd, cur, g.gl_pathv[i], line);
    }
    globfree(&g);
    return ok;
}

/* Is [s, end) "Include" followed by white space? Then *arg is the rest. */
static bool mk_conf_is_include(const char *s, const char *end, const char **arg)
{
    static const char word[] = "Include";
    size_t n = sizeof(word) - 1;

    if ((size_t) (end - s) <= n || strncasecmp(s, word, n) != 0 || !mk_is_space(s[n])) {
        return false;
    }
    *arg = s + n;
    return true;
}

/*
 * The value in [s, end): leading white space skipped, ended at a comment
 * (white space + '#'; `after_key` is the first character the comment's
 * white space may be), trailing white space dropped.
 */
static void mk_conf_value(const char *s, const char *end, const char *after_key, const char **v,
                          const char **vend)
{
    while (s < end && mk_is_space(*s)) {
        s++;
    }
    *v = *vend = s;
    for (const char *q = s; q < end; q++) {
        if (*q == '#' && q > after_key && mk_is_space(q[-1])) {
            break;
        }
        if (!mk_is_space(*q)) {
            *vend = q + 1;
        }
    }
}

/* Parse one logical line [p, end) at position `line`. */
static bool mk_conf_line(struct mk_conf_reader *rd, struct mk_conf_section **cur, const char *p,
                         const char *end, int line)
{
    struct mk_conf *conf = rd->conf;
    char *err = rd->err;
    size_t errlen = rd->errlen;
    const char *s = p, *arg;

    for (const char *q = p; q < end; q++) {
        if (*q == '\0') {
            return mk_conf_error(conf, line, err, errlen, "NUL byte in line");
        }
        if (*q == '\r' && q + 1 != end) {
            return mk_conf_error(conf, line, err, errlen, "stray carriage return");
        }
    }
    if (end > p && end[-1] == '\r') {
        end--;
    }
    while (s < end && mk_is_space(*s)) {
        s++;
    }
    if (s == end || *s == '#') {
        return true; /* blank or comment */
    }

    if (mk_conf_is_include(s, end, &arg)) {
        const char *v, *vend;
        mk_conf_value(arg, end, arg - 1, &v, &vend);
        if (v == vend) {
            return mk_conf_error(conf, line, err, errlen, "Include needs a file name or pattern");
        }
        char *pattern = mk_conf_expand(rd, line, v, vend);
        if (!pattern) {
            return false;
        }
        bool ok = pattern[0] ? mk_conf_include(rd, cur, pattern, line)
                             : mk_conf_error(conf, line, err, errlen,
                                             "Include needs a file name or pattern");
        mk_free(pattern);
        return ok;
    }

    if (s == p) {
        /* Column 0: must be a section header. */
        const char *close;
        if (*p != '[') {
            return mk_conf_error(conf, line, err, errlen,
                                 "expected a [SECTION] header or an indented key");
        }
        close = memchr(p, ']', (size_t) (end - p));
        if (!close || close == p + 1) {
            return mk_conf_error(conf, line, err, errlen, "malformed section header");
        }
        for (const char *q = p + 1; q < close; q++) {
            if (!mk_is_name_char(*q) && *q != ' ') {
                return mk_conf_error(conf, line, err, errlen, "invalid character in section name");
            }
        }
        for (const char *q = close + 1; q < end; q++) {
            if (*q == '#') {
                break;
            }
            if (!mk_is_space(*q)) {
                return mk_conf_error(conf, line, err, errlen, "text after section header");
            }
        }
        struct mk_conf_section *sec = mk_calloc(1, sizeof(*sec));
        sec->name = mk_strndup(p + 1, (size_t) (close - p - 1));
        sec->line = line;
        mk_list_init(&sec->entries);
        mk_list_add_tail(&sec->node, &conf->sections);
        *cur = sec;
        return true;
    }

    /* Indented: "Key value". */
    if (!*cur) {
        return mk_conf_error(conf, line, err, errlen, "key outside of any [SECTION]");
    }
    const char *k = s;
    while (s < end && !mk_is_space(*s)) {
        if (!mk_is_name_char(*s)) {
            return mk_conf_error(conf, line, err, errlen, "invalid character in key name");
        }
        s++;
    }
    const char *kend = s, *v, *vend;
    mk_conf_value(s, end, kend, &v, &vend);
    if (vend == v) {
        return mk_conf_error(conf, line, err, errlen, "key '%.*s' has no value", (int) (kend - k),
                             k);
    }
    char *value = mk_conf_expand(rd, line, v, vend);
    if (!value) {
        return false;
    }
    if (!value[0]) {
        mk_free(value);
        return mk_conf_error(conf, line, err, errlen, "key '%.*s' has no value once expanded",
                             (int) (kend - k), k);
    }
    struct mk_conf_entry *e = mk_calloc(1, sizeof(*e));
    e->key = mk_strndup(k, (size_t) (kend - k));
    e->value = value;
    e->line = line;
    e->section = *cur;
    mk_list_add_tail(&e->node, &(*cur)->entries);
    return true;
}

/* Read the lines of the file rd->file, whose text is [buf, buf + len). */
static bool mk_conf_read(struct mk_conf_reader *rd, struct mk_conf_section **cur, const char *buf,
                         size_t len)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        const char *lend = nl ? nl : end;
        int line = ++rd->conf->n_lines;
        rd->local++;
        if (!mk_conf_line(rd, cur, p, lend, line)) {
            return false;
        }
        p = nl ? nl + 1 : end;
    }
    return true;
}

static struct mk_conf *mk_conf_read_top(const char *label, const char *buf, size_t len,
                                        const struct stat *st, char *err, size_t errlen)
{
    struct mk_conf *conf = mk_calloc(1, sizeof(*conf));
    struct mk_conf_reader rd = {.conf = conf, .files = st != NULL, .err = err, .errlen = errlen};
    struct mk_conf_section *cur = NULL;

    conf->path = mk_strdup(label);
    mk_list_init(&conf->sections);
    if (st) {
        rd.dev[0] = st->st_dev;
        rd.ino[0] = st->st_ino;
    }
    rd.file = mk_conf_file_add(conf, label, 0, 0);
    mk_conf_span_open(&rd);
    if (!mk_conf_read(&rd, &cur, buf, len)) {
        mk_conf_free(conf);
        return NULL;
    }
    return conf;
}

struct mk_conf *mk_conf_parse(const char *label, const char *buf, size_t len, char *err,
                              size_t errlen)
{
    return mk_conf_read_top(label, buf, len, NULL, err, errlen);
}

struct mk_conf *mk_conf_load(const char *path, char *err, size_t errlen)
{
    struct stat st;
    struct mk_conf *conf;
    size_t len;
    char *buf = mk_conf_slurp(path, &len, &st, err, errlen);

    if (!buf) {
        return NULL;
    }
    conf = mk_conf_read_top(path, buf, len, &st, err, errlen);
    mk_free(buf);
    return conf;
}

/* Write `v` with every "${" as "$${". */
static void mk_conf_dump_value(const char *v, FILE *out)
{
    for (const char *p = v; *p; p++) {
        if (p[0] == '$' && p[1] == '{') {
            fputc('$', out);
        }
        fputc(*p, out);
    }
}

bool mk_conf_dump(const struct mk_conf *conf, FILE *out)
{
    struct mk_list *it, *eit;
    const char *shown = conf->files[0].path;

    fprintf(out, "# file %s\n", conf->files[0].path);
    for (unsigned i = 1; i < conf->n_files; i++) {
        int line;
        const char *from = mk_conf_where(conf, conf->files[i].parent_line, &line);
        fprintf(out, "# file %s (Include at %s:%d)\n", conf->files[i].path, from, line);
    }
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        const char *file = mk_conf_where(conf, s->line, NULL);
        if (file != shown) {
            fprintf(out, "# from %s\n", file);
            shown = file;
        }
        fprintf(out, "[%s]\n", s->name);
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            file = mk_conf_where(conf, e->line, NULL);
            if (file != shown) {
                fprintf(out, "# from %s\n", file);
                shown = file;
            }
            fprintf(out, "    %s ", e->key);
            mk_conf_dump_value(e->value, out);
            fputc('\n', out);
        }
    }
    return !ferror(out);
}

struct mk_conf_section *mk_conf_section(const struct mk_conf *conf, const char *name)
{
    struct mk_list *it;
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, name) == 0) {
            return s;
        }
    }
    return NULL;
}

struct mk_conf_entry *mk_conf_next(const struct mk_conf *conf, const struct mk_conf_entry *e)
{
    const struct mk_list *sec_node;

    if (e && e->node.next != &e->section->entries) {
        return mk_list_entry(e->node.next, struct mk_conf_entry, node);
    }
    sec_node = e ? e->section->node.next : conf->sections.next;
    for (; sec_node != &conf->sections; sec_node = sec_node->next) {
        const struct mk_conf_section *s = mk_list_entry(sec_node, struct mk_conf_section, node);
        if (!mk_list_is_empty(&s->entries)) {
            return mk_list_entry(s->entries.next, struct mk_conf_entry, node);
        }
    }
    return NULL;
}

struct mk_conf_entry *mk_conf_entry(const struct mk_conf_section *section, const char *key)
{
    struct mk_list *it;
    mk_list_foreach (it, &section->entries) {
        struct mk_conf_entry *e = mk_list_entry(it, struct mk_conf_entry, node);
        if (strcasecmp(e->key, key) == 0) {
            return e;
        }
    }
    return NULL;
}

bool mk_conf_bool(const struct mk_conf *conf, const struct mk_conf_entry *e, bool *out, char *err,
                  size_t errlen)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(e->value, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(e->value, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return mk_conf_error(conf, e->line, err, errlen, "%s: expected On or Off, got '%s'", e->key,
                         e->value);
}

bool mk_conf_int(const struct mk_conf *conf, const struct mk_conf_entry *e, long min, long max,
                 long *out, char *err, size_t errlen)
{
    const char *p = e->value;
    bool neg = false;
    uint64_t v;

    if (*p == '-') {
        neg = true;
        p++;
    }
    if (!mk_str_to_u64(p, strlen(p), (uint64_t) 1 << 62, &v) || (neg && v == 0)) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: expected a whole number, got '%s'",
                             e->key, e->value);
    }
    long n = neg ? -(long) v : (long) v;
    if (n < min || n > max) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: %ld is out of range (%ld to %ld)",
                             e->key, n, min, max);
    }
    *out = n;
    return true;
}

bool mk_conf_size(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min,
                  uint64_t max, uint64_t *out, char *err, size_t errlen)
{
    size_t len = strlen(e->value);
    uint64_t mult = 1, v;

    if (len > 0) {
        switch (mk_tolower(e->value[len - 1])) {
        case 'k':
            mult = 1024;
            len--;
            break;
        case 'm':
            mult = 1024 * 1024;
            len--;
            break;
        case 'g':
            mult = 1024 * 1024 * 1024;
            len--;
            break;
        default:
            break;
        }
    }
    if (!mk_str_to_u64(e->value, len, UINT64_MAX / mult, &v)) {
        return mk_conf_error(conf, e->line, err, errlen,
                             "%s: expected a size such as 512, 32K or 8M, got '%s'", e->key,
                             e->value);
    }
    v *= mult;
    if (v < min || v > max) {
        return mk_conf_error(
            conf, e->line, err, errlen, "%s: %llu bytes is out of range (%llu to %llu)", e->key,
            (unsigned long long) v, (unsigned long long) min, (unsigned long long) max);
    }
    *out = v;
    return true;
}

bool mk_conf_duration(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min_ms,
                      uint64_t max_ms, uint64_t *out, char *err, size_t errlen)
{
    char lo[24], hi[24];
    uint64_t v;

    mk_duration_to_str(min_ms, lo);
    mk_duration_to_str(max_ms, hi);
    if (!mk_str_to_duration_ms(e->value, strlen(e->value), UINT64_MAX / 2, &v)) {
        return mk_conf_error(conf, e->line, err, errlen,
                             "%s: expected a duration such as 30, 500ms, 2s or 1m, got '%s'",
                             e->key, e->value);
    }
    if (v < min_ms || v > max_ms) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: %s is out of range (%s to %s)",
                             e->key, e->value, lo, hi);
    }
    *out = v;
    return true;
}

bool mk_conf_word(const char **cursor, const char **word, size_t *len)
{
    const char *p = *cursor;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p == '\0') {
        *cursor = p;
        return false;
    }
    *word = p;
    while (*p && *p != ' ' && *p != '\t') {
        p++;
    }
    *len = (size_t) (p - *word);
    *cursor = p;
    return true;
}
