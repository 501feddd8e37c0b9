"""The reverse proxy's memory under large bodies: a download and an upload
of 1 GiB (256 MiB on an emulated target, whose throughput is a fraction; a
few seconds each here, the ASan build's included) stream through the proxy
from and to the real upstream, the client a generator that holds no more
than a piece, and the monkey process's peak resident memory (VmHWM) grows
by a bound that has nothing to do with the size: checked on the plain build
only, as ASan's quarantine keeps what is freed (plugins/proxy/README.md,
"What comes back" and "What goes to the upstream")."""

import socket
import time
import zlib

from conftest import EMULATED, SANITIZED, SLOW
from test_proxy import proxy_server, pytestmark, upstreams  # noqa: F401

SIZE = (256 if EMULATED else 1024) << 20
PIECE = 1 << 20
# what the process may grow by, whatever SIZE: its buffers (the job's window
# and spill, the proxy's 32 KiB read buffer, the client's queue) and the
# allocator's slack. ASan's quarantine keeps freed memory (the response's
# pieces: up to its 256 MiB), so only the plain build's peak tells.
BOUND_KB = 16 * 1024
PATTERN = bytes(range(256)) * 256  # what the upstream's /big repeats


def vm_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as st:
        for line in st:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def warm(srv):
    """One small answer each way first: the worker's buffers and pools exist."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"POST /sink HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
              b"GET /big?n=100000 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    while s.recv(1 << 16):
        pass
    s.close()


def expected_crc(n):
    crc = 0
    for _ in range(n // len(PATTERN)):
        crc = zlib.crc32(PATTERN, crc)
    return zlib.crc32(PATTERN[:n % len(PATTERN)], crc)


def test_download_streams_in_bounded_memory(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    warm(srv)
    hwm0 = vm_hwm_kb(srv.proc.pid)
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30 * SLOW)
    s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % SIZE)
    head = b""
    while b"\r\n\r\n" not in head:
        got = s.recv(65536)
        assert got, head
        head += got
    head, rest = head.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: %d\r\n" % SIZE in head
    n, crc = len(rest), zlib.crc32(rest)
    buf = bytearray(PIECE)
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        n += k
        crc = zlib.crc32(memoryview(buf)[:k], crc)
    s.close()
    took = time.monotonic() - t0
    hwm = vm_hwm_kb(srv.proc.pid)
    print(f"{SIZE >> 20} MiB down in {took:.1f} s; VmHWM {hwm0} -> {hwm} KiB")
    assert n == SIZE and crc == expected_crc(SIZE)
    if not SANITIZED:
        assert hwm - hwm0 < BOUND_KB, (hwm0, hwm)


def test_upload_streams_in_bounded_memory(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n")
    srv.set(MaxRequestBody="2G")
    srv.start()
    warm(srv)
    hwm0 = vm_hwm_kb(srv.proc.pid)
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30 * SLOW)
    s.sendall(b"PUT /sink HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % SIZE)
    piece = (PATTERN * (PIECE // len(PATTERN)))[:PIECE]
    crc = 0

    def body():  # a generator: one piece in memory at a time
        for _ in range(SIZE // PIECE):
            yield piece

    for p in body():
        s.sendall(p)
        crc = zlib.crc32(p, crc)
    answer = b""
    while True:
        got = s.recv(65536)
        if not got:
            break
        answer += got
    s.close()
    took = time.monotonic() - t0
    hwm = vm_hwm_kb(srv.proc.pid)
    print(f"{SIZE >> 20} MiB up in {took:.1f} s; VmHWM {hwm0} -> {hwm} KiB")
    head, got = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
    assert got == b"%d %08x" % (SIZE, crc)
    if not SANITIZED:
        assert hwm - hwm0 < BOUND_KB, (hwm0, hwm)
