"""HTTPS bodies and certificates (plugins/tls: tls_send.c, tls_certs.c): a
small file and its head in one TLS record, large files and ranges through the
transport's sendfile byte for byte (around the 16 KiB record and 64 KiB block
sizes, and to a slow reader), the records of a body written corked, kTLS when
the kernel has it, RSA and ECDSA certificates side by side, IPv6 and plain
listeners beside TLS ones, reloads with a new (or a bad) certificate, and the
access, auth and control plugins over TLS."""

import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest

from conftest import (BUILD, MONKEY, SLOW, Strace, free_port, needs_ipv6, small_window,
                      wait_port)
from rangeutil import check_parts
from straceutil import corked_writes
from tlsutil import (TLS_MARKS, bio_connect, client_context, der_of, https, make_cert, tls_connect,
                     tls_section, tls_server)

pytestmark = TLS_MARKS

ACCESS_SO = BUILD / "plugins" / "monkey-access.so"
AUTH_SO = BUILD / "plugins" / "monkey-auth.so"
CONTROL_SO = BUILD / "plugins" / "monkey-control.so"


def read_response(sock, head_only=False):
    """Read one response with a Content-Length from a (TLS) socket: (head, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(body) < length:
        chunk = sock.recv(min(65536, length - len(body)))
        assert chunk, (head, len(body))
        body += chunk
    return head.decode(), body


def get(sock, path, extra=""):
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n".encode())
    return read_response(sock)


def wait_stderr(srv, text, count=1):
    deadline = time.monotonic() + 10 * SLOW
    while srv.stderr_text().count(text) < count:
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.02)


# ---- records: a small file and its head go together --------------------------------


def response_records(srv, path):
    """GET `path` over TLS 1.2 and count the application-data records the
    response came in (read from the wire): (records, body)."""
    sock, obj, inc, out = bio_connect(srv.port, max_version=ssl.TLSVersion.TLSv1_2)
    obj.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    sock.sendall(out.read())
    raw, plain, length = b"", b"", None
    while length is None or len(plain) < length:
        data = sock.recv(65536)
        assert data
        raw += data
        inc.write(data)
        try:
            while True:
                plain += obj.read(1 << 20)
        except ssl.SSLWantReadError:
            pass
        if length is None and b"\r\n\r\n" in plain:
            head = plain.split(b"\r\n\r\n")[0]
            cl = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
            length = len(head) + 4 + cl
    sock.close()
    records, i = [], 0
    while i + 5 <= len(raw):
        records.append(raw[i])
        i += 5 + int.from_bytes(raw[i + 3:i + 5], "big")
    assert i == len(raw)
    return records.count(23), plain.split(b"\r\n\r\n", 1)[1]


@pytest.mark.parametrize("size", [10000, 40000])
def test_head_and_small_file_share_records(make_server, size):
    # 10000 bytes and a head: one record (two before: the head, then the body).
    # 40000 bytes: three full-size records, not the head on its own and three more.
    data = os.urandom(size)
    srv = tls_server(make_server)
    srv.file("f.bin", data)
    srv.start()
    records, body = response_records(srv, "/f.bin")
    assert body == data
    assert records == -(-(size + 300) // 16384)


# ---- large files and ranges through sendfile ------------------------------------

SIZES = [1, 16383, 16384, 16385, 65535, 65536, 65537, 3 * 65536 + 7, (1 << 20) + 1]


def test_sizes_around_records_and_blocks_byte_for_byte(make_server):
    srv = tls_server(make_server)
    files = {n: os.urandom(n) for n in SIZES}
    for n, data in files.items():
        srv.file(f"f{n}.bin", data)
    srv.start()
    sock = tls_connect(srv.port, sni="localhost")
    for n, data in files.items():  # one connection: state carries over between bodies
        head, body = get(sock, f"/f{n}.bin")
        assert head.startswith("HTTP/1.1 200"), head
        assert body == data, n
    sock.close()


RANGES = [(0, 0), (16383, 16384), (16380, 65540), (65535, 65537), (1, 3 * 65536 + 5),
          (65536, 190000), (196600, 196614)]


def test_ranges_across_boundaries_byte_for_byte(make_server):
    data = os.urandom(3 * 65536 + 7)
    srv = tls_server(make_server)
    srv.file("r.bin", data)
    srv.start()
    sock = tls_connect(srv.port, sni="localhost")
    for first, last in RANGES:
        head, body = get(sock, "/r.bin", f"Range: bytes={first}-{last}\r\n")
        assert head.startswith("HTTP/1.1 206"), head
        assert f"Content-Range: bytes {first}-{last}/{len(data)}" in head
        assert body == data[first:last + 1], (first, last)
    sock.close()


@pytest.mark.parametrize("ktls", ["auto", "off"])
def test_several_ranges_byte_for_byte(make_server, ktls):
    # A multipart body over TLS: each part head written with MK_IO_MORE
    # (held for the part's first block), the parts through the transport's
    # sendfile, across the record and block sizes; then the same to a slow
    # reader, whose writes meet a full socket and are repeated.
    data = os.urandom(3 * 65536 + 7)
    srv = tls_server(make_server)
    srv.site_extra += f"    KTLS {ktls}\n"
    srv.file("r.bin", data)
    big = os.urandom(6 << 20)
    srv.file("big.bin", big)
    srv.start()
    sets = [RANGES[:2] + [(20000, 20000)], [(0, 99), (16380, 65540), (65541, 65541)],
            [(1, 3), (65535, 65537), (196600, 196614)], [(16383, 16384), (65536, 190000)]]
    sock = tls_connect(srv.port, sni="localhost")
    for ranges in sets:
        spec = ",".join(f"{a}-{b}" for a, b in ranges)
        head, body = get(sock, "/r.bin", f"Range: bytes={spec}\r\n")
        assert head.startswith("HTTP/1.1 206"), head
        ctype = re.search(r"(?i)\r\ncontent-type: ([^\r]*)", head).group(1)
        check_parts(ctype, body, data, ranges, "application/octet-stream")
    sock.close()
    raw = small_window(srv.port, 8192, timeout=10)
    sock = client_context().wrap_socket(raw, server_hostname="localhost")
    ranges = [(0, 99), (1000, 2 << 20), ((2 << 20) + 2, (2 << 20) + 2), (3 << 20, (6 << 20) - 1)]
    spec = ",".join(f"{a}-{b}" for a, b in ranges)
    sock.sendall(f"GET /big.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes={spec}\r\n\r\n"
                 .encode())
    time.sleep(0.2 * SLOW)  # the socket fills
    head, body = read_response(sock)
    ctype = re.search(r"(?i)\r\ncontent-type: ([^\r]*)", head).group(1)
    check_parts(ctype, body, big, ranges, "application/octet-stream")
    head, body = get(sock, "/hello.txt")
    assert body == b"Hello World!\n"
    sock.close()


def test_slow_reader_gets_every_byte(make_server):
    # A small receive window and a reader that pauses: the server's writes
    # meet a full socket and are repeated (OpenSSL's WANT_WRITE) many times.
    data = os.urandom(6 << 20)
    srv = tls_server(make_server)
    srv.file("big.bin", data)
    srv.start()
    raw = small_window(srv.port, 8192, timeout=10)
    sock = client_context().wrap_socket(raw, server_hostname="localhost")
    sock.sendall(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(4096)
    head, _, body = buf.partition(b"\r\n\r\n")
    reads = 0
    while len(body) < len(data):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
        reads += 1
        if reads % 8 == 0 and len(body) < (2 << 20):
            time.sleep(0.005)
    assert body == data
    # The connection is still good for another request.
    head, body = get(sock, "/hello.txt")
    assert body == b"Hello World!\n"
    sock.close()


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_file_records_are_written_corked_and_uncorked_before_waiting(make_server, tmp_path):
    # OpenSSL encrypts each 16 KiB record on its own; the batching BIO sends
    # the four records of a 64 KiB block with one write(2) (65 writes for
    # 1 MiB before, one a record), and the writes of a turn go out corked
    # (TCP_CORK) so that they leave in full TCP segments. The cork must be
    # off whenever the worker waits (the kernel holds a partial segment up
    # to 200 ms); a body of one record is not corked.
    data = os.urandom(1 << 20)
    srv = tls_server(make_server)
    srv.site_extra += "    KTLS off\n"  # kTLS sends the file itself: one sendfile
    srv.file("big.bin", data)
    srv.file("small.bin", data[:10000])
    srv.start()
    sock = tls_connect(srv.port, sni="localhost")
    assert get(sock, "/hello.txt")[1] == b"Hello World!\n"
    for path, body, corked in (("/small.bin", data[:10000], False), ("/big.bin", data, True)):
        tracer = Strace(srv.proc.pid, ["setsockopt", "epoll_wait", "epoll_pwait", "write",
                                       "writev", "sendmsg", "sendto", "sendfile"],
                        tmp_path / "cork.out")
        try:
            got = get(sock, path)[1]
        finally:
            lines = tracer.stop()
        assert got == body
        inside, outside, waits = corked_writes(lines)
        assert waits == 0
        if corked:
            # 64 records in blocks of four, one write(2) a block
            assert 16 <= inside <= 18 and outside <= 1, (inside, outside)
            sizes = [int(m.group(1)) for m in
                     (re.search(r"^\d+\s+write\(\d+, .*\) = (\d+)$", line) for line in lines)
                     if m]
            assert sum(n >= 4 * 16384 for n in sizes) >= 15, sizes
        else:
            assert (inside, outside) == (0, 0), lines
    sock.close()


def tls_stat():
    """/proc/net/tls_stat as a dict (the kernel's kTLS counters)."""
    with open("/proc/net/tls_stat") as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def has_ktls():
    try:
        with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
            return "tls" in f.read().split()
    except OSError:
        return False


@pytest.mark.skipif(not has_ktls(), reason="the kernel has no tls ULP (kTLS): "
                    "/proc/sys/net/ipv4/tcp_available_ulp lacks 'tls'")
def test_ktls_sends_files_through_the_kernel(make_server):
    data = os.urandom(3 << 20)
    srv = tls_server(make_server)
    srv.file("big.bin", data)
    srv.start()
    before = tls_stat()
    status, _, body = https(srv, "/big.bin")
    assert status == 200 and body == data
    after = tls_stat()
    opened = sum(after.get(k, 0) - before.get(k, 0) for k in ("TlsTxSw", "TlsTxDevice"))
    assert opened >= 1, (before, after)
    # KTLS off: the same bytes, without the kernel.
    srv.stop()
    srv.site_extra += "    KTLS off\n"
    srv.start()
    before = tls_stat()
    assert https(srv, "/big.bin")[2] == data
    after = tls_stat()
    assert all(after.get(k, 0) == before.get(k, 0) for k in ("TlsTxSw", "TlsTxDevice"))


# ---- RSA and ECDSA side by side ----------------------------------------------------


def two_cert_server(make_server):
    srv = tls_server(make_server)
    certs = srv.dir / "certs"
    srv.certs["rsa"] = make_cert(certs, "rsa-localhost", key_type="rsa")
    ec, rsa = srv.certs["localhost"], srv.certs["rsa"]
    srv.site_extra = (f"[TLS]\n    Certificate {rsa[0]}\n    CertificateKey {rsa[1]}\n"
                      f"    Certificate {ec[0]}\n    CertificateKey {ec[1]}\n")
    return srv


def peer_cert_with_ciphers(srv, ciphers):
    ctx = client_context()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as sock:
            return sock.getpeercert(binary_form=True)


def test_rsa_and_ecdsa_certificates_side_by_side(make_server):
    srv = two_cert_server(make_server)
    srv.start()
    assert peer_cert_with_ciphers(srv, "ECDHE-ECDSA-AES128-GCM-SHA256") == \
        der_of(srv.certs["localhost"][0])
    assert peer_cert_with_ciphers(srv, "ECDHE-RSA-AES128-GCM-SHA256") == \
        der_of(srv.certs["rsa"][0])
    assert https(srv, "/hello.txt")[2] == b"Hello World!\n"


def check(srv):
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=20 * SLOW)
    return p.returncode, p.stderr


def test_two_certificates_of_one_type_are_refused(make_server):
    srv = tls_server(make_server)
    other = make_cert(srv.dir / "certs", "other")  # ECDSA like localhost's
    ec = srv.certs["localhost"]
    srv.site_extra = (f"[TLS]\n    Certificate {ec[0]}\n    CertificateKey {ec[1]}\n"
                      f"    Certificate {other[0]}\n    CertificateKey {other[1]}\n")
    rc, err = check(srv)
    assert rc == 1
    # [HOST] 3 lines, [TLS], then the second pair ends on line 8.
    assert re.search(r"sites/default:8: CertificateKey: .*other\.key: a second ECDSA certificate "
                     r"\(after Certificate .*localhost\.crt\)", err), err


def test_second_pair_that_does_not_match_is_refused(make_server):
    srv = two_cert_server(make_server)
    ec, rsa = srv.certs["localhost"], srv.certs["rsa"]
    srv.site_extra = (f"[TLS]\n    Certificate {ec[0]}\n    CertificateKey {ec[1]}\n"
                      f"    Certificate {rsa[0]}\n    CertificateKey {ec[1]}\n")
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:8: CertificateKey: .*localhost\.key does not match "
                     r"Certificate .*rsa-localhost\.crt", err), err


def test_third_certificate_and_missing_second_key_are_refused(make_server):
    srv = two_cert_server(make_server)
    ec = srv.certs["localhost"]
    srv.site_extra += f"    Certificate {ec[0]}\n"
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:9: Certificate: at most 2 certificates", err), err
    srv = two_cert_server(make_server)
    srv.site_extra = srv.site_extra.rsplit("    CertificateKey", 1)[0]
    rc, err = check(srv)
    assert rc == 1
    assert re.search(r"sites/default:5: Certificate without a CertificateKey "
                     r"\(.*localhost\.crt\)", err), err


# ---- listeners -------------------------------------------------------------------

@needs_ipv6
def test_ipv6_tls_listener(make_server):
    srv = tls_server(make_server)
    srv.set(Listen=f"[::1]:{srv.port} tls")
    srv.start(wait=False)
    assert wait_port(srv.port, host="::1", proc=srv.proc)
    raw = socket.create_connection(("::1", srv.port), timeout=5 * SLOW)
    sock = client_context().wrap_socket(raw, server_hostname="localhost")
    head, body = get(sock, "/hello.txt")
    assert head.startswith("HTTP/1.1 200") and body == b"Hello World!\n"
    assert sock.getpeercert(binary_form=True) == der_of(srv.certs["localhost"][0])
    sock.close()


def test_plain_and_tls_listeners_side_by_side(make_server):
    srv = tls_server(make_server)
    plain = srv.port
    srv.port = tls_port = free_port()
    srv.set(Listen=[f"127.0.0.1:{plain}", f"127.0.0.1:{tls_port} tls"])
    data = os.urandom(100000)
    srv.file("d.bin", data)
    srv.start()
    assert wait_port(plain, proc=srv.proc)
    with socket.create_connection(("127.0.0.1", plain), timeout=5 * SLOW) as s:
        head, body = get(s, "/d.bin")
        assert head.startswith("HTTP/1.1 200") and body == data
    sock = tls_connect(tls_port, sni="localhost")
    head, body = get(sock, "/d.bin")
    assert head.startswith("HTTP/1.1 200") and body == data
    sock.close()


# ---- reloads ---------------------------------------------------------------------


def test_reload_with_a_new_certificate_during_a_download(make_server):
    data = os.urandom(24 << 20)
    srv = tls_server(make_server)
    srv.file("big.bin", data)
    old = srv.certs["localhost"]
    new = make_cert(srv.dir / "certs-new", "localhost")
    srv.start()
    raw = small_window(srv.port, 65536, timeout=10)
    sock = client_context().wrap_socket(raw, server_hostname="localhost")
    sock.sendall(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
    first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    srv.site_extra = tls_section(*new)
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    wait_stderr(srv, "configuration reloaded")
    assert https(srv, "/hello.txt")[2] == b"Hello World!\n"
    with tls_connect(srv.port, sni="localhost") as fresh:
        assert fresh.getpeercert(binary_form=True) == der_of(new[0])
    buf = first
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    while len(body) < len(data):
        chunk = sock.recv(1 << 20)
        assert chunk
        body += chunk
    assert body == data
    assert sock.getpeercert(binary_form=True) == der_of(old[0])
    sock.close()


def test_reload_with_a_bad_key_keeps_the_running_certificate(make_server):
    srv = tls_server(make_server)
    old = srv.certs["localhost"]
    new_crt, _ = make_cert(srv.dir / "certs-new", "localhost")
    bad = srv.dir / "bad.key"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    srv.start()
    srv.site_extra = tls_section(new_crt, bad)
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    wait_stderr(srv, "reload failed")
    assert re.search(r"reload failed, the running configuration stays: .*sites/default:6: "
                     r"CertificateKey: .*bad\.key: not a PEM private key", srv.stderr_text())
    with tls_connect(srv.port, sni="localhost") as sock:
        assert sock.getpeercert(binary_form=True) == der_of(old[0])
    assert https(srv, "/hello.txt")[2] == b"Hello World!\n"


# ---- other plugins over TLS ------------------------------------------------------


def test_access_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(ACCESS_SO)])
    srv.file("admin/x.txt", "admin x\n")
    srv.site_extra += "[ACCESS]\n    Deny all path /admin\n"
    srv.start()
    assert https(srv, "/admin/x.txt")[0] == 403
    assert https(srv, "/hello.txt")[::2] == (200, b"Hello World!\n")


def test_auth_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(AUTH_SO)])
    srv.file("private/a.txt", "secret A\n")
    hashed = subprocess.run(["openssl", "passwd", "-6", "-salt", "saltsalt", "wonderland"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (srv.conf / "users").write_text(f"alice:{hashed}\n")
    srv.site_extra += "[AUTH]\n    Location /private\n    Realm Private\n    Users users\n"
    srv.start()
    status, headers, _ = https(srv, "/private/a.txt")
    assert status == 401 and headers["www-authenticate"].startswith('Basic realm="Private"')
    good = "Basic " + base64.b64encode(b"alice:wonderland").decode()
    assert https(srv, "/private/a.txt", headers={"Authorization": good})[::2] == \
        (200, b"secret A\n")


def test_control_status_over_tls(make_server):
    srv = tls_server(make_server, plugins=[str(CONTROL_SO)])
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "control.conf").write_text(
        "[CONTROL]\n    Socket ctl.sock\n    HttpPath /server-status\n")
    srv.start()
    assert https(srv, "/hello.txt")[0] == 200
    status, headers, body = https(srv, "/server-status")
    assert status == 200 and headers["content-type"].startswith("application/json")
    doc = json.loads(body)
    # The request before and this one, on its open TLS connection.
    assert doc["requests"] >= 1 and doc["connections"] >= 1, doc
