"""The proxy's tls:// upstreams (plugins/proxy/px_tls.c): the certificate
verified against TLSCAFile (or the system's store) with the server's name=
or its IP address, SNI for a DNS name, a verification failure a 502 with
the reason logged, TLSVerify off, keep-alive over TLS and session
resumption on new connections, a large download read slowly (bytes
OpenSSL holds decrypted), a client certificate, HTTP/2 clients, and
monkey -t. The upstreams are proxy_upstream.py --tls processes started by
each test and stopped by PID; the certificates are made by the openssl
tool."""

import hashlib
import json
import shutil
import socket
import ssl
import subprocess
import time

import pytest

from conftest import SLOW, built_without, needs_dlopen
from gwutil import plugin_status
from h2util import H2Client, skip_without_h2
from test_proxy import check_conf, PROXY_SO, echo, fields, proxy_server, upstreams  # noqa: F401

pytestmark = [
    needs_dlopen,
    pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl tool"),
    pytest.mark.skipif(built_without("tls"), reason="built without OpenSSL: no tls:// upstreams"),
]


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def ca(folder, name):
    crt, key = folder / f"{name}.crt", folder / f"{name}.key"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(crt),
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt, key


def leaf(folder, name, ca_pair, san):
    crt, key = folder / f"{name}.crt", folder / f"{name}.key"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(crt),
            "-CA", str(ca_pair[0]), "-CAkey", str(ca_pair[1]),
            "-addext", f"subjectAltName={san}", "-addext", "basicConstraints=CA:FALSE")
    return crt, key


@pytest.fixture
def pki(tmp_path):
    d = tmp_path / "pki"
    d.mkdir()
    root = ca(d, "test-ca")
    other = ca(d, "other-ca")
    return {"ca": root[0], "other": other[0],
            "server": leaf(d, "app.test", root, "DNS:app.test,IP:127.0.0.1"),
            "client": leaf(d, "proxy-client", root, "DNS:proxy-client")}


def tls_upstream(upstreams, pki, name="a", client_ca=False):
    flags = ["--tls", str(pki["server"][0]), str(pki["server"][1])]
    return upstreams(name, flags=flags + (["--client-ca", str(pki["ca"])] if client_ca else []))


def tls_stats(u, cert=None):
    """u's /stats over TLS; cert: the (certificate, key) to present, for an
    upstream that asks for one (--client-ca). Its own handshake and request
    are counted in what it returns."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", u.port), timeout=5))
    s.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        data += s.recv(65536)
    s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def conf_for(u, pki, params="name=app.test", extra=""):
    return (f"    TLSCAFile {pki['ca']}\n{extra}    Upstream app\n"
            f"    Server tls://{u.addr} {params}\n")


def test_get_and_post_over_tls(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n").start()
    r = echo(srv)
    assert r.status == 200, (r.status, srv.stderr_text())
    d = json.loads(r.body)
    assert d["name"] == "a"
    assert d["tls"]["sni"] == "app.test"
    assert d["tls"]["version"] in ("TLSv1.2", "TLSv1.3")
    r = echo(srv, method="POST", body=b"x" * 200000, headers={"Content-Type": "text/plain"})
    assert r.status == 200, (r, srv.stderr_text())
    assert len(r.body) > 200000, (r.headers, r.body[:300], srv.stderr_text())
    assert json.loads(r.body)["body"] == "x" * 200000


def test_an_ip_address_is_verified_without_sni(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=f"    TLSCAFile {pki['ca']}\n",
                       site=f"    Pass / tls://{u.addr}\n").start()
    r = echo(srv)
    assert r.status == 200, srv.stderr_text()
    assert json.loads(r.body)["tls"]["sni"] is None  # no SNI for an IP address (RFC 6066)


@pytest.mark.parametrize("case", ["wrong_name", "untrusted", "system_store"])
def test_verification_failure_is_a_502_with_the_reason(make_server, upstreams, pki, case):
    u = tls_upstream(upstreams, pki)
    conf = {"wrong_name": conf_for(u, pki, "name=other.test"),
            "untrusted": f"    TLSCAFile {pki['other']}\n    Upstream app\n"
                         f"    Server tls://{u.addr} name=app.test\n",
            "system_store": f"    Upstream app\n    Server tls://{u.addr} name=app.test\n"}[case]
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    assert echo(srv).status == 502
    err = srv.stderr_text()
    assert "certificate verification failed" in err and u.addr in err
    want = "hostname mismatch" if case == "wrong_name" else "unable to get local issuer"
    assert want in err, err
    assert tls_stats(u)["requests"] == 1  # the /stats alone: nothing was sent


def test_verify_off(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=f"    TLSVerify off\n    Upstream app\n"
                       f"    Server tls://{u.addr} name=nobody.test\n",
                       site="    Pass / app\n").start()
    r = echo(srv)
    assert r.status == 200 and json.loads(r.body)["tls"]["sni"] == "nobody.test"


def test_keepalive_over_tls(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n",
                       control=True).start()
    c = srv.conn()
    conns = {json.loads(c.request("GET", "/echo").body)["conn"] for _ in range(6)}
    c.close()
    assert len(conns) == 1
    s = plugin_status(srv, "proxy")
    assert s["server0_tls_handshakes"] == 1 and s["server0_reuses"] == 5
    assert tls_stats(u)["handshakes"] == 1 + 1  # the proxy's and this /stats


def test_sessions_resumed_on_new_connections(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki, extra="    KeepAlive 0\n"),
                       site="    Pass / app\n", control=True).start()
    docs = [json.loads(echo(srv).body) for _ in range(4)]
    assert len({d["conn"] for d in docs}) == 4
    assert not docs[0]["tls"]["resumed"]
    assert all(d["tls"]["resumed"] for d in docs[1:]), docs
    s = plugin_status(srv, "proxy")
    assert s["server0_tls_handshakes"] == 4 and s["server0_tls_resumed"] == 3


def test_large_download_read_slowly(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n").start()
    n = 8_000_000
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % n)
    data = b""
    t = time.monotonic()
    while True:
        got = s.recv(7000)
        if not got:
            break
        data += got
        if len(data) < 1_000_000 and time.monotonic() - t < 2:
            time.sleep(0.01)  # slow at first: the proxy is held back, TLS keeps bytes
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert b" 200 " in head.split(b"\r\n")[0]
    if b"chunked" in head.lower():
        out, rest = b"", body
        while True:
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        body = out
    chunk = bytes(range(256)) * 256
    want = (chunk * (n // len(chunk) + 1))[:n]
    assert len(body) == n
    assert hashlib.sha256(body).digest() == hashlib.sha256(want).digest()


def test_client_certificate(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki, client_ca=True)
    without = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n").start()
    assert echo(without).status == 502
    # TLS 1.3: the server refuses the certificate after the client's handshake is done
    assert u.addr in without.stderr_text()
    without.stop()
    crt, key = pki["client"]
    before = tls_stats(u, cert=pki["client"])
    srv = proxy_server(make_server, conf=conf_for(
        u, pki, extra=f"    TLSCertificate {crt}\n    TLSKey {key}\n"),
        site="    Pass / app\n", control=True).start()
    c = srv.conn()
    docs = [json.loads(c.request("GET", "/echo").body) for _ in range(2)]
    c.close()
    assert all(d["tls"]["client"]["commonName"] == "proxy-client" for d in docs), docs
    assert docs[0]["conn"] == docs[1]["conn"]
    # what the upstream counted of the proxy (less the /stats calls' own): one
    # handshake with the certificate, both requests over that connection
    after = tls_stats(u, cert=pki["client"])
    assert after["handshakes"] - before["handshakes"] - 1 == 1, (before, after)
    assert after["requests"] - before["requests"] - 1 == 2, (before, after)
    s = plugin_status(srv, "proxy")
    assert s["server0_tls_handshakes"] == 1 and s["server0_reuses"] == 1, s


def test_tls_to_a_plain_server_is_a_502(make_server, upstreams, pki):
    plain = upstreams("plain")
    srv = proxy_server(make_server, conf=f"    TLSCAFile {pki['ca']}\n",
                       site=f"    Pass / tls://{plain.addr}\n").start()
    assert echo(srv).status == 502
    assert "TLS handshake" in srv.stderr_text()


def test_http2_clients_to_a_tls_upstream(make_server, upstreams, pki):
    skip_without_h2()
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n",
                       h2c=True).start()
    h = H2Client(srv.port)
    sids = [h.request(f"/big?n={5000 + 7919 * i}") for i in range(30)]
    h.wait(sids)
    chunk = bytes(range(256)) * 256
    for i, sid in enumerate(sids):
        n = 5000 + 7919 * i
        assert h.streams[sid]["headers"][":status"] == "200"
        assert h.streams[sid]["data"] == (chunk * (n // len(chunk) + 1))[:n], i
    h.close()


def test_reload_with_kept_tls_connections(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    srv = proxy_server(make_server, conf=conf_for(u, pki), site="    Pass / app\n").start()
    assert echo(srv).status == 200
    srv.reload()  # the old context goes with the old configuration; kept connections hold it
    for _ in range(3):
        assert echo(srv).status == 200
    (srv.conf / "plugins" / "proxy.conf").write_text(
        "[PROXY]\n" + conf_for(u, pki, "name=other.test"))
    srv.reload()
    assert echo(srv).status == 502  # a new name: a new server, verified again


def test_monkey_t_errors(make_server, tmp_path, pki):
    cases = [
        (f"    TLSCAFile {tmp_path}/missing.pem\n", "TLSCAFile", "proxy.conf:2"),
        (f"    TLSCertificate {pki['client'][0]}\n", "needs both TLSCertificate and TLSKey",
         "proxy"),
        (f"    TLSCertificate {pki['client'][0]}\n    TLSKey {tmp_path}/missing.key\n",
         "missing.key", "proxy.conf:3"),
        ("    TLSVerify maybe\n", "TLSVerify", "proxy.conf:2"),
        ("    Upstream app\n    Server 127.0.0.1:80 name=a.test\n", "name= is for tls://",
         "proxy.conf:3"),
        ("    Upstream app\n    Server tls://127.0.0.1:443 name=a/b\n", "name= is a DNS name",
         "proxy.conf:3"),
    ]
    for conf, why, where in cases:
        srv = proxy_server(make_server, conf=conf, site="")
        err = srv.run_expect_failure(["-t"])
        assert why in err and where in err, (conf, err)
    ok = proxy_server(make_server, conf=f"    TLSCAFile {pki['ca']}\n    Upstream app\n"
                      "    Server tls://127.0.0.1:443 name=app.test weight=2\n",
                      site="    Pass / app\n")
    check_conf(ok)


def tls_get(u, path):
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", u.port), timeout=5))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith((b"}", b"]")):
        data += s.recv(65536)
    s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def test_active_health_checks_over_tls(make_server, upstreams, pki):
    u = tls_upstream(upstreams, pki)
    conf = conf_for(u, pki) + "    Health /health interval=100ms timeout=1s rise=2 fall=2\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n", control=True).start()
    end = time.monotonic() + 5 * SLOW
    while plugin_status(srv, "proxy")["server0_checks"] < 3 and time.monotonic() < end:
        time.sleep(0.05)
    s = plugin_status(srv, "proxy")
    assert s["server0_checks"] >= 3 and s["server0_check_failures"] == 0, srv.stderr_text()
    assert s["server0_healthy"] == 1
    assert set(tls_get(u, "/sethealth/500")) == {"app.test"}  # the checks' Host: its name
    while plugin_status(srv, "proxy")["server0_healthy"] == 1 and time.monotonic() < end:
        time.sleep(0.05)
    assert plugin_status(srv, "proxy")["server0_healthy"] == 0
    assert echo(srv).status == 502  # its only server is out
    assert "status 500" in srv.stderr_text()
