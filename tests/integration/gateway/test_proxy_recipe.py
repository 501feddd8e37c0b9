"""docs/load-balancer.md, "Monkey in front of application servers": its
two configuration blocks run as written (only the two servers' ports are
changed to free ones), and what the section promises holds: the
application's paths balanced over both servers, the rest served locally,
a server failing its health checks taken out and brought back, a refused
server's requests retried on the other, 502 at once with both gone, the
client's address in X-Forwarded-For and Forwarded."""

import json
import re
import time
from pathlib import Path

import pytest

from conftest import SLOW
from gwutil import plugin_status, with_control
from test_proxy import PROXY_SO, pytestmark, upstreams  # noqa: F401
from test_proxy_health import set_health, wait_for


DOC = Path(__file__).resolve().parents[3] / "docs" / "load-balancer.md"


def recipe_blocks():
    text = DOC.read_text()
    section = text.split("## Monkey in front of application servers", 1)[1]
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 2, "the section lost its configuration blocks"
    return blocks[0], blocks[1]


def test_the_recipe_as_written(make_server, upstreams):
    proxy_conf, site = recipe_blocks()
    assert "127.0.0.1:3001" in proxy_conf and "127.0.0.1:3002" in proxy_conf
    a, b = upstreams("a"), upstreams("b")
    proxy_conf = proxy_conf.replace("127.0.0.1:3001", a.addr).replace("127.0.0.1:3002", b.addr)
    srv = make_server()
    srv.plugins = [str(PROXY_SO)]
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "proxy.conf").write_text(proxy_conf)
    srv.site_extra = site
    srv.file("index.html", "the site's own\n")
    with_control(srv).start()

    def api(n=6):
        names = []
        for _ in range(n):
            r = srv.get("/api/echo")
            assert r.status == 200, (r.status, srv.stderr_text())
            names.append(json.loads(r.body)["name"])
        return names

    r = srv.get("/index.html")
    assert r.status == 200 and r.body == b"the site's own\n"
    assert a.stats()["requests"] + b.stats()["requests"] == 2  # the two /stats alone
    doc = json.loads(srv.get("/api/echo").body)
    fields = {k.lower(): v for k, v in doc["fields"]}
    assert fields["x-forwarded-for"] == "127.0.0.1"
    assert fields["forwarded"].startswith("for=127.0.0.1")
    # concurrent requests spread over both (leastconn)
    c1, c2 = srv.conn(), srv.conn()
    c1.send(b"GET /api/sleep?s=0.5 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(0.1 * SLOW)
    c2.send(b"GET /api/sleep?s=0.5 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    names = {json.loads(c.read_response().body)["name"] for c in (c1, c2)}
    c1.close()
    c2.close()
    assert names == {"a", "b"}
    # b fails its checks: out within two of them (2 s apart), back after two passes
    set_health(b, 500)
    assert wait_for(lambda: plugin_status(srv, "proxy")["server1_healthy"] == 0, 8)
    assert set(api()) == {"a"}
    set_health(b, 200)
    assert wait_for(lambda: plugin_status(srv, "proxy")["server1_healthy"] == 1, 8)
    # a refuses: its requests go to b, the client sees no error
    a.stop()
    assert set(api()) == {"b"}
    b.stop()
    t = time.monotonic()
    assert srv.get("/api/echo").status == 502
    assert time.monotonic() - t < 2.5 * SLOW
