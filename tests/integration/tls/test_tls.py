"""HTTPS through the tls plugin (plugins/tls): handshakes, a certificate per
site chosen by SNI, 421, ALPN, versions, plain HTTP on the TLS port, a
stalled handshake, large files and ranges, other plugins over TLS, and the
checks of certificates and keys at `monkey -t`."""

import os
import re
import socket
import ssl
import subprocess
import time

import pytest

from conftest import MONKEY, SLOW, free_port, wait_for
from h2util import built_with_h2
from tlsutil import (DIRLISTING_SO, LOGGER_SO, TLS_MARKS, der_of, https, make_cert,
                     tls_connect, tls_section, tls_server)

pytestmark = TLS_MARKS


# ---- the transport ---------------------------------------------------------------

def test_get_over_tls_and_keepalive(make_server):
    srv = tls_server(make_server).start()
    s = tls_connect(srv.port, sni="localhost")
    assert s.version() in ("TLSv1.2", "TLSv1.3")
    for _ in range(3):
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        data = b""
        while not data.endswith(b"Hello World!\n"):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 ")
    s.close()


def read_to_close_notify(s):
    """Everything until the server's close_notify; SSLEOFError when it
    closed the TCP connection without one (a truncation attack to a client)."""
    s.settimeout(5 * SLOW)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("how", ["connection-close", "keepalive-timeout"])
def test_server_close_sends_close_notify(make_server, how):
    srv = tls_server(make_server, KeepAliveTimeout="300ms").start()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(sock, server_hostname="localhost", suppress_ragged_eofs=False)
    close = b"Connection: close\r\n" if how == "connection-close" else b""
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n" + close + b"\r\n")
    data = read_to_close_notify(s)  # raises ssl.SSLEOFError without close_notify
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello World!\n"), data
    s.close()


def test_sni_picks_the_site_certificate(make_server):
    srv = tls_server(make_server, sites=["a.test", "b.test"]).start()
    for name in ("localhost", "a.test", "b.test"):
        s = tls_connect(srv.port, sni=name)
        assert s.getpeercert(binary_form=True) == der_of(srv.certs[name][0]), name
        s.close()
    # No SNI, or a name no site has: the default site's certificate.
    for sni in (None, "unknown.test"):
        s = tls_connect(srv.port, sni=sni)
        assert s.getpeercert(binary_form=True) == der_of(srv.certs["localhost"][0]), sni
        s.close()
    assert https(srv, "/site.txt", host="a.test", sni="a.test")[::2] == (200, b"site a.test\n")


def test_host_naming_another_site_than_sni_gets_421(make_server):
    srv = tls_server(make_server, sites=["a.test", "b.test"]).start()
    assert https(srv, "/site.txt", host="b.test", sni="a.test")[0] == 421
    assert https(srv, "/hello.txt", host="localhost", sni="a.test")[0] == 421
    assert https(srv, "/site.txt", host="b.test", sni="b.test")[0] == 200
    # An unknown SNI got the default certificate: the default site may be asked.
    assert https(srv, "/hello.txt", host="localhost", sni="unknown.test")[0] == 200


def test_default_site_without_certificate_falls_back_to_the_first(make_server):
    """The default site has no [TLS]: a client without SNI, naming no site or naming a site
    without a certificate gets the first site's certificate (in name order), as nginx
    gives its first server's, instead of a failed handshake ("callback failed"); the log
    and monkey -t say which site lacks one and whose certificate stands in."""
    srv = tls_server(make_server, sites=["b.test", "c.test"])
    srv.site_extra = ""  # the default site: no certificate
    plain = srv.dir / "root-plain"
    plain.mkdir()
    (plain / "site.txt").write_text("site plain.test\n")
    srv.extra_sites["a-plain"] = f"[HOST]\n    ServerName plain.test\n    DocumentRoot {plain}\n"
    warning = (f"tls: {srv.conf}/sites/default, the default site, has no certificate ([TLS] "
               f"Certificate): clients without SNI, or naming a site without one, get the "
               f"certificate of {srv.conf}/sites/b.test (b.test)")
    rc, err = check(srv)
    assert rc == 0 and warning in err, err
    srv.start()
    # The port opens before the sites are built: the warning may come a moment later.
    assert wait_for(lambda: warning in srv.stderr_text()), srv.stderr_text()
    for sni in (None, "unknown.test", "plain.test", "b.test"):
        s = tls_connect(srv.port, sni=sni)
        assert s.getpeercert(binary_form=True) == der_of(srv.certs["b.test"][0]), sni
        s.close()
    s = tls_connect(srv.port, sni="c.test")
    assert s.getpeercert(binary_form=True) == der_of(srv.certs["c.test"][0])
    s.close()
    # The sites are served as before: Host picks the site when no SNI named another.
    assert https(srv, "/hello.txt", host="localhost", sni=None)[::2] == (200, b"Hello World!\n")
    assert https(srv, "/site.txt", host="plain.test", sni="plain.test")[::2] == \
        (200, b"site plain.test\n")
    assert https(srv, "/site.txt", host="b.test", sni="b.test")[::2] == (200, b"site b.test\n")
    assert https(srv, "/site.txt", host="c.test", sni="b.test")[0] == 421
    assert "callback failed" not in srv.stderr_text()


def test_tls_listener_without_any_certificate_is_refused(make_server):
    """No site has a certificate: every handshake would fail, so -t, a start and a reload
    refuse the configuration, naming the Listen line."""
    srv = tls_server(make_server)
    srv.set(Listen=[f"127.0.0.1:{srv.port} tls", f"127.0.0.1:{free_port()} tls"])
    srv.site_extra = ""
    want = (f"{srv.conf}/monkey.conf:2: Listen 127.0.0.1:{srv.port} tls: no site has a "
            f"certificate, so no TLS handshake could succeed: give the default site "
            f"({srv.conf}/sites/default) a [TLS] section with Certificate and CertificateKey")
    rc, err = check(srv)
    assert rc == 1 and want in err, err
    assert want in srv.run_expect_failure()
    # A reload to it is refused; the running configuration stays.
    srv.site_extra = tls_section(*srv.certs["localhost"])
    srv.start()
    srv.site_extra = ""
    srv.write_conf()
    srv.reload()
    assert "reload failed" in srv.stderr_text() and want in srv.stderr_text()
    assert https(srv, "/hello.txt", sni=None)[::2] == (200, b"Hello World!\n")


def test_alpn_http11(make_server):
    srv = tls_server(make_server).start()
    s = tls_connect(srv.port, sni="localhost", alpn=["h2", "http/1.1"])
    # h2 when HTTP/2 is built in (h2/test_h2.py), else http/1.1
    assert s.selected_alpn_protocol() == ("h2" if built_with_h2() else "http/1.1")
    s.close()
    s = tls_connect(srv.port, sni="localhost", alpn=["spdy/3", "http/1.1"])
    assert s.selected_alpn_protocol() == "http/1.1"
    s.close()
    # Only protocols the server does not speak: no ALPN, HTTP/1.1 all the same.
    s = tls_connect(srv.port, sni="localhost", alpn=["spdy/3"])
    assert s.selected_alpn_protocol() is None
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello World!\n")
    s.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_tls_versions_are_refused(make_server, version):
    srv = tls_server(make_server).start()
    with pytest.raises(ssl.SSLError):
        tls_connect(srv.port, sni="localhost", max_version=version)
    # The same permissive client gets TLS 1.2 when it may.
    s = tls_connect(srv.port, sni="localhost", max_version=ssl.TLSVersion.TLSv1_2)
    assert s.version() == "TLSv1.2"
    s.close()


def test_plain_http_on_the_tls_port_gets_400(make_server):
    srv = tls_server(make_server).start()
    data = srv.raw(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close\r\n" in data
    assert b"plain HTTP request was sent to an HTTPS port" in data
    assert srv.proc.poll() is None


@pytest.mark.parametrize("prefix", [b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"])
def test_stalled_handshake_is_closed_after_the_timeout(make_server, prefix):
    # Nothing, or the start of a ClientHello and then silence.
    srv = tls_server(make_server, Timeout=1).start()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    sock.sendall(prefix)
    start = time.monotonic()
    sock.settimeout(4 * SLOW)
    try:
        assert sock.recv(100) == b""
    except ConnectionResetError:
        pass
    assert time.monotonic() - start < 4 * SLOW
    sock.close()
    assert https(srv, "/hello.txt")[0] == 200


def test_garbage_handshake_is_logged_not_fatal(make_server):
    srv = tls_server(make_server).start()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    sock.sendall(b"\x16\x03\x01\x00\x05hello" + os.urandom(64))
    sock.settimeout(5 * SLOW)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    sock.close()
    assert https(srv, "/hello.txt")[0] == 200
    assert re.search(r"\[info\] tls: handshake with 127\.0\.0\.1 failed: ", srv.stderr_text())


def test_ten_megabytes_and_a_range_byte_for_byte(make_server):
    data = os.urandom(10 << 20)
    srv = tls_server(make_server)
    srv.file("big.bin", data)
    srv.start()
    status, headers, body = https(srv, "/big.bin")
    assert (status, len(body)) == (200, len(data))
    assert body == data
    status, headers, body = https(srv, "/big.bin", headers={"Range": "bytes=1000000-1999999"})
    assert status == 206
    assert headers["content-range"] == f"bytes 1000000-1999999/{len(data)}"
    assert body == data[1000000:2000000]


# ---- other plugins over TLS ------------------------------------------------------

def test_logger_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(LOGGER_SO)])
    logs = srv.dir / "logs"
    logs.mkdir()
    srv.site_extra += f"[LOGGER]\n    AccessLog {logs}/access.log\n    Format common\n"
    srv.start()
    assert https(srv, "/hello.txt")[0] == 200
    srv.stop()
    lines = (logs / "access.log").read_text().splitlines()
    assert len(lines) == 1 and '"GET /hello.txt HTTP/1.1" 200 13' in lines[0], lines


def test_dirlisting_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(DIRLISTING_SO)])
    srv.site_extra += "[DIRLISTING]\n    Enable On\n"
    srv.file("pub/one.txt", "1")
    srv.file("pub/two.txt", "2")
    srv.start()
    status, headers, body = https(srv, "/pub/")
    assert status == 200
    assert b"one.txt" in body and b"two.txt" in body


# ---- a certificate chain -----------------------------------------------------------

def openssl(*args):
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
CA_EXT = "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n"


def issue(folder, name, issuer, ext):
    """A certificate for CN=name signed by `issuer` (cert, key), with the
    extensions `ext` (a config text): (cert path, key path)."""
    crt, key, csr, extf = (folder / f"{name}.{x}" for x in ("crt", "key", "csr", "ext"))
    extf.write_text(ext)
    openssl("req", "-new", *EC_KEY, "-subj", f"/CN={name}", "-keyout", key, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", issuer[0], "-CAkey", issuer[1], "-days", "2",
            "-set_serial", f"0x{os.urandom(8).hex()}", "-extfile", extf, "-out", crt)
    return crt, key


def make_chain(folder):
    """A root CA, an intermediate CA it signed, and leaves for localhost and
    a.test that the intermediate signed: (root, intermediate, leaves by name)."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "root.crt", folder / "root.key"
    openssl("req", "-x509", *EC_KEY, "-days", "2", "-subj", "/CN=Test Root",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", root[1], "-out", root[0])
    inter = issue(folder, "Test Intermediate", root, CA_EXT)
    leaves = {name: issue(folder, name, inter,
                          f"basicConstraints=CA:FALSE\nsubjectAltName=DNS:{name}\n")
              for name in ("localhost", "a.test", "b.test")}
    return root, inter, leaves


def verified_get(port, sni, cafile):
    """GET /hello.txt over a connection that verifies the server against
    `cafile` and its name: (the verified chain's subjects, the response)."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW) as raw:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            subject = dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
            s.sendall(f"GET /hello.txt HTTP/1.1\r\nHost: {sni}\r\n"
                      "Connection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    return subject, data


def showcerts(port, sni, cafile):
    """openssl s_client -showcerts: (certificates the server sent, output)."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                        "-servername", sni, "-showcerts", "-CAfile", str(cafile),
                        "-verify_hostname", sni],
                       input="", capture_output=True, text=True, timeout=20 * SLOW)
    return p.stdout.count("-----BEGIN CERTIFICATE-----"), p.stdout + p.stderr


def test_certificate_chain_is_sent_and_verifies_against_the_root_alone(make_server):
    srv = tls_server(make_server)
    root, inter, leaves = make_chain(srv.dir / "pki")
    srv.site_extra = tls_section(*leaves["localhost"]) + f"    CertificateChain {inter[0]}\n"
    for name in ("a.test", "b.test"):
        docroot = srv.dir / f"root-{name}"
        docroot.mkdir()
        (docroot / "hello.txt").write_text(f"site {name}\n")
        srv.extra_sites[name] = (f"[HOST]\n    ServerName {name}\n    DocumentRoot {docroot}\n"
                                 + tls_section(*leaves[name]))
    # a.test sends its chain too (after SNI switched the context); b.test has none
    srv.extra_sites["a.test"] += f"    CertificateChain {inter[0]}\n"
    srv.start()
    for sni, body in (("localhost", b"Hello World!\n"), ("a.test", b"site a.test\n")):
        count, out = showcerts(srv.port, sni, root[0])
        assert count == 2, out  # the leaf, then the intermediate
        assert re.search(r"^ 1 s:CN ?= ?Test Intermediate$", out, re.M), out
        assert "Verify return code: 0 (ok)" in out, out
        subject, data = verified_get(srv.port, sni, root[0])
        assert subject == sni
        assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(body), data
    # Without the chain, the root alone cannot verify the leaf.
    count, out = showcerts(srv.port, "b.test", root[0])
    assert count == 1, out
    assert "unable to get local issuer certificate" in out, out
    with pytest.raises(ssl.SSLCertVerificationError):
        verified_get(srv.port, "b.test", root[0])


def test_certificate_chain_without_a_certificate_is_refused(make_server):
    srv = tls_server(make_server)
    junk = srv.dir / "junk.pem"
    junk.write_text("not a certificate\n")
    srv.site_extra = tls_section(*srv.certs["localhost"]) + f"    CertificateChain {junk}\n"
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:7: CertificateChain .*junk\.pem: no PEM certificate in it",
                     err), err


# ---- certificates checked when the configuration is built ------------------------

def check(srv):
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=20 * SLOW)
    return p.returncode, p.stderr


def test_monkey_t_accepts_a_good_certificate(make_server):
    srv = tls_server(make_server)
    assert check(srv)[0] == 0


def test_key_that_does_not_match_is_refused_with_file_and_line(make_server):
    srv = tls_server(make_server)
    other_crt, other_key = make_cert(srv.dir / "certs", "other")
    srv.site_extra = tls_section(srv.certs["localhost"][0], other_key)
    rc, err = check(srv)
    assert rc == 1
    # [HOST] ServerName, DocumentRoot, [TLS], Certificate, CertificateKey: line 6.
    assert re.search(r"sites/default:6: CertificateKey: .*other\.key does not match "
                     r"Certificate .*localhost\.crt", err), err


def test_unreadable_certificate_is_refused_with_file_and_line(make_server):
    srv = tls_server(make_server)
    srv.site_extra = tls_section(srv.dir / "missing.crt", srv.certs["localhost"][1])
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:5: .*missing\.crt: No such file or directory", err), err
    # At start too, and nothing is served.
    assert "missing.crt" in srv.run_expect_failure()


def test_certificate_without_key_is_refused(make_server):
    srv = tls_server(make_server)
    srv.site_extra = f"[TLS]\n    Certificate {srv.certs['localhost'][0]}\n"
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:5: .*Certificate without a CertificateKey", err), err


def test_listener_options_are_refused(make_server):
    """The transport takes no options: HTTP/2 is chosen by ALPN, not by `h2`."""
    srv = tls_server(make_server)
    srv.set(Listen=f"127.0.0.1:{srv.port} tls h2")
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"monkey\.conf:2: Listen 127\.0\.0\.1:\d+: the transport 'tls' takes no "
                     r"options", err), err
