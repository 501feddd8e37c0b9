"""The cgi and fastcgi plugins over HTTP/2: cleartext by prior knowledge (an
h2c listener) and h2 by ALPN over TLS, with a real php-fpm. GET, a POST body,
a large streamed answer, and a backend failure that answers 502 on its own
stream while the other streams and the connection go on."""

import hashlib
import os

import pytest

from conftest import BUILD, needs_dlopen
from h2util import H2_MARKS, H2Client
from test_fastcgi import PAGES, PHP_FPM, PhpFpm
from tlsutil import TLS_MARKS, tls_connect, tls_server

CGI_SO = BUILD / "plugins" / "monkey-cgi.so"
FCGI_SO = BUILD / "plugins" / "monkey-fastcgi.so"

pytestmark = H2_MARKS + [
    needs_dlopen,
    pytest.mark.skipif(PHP_FPM is None, reason="php-fpm is not installed (tools/deps.sh test)"),
]

CGI = {
    "env.cgi": '#!/bin/sh\necho "Content-Type: text/plain"\necho\nenv\n',
    "post.cgi": '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
                'sha256sum | cut -d" " -f1\necho "$CONTENT_LENGTH"\n',
    # QUERY_STRING megabytes of 'c'
    "big.cgi": '#!/bin/sh\nprintf "Content-Type: application/octet-stream\\r\\n\\r\\n"\n'
               'head -c $((QUERY_STRING * 1048576)) /dev/zero | tr "\\0" c\n',
    "bad.cgi": '#!/bin/sh\necho "not a header"\necho\n',
    "code.cgi": '#!/bin/sh\necho "Status: $QUERY_STRING"\necho "Upgrade: websocket"\necho\n'
                'echo body\n',
    # reads its body, then a local redirect
    "redir.cgi": '#!/bin/sh\ncat >/dev/null\necho "Location: /post.cgi"\necho\n',
}


@pytest.fixture(params=["h2c", "tls"])
def gw(request, make_server, tmp_path):
    """A server with cgi and fastcgi, its php-fpm, and a way to open an HTTP/2 connection."""
    if request.param == "tls":
        for m in TLS_MARKS:
            if m.args[0]:
                pytest.skip(m.kwargs["reason"])
        srv = tls_server(make_server, plugins=[str(CGI_SO), str(FCGI_SO)])
    else:
        srv = make_server()
        srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1)
        srv.plugins = [str(CGI_SO), str(FCGI_SO)]
    fpm = PhpFpm(tmp_path / "fpm")
    for name, text in PAGES.items():
        srv.file(name, text)
    for name, text in CGI.items():
        srv.file(name, text, mode=0o755)
    srv.set(MaxRequestBody="64M", IndexFiles="index.php index.html")
    # a directory's index script: sha256 of the body, its length, the script
    srv.file("form/index.php", '<?php $in = file_get_contents("php://input");'
             ' echo hash("sha256", $in), " ", strlen($in), " ", $_SERVER["REQUEST_METHOD"], " ",'
             ' $_SERVER["SCRIPT_NAME"], " ", $_SERVER["REQUEST_URI"], "\\n";')
    srv.site_extra += (f"[CGI]\n    Match \\.cgi$\n"
                       f"[FASTCGI]\n    Backend unix:{fpm.sock}\n    Match \\.php$\n")
    # a page whose php-fpm child dies before answering: 502 on its stream
    srv.file("die.php", "<?php posix_kill(posix_getpid(), 9);")
    srv.start()

    def connect():
        if request.param == "tls":
            s = tls_connect(srv.port, sni="localhost", alpn=["h2"])
            assert s.selected_alpn_protocol() == "h2"
            return H2Client(srv.port, sock=s)
        return H2Client(srv.port)
    srv.h2 = connect
    yield srv
    srv.stop()
    fpm.stop()


def env_of(body):
    return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)


def test_get(gw):
    c = gw.h2()
    st = c.get("/env.cgi/p?q=1")
    assert st["headers"][":status"] == "200"
    e = env_of(st["data"])
    assert e["SCRIPT_NAME"] == "/env.cgi" and e["PATH_INFO"] == "/p" and e["QUERY_STRING"] == "q=1"
    assert e["SERVER_PROTOCOL"] == "HTTP/2.0"
    st = c.get("/env.php/a?x=2")
    assert st["headers"][":status"] == "200"
    e = env_of(st["data"])
    assert e["SCRIPT_NAME"] == "/env.php" and e["PATH_INFO"] == "/a" and e["QUERY_STRING"] == "x=2"
    assert e["SERVER_PROTOCOL"] == "HTTP/2.0"
    c.close()


def test_post_body(gw):
    body = os.urandom(300000)
    digest = hashlib.sha256(body).hexdigest()
    c = gw.h2()
    a = c.request("/post.cgi", method="POST", body=body,
                  headers=[("content-length", str(len(body)))])
    b = c.request("/input.php", method="POST", body=body,
                  headers=[("content-length", str(len(body)))])
    c.wait([a, b])
    assert c.streams[a]["headers"][":status"] == "200"
    assert c.streams[a]["data"].decode().split() == [digest, str(len(body))]
    assert c.streams[b]["data"].decode().split() == [str(len(body)), digest]
    # without content-length (HTTP/2 needs none) the body is kept whole
    # first and both get it with CONTENT_LENGTH
    a = c.request("/post.cgi", method="POST", body=body)
    b = c.request("/input.php", method="POST", body=body)
    c.wait([a, b])
    assert c.streams[a]["data"].decode().split() == [digest, str(len(body))]
    assert c.streams[b]["data"].decode().split() == [str(len(body)), digest]
    # a POST whose HEADERS end the stream: an empty body, CONTENT_LENGTH 0
    a = c.request("/post.cgi", method="POST")
    c.wait([a])
    assert c.streams[a]["data"].decode().split() == [hashlib.sha256(b"").hexdigest(), "0"]
    c.close()


def test_index_script_gets_the_method_and_body(gw):
    # "/form/" runs its index.php as a request for /form/index.php, on the
    # same stream, with the method and the body (with and without
    # content-length); REQUEST_URI stays the client's
    body = os.urandom(200000)
    want = [hashlib.sha256(body).hexdigest(), str(len(body)), "POST", "/form/index.php", "/form/"]
    c = gw.h2()
    a = c.request("/form/", method="POST", body=body,
                  headers=[("content-length", str(len(body)))])
    b = c.request("/form/", method="POST", body=body)
    g = c.request("/form/?x=1")
    c.wait([a, b, g])
    for s in (a, b):
        assert c.streams[s]["headers"][":status"] == "200"
        assert c.streams[s]["data"].decode().split() == want
    assert c.streams[g]["data"].decode().split() == [
        hashlib.sha256(b"").hexdigest(), "0", "GET", "/form/index.php", "/form/?x=1"]
    c.close()


def test_local_redirect_is_a_get_without_the_body(gw):
    # the redirected request is a GET of /post.cgi on the same stream: the
    # body went to the first script, the second gets none
    body = os.urandom(100000)
    empty = hashlib.sha256(b"").hexdigest()
    c = gw.h2()
    a = c.request("/redir.cgi", method="POST", body=body,
                  headers=[("content-length", str(len(body)))])
    b = c.request("/redir.cgi", method="POST", body=body)
    c.wait([a, b])
    for s in (a, b):
        assert c.streams[s]["headers"][":status"] == "200"
        assert c.streams[s]["data"].decode().split() == [empty]
    assert c.get("/env.php")["headers"][":status"] == "200"
    c.close()


def test_large_streamed_responses(gw):
    c = gw.h2()
    a = c.request("/big.cgi?8")
    b = c.request("/big.php?mb=8")
    c.wait([a, b])
    assert c.streams[a]["headers"][":status"] == "200"
    assert c.streams[a]["data"] == b"c" * (8 << 20)
    assert c.streams[b]["data"] == b"y" * (8 << 20)
    c.close()


def test_backend_failure_is_502_on_its_stream(gw):
    c = gw.h2()
    slow = c.request("/slow.php?s=0.3")
    down = c.request("/die.php")
    bad = c.request("/bad.cgi")
    c.wait([down, bad])
    assert c.streams[down]["headers"][":status"] == "502"
    assert c.streams[bad]["headers"][":status"] == "502"
    assert not c.streams[slow]["ended"]  # still running, on the same connection
    c.wait([slow])
    assert c.streams[slow]["headers"][":status"] == "200"
    assert c.streams[slow]["data"] == b"slept\n"
    # the connection is healthy: more requests on it work
    st = c.get("/env.php")
    assert st["headers"][":status"] == "200"
    assert c.goaway is None and not c.closed
    c.close()


def test_cookie_crumbs_are_one_http_cookie(gw):
    # Each cookie in a field of its own (RFC 9113 8.2.3, as browsers send
    # them): scripts get one HTTP_COOKIE joined with "; " (PHP then sees
    # every cookie), never ", ", which made PHP's $_COOKIE['a'] "1, b=2".
    c = gw.h2()
    crumbs = [("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2"), ("cookie", "c=3")]
    st = c.get("/env.cgi", headers=crumbs)
    assert env_of(st["data"])["HTTP_COOKIE"] == "a=1; b=2; c=3"
    st = c.get("/cookies.php", headers=crumbs)
    assert st["data"] == b'{"a":"1","b":"2","c":"3"} a=1; b=2; c=3'
    c.close()


def test_1xx_status_is_502(gw):
    # A 1xx from a script or php-fpm is no final response: 502 on its
    # stream at once (not a reset after Timeout), the others go on.
    c = gw.h2()
    ids = [c.request(p) for p in ("/code.cgi?101", "/code.cgi?103", "/code.php?s=101",
                                  "/code.php?s=100", "/code.php?s=202")]
    c.wait(ids)
    got = [c.streams[i]["headers"].get(":status") for i in ids]
    assert got == ["502", "502", "502", "502", "202"], got
    assert c.streams[ids[-1]]["data"] == b"code 202"
    assert c.goaway is None
    c.close()
