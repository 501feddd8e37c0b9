/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_h2.c: libFuzzer target for the HTTP/2 code (server/proto/h2.c and
 * the files of h2_internal.h). Each input is the byte stream of one HTTP/2
 * connection after the client preface (frames, as a client would send
 * them): it goes through a whole server driven by the
 * loopback harness (tests/unit/server/loopback.h), negotiated as "h2", so
 * nghttp2 parses it and our callbacks turn streams into requests that run
 * through the stages, the static handler and the response path. The site
 * holds a small file and a file larger than any window.
 *
 * Invariants (each a crash when broken): no memory error or undefined
 * behaviour (ASan, UBSan), no leak once the connection is closed, and the
 * server's output starts with its SETTINGS frame (it always answers the
 * preface with SETTINGS, whatever follows).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "loopback.h"

static struct mk_loopback lb;
static char dir[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_h2_close(void)
{
    mk_loopback_close(&lb);
    mk_loopback_dir_free(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[1024];
    static char big[200001];

    (void) argc;
    (void) argv;
    mk_loopback_dir(dir, NULL, "    LogLevel error\n    MaxRequestSize 4K\n");
    memset(big, 'x', sizeof(big) - 1);
    mk_loopback_file(dir, "htdocs/big.txt", big);
    if (mk_loopback_open(&lb, dir, err, sizeof(err)) != MK_OK) {
        abort();
    }
    atexit(fuzz_h2_close);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t len = sizeof(preface) - 1 + size, out_len;
    char *in = malloc(len ? len : 1);
    char *out;

    MK_FUZZ_CHECK(in != NULL);
    memcpy(in, preface, sizeof(preface) - 1);
    if (size) {
        memcpy(in + sizeof(preface) - 1, data, size);
    }
    out = mk_loopback_run_bytes(&lb, in, len, "h2", &out_len);
    /* the server's SETTINGS: a frame of type 4 on stream 0 comes first */
    MK_FUZZ_CHECK(out_len >= 9 && (unsigned char) out[3] == 4 && out[5] == 0 && out[8] == 0);
    free(out);
    free(in);
    return 0;
}
