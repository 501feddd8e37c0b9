"""The PROXY protocol (Listen ... proxy_protocol): versions 1 and 2 over raw
sockets, and HAProxy from Debian in front of the real server.

Each server loads the logger (access log with %h, the client, and %{c}a, the
TCP peer), the access plugin (a deny rule for one address) and the cgi plugin
(a script that prints REMOTE_ADDR and REMOTE_PORT), so one request shows the
address the header named in all three. HAProxy (the `haproxy` binary, skipped
when it is not installed) is started by the tests on a free port with a
generated configuration and stopped by its PID.
"""

import re
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest

from conftest import (BALANCINGS, BUILD, HAS_IPV6, MONKEY, ROOT, SLOW, can_bind, free_port,
                      needs_dlopen, needs_part, wait_for, wait_port)

LOGGER_SO = BUILD / "plugins" / "monkey-logger.so"
ACCESS_SO = BUILD / "plugins" / "monkey-access.so"
CGI_SO = BUILD / "plugins" / "monkey-cgi.so"
TLS_SO = BUILD / "plugins" / "monkey-tls.so"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

# The embedded profile leaves the part out (MK_REALIP): install/test_profile.py
# checks that its keys are refused instead.
NEEDS_REALIP = needs_part("realip", "the client's address behind a balancer")
pytestmark = [needs_dlopen, NEEDS_REALIP]

needs_haproxy = pytest.mark.skipif(not shutil.which(HAPROXY), reason="no haproxy binary")
needs_127_0_0_2 = pytest.mark.skipif(not can_bind("127.0.0.2"),
                                     reason="cannot bind 127.0.0.2 as a source address")

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
DENIED = "203.0.113.66"
ENV_CGI = ('#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
           'echo "REMOTE_ADDR=$REMOTE_ADDR"\necho "REMOTE_PORT=$REMOTE_PORT"\n'
           'echo "HTTPS=$HTTPS"\necho "REQUEST_SCHEME=$REQUEST_SCHEME"\n')


def v2(cmd=1, fam=0x11, addrs=b"", tlvs=b""):
    body = addrs + tlvs
    return V2_SIG + bytes([0x20 | cmd, fam]) + struct.pack("!H", len(body)) + body


def v2_inet(src, sport, dst="127.0.0.1", dport=80, tlvs=b""):
    a = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return v2(1, 0x11, a, tlvs)


def v2_inet6(src, sport, dst="::1", dport=80, tlvs=b""):
    a = (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) +
         struct.pack("!HH", sport, dport))
    return v2(1, 0x21, a, tlvs)


def tlv(t, value):
    return bytes([t]) + struct.pack("!H", len(value)) + value


def pp_server(make_server, listen_extra="proxy_protocol", timeout="5", **conf):
    """A server with a proxy_protocol listener, the logger, access and cgi plugins."""
    srv = make_server()
    srv.logs = srv.dir / "logs"
    srv.logs.mkdir()
    srv.file("hello.txt", "Hello World!\n")
    srv.file("env.cgi", ENV_CGI, mode=0o755)
    srv.plugins = [str(ACCESS_SO), str(LOGGER_SO), str(CGI_SO)]
    srv.set(Listen=f"127.0.0.1:{srv.port} {listen_extra}", Workers=1, Timeout=timeout)
    srv.set(**conf)
    srv.site_extra = (
        "[ACCESS]\n"
        f"    deny {DENIED}\n"
        "[LOGGER]\n"
        f"    AccessLog {srv.logs}/access.log\n"
        '    Format custom %h %{c}a "%r" %>s\n'
        "[CGI]\n"
        "    Match \\.cgi$\n"
    )
    return srv


def log_lines(srv, n, timeout=5.0):
    path = srv.logs / "access.log"
    assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= n, timeout * SLOW)
    return path.read_text().splitlines()


def exchange(port, data, timeout=5.0, host="127.0.0.1", pause=None, source=None):
    """Send `data` (bytes, or a list of pieces sent `pause` seconds apart)
    and read until the server closes; returns what came back."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family)
    s.settimeout(timeout * SLOW)
    if source:
        s.bind((source, 0))
    s.connect((host, port))
    try:
        for piece in (data if isinstance(data, list) else [data]):
            s.sendall(piece)
            if pause:
                time.sleep(pause)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def get(path="/hello.txt", close=True):
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
            f"{'Connection: close' if close else 'X-A: b'}\r\n\r\n").encode()


def status_of(resp):
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", resp)
    return int(m.group(1)) if m else None


def env_of(resp):
    body = resp.split(b"\r\n\r\n", 1)[1].decode()
    return dict(line.split("=", 1) for line in body.splitlines() if "=" in line)


@pytest.fixture
def pp(make_server):
    return pp_server(make_server).start()


def test_v1_tcp4_everywhere(pp):
    hdr = f"PROXY TCP4 192.0.2.7 127.0.0.1 4711 {pp.port}\r\n".encode()
    r = exchange(pp.port, hdr + get("/env.cgi"))
    assert status_of(r) == 200, r
    e = env_of(r)
    assert e["REMOTE_ADDR"] == "192.0.2.7" and e["REMOTE_PORT"] == "4711"
    assert log_lines(pp, 1)[-1] == '192.0.2.7 127.0.0.1 "GET /env.cgi HTTP/1.1" 200'


@pytest.mark.skipif(not HAS_IPV6, reason="no IPv6")
def test_v1_tcp6(pp):
    hdr = f"PROXY TCP6 2001:db8::7 ::1 1 {pp.port}\r\n".encode()
    e = env_of(exchange(pp.port, hdr + get("/env.cgi")))
    assert e["REMOTE_ADDR"] == "2001:db8::7" and e["REMOTE_PORT"] == "1"


def test_v1_unknown_keeps_the_peer(pp):
    r = exchange(pp.port, b"PROXY UNKNOWN ff::1 ff::2 1 2\r\n" + get("/env.cgi"))
    assert env_of(r)["REMOTE_ADDR"] == "127.0.0.1"
    assert log_lines(pp, 1)[-1].startswith("127.0.0.1 127.0.0.1 ")


def test_v2_ipv4_with_tlvs(pp):
    tlvs = (tlv(0x01, b"http/1.1") + tlv(0x02, b"example.com") + tlv(0x05, b"req-1") +
            tlv(0x20, b"\x01\x00\x00\x00\x00" + tlv(0x21, b"TLSv1.3")) + tlv(0x04, b"\x00" * 7))
    r = exchange(pp.port, v2_inet("198.51.100.9", 50000, tlvs=tlvs) + get("/env.cgi"))
    e = env_of(r)
    assert e["REMOTE_ADDR"] == "198.51.100.9" and e["REMOTE_PORT"] == "50000"
    # the client spoke TLS to the balancer: the request counts as HTTPS
    assert e["HTTPS"] == "on" and e["REQUEST_SCHEME"] == "https"
    # without the SSL TLV (or its client bit) it does not
    r = exchange(pp.port, v2_inet("198.51.100.9", 1, tlvs=tlv(0x20, b"\x00" * 5)) + get("/env.cgi"))
    assert env_of(r)["HTTPS"] == "" and env_of(r)["REQUEST_SCHEME"] == "http"
    r = exchange(pp.port, v2_inet("198.51.100.9", 1) + get("/env.cgi"))
    assert env_of(r)["REQUEST_SCHEME"] == "http"


def test_v2_ipv6(pp):
    e = env_of(exchange(pp.port, v2_inet6("2001:db8:1::5", 443) + get("/env.cgi")))
    assert e["REMOTE_ADDR"] == "2001:db8:1::5" and e["REMOTE_PORT"] == "443"


def test_v2_local_keeps_the_peer(pp):
    # LOCAL: a balancer's own health check; its block (any family) is skipped
    r = exchange(pp.port, v2(0, 0x11, b"\x01" * 12) + get("/env.cgi"))
    assert env_of(r)["REMOTE_ADDR"] == "127.0.0.1"
    r = exchange(pp.port, v2(0, 0x00) + get())
    assert status_of(r) == 200


def test_keepalive_keeps_the_address(pp):
    hdr = v2_inet("192.0.2.44", 1000)
    r = exchange(pp.port, hdr + get("/env.cgi", close=False) * 2 + get("/env.cgi"))
    assert r.count(b"REMOTE_ADDR=192.0.2.44\n") == 3, r
    lines = log_lines(pp, 3)
    assert all(line.startswith("192.0.2.44 127.0.0.1 ") for line in lines[-3:])


def test_access_rules_see_the_client(pp):
    assert status_of(exchange(pp.port, v2_inet(DENIED, 1) + get())) == 403
    hdr = f"PROXY TCP4 {DENIED} 127.0.0.1 9 9\r\n".encode()
    assert status_of(exchange(pp.port, hdr + get())) == 403
    assert status_of(exchange(pp.port, v2_inet("203.0.113.65", 1) + get())) == 200


@pytest.mark.parametrize("data", [
    get(),                                                     # missing
    b"PROXY TCP4 192.0.2.1 127.0.0.1 1\r\n" + get(),           # a field missing
    b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\n" + get(),           # no CR
    b"PROXY TCP4 192.0.2.300 127.0.0.1 1 2\r\n" + get(),       # bad address
    b"PROXY TCP4 2001:db8::1 127.0.0.1 1 2\r\n" + get(),       # wrong family
    b"PROXY UNKNOWN " + b"x" * 100 + b"\r\n" + get(),          # too long (v1: 107 bytes)
    v2(2, 0x11, b"\x00" * 12) + get(),                         # command 2
    v2(1, 0x12, b"\x00" * 12) + get(),                         # DGRAM
    v2(1, 0x11, b"\x00" * 11) + get(),                         # block too short
    v2(1, 0x11, b"\x00" * 12, b"\x02\x00\x09abc") + get(),     # a TLV cut short
    V2_SIG[:11] + b"X" + b"\x21\x11\x00\x0c" + b"\x00" * 12 + get(),  # bad signature
    V2_SIG + b"\x21\x11\x04\x01" + b"\x00" * 1025,             # longer than 1024 bytes
    b"\x16\x03\x01\x00\x05hello",                              # TLS without the header
], ids=["missing", "short", "no-cr", "bad-addr", "family", "v1-long", "cmd", "dgram",
        "block", "tlv", "signature", "v2-long", "tls"])
def test_bad_header_closes(pp, data):
    assert exchange(pp.port, data) == b""
    assert wait_for(lambda: "PROXY header from 127.0.0.1" in pp.stderr_text())
    # the server goes on serving
    assert status_of(exchange(pp.port, v2_inet("192.0.2.1", 1) + get())) == 200


def test_split_across_reads(pp):
    hdr = v2_inet("192.0.2.55", 7, tlvs=tlv(0x02, b"example.com"))
    pieces = [hdr[:1], hdr[1:5], hdr[5:14], hdr[14:17], hdr[17:30], hdr[30:], get("/env.cgi")]
    r = exchange(pp.port, pieces, pause=0.05)
    assert env_of(r)["REMOTE_ADDR"] == "192.0.2.55"
    line = f"PROXY TCP4 192.0.2.56 127.0.0.1 8 {pp.port}\r\n".encode()
    pieces = [line[i:i + 3] for i in range(0, len(line), 3)] + [get("/env.cgi")]
    r = exchange(pp.port, pieces, pause=0.02)
    assert env_of(r)["REMOTE_ADDR"] == "192.0.2.56"
    # the header and the request in one piece, the header's end inside it
    r = exchange(pp.port, [line[:10], line[10:] + get("/env.cgi")], pause=0.05)
    assert env_of(r)["REMOTE_ADDR"] == "192.0.2.56"


def test_no_header_closed_at_the_timeout(make_server):
    srv = pp_server(make_server, timeout="1").start()
    for data in (b"", b"PROXY TCP4 1.2"):
        t0 = time.monotonic()
        assert exchange(srv.port, data, timeout=10) == b""
        elapsed = time.monotonic() - t0
        assert 0.8 < elapsed < 3 * SLOW, elapsed


def test_plain_listener_ignores_a_header(make_server):
    srv = pp_server(make_server, listen_extra="").start()
    r = exchange(srv.port, b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\r\n" + get())
    assert status_of(r) == 400
    assert exchange(srv.port, v2_inet("192.0.2.1", 1) + get()).startswith(b"HTTP/1.1 400 ")
    assert env_of(exchange(srv.port, get("/env.cgi")))["REMOTE_ADDR"] == "127.0.0.1"


@pytest.mark.skipif(not TLS_SO.exists() or not shutil.which("openssl"), reason="no tls plugin")
def test_tls_after_the_header(make_server):
    from tlsutil import client_context, make_cert, tls_section
    srv = pp_server(make_server)
    crt, key = make_cert(srv.dir / "certs", "localhost")
    srv.plugins.insert(0, str(TLS_SO))
    srv.set(Listen=f"127.0.0.1:{srv.port} tls proxy_protocol")
    srv.site_extra += tls_section(crt, key)
    srv.start()
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    raw.sendall(v2_inet("192.0.2.99", 3))
    s = client_context().wrap_socket(raw, server_hostname="localhost")
    s.sendall(get("/env.cgi"))
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ssl.SSLError, ConnectionResetError):
            break
        if not chunk:
            break
        out += chunk
    s.close()
    assert env_of(out)["REMOTE_ADDR"] == "192.0.2.99"


def test_listen_words_checked(make_server):
    srv = pp_server(make_server, listen_extra="proxy_protocol proxy_protocol")
    err = srv.run_expect_failure(["-t"])
    assert re.search(r"monkey\.conf:\d+: .*proxy_protocol is given twice", err), err
    srv = pp_server(make_server, listen_extra="h2c proxy_protocol")
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf), "-t"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


# ---- HAProxy in front --------------------------------------------------------


class HAProxy:
    """haproxy -db with a generated configuration, stopped by its PID."""

    def __init__(self, folder, cfg):
        self.port = free_port()
        self.path = folder / "haproxy.cfg"
        self.path.write_text(cfg.replace("@PORT@", str(self.port)))
        self.log = open(folder / "haproxy.log", "w")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(self.path)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_port(self.port, proc=self.proc):
            self.stop()
            raise RuntimeError("haproxy did not start: " + (folder / "haproxy.log").read_text())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def recipe_haproxy_cfg():
    """The haproxy.cfg of docs/load-balancer.md, as written."""
    text = (ROOT / "docs" / "load-balancer.md").read_text()
    m = re.search(r"```haproxy\n(.*?)```", text, re.S)
    assert m, "docs/load-balancer.md has no haproxy block"
    return m.group(1)


@pytest.fixture
def behind_haproxy(make_server):
    """Monkey on a proxy_protocol listener, HAProxy in front with the recipe's
    configuration (its addresses and ports replaced by the test's)."""
    srv = pp_server(make_server)
    srv.file("health", "ok\n")
    srv.start()
    cfg = recipe_haproxy_cfg()
    cfg = re.sub(r"bind \S+", "bind 127.0.0.1:@PORT@", cfg)
    lines = [line for line in cfg.splitlines() if not re.match(r"\s+server web[2-9]", line)]
    cfg = "\n".join(lines) + "\n"
    cfg = re.sub(r"(server web1 )\S+", rf"\g<1>127.0.0.1:{srv.port}", cfg)
    cfg = cfg.replace("inter 2s", "inter 200ms")
    hap = HAProxy(srv.dir, cfg)
    yield srv, hap
    hap.stop()


@needs_haproxy
@needs_127_0_0_2
def test_haproxy_send_proxy_v2(behind_haproxy):
    srv, hap = behind_haproxy
    # the client is 127.0.0.2; HAProxy connects to Monkey from 127.0.0.1
    r = exchange(hap.port, get("/env.cgi"), source="127.0.0.2")
    assert status_of(r) == 200, r
    assert env_of(r)["REMOTE_ADDR"] == "127.0.0.2"
    assert wait_for(lambda: any(line.startswith('127.0.0.2 127.0.0.1 "GET /env.cgi')
                         for line in log_lines(srv, 1)), 5 * SLOW)
    # HAProxy's health checks (check-send-proxy: LOCAL) keep the TCP peer
    assert wait_for(lambda: any(line.startswith('127.0.0.1 127.0.0.1 "GET /health')
                         for line in log_lines(srv, 1)), 10 * SLOW)


@needs_haproxy
@needs_127_0_0_2
def test_haproxy_access_rule(make_server):
    srv = pp_server(make_server)
    srv.site_extra = srv.site_extra.replace(f"deny {DENIED}", "deny 127.0.0.2")
    srv.start()
    cfg = ("defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 10s\n"
           "    timeout server 10s\n"
           "frontend fe\n    bind 127.0.0.1:@PORT@\n    default_backend be\n"
           f"backend be\n    server m 127.0.0.1:{srv.port} send-proxy-v2\n")
    hap = HAProxy(srv.dir, cfg)
    try:
        assert status_of(exchange(hap.port, get(), source="127.0.0.2")) == 403
        assert status_of(exchange(hap.port, get())) == 200
        # version 1 too
        hap.stop()
        hap = HAProxy(srv.dir, cfg.replace("send-proxy-v2", "send-proxy"))
        assert status_of(exchange(hap.port, get(), source="127.0.0.2")) == 403
        r = exchange(hap.port, get("/env.cgi"))
        assert env_of(r)["REMOTE_ADDR"] == "127.0.0.1"
    finally:
        hap.stop()


@needs_haproxy
@needs_127_0_0_2
@pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl tool")
def test_haproxy_terminates_tls(make_server):
    """HAProxy decrypts and says so (send-proxy-v2-ssl-cn: the SSL TLV with
    its version, cipher and client certificate sub-TLVs): the request
    counts as HTTPS."""
    from tlsutil import client_context, make_cert
    srv = pp_server(make_server).start()
    crt, key = make_cert(srv.dir / "certs", "localhost")
    pem = srv.dir / "certs" / "localhost.pem"
    pem.write_text(crt.read_text() + key.read_text())
    cfg = ("defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n"
           "    timeout server 10s\n"
           f"frontend fe\n    bind 127.0.0.1:@PORT@ ssl crt {pem}\n    default_backend be\n"
           f"backend be\n    server m 127.0.0.1:{srv.port} send-proxy-v2-ssl-cn\n")
    hap = HAProxy(srv.dir, cfg)
    try:
        raw = socket.socket(socket.AF_INET)
        raw.settimeout(5 * SLOW)
        raw.bind(("127.0.0.2", 0))
        raw.connect(("127.0.0.1", hap.port))
        s = client_context().wrap_socket(raw, server_hostname="localhost")
        s.sendall(get("/env.cgi"))
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ssl.SSLError, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        s.close()
        e = env_of(out)
        assert e["REMOTE_ADDR"] == "127.0.0.2"
        assert e["HTTPS"] == "on" and e["REQUEST_SCHEME"] == "https"
    finally:
        hap.stop()


@pytest.mark.parametrize("balancing", BALANCINGS)
def test_balancing_modes(make_server, balancing):
    srv = pp_server(make_server, Balancing=balancing, Workers=2).start()
    for i in range(8):
        assert env_of(exchange(srv.port, v2_inet(f"192.0.2.{i}", 1) + get("/env.cgi"))) \
            ["REMOTE_ADDR"] == f"192.0.2.{i}"


def test_reload_turns_it_on_and_off(make_server):
    srv = pp_server(make_server, listen_extra="").start()
    assert status_of(exchange(srv.port, v2_inet("192.0.2.78", 1) + get())) == 400
    srv.set(Listen=f"127.0.0.1:{srv.port} proxy_protocol")
    srv.write_conf()
    srv.reload()
    assert env_of(exchange(srv.port, v2_inet("192.0.2.78", 1) + get("/env.cgi"))) \
        ["REMOTE_ADDR"] == "192.0.2.78"
    assert exchange(srv.port, get()) == b""
    srv.set(Listen=f"127.0.0.1:{srv.port}")
    srv.write_conf()
    srv.reload()
    assert status_of(exchange(srv.port, get())) == 200


def test_h2c_after_the_header(make_server):
    """Listen ... h2c proxy_protocol: the HTTP/2 preface right after the header
    (HAProxy's `proto h2` to a cleartext server)."""
    pytest.importorskip("h2.connection")
    from h2util import H2Client

    srv = pp_server(make_server, listen_extra="h2c proxy_protocol").start()
    c = H2Client(srv.port, preamble=v2_inet("192.0.2.123", 5))
    st = c.get("/env.cgi")
    c.close()
    assert b"REMOTE_ADDR=192.0.2.123\n" in st["data"], st


@needs_haproxy
@needs_127_0_0_2
def test_haproxy_h2_to_the_server(make_server):
    """HAProxy speaks HTTP/2 in clear to Monkey (proto h2), after the header."""
    srv = pp_server(make_server, listen_extra="h2c proxy_protocol").start()
    cfg = ("defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n"
           "    timeout server 10s\n"
           "frontend fe\n    bind 127.0.0.1:@PORT@\n    default_backend be\n"
           f"backend be\n    server m 127.0.0.1:{srv.port} send-proxy-v2 proto h2\n")
    hap = HAProxy(srv.dir, cfg)
    try:
        r = exchange(hap.port, get("/env.cgi"), source="127.0.0.2")
        assert status_of(r) == 200, r
        assert env_of(r)["REMOTE_ADDR"] == "127.0.0.2"
        assert wait_for(lambda: any(line.startswith('127.0.0.2 127.0.0.1 "GET /env.cgi HTTP/2')
                             for line in log_lines(srv, 1)), 5 * SLOW)
    finally:
        hap.stop()
