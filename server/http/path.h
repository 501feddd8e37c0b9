/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * path.h: turning a request path into a file path, done once per request.
 *
 * mk_path_normalize() percent-decodes and then removes dot segments (RFC 3986
 * section 5.2.4), so an encoded "%2e%2e" or "%2f" cannot slip past the
 * normalisation. The result always starts with '/', never contains "//", "."
 * or ".." segments, a NUL byte or a backslash, and keeps a trailing '/' when
 * the request had one (that is how "dir" and "dir/" differ). mk_path_encode()
 * turns such a path back into a URI path for a redirect, and
 * mk_path_is_hidden() tells a hidden name. Pure: no I/O, no allocation.
 */
#ifndef MK_SERVER_PATH_H
#define MK_SERVER_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Decode and normalise `raw` (len bytes, must start with '/') into `out`,
 * which has room for len + 1 bytes; the result is NUL terminated. Returns its
 * length, or MK_ERR for input that must be answered with 400: a malformed
 * escape, an encoded or raw NUL, a backslash, or ".." above the root.
 */
ssize_t mk_path_normalize(const char *raw, size_t len, char *out);

/*
 * Percent-encode the normalised path `path` (len bytes) into `out`, which has
 * room for 3 * len bytes, for use in a URI (a Location header): unreserved
 * characters, sub-delims, ':', '@' and '/' stay as they are, every other byte
 * becomes %XX. Returns the length written (no NUL is added). A normalised
 * path starts with a single '/', so the result is an absolute path that can
 * never be read as a scheme or as "//authority".
 */
size_t mk_path_encode(const char *path, size_t len, char *out);

/*
 * Does the normalised path `path` (len bytes) have a segment starting with
 * '.' (a hidden file or directory)? The top-level "/.well-known" (RFC 8615)
 * is not hidden itself; names inside it still are.
 */
bool mk_path_is_hidden(const char *path, size_t len);

#endif
