/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * replay.c: a main() for a fuzz target without libFuzzer, so that the
 * committed corpus and regression inputs run in every unit-test build
 * (gcc, with or without the sanitizers) and not only under `make fuzz`.
 *
 *   replay_NAME FILE-OR-DIRECTORY...
 *
 * Calls LLVMFuzzerInitialize once when the target has one, then
 * LLVMFuzzerTestOneInput once for each file given and each regular file of
 * each directory given (in name order, not recursive), with the file's
 * bytes in a buffer of exactly their size (so that the sanitizers see a
 * read past the end). A broken invariant traps and a sanitizer finding
 * aborts, as under libFuzzer: the test fails with the input's name on
 * stderr. Exits 0 after at least one input, 1 when there was none or a
 * file could not be read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target: a weak reference, NULL when it has none. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/*
 * Read all of `path` into a malloc'd buffer of exactly its size (*len), so
 * that the sanitizers catch a read past the input (one byte for an empty
 * file, never read); NULL on error.
 */
static uint8_t *replay_read(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    uint8_t *buf;
    size_t have = 0, size;

    if (fd < 0) {
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return NULL;
    }
    size = (size_t) st.st_size;
    buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return NULL;
    }
    while (have < size) {
        ssize_t n = read(fd, buf + have, size - have);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            free(buf);
            close(fd);
            errno = n == 0 ? EIO : errno;
            return NULL;
        }
        have += (size_t) n;
    }
    close(fd);
    *len = have;
    return buf;
}

/* Run one file: 0, or -1 when it could not be read. */
static int replay_file(const char *path)
{
    size_t len = 0;
    uint8_t *data = replay_read(path, &len);

    if (!data) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    return 0;
}

static int replay_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Run every regular file of `dir` in name order: the count, or -1. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    long done = 0;

    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(names, cap * sizeof(*names));
            if (!more) {
                abort();
            }
            names = more;
        }
        size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
        names[n] = malloc(len);
        if (!names[n]) {
            abort();
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n) {
        qsort(names, n, sizeof(*names), replay_name_cmp);
    }
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (done >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            done = replay_file(names[i]) == 0 ? done + 1 : -1;
        }
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    long total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) {
        LLVMFuzzerInitialize(&argc, &argv);
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long n;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (n < 0) {
            return 1;
        }
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no input\n");
        return 1;
    }
    fprintf(stderr, "replay: %ld inputs, no finding\n", total);
    return 0;
}
