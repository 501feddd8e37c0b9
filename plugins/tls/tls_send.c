/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_send.c: what a TLS connection writes, with as few copies and system
 * calls as OpenSSL allows.
 *
 * What it guarantees:
 *   - writev: pieces smaller than 16 KiB (a head and a small body) are
 *     gathered into one record; a large first piece goes to SSL_write
 *     without a copy. A head written with MK_IO_MORE (a file body follows
 *     at once) is held, up to TLS_HOLD_MAX bytes, and goes out with the
 *     first block of the body: a small file and its head are one record
 *     and one system call. A first piece of more than one record (HTTP/2
 *     DATA frames) goes through the batching BIO, up to four records a
 *     call and one write(2), reported only once they are out.
 *   - sendfile with kTLS (the kernel encrypts): SSL_sendfile, no copy in
 *     user space. kTLS is on when the site's KTLS is auto, the kernel has
 *     the tls ULP and OpenSSL could hand the keys over after the handshake.
 *   - sendfile without kTLS: the file is read in blocks of up to 64 KiB
 *     straight into the connection's stage and written with SSL_write;
 *     the batching BIO keeps the block's records (OpenSSL encrypts each
 *     16 KiB record into one buffer of its own, reused for the next) and
 *     sends them with one write(2) instead of one per record: a copy of
 *     the records for three system calls in four.
 *   - OpenSSL's retry rule: a write that returned WANT_WRITE is repeated
 *     with the same bytes. The staged bytes stay put until every record of
 *     them is out; only then are they counted as written (the server
 *     repeats a call that reported EAGAIN with the same file offset or the
 *     same buffers, which this relies on and checks for files).
 *   - Memory: the stage (64 KiB) and the batch buffer after it (64 KiB
 *     and a little), one allocation, exist only while a body is being
 *     sent; an idle connection has none.
 *
 * Threads: a connection's calls run on its worker; tls_send_init() and
 * tls_send_exit() on the controlling thread.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls.h"

/* Whether the word "tls" is in /proc/sys/net/ipv4/tcp_available_ulp. */
bool tls_ktls_available(void)
{
    char line[256];
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    bool found = false;

    if (!f) {
        return false;
    }
    if (fgets(line, sizeof(line), f)) {
        for (char *w = strtok(line, " \t\n"); w; w = strtok(NULL, " \t\n")) {
            found = found || strcmp(w, "tls") == 0;
        }
    }
    fclose(f);
    return found;
}

static BIO_METHOD *tls_batch_method;

/* ---- the batching BIO ------------------------------------------------------ */

/*
 * A filter over the socket BIO. While `batching` is set, records are
 * appended to the batch buffer; otherwise, or when a record does not fit,
 * what is buffered goes out first and the record passes through. BIO_flush
 * sends the buffer. Retry flags are the socket BIO's, so OpenSSL sees
 * WANT_WRITE as from the socket itself, and repeats the record it was
 * writing; the records already buffered count as written.
 */

/* Send what the buffer holds: 1 when it is empty, else <= 0 with the retry flags set. */
static int tls_batch_drain(BIO *b)
{
    struct tls_send *s = BIO_get_data(b);

    while (s->batch_off < s->batch_len) {
        size_t left = s->batch_len - s->batch_off;
        int n = BIO_write(BIO_next(b), s->batch + s->batch_off, (int) left);
        if (n <= 0) {
            BIO_copy_next_retry(b);
            return n < 0 ? -1 : 0;
        }
        s->batch_off += (size_t) n;
    }
    s->batch_len = s->batch_off = 0;
    return 1;
}

/* Whether `n` more bytes go into the buffer rather than to the socket. */
static bool tls_batch_takes(const struct tls_send *s, size_t n)
{
    return s->batching && s->batch && s->batch_len + n <= TLS_BATCH_SIZE;
}

static int tls_batch_write(BIO *b, const char *in, int inl)
{
    struct tls_send *s = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (inl <= 0) {
        return 0;
    }
    if (!tls_batch_takes(s, (size_t) inl)) {
        int rc = tls_batch_drain(b);
        if (rc <= 0) {
            return rc;
        }
    }
    if (tls_batch_takes(s, (size_t) inl)) {
        memcpy(s->batch + s->batch_len, in, (size_t) inl);
        s->batch_len += (size_t) inl;
        return inl;
    }
    int n = BIO_write(BIO_next(b), in, inl);
    BIO_copy_next_retry(b);
    return n;
}

static long tls_batch_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct tls_send *s = BIO_get_data(b);
    BIO *next = BIO_next(b);

    switch (cmd) {
    case BIO_CTRL_FLUSH:
        BIO_clear_retry_flags(b);
        if (tls_batch_drain(b) <= 0) {
            return 0;
        }
        return next ? BIO_ctrl(next, cmd, num, ptr) : 1;
    case BIO_CTRL_WPENDING:
        return (long) (s->batch_len - s->batch_off) + (next ? BIO_ctrl(next, cmd, num, ptr) : 0);
    default:
        return next ? BIO_ctrl(next, cmd, num, ptr) : 0;
    }
}

static int tls_batch_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* The data is the connection's struct tls_send: nothing of its own to free. */
static int tls_batch_destroy(BIO *b)
{
    BIO_set_data(b, NULL);
    return 1;
}

int tls_send_init(void)
{
    tls_batch_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "monkey tls batch");
    if (!tls_batch_method || !BIO_meth_set_write(tls_batch_method, tls_batch_write) ||
        !BIO_meth_set_ctrl(tls_batch_method, tls_batch_ctrl) ||
        !BIO_meth_set_create(tls_batch_method, tls_batch_create) ||
        !BIO_meth_set_destroy(tls_batch_method, tls_batch_destroy)) {
        BIO_meth_free(tls_batch_method);
        tls_batch_method = NULL;
        return MK_ERR;
    }
    return MK_OK;
}

void tls_send_exit(void)
{
    BIO_meth_free(tls_batch_method);
    tls_batch_method = NULL;
}

void tls_send_established(struct tls_conn *t)
{
    t->send.fd = -1;
    t->send.ktls = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) != 0;
}

/*
 * Put the batching BIO over the socket's for a stage of more than one
 * record (one record is one write anyway): MK_OK, or MK_ERR without memory
 * (the records then go out one write each). It stays only while a body is
 * being sent: every other write would pay for its layer.
 */
static int tls_batch_attach(struct tls_conn *t)
{
    struct tls_send *s = &t->send;
    BIO *sock = SSL_get_wbio(t->ssl);

    s->bio = BIO_new(tls_batch_method);
    if (!s->bio) {
        ERR_clear_error();
        return MK_ERR;
    }
    BIO_set_data(s->bio, s);
    BIO_up_ref(sock);
    BIO_push(s->bio, sock);
    SSL_set0_wbio(t->ssl, s->bio); /* the socket BIO stays the read BIO */
    return MK_OK;
}

/*
 * Take the batching BIO off (its buffer is empty) and free it. Not while
 * OpenSSL is in a handshake (a post-handshake message half written): its
 * own buffering BIO is then over ours, and ours stays, passing writes
 * through, until the next body or SSL_free.
 */
static void tls_batch_detach(struct tls_conn *t)
{
    struct tls_send *s = &t->send;

    if (s->bio && !SSL_in_init(t->ssl)) {
        SSL_set0_wbio(t->ssl, BIO_pop(s->bio)); /* frees the batching BIO */
        s->bio = NULL;
    }
}

/* Free the stage and the batching BIO when nothing waits in them. */
static void tls_send_idle(struct tls_conn *t)
{
    struct tls_send *s = &t->send;

    if (s->held || s->len || s->batch_len || s->wbatch) {
        return;
    }
    tls_batch_detach(t);
    free(s->stage);
    s->stage = s->batch = NULL;
}

/* The SSL, and with it the batching BIO, was freed by the caller. */
void tls_send_release(struct tls_conn *t)
{
    struct tls_send *s = &t->send;

    free(s->stage);
    s->stage = s->batch = NULL;
    s->bio = NULL;
    s->held = s->len = s->batch_len = s->batch_off = s->wpos = 0;
    s->wbatch = false;
}

/*
 * The stage and, after it, the batch buffer, in one allocation: freed apart,
 * the two made the heap's top large enough for glibc to give it back to
 * the kernel (madvise) after every body, and fault it in again for the
 * next. MK_OK or MK_ERR (errno ENOMEM).
 */
static int tls_send_buffers(struct tls_send *s)
{
    if (!s->stage) {
        s->stage = malloc(TLS_SEND_BLOCK + TLS_BATCH_SIZE);
        s->batch = s->stage ? s->stage + TLS_SEND_BLOCK : NULL;
    }
    if (!s->stage) {
        errno = ENOMEM;
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * SSL_write bytes [*pos, len) of p and send every record of them: MK_OK
 * (all out), MK_AGAIN (the socket is full; the direction wanted is set;
 * call again with the same bytes), MK_ERR. *pos moves only on success, so
 * an SSL_write that wanted to write is repeated with the same pointer and
 * length, as OpenSSL requires; the records the batching BIO holds (when it
 * is in place) are sent before MK_OK.
 */
static int tls_send_through(struct mk_conn *c, struct tls_conn *t, const unsigned char *p,
                            size_t len, size_t *pos)
{
    struct tls_send *s = &t->send;

    while (*pos < len) {
        tls_err_reset();
        s->batching = true;
        int n = SSL_write(t->ssl, p + *pos, (int) (len - *pos));
        s->batching = false;
        if (n <= 0) {
            return tls_result(c, t, n) == MK_AGAIN ? MK_AGAIN : MK_ERR;
        }
        *pos += (size_t) n;
    }
    if (s->batch_len && BIO_flush(s->bio) <= 0) {
        if (!BIO_should_retry(s->bio)) {
            return MK_ERR;
        }
        tls_api->conn_io_want(c, MK_IO_WANT_WRITE);
        return MK_AGAIN;
    }
    return MK_OK;
}

/* Write the staged bytes and send every record of them (tls_send_through). */
static int tls_send_stage(struct mk_conn *c, struct tls_conn *t)
{
    struct tls_send *s = &t->send;

    if (!s->bio && !s->ktls && s->len - s->pos > SSL3_RT_MAX_PLAIN_LENGTH) {
        (void) tls_batch_attach(t);
    }
    return tls_send_through(c, t, s->stage, s->len, &s->pos);
}

/*
 * Finish the staged write: the body bytes it carried (those not reported
 * before), or -1 with errno EAGAIN (call again) or EPIPE.
 */
static ssize_t tls_send_staged(struct mk_conn *c, struct tls_conn *t)
{
    struct tls_send *s = &t->send;
    int rc = tls_send_stage(c, t);

    if (rc != MK_OK) {
        if (rc == MK_ERR) {
            ERR_clear_error();
        }
        errno = rc == MK_AGAIN ? EAGAIN : EPIPE;
        return -1;
    }
    size_t body = s->len - s->reported;
    s->len = s->pos = s->reported = 0;
    return (ssize_t) body;
}

/* ---- writev ------------------------------------------------------------------ */

/* Copy up to `max` bytes of the pieces to `dst`; the number copied. */
static size_t tls_gather(unsigned char *dst, size_t max, const struct iovec *iov, int iovcnt)
{
    size_t n = 0;

    for (int i = 0; i < iovcnt && n < max; i++) {
        size_t take = iov[i].iov_len < max - n ? iov[i].iov_len : max - n;
        memcpy(dst + n, iov[i].iov_base, take);
        n += take;
    }
    return n;
}

/*
 * Write `want` bytes of the caller's first piece, more than one record,
 * through the batching BIO: its records (up to four, TLS_SEND_BLOCK) leave
 * with one write(2). The bytes are reported only once SSL_write took them
 * all and the records are out; until then the call reports EAGAIN (the
 * direction wanted set) and must be repeated with the same bytes, as
 * OpenSSL's retry rule already asks: `wpos` keeps how many SSL_write took,
 * so nothing is held once the call returned a count. -1 with errno EPIPE
 * on failure.
 */
static ssize_t tls_writev_batched(struct mk_conn *c, struct tls_conn *t, const unsigned char *p,
                                  size_t want)
{
    struct tls_send *s = &t->send;

    s->wbatch = true;
    int rc = tls_send_through(c, t, p, want, &s->wpos);
    if (rc == MK_AGAIN) {
        t->retry_len = (int) want;
        errno = EAGAIN;
        return -1;
    }
    s->wbatch = false;
    s->wpos = 0;
    if (rc != MK_OK) {
        ERR_clear_error();
        errno = EPIPE;
        return -1;
    }
    t->retry_len = 0;
    tls_send_idle(t);
    return (ssize_t) want;
}

/*
 * Small pieces (a head and a small body) are gathered into one record; a
 * large first piece goes to SSL_write as it is, without a copy, and when
 * it is more than one record (an HTTP/2 batch of DATA frames, a large
 * streamed piece) up to four records go through the batching BIO (without
 * kTLS). A write that OpenSSL could not finish is repeated with the same
 * length, as OpenSSL requires (the server passes the same bytes again).
 */
static ssize_t tls_writev_direct(struct mk_conn *c, struct tls_conn *t, const struct iovec *iov,
                                 int iovcnt, size_t total)
{
    struct tls_send *s = &t->send;
    unsigned char gather[TLS_HOLD_MAX];
    size_t want;
    const void *p;

    if (t->retry_len) {
        want = (size_t) t->retry_len < total ? (size_t) t->retry_len : total;
    }
    else if (iov[0].iov_len >= sizeof(gather)) {
        want = iov[0].iov_len > INT_MAX ? INT_MAX : iov[0].iov_len;
        if (!s->ktls && want > SSL3_RT_MAX_PLAIN_LENGTH) {
            want = want < TLS_SEND_BLOCK ? want : TLS_SEND_BLOCK;
            if (tls_send_buffers(s) == MK_OK && (s->bio || tls_batch_attach(t) == MK_OK)) {
                return tls_writev_batched(c, t, iov[0].iov_base, want);
            }
            tls_send_idle(t); /* no memory: one write(2) a record */
        }
    }
    else {
        want = total < sizeof(gather) ? total : sizeof(gather);
    }
    if (s->wbatch) {
        if (want != (size_t) t->retry_len || iov[0].iov_len < want) {
            errno = EIO; /* not the batched call that reported EAGAIN, repeated */
            return -1;
        }
        return tls_writev_batched(c, t, iov[0].iov_base, want);
    }
    if (iov[0].iov_len >= want) {
        p = iov[0].iov_base;
    }
    else {
        tls_gather(gather, want, iov, iovcnt);
        p = gather;
    }
    tls_err_reset();
    int n = SSL_write(t->ssl, p, (int) want);
    if (n > 0) {
        t->retry_len = 0;
        return n;
    }
    if (tls_result(c, t, n) == MK_AGAIN) {
        t->retry_len = (int) want;
        errno = EAGAIN;
        return -1;
    }
    ERR_clear_error();
    errno = EPIPE;
    return -1;
}

ssize_t tls_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    struct tls_conn *t = *tls_api->conn_transport_data(c);
    struct tls_send *s = &t->send;
    size_t total = 0;

    for (int i = 0; i < iovcnt; i++) {
        total += iov[i].iov_len;
    }
    if (total == 0) {
        return 0;
    }
    if (s->len && s->fd != -1) {
        errno = EIO; /* a file's staged block waits: the server must repeat its sendfile */
        return -1;
    }
    if (!s->len && s->held) {
        /* The head held for a body that came as pieces: both in one write. */
        s->len = s->held + tls_gather(s->stage + s->held, TLS_SEND_BLOCK - s->held, iov, iovcnt);
        s->reported = s->held;
        s->held = s->pos = 0;
        s->fd = -1;
    }
    if (s->len) {
        ssize_t n = tls_send_staged(c, t);
        tls_send_idle(t);
        return n;
    }
    if ((flags & MK_IO_MORE) && !t->retry_len && total <= TLS_HOLD_MAX) {
        if (tls_send_buffers(s) != MK_OK) {
            return -1;
        }
        s->held = tls_gather(s->stage, TLS_HOLD_MAX, iov, iovcnt);
        return (ssize_t) s->held;
    }
    return tls_writev_direct(c, t, iov, iovcnt, total);
}

/* ---- sendfile ---------------------------------------------------------------- */

/* kTLS: the kernel reads the file and encrypts it. */
static ssize_t tls_sendfile_ktls(struct mk_conn *c, struct tls_conn *t, int fd, off_t *offset,
                                 size_t len)
{
    tls_err_reset();
    ossl_ssize_t n = SSL_sendfile(t->ssl, fd, *offset, len, 0);
    if (n > 0) {
        *offset += (off_t) n;
        return (ssize_t) n;
    }
    if (n == 0) {
        return 0; /* the end of the file: it shrank */
    }
    if (tls_result(c, t, -1) == MK_AGAIN) {
        errno = EAGAIN;
        return -1;
    }
    ERR_clear_error();
    errno = EPIPE;
    return -1;
}

/* Read the next block of the file after a held head: its size, 0 at the end, -1. */
static ssize_t tls_stage_file(struct tls_send *s, int fd, off_t offset, size_t len)
{
    size_t room = TLS_SEND_BLOCK - s->held;
    size_t want = len < room ? len : room;
    ssize_t n;

    if (tls_send_buffers(s) != MK_OK) {
        return -1;
    }
    do {
        n = pread(fd, s->stage + s->held, want, offset);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        return n;
    }
    s->len = s->held + (size_t) n;
    s->reported = s->held;
    s->held = s->pos = 0;
    s->fd = fd;
    s->off = offset;
    return n;
}

int tls_sendfile_copies(struct mk_conn *c)
{
    struct tls_conn *t = *tls_api->conn_transport_data(c);

    return !t->send.ktls;
}

ssize_t tls_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len)
{
    struct tls_conn *t = *tls_api->conn_transport_data(c);
    struct tls_send *s = &t->send;

    if (len == 0) {
        return 0;
    }
    if (s->wbatch) {
        errno = EIO; /* a batched writev waits: the server must repeat it */
        return -1;
    }
    if (!s->len) {
        if (s->ktls && !s->held && !t->retry_len) {
            return tls_sendfile_ktls(c, t, fd, offset, len);
        }
        ssize_t n = tls_stage_file(s, fd, *offset, len);
        if (n <= 0) {
            return n;
        }
    }
    else if (s->fd != fd || s->off != *offset) {
        errno = EIO; /* not the call that reported EAGAIN, repeated */
        return -1;
    }
    ssize_t n = tls_send_staged(c, t);
    if (n < 0) {
        return -1;
    }
    s->fd = -1;
    *offset += (off_t) n;
    if ((size_t) n == len) {
        tls_send_idle(t); /* the body, or this turn of it, is out */
    }
    return n;
}
