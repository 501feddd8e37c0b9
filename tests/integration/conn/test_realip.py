"""RealIPFrom and RealIPHeader: the client from a trusted proxy's
X-Forwarded-For, Forwarded (RFC 7239) or X-Real-IP, read from the right past
trusted addresses; untrusted peers are taken as they are.

The servers are those of test_proxy_protocol.py (logger with %h and %{c}a,
an access rule, a CGI script printing REMOTE_ADDR and REMOTE_PORT). The test
client is 127.0.0.1 (trusted unless said otherwise); 127.0.0.2 plays a client
nobody trusts.
"""

import re

import pytest

from conftest import SLOW, wait_for
from test_proxy_protocol import (DENIED, NEEDS_REALIP, HAProxy, env_of, exchange, log_lines,
                                 needs_127_0_0_2, needs_haproxy, pp_server, status_of, v2_inet)

pytestmark = [NEEDS_REALIP]


def req(path="/env.cgi", fields=(), close=True):
    head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in fields)
    head += "Connection: close\r\n" if close else ""
    return (head + "\r\n").encode()


def realip_server(make_server, trusted="127.0.0.1 10.0.0.0/8 2001:db8:1::/48", header=None,
                  listen_extra="", **conf):
    srv = pp_server(make_server, listen_extra=listen_extra, **conf)
    srv.set(RealIPFrom=trusted)
    if header:
        srv.set(RealIPHeader=header)
    return srv


@pytest.fixture
def xff(make_server):
    return realip_server(make_server).start()


def remote(srv, fields, **kw):
    return env_of(exchange(srv.port, req(fields=fields), **kw))


def test_x_forwarded_for_everywhere(xff):
    e = remote(xff, [("X-Forwarded-For", "198.51.100.1, 203.0.113.7")])
    assert e["REMOTE_ADDR"] == "203.0.113.7" and e["REMOTE_PORT"] == "0"
    assert log_lines(xff, 1)[-1] == '203.0.113.7 127.0.0.1 "GET /env.cgi HTTP/1.1" 200'


def test_recursive_past_trusted_proxies(xff):
    e = remote(xff, [("X-Forwarded-For", "192.0.2.1, 203.0.113.7, 10.1.1.1, 10.2.2.2")])
    assert e["REMOTE_ADDR"] == "203.0.113.7"
    # several lines are one list
    e = remote(xff, [("X-Forwarded-For", "203.0.113.8"), ("X-Forwarded-For", "10.1.1.1")])
    assert e["REMOTE_ADDR"] == "203.0.113.8"
    # every address trusted: the leftmost
    assert remote(xff, [("X-Forwarded-For", "10.3.3.3, 10.1.1.1")])["REMOTE_ADDR"] == "10.3.3.3"
    # a port, IPv6
    e = remote(xff, [("X-Forwarded-For", "[2001:db8:2::1]:4711, 2001:db8:1::9")])
    assert e["REMOTE_ADDR"] == "2001:db8:2::1" and e["REMOTE_PORT"] == "4711"


def test_nothing_learned(xff):
    # no field, garbage before an untrusted address, an empty field
    assert remote(xff, [])["REMOTE_ADDR"] == "127.0.0.1"
    assert remote(xff, [("X-Forwarded-For", "203.0.113.7, unknown")])["REMOTE_ADDR"] == "127.0.0.1"
    assert remote(xff, [("X-Forwarded-For", "")])["REMOTE_ADDR"] == "127.0.0.1"
    # another field than RealIPHeader's
    assert remote(xff, [("X-Real-IP", "203.0.113.7")])["REMOTE_ADDR"] == "127.0.0.1"


@needs_127_0_0_2
def test_untrusted_peer_ignored(xff):
    e = remote(xff, [("X-Forwarded-For", "203.0.113.7")], source="127.0.0.2")
    assert e["REMOTE_ADDR"] == "127.0.0.2"
    assert log_lines(xff, 1)[-1].startswith("127.0.0.2 127.0.0.2 ")


def test_per_request_on_one_connection(xff):
    data = (req(fields=[("X-Forwarded-For", "203.0.113.1")], close=False) +
            req(close=False) + req(fields=[("X-Forwarded-For", "203.0.113.3")]))
    out = exchange(xff.port, data).decode()
    assert re.findall(r"REMOTE_ADDR=(\S+)", out) == ["203.0.113.1", "127.0.0.1", "203.0.113.3"]


def test_access_rules_and_forgery(xff):
    assert status_of(exchange(xff.port, req("/hello.txt", [("X-Forwarded-For", DENIED)]))) == 403
    # a client that names the denied address itself, behind a proxy that appends its own
    fields = [("X-Forwarded-For", f"{DENIED}, 198.51.100.1")]
    assert status_of(exchange(xff.port, req("/hello.txt", fields))) == 200
    # the denied client behind two trusted proxies
    fields = [("X-Forwarded-For", f"198.51.100.1, {DENIED}, 10.0.0.1")]
    assert status_of(exchange(xff.port, req("/hello.txt", fields))) == 403


def test_forwarded(make_server):
    srv = realip_server(make_server, header="Forwarded").start()
    e = remote(srv, [("Forwarded", 'for=198.51.100.1, for="[2001:db8:cafe::17]:4711";proto=https,'
                                   ' for=10.0.0.1;by=10.0.0.2')])
    assert e["REMOTE_ADDR"] == "2001:db8:cafe::17" and e["REMOTE_PORT"] == "4711"
    assert remote(srv, [("Forwarded", "for=_hidden, for=10.0.0.1")])["REMOTE_ADDR"] == "127.0.0.1"
    # X-Forwarded-For is not read then
    assert remote(srv, [("X-Forwarded-For", "203.0.113.7")])["REMOTE_ADDR"] == "127.0.0.1"


def test_x_real_ip(make_server):
    srv = realip_server(make_server, header="x-real-ip").start()
    assert remote(srv, [("X-Real-IP", "203.0.113.9")])["REMOTE_ADDR"] == "203.0.113.9"


def test_behind_a_proxy_protocol_listener(make_server):
    # RealIPFrom is matched against the client the PROXY header named
    srv = realip_server(make_server, trusted="192.0.2.1", listen_extra="proxy_protocol").start()
    fields = [("X-Forwarded-For", "203.0.113.5")]
    assert env_of(exchange(srv.port, v2_inet("192.0.2.1", 1) + req(fields=fields))) \
        ["REMOTE_ADDR"] == "203.0.113.5"
    assert env_of(exchange(srv.port, v2_inet("192.0.2.2", 1) + req(fields=fields))) \
        ["REMOTE_ADDR"] == "192.0.2.2"


def test_h2c_request(make_server):
    pytest.importorskip("h2.connection")
    from h2util import H2Client

    srv = realip_server(make_server, listen_extra="h2c").start()
    c = H2Client(srv.port)
    st = c.get("/env.cgi", headers=[("x-forwarded-for", "203.0.113.21")])
    c.close()
    assert b"REMOTE_ADDR=203.0.113.21\n" in st["data"], st


@pytest.mark.parametrize("key,value,reason", [
    ("RealIPFrom", "10.0.0.0/33", "prefix length is out of range for IPv4"),
    ("RealIPFrom", "10.0.0.1/8", "has bits set beyond its prefix length"),
    ("RealIPFrom", "127.0.0.1 example.com", "'example.com' is not an IPv4 or IPv6 address"),
    ("RealIPFrom", "::1/x", "the prefix length after '/' must be a number"),
    ("RealIPHeader", "X-Client-IP", "X-Forwarded-For, Forwarded or X-Real-IP"),
])
def test_bad_keys_refused(make_server, key, value, reason):
    srv = realip_server(make_server)
    srv.set(**{key: value})
    for args in (["-t"], None):
        err = srv.run_expect_failure(args)
        assert re.search(r"monkey\.conf:\d+: ", err) and reason in err, err


@needs_haproxy
@needs_127_0_0_2
def test_haproxy_forwardfor(make_server):
    srv = realip_server(make_server, trusted="127.0.0.1").start()
    cfg = ("defaults\n    mode http\n    option forwardfor\n    timeout connect 5s\n"
           "    timeout client 10s\n    timeout server 10s\n"
           "frontend fe\n    bind 127.0.0.1:@PORT@\n    default_backend be\n"
           f"backend be\n    server m 127.0.0.1:{srv.port}\n")
    hap = HAProxy(srv.dir, cfg)
    try:
        r = exchange(hap.port, req(fields=[("X-Forwarded-For", "198.51.100.99")]),
                     source="127.0.0.2")
        assert env_of(r)["REMOTE_ADDR"] == "127.0.0.2"
        assert wait_for(lambda: any(line.startswith("127.0.0.2 127.0.0.1 ") for line in log_lines(srv, 1)),
                 5 * SLOW)
        assert status_of(exchange(hap.port, req("/hello.txt", [("X-Forwarded-For", "10.0.0.1")]),
                                  source="127.0.0.2")) == 200
    finally:
        hap.stop()


def test_duda_request_address(make_server, tmp_path):
    """Duda's request->remote_addr is the client RealIPFrom learned."""
    import test_duda as d
    if not d.PLUGIN.exists() or not d.DUDA.exists():
        pytest.skip("built without Duda")
    from conftest import EMULATED, ROOT, STATIC
    if STATIC or EMULATED:
        pytest.skip("no shared objects, or services built for another host")
    root = tmp_path / "services"
    root.mkdir()
    d.build(ROOT / "tests" / "duda" / "objects", root)
    srv = d.duda_server(make_server, root, [d.web_service("objects")], workers=1)
    srv.set(RealIPFrom="127.0.0.1")
    srv.start()
    r = srv.request("GET", "/objects/request/9", headers={"X-Forwarded-For": "203.0.113.70"})
    assert r.body.endswith(b" addr 203.0.113.70\n"), r.body
    assert srv.get("/objects/request/9").body.endswith(b" addr 127.0.0.1\n")
