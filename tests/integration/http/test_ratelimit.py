"""Rate limits of request rules: RateLimit in a [RULE] (server/http/ratelimit.c,
core/ratelimit.c, server/config/conf_ratelimit.c, server/request/request_limit.c):
429 with Retry-After past the burst, keys apart, one table for all workers."""

import threading
import time

import pytest

from conftest import Conn, built_without, needs_dlopen, needs_part
from rulesutil import check_refused, rules_server

pytestmark = needs_part("rules", "request rules")


def limit_server(make_server, text, workers=1):
    return rules_server(make_server, text, {"index.html": "home\n", "login": "login\n"}, workers)


def statuses(conn, n, path="/login", headers=None):
    return [conn.request("GET", path, headers=headers).status for _ in range(n)]


def test_over_the_limit_is_429_with_retry_after(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/m burst=2
""").start()
    c = Conn(srv.port)
    # burst + 1 at once, then refused
    assert statuses(c, 3) == [200, 200, 200]
    r = c.request("GET", "/login")
    assert r.status == 429 and r.header("Retry-After") == "60"
    # the connection goes on, and other paths are not limited
    assert c.request("GET", "/index.html").status == 200
    assert c.request("GET", "/login").status == 429
    c.close()


def test_burst_refills_at_the_rate(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 5/s burst=1
""").start()
    c = Conn(srv.port)
    assert statuses(c, 3) == [200, 200, 429]
    r = c.request("GET", "/login")
    assert r.status == 429 and r.header("Retry-After") == "1"  # 200 ms, rounded up
    time.sleep(0.45)  # two intervals: two more requests
    assert statuses(c, 3) == [200, 200, 429]
    c.close()


def test_addresses_are_apart(make_server):
    srv = limit_server(make_server, """
[RULE]
    Prefix /
    RateLimit 1/m
""").start()
    a, b = Conn(srv.port), Conn(srv.port, source="127.0.0.2")
    assert statuses(a, 2, "/index.html") == [200, 429]
    assert statuses(b, 2, "/index.html") == [200, 429]
    a.close()
    b.close()


def test_header_key_and_missing_key(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/m key=header:X-Api-Key
    ResponseHeader always set X-Limited yes
""").start()
    c = Conn(srv.port)
    k1, k2 = {"X-Api-Key": "one"}, {"X-Api-Key": "two"}
    assert statuses(c, 2, headers=k1) == [200, 429]
    r = c.request("GET", "/login", headers=k1)
    assert r.header("X-Limited") == "yes"  # the rule's fields with always reach the 429
    assert statuses(c, 2, headers=k2) == [200, 429]
    # without the field a request is not counted (nginx's empty key)
    assert statuses(c, 3) == [200, 200, 200]
    c.close()


def test_cookie_and_path_keys(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/m key=cookie:session

[RULE]
    Prefix /
    RateLimit 1/m key=path
""").start()
    c = Conn(srv.port)
    s1, s2 = {"Cookie": "a=1; session=x"}, {"Cookie": "session=y"}
    assert statuses(c, 2, headers=s1) == [200, 429]
    assert statuses(c, 1, headers=s2) == [200]
    assert statuses(c, 2, "/index.html") == [200, 429]
    b = Conn(srv.port, source="127.0.0.3")  # the path is the key, whoever asks
    assert statuses(b, 1, "/index.html") == [429]
    c.close()
    b.close()


def test_a_rule_with_an_action_is_limited_first(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /old
    RateLimit 1/m
    Redirect 301 /index.html
""").start()
    c = Conn(srv.port)
    assert statuses(c, 2, "/old") == [301, 429]
    c.close()


def test_reload_starts_the_counts_again(make_server):
    text = "[RULE]\n    Path /login\n    RateLimit 1/m\n"
    srv = limit_server(make_server, text).start()
    c = Conn(srv.port)
    assert statuses(c, 2) == [200, 429]
    c.close()
    srv.site_extra = text + "\n"
    srv.write_conf()
    srv.reload()
    c = Conn(srv.port)
    assert statuses(c, 2) == [200, 429]
    c.close()


@pytest.mark.parametrize("text,line,words", [
    ("[RULE]\n    Path /a\n    RateLimit 10\n", 6, "expected a rate"),
    ("[RULE]\n    Path /a\n    RateLimit 0/s\n", 6, "expected a rate"),
    ("[RULE]\n    Path /a\n    RateLimit 10/h\n", 6, "expected a rate"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s burst=x\n", 6, "bad 'burst=x'"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s key=header:\n", 6, "bad 'key=header:'"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s key=ip\n", 6, "bad 'key=ip'"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s keys=2\n", 6, "bad 'keys=2'"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s colour=blue\n", 6, "unknown option"),
    ("[RULE]\n    Path /a\n    RateLimit 10/s delay=-1\n", 6, "bad 'delay=-1'"),
    ("[RULE]\n    Path /a\n\n    RateLimit 10/s\n    RateLimit 5/s\n", 8, "RateLimit"),
])
def test_check_refuses_bad_limits(make_server, text, line, words):
    check_refused(make_server, text, line, words)


def test_one_limit_across_two_workers(make_server):
    """Many keep-alive connections from one address, spread over two workers
    by SO_REUSEPORT, for a fixed window: the requests taken are the rate
    times the time measured plus the burst, within 10 %."""
    rate, burst, window = 20, 5, 3.0
    srv = limit_server(make_server, f"""
[RULE]
    Path /login
    RateLimit {rate}/s burst={burst}
""", workers=2).start()
    n = 8
    taken, refused, errors = [0] * n, [0] * n, []
    start = time.monotonic()
    stop = start + window

    def client(i):
        try:
            while time.monotonic() < stop:
                # a new connection every 20 requests: SO_REUSEPORT picks a worker for each
                c = Conn(srv.port)
                for _ in range(20):
                    st = c.request("GET", "/login").status
                    if st == 200:
                        taken[i] += 1
                    else:
                        assert st == 429, st
                        refused[i] += 1
                    if time.monotonic() >= stop:
                        break
                    time.sleep(0.002)
                c.close()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    assert not errors, errors
    expected = rate * elapsed + burst + 1
    print(f"taken {sum(taken)} refused {sum(refused)} expected {expected:.1f} in {elapsed:.2f} s")
    assert sum(refused) > 0, "the clients never went past the limit"
    assert abs(sum(taken) - expected) <= 0.1 * expected, (sum(taken), expected, elapsed)


@pytest.mark.skipif(built_without("realip"), reason="built without RealIPFrom")
def test_the_address_a_trusted_proxy_names(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/m
""")
    srv.set(RealIPFrom="127.0.0.1/32")
    srv.start()
    c = Conn(srv.port)
    a, b = {"X-Forwarded-For": "192.0.2.1"}, {"X-Forwarded-For": "192.0.2.2"}
    assert statuses(c, 2, headers=a) == [200, 429]
    assert statuses(c, 2, headers=b) == [200, 429]
    # IPv6: one /64 is one client
    v1, v2 = {"X-Forwarded-For": "2001:db8::1"}, {"X-Forwarded-For": "2001:db8::2"}
    assert statuses(c, 1, headers=v1) == [200]
    assert statuses(c, 1, headers=v2) == [429]
    c.close()


def test_evictions_are_counted_and_logged(make_server):
    """A table of 8 keys flooded by 200 keys: it stays at 8, the keys evicted
    while still limited are said in the error log with the rule's line."""
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/m key=header:X-Key keys=8
""").start()
    c = Conn(srv.port)
    for i in range(200):
        assert c.request("GET", "/login", headers={"X-Key": f"k{i}"}).status == 200
    # the first key was evicted: its count restarted
    assert c.request("GET", "/login", headers={"X-Key": "k0"}).status == 200
    # a recent one was not
    assert c.request("GET", "/login", headers={"X-Key": "k199"}).status == 429
    c.close()
    log = srv.stderr_text()
    assert "sites/default:7: RateLimit:" in log and "evicted from its table of 8" in log, log


@needs_dlopen
def test_evictions_in_the_control_status(make_server):
    """The control plugin's status tells the tables of the configuration in
    force: their rules, keys and the keys evicted while still limited; a
    reload makes new tables, counted from 0."""
    from test_control import ctl, make_control, status_json, wait_socket
    srv = make_control(make_server, start=False)
    srv.site_extra = """
[RULE]
    Path /hello.txt
    RateLimit 1/m key=header:X-Key keys=8

[RULE]
    Prefix /other
    RateLimit 5/s
"""
    srv.start()
    wait_socket(srv.sock)
    assert status_json(srv)["ratelimit"] == {"limits": 2, "keys": 8 + 16384, "evictions": 0}
    c = Conn(srv.port)
    for i in range(200):
        assert c.request("GET", "/hello.txt", headers={"X-Key": f"k{i}"}).status == 200
    c.close()
    # one set of 8: each key past the 8th evicts one still limited (1/m)
    assert status_json(srv)["ratelimit"]["evictions"] == 192
    out = ctl("-s", srv.sock, "status").stdout
    assert "rate limits  2, 16392 keys at most, 192 evictions while still limited" in out, out
    srv.site_extra += "\n"
    srv.write_conf()
    srv.reload()
    assert status_json(srv)["ratelimit"] == {"limits": 2, "keys": 16392, "evictions": 0}


def test_delay_holds_requests_back(make_server):
    """delay: the requests within the burst are spaced out at the rate
    (nginx's limit_req without nodelay), past the burst refused."""
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 10/s burst=3 delay
""").start()
    c = Conn(srv.port)
    start = time.monotonic()
    assert statuses(c, 4) == [200, 200, 200, 200]
    elapsed = time.monotonic() - start
    # the 2nd, 3rd and 4th were held 100, 200 and 300 ms ahead of the rate:
    # one after the other on one connection, 300 ms in all
    assert 0.28 <= elapsed < 1.5, elapsed
    c.close()
    # four clients at once: the bucket takes 4 (3 held back), the 5th is refused at once
    time.sleep(0.5)
    conns = [Conn(srv.port) for _ in range(5)]
    for x in conns:
        x.send(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
    got = sorted(x.read_response().status for x in conns)
    assert got == [200, 200, 200, 200, 429], got
    for x in conns:
        x.close()


def test_delay_n_serves_the_first_at_once(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 5/s burst=4 delay=2
""").start()
    c = Conn(srv.port)
    start = time.monotonic()
    assert statuses(c, 3) == [200, 200, 200]
    assert time.monotonic() - start < 0.15  # 0, 1 and 2 ahead: none held back
    assert statuses(c, 1) == [200]  # 3 ahead: held 200 ms
    assert time.monotonic() - start >= 0.19
    c.close()


def test_a_held_request_whose_client_left(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 2/s burst=5 delay
""").start()
    c = Conn(srv.port)
    for _ in range(4):  # the 2nd to 4th would be held 0.5 to 1.5 s
        c.send(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
    c.close()
    time.sleep(2.0)  # the holds end on a closed connection
    assert Conn(srv.port, source="127.0.0.2").request("GET", "/login").status == 200


def test_a_hold_longer_than_timeout_is_503(make_server):
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/s burst=5 delay
""")
    srv.set(Timeout=1)
    srv.start()
    assert statuses(Conn(srv.port), 1) == [200]
    start = time.monotonic()
    held = [Conn(srv.port) for _ in range(3)]  # held 1, 2 and 3 s
    for c in held:
        c.send(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
    # the last is held past its Timeout: 503 then, not 3 s later
    assert held[2].read_response().status == 503
    assert time.monotonic() - start < 2.8
    for c in held:
        c.close()


def test_http2_streams(make_server):
    """Over HTTP/2 each stream is a request: several at once on one
    connection, some held back (delay), the one past the burst refused."""
    from h2util import H2Client, built_with_h2
    if not built_with_h2():
        pytest.skip("built without HTTP/2")
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 10/s burst=2 delay
""")
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    srv.start()
    c = H2Client(srv.port)
    start = time.monotonic()
    sids = [c.request("/login") for _ in range(4)]
    c.wait(sids)
    got = sorted(c.streams[s]["headers"][":status"] for s in sids)
    assert got == ["200", "200", "200", "429"], got
    refused = [c.streams[s] for s in sids if c.streams[s]["headers"][":status"] == "429"][0]
    assert refused["headers"]["retry-after"] == "1"
    assert time.monotonic() - start >= 0.19  # the third was held 200 ms
    c.close()


def test_stop_with_requests_held(make_server):
    """A stop while requests are held back: they are answered or closed, and
    the server exits cleanly (the sanitizers' builds check what is left)."""
    srv = limit_server(make_server, """
[RULE]
    Path /login
    RateLimit 1/s burst=5 delay
""")
    srv.set(GracefulTimeout=1)
    srv.start()
    held = [Conn(srv.port) for _ in range(4)]  # held 0, 1, 2 and 3 s
    for c in held:
        c.send(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    start = time.monotonic()
    srv.stop()
    assert time.monotonic() - start < 5
    for c in held:
        c.close()
