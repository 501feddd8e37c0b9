"""Cors in a [RULE] block (server/http/rules.c, server/request/request_rules.c):
the block answers CORS preflights itself, and gives the responses to the
origins it allows their Access-Control-Allow-* fields, errors included;
over HTTP/1.1 and HTTP/2 alike."""

import pytest

from conftest import Conn, needs_part
from rulesutil import check_refused, rules_server

pytestmark = needs_part("rules", "request rules")

A = "https://a.example"
B = "http://b.example:8080"

CORS_RULES = f"""
[RULE]
    Prefix /api
    Cors origins={A},{B} methods=GET,PUT,DELETE headers=Content-Type,X-Token expose=ETag,X-Id credentials max-age=600

[RULE]
    Prefix /open
    Cors origins=*

[RULE]
    Prefix /any-fields
    Cors origins={A} headers=*

[RULE]
    Path /moved
    Redirect 301 /api/new.html
    Cors origins={A}
"""


def cors_server(make_server, h2=False):
    return rules_server(make_server, CORS_RULES,
                        {"api/data.txt": "data\n", "open/data.txt": "open\n"}, h2=h2).start()


def preflight(origin, method, fields=None):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if fields:
        h["Access-Control-Request-Headers"] = fields
    return h


def acao_fields(r):
    return {k: v for k, v in r.headers.items() if k.startswith("access-control-")}


def test_preflight_allowed(make_server):
    srv = cors_server(make_server)
    c = Conn(srv.port)
    r = c.request("OPTIONS", "/api/data.txt", headers=preflight(A, "PUT", "content-type, x-token"))
    assert r.status == 204 and r.body == b""
    assert r.header("Access-Control-Allow-Origin") == A
    assert r.header("Access-Control-Allow-Methods") == "GET,PUT,DELETE"
    assert r.header("Access-Control-Allow-Headers") == "Content-Type,X-Token"
    assert r.header("Access-Control-Allow-Credentials") == "true"
    assert r.header("Access-Control-Max-Age") == "600"
    assert r.header("Access-Control-Expose-Headers") is None
    assert "Origin" in r.headers["vary"]
    # GET, HEAD and POST are always allowed (CORS-safelisted methods)
    r = c.request("OPTIONS", "/api/x", headers=preflight(B, "POST"))
    assert r.status == 204 and r.header("Access-Control-Allow-Origin") == B
    # origins compare without regard to case
    r = c.request("OPTIONS", "/api/x", headers=preflight("HTTPS://A.example", "GET"))
    assert r.status == 204
    c.close()


@pytest.mark.parametrize("h", [
    preflight("https://evil.example", "GET"),  # an origin not listed
    preflight(A, "PATCH"),  # a method not listed
    preflight(A, "PUT", "X-Other"),  # a field not listed
    preflight(A, "PUT", "content-type,x-other"),
    preflight("https://a.example.evil", "GET"),
])
def test_preflight_refused(make_server, h):
    srv = cors_server(make_server)
    r = Conn(srv.port).request("OPTIONS", "/api/data.txt", headers=h)
    # a refused preflight is a 403 without any Access-Control-* field
    assert r.status == 403 and acao_fields(r) == {}, r


def test_actual_requests(make_server):
    srv = cors_server(make_server)
    c = Conn(srv.port)
    r = c.request("GET", "/api/data.txt", headers={"Origin": A})
    assert r.status == 200 and r.body == b"data\n"
    assert r.header("Access-Control-Allow-Origin") == A
    assert r.header("Access-Control-Allow-Credentials") == "true"
    assert r.header("Access-Control-Expose-Headers") == "ETag,X-Id"
    assert r.header("Access-Control-Allow-Methods") is None
    assert "Origin" in r.headers["vary"]
    # errors included
    r = c.request("GET", "/api/missing", headers={"Origin": B})
    assert r.status == 404 and r.header("Access-Control-Allow-Origin") == B
    assert r.header("Access-Control-Allow-Credentials") == "true"
    r = c.request("DELETE", "/api/data.txt", headers={"Origin": A})
    assert r.status == 405 and r.header("Access-Control-Allow-Origin") == A
    # an origin not allowed: no field, but the answer varies by Origin
    r = c.request("GET", "/api/data.txt", headers={"Origin": "https://evil.example"})
    assert r.status == 200 and acao_fields(r) == {} and "Origin" in r.headers["vary"]
    # no Origin: untouched
    r = c.request("GET", "/api/data.txt")
    assert r.status == 200 and acao_fields(r) == {} and r.header("Vary") is None
    # OPTIONS without Access-Control-Request-Method is no preflight
    r = c.request("OPTIONS", "/api/data.txt", headers={"Origin": A})
    assert r.status != 204 and r.header("Access-Control-Allow-Origin") == A
    # a preflight without Origin is no CORS request either
    r = c.request("OPTIONS", "/api/data.txt", headers={"Access-Control-Request-Method": "PUT"})
    assert r.status != 204 and acao_fields(r) == {}
    # the rule's action is taken for an actual request, the preflight answered first
    r = c.request("GET", "/moved", headers={"Origin": A})
    assert r.status == 301 and r.header("Access-Control-Allow-Origin") == A
    r = c.request("OPTIONS", "/moved", headers=preflight(A, "GET"))
    assert r.status == 204 and r.header("Location") is None
    c.close()


def test_any_origin(make_server):
    srv = cors_server(make_server)
    c = Conn(srv.port)
    r = c.request("GET", "/open/data.txt", headers={"Origin": "https://whoever.example"})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Allow-Credentials") is None and r.header("Vary") is None
    r = c.request("OPTIONS", "/open/x", headers=preflight("null", "GET"))
    assert r.status == 204 and r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Max-Age") is None
    # no headers=: a preflight asking for a field is refused
    r = c.request("OPTIONS", "/open/x", headers=preflight("null", "GET", "X-Token"))
    assert r.status == 403 and acao_fields(r) == {}
    # headers=*: the fields asked for are allowed, by name
    r = c.request("OPTIONS", "/any-fields/x", headers=preflight(A, "POST", "x-a, x-b"))
    assert r.status == 204 and r.header("Access-Control-Allow-Headers") == "x-a, x-b"
    c.close()


def test_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = cors_server(make_server, h2=True)
    c = H2Client(srv.port)
    h = c.get("/api/data.txt", headers=[("origin", A)])["headers"]
    assert h[":status"] == "200" and h["access-control-allow-origin"] == A
    assert h["access-control-allow-credentials"] == "true" and h["vary"] == "Origin"
    assert h["access-control-expose-headers"] == "ETag,X-Id"
    h = c.get("/api/missing", headers=[("origin", A)])["headers"]
    assert h[":status"] == "404" and h["access-control-allow-origin"] == A
    sid = c.request("/api/data.txt", method="OPTIONS",
                    headers=[("origin", B), ("access-control-request-method", "DELETE"),
                             ("access-control-request-headers", "x-token")])
    c.wait([sid])
    h = c.streams[sid]["headers"]
    assert h[":status"] == "204" and h["access-control-allow-origin"] == B
    assert h["access-control-allow-methods"] == "GET,PUT,DELETE"
    assert h["access-control-max-age"] == "600"
    sid = c.request("/api/data.txt", method="OPTIONS",
                    headers=[("origin", B), ("access-control-request-method", "PATCH")])
    c.wait([sid])
    h = c.streams[sid]["headers"]
    assert h[":status"] == "403" and "access-control-allow-origin" not in h
    h = c.get("/api/data.txt")["headers"]
    assert h[":status"] == "200" and "access-control-allow-origin" not in h and "vary" not in h
    c.close()


@pytest.mark.parametrize("cors,line,words", [
    ("Cors origins=* credentials", 6, "origins=* with credentials"),
    ("Cors methods=GET", 6, "expected origins="),
    ("Cors origins=https://a.example/path", 6, "is not an origin"),
    ("Cors origins=a.example", 6, "is not an origin"),
    ("Cors origins=*,https://a.example", 6, "is not an origin"),
    ("Cors origins=* methods=FETCH", 6, "expected origins=, methods="),
    ("Cors origins=* max-age=-1", 6, "max-age="),
    ("Cors origins=* colour=blue", 6, "'colour=blue'"),
    ("Cors origins=* headers=X(Y)", 6, "'headers=X(Y)'"),
])
def test_check_refuses_bad_cors(make_server, cors, line, words):
    check_refused(make_server, f"[RULE]\n    Prefix /api\n    {cors}\n", line, words)


def test_check_cors_with_a_method_condition(make_server):
    srv = make_server()
    srv.site_extra = "[RULE]\n    Prefix /api\n    Method GET PUT\n    Cors origins=*\n"
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:6:" in err and "must take OPTIONS" in err, err
    srv.site_extra = "[RULE]\n    Prefix /api\n    Method GET OPTIONS\n    Cors origins=*\n"
    srv.start()
    r = Conn(srv.port).request("OPTIONS", "/api/x", headers=preflight(A, "GET"))
    assert r.status == 204 and r.header("Access-Control-Allow-Origin") == "*"


SETTING_RULES = """
[RULE]
    Prefix /docs
    IndexFiles start.html index.html

[RULE]
    Prefix /assets
    CacheControl max-age=86400, immutable

[RULE]
    Path /plain
    Rewrite /assets/app.css
"""


def settings_server(make_server, h2=False):
    srv = make_server()
    if h2:
        srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    srv.set(Workers=1)
    srv.site_conf["IndexFiles"] = "index.html"
    srv.site_conf["CacheControl"] = "/ no-cache"
    for d in ("docs", "docs/old", "other"):
        srv.file(f"{d}/index.html", f"{d} index\n")
    srv.file("docs/start.html", "docs start\n")
    srv.file("other/start.html", "other start\n")
    srv.file("assets/app.css", "body{}\n")
    srv.file("page.html", "page\n")
    srv.site_extra = SETTING_RULES
    return srv.start()


def test_per_path_settings(make_server):
    srv = settings_server(make_server)
    c = Conn(srv.port)
    # IndexFiles: the rule's, over the site's, in their order
    assert c.request("GET", "/docs/").body == b"docs start\n"
    assert c.request("GET", "/docs/old/").body == b"docs/old index\n"
    assert c.request("GET", "/other/").body == b"other index\n"
    # asked again, from the worker's file cache
    assert c.request("GET", "/other/").body == b"other index\n"
    assert c.request("GET", "/docs/").body == b"docs start\n"
    # CacheControl: the rule's, over the site's
    r = c.request("GET", "/assets/app.css")
    assert r.status == 200 and r.header("Cache-Control") == "max-age=86400, immutable"
    assert r.header("Expires") is not None
    r = c.request("GET", "/page.html")
    assert r.header("Cache-Control") == "no-cache" and r.header("Expires") is None
    # after a Rewrite, the rule of the new path
    r = c.request("GET", "/plain")
    assert r.body == b"body{}\n" and r.header("Cache-Control") == "max-age=86400, immutable"
    c.close()


def test_per_path_settings_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = settings_server(make_server, h2=True)
    c = H2Client(srv.port)
    assert c.get("/docs/")["data"] == b"docs start\n"
    assert c.get("/other/")["data"] == b"other index\n"
    h = c.get("/assets/app.css")["headers"]
    assert h[":status"] == "200" and h["cache-control"] == "max-age=86400, immutable"
    assert c.get("/page.html")["headers"]["cache-control"] == "no-cache"
    c.close()


@pytest.mark.parametrize("text,line,words", [
    ("[RULE]\n    Prefix /a\n    IndexFiles ../x.html\n", 6, "IndexFiles"),
    ("[RULE]\n    Prefix /a\n    CacheControl max-age=soon\n", 6, "not a Cache-Control value"),
])
def test_check_refuses_bad_settings(make_server, text, line, words):
    check_refused(make_server, text, line, words)
