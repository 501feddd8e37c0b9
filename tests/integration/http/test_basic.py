"""Tier 1: the binary, its command line, and plain GET/HEAD."""

import email.utils
import http.client
import socket
import subprocess
import time

import pytest

from conftest import (BALANCINGS, EMULATOR_THREADS, MONKEY, SLOW, Conn, check_sanitizers,
                      free_port, needs_ipv6, wait_for, wait_port)


def test_version_and_help():
    out = subprocess.run([str(MONKEY), "-v"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.startswith("Monkey HTTP Server 0.")
    out = subprocess.run([str(MONKEY), "-h"], capture_output=True, text=True)
    assert out.returncode == 0
    for opt in ("-c", "-o", "-p", "-w", "-t", "-D", "-v", "-h"):
        assert opt in out.stdout


def test_bad_usage_exits_2():
    out = subprocess.run([str(MONKEY), "--no-such-option"], capture_output=True, text=True)
    assert out.returncode == 2
    out = subprocess.run([str(MONKEY), "stray"], capture_output=True, text=True)
    assert out.returncode == 2


def test_check_config(make_server):
    srv = make_server()
    srv.write_conf()
    out = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "valid" in out.stdout
    (srv.conf / "monkey.conf").write_text("[SERVER]\n    Listen 1\n    Wrkers 2\n")
    out = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert out.returncode == 1
    assert f"{srv.conf}/monkey.conf:3:" in out.stderr
    assert "Wrkers" in out.stderr


def test_get_file(server):
    r = server.get("/hello.txt")
    assert r.status == 200
    assert r.body == b"Hello World!\n"
    assert r.header("content-length") == "13"
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert r.header("server").startswith("Monkey/")
    date = email.utils.parsedate_to_datetime(r.header("date"))
    assert abs(date.timestamp() - time.time()) < 5
    assert r.header("date").endswith(" GMT")
    assert r.header("last-modified")
    assert r.header("etag").startswith('"')
    assert r.header("accept-ranges") == "bytes"
    assert r.header("connection") is None  # HTTP/1.1 keep-alive is implicit


def test_head_has_headers_only(server):
    c = server.conn()
    r = c.request("HEAD", "/hello.txt")
    assert r.status == 200
    assert r.header("content-length") == "13"
    assert r.body == b""
    # The next response starts right away: no body bytes were sent for HEAD.
    r = c.request("GET", "/hello.txt")
    assert r.body == b"Hello World!\n"
    c.close()


def test_index_file(server):
    r = server.get("/")
    assert r.status == 200
    assert r.body == b"<h1>index</h1>\n"
    assert r.header("content-type") == "text/html; charset=utf-8"


def test_not_found_builtin_page(server):
    r = server.get("/missing.html")
    assert r.status == 404
    assert b"404 Not Found" in r.body
    assert r.header("content-type") == "text/html; charset=utf-8"


def test_site_error_page(make_server):
    srv = make_server()
    srv.file("errors/nf.html", "<p>custom not found</p>\n")
    srv.error_pages = {404: "errors/nf.html"}
    srv.start()
    r = srv.get("/nope")
    assert r.status == 404
    assert r.body == b"<p>custom not found</p>\n"
    # HEAD of a missing file: the status and headers, no body.
    c = srv.conn()
    r = c.request("HEAD", "/nope")
    assert r.status == 404 and r.body == b""
    c.close()


def test_http10_without_host(server):
    c = server.conn()
    c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
    r = c.read_response()
    assert r.status == 200 and r.body == b"Hello World!\n"
    assert r.header("connection") == "close"
    assert c.closed()


def test_python_http_client(server):
    h = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for _ in range(3):
        h.request("GET", "/hello.txt")
        r = h.getresponse()
        assert r.status == 200 and r.read() == b"Hello World!\n"
    h.close()


def test_curl(server):
    out = subprocess.run(
        ["curl", "-sS", "-f", f"http://127.0.0.1:{server.port}/hello.txt",
         f"http://127.0.0.1:{server.port}/"],
        capture_output=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"Hello World!\n<h1>index</h1>\n"


def test_serve_directory_without_config(tmp_path):
    (tmp_path / "a.txt").write_text("served by -o\n")
    port = free_port()
    log = open(tmp_path / "err.log", "w")
    p = subprocess.Popen([str(MONKEY), "-o", str(tmp_path), "-p", f"127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=log)
    try:
        assert wait_port(port, proc=p)
        c = Conn(port)
        r = c.request("GET", "/a.txt")
        assert r.status == 200 and r.body == b"served by -o\n"
        c.close()
    finally:
        p.terminate()
        assert p.wait(timeout=10 * SLOW) == 0
        log.close()
        check_sanitizers((tmp_path / "err.log").read_text())


def test_port_override(make_server):
    srv = make_server()
    srv.file("x.txt", "x")
    port = free_port()
    srv.start(args=["-p", f"127.0.0.1:{port}"], wait=False)
    assert wait_port(port, proc=srv.proc)
    r = Conn(port).request("GET", "/x.txt")
    assert r.status == 200
    # The file's Listen line was replaced, not added to.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()


def test_several_listen_lines(make_server):
    srv = make_server()
    srv.file("x.txt", "x")
    second = free_port()
    srv.set(Listen=[f"127.0.0.1:{srv.port}", f"127.0.0.1:{second}"])
    srv.start()
    assert wait_port(second)
    assert Conn(srv.port).request("GET", "/x.txt").status == 200
    assert Conn(second).request("GET", "/x.txt").status == 200

@needs_ipv6
def test_ipv6_and_dual_stack(make_server):
    srv = make_server()
    srv.file("x.txt", "x")
    v6 = free_port()
    any_port = free_port()
    srv.set(Listen=[f"127.0.0.1:{srv.port}", f"[::1]:{v6}", str(any_port)])
    srv.start()
    assert wait_port(v6, host="::1")
    assert Conn(v6, host="::1").request("GET", "/x.txt").status == 200
    # A port-only Listen takes IPv6 and IPv4 clients.
    assert wait_port(any_port, host="::1")
    assert Conn(any_port, host="::1").request("GET", "/x.txt").status == 200
    assert Conn(any_port).request("GET", "/x.txt").status == 200


@pytest.mark.parametrize("workers", ["1", "3"])
@pytest.mark.parametrize("balancing", BALANCINGS)
def test_workers_and_balancing(make_server, workers, balancing):
    srv = make_server()
    srv.file("x.txt", "x" * 1000)
    srv.set(Workers=workers, Balancing=balancing)
    srv.start()
    conns = [srv.conn() for _ in range(12)]
    for _ in range(3):
        for c in conns:
            r = c.request("GET", "/x.txt")
            assert r.status == 200 and len(r.body) == 1000
    for c in conns:
        c.close()
    # The threads exist: one per worker (plus the main thread and, for fair
    # balancing, the acceptor).
    expected = int(workers) + 1 + (1 if balancing == "fair" else 0)
    assert thread_count(srv.proc.pid, expected) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_count_in_words(make_server, workers):
    """ "1 worker", "2 workers": in the start's log line and in monkey -t."""
    srv = make_server()
    srv.set(Workers=workers)
    srv.write_conf()
    word = "worker" if workers == 1 else "workers"
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"monkey: configuration {srv.conf} is valid ({workers} {word})\n"
    srv.start()
    # Logged once the workers run, a moment after the port opened.
    assert wait_for(lambda: f"(plain), {workers} {word}, reuseport balancing" in
                    srv.stderr_text()), srv.stderr_text()


def thread_count(pid, expected, timeout=5.0):
    """The process's thread count, once it reaches `expected` (or the timeout):
    the port opens before the worker threads are started."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        threads = int([l for l in open(f"/proc/{pid}/status")
                       if l.startswith("Threads:")][0].split()[1]) - EMULATOR_THREADS
        if threads == expected or time.monotonic() > deadline:
            return threads
        time.sleep(0.02)


def test_workers_zero_means_one_per_cpu(make_server):
    """One worker per CPU the server may run on: its affinity (the pinned
    run's one CPU), the same with glibc and musl."""
    import os
    cpus = len(os.sched_getaffinity(0))
    srv = make_server()
    srv.set(Workers=0)
    srv.start()
    assert thread_count(srv.proc.pid, cpus + 1) == cpus + 1


def test_workers_option(make_server):
    srv = make_server()
    srv.file("x.txt", "x")
    srv.start(args=["-w", "3"])
    assert thread_count(srv.proc.pid, 4) == 4  # three workers and the main thread
    assert srv.get("/x.txt").status == 200


def test_tcp_fastopen(make_server):
    """With TCPFastOpen, clients that send their request with the SYN are served
    (whether the data really rides the SYN is the kernel's net.ipv4.tcp_fastopen
    setting; otherwise the handshake falls back to the usual one)."""
    srv = make_server()
    srv.file("x.txt", "fast\n")
    srv.set(TCPFastOpen="On")
    srv.start()
    req = b"GET /x.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for _ in range(3):  # the first connection fetches the cookie, later ones use it
        s = socket.socket()  # blocking: sendto() then does the whole connect
        try:
            s.sendto(req, socket.MSG_FASTOPEN, ("127.0.0.1", srv.port))
        except OSError as e:
            s.close()
            pytest.skip(f"no TCP Fast Open on this host: {e}")
        s.settimeout(5 * SLOW)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"fast\n")
