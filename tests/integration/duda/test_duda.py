"""Duda (docs/duda.md): services built with the `duda` helper from examples/
and tests/duda/, loaded by the duda plugin and driven over HTTP."""

import email.utils
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, Conn, free_port, serving, wait_for
from h2util import H2_MARKS, H2Client
from installutil import cmake_install

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    # Services are built with the host's compiler; an emulated (cross-built)
    # server cannot load them.
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
]

DUDA = BUILD / "bin" / "duda"
PLUGIN = BUILD / "plugins" / "monkey-duda.so"


def duda(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(DUDA), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout * SLOW, env=e)


def build(src, out, env=None):
    p = duda("build", src, "-o", out, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """Every example and test service, built once into one ServicesRoot."""
    out = tmp_path_factory.mktemp("services")
    for name in ("hello", "query_string", "post", "cookies_sessions", "data_files", "streaming",
                 "async"):
        build(ROOT / "examples" / name, out)
    for name in ("misuse", "objects", "version"):
        build(ROOT / "tests" / "duda" / name, out)
    return out


def web_service(name, root=False, base=None, **dirs):
    lines = ["[WEB_SERVICE]", f"    Name {name}", f"    Root {'On' if root else 'Off'}"]
    for key, value in dirs.items():
        lines.append(f"    {key} {value}")
    return "\n".join(lines) + "\n"


def duda_server(make_server, services, sections, workers=2):
    srv = make_server()
    srv.set(Workers=workers)
    srv.plugins = [str(PLUGIN)]
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "duda.conf").write_text(f"[DUDA]\n    ServicesRoot {services}\n")
    srv.site_extra = "\n" + "".join(sections)
    srv.file("site.txt", "the site's own file\n")
    return srv


def example(name):
    d = ROOT / "examples" / name
    dirs = {"DocumentRoot": d / "html", "ConfDir": d / "conf", "DataDir": d / "data"}
    return web_service(name, **{k: v for k, v in dirs.items() if v.is_dir()})


@pytest.fixture
def hello(make_server, services):
    srv = duda_server(make_server, services, [example("hello")])
    srv.start()
    return srv


# ---- routing -------------------------------------------------------------------


def test_hello_routes_and_parameter(hello):
    r = hello.get("/hello/hello")
    assert (r.status, r.body) == (200, b"Hello World!\n")
    assert r.header("content-type") == "text/plain"
    assert hello.get("/hello/users/42").body == b"user 42\n"
    r = hello.get("/hello/users/x")
    assert (r.status, r.body) == (400, b"not a number: x\n")


def test_root_callback_and_whole_segment(hello):
    assert hello.get("/hello").body == b"hello's root\n"
    assert hello.get("/hello/").body == b"hello's root\n"
    # The original compared a prefix: /helloworld went to hello.
    assert hello.get("/helloworld").status == 404
    assert hello.get("/hellox/hello").status == 404


def test_static_files_service_then_site(hello):
    r = hello.get("/hello/index.html")
    assert r.status == 200
    assert r.body == (ROOT / "examples/hello/html/index.html").read_bytes()
    assert r.header("content-type") == "text/html"
    # Not in the service's html/: the site's files come next.
    assert hello.get("/site.txt").body == b"the site's own file\n"
    assert hello.get("/hello/missing.txt").status == 404
    assert hello.get("/hello/../site.txt").body == b"the site's own file\n"


def test_method_filter(hello):
    r = hello.request("POST", "/hello/hello", body=b"x")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD, OPTIONS"
    r = hello.request("HEAD", "/hello/hello")
    assert (r.status, r.header("content-length")) == (200, "13")


def test_dashboard(hello):
    hello.get("/hello/hello")
    r = hello.get("/hello/dashboard")
    assert r.status == 200
    body = r.body.decode()
    assert "<h1>Hello, the first Duda service</h1>" in body
    assert "<code>/hello/users/:id</code>" in body
    assert re.search(r"resident: \d+ KiB", body)
    assert re.search(r"requests: [1-9]", body)


def test_two_services_on_one_site(make_server, services):
    srv = duda_server(make_server, services, [example("hello"), example("query_string")])
    srv.start()
    assert srv.get("/hello/hello").body == b"Hello World!\n"
    assert srv.get("/query_string/?name=a").body.startswith(b"name: a\n")
    assert srv.get("/query_string/hello").status == 404


def test_root_on(make_server, services):
    srv = duda_server(make_server, services,
                      [web_service("hello", root=True, DocumentRoot=ROOT / "examples/hello/html")])
    srv.start()
    assert srv.get("/hello").body == b"Hello World!\n"
    assert srv.get("/").body == b"hello's root\n"
    assert srv.get("/users/7").body == b"user 7\n"
    assert srv.get("/index.html").status == 200
    assert srv.get("/site.txt").body == b"the site's own file\n"
    assert srv.get("/hello/hello").status == 404


def test_disabled_service(make_server, services):
    srv = duda_server(make_server, services, [example("hello") + "    Enabled Off\n"])
    srv.start()
    assert srv.get("/hello/hello").status == 404


# ---- objects ---------------------------------------------------------------------


def test_query_string(make_server, services):
    srv = duda_server(make_server, services, [example("query_string")])
    srv.start()
    r = srv.get("/query_string/?x=1&name=J%C3%BCrgen+K&y")
    assert r.body.decode() == "name: Jürgen K\nraw: J%C3%BCrgen+K\npairs: 3\n"
    assert srv.get("/query_string/").status == 400


def test_post_form_json_and_stream(make_server, services):
    srv = duda_server(make_server, services, [example("post")])
    srv.start()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = srv.request("POST", "/post/form", headers=form,
                    body=b"a=1&name=caf%C3%A9+au+lait&e=&p=100%25%zz%4")
    # a '%' without two hexadecimal digits stays as it is
    assert r.body.decode() == "a: 1\nname: café au lait\ne: \np: 100%%zz%4\n"
    doc = b'{"id": 7, "tags": ["x", "y"]}'
    r = srv.request("POST", "/post/json", headers={"Content-Type": "application/json; charset=utf-8"},
                    body=doc)
    assert (r.status, r.body, r.header("content-type")) == (200, doc, "application/json")
    assert srv.request("POST", "/post/json", headers=form, body=doc).status == 415
    # A streamed body, chunked and large: size and checksum computed as it arrives.
    data = bytes(range(256)) * 1024
    s = 0
    for b in data:
        s = (s * 31 + b) % 1000000007
    c = Conn(srv.port)
    chunks = b"".join(b"%x\r\n" % len(data[i:i + 10000]) + data[i:i + 10000] + b"\r\n"
                      for i in range(0, len(data), 10000))
    c.send(b"POST /post/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
           chunks + b"0\r\n\r\n")
    r = c.read_response()
    c.close()
    assert r.body == f"size {len(data)} sum {s}\n".encode()


def test_five_chunked_100k_uploads_on_one_connection(make_server, services):
    # five streamed uploads of 100 KB, chunked, on one keep-alive connection
    # (a report once said such a series got a connection reset; it did not
    # reproduce)
    srv = duda_server(make_server, services, [example("post")])
    srv.start()
    c = Conn(srv.port)
    for i in range(5):
        data = os.urandom(100 * 1024)
        s = 0
        for b in data:
            s = (s * 31 + b) % 1000000007
        chunks = b"".join(b"%x\r\n" % len(data[j:j + 8192]) + data[j:j + 8192] + b"\r\n"
                          for j in range(0, len(data), 8192))
        c.send(b"POST /post/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               chunks + b"0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == f"size {len(data)} sum {s}\n".encode(), i
    c.close()


def test_cookies_and_sessions(make_server, services):
    srv = duda_server(make_server, services, [example("cookies_sessions")])
    srv.start()
    assert srv.get("/cookies_sessions/me").status == 401
    r = srv.request("POST", "/cookies_sessions/login?user=alice")
    assert r.status == 200
    set_cookie = r.header("set-cookie")
    m = re.match(r"sid=([0-9a-f]{32}); Path=/; Expires=[^;]+; Max-Age=3600; SameSite=Lax; HttpOnly$",
                 set_cookie)
    assert m, set_cookie
    sid = m.group(1)
    # Another login gets another random id.
    other = srv.request("POST", "/cookies_sessions/login?user=bob").header("set-cookie")
    assert other[4:36] != sid
    # Any worker sees the session: several connections.
    for _ in range(6):
        r = srv.get("/cookies_sessions/me", headers={"Cookie": f"a=b; sid={sid}"})
        assert (r.status, r.body) == (200, b"alice\n")
    assert srv.get("/cookies_sessions/me", headers={"Cookie": "sid=" + "0" * 32}).status == 401
    r = srv.request("POST", "/cookies_sessions/logout", headers={"Cookie": f"sid={sid}"})
    assert r.status == 200
    assert r.header("set-cookie").startswith("sid=deleted; Path=/; Expires=")
    assert srv.get("/cookies_sessions/me", headers={"Cookie": f"sid={sid}"}).status == 401
    assert srv.request("POST", "/cookies_sessions/logout",
                       headers={"Cookie": f"sid={sid}"}).status == 404
    # Expiry. The store counts whole seconds of the wall clock: a session of
    # ttl seconds lives more than ttl - 1 s and at most ttl s. So it is still
    # there ttl - 1 s after the login began, is gone once ttl s have passed
    # (polled, within a bound), and the first refusal comes no earlier than
    # ttl - 1 s after the login began.
    ttl = 2 + math.ceil(SLOW)
    t0 = time.monotonic()
    r = srv.request("POST", f"/cookies_sessions/login?user=carol&ttl={ttl}")
    assert f"; Max-Age={ttl};" in r.header("set-cookie")
    short = r.header("set-cookie")[4:36]
    polls = 0
    while True:
        r = srv.get("/cookies_sessions/me", headers={"Cookie": f"sid={short}"})
        if r.status == 401:
            break
        assert (r.status, r.body) == (200, b"carol\n")
        polls += 1
        assert time.monotonic() - t0 < ttl + 2 * SLOW, "the session outlived its lifetime"
        time.sleep(0.05)
    assert polls > 0, "the session was gone at once"
    assert time.monotonic() - t0 >= ttl - 1, "the session expired before its lifetime"
    r = srv.get("/cookies_sessions/cookie/set")
    assert re.match(r"theme=dark; Path=/; Expires=.*; Max-Age=86400; SameSite=Strict; Secure; "
                    r"HttpOnly$", r.header("set-cookie"))
    assert srv.get("/cookies_sessions/cookie/get", headers={"Cookie": "x=1; theme=dark"}).body == \
        b"dark\n"
    assert srv.get("/cookies_sessions/cookie/get").status == 404


def test_cookies_in_several_fields(make_server, services):
    # Browsers send each cookie as a field of its own over HTTP/2 (RFC 9113
    # 8.2.3 "crumbs"), and a client may repeat the Cookie line over HTTP/1.1:
    # cookie->get and the session see every cookie, not only the first
    # field's (which answered 401, "not logged in", with the sid second).
    srv = duda_server(make_server, services, [example("cookies_sessions")], workers=1)
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c").start()
    sid = srv.request("POST", "/cookies_sessions/login?user=alice").header("set-cookie")[4:36]
    c = Conn(srv.port)
    c.send(f"GET /cookies_sessions/me HTTP/1.1\r\nHost: x\r\nCookie: theme=dark\r\n"
           f"Cookie: sid={sid}\r\n\r\n".encode())
    r = c.read_response()
    assert (r.status, r.body) == (200, b"alice\n")
    c.send(b"GET /cookies_sessions/cookie/get HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\n"
           b"Cookie: theme=light\r\n\r\n")
    assert c.read_response().body == b"light\n"
    c.close()
    for m in H2_MARKS:
        if m.args[0]:
            pytest.skip(m.kwargs["reason"])
    h = H2Client(srv.port)
    st = h.get("/cookies_sessions/me", headers=[("cookie", "theme=dark"), ("cookie", f"sid={sid}")])
    assert (st["headers"][":status"], st["data"]) == ("200", b"alice\n")
    st = h.get("/cookies_sessions/cookie/get",
               headers=[("cookie", f"sid={sid}"), ("cookie", "x=1"), ("cookie", "theme=dark")])
    assert st["data"] == b"dark\n"
    h.close()


def test_data_conf_fconf_logger(make_server, services, tmp_path):
    d = ROOT / "examples" / "data_files"
    logs = tmp_path / "logs"
    logs.mkdir()
    srv = duda_server(make_server, services,
                      [web_service("data_files", ConfDir=d / "conf", DataDir=d / "data",
                                   LogDir=logs)])
    srv.start()
    r = srv.get("/data_files/file/hello.txt")
    assert (r.status, r.body) == (200, b"Hello from a data file.\n")
    assert srv.get("/data_files/range/hello.txt").body == b"llo "
    assert srv.get("/data_files/file/nothing").status == 404
    assert srv.get("/data_files/greeting").body == b"Good morning from ConfDir\n"
    assert srv.get("/data_files/paths").body == f"data {d / 'data'}\nconf {d / 'conf'}\n".encode()
    deadline = time.monotonic() + 5 * SLOW
    want = "file hello.txt\nrange hello.txt\nfile nothing\ngreeting\n"
    while time.monotonic() < deadline:
        if (logs / "access.log").exists() and (logs / "access.log").read_text() == want:
            break
        time.sleep(0.05)
    assert (logs / "access.log").read_text() == want


def dechunk(body):
    out = b""
    while True:
        size, body = body.split(b"\r\n", 1)
        n = int(size, 16)
        if n == 0:
            return out
        out += body[:n]
        body = body[n + 2:]


def test_streaming_server_sent_events(make_server, services):
    srv = duda_server(make_server, services, [example("streaming")])
    srv.start()
    c = Conn(srv.port)
    c.send(b"GET /streaming/events?count=3 HTTP/1.1\r\nHost: x\r\n\r\n")
    while b"0\r\n\r\n" not in c.buf:
        c._fill()
    head, body = c.buf.split(b"\r\n\r\n", 1)
    assert b"Transfer-Encoding: chunked" in head
    assert b"Content-Type: text/event-stream" in head
    text = dechunk(body).decode()
    assert text == (": the events follow\n\n" + "".join(
        f"id: {i}\ndata: event {i} of 3\n\n" for i in (1, 2, 3)))
    c.close()
    # A client that leaves mid-stream: the request's timer stops with it.
    c = Conn(srv.port)
    c.send(b"GET /streaming/events?count=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
    while b"event 2 " not in c.buf:
        c._fill()
    c.close()
    time.sleep(0.3)
    assert srv.get("/streaming/events?count=1").status == 200


def test_async_task_wait_and_thread(make_server, services):
    srv = duda_server(make_server, services, [example("async")])
    srv.start()
    assert srv.get("/async/task?n=1000").body == b"sum 500500\n"
    t = time.monotonic()
    r = srv.get("/async/wait")
    assert (r.status, r.body) == (200, b"continued by a timer\n")
    assert time.monotonic() - t >= 0.1
    assert srv.get("/async/thread").body == b"continued by a thread\n"
    # The worker is free while requests wait: others are served meanwhile.
    waiting = [Conn(srv.port) for _ in range(4)]
    for c in waiting:
        c.send(b"GET /async/wait HTTP/1.1\r\nHost: x\r\n\r\n")
    assert srv.get("/async/task?n=3").body == b"sum 6\n"
    for c in waiting:
        assert c.read_response().body == b"continued by a timer\n"
        c.close()


def test_objects(make_server, services):
    srv = duda_server(make_server, services, [web_service("objects")], workers=2)
    srv.start()
    c = Conn(srv.port)
    first = c.request("GET", "/objects/global").body
    second = c.request("GET", "/objects/global").body
    c.close()
    m1 = re.match(rb"pre_loop 1 count (\d+)\n", first)
    m2 = re.match(rb"pre_loop 1 count (\d+)\n", second)
    assert m1 and m2 and int(m2.group(1)) == int(m1.group(1)) + 1
    assert srv.get("/objects/signal").body == b"signalled 2\n"
    assert srv.get("/objects/watch").body == b"read 4 bytes: ping (ready 1)\n"
    assert srv.get("/objects/xtime").body == \
        b"Thu, 01 Jan 1970 00:00:00 GMT\ntomorrow midnight\nnext ok\n"
    r = srv.request("DELETE", "/objects/request/9", headers={"X-Test": "yes"})
    assert r.body == (b"method DELETE path /objects/request/9 get 0 head 0 post 0 put 0 delete 1 "
                      b"id 9 x-test yes addr 127.0.0.1\n")
    for method in ("GET", "HEAD", "POST", "PUT", "DELETE"):
        body = b"x" if method in ("POST", "PUT") else b""
        r = srv.request(method, "/objects/request/9", body=body)
        want = " ".join(f"{m.lower()} {int(m == method)}"
                        for m in ("GET", "HEAD", "POST", "PUT", "DELETE"))
        assert (r.status, r.header("x-flags")) == (200, want), method
        assert r.body == (b"" if method == "HEAD" else
                          f"method {method} path /objects/request/9 {want} id 9 x-test - "
                          f"addr 127.0.0.1\n".encode())
    assert srv.request("PATCH", "/objects/request/9", body=b"x").status == 405
    assert srv.get("/objects/debug").status == 201
    time.sleep(0.1)
    log = srv.stderr_text()
    assert "duda: objects: debug line from /objects/debug" in log
    assert "duda: objects: end callback ran" in log
    assert "debug line from /objects/debug" in srv.get("/objects/dashboard").body.decode()


# ---- misuse, loading, reload ---------------------------------------------------------


def test_misuse_answers_500_and_logs(make_server, services):
    srv = duda_server(make_server, services, [web_service("misuse")])
    srv.start()
    cases = {
        "twice": "response->end() twice",
        "after": "response->print() after response->end()",
        "noend": "the callback returned without response->end() or wait()",
        "header": "response->http_header(): a bad name or a line break in the value",
        "cookie": "cookie->set(c): SameSite=None needs Secure",
        "null": "response->print() without a request",
        "status": "response->http_status(101): not a final HTTP status",
    }
    for route, message in cases.items():
        r = srv.get(f"/misuse/{route}")
        assert r.status == 500, route
        assert b"Injected" not in r.raw_head
        assert f"duda: service 'misuse': {message}" in srv.stderr_text(), route
    assert srv.get("/misuse/ok").body == b"still serving\n"


def start_fails(srv):
    srv.write_conf()
    p = subprocess.run([str(BUILD / "bin" / "monkey"), "-c", str(srv.conf)], capture_output=True,
                       text=True, timeout=20 * SLOW)
    assert p.returncode != 0
    return p.stderr


def test_refused_services(make_server, tmp_path):
    out = tmp_path / "out"
    build(ROOT / "tests/duda/badabi", out)
    srv = duda_server(make_server, out, [web_service("badabi")])
    err = start_fails(srv)
    minor = re.search(r"#define DUDA_ABI_MINOR (\d+)",
                      (ROOT / "include/duda/duda.h").read_text()).group(1)
    assert re.search(r"sites/default:\d+: \[WEB_SERVICE\] badabi: .*badabi.duda was built for "
                     rf"Duda service ABI 2\.0, this server has 1\.{minor} \(rebuild it", err), err
    # duda build refuses a service without duda_main; one built by hand is refused at load.
    p = duda("build", ROOT / "tests/duda/nomain", "-o", out)
    assert p.returncode == 1
    assert "the service has no duda_main()" in p.stderr
    subprocess.run(["cc", "-shared", "-fPIC", "-I", str(ROOT / "include"), "-o",
                    str(out / "nomain.duda"), str(ROOT / "tests/duda/nomain/nomain.c")], check=True)
    srv = duda_server(make_server, out, [web_service("nomain")])
    assert "nomain.duda has no duda_main()" in start_fails(srv)
    srv = duda_server(make_server, out, [web_service("missing")])
    assert "missing.duda: No such file or directory" in start_fails(srv)
    srv = duda_server(make_server, out, [web_service("bad/name")])
    assert re.search(r"sites/default:\d+: Name: 'bad/name': 1 to 64 letters", start_fails(srv))


def test_duda_w_reports_bad_route_before_serving(tmp_path):
    port = free_port()
    p = duda("-w", ROOT / "tests/duda/badroute", "-o", tmp_path / "out", "-p", port, timeout=60)
    assert p.returncode == 1
    assert "route '/users/:': a parameter without a name" in p.stderr
    assert "does not load" in p.stderr


def test_duda_w_compiler_errors_as_they_are(tmp_path):
    svc = tmp_path / "broken"
    svc.mkdir()
    (svc / "broken.c").write_text("#include <duda/duda.h>\nint duda_main(void) { return x; }\n")
    p = duda("-w", svc, "-p", free_port())
    assert p.returncode == 1
    assert "broken.c:2:" in p.stderr and "undeclared" in p.stderr


def test_duda_new_then_w(tmp_path):
    svc = tmp_path / "fresh"
    p = duda("new", svc)
    assert p.returncode == 0, p.stderr
    port = free_port()
    with serving([str(DUDA), "-w", str(svc), "-p", str(port)], port, tmp_path / "duda-w.log"):
        c = Conn(port)
        assert c.request("GET", "/fresh/hello").body == b"Hello World!\n"
        assert c.request("GET", "/fresh/").body == (svc / "html/index.html").read_bytes()
        c.close()
        for sub in ("html", "conf", "data", "logs"):
            assert (svc / sub).is_dir()


def duda_w(tmp_path, svc, *args, env=None):
    """`duda -w svc ARGS...` as a context: (process, log path), once it listens."""
    port = next((a.rsplit(":", 1)[-1] for a in args if isinstance(a, str) and a[-1:].isdigit()))
    log = tmp_path / f"duda-w-{svc.name}.log"
    return serving([str(DUDA), "-w", str(svc), *map(str, args)], int(port), log,
                   env={**os.environ, **(env or {})}), log


def url_in(log):
    m = re.search(r"^duda: serving \S+ on (http://\S+?)[;\s]", log.read_text(), re.M)
    assert m, log.read_text()
    return m.group(1)


def fetch(url):
    with urllib.request.urlopen(url, timeout=10 * SLOW) as r:
        return r.read()


def refused(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_duda_w_listens_on_loopback_and_prints_a_url_that_works(tmp_path):
    """A development server: on 127.0.0.1 unless told otherwise, and the URL it prints
    is the one to open, for -p PORT, -p ADDR:PORT and -p '*:PORT' alike."""
    svc = tmp_path / "version"
    shutil.copytree(ROOT / "tests/duda/version", svc)
    port = free_port()
    ctx, log = duda_w(tmp_path, svc, "-p", str(port))
    with ctx:
        assert url_in(log) == f"http://127.0.0.1:{port}/version/"
        assert fetch(url_in(log)) == b"version 1\n"
        assert refused("127.0.0.2", port)  # not on every address: loopback only
    port = free_port()
    ctx, log = duda_w(tmp_path, svc, "-p", f"127.0.0.1:{port}", "-r")
    with ctx:
        assert url_in(log) == f"http://127.0.0.1:{port}/"  # not http://localhost:127.0.0.1:...
        assert fetch(url_in(log)) == b"version 1\n"
    port = free_port()
    ctx, log = duda_w(tmp_path, svc, "-p", f"*:{port}")
    with ctx:
        assert url_in(log) == f"http://127.0.0.1:{port}/version/"
        assert "(and on every address)" in log.read_text()
        assert not refused("127.0.0.2", port)
    # Options before the folder work as after it.
    port = free_port()
    with serving([str(DUDA), "-w", "-p", str(port), "-o", str(tmp_path / "out2"), str(svc)],
                 port, tmp_path / "before.log"):
        assert fetch(f"http://127.0.0.1:{port}/version/") == b"version 1\n"
    assert (tmp_path / "out2" / "version.duda").exists()
    p = duda("-w", svc, "-p", "nope")
    assert p.returncode == 2 and "-p nope: expected PORT or ADDRESS:PORT" in p.stderr


@pytest.mark.parametrize("watch", ["inotify", "poll"])
def test_duda_w_rebuilds_on_change_and_keeps_the_last_good_build(tmp_path, watch):
    """A source file changed: the service is built again and the server reloaded; a build
    that does not compile, or does not load, leaves the last good one serving, with the
    compiler's (or the loader's) message shown."""
    if watch == "inotify" and not shutil.which("inotifywait"):
        pytest.skip("no inotifywait (inotify-tools)")
    svc = tmp_path / "version"
    shutil.copytree(ROOT / "tests/duda/version", svc)
    src = svc / "version.c"
    text = src.read_text()
    port = free_port()
    ctx, log = duda_w(tmp_path, svc, "-p", str(port), env={"DUDA_WATCH": watch})
    url = f"http://127.0.0.1:{port}/version/"

    def serves(body):
        return wait_for(lambda: fetch(url) == body, timeout=30)

    with ctx:
        assert fetch(url) == b"version 1\n"
        assert f"rebuilt when {svc}/*.c or *.h change" in log.read_text()
        src.write_text(text.replace("#define VERSION 1", "#define VERSION 2"))
        assert serves(b"version 2\n"), log.read_text()
        assert "duda: version.c changed: rebuilding version" in log.read_text()
        # A header of the service counts too; touching a file is a change.
        (svc / "extra.h").write_text("#define EXTRA 1\n")
        src.write_text(text.replace("#define VERSION 1", '#include "extra.h"\n#define VERSION 3'))
        assert serves(b"version 3\n"), log.read_text()
        rebuilt = log.read_text().count("changed: rebuilding")
        os.utime(svc / "extra.h")
        assert wait_for(lambda: log.read_text().count("changed: rebuilding") > rebuilt, 30)
        assert wait_for(lambda: log.read_text().count("configuration reloaded") >= 3, 30)
        # A build that fails: the compiler's message, and version 3 serves on. The
        # watcher may already have caught a file half written above (a build of it
        # failed too), so the lines counted are those this build adds.
        kept = log.read_text().count("still serving the last good build")
        src.write_text(text.replace("#define VERSION 1", "#define VERSION 4 +"))
        assert wait_for(lambda: "version.c:12:" in log.read_text() and log.read_text().count(
            "still serving the last good build") > kept, 30), log.read_text()
        out = log.read_text()
        assert "version.c:12:" in out and "error:" in out, out
        assert fetch(url) == b"version 3\n"
        # One that compiles but does not load (a bad route): the same.
        src.write_text(text.replace("router->root(cb_root);",
                                    'router->root(cb_root);\n    router->map("/a/:", DUDA_GET, '
                                    "cb_root);"))
        assert wait_for(lambda: "does not load (see above)" in log.read_text(), 30), \
            log.read_text()
        assert "a parameter without a name" in log.read_text()
        assert fetch(url) == b"version 3\n"
        # Mended: served at once.
        src.write_text(text.replace("#define VERSION 1", "#define VERSION 5"))
        assert serves(b"version 5\n"), log.read_text()


def test_duda_w_data_files(tmp_path):
    """The data_files example as its README runs it, `duda -w` on its folder: the folder's
    logs/ is the LogDir that logger->create() needs (without it the service refuses to load)."""
    svc = tmp_path / "data_files"
    shutil.copytree(ROOT / "examples/data_files", svc,
                    ignore=shutil.ignore_patterns("build", "*.log"))
    port = free_port()
    with serving([str(DUDA), "-w", str(svc), "-p", str(port)], port, tmp_path / "duda-w.log"):
        c = Conn(port)
        assert c.request("GET", "/data_files/greeting").body == b"Good morning from ConfDir\n"
        c.close()
        assert wait_for(lambda: (svc / "logs/access.log").exists() and
                 (svc / "logs/access.log").read_text() == "greeting\n")


def test_reload_picks_up_a_rebuilt_service(make_server, tmp_path):
    out = tmp_path / "out"
    build(ROOT / "tests/duda/version", out)
    srv = duda_server(make_server, out, [web_service("version")])
    srv.start()
    assert srv.get("/version/").body == b"version 1\n"
    build(ROOT / "tests/duda/version", out, env={"CFLAGS": "-DVERSION=2"})
    assert srv.get("/version/").body == b"version 1\n"
    srv.reload()  # every worker has the new build of the service
    assert srv.get("/version/").body == b"version 2\n"
    # A reload with a broken service is refused: the running one stays.
    (out / "version.duda").write_bytes(b"not an object")
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline and "version.duda" not in srv.stderr_text():
        time.sleep(0.05)
    assert "version.duda" in srv.stderr_text()
    assert srv.get("/version/").body == b"version 2\n"


def test_installed_duda(tmp_path):
    """make install puts the header, the plugin and the helper in place, and they work."""
    dest = tmp_path / "dest"
    cmake_install(dest)
    found = {f.name: f for f in dest.rglob("*") if f.is_file()}
    for name in ("duda", "duda.h", "monkey-duda.so", "monkey"):
        assert name in found, name
    assert found["duda.h"].parent.name == "duda" and found["duda.h"].parent.parent.name == "include"
    tool = found["duda"]
    text = tool.read_text()
    assert str(ROOT) not in text and str(BUILD) not in text
    env = {"DUDA_MONKEY": str(found["monkey"]), "DUDA_PLUGIN": str(found["monkey-duda.so"]),
           "DUDA_INCLUDE": str(found["duda.h"].parent.parent)}
    port = free_port()
    with serving([str(tool), "-w", str(ROOT / "examples/hello"), "-o", str(tmp_path / "out"),
                  "-p", str(port)], port, tmp_path / "duda-w.log", env={**os.environ, **env}):
        c = Conn(port)
        assert c.request("GET", "/hello/hello").body == b"Hello World!\n"
        c.close()


def test_counters_in_the_control_status(make_server, services):
    srv = duda_server(make_server, services, [web_service("misuse"), example("cookies_sessions")])
    srv.plugins.append(str(BUILD / "plugins" / "monkey-control.so"))
    (srv.conf / "plugins" / "control.conf").write_text("[CONTROL]\n    Socket ctl.sock\n")
    srv.start()
    deadline = time.monotonic() + 10 * SLOW
    while not (srv.conf / "ctl.sock").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    srv.get("/misuse/ok")
    srv.get("/misuse/twice")
    srv.request("POST", "/cookies_sessions/login?user=a")
    p = subprocess.run([str(BUILD / "bin" / "monkey-ctl"), "-s", str(srv.conf / "ctl.sock"),
                        "--json", "status"], capture_output=True, text=True, timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["plugins"]["duda"] == {"requests": 3, "misuses": 1, "sessions": 1}


def test_logs_reopened_on_sigusr1(make_server, services, tmp_path):
    d = ROOT / "examples" / "data_files"
    logs = tmp_path / "logs"
    logs.mkdir()
    srv = duda_server(make_server, services,
                      [web_service("data_files", ConfDir=d / "conf", DataDir=d / "data",
                                   LogDir=logs)])
    srv.start()
    srv.get("/data_files/greeting")
    assert wait_for(lambda: (logs / "access.log").exists() and
             (logs / "access.log").read_text() == "greeting\n")
    (logs / "access.log").rename(logs / "access.log.1")
    srv.signal(signal.SIGUSR1)
    assert wait_for(lambda: (logs / "access.log").exists())
    srv.get("/data_files/file/hello.txt")
    assert wait_for(lambda: (logs / "access.log").read_text() == "file hello.txt\n")
    assert (logs / "access.log.1").read_text() == "greeting\n"


def test_logs_given_to_the_user_and_no_link_followed(make_server, services, nobody_dir):
    """Started as root with User, a service's log file (logger->create) is
    given to the User, so that SIGUSR1 opens it again after the switch; a
    link planted at its path (the LogDir is the User's) is not followed."""
    logs, pw = nobody_dir
    d = ROOT / "examples" / "data_files"
    srv = duda_server(make_server, services,
                      [web_service("data_files", ConfDir=d / "conf", DataDir=d / "data",
                                   LogDir=logs)])
    srv.set(User="nobody")
    srv.start()
    log = logs / "access.log"
    srv.get("/data_files/greeting")
    assert wait_for(lambda: log.exists() and log.read_text() == "greeting\n")
    assert log.stat().st_uid == pw.pw_uid, "the service's log is not the User's"
    target = logs / "elsewhere"
    target.write_text("not a log\n")
    log.rename(logs / "access.log.1")
    log.symlink_to(target)
    srv.signal(signal.SIGUSR1)
    assert wait_for(lambda: "reopening" in srv.stderr_text()), srv.stderr_text()
    assert "Too many levels of symbolic links" in srv.stderr_text()
    srv.get("/data_files/greeting")
    time.sleep(0.3)
    assert target.read_text() == "not a log\n"
    assert "Permission denied" not in srv.stderr_text()
    assert srv.stop() == 0


def test_global_set(make_server, services):
    """global->set() replaces this worker's value: the next get() on the worker sees it."""
    srv = duda_server(make_server, services, [web_service("objects")], workers=2)
    srv.start()
    c = Conn(srv.port)  # one connection: one worker
    c.request("GET", "/objects/global")
    c.request("GET", "/objects/global")
    assert c.request("GET", "/objects/global/set?n=100").body == b"set 0 old 2\n"
    assert c.request("GET", "/objects/global").body == b"pre_loop 1 count 101\n"
    assert c.request("GET", "/objects/global").body == b"pre_loop 1 count 102\n"
    c.close()


def test_xtime_monotonic_ms(make_server, services):
    """xtime->monotonic_ms() is CLOCK_MONOTONIC in milliseconds (Python's time.monotonic on
    Linux), and it advances across a 100 ms timer."""
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    before = int(time.monotonic() * 1000)
    body = srv.get("/objects/monotonic").body.decode()
    after = int(time.monotonic() * 1000)
    m = re.fullmatch(r"start (\d+) elapsed (\d+)\n", body)
    assert m, body
    start, elapsed = int(m.group(1)), int(m.group(2))
    assert before <= start <= after, (before, start, after)
    assert 100 <= elapsed <= after - start + 1, (elapsed, after - start)


def test_kept_timer_of_a_request(make_server, services):
    """event->timer_new (service ABI 1.2): moved before it fires (once, at 5 ms, not at 1 s),
    armed again in its call, armed then disarmed (no third call in the next 30 ms), and freed
    with its request (the sanitizer build checks); a timer of timer_add() is not armed."""
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    for _ in range(3):
        body = srv.get("/objects/kept").body.decode()
        m = re.fullmatch(r"kept fired 2 refused 1 elapsed (\d+)\n", body)
        assert m, body
        assert 35 <= int(m.group(1)) < 1000
    assert srv.stop() == 0


def test_request_context_is_per_request(make_server, services):
    """A context set by one request is not seen by the next one on the same connection,
    pipelined or one after the other."""
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    c = Conn(srv.port)
    c.send(b"GET /objects/ctx HTTP/1.1\r\nHost: x\r\n\r\n" * 2)  # pipelined
    first, second = c.read_response(), c.read_response()
    assert (first.status, first.body) == (200, b"ctx none\n")
    assert (second.status, second.body) == (200, b"ctx none\n")
    for _ in range(3):  # keep-alive, one after the other
        assert c.request("GET", "/objects/ctx").body == b"ctx none\n"
    c.close()


def test_cookie_destroy(make_server, services):
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    r = srv.get("/objects/cookie/destroy", headers={"Cookie": "theme=dark"})
    assert (r.status, r.body) == (200, b"destroy 0\n")
    m = re.fullmatch(r"theme=deleted; Path=/; Expires=([^;]+); Max-Age=0", r.header("set-cookie"))
    assert m, r.header("set-cookie")
    assert email.utils.parsedate_to_datetime(m.group(1)).timestamp() < time.time()


def test_router_map_outside_duda_main_refused(make_server, services):
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    r = srv.get("/objects/remap")
    assert r.status == 500
    assert "duda: service 'objects': router->map() outside duda_main() on /objects/remap" in \
        srv.stderr_text()
    assert srv.get("/objects/remapped").status == 404  # nothing was mapped
    assert srv.get("/objects/ctx").status == 200  # and the service still serves


def test_duda_exit_runs_at_reload_and_stop(make_server, services, tmp_path):
    """duda_exit() runs when a copy of the service is unloaded: at the end of monkey -t
    (duda_main() ran there), the old one after a reload, the running one at a stop."""
    data = tmp_path / "data"
    data.mkdir()
    exits = data / "exit.log"
    srv = duda_server(make_server, services, [web_service("objects", DataDir=data)])
    srv.write_conf()
    p = subprocess.run([str(BUILD / "bin" / "monkey"), "-t", "-c", str(srv.conf)],
                       capture_output=True, text=True, timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    assert exits.read_text() == "duda_exit ran\n"
    exits.unlink()
    srv.start()
    assert srv.get("/objects/ctx").status == 200
    assert not exits.exists()
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: exits.exists() and exits.read_text() == "duda_exit ran\n")
    assert srv.get("/objects/ctx").status == 200  # the new copy serves
    assert srv.stop() == 0
    assert exits.read_text() == "duda_exit ran\n" * 2


def test_waiting_request_whose_client_leaves(make_server, services):
    """A request parked on a timer of its own: the client leaves, the timer stops with the
    request and the framework continues it (nothing leaks, nothing fires late)."""
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    for _ in range(3):
        c = Conn(srv.port)
        c.send(b"GET /objects/park HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        c.close()
    assert srv.get("/objects/xtime").status == 200
    time.sleep(1.2 * SLOW)
    assert srv.get("/objects/parked").body == b"fired 0\n"


def test_cont_before_the_callback_returns(make_server, services):
    """A thread may call cont() while the callback that waited is still running."""
    srv = duda_server(make_server, services, [web_service("objects")])
    srv.start()
    c = Conn(srv.port)
    for _ in range(10):
        assert c.request("GET", "/objects/fast").body == b"fast\n"
    c.close()
