/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ws_accept.h: the Sec-WebSocket-Accept that answers a Sec-WebSocket-Key
 * (RFC 6455 section 4.2.2), base64(SHA-1(key GUID)), for the benchmark's
 * WebSocket client (wsload.c), which checks it, and floor server
 * (ws_floor.c), which sends it.
 */
#ifndef MK_BENCH_WS_ACCEPT_H
#define MK_BENCH_WS_ACCEPT_H

#include <stdio.h>

#include <openssl/evp.h>

#define MK_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define MK_WS_ACCEPT_SIZE 29 /* 28 characters of base64 and a NUL */
#define MK_WS_KEY_MAX 64

/* The answer to the key's key_len bytes into accept: 0, or -1 (a key too long, no SHA-1). */
static inline int mk_ws_accept(const char *key, size_t key_len, char accept[MK_WS_ACCEPT_SIZE])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char text[MK_WS_KEY_MAX + sizeof(MK_WS_GUID)];
    int n;

    accept[0] = '\0';
    if (key_len > MK_WS_KEY_MAX) {
        return -1;
    }
    n = snprintf(text, sizeof(text), "%.*s%s", (int) key_len, key, MK_WS_GUID);
    if (!EVP_Digest(text, (size_t) n, md, &md_len, EVP_sha1(), NULL)) {
        return -1;
    }
    EVP_EncodeBlock((unsigned char *) accept, md, (int) md_len);
    return 0;
}

#endif
