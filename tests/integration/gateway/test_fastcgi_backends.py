"""The FastCGI plugin's backends: several per site (round-robin, a backend
down skipped and taken back after DownTime, a connection refused late moving
on to the next backend, and so does a kept-alive connection to a backend
stopped since, which cannot be renewed), HOST:PORT backends (php-fpm on
loopback TCP), the protocol status of END_REQUEST and backends that break
the protocol, and `monkey -t` with backends that are not up. The backends
are php-fpm and fcgi_responder.py, started by each test on temporary sockets
or ports and stopped by their PIDs."""

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import MONKEY, SLOW, free_port, needs_dlopen, wait_for, wait_port
from gwutil import CgiConn, env_of, figures
from test_fastcgi import PHP_FPM, PhpFpm, bad_gateway_on, make_php_server, status_doc

RESPONDER = Path(__file__).parent / "fcgi_responder.py"

pytestmark = [
    needs_dlopen,
    pytest.mark.skipif(PHP_FPM is None, reason="php-fpm is not installed (tools/deps.sh test)"),
]


class Responder:
    """fcgi_responder.py on a unix socket path or a HOST:PORT."""

    def __init__(self, address, name="", flags=()):
        self.address = str(address)
        args = [sys.executable, str(RESPONDER), self.address] + (["--name", name] if name else [])
        args += list(flags)
        self.proc = subprocess.Popen(args, start_new_session=True)
        if self.address.startswith("/"):
            up = wait_for(Path(self.address).exists, 10)
        else:
            host, port = self.address.rsplit(":", 1)
            up = wait_port(int(port), host, proc=self.proc)
        if not up:
            self.stop()
            raise RuntimeError(f"the responder did not start on {self.address}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def responders():
    started = []

    def start(address, name="", flags=()):
        r = Responder(address, name, flags)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def backends_server(make_server, backends, conf="", control=True):
    """A php site whose [FASTCGI] section names `backends` (in that order)."""
    srv = make_php_server(make_server, "unused", conf=conf, control=control)
    srv.site_extra = "[FASTCGI]\n" + "".join(f"    Backend {b}\n" for b in backends) + \
        "    Match \\.php$\n"
    srv.error_pages["503"] = "/50x.html"
    return srv


def names(conn, n, path="/env.php"):
    """The responders' names of n requests on conn, in order."""
    out = []
    for _ in range(n):
        r = conn.request("GET", path)
        assert r.status == 200, r
        out.append(r.body.split(b" ", 1)[0].decode())
    return out


def each_backend_failed_once(srv):
    """Both backends of srv failed once and are down; one 502 was answered."""
    st = status_doc(srv)
    figures(st, backend0_failures=1, backend1_failures=1)
    assert st["backend0_up"] == 0 and st["backend1_up"] == 0
    assert st["bad_gateway"] == 1


def test_round_robin_over_two_backends(make_server, responders, tmp_path):
    responders(tmp_path / "a.sock", "A")
    responders(tmp_path / "b.sock", "B")
    srv = backends_server(make_server, [f"unix:{tmp_path}/a.sock", f"unix:{tmp_path}/b.sock"])
    srv.start()
    c = CgiConn(srv.port)
    got = names(c, 6)
    c.close()
    # one worker: each request goes to the next backend in turn
    assert got == ["A", "B"] * 3
    st = status_doc(srv)
    figures(st, backend0_requests=3, backend1_requests=3)
    assert st["backend0_up"] == 1 and st["backend1_up"] == 1
    # each kept one connection alive for the next request
    assert st["backend0_active"] == 1 and st["backend1_active"] == 1


def test_down_backend_is_skipped_then_taken_back(make_server, responders, tmp_path):
    responders(tmp_path / "a.sock", "A")
    b = responders(tmp_path / "b.sock", "B")
    srv = backends_server(make_server, [f"unix:{tmp_path}/a.sock", f"unix:{tmp_path}/b.sock"],
                          conf="    DownTime 3\n")
    srv.start()
    c = CgiConn(srv.port)
    assert names(c, 2) == ["A", "B"]
    b.stop()
    # the server drops its idle connection to B when B closes it
    assert wait_for(lambda: status_doc(srv)["backend1_active"] == 0)
    t0 = time.monotonic()
    # B refuses (its socket file is there, nobody listens): marked down once,
    # then skipped; every request is answered by A
    assert names(c, 6) == ["A"] * 6
    st = status_doc(srv)
    if time.monotonic() - t0 < 2.5:  # still within DownTime
        assert st["backend1_up"] == 0
        figures(st, backend1_failures=1)  # a backend marked down is not tried again
    assert st["backend0_up"] == 1 and st["bad_gateway"] == 0
    # B comes back: after DownTime it is healthy again and takes its turn
    responders(tmp_path / "b.sock", "B")
    assert wait_for(lambda: status_doc(srv)["backend1_up"] == 1, 6)
    got = names(c, 4)
    assert sorted(got) == ["A", "A", "B", "B"], got
    c.close()


def test_refused_tcp_connect_moves_to_the_next_backend(make_server, responders, tmp_path):
    # a HOST:PORT backend that nobody listens on fails its connect() only
    # later (EINPROGRESS, then ECONNREFUSED): the request goes on to the next
    # backend, as when a connect is refused at once, instead of a 502
    dead = free_port()
    responders(tmp_path / "a.sock", "A")
    srv = backends_server(make_server, [f"127.0.0.1:{dead}", f"unix:{tmp_path}/a.sock"],
                          conf="    DownTime 30\n")
    srv.start()
    c = CgiConn(srv.port)
    for _ in range(4):
        r = c.request("POST", "/form.php", body=b"moved")
        assert r.status == 200, r
        assert r.body.startswith(b"A ") and r.body.endswith(b"stdin=moved")
    c.close()
    st = status_doc(srv)
    assert st["backend0_up"] == 0 and st["bad_gateway"] == 0
    figures(st, backend0_failures=1, backend1_requests=4)
    assert f"127.0.0.1:{dead}" in srv.stderr_text()


def test_kept_connection_to_a_stopped_backend_moves_to_the_next(make_server, responders,
                                                              tmp_path):
    # A answers once and stops between two requests: its listening socket
    # closed (a new connect is refused at once), its kept-alive connection
    # closed only when the next request arrives on it. That request cannot
    # be sent again to A, so it goes to B, its body with it, instead of a 502
    responders(tmp_path / "a.sock", "A", ["--last"])
    responders(tmp_path / "b.sock", "B")
    srv = backends_server(make_server, [f"unix:{tmp_path}/a.sock", f"unix:{tmp_path}/b.sock"],
                          conf="    DownTime 30\n")
    srv.start()
    c = CgiConn(srv.port)
    assert names(c, 2) == ["A", "B"]  # one worker: A's turn comes next
    r = c.request("POST", "/form.php", body=b"moved")
    assert r.status == 200, r
    assert r.body == b"B conn 1 req 2 stdin=moved"
    assert names(c, 2) == ["B", "B"]  # A is down now
    c.close()
    st = status_doc(srv)
    assert st["backend0_up"] == 0 and st["bad_gateway"] == 0
    figures(st, backend0_failures=1, backend1_requests=4)
    assert "a.sock" in srv.stderr_text()


def test_queued_request_moves_on_when_its_backend_dies(make_server, responders, tmp_path):
    # MaxConnections 1: A and B each hold a request, so a third one waits in
    # A's queue. B answers (its connection is idle again), then A stops
    # listening and exits: its request gets 502, and the queued one, handed
    # a new connection to A that is refused at once, goes on to B (each
    # backend once per request) instead of a 502 of its own
    responders(tmp_path / "a.sock", "A")
    responders(tmp_path / "b.sock", "B")
    srv = backends_server(make_server, [f"unix:{tmp_path}/a.sock", f"unix:{tmp_path}/b.sock"],
                          conf="    MaxConnections 1\n    QueueTimeout 60\n    DownTime 30\n")
    srv.start()
    die, go = tmp_path / "die", tmp_path / "go"
    results = {}

    def ask(key, path, body=b""):
        c = CgiConn(srv.port, timeout=60)
        try:
            results[key] = c.request("POST" if body else "GET", path, body=body)
        finally:
            c.close()

    threads = [threading.Thread(target=ask, args=("a", f"/env.php?mode=die&until={die}"))]
    threads[0].start()
    assert wait_for(lambda: status_doc(srv)["backend0_active"] == 1)
    threads.append(threading.Thread(target=ask, args=("b", f"/env.php?mode=hold&until={go}")))
    threads[1].start()
    assert wait_for(lambda: status_doc(srv)["backend1_active"] == 1)
    threads.append(threading.Thread(target=ask, args=("q", "/form.php", b"queued")))
    threads[2].start()
    assert wait_for(lambda: status_doc(srv)["backend0_queued"] == 1)
    go.touch()
    threads[1].join(30 * SLOW)
    assert results["b"].status == 200 and results["b"].body.startswith(b"B ")
    die.touch()
    for t in threads:
        t.join(30 * SLOW)
    assert results["a"].status == 502
    assert results["q"].status == 200, results["q"]
    assert results["q"].body == b"B conn 1 req 2 stdin=queued"
    st = status_doc(srv)
    assert st["backend0_up"] == 0 and st["backend0_queued"] == 0
    assert st["bad_gateway"] == 1
    figures(st, backend1_requests=2)


def test_every_backend_stopped_behind_kept_connections_is_502(make_server, responders,
                                                             tmp_path):
    # both backends stop after one answer: the request tries A's kept
    # connection, then B's, each once, and gets the site's 502 page
    responders(tmp_path / "a.sock", "A", ["--last"])
    responders(tmp_path / "b.sock", "B", ["--last"])
    srv = backends_server(make_server, [f"unix:{tmp_path}/a.sock", f"unix:{tmp_path}/b.sock"],
                          conf="    DownTime 30\n")
    srv.start()
    c = CgiConn(srv.port)
    assert names(c, 2) == ["A", "B"]
    bad_gateway_on(c)
    c.close()
    each_backend_failed_once(srv)


def test_every_backend_refusing_late_is_502_each_tried_once(make_server, tmp_path):
    dead = [free_port(), free_port()]
    srv = backends_server(make_server, [f"127.0.0.1:{p}" for p in dead])
    srv.start()
    c = CgiConn(srv.port)
    bad_gateway_on(c)
    c.close()
    each_backend_failed_once(srv)


def test_php_fpm_on_a_tcp_port(make_server, tmp_path):
    port = free_port()
    fpm = PhpFpm(tmp_path / "fpm", listen=f"127.0.0.1:{port}")
    try:
        srv = backends_server(make_server, [f"127.0.0.1:{port}"])
        srv.start()
        c = CgiConn(srv.port, timeout=30)
        for _ in range(10):
            r = c.request("GET", "/env.php/x?q=1")
            assert r.status == 200
            e = env_of(r.body)
            assert e["SCRIPT_NAME"] == "/env.php" and e["PATH_INFO"] == "/x"
            assert e["QUERY_STRING"] == "q=1"
        r = c.request("POST", "/form.php", body=b"name=tcp&n=2",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.body == b"name=tcp n=2 m=POST\n"
        c.close()
        st = status_doc(srv)
        assert st["backend0_up"] == 1
        figures(st, backend0_requests=11)
        assert st["backend0_active"] == 1  # one kept-alive TCP connection served them all
    finally:
        fpm.stop()


@pytest.mark.parametrize("mode,status", [
    ("overloaded", 503),
    ("cant-mpx", 502),
    ("unknown-role", 502),
])
def test_end_request_protocol_status(make_server, responders, tmp_path, mode, status):
    responders(tmp_path / "r.sock")
    srv = backends_server(make_server, [f"unix:{tmp_path}/r.sock"])
    srv.start()
    c = CgiConn(srv.port)
    r = c.request("GET", f"/env.php?mode={mode}")
    assert r.status == status and r.body == b"site error page\n"
    if status == 503:
        # the server ends a connection after any 503 (overloaded: the client should back off)
        assert r.header("Connection") == "close"
        c.close()
        c = CgiConn(srv.port)
    # the client's connection goes on after a 502, and the backend on a new connection
    r = c.request("GET", "/env.php")
    assert r.status == 200 and r.body == b"conn 2 req 1 stdin="
    c.close()
    assert "the backend refused the request" in srv.stderr_text()


@pytest.mark.parametrize("mode", ["garbage", "version", "other-id", "bad-end"])
def test_protocol_breaks_are_502(make_server, responders, tmp_path, mode):
    # the backend keeps its connection open after the bad bytes: the server
    # must see the break at once, not wait for Timeout
    responders(tmp_path / "r.sock")
    srv = backends_server(make_server, [f"unix:{tmp_path}/r.sock"], conf="    Timeout 20\n")
    srv.start()
    c = CgiConn(srv.port, timeout=30)
    t0 = time.monotonic()
    r = c.request("GET", f"/env.php?mode={mode}")
    assert r.status == 502 and r.body == b"site error page\n"
    assert time.monotonic() - t0 < 5 * SLOW
    r = c.request("GET", "/env.php")
    assert r.status == 200 and r.body == b"conn 2 req 1 stdin="
    c.close()
    st = status_doc(srv)
    assert st["bad_gateway"] == 1 and st["timeouts"] == 0
    assert "broke the protocol" in srv.stderr_text()


def test_config_check_passes_with_backends_down(make_server, tmp_path):
    # `monkey -t` checks a backend's form, not that it is up
    srv = backends_server(make_server, [f"127.0.0.1:{free_port()}", "[::1]:9",
                                        f"unix:{tmp_path}/nobody.sock", "localhost:9000"])
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    assert "fastcgi" not in p.stderr.lower()


# ---- the connection limit: what the backend takes, all workers together ----------------


def hammer(srv, paths, clients, rounds):
    """`clients` threads, each sending `rounds` requests of `paths` in turn on
    a connection of its own; the statuses, in no order."""
    statuses, lock = [], threading.Lock()

    def client(i):
        c = CgiConn(srv.port, timeout=60)
        try:
            for k in range(rounds):
                r = c.request("GET", paths[(i + k) % len(paths)])
                with lock:
                    statuses.append(r.status)
        finally:
            c.close()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * SLOW)
    return statuses


def test_php_fpm_with_two_children_and_the_defaults(make_server, tmp_path):
    # php-fpm ties a child to each connection for as long as it lasts, so
    # with pm = static and 2 children, a third connection is completed by the
    # kernel but never read while the two are kept alive: with the old
    # defaults (8 kept-alive connections per worker) its requests waited for
    # Timeout and got 504 from a healthy php-fpm. Now every new connection
    # first asks FCGI_GET_VALUES (answered once a child took it), the pool
    # learns that php-fpm answers (FCGI_MPXS_CONNS 0, no FCGI_MAX_CONNS) and,
    # from the connections it did not take within AcceptTimeout, that it
    # takes 2: every request is 200, none waited for Timeout, and no more than
    # 2 connections are open, both workers together.
    fpm = PhpFpm(tmp_path / "fpm", children=2)
    try:
        srv = make_php_server(make_server, fpm.sock, conf="    Timeout 5\n", control=True)
        srv.set(Workers=2, Balancing="fair")
        srv.start()
        t0 = time.monotonic()
        statuses = hammer(srv, ["/slow.php?s=0.2", "/env.php", "/slow.php?s=0.05"], clients=12,
                          rounds=6)
        assert statuses == [200] * 72, sorted(set(statuses))
        assert time.monotonic() - t0 < 20 * SLOW
        # the limit learned is 2; on a slow run it may already have grown back to
        # 3 (one more is tried at most every 10 s while requests queue, for a
        # php-fpm that starts more children), which the next refusal lowers again
        assert wait_for(lambda: status_doc(srv)["backend0_limit"] in (2, 3), 10 * SLOW), \
            status_doc(srv)
        assert status_doc(srv)["backend0_not_accepted"] >= 1
        assert hammer(srv, ["/env.php", "/slow.php?s=0.02"], clients=8, rounds=4) == [200] * 32
        st = status_doc(srv)
        assert st["timeouts"] == 0 and st["bad_gateway"] == 0 and st["queue_timeouts"] == 0, st
        assert st["backend0_get_values"] == 1 and st["backend0_max_conns"] == 0, st
        assert st["backend0_not_accepted"] >= 1 and st["backend0_active"] <= 2, st
        log = srv.stderr_text()
        assert re.search(r"\[info\] fastcgi: backend unix:\S+fpm\.sock: FCGI_GET_VALUES: "
                         r"FCGI_MAX_CONNS -, FCGI_MAX_REQS -, FCGI_MPXS_CONNS 0: at most 32 "
                         r"connections", log), log
        assert re.search(r"\[warn\] fastcgi: backend unix:\S+fpm\.sock did not take a new "
                         r"connection within AcceptTimeout .*: at most 2 from now on", log), log
        assert srv.stop() == 0
    finally:
        fpm.stop()


def test_the_limit_the_backend_gives(make_server, responders, tmp_path):
    # A backend that says FCGI_MAX_CONNS 3: at most 3 connections, all workers
    # together; the other requests wait in the queue and are served in turn.
    responders(tmp_path / "r.sock", flags=("--max-conns", "3"))
    srv = backends_server(make_server, [f"unix:{tmp_path}/r.sock"])
    srv.set(Workers=2, Balancing="fair")
    srv.start()
    go = tmp_path / "go"
    results = []

    def ask():
        r = CgiConn(srv.port, timeout=60).request("GET", f"/env.php?mode=hold&until={go}")
        results.append(r.status)
    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    assert wait_for(lambda: status_doc(srv)["backend0_queued"] == 3), status_doc(srv)
    st = status_doc(srv)
    assert st["backend0_active"] == 3 and st["backend0_limit"] == 3, st
    assert st["backend0_max_conns"] == 3 and st["backend0_get_values"] == 1, st
    go.touch()
    for t in threads:
        t.join(30 * SLOW)
    assert results == [200] * 6
    assert "FCGI_MAX_CONNS 3, FCGI_MAX_REQS 3, FCGI_MPXS_CONNS 0: at most 3" in srv.stderr_text()


def test_a_backend_that_does_not_answer_get_values(make_server, responders, tmp_path):
    # A backend that drops management records unanswered: its first
    # connection waits AcceptTimeout (nothing else was open, so nothing kept
    # its workers busy), then the request goes on it, and new connections
    # go unchecked from then on, at most FCGI_AUTO_SILENT (4) of them.
    responders(tmp_path / "r.sock", flags=("--ignore-management",))
    srv = backends_server(make_server, [f"unix:{tmp_path}/r.sock"],
                          conf="    AcceptTimeout 300ms\n")
    srv.start()
    t0 = time.monotonic()
    c = CgiConn(srv.port, timeout=30)
    r = c.request("GET", "/env.php")
    assert r.status == 200 and b"req 1" in r.body
    assert time.monotonic() - t0 >= 0.3
    t1 = time.monotonic()
    for _ in range(3):
        assert get_status(srv, "/env.php") == 200
    assert time.monotonic() - t1 < 0.3 * 3  # no check waited for again
    c.close()
    st = status_doc(srv)
    assert st["backend0_get_values"] == 2 and st["backend0_limit"] == 4, st
    assert "does not answer FCGI_GET_VALUES: new connections go unchecked, at most 4" in \
        srv.stderr_text()


def get_status(srv, path):
    c = CgiConn(srv.port, timeout=30)
    try:
        return c.request("GET", path).status
    finally:
        c.close()
