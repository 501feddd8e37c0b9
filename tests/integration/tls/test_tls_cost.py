"""What TLS costs the server per handshake and per request (plugins/tls: tls.c,
tls_session.c): one session ticket per full handshake (TicketsPerHandshake),
one socket read per keep-alive request (OpenSSL's read-ahead), and pipelined
requests that wait, not yet decrypted, in the read-ahead buffer still
answered without more input."""

import re
import socket
import ssl
import subprocess

import pytest

from conftest import SLOW
from test_tls_session import check, tls_conf
from tlsutil import TLS_MARKS, bio_connect, tls_connect, tls_server

pytestmark = TLS_MARKS


def read_responses(sock, count):
    """Read `count` responses with a Content-Length; their heads."""
    buf, heads = b"", []
    while len(heads) < count:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
            if len(rest) >= length:
                heads.append(head.decode())
                buf = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, (heads, buf)
        buf += chunk
    return heads


def tickets_of_a_full_handshake(srv):
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{srv.port}",
                        "-servername", "localhost", "-tls1_3", "-ign_eof"],
                       input="GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n"
                             "Connection: close\r\n\r\n",
                       capture_output=True, text=True, timeout=20 * SLOW)
    out = p.stdout + p.stderr
    assert "Hello World!" in out, out
    return out.count("Post-Handshake New Session Ticket arrived")


@pytest.mark.parametrize("setting,tickets", [(None, 1), (3, 3)])
def test_session_tickets_per_full_handshake(make_server, setting, tickets):
    # OpenSSL sends two TLS 1.3 tickets unless told otherwise; each costs the
    # server a session encoding and an encryption.
    srv = tls_server(make_server)
    if setting:
        tls_conf(srv, f"    TicketsPerHandshake {setting}\n")
    srv.start()
    assert tickets_of_a_full_handshake(srv) == tickets


@pytest.mark.parametrize("value", ["0", "11", "two"])
def test_tickets_per_handshake_out_of_range_is_refused_with_file_and_line(make_server, value):
    srv = tls_server(make_server)
    tls_conf(srv, f"    SessionCache 10\n    TicketsPerHandshake {value}\n")
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"plugins/tls\.conf:3: .*TicketsPerHandshake", err), err


def read_syscalls(pid):
    with open(f"/proc/{pid}/io") as f:
        return int(re.search(r"^syscr: (\d+)$", f.read(), re.M).group(1))


def test_one_socket_read_per_keepalive_request(make_server):
    # Without read-ahead OpenSSL reads a record's 5-byte header and its body
    # with two read(2) calls. Per request now: one socket read, and the
    # pread of the 13-byte file (syscr counts both).
    srv = tls_server(make_server).start()
    sock = tls_connect(srv.port, sni="localhost")
    req = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"
    sock.sendall(req)
    read_responses(sock, 1)
    n = 200
    before = read_syscalls(srv.proc.pid)
    for _ in range(n):
        sock.sendall(req)
        assert read_responses(sock, 1)[0].startswith("HTTP/1.1 200")
    per_request = (read_syscalls(srv.proc.pid) - before) / n
    sock.close()
    assert per_request < 2.2, per_request


def test_pipelined_requests_in_separate_records_are_all_answered(make_server):
    # Three requests, each in its own TLS record, in one TCP segment: one
    # read takes them all into OpenSSL's buffer, and the socket will not
    # signal the two that wait there.
    srv = tls_server(make_server).start()
    sock, obj, inc, out = bio_connect(srv.port)
    for path in ("/hello.txt", "/nothing-here", "/hello.txt"):
        obj.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    sock.sendall(out.read())

    class Reader:
        def recv(self, size):
            while True:
                try:
                    return obj.read(size)
                except ssl.SSLWantReadError:
                    data = sock.recv(65536)
                    if not data:
                        return b""
                    inc.write(data)

    heads = read_responses(Reader(), 3)
    sock.close()
    assert [h.split("\r\n")[0] for h in heads] == [
        "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 OK"]
