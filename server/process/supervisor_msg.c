/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * supervisor_msg.c: the pure parts of the supervisor (see supervisor.h):
 * the crash window and the back-off that decide when to start the server
 * again or give up, the text of a crash reason, the child's readiness
 * messages rewritten for the service manager, and the variables that tell a
 * child about its supervisor. No I/O, no allocation, no globals.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <monkey/mk_common.h>

#include "supervisor.h"

/* ---- crash window and back-off ------------------------------------------- */

void mk_supervisor_crash_window_init(struct mk_crash_window *w, unsigned limit, uint32_t window_ms)
{
    memset(w, 0, sizeof(*w));
    w->limit = limit < 1                               ? 1
               : limit > MK_SUPERVISOR_CRASH_LIMIT_MAX ? MK_SUPERVISOR_CRASH_LIMIT_MAX
                                                       : limit;
    w->window_ms = window_ms;
}

unsigned mk_supervisor_crash_window_add(struct mk_crash_window *w, uint64_t now_ms)
{
    /* Forget the crashes that left the window. */
    while (w->n > 0 && now_ms - w->at_ms[w->first] >= w->window_ms) {
        w->first = (w->first + 1) % MK_SUPERVISOR_CRASH_LIMIT_MAX;
        w->n--;
    }
    if (w->n == w->limit) { /* full: the oldest makes room (the caller gave up before) */
        w->first = (w->first + 1) % MK_SUPERVISOR_CRASH_LIMIT_MAX;
        w->n--;
    }
    w->at_ms[(w->first + w->n) % MK_SUPERVISOR_CRASH_LIMIT_MAX] = now_ms;
    return ++w->n;
}

uint32_t mk_supervisor_backoff_ms(unsigned n)
{
    if (n <= 1) {
        return 0;
    }
    if (n - 2 >= 16) {
        return MK_SUPERVISOR_BACKOFF_MAX_MS;
    }
    uint32_t ms = 100u << (n - 2);
    return ms > MK_SUPERVISOR_BACKOFF_MAX_MS ? MK_SUPERVISOR_BACKOFF_MAX_MS : ms;
}

uint32_t mk_supervisor_retry_ms(unsigned n)
{
    if (n <= 1) {
        return 100;
    }
    if (n - 1 >= 16) {
        return MK_SUPERVISOR_RETRY_MAX_MS;
    }
    uint32_t ms = 100u << (n - 1);
    return ms > MK_SUPERVISOR_RETRY_MAX_MS ? MK_SUPERVISOR_RETRY_MAX_MS : ms;
}

/* ---- reasons ------------------------------------------------------------- */

static const char *mk_signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].sig == sig) {
            return names[i].name;
        }
    }
    return NULL;
}

void mk_supervisor_reason(int wstatus, char *out, size_t len)
{
    if (len == 0) {
        return;
    }
    if (WIFEXITED(wstatus)) {
        snprintf(out, len, "exit status %d", WEXITSTATUS(wstatus));
        return;
    }
    if (!WIFSIGNALED(wstatus)) {
        snprintf(out, len, "wait status %#x", (unsigned) wstatus);
        return;
    }
    int sig = WTERMSIG(wstatus);
    const char *name = mk_signal_name(sig);
    snprintf(out, len, "signal %d%s%s%s%s", sig, name ? " (" : "", name ? name : "",
             name ? ")" : "", WCOREDUMP(wstatus) ? ", core dumped" : "");
}

/* ---- readiness messages -------------------------------------------------- */

/* Whether the line in[0, l) is "KEY=..." for `key`. */
static bool mk_notify_key_is(const char *in, size_t l, const char *key)
{
    size_t k = strlen(key);
    return l > k && memcmp(in, key, k) == 0 && in[k] == '=';
}

bool mk_supervisor_notify_error(const char *in, size_t len, char *out, size_t outlen)
{
    const char *end = in + len, *found = NULL;
    size_t k = strlen(MK_SUPERVISOR_NOTIFY_ERROR) + 1, found_len = 0;

    while (in < end) {
        const char *nl = memchr(in, '\n', (size_t) (end - in));
        size_t l = nl ? (size_t) (nl - in) : (size_t) (end - in);
        if (mk_notify_key_is(in, l, MK_SUPERVISOR_NOTIFY_ERROR)) {
            found = in + k;
            found_len = l - k;
        }
        in += l + (nl ? 1 : 0);
    }
    if (!found || outlen == 0) {
        return false;
    }
    const char *nul = memchr(found, '\0', found_len);
    if (nul) {
        found_len = (size_t) (nul - found);
    }
    if (found_len >= outlen) {
        found_len = outlen - 1;
    }
    memcpy(out, found, found_len);
    out[found_len] = '\0';
    return true;
}

size_t mk_supervisor_notify_error_format(const char *reason, char *out, size_t outlen)
{
    int n = outlen ? snprintf(out, outlen, "%s=%s", MK_SUPERVISOR_NOTIFY_ERROR, reason) : -1;

    if (n < 0) {
        return 0;
    }
    size_t len = (size_t) n < outlen ? (size_t) n : outlen - 1;
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char) out[i] < 0x20 || out[i] == 0x7f) {
            out[i] = ' ';
        }
    }
    return len;
}

size_t mk_supervisor_notify_rewrite(const char *in, size_t len, long mainpid, char *out,
                                    size_t outlen, bool *ready)
{
    size_t n = 0;
    const char *end = in + len;

    *ready = false;
    if (outlen == 0) {
        return 0;
    }
    out[0] = '\0';
    while (in < end) {
        const char *nl = memchr(in, '\n', (size_t) (end - in));
        size_t l = nl ? (size_t) (nl - in) : (size_t) (end - in);
        const char *eq = memchr(in, '=', l);
        bool keep = eq && eq != in && !memchr(in, '\0', l) &&
                    !(l >= 8 && memcmp(in, "MAINPID=", 8) == 0) &&
                    !mk_notify_key_is(in, l, MK_SUPERVISOR_NOTIFY_ERROR);
        if (keep) {
            if (n + l + 2 > outlen) {
                out[0] = '\0';
                *ready = false;
                return 0;
            }
            memcpy(out + n, in, l);
            n += l;
            out[n++] = '\n';
            if (l == 7 && memcmp(in, "READY=1", 7) == 0) {
                *ready = true;
            }
        }
        in += l + (nl ? 1 : 0);
    }
    if (*ready) {
        int m = snprintf(out + n, outlen - n, "MAINPID=%ld\n", mainpid);
        if (m < 0 || (size_t) m >= outlen - n) {
            out[0] = '\0';
            *ready = false;
            return 0;
        }
        n += (size_t) m;
    }
    if (n > 0) {
        n--; /* no newline after the last line, as sd_notify callers write it */
    }
    out[n] = '\0';
    return n;
}

/* ---- the child's variables ----------------------------------------------- */

/* A decimal number of at most `max`, nothing else; -1 when it is not one. */
static long long mk_parse_count(const char *text, long long max, const char **rest)
{
    char *end;
    long long v;

    if (!text || text[0] < '0' || text[0] > '9') {
        return -1;
    }
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || v > max || (!rest && *end)) {
        return -1;
    }
    if (rest) {
        *rest = end;
    }
    return v;
}

int mk_supervisor_env_parse(const char *pid_text, const char *restarts_text, const char *crash_text,
                            struct mk_supervisor_stats *out)
{
    long long pid = mk_parse_count(pid_text, 0x7fffffff, NULL);
    const char *reason;

    memset(out, 0, sizeof(*out));
    if (pid <= 0) {
        return MK_ERR;
    }
    out->pid = (long) pid;
    long long restarts = mk_parse_count(restarts_text, 0x7fffffff, NULL);
    out->restarts = restarts < 0 ? 0 : (unsigned) restarts;
    long long when = mk_parse_count(crash_text, 0x7fffffffffffLL, &reason);
    if (when > 0 && reason[0] == ' ') {
        out->last_crash = (time_t) when;
        snprintf(out->last_crash_reason, sizeof(out->last_crash_reason), "%s", reason + 1);
    }
    return MK_OK;
}
