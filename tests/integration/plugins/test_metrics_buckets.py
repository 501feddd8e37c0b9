"""Tier 12: the histograms' buckets (MetricsBuckets) and the upstream time.

Known slow requests (the proxy's upstream answers /sleep after 300 ms) and
known fast ones (a local file) go to a server whose buckets are set; the
scrape then has exactly the slow ones between the bounds around 300 ms, in
both histograms, and the fast ones below the first bound (the margins are
wide: 300 ms against bounds of 200 ms and 2 s). The same with a Duda route
that waits (the async example's /async/wait: parked, continued by a timer
100 ms later) against bounds of 50 ms and 2 s. The same requests' access
log lines carry the upstream time (%{upstream}D, `upstream_us` of the json
format). The plugins' histograms of default bounds (the proxy's time to
first byte, the cgi plugin's duration) take the same buckets, with the slow
requests in theirs, and the real Prometheus, scraping the server through
the load, gives the quantiles those buckets make (exact: the linear
interpolation within a known bucket) and the count the load added. Bad
MetricsBuckets values are refused with their file
and line; a reload keeps the bounds in force, the plugins' too.
"""

import json
import shutil
import subprocess
import time

import pytest

from conftest import ROOT, SLOW, STATIC, free_port, needs_dlopen, needs_part, wait_for
from test_control import make_control, wait_socket
from test_metrics import parse, prometheus_query, scrape, scrape_until, value
from test_proxy import PROXY_SO, upstreams  # noqa: F401 (a fixture)
from tlsutil import LOGGER_SO

pytestmark = [needs_dlopen, needs_part("metrics", "the metrics (MK_METRICS)"),
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]

TTFB = "monkey_http_time_to_first_byte_seconds"
DURATION = "monkey_http_request_duration_seconds"
PROXY_TTFB = "monkey_proxy_upstream_time_to_first_byte_seconds"
CGI_DURATION = "monkey_cgi_backend_duration_seconds"
DEFAULT_LES = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
               "+Inf"]
SLOW_REQUESTS = 3
FAST_REQUESTS = 4


def bucket_server(make_server, upstream, buckets=None, fmt="custom %U %{upstream}D %D"):
    """The control plugin (MetricsPath), the proxy (/sleep to `upstream`), the logger."""
    srv = make_server()
    srv.logs = srv.dir / "logs"
    srv.logs.mkdir()
    srv.site_extra = (f"[PROXY]\n    Pass /sleep {upstream.addr}\n"
                      f"[LOGGER]\n    AccessLog {srv.logs}/access.log\n    Format {fmt}\n")
    srv = make_control(lambda: srv, body="    Socket ctl.sock\n    MetricsPath /metrics\n",
                       start=False, Workers=1)
    if buckets:
        srv.set(MetricsBuckets=buckets)
    srv.plugins += [str(PROXY_SO), str(LOGGER_SO)]
    srv.file("hello.txt", "Hello World!\n")
    srv.start()
    wait_socket(srv.sock)
    return srv


def load(srv):
    """The slow and the fast requests, one connection each (all answered 200)."""
    for _ in range(SLOW_REQUESTS):
        c = srv.conn(timeout=10 * SLOW)
        try:
            assert c.request("GET", "/sleep?s=0.3").status == 200
        finally:
            c.close()
    for _ in range(FAST_REQUESTS):
        assert srv.get("/hello.txt").status == 200


def buckets_of(samples, name):
    """{le: cumulative count} of the default site's histogram `name`."""
    return {dict(ls)["le"]: v for (n, ls), v in samples.items()
            if n == name + "_bucket" and dict(ls).get("site") == "localhost"}


def plugin_buckets(samples, name):
    """{le: cumulative count} of a plugin's histogram `name` (its one series), in the order
    served."""
    return {dict(ls)["le"]: v for (n, ls), v in samples.items() if n == name + "_bucket"}


def test_default_buckets(make_server, upstreams):
    srv = bucket_server(make_server, upstreams("a"))
    assert srv.get("/hello.txt").status == 200
    assert srv.get("/sleep?s=0").status == 200
    _, samples = scrape_until(srv, {(DURATION + "_count", frozenset({("site", "localhost")})): 2})
    les = buckets_of(samples, DURATION)
    assert sorted(les, key=lambda le: float(le)) == DEFAULT_LES
    assert list(plugin_buckets(samples, PROXY_TTFB)) == DEFAULT_LES


def test_slow_requests_in_their_buckets(make_server, upstreams):
    srv = bucket_server(make_server, upstreams("a"), buckets="0.05 0.2 2")
    load(srv)
    # the requests so far: the slow and fast ones (a scrape counts once it ended)
    n = SLOW_REQUESTS + FAST_REQUESTS
    _, samples = scrape_until(srv, {(DURATION + "_count", frozenset({("site", "localhost")})): n})
    for name in (TTFB, DURATION):
        les = buckets_of(samples, name)
        assert list(les) == ["0.05", "0.2", "2", "+Inf"], les
        assert les["0.05"] == FAST_REQUESTS, (name, les)
        assert les["0.2"] == FAST_REQUESTS, (name, les)  # none of the slow ones under 200 ms
        assert les["2"] == n and les["+Inf"] == n, (name, les)
        assert value(samples, name + "_sum", site="localhost") >= 0.3 * SLOW_REQUESTS
    # the upstream time of each slow request: its 300 ms, within its duration
    path = srv.logs / "access.log"
    assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= n, 5 * SLOW)
    lines = [ln.split() for ln in path.read_text().splitlines()]
    slow = [(int(u), int(d)) for p, u, d in lines if p == "/sleep"]
    assert len(slow) == SLOW_REQUESTS
    for up, dur in slow:
        assert 300000 <= up <= dur, (up, dur)
    assert [u for p, u, _ in lines if p == "/hello.txt"] == ["-"] * FAST_REQUESTS
    # the proxy's histogram (declared with the default bounds) has the server's, and the
    # slow requests' 300 ms at least in (0.2, 2]
    les = plugin_buckets(samples, PROXY_TTFB)
    assert list(les) == ["0.05", "0.2", "2", "+Inf"], les
    assert (les["0.2"], les["2"], les["+Inf"]) == (0, SLOW_REQUESTS, SLOW_REQUESTS), les


@pytest.mark.skipif(not (PROXY_SO.parent / "monkey-cgi.so").exists(),
                    reason="built without the cgi plugin")
def test_cgi_duration_takes_the_buckets(make_server):
    srv = make_server()
    srv.file("cgi-bin/slow.cgi", '#!/bin/sh\nsleep 0.3\nprintf "Content-Type: text/plain\\n\\n'
             'slow\\n"\n', mode=0o755)
    srv.file("cgi-bin/fast.cgi", '#!/bin/sh\nprintf "Content-Type: text/plain\\n\\nfast\\n"\n',
             mode=0o755)
    srv.site_extra = "[CGI]\n    Match \\.cgi$\n"
    srv = make_control(lambda: srv, body="    Socket ctl.sock\n    MetricsPath /metrics\n",
                       start=False, Workers=1)
    srv.set(MetricsBuckets="0.2 10")
    srv.plugins.append(str(PROXY_SO.parent / "monkey-cgi.so"))
    srv.start()
    wait_socket(srv.sock)
    for path, n in (("/cgi-bin/slow.cgi", 2), ("/cgi-bin/fast.cgi", 1)):
        for _ in range(n):
            r = srv.get(path)
            assert r.status == 200, r
    _, samples = scrape_until(srv, {(CGI_DURATION + "_count",
                                     frozenset({("backend", "(exec)")})): 3})
    les = plugin_buckets(samples, CGI_DURATION)
    assert list(les) == ["0.2", "10", "+Inf"], les
    assert (les["0.2"], les["10"], les["+Inf"]) == (1, 3, 3), les


def test_json_format_has_the_upstream_time(make_server, upstreams):
    srv = bucket_server(make_server, upstreams("a"), fmt="json")
    c = srv.conn(timeout=10 * SLOW)
    try:
        assert c.request("GET", "/sleep?s=0.1").status == 200
    finally:
        c.close()
    assert srv.get("/hello.txt").status == 200
    path = srv.logs / "access.log"
    assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= 2, 5 * SLOW)
    a, b = (json.loads(ln) for ln in path.read_text().splitlines()[:2])
    assert a["path"] == "/sleep" and 100000 <= a["upstream_us"] <= a["duration_us"], a
    assert b["path"] == "/hello.txt" and b["upstream_us"] is None, b
    assert {"duration_us", "request_id", "trace_id"} <= set(b)


def test_reload_keeps_the_buckets(make_server, upstreams):
    srv = bucket_server(make_server, upstreams("a"), buckets="0.1 1")
    srv.set(MetricsBuckets="0.5")
    srv.write_conf()
    srv.reload()
    assert wait_for(lambda: "MetricsBuckets changes only on restart" in srv.stderr_text(),
                    5 * SLOW)
    samples = parse(scrape(srv).body.decode())
    assert list(buckets_of(samples, DURATION)) in ([], ["0.1", "1", "+Inf"])
    assert srv.get("/hello.txt").status == 200
    _, samples = scrape_until(srv, {(DURATION + "_count", frozenset({("site", "localhost")})): 2})
    assert list(buckets_of(samples, DURATION)) == ["0.1", "1", "+Inf"]
    # the plugins declare their families again at the reload: the same bounds
    assert srv.get("/sleep?s=0").status == 200
    samples = {}
    assert wait_for(lambda: plugin_buckets(samples.update(parse(scrape(srv).body.decode())) or
                                           samples, PROXY_TTFB).get("+Inf") == 1, 5 * SLOW)
    assert list(plugin_buckets(samples, PROXY_TTFB)) == ["0.1", "1", "+Inf"]


def prometheus_answers(port, queries, proc, log):
    """Ask Prometheus until every query's one sample is its value (within 1e-9); the last
    answers."""
    deadline = time.monotonic() + 60 * SLOW
    got = {}
    while time.monotonic() < deadline:
        try:
            got = {q: [float(x["value"][1]) for x in prometheus_query(port, q)] for q in queries}
        except OSError:
            got = {}
        if got and all(len(got[q]) == 1 and abs(got[q][0] - v) < 1e-9
                       for q, v in queries.items()):
            break
        assert proc.poll() is None, log.read_text()
        time.sleep(0.5)
    return got


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus (Debian's package)")
def test_prometheus_quantiles_of_the_slow_requests(make_server, upstreams, tmp_path):
    srv = bucket_server(make_server, upstreams("a"), buckets="0.2 2")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n  - job_name: monkey\n    metrics_path: /metrics\n"
                   f"    static_configs:\n      - targets: ['127.0.0.1:{srv.port}']\n")
    log_path = tmp_path / "prometheus.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    requests = "sum(monkey_proxy_upstream_requests_total)"
    try:
        # Prometheus has the proxy's series at 0 before the load (declared at the start)
        got = prometheus_answers(port, {requests: 0, 'up{job="monkey"}': 1}, proc, log_path)
        assert got.get(requests) == [0], got
        for _ in range(SLOW_REQUESTS):
            c = srv.conn(timeout=10 * SLOW)
            try:
                assert c.request("GET", "/sleep?s=0.3").status == 200
            finally:
                c.close()
        ttfb = f"sum by (le) ({PROXY_TTFB}_bucket)"
        queries = {
            requests: SLOW_REQUESTS,
            # what the load added, as Prometheus saw it (rate() would extrapolate)
            "sum(max_over_time(monkey_proxy_upstream_requests_total[1h]) - "
            "min_over_time(monkey_proxy_upstream_requests_total[1h]))": SLOW_REQUESTS,
            f"sum({PROXY_TTFB}_count)": SLOW_REQUESTS,
            # all 3 in (0.2, 2]: the quantile q is 0.2 + 1.8 q
            f"histogram_quantile(0.5, {ttfb})": 0.2 + 1.8 * 0.5,
            f"histogram_quantile(0.9, {ttfb})": 0.2 + 1.8 * 0.9,
        }
        got = prometheus_answers(port, queries, proc, log_path)
        for q, v in queries.items():
            assert len(got.get(q, [])) == 1 and abs(got[q][0] - v) < 1e-9, (q, got)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.parametrize("buckets, reason", [
    ("0.5 0.1", "must ascend"),
    ("0.1 0.1", "must ascend"),
    ("0", "not a bound"),
    ("-1", "not a bound"),
    ("abc", "not a bound"),
    ("0.0000001", "not a bound"),  # below a microsecond
    ("3601", "not a bound"),
    ("1e3", "not a bound"),
    (" ".join(str(i) for i in range(1, 13)), "at most 11 bounds"),
])
def test_bad_buckets_refused_with_their_line(make_server, buckets, reason):
    srv = make_server()
    srv.set(MetricsBuckets=buckets)
    err = srv.run_expect_failure()
    assert reason in err and "MetricsBuckets" in err, err
    line = 1 + list(srv.server_conf).index("MetricsBuckets") + 1
    assert f"monkey.conf:{line}" in err, err


@pytest.mark.skipif(STATIC, reason="static binary: no shared objects")
def test_duda_route_that_waits_in_its_bucket(make_server, tmp_path):
    from test_duda import PLUGIN, build, duda_server, example
    if not PLUGIN.exists():
        pytest.skip("built without Duda")
    services = build(ROOT / "examples" / "async", tmp_path / "services")
    srv = duda_server(make_server, services, [example("async")], workers=1)
    srv = make_control(lambda: srv, body="    Socket ctl.sock\n    MetricsPath /metrics\n",
                       start=False)
    srv.plugins.insert(0, str(PLUGIN))
    srv.set(MetricsBuckets="0.05 2")
    srv.start()
    wait_socket(srv.sock)
    for _ in range(SLOW_REQUESTS):
        r = srv.get("/async/wait")
        assert (r.status, r.body) == (200, b"continued by a timer\n")
    for _ in range(FAST_REQUESTS):
        assert srv.get("/site.txt").status == 200
    n = SLOW_REQUESTS + FAST_REQUESTS
    _, samples = scrape_until(srv, {(DURATION + "_count", frozenset({("site", "localhost")})): n})
    for name in (TTFB, DURATION):
        les = buckets_of(samples, name)
        assert les == {"0.05": FAST_REQUESTS, "2": n, "+Inf": n}, (name, les)
