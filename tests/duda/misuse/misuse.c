/* Misuse of the API: each route answers 500 and the server logs it with the service's name. */
#include <duda/duda.h>

DUDA_REGISTER("A service that misuses the API", "misuse");

static void cb_twice(duda_request_t *dr)
{
    response->print(dr, "x", 1);
    response->end(dr, NULL);
    response->end(dr, NULL);
}

static void cb_after(duda_request_t *dr)
{
    response->end(dr, NULL);
    response->print(dr, "late", 4);
}

static void cb_noend(duda_request_t *dr)
{
    response->print(dr, "forgot to end", 13);
}

static void cb_header(duda_request_t *dr)
{
    response->http_header(dr, "X-Bad", "a\r\nInjected: yes");
    response->end(dr, NULL);
}

static void cb_cookie(duda_request_t *dr)
{
    cookie->set(dr, "c", "v", 0, DUDA_COOKIE_SAMESITE_NONE); /* None without Secure */
    response->end(dr, NULL);
}

static void cb_status(duda_request_t *dr)
{
    response->http_status(dr, 101); /* no final status; 101 comes with response->takeover */
    response->http_header(dr, "Upgrade", "websocket");
    response->end(dr, NULL);
}

static void cb_null(duda_request_t *dr)
{
    response->print(NULL, "x", 1);
    response->end(dr, NULL);
}

static void cb_ok(duda_request_t *dr)
{
    response->print(dr, "still serving\n", 14);
    response->end(dr, NULL);
}

int duda_main(void)
{
    router->map("/twice", DUDA_GET, cb_twice);
    router->map("/after", DUDA_GET, cb_after);
    router->map("/noend", DUDA_GET, cb_noend);
    router->map("/header", DUDA_GET, cb_header);
    router->map("/cookie", DUDA_GET, cb_cookie);
    router->map("/status", DUDA_GET, cb_status);
    router->map("/null", DUDA_GET, cb_null);
    router->map("/ok", DUDA_GET, cb_ok);
    return 0;
}
