/*
 * cookies_sessions: log in and out with a session, and plain cookies.
 *
 *   POST /cookies_sessions/login?user=NAME   starts a session (cookie "sid", one hour;
 *                                            &ttl=SECONDS for another lifetime)
 *   GET  /cookies_sessions/me                "NAME\n", or 401 without a live session (503
 *                                            when the store cannot be asked: a Redis
 *                                            outage is no logout)
 *   POST /cookies_sessions/logout            ends it (404 when there was none, 503 likewise)
 *   GET  /cookies_sessions/cookie/set        sets "theme=dark" (Secure, HttpOnly, SameSite=Strict)
 *   GET  /cookies_sessions/cookie/get        the theme cookie the client sent
 */
#include <stdlib.h>

#include <duda/duda.h>

DUDA_REGISTER("Cookies and sessions", "cookies_sessions");

static void reply(duda_request_t *dr, int status, const char *text)
{
    response->http_status(dr, status);
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "%s\n", text);
    response->end(dr, NULL);
}

static void cb_login(duda_request_t *dr)
{
    const char *user = qs->get(dr, "user");
    const char *ttl = qs->get(dr, "ttl");
    long seconds = ttl ? atol(ttl) : 3600;

    if (!user || !*user || seconds < 1) {
        reply(dr, 400, "give ?user=NAME[&ttl=SECONDS]");
        return;
    }
    if (session->create(dr, "sid", user, seconds) != 0) {
        reply(dr, 503, "no session");
        return;
    }
    reply(dr, 200, "logged in");
}

/* The session of the cookie "sid": its value, or NULL with the status that says why. */
static const char *me(duda_request_t *dr, int *status)
{
    const char *user = NULL;
    if (!DUDA_HAS(session, lookup)) { /* a plugin older than ABI 1.3 */
        user = session->get(dr, "sid");
        *status = user ? 200 : 401;
        return user;
    }
    int rc = session->lookup(dr, "sid", &user);

    *status = rc == DUDA_SESSION_FOUND         ? 200
              : rc == DUDA_SESSION_UNAVAILABLE ? 503 /* not a logout: try again */
              : rc == DUDA_SESSION_NONE        ? 401
                                               : 500;
    return rc == DUDA_SESSION_FOUND ? user : NULL;
}

static void cb_me(duda_request_t *dr)
{
    int status;
    const char *user = me(dr, &status);

    if (!user) {
        reply(dr, status, status == 503 ? "the session store is unavailable" : "not logged in");
        return;
    }
    reply(dr, 200, user);
}

static void cb_logout(duda_request_t *dr)
{
    int status;

    if (!me(dr, &status) && status == 503) {
        reply(dr, 503, "the session store is unavailable");
        return;
    }
    if (session->destroy(dr, "sid") != 0) {
        reply(dr, 404, "no session");
        return;
    }
    reply(dr, 200, "logged out");
}

static void cb_cookie_set(duda_request_t *dr)
{
    cookie->set(dr, "theme", "dark", 86400,
                DUDA_COOKIE_SECURE | DUDA_COOKIE_HTTPONLY | DUDA_COOKIE_SAMESITE_STRICT);
    reply(dr, 200, "set");
}

static void cb_cookie_get(duda_request_t *dr)
{
    const char *theme = cookie->get(dr, "theme");
    reply(dr, theme ? 200 : 404, theme ? theme : "no theme");
}

int duda_main(void)
{
    router->map("/login", DUDA_POST, cb_login);
    router->map("/me", DUDA_GET, cb_me);
    router->map("/logout", DUDA_POST, cb_logout);
    router->map("/cookie/set", DUDA_GET, cb_cookie_set);
    router->map("/cookie/get", DUDA_GET, cb_cookie_get);
    return 0;
}
