/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * embed.c: a program that embeds the server (libmonkey, monkey.h): a JSON
 * status route answered by the program itself, and static files, from one
 * binary. See README.md; docs/library.md has the whole API.
 *
 *     embed [-l LISTEN] [-w WORKERS] [DOCROOT]      (default: 127.0.0.1:8080 htdocs)
 *
 *     GET /api/status    {"server":"monkey","version":...,"requests":N,"uptime":S}
 *     GET /anything      a static file of DOCROOT
 *
 * SIGINT or SIGTERM stop it gracefully.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <monkey/monkey.h>

struct status {
    time_t started;
    atomic_ulong requests; /* handlers run on several workers at once */
};

/* GET /api/status: runs on a worker thread; must not block. */
static void status_route(struct mk_http *h, void *data)
{
    struct status *st = data;
    unsigned long n = atomic_fetch_add(&st->requests, 1) + 1;
    char body[256];

    int len = snprintf(body, sizeof(body),
                       "{\"server\":\"monkey\",\"version\":\"%s\",\"requests\":%lu,"
                       "\"uptime\":%lld}\n",
                       mk_server_version(), n, (long long) (time(NULL) - st->started));
    mk_http_status(h, 200);
    mk_http_header(h, "Content-Type", "application/json");
    mk_http_header(h, "Cache-Control", "no-store");
    mk_http_send(h, body, (size_t) len);
    mk_http_done(h);
}

int main(int argc, char **argv)
{
    const char *listen = "127.0.0.1:8080", *workers = "1", *docroot = "htdocs";
    struct status st = {.started = time(NULL)};
    char err[1024];
    int opt;

    while ((opt = getopt(argc, argv, "l:w:")) != -1) {
        switch (opt) {
        case 'l':
            listen = optarg;
            break;
        case 'w':
            workers = optarg;
            break;
        default:
            fprintf(stderr, "usage: %s [-l LISTEN] [-w WORKERS] [DOCROOT]\n", argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        docroot = argv[optind];
    }

    struct mk_server *srv = mk_server_create();
    mk_server_set_docroot(srv, docroot); /* static files; no configuration files */
    mk_server_set(srv, "Listen", listen);
    mk_server_set(srv, "Workers", workers);
    mk_server_route(srv, NULL, MK_ROUTE_GET, "/api/status", status_route, &st);

    /* Start, then serve until SIGINT/SIGTERM (SIGHUP reloads). */
    int rc = mk_server_run(srv, err, sizeof(err));
    if (rc != MK_OK) {
        fprintf(stderr, "embed: %s\n", err);
    }
    mk_server_destroy(srv);
    return rc == MK_OK ? 0 : 1;
}
