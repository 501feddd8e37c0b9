"""The recipes of docs/rules.md, as they are written there: each
configuration block tagged `<!-- cookbook: NAME -->` is read out of the
page, loaded into a real server ([SERVER] keys into monkey.conf, [HOST]
keys into the site's [HOST] but its DocumentRoot, the rest into the site
file) and asked over HTTP/1.1 and, where the build has it, HTTP/2. A block
without a test here, or a test whose block is gone, fails."""

import re
import shutil
import socket
import time
from pathlib import Path

import pytest

from conftest import BUILD, STATIC, SLOW, Conn, needs_dlopen, built_without, free_port, needs_part, small_window

pytestmark = needs_part("rules", "request rules")
needs_pcre2 = pytest.mark.skipif(built_without("pcre2"), reason="built without PCRE2")

DOC = Path(__file__).resolve().parents[3] / "docs" / "rules.md"
TAG = re.compile(r"^<!-- cookbook: ([a-z0-9-]+) -->\n```\n(.*?)^```$", re.M | re.S)


def blocks():
    """{name: the text of its blocks, in page order}."""
    out = {}
    for m in TAG.finditer(DOC.read_text()):
        out[m.group(1)] = out.get(m.group(1), "") + m.group(2)
    return out


def protocols():
    """The protocols a recipe is asked over: HTTP/1.1, and HTTP/2 when built."""
    from h2util import H2Client, built_with_h2
    return ["h1"] + (["h2"] if built_with_h2() and H2Client else [])


def recipe(make_server, name, files=None, **server):
    """A server (not started) with recipe `name` in its configuration, an
    h2c listener (HTTP/1.1 is served on it too), `files` in its document
    root and `server` as more [SERVER] keys."""
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1)
    section, rest = None, []
    for line in blocks()[name].splitlines():
        head = re.match(r"^\[([A-Z_]+)\]", line)
        if head:
            section = head.group(1)
            if section in ("SERVER", "HOST"):
                continue
        word = line.split(None, 1)
        if section == "SERVER" and word:
            srv.set(**{word[0]: word[1]})
        elif section == "HOST" and word:
            if word[0] != "DocumentRoot":  # the test's own
                srv.site_conf[word[0]] = word[1]
        else:
            rest.append(line)
    srv.site_extra = "\n".join(rest) + "\n"
    srv.set(**server)
    for path, content in (files or {}).items():
        srv.file(path, content)
    return srv


def ask(srv, proto, method="GET", path="/", headers=None, body=b"", end=True):
    """One request on a new connection: (status, {lower-case name: value}, body)."""
    headers = dict(headers or {})
    host = headers.pop("Host", "localhost")
    if proto == "h1":
        c = Conn(srv.port)
        try:
            r = c.request(method, path, headers={"Host": host, **headers}, body=body)
        finally:
            c.close()
        return r.status, {k: ", ".join(v) for k, v in r.headers.items()}, r.body
    from h2util import H2Client
    c = H2Client(srv.port)
    try:
        fields = [(k.lower(), v) for k, v in headers.items()]
        if body and "content-length" not in dict(fields):
            fields.append(("content-length", str(len(body))))
        sid = c.request(path, method=method, headers=fields, body=body or None, end=end,
                        authority=host)
        c.wait([sid])
        st = c.streams[sid]
    finally:
        c.close()
    return int(st["headers"][":status"]), st["headers"], st["data"]


TESTED = set()


def recipe_of(*names):
    def mark(fn):
        TESTED.update(names)
        return fn
    return mark


def test_every_recipe_is_tested():
    found = set(blocks())
    assert found, f"no tagged block in {DOC}"
    assert found == TESTED, (found - TESTED, TESTED - found)


@recipe_of("https")
def test_http_to_https(make_server):
    srv = recipe(make_server, "https", {"a/b.txt": "b\n"})
    from tlsutil import TLS_SO, make_cert, tls_connect, tls_section
    tls = TLS_SO.exists() and not STATIC and shutil.which("openssl") is not None
    if tls:
        tls_port = free_port()
        crt, key = make_cert(srv.dir / "certs", "localhost")
        srv.plugins = [str(TLS_SO)]
        srv.set(Listen=[f"127.0.0.1:{srv.port} h2c", f"127.0.0.1:{tls_port} tls"])
        srv.site_extra += tls_section(crt, key)
    srv.start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "GET", "/a/b.txt?x=1&y=%20")
        assert st == 308 and h["location"] == "https://localhost/a/b.txt?x=1&y=%20", (proto, h)
        st, h, _ = ask(srv, proto, "POST", "/form", body=b"a=1",
                       headers={"Host": "Example.COM:8080"})
        assert st == 308 and h["location"] == "https://Example.COM/form", (proto, h)  # as sent
    if tls:  # over TLS the rule does not hold: the file is served
        s = tls_connect(tls_port, sni="localhost")
        s.sendall(b"GET /a/b.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\nb\n"), data


@recipe_of("www")
def test_www_to_the_bare_domain(make_server):
    srv = recipe(make_server, "www", {"x.txt": "x\n"}).start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "GET", "/x.txt?q=1", headers={"Host": "WWW.Example.com"})
        assert st == 301 and h["location"] == "https://example.com/x.txt?q=1", (proto, h)
        st, _, body = ask(srv, proto, "GET", "/x.txt", headers={"Host": "example.com"})
        assert st == 200 and body == b"x\n"


@recipe_of("https-www")
def test_https_and_www_in_one_step(make_server):
    srv = recipe(make_server, "https-www").start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "GET", "/a?b=1", headers={"Host": "www.example.com"})
        assert st == 301 and h["location"] == "https://example.com/a?b=1"
        st, h, _ = ask(srv, proto, "GET", "/a?b=1", headers={"Host": "example.com"})
        assert st == 301 and h["location"] == "https://example.com/a?b=1"


@needs_pcre2
@recipe_of("blog")
def test_old_blog_paths(make_server):
    srv = recipe(make_server, "blog", {"blog/hello-world": "new\n"}).start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "GET", "/2019/05/hello-world.html?utm_source=x")
        assert st == 301 and h["location"] == "/blog/hello-world", (proto, h)
        st, h, _ = ask(srv, proto, "GET", "/archives/2019/hello/?ref=mail")
        assert st == 301 and h["location"] == "/blog/2019/hello?ref=mail", (proto, h)
        st, h, _ = ask(srv, proto, "GET", "/wp-content/uploads/2019/a%20b.png")
        assert st == 301 and h["location"] == "/media/2019/a%20b.png", (proto, h)
        # a capture never makes the target another host
        st, h, _ = ask(srv, proto, "GET", "/wp-content/uploads//evil.example/x")
        assert st == 301 and h["location"].startswith("/media/") and "//" not in h["location"]
        st, _, body = ask(srv, proto, "GET", "/feed.rss")
        assert st == 410 and b"410 Gone" in body
        # what the rules do not take: as before
        assert ask(srv, proto, "GET", "/2019/05/Hello.html")[0] == 404
        assert ask(srv, proto, "GET", "/blog/hello-world")[2] == b"new\n"


@needs_pcre2
@recipe_of("spa")
def test_single_page_application(make_server):
    srv = recipe(make_server, "spa", {"index.html": "<app>\n", "assets/app.3f2a9c.js": "js\n",
                                      "api/items.json": "[]\n"}).start()
    for proto in protocols():
        for path in ["/", "/users/42/settings", "/apix"]:
            st, h, body = ask(srv, proto, "GET", path)
            assert st == 200 and body == b"<app>\n", (proto, path, st)
            assert h["cache-control"] == "no-cache", (proto, path, h)
        st, h, body = ask(srv, proto, "GET", "/assets/app.3f2a9c.js")
        assert st == 200 and body == b"js\n"
        assert h["cache-control"] == "max-age=31536000, immutable" and "expires" in h
        assert ask(srv, proto, "GET", "/assets/old.js")[0] == 404
        assert ask(srv, proto, "GET", "/favicon.ico")[0] == 404
        st, h, body = ask(srv, proto, "GET", "/api/items.json")
        assert st == 200 and body == b"[]\n" and "cache-control" not in h
        assert ask(srv, proto, "GET", "/api/users/7")[0] == 404
        st, h, _ = ask(srv, proto, "GET", "/api")  # the folder, not the application
        assert st == 301 and h["location"] == "/api/"


@recipe_of("cors")
def test_cors_for_an_api(make_server):
    app, dev = "https://app.example.com", "http://localhost:3000"
    srv = recipe(make_server, "cors", {"api/items.json": "[]\n"}).start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "OPTIONS", "/api/items.json", headers={
            "Origin": app, "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "content-type, authorization"})
        assert st == 204, (proto, st, h)
        assert h["access-control-allow-origin"] == app
        assert h["access-control-allow-methods"] == "GET,POST,PUT,DELETE"
        assert h["access-control-allow-headers"] == "Content-Type,Authorization"
        assert h["access-control-allow-credentials"] == "true"
        assert h["access-control-max-age"] == "600" and h["vary"] == "Origin"
        # another origin, or a field not allowed: refused, without any Allow field
        for origin, fields in [("https://evil.example", "content-type"), (dev, "x-other")]:
            st, h, _ = ask(srv, proto, "OPTIONS", "/api/items.json", headers={
                "Origin": origin, "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": fields})
            assert st == 403 and not any(k.startswith("access-control-") for k in h), (proto, h)
        st, h, body = ask(srv, proto, "GET", "/api/items.json", headers={"Origin": dev})
        assert st == 200 and body == b"[]\n"
        assert h["access-control-allow-origin"] == dev
        assert h["access-control-allow-credentials"] == "true"
        assert h["access-control-expose-headers"] == "ETag" and "etag" in h
        # errors too, so that the page reads a 404 as a 404
        st, h, _ = ask(srv, proto, "GET", "/api/missing", headers={"Origin": app})
        assert st == 404 and h["access-control-allow-origin"] == app
        st, h, _ = ask(srv, proto, "GET", "/api/items.json", headers={"Origin": "https://x.example"})
        assert st == 200 and "access-control-allow-origin" not in h and h["vary"] == "Origin"
        st, h, _ = ask(srv, proto, "GET", "/api/items.json")
        assert st == 200 and "access-control-allow-origin" not in h and "vary" not in h


SECURITY = {
    "strict-transport-security": "max-age=63072000; includeSubDomains",
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "referrer-policy": "strict-origin-when-cross-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}


@recipe_of("security")
def test_security_headers(make_server):
    srv = recipe(make_server, "security", {"index.html": "home\n", "new-page.html": "new\n"}).start()
    for proto in protocols():
        for path in ["/", "/new-page.html"]:
            st, h, _ = ask(srv, proto, "GET", path)
            assert st == 200 and {k: h.get(k) for k in SECURITY} == SECURITY, (proto, path, h)
        st, h, _ = ask(srv, proto, "GET", "/missing")
        assert st == 404
        assert h["strict-transport-security"] == SECURITY["strict-transport-security"]
        assert h["x-content-type-options"] == "nosniff"
        assert not {"content-security-policy", "referrer-policy", "permissions-policy"} & set(h)
        # the redirect's rule took it: the fields' rule was not asked
        st, h, _ = ask(srv, proto, "GET", "/old-page.html")
        assert st == 301 and h["location"] == "/new-page.html"
        assert not set(SECURITY) & set(h), h


@recipe_of("uploads")
def test_per_path_upload_limits(make_server):
    srv = recipe(make_server, "uploads").start()
    assert srv.server_conf["MaxRequestBody"] == "1M"
    big, mid, small = b"u" * (2 << 20), b"a" * (100 << 10), b"s" * (10 << 10)
    # within the rule's limit the body goes on (to the static handler here, which refuses POST)
    assert ask(srv, "h1", "POST", "/upload", body=big)[0] == 405
    assert ask(srv, "h1", "PUT", "/upload", body=big)[0] == 405
    for proto in protocols():
        assert ask(srv, proto, "POST", "/api/items", body=small)[0] != 413
        # refused on the head alone, before any of the body is sent
        cl = {"Content-Length": str(len(mid))}
        st = ask(srv, proto, "POST", "/api/items", headers=cl, end=False)[0] \
            if proto == "h2" else _head_only(srv, "/api/items", len(mid))
        assert st == 413, proto
        st = ask(srv, proto, "GET", "/upload", headers={"Content-Length": str(len(big))},
                 end=False)[0] if proto == "h2" else _head_only(srv, "/upload", len(big), "GET")
        assert st == 413, proto
        st = ask(srv, proto, "POST", "/other", headers={"Content-Length": str(len(big))},
                 end=False)[0] if proto == "h2" else _head_only(srv, "/other", len(big))
        assert st == 413, proto


def _head_only(srv, path, length, method="POST"):
    c = Conn(srv.port)
    try:
        c.send(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\n")
        return c.read_response().status
    finally:
        c.close()


ECHO = ('#!/bin/sh\nbody=$(head -c "$CONTENT_LENGTH")\n'
        'printf "Content-Type: text/plain\\n\\n%s" "$body"\n')


@needs_dlopen
@recipe_of("timeouts")
def test_timeouts_of_a_path(make_server):
    big = b"z" * (16 << 20)
    srv = recipe(make_server, "timeouts", {"status.json": big, "big.bin": big},
                 Timeout="1", SendTimeout="30", GracefulTimeout="1")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    (bindir / "echo.sh").write_text(ECHO)
    (bindir / "echo.sh").chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /upload/ {bindir}\n    ScriptAlias /cgi/ {bindir}\n"
    srv.start()
    # /upload may pause its body for longer than the server's Timeout 1 s
    c = Conn(srv.port)
    c.send("POST /upload/echo.sh HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n01234")
    time.sleep(2.5)
    c.send("56789")
    r = c.read_response()
    assert r.status == 200 and r.body == b"0123456789", r
    c.close()
    # the same script elsewhere has the server's 1 s: the connection is closed
    c = Conn(srv.port)
    c.send("POST /cgi/echo.sh HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n01234")
    start = time.monotonic()
    assert c.closed(timeout=4), "the server's Timeout"
    assert time.monotonic() - start < 3.5 * SLOW
    c.close()
    # a client that stops reading /status.json is let go after 2 s; one of big.bin is not
    slow_status, slow_big = small_window(srv.port, 4096, 10), small_window(srv.port, 4096, 10)
    slow_status.sendall(b"GET /status.json HTTP/1.1\r\nHost: localhost\r\n\r\n")
    slow_big.sendall(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(3.5)  # past the rule's 2 s, far from the server's 30 s
    got, closed = _read_all(slow_status, len(big))
    assert closed and got < len(big), (got, closed)
    # what it got was what the kernel held when the server gave up; big.bin goes on past it
    more, closed = _read_all(slow_big, got + (1 << 20))
    assert more >= got + (1 << 20) and not closed, (got, more, closed)
    slow_status.close()
    slow_big.close()
    if "h2" not in protocols():
        return
    # over HTTP/2 the rule's SendTimeout is its stream's: a stream whose window the
    # client keeps shut is reset at 2 s, the other stream of the connection is not
    import h2.settings
    from h2util import H2Client
    c = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.read_once()  # the server's SETTINGS, and its ACK of ours
    a, b = c.request("/status.json"), c.request("/big.bin")
    start = time.monotonic()
    while c.streams[a]["reset"] is None:
        assert time.monotonic() - start < 8 * SLOW, c.streams
        c.read_once()
    took = time.monotonic() - start
    assert 1.5 <= took <= 6 * SLOW and c.streams[a]["reset"] == 8, (took, c.streams[a])  # CANCEL
    assert c.streams[b]["reset"] is None and c.streams[b]["headers"][":status"] == "200"
    c.close()


def _read_all(s, length):
    """Read a response's first `length` body bytes as fast as they come:
    (body bytes received, whether the server closed the connection first)."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and len(body) >= length:
            return len(body), False
        try:
            chunk = s.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return len(body) if sep else 0, True
        data += chunk


@recipe_of("login")
def test_rate_limit_of_a_login_form(make_server):
    srv = recipe(make_server, "login", {"login": "the form\n"}).start()
    protos = protocols()
    # the form itself is never counted
    for _ in range(8):
        assert ask(srv, "h1", "GET", "/login")[0] == 200
    for i in range(5):  # burst=4: five at once, whichever the protocol
        st = ask(srv, protos[i % len(protos)], "POST", "/login", body=b"user=a&password=b")[0]
        assert st != 429, i
    for proto in protos:
        st, h, _ = ask(srv, proto, "POST", "/login", body=b"user=a&password=c")
        assert st == 429 and 1 <= int(h["retry-after"]) <= 12, (proto, h)
    assert ask(srv, "h1", "GET", "/login")[0] == 200
    # another client address has its own count
    c = Conn(srv.port, source="127.0.0.2")
    assert c.request("POST", "/login", body=b"user=a").status != 429
    c.close()


@recipe_of("maintenance")
def test_maintenance_page(make_server):
    page = "<h1>Back in an hour</h1>\n"
    srv = recipe(make_server, "maintenance", {"maintenance/style.css": "h1{}\n",
                                              "index.html": "home\n"})
    (srv.conf / "errors").mkdir()
    (srv.conf / "errors" / "maintenance.html").write_text(page)
    srv.start()
    for proto in protocols():
        for method, path in [("GET", "/"), ("GET", "/index.html"), ("POST", "/x"),
                             ("HEAD", "/a/b")]:
            st, h, body = ask(srv, proto, method, path, body=b"1" if method == "POST" else b"")
            assert st == 503 and h["retry-after"] == "3600", (proto, path, h)
            assert h["content-type"].startswith("text/html")
            assert body == (b"" if method == "HEAD" else page.encode()), (proto, path)
            assert h["content-length"] == str(len(page))
        st, h, body = ask(srv, proto, "GET", "/maintenance/style.css")
        assert st == 200 and body == b"h1{}\n" and h["cache-control"] == "no-cache"
    # the page is read again by a reload
    (srv.conf / "errors" / "maintenance.html").write_text("<h1>Soon</h1>\n")
    srv.reload()
    assert ask(srv, "h1", "GET", "/")[2] == b"<h1>Soon</h1>\n"


@recipe_of("precedence")
def test_precedence(make_server):
    srv = recipe(make_server, "precedence", {"shopping": "shopping\n"}).start()
    for proto in protocols():
        st, h, _ = ask(srv, proto, "GET", "/shop/sale")
        assert st == 302 and h["location"] == "/offers/"
        st, h, _ = ask(srv, proto, "GET", "/shop/cart?x=1")
        assert st == 301 and h["location"] == "https://shop.example.com/shop/cart?x=1"
        st, h, _ = ask(srv, proto, "GET", "/shop/api/v1")  # the third rule is never reached
        assert st == 301 and h["location"] == "https://shop.example.com/shop/api/v1"
        assert ask(srv, proto, "GET", "/shopping")[2] == b"shopping\n"


@recipe_of("fields-first")
def test_a_rule_of_fields_first_hides_the_others(make_server):
    srv = recipe(make_server, "fields-first", {"old": "old\n"}).start()
    for proto in protocols():
        st, h, body = ask(srv, proto, "GET", "/old")
        assert st == 200 and body == b"old\n" and h["x-frame-options"] == "DENY"


@needs_pcre2
@recipe_of("rewrite")
def test_rewrite_asks_the_rules_again(make_server):
    srv = recipe(make_server, "rewrite", {"post.html": "post\n"}).start()
    for proto in protocols():
        st, h, body = ask(srv, proto, "GET", "/p/42")
        assert st == 200 and body == b"post\n" and h["x-post"] == "yes", (proto, h)
        assert ask(srv, proto, "GET", "/loop")[0] == 500
    assert "rewritten more than 10 times" in srv.stderr_text()
