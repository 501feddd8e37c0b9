"""The proxy's active health checks (plugins/proxy/px_health.c): a group's
Health line sends a periodic request to each of its servers; `fall`
failures in a row take a server out of the group, `rise` passes bring it
back; a black-holed server fails by the check's timeout; a group with no
healthy server answers 502 at once; backups take over; a reload keeps a
server's state; monkey -t checks the line. The upstreams are
proxy_upstream.py processes (their /health answers what /sethealth/CODE
set) started by each test and stopped by PID."""

import json
import re
import socket
import time

from conftest import SLOW, free_port
from gwutil import plugin_status
from test_proxy import (check_conf, distribution, echo, proxy_server, pytestmark,  # noqa: F401
                        upstreams)


FAST = "interval=100ms timeout=500ms rise=2 fall=2"


def ask(u, path):
    """GET path of upstream u (one of its control paths): its JSON answer."""
    s = socket.create_connection(("127.0.0.1", u.port), timeout=5)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
    data = b""
    while True:  # the upstream keeps the connection open: its Content-Length ends the answer
        head, sep, body = data.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head)
        if sep and m and len(body) >= int(m.group(1)):
            break
        got = s.recv(65536)
        if not got:
            break
        data += got
    s.close()
    return json.loads(body)


def set_health(u, code):
    """Make u's /health answer `code` (0: hang); the Host fields its last checks sent."""
    return ask(u, "/sethealth/%d" % code)


def wait_for(pred, timeout):
    end = time.monotonic() + timeout * SLOW
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def group(*servers, health=FAST, extra=""):
    return ("    Upstream app\n" + "".join(f"    Server {s}\n" for s in servers)
            + (f"    Health /health {health}\n" if health else "") + extra)


def healthy(srv, i):
    return plugin_status(srv, "proxy")[f"server{i}_healthy"]


def test_failing_server_goes_out_and_comes_back(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    srv = proxy_server(make_server, conf=group(a.addr, b.addr), site="    Pass / app\n",
                       control=True).start()
    assert wait_for(lambda: a.stats()["health"] >= 2 and b.stats()["health"] >= 2, 5)
    assert set(distribution(srv, 6)) == {"a", "b"}
    set_health(b, 500)
    assert wait_for(lambda: healthy(srv, 1) == 0, 5)
    assert healthy(srv, 0) == 1
    before = b.stats()["requests"]
    assert set(distribution(srv, 8)) == {"a"}  # b is out: nothing of the traffic reaches it
    assert b.stats()["requests"] == before + 1  # this /stats alone
    err = srv.stderr_text()
    assert f"proxy: {b.addr} is down" in err and "status 500" in err
    s = plugin_status(srv, "proxy")
    assert s["server1_check_failures"] >= 2 and s["server1_checks"] >= s["server1_check_failures"]
    assert s["server1_up"] == 1  # passive health did not count it: no request failed
    set_health(b, 204)  # any 2xx (or 3xx) passes
    assert wait_for(lambda: healthy(srv, 1) == 1, 5)
    assert f"proxy: {b.addr} is up again" in srv.stderr_text()
    assert set(distribution(srv, 6)) == {"a", "b"}


def health_gate(u, n):
    """Let n more of u's /health answers out (the later ones wait); n < 0: all of them."""
    ask(u, "/healthgate/%d" % n)


def test_fall_and_rise_counts(make_server, upstreams):
    """Exactly the fall-th failed check takes b out and the rise-th pass brings it
    back. b answers its checks one at a time, as the test lets them out: the
    proxy starts a server's next check only once the last one is counted, so
    when b has received check k + 1, check k's outcome is in the proxy's state
    and nothing else can change it. No sleep, no race with the interval."""
    a, b = upstreams("a"), upstreams("b")
    health_gate(b, 0)  # b holds every check from the first
    set_health(b, 503)
    srv = proxy_server(make_server, conf=group(a.addr, b.addr,
                                               health="interval=50ms timeout=1h rise=3 fall=3"),
                       site="    Pass / app\n", control=True).start()
    received = 1

    def let_one_out():
        nonlocal received
        assert wait_for(lambda: b.stats()["health"] == received, 10), b.stats()
        health_gate(b, 1)
        received += 1
        assert wait_for(lambda: b.stats()["health"] == received, 10), b.stats()
        return plugin_status(srv, "proxy")

    for k in (1, 2, 3):
        s = let_one_out()
        assert s["server1_check_failures"] == k and s["server1_checks"] == k, s
        assert s["server1_healthy"] == (1 if k < 3 else 0), (k, s)
    assert f"proxy: {b.addr} is down: 3 checks of /health failed" in srv.stderr_text()
    assert set(distribution(srv, 4)) == {"a"}
    set_health(b, 200)  # the check b holds now passes when it goes
    for k in (1, 2, 3):
        s = let_one_out()
        assert s["server1_checks"] == 3 + k and s["server1_check_failures"] == 3, s
        assert s["server1_healthy"] == (0 if k < 3 else 1), (k, s)
    assert f"proxy: {b.addr} is up again (3 checks of /health passed)" in srv.stderr_text()
    health_gate(b, -1)
    assert set(distribution(srv, 6)) == {"a", "b"}


def test_blackholed_server_fails_by_timeout(make_server, upstreams):
    a, hole = upstreams("a"), upstreams("hole", flags=["--blackhole"])
    srv = proxy_server(make_server, conf="    Timeout 5\n" + group(a.addr, hole.addr, health=(
        "interval=200ms timeout=300ms rise=2 fall=2")), site="    Pass / app\n",
        control=True).start()
    assert wait_for(lambda: healthy(srv, 1) == 0, 5)
    assert "timed out" in srv.stderr_text()
    assert healthy(srv, 0) == 1  # the hole's checks did not hold a's back
    t = time.monotonic()
    assert set(distribution(srv, 6)) == {"a"}
    assert time.monotonic() - t < 2.0 * SLOW  # no request waited for the hole's Timeout


def test_refused_server_goes_out(make_server, upstreams):
    a = upstreams("a")
    dead = f"127.0.0.1:{free_port()}"
    srv = proxy_server(make_server, conf=group(a.addr, dead), site="    Pass / app\n",
                       control=True).start()
    assert wait_for(lambda: healthy(srv, 1) == 0, 5)
    assert f"proxy: {dead} is down" in srv.stderr_text()
    assert set(distribution(srv, 4)) == {"a"}


def test_all_down_502_at_once_and_backup(make_server, upstreams):
    a, bk = upstreams("a"), upstreams("backup")
    srv = proxy_server(make_server, conf=group(a.addr, f"{bk.addr} backup"),
                       site="    Pass / app\n", control=True).start()
    assert set(distribution(srv, 4)) == {"a"}
    set_health(a, 500)
    assert wait_for(lambda: healthy(srv, 0) == 0, 5)
    assert set(distribution(srv, 4)) == {"backup"}  # the backup takes over
    set_health(bk, 500)
    assert wait_for(lambda: healthy(srv, 1) == 0, 5)
    t = time.monotonic()
    for _ in range(3):
        assert echo(srv).status == 502
    assert time.monotonic() - t < 1.0 * SLOW
    assert a.stats()["requests"] == 4 + 2  # the four above, /sethealth and /stats: no 502 tried a
    set_health(a, 200)
    assert wait_for(lambda: healthy(srv, 0) == 1, 5)
    assert set(distribution(srv, 4)) == {"a"}


def test_host_field_of_the_check(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    conf = (group(a.addr) + "    Upstream named\n" + f"    Server {b.addr}\n"
            + f"    Health /health {FAST} host=app.example\n")
    srv = proxy_server(make_server, conf=conf,
                       site="    Pass /one app\n    Pass /two named\n").start()
    assert wait_for(lambda: a.stats()["health"] >= 1 and b.stats()["health"] >= 1, 5)
    assert set(set_health(a, 200)) == {a.addr}  # the server's address by default
    assert set(set_health(b, 200)) == {"app.example"}
    assert srv.proc.poll() is None


def test_reload_keeps_state_and_drops_checks(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    srv = proxy_server(make_server, conf=group(a.addr, b.addr), site="    Pass / app\n",
                       control=True).start()
    set_health(b, 500)
    assert wait_for(lambda: healthy(srv, 1) == 0, 5)
    srv.reload()
    # the new configuration checks b too: it stays out until it passes rise checks
    assert set(distribution(srv, 6)) == {"a"}
    assert healthy(srv, 1) == 0
    # without a Health line nothing checks b, and passive health alone decides
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n" + group(a.addr, b.addr,
                                                                          health=None))
    srv.reload()
    assert wait_for(lambda: healthy(srv, 1) == 1, 5)
    n = b.stats()["health"]
    time.sleep(0.5)
    assert b.stats()["health"] == n
    assert set(distribution(srv, 6)) == {"a", "b"}


def test_monkey_t_errors(make_server):
    cases = [
        ("    Health /health\n", "needs an Upstream line", "proxy.conf:2"),
        (group("127.0.0.1:80", health="interval=0"), "bad Health parameter", "proxy.conf:4"),
        (group("127.0.0.1:80", health="rise=101"), "bad Health parameter", "proxy.conf:4"),
        (group("127.0.0.1:80", health="every=5s"), "unknown Health parameter", "proxy.conf:4"),
        (group("127.0.0.1:80", health="timeout=2h"), "bad Health parameter", "proxy.conf:4"),
        (group("127.0.0.1:80") + "    Health /again\n", "has a Health line already",
         "proxy.conf:5"),
    ]
    # the numbers one past their bounds, and what is no number of that kind
    for bad in ["interval=0ms", "interval=61m", "interval=3601", "timeout=3600001ms",
                "timeout=1.5s", "timeout=2d", "timeout=-1s", "interval=", "rise=0", "rise=-1",
                "fall=101", "fall=1e2", "fall=", "rise=99999999999999999999"]:
        cases.append((group("127.0.0.1:80", health=bad), "bad Health parameter", "proxy.conf:4"))
    for conf, why, where in cases:
        srv = proxy_server(make_server, conf=conf, site="")
        err = srv.run_expect_failure(["-t"])
        assert why in err and where in err, (conf, err)
    srv = proxy_server(make_server, conf="    Upstream app\n    Server 127.0.0.1:80\n"
                       "    Health health\n", site="")
    err = srv.run_expect_failure(["-t"])
    assert "expected an absolute path" in err and "proxy.conf:4" in err
    # at the bounds, and in every unit a duration of the configuration takes
    for health in ["interval=5s timeout=500ms rise=1 fall=10 host=a.b",
                   "interval=1h timeout=3600000ms rise=100 fall=1",
                   "interval=1m timeout=60m", "interval=3600 timeout=1ms"]:
        ok = proxy_server(make_server, conf=group("127.0.0.1:80", health=health),
                          site="    Pass / app\n")
        check_conf(ok)
