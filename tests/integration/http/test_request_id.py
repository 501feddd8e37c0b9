"""RequestId, RequestIdFrom, RequestIdEcho and TraceContext: the request ID
made or accepted, logged (%{request_id}n, %{trace_id}n), passed to a CGI
script (HTTP_X_REQUEST_ID, HTTP_TRACEPARENT) and to the proxy's upstream,
echoed; traceparent passed on with the same trace id and a new parent id.

The test client is 127.0.0.1: trusted when RequestIdFrom names it."""

import json
import re

import pytest

from conftest import needs_dlopen, needs_part, wait_for, SLOW
from h2util import H2Client, skip_without_h2
from test_proxy import PROXY_SO, proxy_server, upstreams  # noqa: F401 (a fixture)
from test_proxy_fields import head_of, site, values
from test_proxy_protocol import exchange, env_of, pp_server

pytestmark = [needs_dlopen, needs_part("reqid", "request IDs and trace context")]

ENV_CGI = ('#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
           'echo "ID=$HTTP_X_REQUEST_ID"\necho "TP=$HTTP_TRACEPARENT"\n'
           'echo "TS=$HTTP_TRACESTATE"\n')
GEN = re.compile(r"^[0-9a-f]{16}-[0-9a-f]{16}$")
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TP_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def id_server(make_server, **conf):
    srv = pp_server(make_server, listen_extra="", **conf)
    srv.file("env.cgi", ENV_CGI, mode=0o755)
    srv.site_extra = srv.site_extra.replace(
        '    Format custom %h %{c}a "%r" %>s\n',
        '    Format custom %{request_id}n %{trace_id}n %>s %D\n'
        f"    ErrorLog {srv.logs}/error.log\n")
    return srv


def req(path="/env.cgi", fields=()):
    head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in fields)
    return (head + "Connection: close\r\n\r\n").encode()


def env(srv, fields=()):
    return env_of(exchange(srv.port, req(fields=fields)))


def log(srv, n, name="access.log"):
    path = srv.logs / name
    assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= n, 5 * SLOW)
    return path.read_text().splitlines()


def test_generated_and_logged(make_server):
    srv = id_server(make_server, RequestId="On").start()
    a, b = env(srv)["ID"], env(srv)["ID"]
    assert GEN.match(a) and GEN.match(b) and a != b
    assert a[:16] == b[:16]  # one worker: its prefix, its counter
    assert int(b[17:], 16) == int(a[17:], 16) + 1
    lines = log(srv, 2)
    assert lines[0].split()[:3] == [a, "-", "200"] and lines[0].split()[3].isdigit()
    assert lines[1].split()[0] == b


def test_off_by_default(make_server):
    srv = id_server(make_server).start()
    e = env(srv, [("X-Request-Id", "client-1"), ("traceparent", "bogus")])
    assert e["ID"] == "client-1" and e["TP"] == "bogus"  # untouched
    assert log(srv, 1)[0].split()[:2] == ["-", "-"]


def test_untrusted_replaced(make_server):
    # RequestIdFrom excludes 127.0.0.1: the client's ID is replaced
    srv = id_server(make_server, RequestId="On", RequestIdFrom="10.0.0.0/8").start()
    e = env(srv, [("X-Request-Id", "client-1"), ("X-Request-Id", "client-2")])
    assert GEN.match(e["ID"]), e
    assert log(srv, 1)[0].split()[0] == e["ID"]


def test_trusted_accepted_and_checked(make_server):
    srv = id_server(make_server, RequestId="On", RequestIdFrom="127.0.0.1 10.0.0.0/8").start()
    assert env(srv, [("X-Request-Id", "abc-123")])["ID"] == "abc-123"
    # too long, or not printable: replaced
    assert GEN.match(env(srv, [("X-Request-Id", "x" * 201)])["ID"])
    assert env(srv, [("X-Request-Id", "x" * 200)])["ID"] == "x" * 200
    assert GEN.match(env(srv, [("X-Request-Id", "a b")])["ID"])
    assert log(srv, 4)[0].split()[0] == "abc-123"


def test_header_name_and_echo(make_server):
    srv = id_server(make_server, RequestId="On", RequestIdHeader="X-Trace-Me",
                    RequestIdEcho="On").start()
    r = srv.request("GET", "/hello.txt")
    assert r.status == 200 and GEN.match(r.header("x-trace-me")), r
    assert r.header("x-request-id") is None
    # an error the server answers carries it too
    r = srv.request("GET", "/missing")
    assert r.status == 404 and GEN.match(r.header("x-trace-me"))


def test_no_echo_unless_asked(make_server):
    srv = id_server(make_server, RequestId="On").start()
    assert srv.request("GET", "/hello.txt").header("x-request-id") is None


def test_5xx_error_log_names_the_id(make_server):
    srv = id_server(make_server, RequestId="On")
    srv.file("fail.cgi", "#!/bin/sh\nexit 1\n", mode=0o755)
    srv.start()
    r = exchange(srv.port, req("/fail.cgi"))
    assert r.startswith(b"HTTP/1.1 5"), r
    rid = log(srv, 1)[0].split()[0]
    assert GEN.match(rid)
    assert wait_for(lambda: rid in (srv.logs / "error.log").read_text()
                    if (srv.logs / "error.log").exists() else False, 5 * SLOW)


def test_traceparent_new_parent_same_trace(make_server):
    srv = id_server(make_server, TraceContext="On").start()
    e = env(srv, [("traceparent", TP), ("tracestate", "congo=t61rcWkgMzE")])
    m = TP_RE.match(e["TP"])
    assert m and m.group(1) == "0af7651916cd43dd8448eb211c80319c", e
    assert m.group(2) != "b7ad6b7169203331" and m.group(3) == "01"
    assert e["TS"] == "congo=t61rcWkgMzE"
    assert log(srv, 1)[0].split()[1] == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("bad", [
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
    "garbage",
])
def test_invalid_traceparent_dropped_or_restarted(make_server, bad):
    on = id_server(make_server, TraceContext="On").start()
    e = env(on, [("traceparent", bad), ("tracestate", "a=b")])
    assert e["TP"] == "" and e["TS"] == ""  # dropped, with its tracestate
    start = id_server(make_server, TraceContext="Start").start()
    e = env(start, [("traceparent", bad)])
    m = TP_RE.match(e["TP"])
    assert m and m.group(1) != bad[3:35] and m.group(3) == "00", e


def test_trace_started_when_absent(make_server):
    srv = id_server(make_server, TraceContext="Start").start()
    a, b = TP_RE.match(env(srv)["TP"]), TP_RE.match(env(srv)["TP"])
    assert a and b and a.group(1) != b.group(1)
    assert log(srv, 2)[0].split()[1] == a.group(1)


def test_http2(make_server):
    skip_without_h2()
    srv = id_server(make_server, RequestId="On", RequestIdEcho="On", TraceContext="On")
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    srv.start()
    h = H2Client(srv.port)
    sid = h.request("/env.cgi", headers=[("traceparent", TP), ("x-request-id", "c")])
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200"
    e = dict(ln.split("=", 1) for ln in st["data"].decode().splitlines() if "=" in ln)
    assert GEN.match(e["ID"]) and st["headers"]["x-request-id"] == e["ID"]
    m = TP_RE.match(e["TP"])
    assert m.group(1) == TP[3:35] and m.group(2) != TP[36:52]
    h.close()


@pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")
def test_proxy_upstream(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u))
    srv.set(RequestId="On", TraceContext="On")
    srv.start()
    c = srv.conn()
    try:
        r = c.request("GET", "/app/head", headers={"X-Request-Id": "client", "traceparent": TP})
    finally:
        c.close()
    _, f = head_of(r)
    ids = values(f, "x-request-id")
    assert len(ids) == 1 and GEN.match(ids[0]), f
    tps = values(f, "traceparent")
    assert len(tps) == 1
    m = TP_RE.match(tps[0])
    assert m.group(1) == TP[3:35] and m.group(2) != TP[36:52]


def test_json_format(make_server):
    srv = id_server(make_server, RequestId="On", TraceContext="Start")
    srv.site_extra = srv.site_extra.replace("    Format custom %{request_id}n %{trace_id}n %>s %D\n",
                                            "    Format json\n")
    srv.start()
    e = env(srv)
    a = json.loads(log(srv, 1)[0])
    assert a["request_id"] == e["ID"] and a["trace_id"] == TP_RE.match(e["TP"]).group(1)
    assert isinstance(a["duration_us"], int)


def test_fastcgi_backend(make_server, tmp_path):
    from test_fastcgi import PHP_FPM, PhpFpm, make_php_server
    import gwutil
    if PHP_FPM is None:
        pytest.skip("php-fpm is not installed (tools/deps.sh test)")
    fpm = PhpFpm(tmp_path / "fpm")
    try:
        srv = make_php_server(make_server, fpm.sock)
        srv.file("ids.php", '<?php header("Content-Type: text/plain");\n'
                            'echo "ID=", $_SERVER["HTTP_X_REQUEST_ID"] ?? "-", "\\n";\n'
                            'echo "TP=", $_SERVER["HTTP_TRACEPARENT"] ?? "-", "\\n";\n')
        srv.set(RequestId="On", TraceContext="On", RequestIdFrom="127.0.0.1")
        srv.start()
        e = gwutil.env_of(gwutil.get(srv, "/ids.php", headers={"X-Request-Id": "from-lb",
                                                               "traceparent": TP}).body)
        assert e["ID"] == "from-lb"
        m = TP_RE.match(e["TP"])
        assert m and m.group(1) == TP[3:35] and m.group(2) != TP[36:52], e
    finally:
        fpm.stop()


def test_counter_counts_up_across_digits(make_server):
    # 40 IDs on one connection: the counter's digits carry (0f -> 10, 1f -> 20)
    srv = id_server(make_server, RequestId="On", RequestIdEcho="On").start()
    c = srv.conn()
    try:
        ids = [c.request("GET", "/hello.txt").header("x-request-id") for _ in range(40)]
    finally:
        c.close()
    assert all(GEN.match(i) and i[:16] == ids[0][:16] for i in ids), ids
    assert [int(i[17:], 16) for i in ids] == list(range(int(ids[0][17:], 16),
                                                        int(ids[0][17:], 16) + 40))


@pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")
def test_proxy_upstream_http2(make_server, upstreams):
    skip_without_h2()
    u = upstreams("a")
    srv = proxy_server(make_server, site=site(u), h2c=True)
    srv.set(RequestId="On", RequestIdEcho="On", TraceContext="Start")
    srv.start()
    h = H2Client(srv.port)
    sid = h.request("/app/head", headers=[("x-request-id", "client"), ("tracestate", "a=b")])
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200"
    lines = st["data"].decode().split("\r\n")
    f = [(k.lower(), v.strip()) for k, v in (ln.split(":", 1) for ln in lines[1:] if ln)]
    ids = values(f, "x-request-id")
    assert len(ids) == 1 and GEN.match(ids[0]) and st["headers"]["x-request-id"] == ids[0], f
    tps = values(f, "traceparent")
    assert len(tps) == 1 and TP_RE.match(tps[0]).group(3) == "00"  # a trace started
    assert values(f, "tracestate") == []  # the client's, without a traceparent: dropped
    h.close()
