"""The reverse proxy's field settings of a site's [PROXY] section
(plugins/proxy, px_fconf.c and px_fields.c): Host, X-Forwarded-For,
X-Forwarded-Proto, X-Forwarded-Host, Forwarded, RequestHeader and
ResponseHeader lines, Redirect (Location and Refresh) and CookiePath and
CookieDomain (Set-Cookie), over HTTP/1.1, HTTP/2 and TLS clients, and
monkey -t naming the file and line of a bad one. The upstream is
proxy_upstream.py: .../head echoes the request's head as it came,
.../answer answers with the status and fields it is asked for."""

import urllib.parse

import pytest

from conftest import HAS_IPV6, Conn, needs_dlopen, needs_part, wait_port
from h2util import H2Client, skip_without_h2
from test_proxy import check_conf, PROXY_SO, proxy_server, upstreams  # noqa: F401 (a fixture)

pytestmark = [needs_dlopen,
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]


def head_of(r):
    """The request head the upstream received: (request line, [(name, value)] in order)."""
    assert r.status == 200, (r.status, r.body)
    lines = r.body.decode("latin-1").split("\r\n")
    assert lines[-2:] == ["", ""], lines
    fields = []
    for ln in lines[1:-2]:
        k, v = ln.split(":", 1)
        fields.append((k.lower(), v.strip()))
    return lines[0], fields


def values(fields, name):
    return [v for k, v in fields if k == name.lower()]


def get(srv, path, headers=None):
    c = srv.conn()
    try:
        return c.request("GET", path, headers=headers)
    finally:
        c.close()


def answer_path(prefix="/app", status=200, fields=()):
    q = [("status", str(status))] + [("h", f"{k}:{v}") for k, v in fields]
    return f"{prefix}/answer?" + urllib.parse.urlencode(q)


def site(u, *lines, prefix="/app"):
    return f"    Pass {prefix} {u.addr}\n" + "".join(f"    {ln}\n" for ln in lines)


def test_defaults_are_as_before(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u)).start()
    line, f = head_of(get(srv, "/app/head", {"X-Forwarded-For": "203.0.113.9",
                                             "X-Forwarded-Proto": "https",
                                             "Forwarded": "for=198.51.100.1"}))
    assert line == "GET /app/head HTTP/1.1"
    assert values(f, "host") == ["localhost"]
    assert values(f, "x-forwarded-for") == ["203.0.113.9, 127.0.0.1"]
    assert values(f, "x-forwarded-proto") == ["http"]  # the client's is replaced
    assert values(f, "x-forwarded-host") == ["localhost"]
    assert values(f, "forwarded") == ["for=198.51.100.1"]  # Forwarded Off: passed as sent


def test_host_name(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "Host app.internal:8080")).start()
    _, f = head_of(get(srv, "/app/head", {"Host": "www.test"}))
    assert values(f, "host") == ["app.internal:8080"]
    assert values(f, "x-forwarded-host") == ["www.test"]  # what the client asked for
    srv.stop()
    srv = proxy_server(make_server, site=site(u, "Host KEEP")).start()
    _, f = head_of(get(srv, "/app/head", {"Host": "www.test"}))
    assert values(f, "host") == ["www.test"]


@pytest.mark.parametrize("mode,want", [("append", ["203.0.113.9, 198.51.100.2, 127.0.0.1"]),
                                       ("replace", ["127.0.0.1"]), ("off", [])])
def test_x_forwarded_for(make_server, upstreams, mode, want):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, f"XForwardedFor {mode}")).start()
    c = srv.conn()
    c.send(b"GET /app/head HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 203.0.113.9\r\n"
           b"X-Forwarded-For: 198.51.100.2\r\n\r\n")
    _, f = head_of(c.read_response())
    c.close()
    assert values(f, "x-forwarded-for") == want


def test_x_forwarded_proto_and_host_off(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "XForwardedProto Off",
                                              "XForwardedHost off")).start()
    _, f = head_of(get(srv, "/app/head", {"X-Forwarded-Proto": "https",
                                          "X-Forwarded-Host": "evil.test"}))
    assert values(f, "x-forwarded-proto") == [] and values(f, "x-forwarded-host") == []
    assert values(f, "x-forwarded-for") == ["127.0.0.1"]


def test_forwarded(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "Forwarded on")).start()
    c = srv.conn()
    c.send(b"GET /app/head HTTP/1.1\r\nHost: www.test:8080\r\nForwarded: for=198.51.100.1\r\n"
           b"Forwarded: for=\"[2001:db8::7]\";proto=https\r\n\r\n")
    _, f = head_of(c.read_response())
    c.close()
    # appended to the client's (XForwardedFor append), in one field; a host with ':' quoted
    assert values(f, "forwarded") == [
        'for=198.51.100.1, for="[2001:db8::7]";proto=https, '
        'for=127.0.0.1;proto=http;host="www.test:8080"']
    assert values(f, "x-forwarded-for") == ["127.0.0.1"]
    srv.stop()
    srv = proxy_server(make_server, site=site(u, "Forwarded on", "XForwardedFor replace")).start()
    _, f = head_of(get(srv, "/app/head", {"Forwarded": "for=198.51.100.1"}))
    assert values(f, "forwarded") == ["for=127.0.0.1;proto=http;host=localhost"]


@pytest.mark.skipif(not HAS_IPV6, reason="no IPv6 loopback (::1)")
def test_forwarded_ipv6_client(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "Forwarded on", "XForwardedFor off"))
    srv.set(Listen=f"[::1]:{srv.port}")
    srv.start(wait=False)
    assert wait_port(srv.port, host="::1", proc=srv.proc), srv.stderr_text()
    c = Conn(srv.port, host="::1")
    r = c.request("GET", "/app/head")
    c.close()
    _, f = head_of(r)
    assert values(f, "forwarded") == ['for="[::1]";proto=http;host=localhost']
    assert values(f, "x-forwarded-for") == []


def test_request_header_set_and_remove(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(
        u, "RequestHeader set X-Api-Key  s3cret value ", "RequestHeader remove User-Agent",
        "RequestHeader remove Cookie", "RequestHeader set X-Forwarded-For 10.9.9.9",
        "RequestHeader set x-tenant t1")).start()
    _, f = head_of(get(srv, "/app/head", {"X-Api-Key": "client's", "User-Agent": "curl",
                                          "Cookie": "sid=1", "X-Tenant": "t0", "X-Kept": "k"}))
    assert values(f, "x-api-key") == ["s3cret value"]  # the client's replaced
    assert values(f, "user-agent") == [] and values(f, "cookie") == []
    assert values(f, "x-forwarded-for") == ["10.9.9.9"]  # in place of the proxy's own
    assert values(f, "x-tenant") == ["t1"]
    assert values(f, "x-kept") == ["k"]
    assert values(f, "host") == ["localhost"]


def test_response_header_set_add_remove(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(
        u, "ResponseHeader set X-Frame-Options DENY", "ResponseHeader add Cache-Control no-store",
        "ResponseHeader add X-Extra one", "ResponseHeader add X-Extra two",
        "ResponseHeader remove X-Powered-By")).start()
    r = get(srv, answer_path(fields=[("X-Frame-Options", "ALLOW"), ("X-Powered-By", "php"),
                                     ("Cache-Control", "private"), ("X-Up", "u")]))
    assert r.status == 200
    assert r.headers["x-frame-options"] == ["DENY"]
    assert "x-powered-by" not in r.headers
    assert r.headers["cache-control"] == ["private", "no-store"]
    assert r.headers["x-extra"] == ["one", "two"]
    assert r.headers["x-up"] == ["u"]
    # on every answer of the site's routes, errors of the upstream too
    r = get(srv, answer_path(status=404, fields=[("X-Powered-By", "php")]))
    assert r.status == 404 and r.headers["x-frame-options"] == ["DENY"]
    assert "x-powered-by" not in r.headers


def test_redirect_maps(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(
        u, "Redirect http://app.internal/ https://www.test/",
        "Redirect /internal/ /app/")).start()
    cases = [("http://app.internal/a?b=1", "https://www.test/a?b=1"),
             ("/internal/login", "/app/login"),
             ("http://other.test/internal/", "http://other.test/internal/")]
    for sent, want in cases:
        r = get(srv, answer_path(status=302, fields=[("Location", sent)]))
        assert r.status == 302 and r.headers["location"] == [want], (sent, r.headers)
    r = get(srv, answer_path(fields=[("Refresh", "5; url=http://app.internal/next")]))
    assert r.headers["refresh"] == ["5; url=https://www.test/next"]
    r = get(srv, answer_path(fields=[("Refresh", "0;URL='/internal/x'")]))
    assert r.headers["refresh"] == ["0;URL='/app/x'"]
    # other fields are never rewritten
    r = get(srv, answer_path(fields=[("Content-Location", "http://app.internal/a")]))
    assert r.headers["content-location"] == ["http://app.internal/a"]


def test_redirect_default(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "Redirect default", "Host backend.local")
                       + f"    Pass /api {u.addr}\n").start()
    up = f"http://127.0.0.1:{u.port}"
    r = get(srv, answer_path(status=301, fields=[("Location", f"{up}/app/x?y")]),
            {"Host": "www.test:8443"})
    assert r.headers["location"] == ["http://www.test:8443/app/x?y"]
    r = get(srv, answer_path(fields=[("Location", "http://backend.local/app/z")]))
    assert r.headers["location"] == ["http://localhost/app/z"]  # the Host NAME sent upstream
    r = get(srv, answer_path(fields=[("Refresh", f"1; url={up}/app/r")]))
    assert r.headers["refresh"] == ["1; url=http://localhost/app/r"]
    # the route's prefix: a Location outside it is left alone
    r = get(srv, answer_path(fields=[("Location", f"{up}/other")]))
    assert r.headers["location"] == [f"{up}/other"]
    r = get(srv, answer_path("/api", fields=[("Location", f"{up}/api/1")]))
    assert r.headers["location"] == ["http://localhost/api/1"]


def test_cookie_path_and_domain(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(
        u, "CookiePath /internal/ /app/", "CookiePath / /app",
        "CookieDomain backend.local www.test", "CookieDomain .corp.local .test")).start()
    r = get(srv, answer_path(fields=[
        ("Set-Cookie", "a=1; Path=/internal/; HttpOnly"),
        ("Set-Cookie", "b=2; path=/; Domain=BACKEND.local"),
        ("Set-Cookie", "c=3; Domain=.corp.local; Path=/internal/sub"),
        ("Set-Cookie", "Path=/internal/; Secure")]))
    assert r.headers["set-cookie"] == ["a=1; Path=/app/; HttpOnly",
                                       "b=2; path=/app; Domain=www.test",
                                       "c=3; Domain=.test; Path=/internal/sub",
                                       "Path=/internal/; Secure"]


def test_http2_client(make_server, upstreams):
    skip_without_h2()
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(
        u, "Host backend.local", "Forwarded on", "RequestHeader set X-Via h2",
        "RequestHeader remove X-Drop", "ResponseHeader add X-Extra one",
        "ResponseHeader add X-Extra two", "ResponseHeader remove X-Powered-By",
        "Redirect default", "CookiePath / /app"), h2c=True).start()
    h = H2Client(srv.port)
    sid = h.request("/app/head", authority="www.test",
                    headers=[("x-drop", "1"), ("x-via", "client"), ("forwarded", "for=192.0.2.1")])
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200"
    lines = st["data"].decode().split("\r\n")
    f = [(k.lower(), v.strip()) for k, v in (ln.split(":", 1) for ln in lines[1:] if ln)]
    assert values(f, "host") == ["backend.local"]
    assert values(f, "x-forwarded-host") == ["www.test"]
    assert values(f, "x-via") == ["h2"] and values(f, "x-drop") == []
    assert values(f, "forwarded") == ["for=192.0.2.1, for=127.0.0.1;proto=http;host=www.test"]
    up = f"http://127.0.0.1:{u.port}"
    sid = h.request(answer_path(status=302, fields=[("Location", f"{up}/app/next"),
                                                    ("Set-Cookie", "s=1; Path=/"),
                                                    ("X-Powered-By", "php")]),
                    authority="www.test")
    h.wait([sid])
    got = next(ev.headers for ev in h.events if getattr(ev, "stream_id", None) == sid
               and type(ev).__name__ == "ResponseReceived")
    got = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v)
           for k, v in got]
    assert (":status", "302") in got
    assert values(got, "location") == ["http://www.test/app/next"]
    assert values(got, "set-cookie") == ["s=1; Path=/app"]
    assert values(got, "x-extra") == ["one", "two"]
    assert values(got, "x-powered-by") == []
    h.close()


def test_tls_client(make_server, upstreams):
    from tlsutil import TLS_MARKS, https, tls_server
    for mark in TLS_MARKS:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    u = upstreams("a")
    srv = tls_server(make_server, plugins=[str(PROXY_SO)])
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n")
    srv.site_extra += "[PROXY]\n" + site(u, "Forwarded on", "Redirect default")
    srv.start()
    status, _, body = https(srv, "/app/head")
    assert status == 200
    f = [(k.lower(), v.strip()) for k, v in
         (ln.split(":", 1) for ln in body.decode().split("\r\n")[1:] if ln)]
    assert values(f, "x-forwarded-proto") == ["https"]
    assert values(f, "forwarded") == ["for=127.0.0.1;proto=https;host=localhost"]
    status, headers, _ = https(srv, answer_path(status=302, fields=[
        ("Location", f"http://127.0.0.1:{u.port}/app/x")]))
    assert status == 302 and headers["location"] == "https://localhost/app/x"


BAD_LINES = [
    ("RequestHeader set Content-Length 5", "Content-Length cannot be set or removed"),
    ("RequestHeader remove Connection", "Connection cannot be set or removed"),
    ("RequestHeader set Transfer-Encoding chunked", "hop-by-hop"),
    ("RequestHeader set Keep-Alive 5", "hop-by-hop"),
    ("RequestHeader set Proxy-Authorization x", "hop-by-hop"),
    ("RequestHeader set Host a.test", "Host is set with the Host key"),
    ("RequestHeader add X-A v", "expected set NAME VALUE or remove NAME"),
    ("RequestHeader set X-A", "expected set|add NAME VALUE"),
    ("RequestHeader remove X-A extra", "expected remove NAME"),
    ("RequestHeader set X(A) v", "not a field name"),
    ("RequestHeader set X-A a\x01b", "holds a control byte"),
    ("RequestHeader set X-A a\rb", "stray carriage return"),
    ("ResponseHeader set Transfer-Encoding chunked", "hop-by-hop"),
    ("ResponseHeader add Content-Length 1", "framing"),
    ("ResponseHeader set Server x", "the server sets it"),
    ("ResponseHeader put X-A v", "expected set|add NAME VALUE or remove NAME"),
    ("Redirect /a", "expected Redirect FROM TO or Redirect default"),
    ("Redirect /a /b /c", "expected Redirect FROM TO"),
    ("CookiePath a /b", "a cookie path starts with '/'"),
    ("CookieDomain a;b c", "';'"),
    ("Host a b", "expected KEEP or a host name"),
    ("XForwardedFor sometimes", "sometimes"),
    ("Forwarded maybe", "maybe"),
]


@pytest.mark.parametrize("line,why", BAD_LINES, ids=[b[0].split(" ")[0] + str(i)
                                                       for i, b in enumerate(BAD_LINES)])
def test_monkey_t_refuses_bad_lines(make_server, upstreams, line, why):
    # the site file: [HOST], ServerName, DocumentRoot, [PROXY], Pass (line 5), the bad line
    srv = proxy_server(make_server, site=f"    Pass /app 127.0.0.1:9\n    {line}\n")
    err = srv.run_expect_failure(["-t"])
    assert why in err, err
    assert "sites/default:6" in err, err


def test_monkey_t_refuses_repeats(make_server, upstreams):
    srv = proxy_server(make_server, site="    Pass /app 127.0.0.1:9\n    RequestHeader set X-A 1\n"
                       "    RequestHeader remove x-a\n")
    err = srv.run_expect_failure(["-t"])
    assert "set or removed by an earlier line" in err and "sites/default:7" in err, err
    srv = proxy_server(make_server, site="    Pass /app 127.0.0.1:9\n    Redirect default\n"
                       "    Redirect default\n")
    err = srv.run_expect_failure(["-t"])
    assert "given twice" in err and "sites/default:7" in err, err
    srv = proxy_server(make_server, site="    Pass /app 127.0.0.1:9\n    Host a.test\n"
                       "    Host b.test\n")
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:7" in err, err


def test_monkey_t_accepts_good_lines(make_server, upstreams):
    lines = ["Host KEEP", "XForwardedFor replace", "XForwardedProto Off", "XForwardedHost On",
             "Forwarded On", "RequestHeader set X-A a b\tc", "RequestHeader remove Cookie",
             "ResponseHeader add Set-Cookie x=1", "ResponseHeader set X-B 1", "Redirect default",
             "Redirect / /app/", "CookiePath / /app", "CookieDomain a.local b.test"]
    srv = proxy_server(make_server, site="    Pass /app 127.0.0.1:9\n"
                       + "".join(f"    {ln}\n" for ln in lines))
    check_conf(srv)


def test_rewritten_heads_on_one_connection(make_server, upstreams):
    """Long heads rewritten, one after the other on one kept-alive client connection."""
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "Redirect default", "CookiePath / /app",
                                              "ResponseHeader add X-Extra e")).start()
    c = srv.conn()
    for i in range(5):
        r = c.request("GET", answer_path(fields=[("Set-Cookie", f"n={i}; Path=/")]
                                         + [(f"X-F{k}", "v" * 100) for k in range(40)]))
        assert r.status == 200 and r.headers["set-cookie"] == [f"n={i}; Path=/app"]
        assert r.headers["x-extra"] == ["e"]
    c.close()


@needs_part("realip", "the client's address behind a balancer")
def test_client_address_per_request(make_server, upstreams):
    """The proxy's X-Forwarded-For and Forwarded name each request's own
    client, not the last one's: with RealIPFrom, three clients on one
    connection (IPv4, IPv6, then the peer itself), and twice the first."""
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u, "XForwardedFor replace", "Forwarded on"))
    srv.set(RealIPFrom="127.0.0.0/8")
    srv.start()
    c = srv.conn()
    seen = []
    for xff in ("203.0.113.7", "2001:db8::5", None, "203.0.113.7", "203.0.113.8"):
        extra = f"X-Forwarded-For: {xff}\r\n" if xff else ""
        c.send(f"GET /app/head HTTP/1.1\r\nHost: www.test\r\n{extra}\r\n".encode())
        _, f = head_of(c.read_response())
        seen.append((values(f, "x-forwarded-for"), values(f, "forwarded")))
    c.close()
    assert seen == [
        (["203.0.113.7"], ["for=203.0.113.7;proto=http;host=www.test"]),
        (["2001:db8::5"], ['for="[2001:db8::5]";proto=http;host=www.test']),
        (["127.0.0.1"], ["for=127.0.0.1;proto=http;host=www.test"]),
        (["203.0.113.7"], ["for=203.0.113.7;proto=http;host=www.test"]),
        (["203.0.113.8"], ["for=203.0.113.8;proto=http;host=www.test"]),
    ]
