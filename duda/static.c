/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/static.c: a service's static files. The route of "/NAME/" and
 * every path beneath it (service.c, after the service's own routes)
 * serves the files beneath its DocumentRoot, opened one segment at a time
 * without following a symbolic link; a missing file or a hidden name
 * (".x", but ".well-known/") is declined, and the site's own files come
 * next.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "duda_internal.h"

static const char *duda_mime(const char *path)
{
    static const char *const table[][2] = {
        {".html", "text/html"},      {".htm", "text/html"},         {".css", "text/css"},
        {".js", "text/javascript"},  {".json", "application/json"}, {".txt", "text/plain"},
        {".png", "image/png"},       {".jpg", "image/jpeg"},        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},       {".svg", "image/svg+xml"},     {".ico", "image/x-icon"},
        {".xml", "application/xml"}, {".wasm", "application/wasm"}, {".pdf", "application/pdf"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof(table) / sizeof(table[0]); i++) {
        if (!strcasecmp(dot, table[i][0])) {
            return table[i][1];
        }
    }
    return "application/octet-stream";
}

/* Open rel beneath the service's DocumentRoot, following no symbolic link. */
static int duda_open_beneath(int dirfd, const char *rel)
{
    char buf[PATH_MAX];
    int fd = dup(dirfd);

    snprintf(buf, sizeof(buf), "%s", rel);
    char *save = NULL;
    for (char *seg = strtok_r(buf, "/", &save); seg && fd >= 0; seg = strtok_r(NULL, "/", &save)) {
        int next = openat(fd, seg, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        close(fd);
        fd = next;
    }
    return fd;
}

int duda_static_handler(struct mk_request *r, void *arg)
{
    const struct duda_service *svc = arg;
    char rel[PATH_MAX];
    struct stat st;
    size_t n;

    const char *p = duda_mk->path(r, &n);
    size_t skip = svc->root ? 0 : strlen(svc->name) + 1;
    if (n < skip || n - skip >= sizeof(rel) - 16) {
        return MK_DECLINED;
    }
    memcpy(rel, p + skip, n - skip);
    rel[n - skip] = '\0';
    if (rel[0] == '\0' || rel[strlen(rel) - 1] == '/') {
        strcat(rel, "index.html");
    }
    for (const char *s = rel; *s; s++) {
        if ((s == rel || s[-1] == '/') && s[0] == '.' && strncmp(s, ".well-known/", 12) != 0) {
            return MK_DECLINED; /* hidden names are never served from a service */
        }
    }
    int fd = duda_open_beneath(svc->docroot_fd, rel);
    if (fd < 0) {
        return MK_DECLINED;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return MK_DECLINED;
    }
    duda_mk->set_status(r, 200);
    duda_mk->set_content_type(r, duda_mime(rel));
    duda_mk->set_body_file(r, fd, 0, (uint64_t) st.st_size);
    return MK_OK;
}
