"""The transport seam (handshake, direction wanted, pending bytes, ALPN, SNI,
Listen options) through the xor test transport, and connection takeover
after 101 through the echo test plugin (tests/plugins/xor.c, echo.c)."""

import os
import socket
import threading
import time

import pytest

from conftest import BUILD, SANITIZED, SLOW, needs_dlopen

XOR_SO = BUILD / "tests" / "plugins" / "monkey-xor.so"
ECHO_SO = BUILD / "tests" / "plugins" / "monkey-echo.so"

pytestmark = needs_dlopen


def xor(data, key):
    n = len(data)
    if not n:
        return b""
    return (int.from_bytes(data, "big") ^ int.from_bytes(bytes([key]) * n, "big")).to_bytes(n, "big")


class XorClient:
    """The client side of the xor transport: handshake, then XORed bytes."""

    def __init__(self, port, name=b"example.test", key=90, timeout=5.0, rcvbuf=None):
        self.key = key
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout * SLOW)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(bytes([len(name)]) + name)
        assert self.sock.recv(1) == b"K"
        self.buf = b""

    def send(self, data):
        self.sock.sendall(xor(data, self.key))

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += xor(data, self.key)

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        body = self.read_exact(int(headers.get("content-length", "0")))
        return status, headers, body

    def closed(self, timeout):
        """True when the server closes the connection within `timeout` seconds."""
        self.sock.settimeout(timeout * SLOW)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def xor_server(make_server, options="", plugins=None, **conf):
    srv = make_server()
    srv.plugins = [str(XOR_SO)] + (plugins or [])
    srv.set(Listen=f"127.0.0.1:{srv.port} xor {options}".rstrip(), Workers=1, **conf)
    srv.file("hello.txt", "Hello World!\n")
    srv.start()
    return srv


def get(path):
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()


# ---- the transport seam -----------------------------------------------------------

def test_handshake_then_records(make_server):
    srv = xor_server(make_server, "key=7")
    c = XorClient(srv.port, key=7)
    c.send(get("/hello.txt"))
    status, _, body = c.read_response()
    assert (status, body) == (200, b"Hello World!\n")
    c.close()


def test_accessors_alpn_sni_local_address_options(make_server):
    srv = xor_server(make_server, "key=7 chunk=4096")
    c = XorClient(srv.port, name=b"www.example.test", key=7)
    c.send(get("/xor-info"))
    status, _, body = c.read_response()
    assert status == 200
    assert body == (f"alpn=http/1.1 sni=www.example.test port={srv.port} "
                    "options=key=7 chunk=4096\n").encode()
    c.close()


def test_bytes_held_by_the_transport_are_read(make_server):
    # Each read() of the transport returns at most 8 bytes and keeps the rest:
    # no socket event announces it, so only pending() tells the server.
    srv = xor_server(make_server, "chunk=8")
    c = XorClient(srv.port)
    c.send(get("/hello.txt") + get("/xor-info"))
    assert c.read_response()[2] == b"Hello World!\n"
    assert c.read_response()[2].startswith(b"alpn=http/1.1 sni=example.test")
    c.close()


def test_read_that_wants_to_write(make_server):
    # The transport's read takes the socket's bytes, then says "call me when
    # writable": waiting for readability would wait forever.
    srv = xor_server(make_server, "stall")
    c = XorClient(srv.port)
    for _ in range(3):
        c.send(get("/hello.txt"))
        assert c.read_response()[:1] == (200,)
    c.close()


def test_large_response_through_a_full_socket(make_server):
    data = os.urandom(3 << 20)
    srv = make_server()
    srv.plugins = [str(XOR_SO)]
    srv.set(Listen=f"127.0.0.1:{srv.port} xor key=33", Workers=1)
    srv.file("big.bin", data)
    srv.start()
    c = XorClient(srv.port, key=33, rcvbuf=16384)
    c.send(get("/big.bin"))
    time.sleep(0.3)  # let the socket fill: writes answer EAGAIN
    status, headers, body = c.read_response()
    assert status == 200 and int(headers["content-length"]) == len(data)
    assert body == data
    c.close()


def test_handshake_timeout(make_server):
    srv = make_server()
    srv.plugins = [str(XOR_SO)]
    srv.set(Listen=f"127.0.0.1:{srv.port} xor", Timeout="300ms", Workers=1)
    srv.start()
    for first in (b"", b"\x05ab"):  # nothing, then half a server name
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
        s.sendall(first)
        t0 = time.monotonic()
        assert s.recv(16) == b""  # closed without an answer ('K' or HTTP)
        assert time.monotonic() - t0 < 3 * SLOW
        s.close()


def test_alpn_picks_the_protocol(make_server):
    srv = xor_server(make_server, "alpn=spdy/3")
    c = XorClient(srv.port)
    # Negotiated a protocol this server does not speak: closed.
    assert c.closed(3)
    c.close()
    srv2 = xor_server(make_server, "alpn=none")
    c = XorClient(srv2.port)
    c.send(get("/xor-info"))
    status, _, body = c.read_response()
    assert status == 200 and body.startswith(b"alpn=- sni=example.test")
    c.close()


def test_listen_options_are_checked_with_file_and_line(make_server):
    srv = make_server()
    srv.plugins = [str(XOR_SO)]
    srv.set(Listen=[f"127.0.0.1:{srv.port}", f"127.0.0.1:{srv.port + 1} xor key=7 bogus"])
    err = srv.run_expect_failure(["-t"])
    assert (f"monkey.conf:3: Listen 127.0.0.1:{srv.port + 1}: xor: unknown option 'bogus'"
            in err)
    srv.set(Listen=f"127.0.0.1:{srv.port} xor key=0")
    err = srv.run_expect_failure()
    assert f"monkey.conf:2: Listen 127.0.0.1:{srv.port}: key must be 1..255, got '0'" in err


def test_transport_without_options_refuses_them(make_server):
    srv = make_server()
    srv.plugins = [str(BUILD / "tests" / "plugins" / "monkey-tap.so")]
    srv.set(Listen=f"127.0.0.1:{srv.port} tap fast")
    err = srv.run_expect_failure()
    assert f"monkey.conf:2: Listen 127.0.0.1:{srv.port}: the transport 'tap' takes no options" in err


# ---- connection takeover ------------------------------------------------------------

UPGRADE = b"GET /echo%s HTTP/1.1\r\nHost: localhost\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"


def echo_server(make_server, **conf):
    srv = make_server()
    srv.plugins = [str(ECHO_SO)]
    srv.set(Workers=1, **conf)
    srv.start()
    return srv


def upgrade(port, query=b"", extra=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    s.sendall(UPGRADE % query + extra)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, head
        head += chunk
    return s, head.decode()


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(1 << 20, n - len(out)))
        assert chunk, f"closed after {len(out)} of {n} bytes"
        out += chunk
    return bytes(out)


def stats(srv):
    r = srv.get("/echo-stats")
    assert r.status == 200
    return dict(kv.split("=") for kv in r.body.decode().split())


def test_echo_round_trips(make_server):
    srv = echo_server(make_server)
    s, head = upgrade(srv.port, extra=b"early bytes|")
    assert head.startswith("HTTP/1.1 101 Switching Protocols\r\n")
    assert "Upgrade: echo\r\n" in head and "Connection: Upgrade\r\n" in head
    assert "Content-Length" not in head and "Connection: close" not in head
    # Bytes sent with the upgrade request belong to the new protocol.
    assert recv_exact(s, 12) == b"early bytes|"
    for msg in (b"hello", b"GET / HTTP/1.1\r\n\r\n", bytes(range(256))):
        s.sendall(msg)
        assert recv_exact(s, len(msg)) == msg
    s.sendall(b"CLOSE")
    assert recv_exact(s, 3) == b"BYE"
    assert s.recv(16) == b""
    s.close()
    assert stats(srv)["open"] == "0"


def test_upgrade_needs_http11_and_the_header(make_server):
    srv = echo_server(make_server)
    assert srv.get("/echo").status == 426
    r = srv.request("GET", "/echo", version="HTTP/1.0", headers={"Upgrade": "echo"})
    assert r.status == 400  # api->takeover refused: HTTP/1.0 has no upgrade
    assert stats(srv) == {"open": "0", "closed": "0", "paused": "0"}


def test_echo_large_with_back_pressure(make_server):
    srv = echo_server(make_server)
    s, _ = upgrade(srv.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    # More than the kernel's buffers on both sides can hold (the server's
    # receive buffer grows to a few MiB), so the sender must wait.
    data = os.urandom(32 << 20)
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    # Nobody reads: the server's queue fills and it stops reading...
    deadline = time.monotonic() + 5 * SLOW
    while stats(srv)["paused"] == "0":
        assert time.monotonic() < deadline, "the server never stopped reading"
        time.sleep(0.05)
    time.sleep(0.2)
    assert sender.is_alive()  # ...so the client's sending is held up too
    assert recv_exact(s, len(data)) == data
    sender.join()
    s.close()


def test_echo_idle_timeout(make_server):
    srv = echo_server(make_server)
    s, _ = upgrade(srv.port, query=b"?idle=300")
    s.sendall(b"ping")
    assert recv_exact(s, 4) == b"ping"
    t0 = time.monotonic()
    assert s.recv(16) == b""  # closed by its own idle timeout, not Timeout (5 s)
    assert time.monotonic() - t0 < 3 * SLOW
    s.close()
    deadline = time.monotonic() + 5 * SLOW
    while stats(srv)["closed"] != "1":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_echo_over_the_xor_transport(make_server):
    srv = xor_server(make_server, "key=99 chunk=5", plugins=[str(ECHO_SO)])
    c = XorClient(srv.port, key=99)
    c.send(UPGRADE % b"" + b"first")
    while b"\r\n\r\n" not in c.buf:
        c._fill()
    head, c.buf = c.buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101 ")
    assert c.read_exact(5) == b"first"
    msg = os.urandom(200000)
    sender = threading.Thread(target=c.send, args=(msg,))
    sender.start()
    assert c.read_exact(len(msg)) == msg
    sender.join()
    c.send(b"CLOSE")
    assert c.read_exact(3) == b"BYE"
    assert c.closed(3)
    c.close()
