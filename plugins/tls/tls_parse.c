/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_parse.c: what the tls plugin reads from a client, pure (see
 * tls_parse.h).
 */
#include <string.h>
#include <strings.h>

#include "tls_parse.h"

#define TLS_SNI_HOST_NAME 0 /* RFC 6066: NameType host_name */

bool tls_sni_host(const unsigned char *ext, size_t len, char *buf, size_t size)
{
    const unsigned char *p = ext;

    if (len < 2 || (size_t) ((p[0] << 8) | p[1]) + 2 != len) {
        return false;
    }
    p += 2;
    len -= 2;
    while (len >= 3) {
        size_t n = (size_t) ((p[1] << 8) | p[2]);
        if (n + 3 > len) {
            return false;
        }
        if (p[0] == TLS_SNI_HOST_NAME) {
            if (n == 0 || n >= size || memchr(p + 3, '\0', n)) {
                return false;
            }
            memcpy(buf, p + 3, n);
            buf[n] = '\0';
            return true;
        }
        p += 3 + n;
        len -= 3 + n;
    }
    return false;
}

const unsigned char *tls_alpn_find(const unsigned char *in, unsigned inlen, const char *proto,
                                   size_t plen)
{
    for (unsigned i = 0; i < inlen; i += 1u + in[i]) {
        if (in[i] == plen && i + 1u + plen <= inlen && memcmp(in + i + 1, proto, plen) == 0) {
            return in + i + 1;
        }
    }
    return NULL;
}

bool tls_host_ok(const char *name, size_t len)
{
    if (len == 0 || len > 253) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.')) {
            return false;
        }
    }
    return true;
}

bool tls_name_matches(const char *pattern, const char *name, size_t len)
{
    size_t plen = strlen(pattern);

    if (len && name[len - 1] == '.') {
        len--;
    }
    if (plen && pattern[plen - 1] == '.') {
        plen--;
    }
    if (plen > 2 && pattern[0] == '*' && pattern[1] == '.') {
        /* "*.example.com": one label or more before ".example.com" */
        return len > plen - 1 && strncasecmp(name + len - (plen - 1), pattern + 1, plen - 1) == 0;
    }
    return plen == len && strncasecmp(pattern, name, len) == 0;
}

size_t tls_path_encode(const char *path, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    static const char keep[] = "-._~!$&'()*+,;=:@/";
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) path[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            (ch && strchr(keep, ch))) {
            out[n++] = (char) ch;
            continue;
        }
        out[n++] = '%';
        out[n++] = hex[ch >> 4];
        out[n++] = hex[ch & 15];
    }
    return n;
}
