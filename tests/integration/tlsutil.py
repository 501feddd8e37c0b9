"""What the TLS tests share: the plugin's path, certificates made with the
openssl tool, a server with a TLS listener, and clients (Python's ssl)."""

import http.client
import shutil
import socket
import ssl
import subprocess

import pytest

from conftest import BUILD, SLOW, needs_dlopen

TLS_SO = BUILD / "plugins" / "monkey-tls.so"
LOGGER_SO = BUILD / "plugins" / "monkey-logger.so"
DIRLISTING_SO = BUILD / "plugins" / "monkey-dirlisting.so"

TLS_MARKS = [
    needs_dlopen,
    pytest.mark.skipif(not TLS_SO.exists(), reason="built without OpenSSL (MK_TLS off)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl tool"),
]


def make_cert(folder, name, key_type="ec"):
    """A self-signed certificate for `name`: (cert path, key path)."""
    folder.mkdir(parents=True, exist_ok=True)
    crt, key = folder / f"{name}.crt", folder / f"{name}.key"
    newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"] if key_type == "ec" \
        else ["-newkey", "rsa:2048"]
    subprocess.run(["openssl", "req", "-x509", *newkey, "-nodes", "-days", "2",
                    "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True)
    return crt, key


def tls_section(crt, key):
    return f"[TLS]\n    Certificate {crt}\n    CertificateKey {key}\n"


def tls_server(make_server, plugins=None, sites=None, **conf):
    """A server with one TLS listener; the default site answers localhost."""
    srv = make_server()
    certs = srv.dir / "certs"
    srv.certs = {"localhost": make_cert(certs, "localhost")}
    srv.plugins = [str(TLS_SO)] + (plugins or [])
    srv.set(Listen=f"127.0.0.1:{srv.port} tls", Workers=1, **conf)
    srv.site_extra = tls_section(*srv.certs["localhost"])
    for name in sites or []:
        root = srv.dir / f"root-{name}"
        root.mkdir()
        (root / "site.txt").write_text(f"site {name}\n")
        srv.certs[name] = make_cert(certs, name)
        srv.extra_sites[name] = (f"[HOST]\n    ServerName {name}\n    DocumentRoot {root}\n"
                                 + tls_section(*srv.certs[name]))
    srv.file("hello.txt", "Hello World!\n")
    return srv


def client_context(alpn=None, max_version=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if max_version:
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = max_version
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer old versions
    return ctx


def tls_connect(port, sni=None, **kw):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    return client_context(**kw).wrap_socket(sock, server_hostname=sni)


def bio_connect(port, **kw):
    """A TLS client on memory BIOs over a new connection to port, its
    handshake done: (socket, SSLObject, incoming BIO, outgoing BIO). The
    test moves the records itself (sock.sendall(out.read()),
    inc.write(sock.recv(...))), so it sees them as they are on the wire.
    kw: as client_context()."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context(**kw).wrap_bio(inc, out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(out.read())
            inc.write(sock.recv(65536))
    sock.sendall(out.read())
    return sock, obj, inc, out


def der_of(crt):
    return ssl.PEM_cert_to_DER_cert(crt.read_text())


def https(srv, path, host="localhost", sni="localhost", headers=None):
    """One request over a new TLS connection: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10 * SLOW)
    conn.sock = tls_connect(srv.port, sni=sni)  # used as it is: no connect()
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", host)
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
