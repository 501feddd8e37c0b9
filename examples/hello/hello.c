/*
 * hello: routes and a parameter.
 *
 *   GET /hello/             the root callback
 *   GET /hello/hello        "Hello World!\n" (13 bytes: the benchmark's answer)
 *   GET /hello/users/:id    a parameter
 *   GET /hello/dashboard    the console's dashboard
 *   GET /hello/index.html   a static file of html/
 */
#include <duda/duda.h>

DUDA_REGISTER("Hello, the first Duda service", "hello");

static void cb_root(duda_request_t *dr)
{
    response->http_content_type(dr, "text/plain");
    response->print(dr, "hello's root\n", 13);
    response->end(dr, NULL);
}

static void cb_hello(duda_request_t *dr)
{
    response->http_status(dr, 200);
    response->http_content_type(dr, "text/plain");
    response->print(dr, "Hello World!\n", 13);
    response->end(dr, NULL);
}

static void cb_user(duda_request_t *dr)
{
    long id;

    if (param->get_number(dr, "id", &id) != 0) {
        response->http_status(dr, 400);
        response->printf(dr, "not a number: %s\n", param->get(dr, "id"));
        response->end(dr, NULL);
        return;
    }
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "user %ld\n", id);
    response->end(dr, NULL);
}

int duda_main(void)
{
    router->root(cb_root);
    router->map("/hello", DUDA_GET, cb_hello);
    router->map("/users/:id", DUDA_GET, cb_user);
    console->dashboard("/dashboard");
    return 0;
}
