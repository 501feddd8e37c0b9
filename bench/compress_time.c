/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * compress_time.c: the CPU time the server's compression on the fly
 * (server/http/compress.c) takes for one file, per coding and level, as a task
 * thread spends it. Thread CPU time, not wall-clock time: the figure does
 * not move with the machine's load. Built by the build (build/bin/compress-time,
 * with the codings the build has):
 *
 *   build/bin/compress-time FILE [ROUNDS] [br:LEVEL|gzip:LEVEL ...]
 *
 * Without codings: br:5 and gzip:6, the defaults of CompressBrotliLevel and
 * CompressGzipLevel. Prints, per coding and level, the size, the ratio and
 * the median CPU time of ROUNDS (default 5) compressions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <monkey/mk_common.h>

#include "server/http/compress.h"

static double mk_cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int mk_cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static int mk_run(const char *in, size_t len, enum mk_coding c, int level, int rounds)
{
    double *t = calloc((size_t) rounds, sizeof(*t));
    size_t out_len = 0;

    for (int i = 0; i < rounds; i++) {
        char *out;
        double start = mk_cpu_ms();
        int rc = mk_compress(c, level, in, len, &out, &out_len);
        t[i] = mk_cpu_ms() - start;
        if (rc != MK_OK) {
            fprintf(stderr, "%s:%d: compression failed (%d)\n", mk_accept_coding_name(c), level,
                    rc);
            free(t);
            return 1;
        }
        free(out);
    }
    qsort(t, (size_t) rounds, sizeof(*t), mk_cmp_double);
    printf("%-5s %2d  %9zu -> %9zu bytes (%5.1f %%)  %8.2f ms CPU (median of %d)\n",
           mk_accept_coding_name(c), level, len, out_len, 100.0 * (double) out_len / (double) len,
           t[rounds / 2], rounds);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    struct stat st;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    FILE *f;

    if (argc < 2 || rounds < 1 || stat(argv[1], &st) != 0 || !(f = fopen(argv[1], "rb"))) {
        fprintf(stderr, "usage: compress-time FILE [ROUNDS] [br:LEVEL|gzip:LEVEL ...]\n");
        return 2;
    }
    size_t len = (size_t) st.st_size;
    char *in = malloc(len ? len : 1);
    if (fread(in, 1, len, f) != len) {
        fprintf(stderr, "compress-time: cannot read %s\n", argv[1]);
        return 2;
    }
    fclose(f);
    static const char *const defaults[] = {"br:5", "gzip:6"};
    int n = argc > 3 ? argc - 3 : 2, rc = 0;
    for (int i = 0; i < n; i++) {
        const char *spec = argc > 3 ? argv[3 + i] : defaults[i];
        enum mk_coding c = strncmp(spec, "br:", 3) == 0     ? MK_CODING_BR
                           : strncmp(spec, "gzip:", 5) == 0 ? MK_CODING_GZIP
                                                            : MK_CODING_NONE;
        if (c == MK_CODING_NONE) {
            fprintf(stderr, "compress-time: '%s': expected br:LEVEL or gzip:LEVEL\n", spec);
            return 2;
        }
        if (!(mk_compress_built() & MK_CODING_BIT(c))) {
            printf("%-5s     not built\n", mk_accept_coding_name(c));
            continue;
        }
        rc |= mk_run(in, len, c, atoi(strchr(spec, ':') + 1), rounds);
    }
    free(in);
    return rc;
}
