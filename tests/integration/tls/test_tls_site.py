"""What a site's [TLS] section adds to HTTPS (plugins/tls): client
certificates (ClientCertificate, ClientCA) and their session id context,
the rule that a site is served only on a connection whose handshake met
its requirements (no SNI, HTTP/2 streams, absolute targets, resumed
sessions, reloads, plain HTTP), the connection's properties in the access
log, Strict-Transport-Security, the redirect of plain HTTP to HTTPS, and
OCSP stapling from a file."""

import http.client
import re
import shutil
import socket
import ssl
import subprocess

import pytest

from conftest import MONKEY, SLOW, free_port
from h2util import H2_MARKS, H2Client
from tlsutil import (LOGGER_SO, TLS_MARKS, client_context, make_cert, tls_connect, tls_section,
                     tls_server)

pytestmark = TLS_MARKS


# ---- certificates ------------------------------------------------------------------

def openssl(*args, **kw):
    return subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True,
                          text=True, **kw)


def make_ca(folder, name):
    """A self-signed CA: (cert path, key path)."""
    return make_cert(folder, name.replace(" ", "_"))


def issue(folder, ca, name, subject, serial):
    """A certificate for `subject` signed by `ca`: (cert path, key path)."""
    folder.mkdir(parents=True, exist_ok=True)
    crt, key, csr = folder / f"{name}.crt", folder / f"{name}.key", folder / f"{name}.csr"
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", subject, "-keyout", key, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial",
            f"0x{serial:x}", "-days", "2", "-out", crt)
    return crt, key


def ocsp_response(folder, ca, crt, serial, out, ndays=1):
    """An OCSP response of `ca` saying `crt` (serial `serial`) is good, DER into `out`."""
    index = folder / "index.txt"
    index.write_text(f"V\t301231000000Z\t\t{serial:X}\tunknown\t/CN=localhost\n")
    openssl("ocsp", "-index", index, "-rsigner", ca[0], "-rkey", ca[1], "-CA", ca[0],
            "-issuer", ca[0], "-cert", crt, "-respout", out, "-ndays", ndays)
    return out


def context(cert=None, max_version=None):
    ctx = client_context()
    if max_version:
        ctx.maximum_version = max_version
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    return ctx


def get(port, path="/hello.txt", host="localhost", sni="localhost", cert=None, session=None,
        max_version=None, ctx=None):
    """One request over a new TLS connection: (status, headers, body, ssl socket)."""
    ctx = ctx or context(cert, max_version)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    s = ctx.wrap_socket(sock, server_hostname=sni, session=session)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10 * SLOW)
    conn.sock = s
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", host)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, s


def refused(port, **kw):
    """True when the server ends the connection in the handshake instead of answering."""
    try:
        get(port, **kw)
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, socket.timeout):
        return True
    return False


def mtls_server(make_server, mode, plugins=None):
    """A server whose default site asks for client certificates of `ca`."""
    srv = tls_server(make_server, plugins=plugins)
    certs = srv.dir / "certs"
    srv.ca = make_ca(certs, "Test CA")
    srv.other_ca = make_ca(certs, "Other CA")
    srv.alice = issue(certs, srv.ca, "alice", "/CN=alice/O=Example", 0x10)
    srv.mallory = issue(certs, srv.other_ca, "mallory", "/CN=mallory", 0x11)
    srv.site_extra += f"    ClientCertificate {mode}\n    ClientCA {srv.ca[0]}\n"
    return srv


def check(srv):
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=20 * SLOW)
    return p.returncode, p.stderr


# ---- client certificates -------------------------------------------------------------

def test_required_client_certificate(make_server):
    srv = mtls_server(make_server, "required").start()
    status, _, body, s = get(srv.port, cert=srv.alice)
    assert (status, body) == (200, b"Hello World!\n")
    s.close()
    assert refused(srv.port), "no certificate"
    assert refused(srv.port, cert=srv.mallory), "a certificate of another CA"
    assert srv.proc.poll() is None


def test_required_client_certificate_names_its_ca(make_server):
    srv = mtls_server(make_server, "required").start()
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{srv.port}",
                        "-servername", "localhost", "-cert", str(srv.alice[0]),
                        "-key", str(srv.alice[1])],
                       input="", capture_output=True, text=True, timeout=20 * SLOW)
    text = p.stdout
    assert "Acceptable client certificate CA names" in text, text
    names = text.split("Acceptable client certificate CA names", 1)[1].split("\n---", 1)[0]
    assert "CN = Test_CA" in names or "CN=Test_CA" in names, names
    assert "Other_CA" not in names


def test_optional_client_certificate_passes_through(make_server):
    srv = mtls_server(make_server, "optional", plugins=[str(LOGGER_SO)])
    logs = srv.dir / "logs"
    logs.mkdir()
    srv.site_extra += (f"[LOGGER]\n    AccessLog {logs}/access.log\n"
                       "    Format custom %{ssl_client_verify}x|%{ssl_client_subject}x|%U\n")
    srv.start()
    assert get(srv.port, path="/hello.txt?none")[0] == 200
    assert get(srv.port, path="/hello.txt?alice", cert=srv.alice)[0] == 200
    assert get(srv.port, path="/hello.txt?mallory", cert=srv.mallory)[0] == 200
    srv.stop()
    lines = (logs / "access.log").read_text().splitlines()
    assert lines[0] == "NONE|-|/hello.txt", lines
    assert lines[1] == "SUCCESS|O=Example,CN=alice|/hello.txt", lines
    # A failed certificate: the reason, and never its subject.
    assert re.fullmatch(r"FAILED:[a-z ]+\|-\|/hello.txt", lines[2]), lines


def test_sni_chooses_the_site_that_asks_for_certificates(make_server):
    srv = tls_server(make_server, sites=["a.test"])
    ca = make_ca(srv.dir / "certs", "Test CA")
    alice = issue(srv.dir / "certs", ca, "alice", "/CN=alice", 0x10)
    srv.extra_sites["a.test"] += f"    ClientCertificate required\n    ClientCA {ca[0]}\n"
    srv.start()
    # The default site asks for nothing; a.test, chosen by SNI, requires one.
    assert get(srv.port)[0] == 200
    assert refused(srv.port, path="/site.txt", host="a.test", sni="a.test")
    assert get(srv.port, path="/site.txt", host="a.test", sni="a.test", cert=alice)[:3:2] == \
        (200, b"site a.test\n")


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_sessions_do_not_cross_into_or_out_of_an_mtls_site(make_server, version):
    srv = tls_server(make_server, sites=["a.test", "b.test"])
    ca = make_ca(srv.dir / "certs", "Test CA")
    alice = issue(srv.dir / "certs", ca, "alice", "/CN=alice", 0x10)
    srv.extra_sites["a.test"] += f"    ClientCertificate required\n    ClientCA {ca[0]}\n"
    srv.start()

    # One client context (Python resumes only within one), with a certificate.
    ctx = context(alice, version)

    def session_of(name):
        status, _, _, s = get(srv.port, path="/site.txt", host=name, sni=name, ctx=ctx)
        assert status == 200
        sess = s.session
        s.close()
        return sess

    def resumed(name, sess):
        status, _, _, s = get(srv.port, path="/site.txt", host=name, sni=name, session=sess,
                              ctx=ctx)
        reused = s.session_reused
        s.close()
        return status == 200 and reused

    # Resumption works on the same site (so the checks below can fail) ...
    assert resumed("b.test", session_of("b.test"))
    assert resumed("a.test", session_of("a.test"))
    # ... but an mTLS site's session does not resume elsewhere, nor another's on it.
    assert not resumed("b.test", session_of("a.test"))
    assert not resumed("a.test", session_of("b.test"))


# ---- a site is served only where its handshake ran --------------------------------

def mtls_sites(make_server, mode="required"):
    """The default site (localhost) asks for nothing; b.test asks for
    certificates of srv.ca (alice has one) and sends HSTS."""
    srv = tls_server(make_server, sites=["b.test"])
    certs = srv.dir / "certs"
    srv.ca = make_ca(certs, "Test CA")
    srv.alice = issue(certs, srv.ca, "alice", "/CN=alice", 0x10)
    srv.extra_sites["b.test"] += (f"    ClientCertificate {mode}\n    ClientCA {srv.ca[0]}\n"
                                  "    HSTS max-age=60\n")
    return srv


def s_client_http(port, request, *args):
    """`request` (bytes) over openssl s_client -quiet with `args`; what came back."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-quiet", *args],
                       input=request, capture_output=True, timeout=20 * SLOW)
    return p.stdout


def b_site(request_line=b"GET /site.txt HTTP/1.1", host=b"b.test"):
    return request_line + b"\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("mode", ["required", "optional"])
def test_no_sni_does_not_open_a_site_that_asks_for_certificates(make_server, mode):
    srv = mtls_sites(make_server, mode).start()
    out = s_client_http(srv.port, b_site(), "-noservername")
    assert out.startswith(b"HTTP/1.1 421 "), out
    assert b"site b.test" not in out and b"Strict-Transport-Security" not in out
    # No SNI, or a name no site has: the default site's handshake, which asked
    # for no certificate (one the client holds was never sent).
    for sni in (None, "unknown.test"):
        for cert in (None, srv.alice):
            status, headers, body, s = get(srv.port, path="/site.txt", host="b.test", sni=sni,
                                           cert=cert)
            s.close()
            assert (status, body.count(b"site b.test")) == (421, 0), (sni, cert)
            assert "strict-transport-security" not in headers
    # What the handshake did meet is served as before.
    assert get(srv.port, sni=None)[:3:2] == (200, b"Hello World!\n")
    status, headers, body, s = get(srv.port, path="/site.txt", host="b.test", sni="b.test",
                                   cert=srv.alice)
    s.close()
    assert (status, body) == (200, b"site b.test\n")
    assert headers.get("strict-transport-security") == "max-age=60"
    assert srv.proc.poll() is None


def test_absolute_target_is_held_to_its_site(make_server):
    srv = mtls_sites(make_server).start()
    # The target names the site (Host is ignored for an absolute target).
    req = b_site(b"GET https://b.test/site.txt HTTP/1.1", host=b"localhost")
    for args in (["-noservername"], ["-servername", "localhost"]):
        out = s_client_http(srv.port, req, *args)
        assert out.startswith(b"HTTP/1.1 421 ") and b"site b.test" not in out, (args, out)
    out = s_client_http(srv.port, req, "-servername", "b.test", "-cert", str(srv.alice[0]),
                        "-key", str(srv.alice[1]))
    assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"site b.test\n"), out


def h2_marks(test):
    for mark in H2_MARKS + [pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")]:
        test = mark(test)
    return test


@h2_marks
def test_h2_streams_are_held_to_their_site(make_server):
    srv = mtls_sites(make_server).start()
    # curl sends no SNI to an IP literal; its Host becomes :authority.
    p = subprocess.run(["curl", "-sk", "--http2", "-w", "\n%{http_code} %{http_version}",
                        f"https://127.0.0.1:{srv.port}/site.txt", "-H", "Host: b.test"],
                       capture_output=True, text=True, timeout=20 * SLOW)
    assert p.stdout.endswith("\n421 2") and "site b.test" not in p.stdout, p.stdout + p.stderr
    # One connection without SNI: every stream is checked, whatever came before.
    s = tls_connect(srv.port, sni=None, alpn=["h2"])
    assert s.selected_alpn_protocol() == "h2"
    c = H2Client(srv.port, sock=s)
    sids = [c.request("/hello.txt"), c.request("/site.txt", authority="b.test"),
            c.request("/hello.txt"), c.request("/site.txt", authority="b.test:443")]
    c.wait(sids)
    got = [(c.streams[i]["headers"][":status"], c.streams[i]["data"]) for i in sids]
    assert got[0] == got[2] == ("200", b"Hello World!\n"), got
    assert got[1][0] == got[3][0] == "421" and b"site b.test" not in got[1][1] + got[3][1], got
    c.close()
    # With b.test's SNI and certificate its streams are served, the other site's are not.
    ctx = context(srv.alice)
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW),
                        server_hostname="b.test")
    c = H2Client(srv.port, sock=s)
    sids = [c.request("/site.txt", authority="b.test"), c.request("/hello.txt")]
    c.wait(sids)
    assert [c.streams[i]["headers"][":status"] for i in sids] == ["200", "421"]
    assert c.streams[sids[0]]["data"] == b"site b.test\n"
    c.close()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_session_resumed_without_sni_does_not_open_the_site(make_server, version):
    srv = mtls_sites(make_server).start()
    ctx = context(srv.alice, version)  # Python resumes within one context only
    # A session made on the default site, without SNI, resumed without SNI ...
    status, _, _, s = get(srv.port, sni=None, ctx=ctx)
    assert status == 200
    sess = s.session
    s.close()
    status, _, body, s = get(srv.port, path="/site.txt", host="b.test", sni=None, session=sess,
                             ctx=ctx)
    assert s.session_reused  # so the check below is the request's, not the handshake's
    s.close()
    assert (status, body.count(b"site b.test")) == (421, 0)
    # ... and b.test's own session (with alice's certificate) offered without SNI.
    status, _, _, s = get(srv.port, path="/site.txt", host="b.test", sni="b.test", ctx=ctx)
    assert status == 200
    sess = s.session
    s.close()
    status, _, body, s = get(srv.port, path="/site.txt", host="b.test", sni=None, session=sess,
                             ctx=ctx)
    s.close()
    assert (status, body.count(b"site b.test")) == (421, 0)


class Kept:
    """One keep-alive HTTPS connection for several requests."""

    def __init__(self, port, sni, cert=None):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10 * SLOW)
        self.conn.sock = context(cert).wrap_socket(sock, server_hostname=sni)

    def get(self, path, host):
        self.conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        self.conn.putheader("Host", host)
        self.conn.endheaders()
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def close(self):
        self.conn.close()


def test_reload_that_asks_for_certificates_closes_the_site_to_open_connections(make_server):
    srv = tls_server(make_server, sites=["b.test"])
    certs = srv.dir / "certs"
    ca, other = make_ca(certs, "Test CA"), make_ca(certs, "Other CA")
    alice = issue(certs, ca, "alice", "/CN=alice", 0x10)
    plain_b = srv.extra_sites["b.test"]
    srv.start()
    kept = Kept(srv.port, "b.test")  # no certificate: none was asked
    assert kept.get("/site.txt", "b.test") == (200, b"site b.test\n")
    # b.test now requires certificates: the open connection never showed one.
    client_ca = srv.dir / "client-ca.pem"
    client_ca.write_bytes(ca[0].read_bytes())
    srv.extra_sites["b.test"] = plain_b + f"    ClientCertificate required\n    ClientCA {client_ca}\n"
    srv.write_conf()
    srv.reload()
    assert "configuration reloaded" in srv.stderr_text()
    status, body = kept.get("/site.txt", "b.test")
    assert (status, body.count(b"site b.test")) == (421, 0)
    kept.close()
    assert refused(srv.port, path="/site.txt", host="b.test", sni="b.test")
    # alice's connection is served until the file names another CA (same path).
    kept = Kept(srv.port, "b.test", cert=alice)
    assert kept.get("/site.txt", "b.test") == (200, b"site b.test\n")
    srv.reload()  # the same settings: the connection still qualifies
    assert kept.get("/site.txt", "b.test") == (200, b"site b.test\n")
    client_ca.write_bytes(other[0].read_bytes())
    srv.reload()
    status, body = kept.get("/site.txt", "b.test")
    assert (status, body.count(b"site b.test")) == (421, 0)
    kept.close()
    assert srv.proc.poll() is None


def test_plain_http_does_not_serve_a_site_that_asks_for_certificates(make_server):
    srv = both_listeners(mtls_sites(make_server))
    srv.start()
    data = plain_raw(srv.plain, b_site())
    assert data.startswith(b"HTTP/1.1 421 ") and b"site b.test" not in data, data
    assert plain_raw(srv.plain, b_site(b"GET /hello.txt HTTP/1.1", b"localhost")).endswith(
        b"\r\n\r\nHello World!\n")
    # RedirectHTTPS sends the client to HTTPS instead.
    srv.extra_sites["b.test"] += "    RedirectHTTPS on\n"
    srv.write_conf()
    srv.reload()
    assert location(srv.plain, b"/site.txt", host=b"b.test") == \
        (308, f"https://b.test:{srv.port}/site.txt")


@pytest.mark.parametrize("lines, where, reason", [
    ("    ClientCertificate required\n", 7, "ClientCertificate required needs a ClientCA"),
    ("    ClientCA {ca}\n", 7, "ClientCA without ClientCertificate optional or required"),
    ("    ClientCertificate sometimes\n", 7, "ClientCertificate"),
    ("    ClientCertificate optional\n    ClientCA {junk}\n", 8, "junk.pem: no readable PEM"),
])
def test_client_certificate_errors_name_file_and_line(make_server, lines, where, reason):
    srv = tls_server(make_server)
    ca = make_ca(srv.dir / "certs", "Test CA")
    junk = srv.dir / "junk.pem"
    junk.write_text("not a certificate\n")
    srv.site_extra += lines.format(ca=ca[0], junk=junk)
    rc, err = check(srv)
    assert rc == 1
    assert re.search(rf"sites/default:{where}: .*{re.escape(reason)}", err), err


# ---- the access log ------------------------------------------------------------------

def test_access_log_shows_protocol_cipher_and_subject(make_server):
    srv = mtls_server(make_server, "required", plugins=[str(LOGGER_SO)])
    plain = free_port()
    srv.set(Listen=[f"127.0.0.1:{srv.port} tls", f"127.0.0.1:{plain}"])
    logs = srv.dir / "logs"
    logs.mkdir()
    srv.site_extra += (f"[LOGGER]\n    AccessLog {logs}/access.log\n    Format custom "
                       "%{ssl_protocol}x %{ssl_cipher}x %{ssl_server_name}x "
                       "[%{SSL_Client_Subject}x] %>s\n")
    srv.start()
    _, _, _, s = get(srv.port, cert=srv.alice, max_version=ssl.TLSVersion.TLSv1_2)
    s.close()
    _, _, _, s = get(srv.port, cert=srv.alice)
    cipher13 = s.cipher()[0]
    s.close()
    c = socket.create_connection(("127.0.0.1", plain), timeout=5 * SLOW)
    c.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    while c.recv(65536):
        pass
    c.close()
    srv.stop()
    lines = (logs / "access.log").read_text().splitlines()
    assert re.fullmatch(r"TLSv1\.2 ECDHE-ECDSA-[A-Z0-9-]+ localhost \[O=Example,CN=alice\] 200",
                        lines[0]), lines
    assert lines[1] == f"TLSv1.3 {cipher13} localhost [O=Example,CN=alice] 200", lines
    # A plain connection has no properties (and gets no site that asks for certificates).
    assert lines[2] == "- - - [-] 421", lines


def test_unknown_logger_variable_is_refused(make_server):
    srv = tls_server(make_server, plugins=[str(LOGGER_SO)])
    srv.site_extra += f"[LOGGER]\n    AccessLog {srv.dir}/access.log\n    Format custom %{{ssl_foo}}x\n"
    rc, err = check(srv)
    assert rc == 1 and "unknown %{NAME}x" in err, err


# ---- Strict-Transport-Security ---------------------------------------------------------

HSTS = "max-age=31536000; includeSubDomains"


def both_listeners(srv):
    srv.plain = free_port()
    srv.set(Listen=[f"127.0.0.1:{srv.port} tls", f"127.0.0.1:{srv.plain}"])
    return srv


def plain_raw(port, data):
    c = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    c.sendall(data)
    out = b""
    while chunk := c.recv(65536):
        out += chunk
    c.close()
    return out


def tls_raw(port, data):
    s = client_context().wrap_socket(socket.create_connection(("127.0.0.1", port),
                                                              timeout=5 * SLOW),
                                     server_hostname="localhost")
    s.sendall(data)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ssl.SSLError:
        pass
    s.close()
    return out


def test_hsts_on_every_response_over_tls_only(make_server):
    srv = both_listeners(tls_server(make_server))
    srv.site_extra += f"    HSTS {HSTS}\n"
    srv.start()
    for path, status in (("/hello.txt", 200), ("/missing", 404)):
        got, headers, _, s = get(srv.port, path=path)
        s.close()
        assert got == status
        assert headers.get("strict-transport-security") == HSTS, path
    # The parser's refusal too (no request hook ever ran for it).
    data = tls_raw(srv.port, b"GET /\x01 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400 ")
    assert f"\r\nStrict-Transport-Security: {HSTS}\r\n".encode() in data.split(b"\r\n\r\n")[0]
    # Never over plain HTTP (RFC 6797 section 7.2).
    for req in (b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                b"GET /missing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"):
        data = plain_raw(srv.plain, req)
        assert data.startswith(b"HTTP/1.1 "), data
        assert b"strict-transport-security" not in data.lower()


def test_hsts_is_per_site(make_server):
    srv = tls_server(make_server, sites=["a.test"])
    srv.extra_sites["a.test"] += "    HSTS max-age=60\n"
    srv.start()
    assert get(srv.port, path="/site.txt", host="a.test", sni="a.test")[1].get(
        "strict-transport-security") == "max-age=60"
    assert "strict-transport-security" not in get(srv.port)[1]


def test_hsts_without_max_age_is_refused(make_server):
    srv = tls_server(make_server)
    srv.site_extra += "    HSTS includeSubDomains\n"
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:7: .*has no max-age", err), err


# ---- RedirectHTTPS ------------------------------------------------------------------

def location(port, target, host=b"localhost", method=b"GET"):
    data = plain_raw(port, method + b" " + target + b" HTTP/1.1\r\nHost: " + host +
                     b"\r\nConnection: close\r\n\r\n")
    head = data.split(b"\r\n\r\n")[0].decode()
    status = int(head.split(" ", 2)[1])
    m = re.search(r"\r\nLocation: ([^\r]*)", head)
    return status, m.group(1) if m else None


def test_plain_http_is_redirected_to_the_tls_listener(make_server):
    srv = both_listeners(tls_server(make_server))
    srv.site_extra += "    RedirectHTTPS on\n"
    srv.start()
    base = f"https://localhost:{srv.port}"
    assert location(srv.plain, b"/hello.txt") == (308, f"{base}/hello.txt")
    # Path and query kept; the path is normalised and encoded again.
    assert location(srv.plain, b"/a%20b/../c%3Fd?x=1&y=%2F") == (308, f"{base}/c%3Fd?x=1&y=%2F")
    assert location(srv.plain, b"/", method=b"POST") == (308, f"{base}/")
    # A Host with a port names the site: the port goes.
    assert location(srv.plain, b"/x", host=b"LocalHost:8080") == (308, f"https://LocalHost:{srv.port}/x")
    # A Host the site does not have never reaches Location: the site's own name does.
    for host in (b"evil.example", b"evil.example:443", b"localhost.evil.example", b"[::1]"):
        assert location(srv.plain, b"/x?y", host=host) == (308, f"{base}/x?y"), host
    assert location(srv.plain, b"//evil.example/x") == (308, f"{base}/evil.example/x")
    # Over TLS nothing is redirected.
    assert get(srv.port)[:3:2] == (200, b"Hello World!\n")


def test_redirect_port_443_is_left_out_and_other_sites_are_not_redirected(make_server):
    srv = both_listeners(tls_server(make_server, sites=["a.test"]))
    srv.extra_sites["a.test"] += "    RedirectHTTPS on\n    RedirectPort 443\n"
    srv.start()
    assert location(srv.plain, b"/site.txt", host=b"a.test") == (308, "https://a.test/site.txt")
    assert location(srv.plain, b"/hello.txt")[0] == 200


def test_redirect_uses_the_wildcard_site_name(make_server):
    srv = both_listeners(tls_server(make_server))
    root = srv.dir / "root-w"
    root.mkdir()
    srv.extra_sites["w"] = (f"[HOST]\n    ServerName *.w.test\n    ServerName w.test\n"
                            f"    DocumentRoot {root}\n[TLS]\n    RedirectHTTPS on\n")
    srv.start()
    assert location(srv.plain, b"/", host=b"x.w.test")[1] == f"https://x.w.test:{srv.port}/"


# ---- OCSP stapling --------------------------------------------------------------------

def s_client_status(port, status=True):
    args = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost"]
    p = subprocess.run(args + (["-status"] if status else []), input="", capture_output=True,
                       text=True, timeout=20 * SLOW)
    return p.stdout


def ocsp_server(make_server):
    srv = tls_server(make_server)
    certs = srv.dir / "certs"
    srv.ca = make_ca(certs, "Test CA")
    srv.leaf = issue(certs, srv.ca, "leaf", "/CN=localhost", 0x1001)
    srv.resp = ocsp_response(certs, srv.ca, srv.leaf[0], 0x1001, srv.dir / "resp.der")
    srv.site_extra = tls_section(*srv.leaf) + f"    OCSPResponse {srv.resp}\n"
    return srv


def next_update(text):
    m = re.search(r"Next Update: (.*)", text)
    return m and m.group(1)


def test_ocsp_response_is_stapled_and_reloaded(make_server):
    srv = ocsp_server(make_server).start()
    text = s_client_status(srv.port)
    assert "OCSP Response Status: successful" in text, text
    assert "Serial Number: 1001" in text
    first = next_update(text)
    assert first
    # Only when the client asks.
    assert "OCSP Response Status" not in s_client_status(srv.port, status=False)
    # A reload reads the file again.
    ocsp_response(srv.dir / "certs", srv.ca, srv.leaf[0], 0x1001, srv.resp, ndays=3)
    srv.reload()
    second = next_update(s_client_status(srv.port))
    assert second and second != first, (first, second)


def test_ocsp_garbage_or_another_certificates_response_is_refused(make_server):
    srv = ocsp_server(make_server)
    assert check(srv)[0] == 0
    srv.resp.write_bytes(b"garbage")
    rc, err = check(srv)
    assert rc == 1
    # [HOST] ServerName DocumentRoot, [TLS] Certificate CertificateKey OCSPResponse: line 7.
    assert re.search(r"sites/default:7: .*resp\.der: not a DER OCSP response", err), err
    other = issue(srv.dir / "certs", srv.ca, "other", "/CN=other", 0x2002)
    ocsp_response(srv.dir / "certs", srv.ca, other[0], 0x2002, srv.resp)
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:7: .*not a response for the site's certificate", err), err
    # A reload with a bad file is refused and the running response stays.
    ocsp_response(srv.dir / "certs", srv.ca, srv.leaf[0], 0x1001, srv.resp)
    srv.start()
    assert "OCSP Response Status: successful" in s_client_status(srv.port)
    srv.resp.write_bytes(b"garbage")
    srv.reload()
    assert "reload failed" in srv.stderr_text()
    assert "OCSP Response Status: successful" in s_client_status(srv.port)
