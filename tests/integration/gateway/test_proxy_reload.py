"""The proxy across SIGHUP reloads under load: clients on kept-alive and new
connections, over two workers, while the groups and their servers change
several times; no request fails, a download that started before a reload
ends whole after it, and a server the new configuration leaves out gets
no more requests. The upstreams are proxy_upstream.py processes started
by the test and stopped by PID."""

import hashlib
import json
import socket
import threading
import time

from conftest import SLOW
from test_proxy import pytestmark, proxy_server, upstreams  # noqa: F401

import pytest



def group(*servers, extra=""):
    return "    Upstream app\n" + "".join(f"    Server {s}\n" for s in servers) + extra


def test_reload_under_load_fails_no_request(make_server, upstreams):
    a, b, c = upstreams("a"), upstreams("b"), upstreams("c")
    srv = proxy_server(make_server, conf=group(a.addr, b.addr), site="    Pass / app\n")
    srv.set(Workers=2)
    srv.start()
    stop = threading.Event()
    results = {"ok": 0, "bad": []}
    lock = threading.Lock()

    def client(keep):
        conn = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = srv.conn(timeout=10 * SLOW)
                r = conn.request("GET", "/echo")
                name = json.loads(r.body)["name"] if r.status == 200 else None
                with lock:
                    if r.status == 200:
                        results["ok"] += 1
                    else:
                        results["bad"].append((r.status, r.body[:200]))
                if not keep or r.header("Connection") == "close":
                    conn.close()
                    conn = None
                assert name in ("a", "b", "c")
            except (OSError, EOFError) as e:
                with lock:
                    results["bad"].append(repr(e))
                conn = None
        if conn:
            conn.close()

    threads = [threading.Thread(target=client, args=(keep,)) for keep in (True, True, False)]
    for t in threads:
        t.start()
    confs = [group(b.addr, c.addr), group(a.addr, c.addr, extra="    Balance leastconn\n"),
             group(c.addr), group(a.addr, b.addr, c.addr, extra="    Balance hash client\n"),
             group(a.addr, b.addr)]
    try:
        for conf in confs:
            time.sleep(0.3 * SLOW)
            (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n" + conf)
            srv.reload()
        time.sleep(0.3 * SLOW)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert results["bad"] == []
    assert results["ok"] > 50
    assert srv.stderr_text().count("configuration reloaded") == len(confs)


def test_download_in_flight_survives_reloads(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    srv = proxy_server(make_server, conf=group(a.addr), site="    Pass / app\n").start()
    n = 20_000_000
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20 * SLOW)
    s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % n)
    data = s.recv(65536)
    # the old configuration's group goes (a is left out) while the answer is under way
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n" + group(b.addr))
    srv.reload()
    srv.reload()
    before_a = a.stats()["requests"]
    while True:
        got = s.recv(1 << 20)
        if not got:
            break
        data += got
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert b" 200 " in head.split(b"\r\n")[0]
    chunk = bytes(range(256)) * 256
    want = (chunk * (n // len(chunk) + 1))[:n]
    assert len(body) == n and hashlib.sha256(body).digest() == hashlib.sha256(want).digest()
    c = srv.conn()
    names = {json.loads(c.request("GET", "/echo").body)["name"] for _ in range(6)}
    c.close()
    assert names == {"b"}
    assert a.stats()["requests"] == before_a + 1  # the /stats alone: a gets nothing new
