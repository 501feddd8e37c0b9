/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * html.c: the listing page, on a task thread: a growing buffer, names
 * HTML-escaped in text (& < > " ', control bytes and invalid UTF-8 shown
 * as U+FFFD) and percent-encoded in links, sizes and times for people.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_json.h>
#include <monkey/mk_util.h>

#include "dirlisting.h"

static const char dirlisting_style[] = "body{font-family:system-ui,sans-serif;margin:2em}"
                                       "table{border-collapse:collapse}"
                                       "th,td{padding:.2em 1em;text-align:left}"
                                       "td.s{text-align:right}"
                                       "tr:nth-child(even){background:#f4f4f4}";

/* Make room for `n` more bytes; false (and `failed` latched) when memory is short. */
bool dirlisting_buf_reserve(struct dirlisting_buf *b, size_t n)
{
    if (b->failed) {
        return false;
    }
    if (b->cap - b->len >= n) {
        return true;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

/* Append `n` bytes; nothing once the buffer has failed. */
static void dirlisting_buf_put(struct dirlisting_buf *b, const char *s, size_t n)
{
    if (dirlisting_buf_reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

/* Append a NUL-terminated string. */
static void dirlisting_buf_puts(struct dirlisting_buf *b, const char *s)
{
    dirlisting_buf_put(b, s, strlen(s));
}

/*
 * Append `n` bytes of `s` as HTML text or attribute value: & < > " ' as
 * character references, control bytes and invalid UTF-8 as U+FFFD.
 */
static void dirlisting_buf_html(struct dirlisting_buf *b, const char *s, size_t n)
{
    static const char replacement[] = "\xef\xbf\xbd";
    const unsigned char *p = (const unsigned char *) s;
    size_t i = 0;

    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '&' && p[run] != '<' &&
               p[run] != '>' && p[run] != '"' && p[run] != '\'') {
            run++;
        }
        dirlisting_buf_put(b, s + i, run - i);
        if (run == n) {
            return;
        }
        i = run;
        size_t len = 0;
        switch (p[i]) {
        case '&':
            dirlisting_buf_puts(b, "&amp;");
            break;
        case '<':
            dirlisting_buf_puts(b, "&lt;");
            break;
        case '>':
            dirlisting_buf_puts(b, "&gt;");
            break;
        case '"':
            dirlisting_buf_puts(b, "&quot;");
            break;
        case '\'':
            dirlisting_buf_puts(b, "&#39;");
            break;
        default:
            len = p[i] >= 0x80 ? mk_utf8_len(p + i, n - i) : 0;
            if (len) {
                dirlisting_buf_put(b, s + i, len);
                i += len;
                continue;
            }
            dirlisting_buf_put(b, replacement, 3);
        }
        i++;
    }
}

/* Append `s` percent-encoded: every byte except A-Z a-z 0-9 - . _ ~ as %XX. */
static void dirlisting_buf_url(struct dirlisting_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);

    if (!dirlisting_buf_reserve(b, 3 * n)) {
        return;
    }
    char *w = b->p + b->len;
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *w++ = (char) c;
            continue;
        }
        *w++ = '%';
        *w++ = hex[c >> 4];
        *w++ = hex[c & 15];
    }
    b->len = (size_t) (w - b->p);
}

/* A size for people: "512 B", "1.5 KiB", "3.0 MiB" (binary units, one decimal). */
static void dirlisting_human_size(uint64_t size, char *out, size_t outlen)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double) size;
    int u = -1;

    if (size < 1024) {
        snprintf(out, outlen, "%u B", (unsigned) size);
        return;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, outlen, "%.1f %s", v, units[u]);
}

/* Append the modification time cell: <time datetime="…Z">YYYY-MM-DD HH:MM:SS</time>, UTC. */
static void dirlisting_buf_time(struct dirlisting_buf *b, time_t t)
{
    char text[96];
    struct tm tm;

    if (!gmtime_r(&t, &tm)) {
        return;
    }
    int n =
        snprintf(text, sizeof(text),
                 "<time datetime=\"%04d-%02d-%02dT%02d:%02d:%02dZ\">"
                 "%04d-%02d-%02d %02d:%02d:%02d</time>",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (n > 0 && (size_t) n < sizeof(text)) {
        dirlisting_buf_put(b, text, (size_t) n);
    }
}

/* Append the document head, the table head and the parent row (except at the root). */
static void dirlisting_render_head(struct dirlisting_buf *b, const struct dirlisting_job *job)
{
    size_t plen = strlen(job->path);

    dirlisting_buf_puts(b,
                        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<title>Index of ");
    dirlisting_buf_html(b, job->path, plen);
    dirlisting_buf_puts(b, "</title>\n");
    if (job->settings.stylesheet[0]) {
        dirlisting_buf_puts(b, "<link rel=\"stylesheet\" href=\"");
        dirlisting_buf_html(b, job->settings.stylesheet, strlen(job->settings.stylesheet));
        dirlisting_buf_puts(b, "\">\n");
    }
    else {
        dirlisting_buf_puts(b, "<style>");
        dirlisting_buf_puts(b, dirlisting_style);
        dirlisting_buf_puts(b, "</style>\n");
    }
    dirlisting_buf_puts(b, "</head>\n<body>\n<h1>Index of ");
    dirlisting_buf_html(b, job->path, plen);
    dirlisting_buf_puts(b, "</h1>\n<table>\n<thead><tr><th>Name</th><th>Size</th>"
                           "<th>Modified (UTC)</th></tr></thead>\n<tbody>\n");
    if (!job->root) {
        dirlisting_buf_puts(b, "<tr class=\"parent\"><td class=\"n\"><a href=\"../\">../</a></td>"
                               "<td class=\"s\">-</td><td class=\"m\"></td></tr>\n");
    }
}

/* One line per entry: <tr class="d|f"><td class="n"><a href=…>…</a></td>… */
static void dirlisting_render_entry(struct dirlisting_buf *b, const struct dirlisting_entry *e)
{
    char human[32], exact[48];

    dirlisting_buf_puts(b, e->dir ? "<tr class=\"d\"><td class=\"n\"><a href=\""
                                  : "<tr class=\"f\"><td class=\"n\"><a href=\"");
    dirlisting_buf_url(b, e->name);
    dirlisting_buf_puts(b, e->dir ? "/\">" : "\">");
    dirlisting_buf_html(b, e->name, strlen(e->name));
    dirlisting_buf_puts(b, e->dir ? "/</a></td>" : "</a></td>");
    if (e->dir) {
        dirlisting_buf_puts(b, "<td class=\"s\">-</td>");
    }
    else {
        dirlisting_human_size(e->size, human, sizeof(human));
        snprintf(exact, sizeof(exact), "%llu bytes", (unsigned long long) e->size);
        dirlisting_buf_puts(b, "<td class=\"s\" title=\"");
        dirlisting_buf_puts(b, exact);
        dirlisting_buf_puts(b, "\">");
        dirlisting_buf_puts(b, human);
        dirlisting_buf_puts(b, "</td>");
    }
    dirlisting_buf_puts(b, "<td class=\"m\">");
    dirlisting_buf_time(b, e->mtime);
    dirlisting_buf_puts(b, "</td></tr>\n");
}

/* Append the whole page for the sorted list `l`; failures latch in b->failed. */
void dirlisting_render(struct dirlisting_buf *b, const struct dirlisting_job *job,
                       const struct dirlisting_list *l)
{
    char note[160];

    dirlisting_render_head(b, job);
    for (size_t i = 0; i < l->n; i++) {
        dirlisting_render_entry(b, &l->v[i]);
    }
    dirlisting_buf_puts(b, "</tbody>\n</table>\n");
    size_t files = l->n - l->n_dirs;
    snprintf(note, sizeof(note), "<p class=\"count\">%zu %s, %zu %s</p>\n", l->n_dirs,
             mk_plural(l->n_dirs, "directory", "directories"), files,
             mk_plural(files, "file", "files"));
    dirlisting_buf_puts(b, note);
    if (l->truncated) {
        snprintf(note, sizeof(note),
                 "<p class=\"truncated\">Truncated: this directory has more than %lu %s; "
                 "only %lu %s listed.</p>\n",
                 job->settings.max_entries,
                 mk_plural(job->settings.max_entries, "entry", "entries"),
                 job->settings.max_entries, mk_plural(job->settings.max_entries, "is", "are"));
        dirlisting_buf_puts(b, note);
    }
    dirlisting_buf_puts(b, "</body>\n</html>\n");
}
