"""Request rules: the [RULE] sections of a site file (server/http/rules.c,
server/config/conf_rules.c, server/request/request_rules.c): Redirect,
Return and Rewrite, selected by path, prefix, regular expression, method,
host and a field; first match wins; over HTTP/1.1 and HTTP/2 alike."""

import pytest

from conftest import BUILD, Conn, built_without, needs_dlopen, needs_part
from gwutil import env_of, get
import rulesutil
from rulesutil import check_refused

pytestmark = needs_part("rules", "request rules")
needs_pcre2 = pytest.mark.skipif(built_without("pcre2"), reason="built without PCRE2")

RULES = """
[RULE]
    Path /old.html
    Redirect 301 /new.html

[RULE]
    Prefix /shop/sale
    Redirect 302 /offers/

[RULE]
    Prefix /shop
    Redirect 301 https://shop.example.com$path

[RULE]
    Prefix /gone
    Return 410

[RULE]
    Path /hello
    Method GET HEAD
    Return 200 hello world

[RULE]
    Prefix /api
    Header X-Api-Version 1
    Return 400 version 1 is gone

[RULE]
    Host www.example.com
    Redirect 308 https://example.com$request_uri

[RULE]
    Prefix /go
    Redirect 302 /$1

[RULE]
    Prefix /pretty
    Rewrite /new.html

[RULE]
    Path /loop
    Rewrite /loop

[RULE]
    Path /a
    Rewrite /b

[RULE]
    Path /b
    Redirect 302 /c
"""

REGEX_RULES = """
[RULE]
    Regex ^/blog/(?<year>[0-9]{4})/([a-z-]+)\\.php$
    Redirect 301 https://$host:$port/articles/$year/$2

[RULE]
    Regex ^/p/([0-9]+)$
    Rewrite /post.txt?id=$1

[RULE]
    Regex ^/[^.]*$
    Rewrite /index.html
"""


FILES = {"new.html": "the new page\n", "index.html": "the application\n", "post.txt": "a post\n",
         "c": "c\n"}


def rules_server(make_server, text=RULES, h2=False):
    return rulesutil.rules_server(make_server, text, FILES, h2=h2,
                                  names="localhost www.example.com")


def test_redirects_and_returns(make_server):
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    r = c.request("GET", "/old.html?a=1&b=2")
    assert r.status == 301 and r.header("Location") == "/new.html?a=1&b=2"
    # precedence: the particular before the general, in file order
    assert c.request("GET", "/shop/sale").header("Location") == "/offers/"
    r = c.request("GET", "/shop/cart")
    assert r.status == 301 and r.header("Location") == "https://shop.example.com/shop/cart"
    # whole segments: /shopping is no /shop
    assert c.request("GET", "/shopping").status == 404
    r = c.request("GET", "/gone/file.zip")
    assert r.status == 410 and b"410 Gone" in r.body
    r = c.request("GET", "/hello")
    assert r.status == 200 and r.body == b"hello world\n"
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    r = c.request("HEAD", "/hello")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "12"
    # the method condition: POST is not taken by the rule, and the static handler refuses it
    assert c.request("POST", "/hello", body=b"x").status == 405
    # the field condition
    assert c.request("GET", "/api/x").status == 404
    r = c.request("GET", "/api/x", headers={"X-Api-Version": "1"})
    assert r.status == 400 and r.body == b"version 1 is gone\n"
    assert c.request("GET", "/api/x", headers={"X-Api-Version": "2"}).status == 404
    # the host condition, the request target as sent
    r = c.request("GET", "/x/%7Ey?q=1", headers={"Host": "WWW.example.com"})
    assert r.status == 308 and r.header("Location") == "https://example.com/x/%7Ey?q=1"
    # a request with no rule is as before
    assert c.request("GET", "/new.html").body == b"the new page\n"
    c.close()


def test_redirect_of_a_request_with_a_body(make_server):
    # the body nobody read is passed over: the next request on the connection is served
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    r = c.request("POST", "/old.html", body=b"0123456789")
    assert r.status == 301 and r.header("Location") == "/new.html"
    assert c.request("GET", "/new.html").body == b"the new page\n"
    c.close()


def test_rewrite(make_server):
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    r = c.request("GET", "/pretty/url?page=2")
    assert r.status == 200 and r.body == b"the new page\n"
    # the rules are asked again after a rewrite
    r = c.request("GET", "/a")
    assert r.status == 302 and r.header("Location") == "/c"
    c.close()


def test_rewrite_loop_is_bounded(make_server):
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    assert c.request("GET", "/loop").status == 500
    # the connection goes on
    assert c.request("GET", "/new.html").status == 200
    c.close()
    assert "rewritten more than 10 times" in srv.stderr_text()
    assert "sites/default:" in srv.stderr_text()


@pytest.mark.parametrize("path", [
    "/go//evil.example/",         # a group starting with '/' after the '/' of the target
    "/go/%2fevil.example/",       # the same, encoded
    "/go/%2F%2Fevil.example/",
    "/go/%5Cevil.example/",       # a backslash, which browsers read as '/'
    "/go/./%2F/evil.example",
])
def test_no_open_redirect(make_server, path):
    srv = rules_server(make_server).start()
    r = srv.get(path)
    if "%5C" in path:
        assert r.status == 400  # a path never holds a backslash (path.h)
        return
    assert r.status == 302
    loc = r.header("Location")
    assert loc.startswith("/") and not loc.startswith("//") and "\\" not in loc, loc


def test_absolute_target_keeps_its_host(make_server):
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    # what follows the host comes from the normalised path, so it starts with '/'
    for path in ["/shop@evil.example", "/shop/..%2f@evil.example", "/shop/%40evil"]:
        r = c.request("GET", path)
        if r.status == 301:
            assert r.header("Location").startswith("https://shop.example.com/"), path
    c.close()


@needs_pcre2
def test_regex(make_server):
    srv = rules_server(make_server, REGEX_RULES).start()
    c = Conn(srv.port)
    r = c.request("GET", "/blog/2020/hello-world.php")
    assert r.status == 301
    assert r.header("Location") == f"https://localhost:{srv.port}/articles/2020/hello-world"
    r = c.request("GET", "/p/42")
    assert r.status == 200 and r.body == b"a post\n"
    # a single-page application: paths without a dot are the application
    r = c.request("GET", "/users/ann/settings")
    assert r.status == 200 and r.body == b"the application\n"
    assert c.request("GET", "/missing.png").status == 404
    c.close()


@needs_dlopen
def test_rewrite_keeps_the_client_target_for_the_gateways(make_server):
    srv = rules_server(make_server, """
[RULE]
    Prefix /app
    Rewrite /cgi-bin/env.sh?from=rule
""")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    env = bindir / "env.sh"
    env.write_text('#!/bin/sh\necho "Content-Type: text/plain"\necho\nenv\n')
    env.chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /cgi-bin/ {bindir}\n"
    srv.start()
    r = get(srv, "/app/pretty?x=1")
    assert r.status == 200
    e = env_of(r.body)
    assert e["SCRIPT_NAME"] == "/cgi-bin/env.sh"
    assert e["QUERY_STRING"] == "from=rule"
    assert e["REQUEST_URI"] == "/app/pretty?x=1"


def test_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = rules_server(make_server, h2=True).start()
    c = H2Client(srv.port)
    st = c.get("/old.html?a=1")
    assert st["headers"][":status"] == "301" and st["headers"]["location"] == "/new.html?a=1"
    st = c.get("/hello")
    assert st["headers"][":status"] == "200" and st["data"] == b"hello world\n"
    assert c.get("/gone/x")["headers"][":status"] == "410"
    assert c.get("/pretty/x")["data"] == b"the new page\n"
    assert c.get("/loop")["headers"][":status"] == "500"
    st = c.get("/go//evil.example/")
    assert st["headers"]["location"] == "/evil.example/"
    sid = c.request("/x?q=1", authority="www.example.com")
    c.wait([sid])
    assert c.streams[sid]["headers"]["location"] == "https://example.com/x?q=1"
    c.close()


def test_reload_swaps_the_rules(make_server):
    srv = rules_server(make_server).start()
    c = Conn(srv.port)
    assert c.request("GET", "/old.html").status == 301
    srv.site_extra = "[RULE]\n    Path /old.html\n    Return 410\n"
    srv.write_conf()
    srv.reload()
    c.close()
    c = Conn(srv.port)
    assert c.request("GET", "/old.html").status == 410
    assert c.request("GET", "/shop/cart").status == 404
    c.close()


@pytest.mark.parametrize("text,line,words", [
    ("[RULE]\n    Path /a\n", 4, "needs one of Redirect, Return, ReturnFile, Rewrite"),
    ("[RULE]\n    Path /a\n    Redirect 301 //evil.example/\n", 6, "single '/'"),
    ("[RULE]\n    Path /a\n    Redirect 301 https://$1/\n", 6, "host of a target"),
    ("[RULE]\n    Path /a\n    Redirect 301 /b/$2\n", 6, "$2"),
    ("[RULE]\n    Path /a\n    Redirect 304 /b\n", 6, "expected a status"),
    ("[RULE]\n    Path a\n    Return 410\n", 5, "normalised path"),
    ("[RULE]\n    Method FETCH\n    Return 410\n", 5, "not a method"),
    ("[RULE]\n    Rewrite http://example.com/\n", 5, "internal rewrite"),
    ("[RULE]\n    Return 410\n    Colour blue\n", 6, "unknown key"),
    ("[RULE]\n    Path /a\n    Prefix /b\n    Return 410\n", 4, "one of Path, Prefix"),
    ("[RULE]\n    ResponseHeader set Content-Length 0\n", 5, "written by the server"),
])
def test_check_refuses_bad_rules(make_server, text, line, words):
    check_refused(make_server, text, line, words)


def test_check_regex(make_server):
    err = check_refused(make_server, "[RULE]\n    Regex ^/(a\n    Return 410\n", 5, "Regex")
    if built_without("pcre2"):
        assert "this server was built without PCRE2" in err
    else:
        assert "missing closing parenthesis" in err


HEADER_RULES = """
[RULE]
    Path /old.html
    Redirect 301 /new.html
    ResponseHeader set X-Rule redirect

[RULE]
    Prefix /secure
    ResponseHeader set X-Frame-Options DENY
    ResponseHeader always set Strict-Transport-Security max-age=63072000; includeSubDomains
    ResponseHeader add X-Extra one
    ResponseHeader add X-Extra two
    ResponseHeader remove ETag

[RULE]
    Prefix /cgi-bin
    ResponseHeader set X-From-Script replaced
    ResponseHeader remove X-Powered-By
    RequestHeader set X-Api-Key s3cret
    RequestHeader remove X-Debug
"""


def test_response_headers(make_server):
    srv = rules_server(make_server, HEADER_RULES)
    srv.file("secure/page.html", "secure\n")
    srv.start()
    c = Conn(srv.port)
    r = c.request("GET", "/secure/page.html")
    assert r.status == 200 and r.body == b"secure\n"
    assert r.header("X-Frame-Options") == "DENY"
    assert r.header("Strict-Transport-Security") == "max-age=63072000; includeSubDomains"
    assert r.headers["x-extra"] == ["one", "two"]
    assert r.header("ETag") is None and r.header("Last-Modified") is not None
    # an error response: only the lines marked always
    r = c.request("GET", "/secure/missing")
    assert r.status == 404
    assert r.header("X-Frame-Options") is None and r.header("X-Extra") is None
    assert r.header("Strict-Transport-Security") == "max-age=63072000; includeSubDomains"
    # a redirect's rule gives its fields too; other paths get none
    r = c.request("GET", "/old.html")
    assert r.status == 301 and r.header("X-Rule") == "redirect"
    r = c.request("GET", "/new.html")
    assert r.header("X-Frame-Options") is None and r.header("ETag") is not None
    c.close()


@needs_dlopen
def test_response_headers_of_a_gateway(make_server):
    srv = rules_server(make_server, HEADER_RULES)
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    script = bindir / "hello.sh"
    script.write_text('#!/bin/sh\necho "Content-Type: text/plain"\necho "X-Powered-By: sh"\n'
                      'echo "X-From-Script: original"\necho\necho hello\nenv\n')
    script.chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /cgi-bin/ {bindir}\n"
    srv.start()
    r = get(srv, "/cgi-bin/hello.sh", headers={"X-Debug": "1", "X-Api-Key": "mine"})
    assert r.status == 200 and b"hello" in r.body
    assert r.header("X-Powered-By") is None
    assert r.headers["x-from-script"] == ["replaced"]
    # the request's fields as the script sees them
    e = env_of(r.body.split(b"hello\n", 1)[1])
    assert e["HTTP_X_API_KEY"] == "s3cret" and "HTTP_X_DEBUG" not in e


def test_response_headers_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = rules_server(make_server, HEADER_RULES, h2=True)
    srv.file("secure/page.html", "secure\n")
    srv.start()
    c = H2Client(srv.port)
    st = c.get("/secure/page.html")
    h = st["headers"]
    assert h[":status"] == "200" and h["x-frame-options"] == "DENY" and "etag" not in h
    assert "last-modified" in h and h["accept-ranges"] == "bytes"
    st = c.get("/secure/missing")
    h = st["headers"]
    assert h[":status"] == "404" and "x-frame-options" not in h
    assert h["strict-transport-security"] == "max-age=63072000; includeSubDomains"
    c.close()
