"""Request rules by query, and the per-path settings that bound, refuse or
list: Query and QueryRegex conditions, MaxRequestBody, Allow, Deny and
DirectoryListing in a [RULE] (server/http/rules.c, server/config/conf_rules.c,
server/request/request_rules.c); over HTTP/1.1 and HTTP/2 alike."""

import pytest

from conftest import BUILD, Conn, built_without, needs_dlopen, needs_part
from gwutil import get
from rulesutil import check_refused, rules_server

pytestmark = needs_part("rules", "request rules")
needs_pcre2 = pytest.mark.skipif(built_without("pcre2"), reason="built without PCRE2")

QUERY_RULES = """
[RULE]
    Query debug
    Return 403 no debugging here

[RULE]
    Prefix /search
    Query sort price desc
    Return 200 by price
"""

QUERY_REGEX_RULES = """
[RULE]
    Path /item
    QueryRegex (^|&)id=[0-9]+(&|$)
    Rewrite /item.txt

[RULE]
    Path /item
    Return 400 an item needs a numeric id
"""

FILES = {"index.html": "home\n", "item.txt": "an item\n", "search": "results\n",
         "upload/x": "x\n", "admin/index.html": "admin\n", "big/x": "x\n"}


def test_query_conditions(make_server):
    srv = rules_server(make_server, QUERY_RULES, FILES).start()
    c = Conn(srv.port)
    r = c.request("GET", "/index.html?a=1&debug")
    assert r.status == 403 and r.body == b"no debugging here\n"
    assert c.request("GET", "/index.html?a=1&debugging=1").status == 200  # whole names
    assert c.request("GET", "/index.html?%64ebug=1").status == 403  # names decoded
    r = c.request("GET", "/search?q=x&sort=price+desc")
    assert r.status == 200 and r.body == b"by price\n"
    assert c.request("GET", "/search?sort=price%20desc").body == b"by price\n"
    assert c.request("GET", "/search?sort=price").body == b"results\n"
    assert c.request("GET", "/search").body == b"results\n"
    c.close()


@needs_pcre2
def test_query_regex(make_server):
    srv = rules_server(make_server, QUERY_REGEX_RULES, FILES).start()
    c = Conn(srv.port)
    r = c.request("GET", "/item?x=1&id=42")
    assert r.status == 200 and r.body == b"an item\n"
    r = c.request("GET", "/item?id=4x")
    assert r.status == 400 and r.body == b"an item needs a numeric id\n"
    assert c.request("GET", "/item").status == 400  # no query: matched as empty
    c.close()


@needs_pcre2
def test_query_over_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = rules_server(make_server, QUERY_RULES + QUERY_REGEX_RULES, FILES, h2=True).start()
    c = H2Client(srv.port)
    assert c.get("/index.html?debug=1")["headers"][":status"] == "403"
    assert c.get("/index.html?x=debug")["headers"][":status"] == "200"
    assert c.get("/item?id=7")["data"] == b"an item\n"
    assert c.get("/item?id=x")["headers"][":status"] == "400"
    c.close()


BODY_RULES = """
[RULE]
    Prefix /upload
    MaxRequestBody 10

[RULE]
    Prefix /big
    MaxRequestBody 1k
"""


def test_max_request_body_before_the_body(make_server):
    srv = rules_server(make_server, BODY_RULES, FILES, MaxRequestBody="100").start()
    c = Conn(srv.port)
    # the head alone: refused before a byte of the body is sent
    c.send("POST /upload/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\n")
    r = c.read_response()
    assert r.status == 413
    c.close()
    c = Conn(srv.port)
    # within the rule's bound: on to the static handler, which refuses the method
    assert c.request("POST", "/upload/x", body=b"0123456789").status == 405
    # a rule may raise the server's bound, and the server's still holds elsewhere
    assert c.request("POST", "/big/x", body=b"y" * 500).status == 405
    c.close()
    c = Conn(srv.port)
    assert c.request("POST", "/index.html", body=b"y" * 500).status == 413
    c.close()
    c = Conn(srv.port)
    assert c.request("POST", "/big/x", body=b"y" * 1025).status == 413
    c.close()
    # a target no rule is asked for (no path) still has the server's bound
    c = Conn(srv.port)
    c.send("OPTIONS * HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n")
    assert c.read_response().status == 413
    c.close()


@needs_dlopen
def test_max_request_body_of_a_streamed_body(make_server):
    """A chunked body has no length to ask first: it is counted against the
    rule's bound as it arrives, for the gateway that reads it."""
    srv = rules_server(make_server, """
[RULE]
    Path /cgi-bin/small.sh
    MaxRequestBody 16
""", FILES, MaxRequestBody="1M")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    for name in ("small.sh", "large.sh"):
        script = bindir / name
        script.write_text('#!/bin/sh\necho "Content-Type: text/plain"\necho\nwc -c\n')
        script.chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /cgi-bin/ {bindir}\n"
    srv.start()
    chunked = {"Transfer-Encoding": "chunked"}
    body = b"14\r\n" + b"z" * 20 + b"\r\n0\r\n\r\n"
    r = get(srv, "/cgi-bin/large.sh", method="POST", headers=chunked, body=body)
    assert r.status == 200 and r.body.strip() == b"20"
    r = get(srv, "/cgi-bin/small.sh", method="POST", headers=chunked, body=body)
    assert r.status == 413
    small = b"8\r\n" + b"z" * 8 + b"\r\n0\r\n\r\n"
    r = get(srv, "/cgi-bin/small.sh", method="POST", headers=chunked, body=small)
    assert r.status == 200 and r.body.strip() == b"8"


def test_max_request_body_over_http2(make_server):
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = rules_server(make_server, BODY_RULES, FILES, h2=True, MaxRequestBody="100").start()
    c = H2Client(srv.port)
    sid = c.request("/upload/x", method="POST", body=b"y" * 11,
                    headers=[("content-length", "11")])
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "413"
    sid = c.request("/big/x", method="POST", body=b"y" * 500,
                    headers=[("content-length", "500")])
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "405"
    c.close()


ACCESS_RULES = """
[RULE]
    Prefix /admin
    Allow 127.0.0.1 ::1
    Deny all

[RULE]
    Prefix /
    Deny 127.0.0.3 192.0.2.0/24
"""


def test_allow_and_deny(make_server):
    srv = rules_server(make_server, ACCESS_RULES, FILES).start()
    local, other, banned = (Conn(srv.port), Conn(srv.port, source="127.0.0.2"),
                            Conn(srv.port, source="127.0.0.3"))
    assert local.request("GET", "/admin/").body == b"admin\n"
    assert other.request("GET", "/admin/").status == 403
    # denied before the path is looked at: a missing file is 403, not 404
    assert other.request("GET", "/admin/nosuch").status == 403
    assert other.request("GET", "/index.html").status == 200
    assert banned.request("GET", "/index.html").status == 403
    assert banned.request("GET", "/admin/").status == 403  # the first rule's Deny all
    for c in (local, other, banned):
        c.close()


def test_allow_and_deny_by_the_real_client(make_server):
    """Behind a trusted proxy (RealIPFrom) the address that counts is the
    one its field names, not the proxy's."""
    srv = rules_server(make_server, ACCESS_RULES, FILES, RealIPFrom="127.0.0.1").start()
    c = Conn(srv.port)
    assert c.request("GET", "/index.html").status == 200
    r = c.request("GET", "/index.html", headers={"X-Forwarded-For": "192.0.2.9"})
    assert r.status == 403
    assert c.request("GET", "/admin/", headers={"X-Forwarded-For": "198.51.100.1"}).status == 403
    assert c.request("GET", "/admin/", headers={"X-Forwarded-For": "127.0.0.1"}).status == 200
    c.close()
    # an untrusted peer's field is not read
    c = Conn(srv.port, source="127.0.0.2")
    assert c.request("GET", "/index.html", headers={"X-Forwarded-For": "192.0.2.9"}).status == 200
    c.close()


@pytest.mark.parametrize("text,line,words", [
    ("[RULE]\n    Query a=1\n    Return 410\n", 5, "expected a parameter name"),
    ("[RULE]\n    Prefix /a\n    MaxRequestBody lots\n", 6, "MaxRequestBody"),
    ("[RULE]\n    Prefix /a\n    Allow 10.0.0.0/8 nobody\n", 6, "'nobody' is not"),
    ("[RULE]\n    Prefix /a\n    Deny 10.0.0.1/8\n", 6, "bits set beyond"),
    ("[RULE]\n    Prefix /a\n    Deny 10.0.0.0/40\n", 6, "out of range"),
    ("[RULE]\n    Prefix /a\n    DirectoryListing sometimes\n", 6, "DirectoryListing"),
    ("[RULE]\n    Prefix /a\n    Timeout soon\n", 6, "Timeout"),
    ("[RULE]\n    Prefix /a\n    Timeout 0\n", 6, "out of range"),
    ("[RULE]\n    Prefix /a\n    SendTimeout 3601s\n", 6, "out of range"),
    ("[RULE]\n    Scheme ftp\n    Return 410\n", 5, "Scheme ftp: expected http or https"),
    ("[RULE]\n    ReturnFile 503\n", 5, "expected a status"),
    ("[RULE]\n    ReturnFile 304 down.html\n", 5, "expected a status"),
    ("[RULE]\n    Path /a\n    ReturnFile 503 errors/missing.html\n", 6,
     "errors/missing.html: No such file or directory"),
    ("[RULE]\n    ReturnFile 503 sites\n", 5, "/sites: not a regular file"),
    ("[RULE]\n    ReturnFile 503 /etc/hostname\n    Rewrite /a\n", 4, "only one"),
])
def test_check_refuses_bad_settings(make_server, text, line, words):
    check_refused(make_server, text, line, words)


def test_check_query_regex(make_server):
    err = check_refused(make_server, "[RULE]\n    QueryRegex (a\n    Return 410\n", 5,
                        "QueryRegex")
    if built_without("pcre2"):
        assert "this server was built without PCRE2" in err
    else:
        assert "missing closing parenthesis" in err


@needs_dlopen
def test_directory_listing_per_rule(make_server):
    """DirectoryListing in a rule decides for the paths it takes, over the
    site's [DIRLISTING] (the listing plugin asks api->listing)."""
    from test_dirlisting import SO, names
    files = {"pub/a.txt": "a", "pub/private/p.txt": "p", "files/f.txt": "f", "other/o.txt": "o"}
    srv = rules_server(make_server, """
[DIRLISTING]
    Path /pub

[RULE]
    Prefix /pub/private
    DirectoryListing Off

[RULE]
    Prefix /files
    DirectoryListing On
""", files)
    srv.plugins = [str(SO)]
    srv.start()
    r = srv.get("/pub/")
    assert r.status == 200 and names(r.body) == ["private/", "a.txt"]
    r = srv.get("/pub/private/")
    assert r.status == 403 and b"Index of" not in r.body
    assert srv.get("/pub/private/p.txt").body == b"p"  # files are served as before
    r = srv.get("/files/")
    assert r.status == 200 and names(r.body) == ["f.txt"]
    assert srv.get("/other/").status == 403


@needs_dlopen
def test_directory_listing_of_a_rule_without_dirlisting_section(make_server):
    from test_dirlisting import SO, names
    srv = rules_server(make_server, "[RULE]\n    Prefix /files\n    DirectoryListing On\n",
                       {"files/f.txt": "f", "other/o.txt": "o"})
    srv.plugins = [str(SO)]
    srv.start()
    assert names(srv.get("/files/").body) == ["f.txt"]
    assert srv.get("/other/").status == 403


def test_return_file_too_large_or_unreadable(make_server, tmp_path):
    big = tmp_path / "big.html"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    check_refused(make_server, f"[RULE]\n    ReturnFile 503 {big}\n", 5, "larger than 1M")
    ok = tmp_path / "ok.html"
    ok.write_bytes(b"x" * (1024 * 1024))  # 1 MB itself is taken
    srv = rules_server(make_server, f"[RULE]\n    ReturnFile 200 {ok}\n")
    srv.start()
    r = srv.get("/any")
    assert r.status == 200 and len(r.body) == 1024 * 1024
    assert r.header("Content-Type").startswith("text/html")
    srv.stop()
    import os
    if os.geteuid() != 0:  # root reads any file
        ok.chmod(0)
        check_refused(make_server, f"[RULE]\n    ReturnFile 503 {ok}\n", 5, "Permission denied")


def test_return_file_reload_keeps_the_old_page_on_error(make_server):
    srv = rules_server(make_server, "[RULE]\n    Path /down\n    ReturnFile 503 down.txt\n")
    (srv.conf / "down.txt").write_text("down\n")
    srv.start()
    r = srv.get("/down")
    assert r.status == 503 and r.body == b"down\n" and r.header("Content-Type").startswith(
        "text/plain")
    (srv.conf / "down.txt").unlink()
    srv.reload()  # refused: the file is gone, the running configuration stays
    assert "down.txt: No such file or directory" in srv.stderr_text()
    assert srv.get("/down").body == b"down\n"
    (srv.conf / "down.txt").write_text("still down\n")
    srv.reload()
    assert srv.get("/down").body == b"still down\n"


ECHO = ('#!/bin/sh\nbody=$(head -c "$CONTENT_LENGTH")\n'
        'printf "Content-Type: text/plain\\n\\n%s" "$body"\n')


@needs_dlopen
@pytest.mark.parametrize("h2", [False, True])
def test_shorter_timeout_of_a_rule(make_server, h2):
    """A rule's Timeout below the server's ends a paused body on its path
    only: the same script elsewhere waits for the server's 10 s."""
    import time
    from conftest import SLOW
    if h2:
        from h2util import H2Client, built_with_h2
        if not built_with_h2():
            pytest.skip("built without HTTP/2")
    srv = rules_server(make_server, "[RULE]\n    Prefix /quick\n    Timeout 1s\n", h2=h2,
                       Timeout="10", GracefulTimeout="1")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    (bindir / "echo.sh").write_text(ECHO)
    (bindir / "echo.sh").chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /quick/ {bindir}\n    ScriptAlias /slow/ {bindir}\n"
    srv.start()
    if not h2:
        quick, slow = Conn(srv.port), Conn(srv.port)
        for c, p in [(quick, "/quick/echo.sh"), (slow, "/slow/echo.sh")]:
            c.send(f"POST {p} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n01234")
        start = time.monotonic()
        assert quick.closed(timeout=5), "the rule's Timeout 1s"
        assert time.monotonic() - start < 4 * SLOW
        assert not slow.closed(timeout=1.5), "the server's Timeout 10"
        slow.send("56789")
        r = slow.read_response()
        assert r.status == 200 and r.body == b"0123456789"
        quick.close()
        slow.close()
        return
    c = H2Client(srv.port)
    a = c.request("/quick/echo.sh", method="POST", headers=[("content-length", "10")],
                  body=b"01234", end=False)
    b = c.request("/slow/echo.sh", method="POST", headers=[("content-length", "10")],
                  body=b"01234", end=False)
    start = time.monotonic()
    c.wait([a])
    took = time.monotonic() - start
    st = c.streams[a]
    assert st["headers"].get(":status") in ("408", "503") or st["reset"] is not None, st
    assert took < 4 * SLOW, took
    assert not c.streams[b]["ended"] and c.streams[b]["reset"] is None
    c.send_body(b, b"56789")
    c.wait([b])
    assert c.streams[b]["headers"][":status"] == "200" and c.streams[b]["data"] == b"0123456789"
    c.close()


@needs_dlopen
def test_timeout_of_a_rule_bounds_a_plugins_hold(make_server):
    """A gateway waiting for its script's header block holds the request:
    the rule's Timeout bounds that wait on its path only."""
    import time
    from conftest import SLOW
    srv = rules_server(make_server, "[RULE]\n    Prefix /quick\n    Timeout 1s\n",
                       Timeout="10", GracefulTimeout="1")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    (bindir / "late.sh").write_text('#!/bin/sh\nsleep 2\nprintf "Content-Type: text/plain\\n\\nlate"\n')
    (bindir / "late.sh").chmod(0o755)
    srv.plugins = [str(BUILD / "plugins" / "monkey-cgi.so")]
    srv.site_extra += f"\n[CGI]\n    ScriptAlias /quick/ {bindir}\n    ScriptAlias /slow/ {bindir}\n"
    srv.start()
    start = time.monotonic()
    r = get(srv, "/quick/late.sh")
    assert r.status in (503, 504) and time.monotonic() - start < 1.9 * SLOW, r
    r = get(srv, "/slow/late.sh")
    assert r.status == 200 and r.body == b"late"
