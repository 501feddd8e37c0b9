"""Tier 12: the metrics of the control plugin (MetricsPath), in Prometheus'
formats.

A server with 2 workers and two load sites (a.test, b.test) beside the
default one (localhost, which the scrapes go to) takes a known mix of
requests over HTTP/1.1 and HTTP/2; the counters are then checked exactly in
the scraped text, the text by `promtool check metrics`, and the same
numbers through the real Prometheus, which scrapes the server and answers
queries on its HTTP API. The endpoint's access rule (HttpAllow, loopback by
default) is checked from a non-loopback address when the machine has one.
"""

import json
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import BUILD, SLOW, Conn, built_without, free_port, needs_dlopen, needs_part
from h2util import H2_MARKS, H2Client, frame, raw_h2, read_goaway
from test_control import ctl, make_control, wait_socket
from tlsutil import TLS_MARKS, TLS_SO, client_context, make_cert, tls_section

pytestmark = [needs_dlopen, needs_part("metrics", "the metrics (MK_METRICS)")]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """The samples of an exposition: {(name, frozenset(labels)): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def value(samples, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def status_class(status):
    return f"{status // 100}xx"


def method_class(method):
    return "GET" if method in ("GET", "HEAD") else "POST" if method == "POST" else "other"


def metrics_server(make_server, body="", listen=None, tls_port=None):
    """The control plugin with MetricsPath /metrics, the sites a.test and b.test;
    `listen`: the Listen line, "{port}" standing for the server's port;
    `tls_port`: a TLS listener too (the tls plugin, a certificate per site)."""
    srv = make_server()
    if listen:
        srv.set(Listen=listen.format(port=srv.port))
    site_tls = {"a": "", "b": ""}
    if tls_port:
        srv.set(Listen=[f"127.0.0.1:{srv.port}", f"127.0.0.1:{tls_port} tls"])
        certs = srv.dir / "certs"
        srv.site_extra = tls_section(*make_cert(certs, "localhost"))
        site_tls = {n: tls_section(*make_cert(certs, f"{n}.test")) for n in site_tls}
    a, b = srv.dir / "a", srv.dir / "b"
    for d in (a, b):
        d.mkdir()
        (d / "hello.txt").write_text("Hello World!\n")
    srv.extra_sites["a"] = f"[HOST]\n    ServerName a.test\n    DocumentRoot {a}\n" + site_tls["a"]
    srv.extra_sites["b"] = f"[HOST]\n    ServerName b.test\n    DocumentRoot {b}\n" + site_tls["b"]
    conf = "    Socket ctl.sock\n    MetricsPath /metrics\n" + body
    srv = make_control(lambda: srv, body=conf, start=False)
    if tls_port:
        srv.plugins.append(str(TLS_SO))
    srv.start()
    wait_socket(srv.sock)
    return srv


def scrape(srv, accept=None, host="127.0.0.1"):
    headers = {"Accept": accept} if accept else None
    c = Conn(srv.port, host=host)
    try:
        return c.request("GET", "/metrics", headers=headers)
    finally:
        c.close()


def scrape_until(srv, want, timeout=5.0):
    """Scrape until every (name, labels) of `want` has its value (a request
    is counted at its end, a moment after its client has the answer)."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        r = scrape(srv)
        assert r.status == 200, r
        samples = parse(r.body.decode())
        got = {k: value(samples, k[0], **dict(k[1])) for k in want}
        if got == want or time.monotonic() > deadline:
            assert got == want
            return r, samples
        time.sleep(0.05)


class Load:
    """The known mix: what was sent and answered, as the metrics count it."""

    def __init__(self):
        self.requests = {}  # (site, method, code, protocol) -> count
        self.bytes = {}  # the same, for HTTP/1.1 only (the bytes read off the socket)

    def h1(self, srv, method, site, path, body=b""):
        c = Conn(srv.port)
        try:
            r = c.request(method, path, headers={"Host": site}, body=body)
        finally:
            c.close()
        key = (site, method_class(method), status_class(r.status), "http/1.1")
        self.requests[key] = self.requests.get(key, 0) + 1
        # raw_head without its empty line (CRLF CRLF ends it)
        size = len(r.raw_head) + 4 + (0 if method == "HEAD" else len(r.body))
        self.bytes[key] = self.bytes.get(key, 0) + size
        return r

    def h2(self, srv, paths, site, sock=None):
        cl = H2Client(srv.port, sock=sock)
        try:
            for path in paths:
                sid = cl.request(path, authority=site)
                cl.wait([sid])
                st = cl.streams[sid]
                status = int(st["headers"][":status"])
                key = (site, "GET", status_class(status), "h2")
                self.requests[key] = self.requests.get(key, 0) + 1
        finally:
            cl.close()

    def want(self):
        out = {}
        for (site, method, code, proto), n in self.requests.items():
            labels = frozenset({"site": site, "method": method, "code": code,
                                "protocol": proto}.items())
            out[("monkey_http_requests_total", labels)] = n
        for (site, method, code, proto), n in self.bytes.items():
            labels = frozenset({"site": site, "method": method, "code": code,
                                "protocol": proto}.items())
            out[("monkey_http_response_bytes_total", labels)] = n
        for site in {k[0] for k in self.requests}:
            total = sum(n for k, n in self.requests.items() if k[0] == site)
            labels = frozenset({"site": site}.items())
            out[("monkey_http_request_duration_seconds_count", labels)] = total
            out[("monkey_http_time_to_first_byte_seconds_count", labels)] = total
        return out


def h1_mix(srv, load):
    for _ in range(3):
        assert load.h1(srv, "GET", "a.test", "/hello.txt").status == 200
    assert load.h1(srv, "HEAD", "a.test", "/hello.txt").status == 200
    assert load.h1(srv, "GET", "a.test", "/missing").status == 404
    assert load.h1(srv, "POST", "a.test", "/hello.txt", body=b"x").status >= 400
    assert load.h1(srv, "DELETE", "a.test", "/hello.txt").status >= 400
    for _ in range(2):
        assert load.h1(srv, "GET", "b.test", "/hello.txt").status == 200


def test_counters_exact_over_http1(make_server):
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    r, samples = scrape_until(srv, load.want())
    assert r.header("content-type") == "text/plain; version=0.0.4; charset=utf-8"
    assert r.header("cache-control") == "no-store"
    assert value(samples, "monkey_workers") == 2
    # one connection per request of the mix, and the scrapes' (this one included)
    accepted = value(samples, "monkey_connections_accepted_total")
    assert len(load.requests) and accepted >= sum(load.requests.values()) + 1
    assert value(samples, "monkey_connections_refused_total") == 0
    assert value(samples, "monkey_http_requests_total", site="a.test") == 7
    # The histograms: cumulative, the last bucket is the count.
    inf = value(samples, "monkey_http_request_duration_seconds_bucket", site="a.test", le="+Inf")
    assert inf == 7
    assert value(samples, "monkey_http_request_duration_seconds_bucket", site="a.test",
                 le="10") <= inf
    (info,) = [ls for (n, ls) in samples if n == "monkey_build_info"]
    assert dict(info)["version"] and "metrics" in dict(info)["features"].split(",")
    assert value(samples, "process_open_fds") > 0
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_start_time_seconds") > 0


def test_json_status_has_the_same_counters(make_server):
    """The status document's totals are the sums of the metrics' counters:
    read through the socket (no request of its own), they agree exactly."""
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    _, samples = scrape_until(srv, load.want())
    p = ctl("-s", srv.sock, "--json", "status")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    # Every request so far, the scrapes included, has ended: the last scrape
    # is counted once its connection is done, so scrape once more to know.
    _, again = scrape_until(srv, load.want())
    requests = value(again, "monkey_http_requests_total")
    assert doc["requests"] in (requests - 1, requests)  # the last scrape counted, or not yet
    assert sum(w["requests"] for w in doc["per_worker"]) == doc["requests"]
    assert value(samples, "monkey_http_response_bytes_total") <= doc["bytes_sent"]


@H2_MARKS[0]
@H2_MARKS[1]
def test_counters_exact_over_http2(make_server):
    srv = metrics_server(make_server, listen="127.0.0.1:{port} h2c")
    load = Load()
    h1_mix(srv, load)
    load.h2(srv, ["/hello.txt", "/hello.txt", "/hello.txt", "/missing"], "a.test")
    load.h2(srv, ["/hello.txt"], "b.test")
    want = load.want()
    _, samples = scrape_until(srv, want)
    assert value(samples, "monkey_http_requests_total", site="a.test", protocol="h2") == 4
    assert value(samples, "monkey_http_requests_total", site="a.test", protocol="h2",
                 code="4xx") == 1
    assert value(samples, "monkey_http_response_bytes_total", site="a.test", protocol="h2") > 0
    assert value(samples, "monkey_http2_streams_opened_total") >= 5
    # A reload keeps the counts (a site keeps its slot by its name) and adds to them.
    srv.reload()
    assert load.h1(srv, "GET", "a.test", "/hello.txt").status == 200
    _, samples = scrape_until(srv, load.want())
    assert value(samples, "monkey_reloads_total", outcome="done") == 1
    assert value(samples, "monkey_reloads_total", outcome="refused") == 0
    # A refused reload is counted as such, and changes nothing else.
    good = (srv.conf / "sites" / "a").read_text()
    (srv.conf / "sites" / "a").write_text(good + "    Colour blue\n")
    srv.reload()
    _, samples = scrape_until(srv, load.want())
    assert value(samples, "monkey_reloads_total", outcome="refused") == 1


@H2_MARKS[0]
@H2_MARKS[1]
def test_http2_resets_and_goaways(make_server):
    """RST_STREAM both ways, GOAWAY sent by its error code."""
    srv = metrics_server(make_server, listen="127.0.0.1:{port} h2c")
    cl = H2Client(srv.port)
    sid = cl.request("/hello.txt", end=False, authority="a.test")
    cl.conn.reset_stream(sid)
    cl.flush()
    cl.get("/hello.txt")  # the reset has been read by now
    cl.close()
    s = raw_h2(srv)
    s.sendall(frame(6, 0, 0, b"1234567"))  # a PING of 7 bytes (RFC 9113 6.7)
    assert read_goaway(s) == 6  # FRAME_SIZE_ERROR
    s.close()
    want = {("monkey_http2_goaways_sent_total", frozenset({("reason", "FRAME_SIZE_ERROR")})): 1}
    _, samples = scrape_until(srv, want)
    assert value(samples, "monkey_http2_goaways_sent_total", reason="PROTOCOL_ERROR") == 0
    # At least the client's reset: its h2 library resets the stream again for
    # each frame of the answer the server had sent before it saw the first.
    assert value(samples, "monkey_http2_resets_total", direction="received") >= 1


def test_http2_goaways_received(make_server):
    """GOAWAY frames a client sends, by their error code: one from a real
    h2 client (NO_ERROR), raw ones with ENHANCE_YOUR_CALM and with a code
    past RFC 9113's (counted as other)."""
    srv = metrics_server(make_server, listen="127.0.0.1:{port} h2c")
    cl = H2Client(srv.port)
    cl.get("/hello.txt")
    cl.conn.close_connection(error_code=0)
    cl.flush()
    cl.close()
    for code in (11, 11, 0x42):
        s = raw_h2(srv)
        s.sendall(frame(7, 0, 0, (0).to_bytes(4, "big") + code.to_bytes(4, "big")))
        s.settimeout(5 * SLOW)
        while s.recv(65536):  # the server closes once the client said goodbye
            pass
        s.close()
    want = {("monkey_http2_goaways_received_total", frozenset({("reason", "NO_ERROR")})): 1,
            ("monkey_http2_goaways_received_total",
             frozenset({("reason", "ENHANCE_YOUR_CALM")})): 2,
            ("monkey_http2_goaways_received_total", frozenset({("reason", "other")})): 1}
    _, samples = scrape_until(srv, want)
    assert value(samples, "monkey_http2_goaways_received_total") == 4
    assert value(samples, "monkey_http2_goaways_received_total", reason="PROTOCOL_ERROR") == 0


def tls_socket(port, sni, alpn=None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    return client_context(alpn=alpn).wrap_socket(sock, server_hostname=sni)


@TLS_MARKS[0]
@TLS_MARKS[1]
@TLS_MARKS[2]
def test_counters_exact_over_tls(make_server):
    """Requests over TLS count as their protocol: HTTP/1.1, or h2 by ALPN."""
    tls_port = free_port()
    srv = metrics_server(make_server, tls_port=tls_port)
    load = Load()
    for _ in range(3):
        c = Conn(srv.port)
        c.sock.close()
        c.sock = tls_socket(tls_port, "a.test")
        try:
            r = c.request("GET", "/hello.txt", headers={"Host": "a.test"})
        finally:
            c.close()
        assert r.status == 200
        key = ("a.test", "GET", "2xx", "http/1.1")
        load.requests[key] = load.requests.get(key, 0) + 1
        load.bytes[key] = load.bytes.get(key, 0) + len(r.raw_head) + 4 + len(r.body)
    with_h2 = not any(m.args[0] for m in H2_MARKS)
    if with_h2:
        sock = tls_socket(tls_port, "b.test", alpn=["h2"])
        assert sock.selected_alpn_protocol() == "h2"
        load.h2(srv, ["/hello.txt", "/missing"], "b.test", sock=sock)
    _, samples = scrape_until(srv, load.want())
    assert value(samples, "monkey_http_requests_total", site="a.test") == 3
    if with_h2:
        assert value(samples, "monkey_http_requests_total", site="b.test", protocol="h2") == 2


def tls_handshakes(**results):
    return {("monkey_tls_handshakes_total", frozenset({("result", k)})): v
            for k, v in results.items()}


@TLS_MARKS[0]
@TLS_MARKS[1]
@TLS_MARKS[2]
def test_tls_handshakes_by_result(make_server):
    """A full handshake, one resuming its session, two that fail (a client
    offering only TLS 1.0, a handshake record of garbage), counted exactly;
    plain HTTP on the TLS port is no handshake at all."""
    tls_port = free_port()
    srv = metrics_server(make_server, tls_port=tls_port)
    ctx = client_context()  # Python resumes within one context only

    def get(session=None):
        sock = socket.create_connection(("127.0.0.1", tls_port), timeout=5 * SLOW)
        s = ctx.wrap_socket(sock, server_hostname="a.test", session=session)
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200"), data
        out = s.session, s.session_reused
        s.close()
        return out

    session, reused = get()
    assert not reused
    assert get(session)[1]
    scrape_until(srv, tls_handshakes(full=1, resumed=1, failed=0))

    with pytest.raises((ssl.SSLError, OSError)):
        old = socket.create_connection(("127.0.0.1", tls_port), timeout=5 * SLOW)
        try:
            client_context(max_version=ssl.TLSVersion.TLSv1).wrap_socket(
                old, server_hostname="a.test")
        finally:
            old.close()
    raw = socket.create_connection(("127.0.0.1", tls_port), timeout=5 * SLOW)
    raw.sendall(b"\x16\x03\x01\x00\x08" + b"\xff" * 8)  # a handshake record, nonsense
    raw.settimeout(5 * SLOW)
    try:
        while raw.recv(4096):
            pass
    except OSError:
        pass
    raw.close()
    plain = Conn(tls_port)
    try:
        assert plain.request("GET", "/hello.txt", headers={"Host": "a.test"}).status == 400
    finally:
        plain.close()
    scrape_until(srv, tls_handshakes(full=1, resumed=1, failed=2))
    # the status document shows the same counters, from the same hook
    p = ctl("-s", srv.sock, "--json", "status")
    assert p.returncode == 0, p.stderr
    tls = json.loads(p.stdout)["plugins"]["tls"]
    # (its ACME counters, when built with ACME, are tls/test_acme.py's)
    assert {k: v for k, v in tls.items() if not k.startswith("acme_")} == {
        "handshakes": 2, "resumptions": 1, "failures": 2, "plain_http": 1}
    assert b"monkey_tls_acme" not in scrape(srv).body  # no ACME site: no ACME family


def conn_states(**states):
    return {("monkey_connections_in_state", frozenset({("state", k)})): v
            for k, v in states.items()}


@TLS_MARKS[0]
@TLS_MARKS[1]
@TLS_MARKS[2]
def test_connections_by_state(make_server):
    """Connections held open in each state the server knows cheaply, counted
    exactly over the scrape's own (a baseline taken first): idle keep-alive
    ones, a head half sent, a response the client does not read, a TLS
    handshake not begun; all of them gone once closed."""
    tls_port = free_port()
    srv = metrics_server(make_server, tls_port=tls_port)
    (srv.dir / "a" / "big.bin").write_bytes(b"x" * (32 << 20))
    names = ("reading", "writing", "idle", "handshake", "takeover", "closing")
    # The baseline is the scrape's own connection alone: a connection closed a
    # moment ago (the start's probe, an earlier scrape) is counted until the
    # server reads its end, so wait until no other is left.
    deadline = time.monotonic() + 5.0 * SLOW
    while True:
        own = parse(scrape(srv).body.decode())
        base = {n: value(own, "monkey_connections_in_state", state=n) for n in names}
        if sum(base.values()) == 1:
            break
        assert time.monotonic() < deadline, base
        time.sleep(0.05)

    def want(**more):
        return conn_states(**{n: base[n] + more.get(n, 0) for n in names})

    held = []
    for _ in range(3):
        c = Conn(srv.port)
        assert c.request("GET", "/hello.txt", headers={"Host": "a.test"}).status == 200
        held.append(c)
    scrape_until(srv, want(idle=3))
    slow = Conn(srv.port)
    slow.send(b"GET /hello.txt HTTP/1.1\r\nHost: a.te")
    held.append(slow)
    stuck = Conn(srv.port)
    stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.send(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\n\r\n")
    held.append(stuck)
    tcp = socket.create_connection(("127.0.0.1", tls_port), timeout=5 * SLOW)
    _, samples = scrape_until(srv, want(idle=3, reading=1, writing=1, handshake=1))
    assert sum(value(samples, "monkey_connections_in_state", state=n) for n in names) == \
        value(samples, "monkey_connections_open")
    tcp.close()
    for c in held:
        c.close()
    scrape_until(srv, want())


def test_openmetrics_when_asked(make_server):
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    scrape_until(srv, load.want())
    r = scrape(srv, accept="application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    assert r.status == 200
    assert r.header("content-type") == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    text = r.body.decode()
    assert text.endswith("# EOF\n")
    assert "# TYPE monkey_http_requests counter\n" in text
    assert "# TYPE monkey_build info\n" in text
    assert "monkey_http_requests_total{" in text
    # Without that Accept: the text format.
    r = scrape(srv, accept="text/plain")
    assert r.header("content-type").startswith("text/plain; version=0.0.4")
    assert "# EOF" not in r.body.decode()


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (Debian's prometheus)")
def test_promtool_check_metrics(make_server):
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    r, _ = scrape_until(srv, load.want())
    p = subprocess.run(["promtool", "check", "metrics"], input=r.body, capture_output=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == b"" and p.stderr == b"", p.stdout + p.stderr


def prometheus_query(port, query):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5 * SLOW) as f:
        doc = json.loads(f.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus (Debian's package)")
def test_prometheus_scrapes_and_answers(make_server, tmp_path):
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    scrape_until(srv, load.want())
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n  - job_name: monkey\n    metrics_path: /metrics\n"
                   f"    static_configs:\n      - targets: ['127.0.0.1:{srv.port}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        queries = {
            'sum(monkey_http_requests_total{site="a.test"})': 7,
            'sum(monkey_http_requests_total{site="a.test",code="4xx"})': 3,
            'sum(monkey_http_requests_total{site="b.test"})': 2,
            'monkey_http_request_duration_seconds_count{site="a.test"}': 7,
            'monkey_workers': 2,
            'up{job="monkey"}': 1,
        }
        deadline = time.monotonic() + 60 * SLOW
        got = {}
        while time.monotonic() < deadline:
            try:
                got = {q: [float(x["value"][1]) for x in prometheus_query(port, q)]
                       for q in queries}
            except OSError:
                got = {}
            if got and all(got[q] == [v] for q, v in queries.items()):
                break
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.5)
        assert all(got.get(q) == [v] for q, v in queries.items()), got
        # A rate over the scrapes of a steady server is 0; a quantile of its
        # histogram falls in the first bucket (every request here is fast).
        (r,) = prometheus_query(port, 'histogram_quantile(0.5, sum by (le) '
                                      '(monkey_http_request_duration_seconds_bucket'
                                      '{site="a.test"}))')
        assert 0 <= float(r["value"][1]) <= 0.005
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_refused_connections_counted(make_server):
    """Over MaxConnections a connection is answered 503 and counted refused."""
    srv = make_server()
    srv.set(MaxConnections=2, Workers=1)
    srv = metrics_server(lambda: srv)
    time.sleep(0.3 * SLOW)  # let the start-up probe connection close
    held = [Conn(srv.port)]
    assert held[0].request("GET", "/hello.txt").status == 200
    extra = [Conn(srv.port), Conn(srv.port)]
    answers = []
    for c in extra:
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        answers.append(c.read_response().status)
    # the first extra one took the last place, the second was refused
    assert answers == [200, 503]
    extra[1].close()
    # a refused one that sends nothing stays open, in no state: the states
    # add up to the open connections without it
    quiet = Conn(srv.port)
    extra[0].request("GET", "/metrics")  # a scrape in the place it holds
    deadline = time.monotonic() + 5 * SLOW
    while True:
        r = extra[0].request("GET", "/metrics")
        samples = parse(r.body.decode())
        if value(samples, "monkey_connections_refused_total") == 2 or \
                time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert value(samples, "monkey_connections_refused_total") == 2
    assert value(samples, "monkey_connections_accepted_total") >= 2
    assert value(samples, "monkey_connections_open") == 2
    assert value(samples, "monkey_connections_in_state") == 2
    for c in held + extra[:1] + [quiet]:
        c.close()


def test_refused_outside_http_allow(make_server):
    srv = metrics_server(make_server, body="    HttpAllow 10.0.0.0/8\n")
    assert scrape(srv).status == 403


def local_address():
    """A non-loopback IPv4 address of this machine, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_refused_to_non_loopback_by_default(make_server):
    addr = local_address()
    if not addr:
        pytest.skip("no non-loopback address on this machine")
    srv = metrics_server(make_server, listen="0.0.0.0:{port}")
    assert scrape(srv, host=addr).status == 403
    assert scrape(srv).status == 200


def test_metrics_path_checked(make_server):
    for body, reason in (("    MetricsPath metrics\n", "MetricsPath"),
                         ("    HttpPath /m\n    MetricsPath /m\n", "HttpPath too")):
        srv = make_control(make_server, body="    Socket ctl.sock\n" + body, start=False)
        err = srv.run_expect_failure()
        assert reason in err, err



def metric_table(path):
    text = path.read_text()
    start = text.index("| metric | type | labels | meaning |")
    return text[start:text.index("\n\n", start)]


def test_documented_table_is_what_is_served(make_server):
    """One table of the metrics, in the control plugin's README and in
    docs/observability.md alike; every name in it is served (the supervisor's
    only under a supervisor, the TLS handshakes only with the tls plugin,
    process_max_fds only with a limit, the ACME figures only with ACME sites)."""
    repo = Path(__file__).resolve().parents[3]
    readme = metric_table(repo / "plugins" / "control" / "README.md")
    assert readme == metric_table(repo / "docs" / "observability.md")
    names = re.findall(r"^\| `([a-z0-9_]+)` \|", readme, re.M)
    assert len(names) >= 10
    srv = metrics_server(make_server)
    load = Load()
    h1_mix(srv, load)
    r, samples = scrape_until(srv, load.want())
    text = r.body.decode()
    served = {n for (n, _) in samples}
    for name in names:
        if name in ("monkey_supervisor_restarts_total", "monkey_tls_handshakes_total") or \
                name.startswith("monkey_tls_acme_"):  # with ACME sites only: tls/test_acme.py
            continue
        if name.startswith("monkey_ratelimit_") and built_without("rules"):
            continue
        assert name in served or f"{name}_count" in served, name
        assert f"# TYPE {name} " in text, name
    undocumented = {re.sub(r"_(bucket|sum|count)$", "", n) for n in served} - set(names)
    assert not undocumented, undocumented
