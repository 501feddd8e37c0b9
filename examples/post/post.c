/*
 * post: request bodies.
 *
 *   POST /post/form     an application/x-www-form-urlencoded form: its fields, one a line
 *   POST /post/json     a JSON body echoed back as received (415 for another type)
 *   POST /post/upload   a body streamed as it arrives: its size and a checksum
 */
#include <stdio.h>
#include <string.h>

#include <duda/duda.h>

DUDA_REGISTER("Forms and JSON", "post");

/* The value of a hexadecimal digit, or -1. */
static int hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char) (c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Print s[0, n) decoded as a form value, as qs->get decodes: '+' is a space, %XX a byte. */
static void print_decoded(duda_request_t *dr, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        }
        else if (c == '%' && i + 2 < n && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            c = (char) (hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        }
        response->print(dr, &c, 1);
    }
}

static void cb_form(duda_request_t *dr)
{
    size_t len;
    const char *body = request->body(dr, &len);

    if (!request->is_content_type(dr, "application/x-www-form-urlencoded")) {
        response->http_status(dr, 415);
        response->end(dr, NULL);
        return;
    }
    response->http_content_type(dr, "text/plain; charset=utf-8");
    while (len > 0) {
        const char *amp = memchr(body, '&', len);
        size_t pair = amp ? (size_t) (amp - body) : len;
        const char *eq = memchr(body, '=', pair);
        size_t key = eq ? (size_t) (eq - body) : pair;
        print_decoded(dr, body, key);
        response->print(dr, ": ", 2);
        if (eq) {
            print_decoded(dr, eq + 1, pair - key - 1);
        }
        response->print(dr, "\n", 1);
        len -= amp ? pair + 1 : pair;
        body += amp ? pair + 1 : pair;
    }
    response->end(dr, NULL);
}

static void cb_json(duda_request_t *dr)
{
    size_t len;
    const char *body = request->body(dr, &len);

    if (!request->is_content_type(dr, "application/json")) {
        response->http_status(dr, 415);
        response->end(dr, NULL);
        return;
    }
    response->http_content_type(dr, "application/json");
    response->print(dr, body, len);
    response->end(dr, NULL);
}

struct upload {
    unsigned long size, sum;
};

static void on_upload(duda_request_t *dr, const char *data, size_t len)
{
    struct upload *up = request->ctx(dr);

    if (data) {
        up->size += len;
        for (size_t i = 0; i < len; i++) {
            up->sum = (up->sum * 31 + (unsigned char) data[i]) % 1000000007ul;
        }
        return;
    }
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "size %lu sum %lu\n", up->size, up->sum);
    response->end(dr, NULL);
}

static void cb_upload(duda_request_t *dr)
{
    request->set_ctx(dr, gc->alloc(dr, sizeof(struct upload)));
    request->body_stream(dr, on_upload);
}

int duda_main(void)
{
    router->map("/form", DUDA_POST, cb_form);
    router->map("/json", DUDA_POST | DUDA_PUT, cb_json);
    router->map_stream("/upload", DUDA_POST, cb_upload);
    return 0;
}
