"""The proxy in front of the application servers people run, each started
by the test on a free port and stopped by PID: node's http module
(chunked answers, keep-alive), Python's http.server (HTTP/1.0, answers
that end with the connection), and Monkey itself (static files, HEAD,
ranges, 304)."""

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import free_port, wait_port
from test_proxy import pytestmark, proxy_server


NODE_APP = textwrap.dedent("""
    const http = require('http');
    let conns = 0;
    const srv = http.createServer((req, res) => {
      let body = [];
      req.on('data', (c) => body.push(c));
      req.on('end', () => {
        if (req.url.startsWith('/stream')) {
          res.setHeader('Content-Type', 'text/plain');
          for (let i = 0; i < 100; i++) res.write('line ' + i + '\\n');
          res.end();
          return;
        }
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({server: 'node', method: req.method, url: req.url,
                                headers: req.headers, body: Buffer.concat(body).toString(),
                                conns: conns}));
      });
    });
    srv.on('connection', () => conns++);
    srv.keepAliveTimeout = 60000;
    srv.listen(parseInt(process.argv[2]), '127.0.0.1');
""")

PY_APP = textwrap.dedent("""
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # HTTP/1.0, no Content-Length: the body ends with the connection
            out = json.dumps({"server": "python", "path": self.path,
                              "host": self.headers.get("Host")}).encode() * 50
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


@pytest.fixture
def app(tmp_path):
    procs = []

    def start(cmd, port):
        p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL)
        procs.append(p)
        if not wait_port(port, proc=p):
            raise RuntimeError(f"{cmd[0]} did not start")
        return f"127.0.0.1:{port}"

    yield start
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.skipif(shutil.which("node") is None, reason="no node (tools/deps.sh test)")
def test_node_http(make_server, app, tmp_path):
    script = tmp_path / "app.js"
    script.write_text(NODE_APP)
    port = free_port()
    addr = app(["node", str(script), str(port)], port)
    srv = proxy_server(make_server, site=f"    Pass / {addr}\n").start()
    c = srv.conn()
    docs = [json.loads(c.request("GET", f"/items/{i}?q=1").body) for i in range(5)]
    assert all(d["server"] == "node" and d["method"] == "GET" for d in docs)
    assert docs[-1]["url"] == "/items/4?q=1"
    assert docs[-1]["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert len({d["conns"] for d in docs}) == 1  # no new connection after the first
    r = c.request("POST", "/form", body=b"a=1&b=2",
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert json.loads(r.body)["body"] == "a=1&b=2"
    r = c.request("GET", "/stream")
    assert r.status == 200 and r.body == b"".join(b"line %d\n" % i for i in range(100))
    c.close()


def test_python_http_server_http10(make_server, app, tmp_path):
    script = tmp_path / "app.py"
    script.write_text(PY_APP)
    port = free_port()
    addr = app([sys.executable, str(script), str(port)], port)
    srv = proxy_server(make_server, site=f"    Pass / {addr}\n").start()
    c = srv.conn()
    for i in range(3):  # the client keeps its connection though the upstream's ends each answer
        r = c.request("GET", f"/p{i}", headers={"Host": "app.example"})
        assert r.status == 200, r
        one = json.dumps({"server": "python", "path": f"/p{i}", "host": "app.example"}).encode()
        assert r.body == one * 50
    c.close()


def test_monkey_as_the_upstream(make_server):
    up = make_server(name="upstream")
    data = bytes(range(256)) * 4096  # 1 MiB
    up.file("up/big.bin", data)  # the target's path is the client's: /up/...
    up.file("up/page.html", "<p>from the upstream</p>\n")
    up.start()
    srv = proxy_server(make_server, site=f"    Pass /up 127.0.0.1:{up.port}\n").start()
    c = srv.conn()
    r = c.request("GET", "/up/big.bin")
    assert r.status == 200 and hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest()
    r = c.request("HEAD", "/up/big.bin")
    assert r.status == 200 and r.header("Content-Length") == str(len(data)) and r.body == b""
    r = c.request("GET", "/up/big.bin", headers={"Range": "bytes=10-19"})
    assert r.status == 206 and r.body == data[10:20]
    r = c.request("GET", "/up/page.html")
    etag = r.header("ETag")
    assert r.status == 200 and etag
    r = c.request("GET", "/up/page.html", headers={"If-None-Match": etag})
    assert r.status == 304 and r.body == b""
    r = c.request("GET", "/up/missing")
    assert r.status == 404
    c.close()
