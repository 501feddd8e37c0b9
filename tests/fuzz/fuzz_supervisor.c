/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_supervisor.c: libFuzzer target for the two parsers of the
 * supervisor (server/process/supervisor_msg.c): mk_supervisor_notify_rewrite(), which
 * reads the readiness datagrams of the child (and mk_supervisor_notify_error,
 * the start error in them), and mk_supervisor_env_parse(),
 * which reads the variables a child finds at start. The input is split at
 * its first two NUL bytes into the three variables; the whole input is the
 * datagram.
 *
 * Invariants (each a crash when broken):
 *  - the rewrite is NUL terminated, its length is what it returns and fits
 *    the buffer; it holds no MAINPID line but the one it adds, which comes
 *    last and exactly when READY=1 was a line of the input;
 *  - every line of the rewrite is a line of the input holding '=' (or the
 *    added MAINPID);
 *  - a buffer too small gives 0 and no READY, never a cut message;
 *  - the rewrite never holds the child's start error; that error is NUL
 *    terminated within its buffer, and formatted again it is one line;
 *  - env_parse succeeds exactly on a positive decimal pid without other
 *    bytes; its reason is NUL terminated and empty when last_crash is 0.
 */
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/process/supervisor.h"

#include "fuzz_check.h"

/* Whether `line` (len bytes) is a whole line of in. */
static bool has_line(const char *in, size_t inlen, const char *line, size_t len)
{
    const char *p = in, *end = in + inlen;

    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
        if (l == len && memcmp(p, line, len) == 0) {
            return true;
        }
        if (!nl) {
            break;
        }
        p = nl + 1;
    }
    return false;
}

static void check_rewrite(const char *in, size_t len, size_t outlen)
{
    char *out = malloc(outlen ? outlen : 1);
    bool ready;
    size_t n = mk_supervisor_notify_rewrite(in, len, 4242, out, outlen, &ready);

    if (outlen == 0) {
        MK_FUZZ_CHECK(n == 0 && !ready);
        free(out);
        return;
    }
    MK_FUZZ_CHECK(n < outlen && out[n] == '\0' && strlen(out) == n);
    MK_FUZZ_CHECK(!ready || has_line(in, len, "READY=1", 7));
    const char *p = out, *end = out + n;
    bool saw_mainpid = false;
    while (n > 0 && p <= end) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
        MK_FUZZ_CHECK(l > 0 && memchr(p, '=', l));
        if (l >= 8 && memcmp(p, "MAINPID=", 8) == 0) {
            MK_FUZZ_CHECK(ready && !saw_mainpid && !nl && l == 12 &&
                          memcmp(p, "MAINPID=4242", 12) == 0);
            saw_mainpid = true;
        }
        else {
            MK_FUZZ_CHECK(has_line(in, len, p, l));
            MK_FUZZ_CHECK(!(l > strlen(MK_SUPERVISOR_NOTIFY_ERROR) &&
                            memcmp(p, MK_SUPERVISOR_NOTIFY_ERROR "=",
                                   strlen(MK_SUPERVISOR_NOTIFY_ERROR) + 1) == 0));
        }
        if (!nl) {
            break;
        }
        p = nl + 1;
    }
    MK_FUZZ_CHECK(saw_mainpid == ready);
    free(out);
}

/* The start error of a message: NUL terminated within out, and from a line of the input. */
static void check_error(const char *in, size_t len, size_t outlen)
{
    char out[64];
    memset(out, 'x', sizeof(out));
    if (!mk_supervisor_notify_error(in, len, out, outlen)) {
        MK_FUZZ_CHECK(outlen == 0 || out[0] == 'x');
        return;
    }
    MK_FUZZ_CHECK(outlen > 0 && memchr(out, '\0', outlen) && !strchr(out, '\n'));
    char msg[128];
    size_t n = mk_supervisor_notify_error_format(out, msg, sizeof(msg));
    MK_FUZZ_CHECK(n == strlen(msg) && n < sizeof(msg));
    for (size_t i = 0; i < n; i++) {
        MK_FUZZ_CHECK((unsigned char) msg[i] >= 0x20 && msg[i] != 0x7f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 1);
    struct mk_supervisor_stats st;

    memcpy(in, data, size);
    in[size] = '\0';
    check_rewrite(in, size, 1100);
    check_rewrite(in, size, size % 64);
    check_error(in, size, 64);
    check_error(in, size, size % 64);

    const char *pid = in, *restarts = NULL, *crash = NULL;
    size_t plen = strlen(in);
    if (plen < size) {
        restarts = in + plen + 1;
        size_t rlen = strlen(restarts);
        if (plen + 1 + rlen < size) {
            crash = restarts + rlen + 1;
        }
    }
    int rc = mk_supervisor_env_parse(pid, restarts, crash, &st);
    bool digits = plen > 0 && strspn(pid, "0123456789") == plen;
    if (rc == MK_OK) {
        MK_FUZZ_CHECK(digits && st.pid > 0);
        MK_FUZZ_CHECK(memchr(st.last_crash_reason, '\0', sizeof(st.last_crash_reason)));
        MK_FUZZ_CHECK(st.last_crash != 0 || st.last_crash_reason[0] == '\0');
    }
    else {
        MK_FUZZ_CHECK(rc == MK_ERR);
        MK_FUZZ_CHECK(!digits || strtoll(pid, NULL, 10) <= 0 ||
                      strtoll(pid, NULL, 10) > 0x7fffffff);
    }
    free(in);
    return 0;
}
