"""mk-wsload (bench/wsload.c), the WebSocket load client of bench/websocket.py:
its handshake check, its masking, its echo and fan-out counts, and the
errors it must count (an echo that differs, a repeated delivery), first
against a small WebSocket server in this file that misbehaves on purpose,
then against Monkey's wstest service (tests/duda/wstest).

The binary comes from $MK_BUILD (default: build/); it is built with the
tests when OpenSSL is found."""

import base64
import hashlib
import json
import selectors
import socket
import struct
import subprocess
import threading

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC

WSLOAD = BUILD / "bin" / "mk-wsload"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

pytestmark = pytest.mark.skipif(not WSLOAD.exists(), reason="mk-wsload not built (OpenSSL)")


class FakeServer:
    """A one-thread WebSocket server: it answers each handshake (with a wrong
    Sec-WebSocket-Accept if told to), unmasks every client frame (recording
    its mask bit and key) and hands each message to on_message(server,
    conn, payload), which answers with server.send()."""

    def __init__(self, on_message, good_accept=True):
        self.on_message, self.good_accept = on_message, good_accept
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1024)
        self.port = self.lsock.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.lsock, selectors.EVENT_READ)
        self.conns, self.keys, self.unmasked, self.messages = [], set(), 0, []
        self.stopping = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def send(self, conn, payload):
        n = len(payload)
        head = bytes([0x81, n]) if n < 126 else bytes([0x81, 126]) + struct.pack("!H", n)
        conn.setblocking(True)
        conn.sendall(head + payload)
        conn.setblocking(False)

    def handshake(self, conn, buf):
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        key = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key:")][0]
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        if not self.good_accept:
            accept = base64.b64encode(hashlib.sha1(key).digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        self.conns.append(conn)
        return bytearray(rest)

    def frames(self, conn, buf):
        while len(buf) >= 2:
            n, h = buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    return
                n, h = struct.unpack("!H", buf[2:4])[0], 4
            if not buf[1] & 0x80:
                self.unmasked += 1
                mask = b"\0\0\0\0"
            else:
                mask = bytes(buf[h:h + 4])
                h += 4
            if len(buf) < h + n:
                return
            self.keys.add(mask)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(buf[h:h + n]))
            del buf[:h + n]
            self.messages.append(payload)
            self.on_message(self, conn, payload)

    def loop(self):
        state = {}
        while not self.stopping:
            for key, _ in self.sel.select(0.1):
                if key.fileobj is self.lsock:
                    conn, _ = self.lsock.accept()
                    conn.setblocking(False)
                    state[conn] = [False, bytearray()]
                    self.sel.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(conn)
                    conn.close()
                    continue
                st = state[conn]
                st[1] += data
                if not st[0]:
                    if b"\r\n\r\n" not in st[1]:
                        continue
                    st[0], st[1] = True, self.handshake(conn, st[1])
                self.frames(conn, st[1])

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def wsload(port, *args, timeout=60):
    """Run mk-wsload: (exit status, its JSON result or None, its stderr)."""
    p = subprocess.run([str(WSLOAD), "-p", str(port), *args], capture_output=True, text=True,
                       timeout=timeout * SLOW)
    out = p.stdout.strip()
    return p.returncode, json.loads(out) if out else None, p.stderr


def test_echo_masks_every_frame_with_fresh_keys_and_counts_round_trips():
    srv = FakeServer(lambda s, c, p: s.send(c, p))
    try:
        rc, r, err = wsload(srv.port, "-u", "/echo", "-c", "4", "-d", "1")
    finally:
        srv.stop()
    assert rc == 0, err
    assert r["errors"] == 0 and r["failed"] == 0, (r, err)
    assert r["round_trips"] > 20
    assert srv.unmasked == 0
    assert len(srv.keys) > 10  # a key per frame, not one fixed key
    # Each message is distinct: 32 bytes naming its connection and number.
    assert all(len(m) == 32 for m in srv.messages)
    assert len(set(srv.messages)) == len(srv.messages)
    assert {m[:9] for m in srv.messages} == {b"c%07u " % i for i in range(4)}


def test_echo_that_differs_is_an_error_not_a_round_trip():
    sent = {"good": 0, "bad": 0}

    def corrupt_every_fifth(s, c, p):
        if len(s.messages) % 5 == 0:
            sent["bad"] += 1
            p = p[:-1] + (b"?" if p[-1:] != b"?" else b"!")
        else:
            sent["good"] += 1
        s.send(c, p)

    srv = FakeServer(corrupt_every_fifth)
    try:
        rc, r, err = wsload(srv.port, "-u", "/echo", "-c", "3", "-d", "1")
    finally:
        srv.stop()
    assert rc == 0, err
    assert sent["bad"] > 5
    # Up to one echo per connection may still be in flight when the time is up.
    assert sent["bad"] - 3 <= r["errors"] <= sent["bad"], (r, sent)
    assert sent["good"] - 3 <= r["round_trips"] <= sent["good"], (r, sent)
    assert "differs" in err


def test_a_wrong_accept_fails_the_handshake():
    srv = FakeServer(lambda s, c, p: s.send(c, p), good_accept=False)
    try:
        rc, r, err = wsload(srv.port, "-u", "/echo", "-c", "2", "-d", "1")
    finally:
        srv.stop()
    assert rc == 1 and r is None
    assert "Sec-WebSocket-Accept" in err
    assert "2 of 2 connections did not open" in err


def test_fanout_counts_deliveries_and_a_repeated_one_as_an_error():
    def broadcast_twice_to_the_first(s, c, p):
        for conn in s.conns:
            s.send(conn, p)
        s.send(s.conns[0], p)

    srv = FakeServer(broadcast_twice_to_the_first)
    try:
        rc, r, err = wsload(srv.port, "-u", "/room", "-m", "fanout", "-c", "50", "-n", "20")
    finally:
        srv.stop()
    assert rc == 0, err
    assert r["fanouts"] == 20 and r["deliveries"] == 50 * 20
    # Each repeat arrives either within its fan-out (twice) or in the next (stale).
    assert r["errors"] >= 19, (r, err)
    assert len(srv.messages) == 20


def test_bad_arguments_are_refused():
    for args in (["-u", "/x"], ["-p", "1"], ["-p", "1", "-u", "x"],
                 ["-p", "1", "-u", "/x", "-s", "8"], ["-p", "1", "-u", "/x", "-m", "other"]):
        p = subprocess.run([str(WSLOAD), *args], capture_output=True, text=True, timeout=10)
        assert p.returncode == 1 and "usage" in p.stderr, args


@pytest.mark.skipif(STATIC or EMULATED, reason="Duda services are shared objects built for the host")
def test_against_the_wstest_service(make_server, tmp_path):
    from test_duda import build
    from test_duda_websocket import PACKAGES, ws_server

    if not (PACKAGES / "broadcaster.dpkg").exists():
        pytest.skip("websocket packages not built")
    services = build(ROOT / "tests" / "duda" / "wstest", tmp_path / "services")
    srv = ws_server(make_server, services)
    srv.start()
    rc, r, err = wsload(srv.port, "-u", "/wstest/echo", "-c", "8", "-d", "1")
    assert rc == 0 and r["errors"] == 0 and r["round_trips"] > 100, (r, err)
    rc, r, err = wsload(srv.port, "-u", "/wstest/room", "-m", "fanout", "-c", "200", "-n", "10")
    assert rc == 0 and r["errors"] == 0, (r, err)
    assert r["fanouts"] == 10 and r["deliveries"] == 2000
