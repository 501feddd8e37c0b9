"""The reverse proxy's per-server limit (Server ADDR max=N) and the wait
for room (Queue, QueueTimeout): what the upstream saw at once is its own
count (proxy_upstream.py /sleep and /stats: active, peak)."""

import threading
import time

from conftest import SLOW
from gwutil import plugin_status
from test_proxy import proxy_server, pytestmark, upstreams  # noqa: F401


def at_once(srv, paths):
    """GET each path on a connection of its own, all at once: [(status, seconds)] in order."""
    out = [None] * len(paths)

    def one(i, path):
        c = srv.conn(timeout=30)
        t = time.monotonic()
        try:
            out[i] = (c.request("GET", path).status, time.monotonic() - t)
        finally:
            c.close()

    threads = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(paths)]
    for i, th in enumerate(threads):
        th.start()
        time.sleep(0.1)  # in this order: the first ones take the room
    for th in threads:
        th.join(60 * SLOW)
    return out


def test_max_bounds_requests_on_a_server_and_the_rest_wait(make_server, upstreams):
    a = upstreams("a")
    conf = f"    Upstream app\n    Server {a.addr} max=2\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n", control=True).start()
    t = time.monotonic()
    got = at_once(srv, ["/sleep?s=0.5"] * 6)
    took = time.monotonic() - t
    assert [s for s, _ in got] == [200] * 6
    st = a.stats()
    assert st["peak"] == 2  # never more than max= at once, though 6 came together
    assert took > 1.4  # three rounds of two
    s = plugin_status(srv, "proxy")
    assert s["queue_full"] == 0 and s["queue_timeouts"] == 0 and s["server0_active"] == 0


def test_queue_full_and_queue_timeout_are_503(make_server, upstreams):
    a = upstreams("a")
    conf = (f"    Queue 1\n    QueueTimeout 500ms\n    Upstream app\n"
            f"    Server {a.addr} max=1\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n", control=True).start()
    got = at_once(srv, ["/sleep?s=2", "/sleep?s=0", "/sleep?s=0"])
    assert got[0][0] == 200
    assert got[1][0] == 503 and 0.4 < got[1][1] < 1.5 * SLOW  # waited QueueTimeout
    assert got[2][0] == 503 and got[2][1] < 0.4 * SLOW  # the queue was full: at once
    assert a.stats()["peak"] == 1
    s = plugin_status(srv, "proxy")
    assert s["queue_full"] == 1 and s["queue_timeouts"] == 1
    err = srv.stderr_text()
    assert "every server of the group is at its max, and the queue is full" in err
    # room again: served at once
    c = srv.conn()
    assert c.request("GET", "/sleep?s=0").status == 200
    c.close()


def test_a_full_server_sends_requests_to_the_others_not_to_backups(make_server, upstreams):
    a, b, bk = upstreams("a"), upstreams("b"), upstreams("backup")
    conf = (f"    Upstream app\n    Server {a.addr} max=1\n    Server {b.addr} max=1\n"
            f"    Server {bk.addr} backup\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    got = at_once(srv, ["/sleep?s=0.6"] * 4)
    assert [s for s, _ in got] == [200] * 4
    assert a.stats()["peak"] == 1 and b.stats()["peak"] == 1
    assert bk.stats()["requests"] == 1  # its /stats call only: a backup is for servers out
    assert max(t for _, t in got) > 0.85  # two of them waited for room (alone: 0.6 s)


def test_queue_zero_and_max_checked(make_server, upstreams):
    a = upstreams("a")
    conf = f"    Queue 0\n    Upstream app\n    Server {a.addr} max=1\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    got = at_once(srv, ["/sleep?s=1", "/sleep?s=0"])
    assert got[0][0] == 200 and got[1][0] == 503 and got[1][1] < 0.5 * SLOW
    srv.stop()
    bad = proxy_server(make_server, conf=f"    Upstream app\n    Server {a.addr} max=0\n")
    assert "a max is 1 to 65535" in bad.run_expect_failure(["-t"])


def test_room_on_one_worker_wakes_a_request_waiting_on_another(make_server, upstreams):
    # max= counts all workers together: a request that waits on one worker is
    # woken when a request of another worker lets its place go
    a = upstreams("a")
    conf = f"    Upstream app\n    Server {a.addr} max=1\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n", control=True)
    srv.set(Workers=2, Balancing="fair").start()
    t = time.monotonic()
    got = at_once(srv, ["/sleep?s=0.3"] * 6)
    assert [s for s, _ in got] == [200] * 6
    assert time.monotonic() - t < 4.0 * SLOW  # none waited for QueueTimeout (5 s)
    assert a.stats()["peak"] == 1
    assert plugin_status(srv, "proxy")["server0_active"] == 0
