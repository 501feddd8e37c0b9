/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls.h: what the parts of the tls plugin share.
 *
 *   tls.c        the life cycle, contexts, the [TLS] keys, the handshake,
 *                reads and SNI
 *   tls_send.c   writes: writev, sendfile (kTLS or staged blocks) and the
 *                corking BIO that sends the records of one block at once
 *   tls_certs.c  the Certificate and CertificateKey lines of a site: up to
 *                one pair per key type (RSA, ECDSA, ...), checked line by
 *                line
 *
 * Threads: everything in struct tls_conn belongs to the connection's
 * worker. tls_send_init() and tls_send_exit() run on the controlling
 * thread, before the first and after the last connection.
 */
#ifndef MONKEY_PLUGIN_TLS_H
#define MONKEY_PLUGIN_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

#include <monkey/mk_plugin.h>

/* The server's functions, set by init(). */
extern const struct mk_api *tls_api;

/* ---- tls_send.c ------------------------------------------------------------ */

/* The most plaintext one staged write carries: four full records. */
#define TLS_SEND_BLOCK 65536
/* A head written with MK_IO_MORE up to this size waits for the body. */
#define TLS_HOLD_MAX 16384

/*
 * A connection's body writes. Staged bytes are plaintext in `stage`: the
 * first `reported` of them were already counted as written to the server
 * (a held head), the rest are the body bytes of the call in progress,
 * counted once every record is out (flushed). The stage and the cork
 * buffer exist only while a body is being sent.
 */
struct tls_send {
    unsigned char *stage; /* TLS_SEND_BLOCK bytes, or NULL */
    size_t held;          /* a head held from a MK_IO_MORE writev, at stage[0] */
    size_t len;           /* bytes staged for the write in progress; 0: none */
    size_t pos;           /* of them, taken by SSL_write */
    size_t reported;      /* of them, already reported as written (the head) */
    int fd;               /* the file the staged body came from; -1: writev */
    off_t off;            /* its offset */
    bool ktls;            /* the kernel encrypts what we send (kTLS) */
    bool corked;          /* the cork BIO gathers records instead of sending */
    BIO *bio;             /* the cork BIO on top of the socket's, or NULL */
    unsigned char *cork;  /* the cork BIO's buffer of records, or NULL */
    size_t cork_len;      /* records in it */
    size_t cork_off;      /* of them, sent */
};

/* One connection. */
struct tls_conn {
    uint32_t magic;   /* TLS_MAGIC: first, see tls_conn_of() */
    bool peeked;      /* the first byte was checked to be a handshake record */
    bool established; /* the handshake is done */
    int retry_len;    /* a write that must be repeated with this many bytes; 0: none */
    SSL *ssl;
    struct tls_send send;
};

/*
 * Whether the kernel offers kTLS (`tls` in tcp_available_ulp), read anew
 * at each call: each configuration build asks (`modprobe tls` and a reload
 * bring kTLS in).
 */
bool tls_ktls_available(void);
/* Set up the cork BIO's method: MK_OK or MK_ERR. */
int tls_send_init(void);
void tls_send_exit(void);
/* After the handshake: note whether kTLS sends, else put the cork BIO in. */
void tls_send_established(struct tls_conn *t);
/* Release what the connection's writes hold (the SSL is freed by the caller). */
void tls_send_release(struct tls_conn *t);
/* The transport's writev and sendfile (struct mk_transport). */
ssize_t tls_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags);
ssize_t tls_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len);
/*
 * The result of an SSL call on t that returned rc <= 0 (tls.c): MK_AGAIN
 * with the direction wanted set, 0 for a clean end, MK_ERR otherwise.
 */
int tls_result(struct mk_conn *c, struct tls_conn *t, int rc);

/* ---- tls_certs.c ----------------------------------------------------------- */

/* The most certificates a site has: one per key type (RSA and ECDSA). */
#define TLS_CERTS_MAX 2

/*
 * A site's certificates as its Certificate and CertificateKey lines gave
 * them, in order: pair i is the i-th Certificate with the i-th
 * CertificateKey. Each file is read and checked on its line; a pair is
 * checked (the key matches) on the line that completes it.
 */
struct tls_certs {
    size_t n_cert, n_key;
    char *cert[TLS_CERTS_MAX]; /* absolute paths */
    char *key[TLS_CERTS_MAX];
    X509 *x509[TLS_CERTS_MAX];
    EVP_PKEY *pkey[TLS_CERTS_MAX];
};

/* MK_CONF_CUSTOM set() of Certificate and CertificateKey (MK_CONF_MULTI). */
int tls_certs_set_cert(void *obj, const struct mk_conf_key *key, const char *value,
                       const struct mk_conf_origin *origin, char *reason, size_t len);
int tls_certs_set_key(void *obj, const struct mk_conf_key *key, const char *value,
                      const struct mk_conf_origin *origin, char *reason, size_t len);
/* Both lists the same length: MK_OK, or MK_ERR with the key to blame. */
int tls_certs_check(const struct tls_certs *tc, const char **key, char *reason, size_t len);
/*
 * Load pair i into ctx: the certificate file (with intermediates after
 * it) and the key. MK_OK or MK_ERR with the reason.
 */
int tls_certs_use(const struct tls_certs *tc, size_t i, SSL_CTX *ctx, char *reason, size_t len);
void tls_certs_free(struct tls_certs *tc);
/* The name of a key's type for messages: "RSA", "ECDSA", ... */
const char *tls_certs_type_name(const EVP_PKEY *pkey);

#endif
