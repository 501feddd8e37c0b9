"""The access, auth and dirlisting plugins over HTTP/2, unchanged: each
stream is an ordinary request, so a plugin's request and content hooks
decide per stream, with the client's address, the request's headers and
the site's configuration, as over HTTP/1.1. Over cleartext HTTP/2 (h2c)
and over TLS (ALPN h2)."""

import base64
import socket
import subprocess

import pytest

from conftest import BUILD, SLOW, needs_dlopen
from h2util import H2_MARKS, H2Client, h2c_server
from tlsutil import TLS_MARKS, client_context, tls_server

pytestmark = H2_MARKS + [needs_dlopen]

ACCESS_SO = BUILD / "plugins" / "monkey-access.so"
AUTH_SO = BUILD / "plugins" / "monkey-auth.so"
DIRLISTING_SO = BUILD / "plugins" / "monkey-dirlisting.so"


class H2Site:
    """A server with one plugin whose listener speaks HTTP/2 as `how`
    says (h2c: prior knowledge; tls: ALPN h2), and its HTTP/2 clients."""

    def __init__(self, make_server, how, plugin, section):
        if how == "tls":
            for m in TLS_MARKS:
                if m.args[0]:
                    pytest.skip(m.kwargs["reason"])
            self.srv = tls_server(make_server, plugins=[str(plugin)])
        else:
            self.srv = h2c_server(make_server)
            self.srv.plugins = [str(plugin)]
        self.srv.site_extra += section
        self.how = how

    def connect(self, source="127.0.0.1"):
        """An HTTP/2 connection from the address `source`."""
        sock = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10 * SLOW,
                                        source_address=(source, 0))
        if self.how == "tls":
            sock = client_context(alpn=["h2"]).wrap_socket(sock, server_hostname="localhost")
            assert sock.selected_alpn_protocol() == "h2"
        return H2Client(self.srv.port, sock=sock)


HOW = pytest.mark.parametrize("how", ["h2c", "tls"])


@HOW
def test_access_denies_and_allows_per_stream_and_address(make_server, how):
    site = H2Site(make_server, how, ACCESS_SO,
                  "[ACCESS]\n    Allow 127.0.0.2 path /admin\n    Deny all path /admin\n")
    site.srv.file("admin/x.txt", "admin x\n")
    site.srv.start()
    c = site.connect()
    # Two streams at once on one connection: one denied, one served.
    denied, served = c.request("/admin/x.txt"), c.request("/hello.txt")
    c.wait([denied, served])
    assert c.streams[denied]["headers"][":status"] == "403"
    assert c.streams[served]["headers"][":status"] == "200"
    assert c.streams[served]["data"] == b"Hello World!\n"
    # The rule comes before the file: a denied path that does not exist is 403 too.
    assert c.get("/admin/missing")["headers"][":status"] == "403"
    assert c.goaway is None  # a 403 ends the stream, not the connection
    c.close()
    # From the allowed address the same path is served.
    c = site.connect("127.0.0.2")
    st = c.get("/admin/x.txt")
    assert st["headers"][":status"] == "200" and st["data"] == b"admin x\n"
    c.close()


@HOW
def test_auth_asks_then_lets_the_right_user_in(make_server, how):
    site = H2Site(make_server, how, AUTH_SO,
                  "[AUTH]\n    Location /private\n    Realm Private\n    Users users\n")
    hashed = subprocess.run(["openssl", "passwd", "-6", "-salt", "saltsalt", "wonderland"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (site.srv.conf / "users").write_text(f"alice:{hashed}\n")
    site.srv.file("private/a.txt", "secret A\n")
    site.srv.start()
    c = site.connect()
    st = c.get("/private/a.txt")
    assert st["headers"][":status"] == "401"
    assert st["headers"]["www-authenticate"].startswith('Basic realm="Private"')
    assert b"secret" not in st["data"]
    wrong = "Basic " + base64.b64encode(b"alice:looking-glass").decode()
    assert c.get("/private/a.txt", headers=[("authorization", wrong)])["headers"][":status"] \
        == "401"
    # On the same connection, with the right credentials.
    good = "Basic " + base64.b64encode(b"alice:wonderland").decode()
    st = c.get("/private/a.txt", headers=[("authorization", good)])
    assert st["headers"][":status"] == "200" and st["data"] == b"secret A\n"
    # Outside the protected location nothing is asked.
    assert c.get("/hello.txt")["data"] == b"Hello World!\n"
    c.close()


@HOW
def test_dirlisting_lists_a_directory(make_server, how):
    site = H2Site(make_server, how, DIRLISTING_SO, "[DIRLISTING]\n    Enable On\n")
    site.srv.file("pub/one.txt", "1")
    site.srv.file("pub/two words.txt", "2")
    (site.srv.docroot / "pub" / "sub").mkdir()
    site.srv.start()
    c = site.connect()
    st = c.get("/pub/")
    assert st["headers"][":status"] == "200"
    assert st["headers"]["content-type"].startswith("text/html")
    page = st["data"].decode()
    assert "one.txt" in page and 'href="two%20words.txt"' in page and 'href="sub/"' in page
    if "content-length" in st["headers"]:
        assert int(st["headers"]["content-length"]) == len(st["data"])
    # Without the slash: the server's redirect, then the listing of the subdirectory.
    st = c.get("/pub")
    assert st["headers"][":status"] == "301" and st["headers"]["location"].endswith("/pub/")
    assert c.get("/pub/sub/")["headers"][":status"] == "200"
    c.close()
