"""The cgi and fastcgi plugins behind the tls transport: HTTPS=on and
REQUEST_SCHEME=https reach the script, and streamed answers go out through
TLS (chunked, decoded by http.client)."""

import pytest

from conftest import BUILD
from test_fastcgi import PHP_FPM, PhpFpm
from tlsutil import TLS_MARKS, https, tls_server

CGI_SO = BUILD / "plugins" / "monkey-cgi.so"
FCGI_SO = BUILD / "plugins" / "monkey-fastcgi.so"

pytestmark = TLS_MARKS


def env_of(body):
    return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)


def test_cgi_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(CGI_SO)])
    srv.file("env.cgi", '#!/bin/sh\necho "Content-Type: text/plain"\necho\nenv\n'
             'head -c 200000 /dev/zero | tr "\\0" q\n', mode=0o755)
    srv.site_extra += "[CGI]\n    Match \\.cgi$\n"
    srv.start()
    status, headers, body = https(srv, "/env.cgi")
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    e = env_of(body.split(b"\n" + b"q", 1)[0] + b"\n")
    assert e["HTTPS"] == "on" and e["REQUEST_SCHEME"] == "https"
    assert body.endswith(b"q" * 200000)


@pytest.mark.skipif(PHP_FPM is None, reason="php-fpm is not installed (tools/deps.sh test)")
def test_fastcgi_over_tls(make_server, tmp_path):
    fpm = PhpFpm(tmp_path / "fpm")
    try:
        srv = tls_server(make_server, plugins=[str(FCGI_SO)])
        srv.file("s.php", '<?php echo $_SERVER["HTTPS"] ?? "-", " ", $_SERVER["REQUEST_SCHEME"],'
                 ' " ", str_repeat("p", 300000);')
        srv.site_extra += f"[FASTCGI]\n    Backend unix:{fpm.sock}\n    Match \\.php$\n"
        srv.start()
        status, headers, body = https(srv, "/s.php")
        assert status == 200
        assert body == b"on https " + b"p" * 300000
        srv.stop()
    finally:
        fpm.stop()
