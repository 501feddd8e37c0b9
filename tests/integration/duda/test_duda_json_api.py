"""The json and sqlite packages through the json_api example (examples/json_api)
and the sqlslow test service: every route with http.client, bad input, 1,000
concurrent inserts, and a slow query that does not stall the worker."""

import http.client
import json
import re
import signal
import threading
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC
from test_duda import build, duda_server, web_service

PACKAGES = BUILD / "duda-packages"

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "json.dpkg").exists() or
                       not (PACKAGES / "sqlite.dpkg").exists(),
                       reason="the json and sqlite packages are not built "
                              "(libcjson-dev, libsqlite3-dev)"),
]


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    out = tmp_path_factory.mktemp("services")
    build(ROOT / "examples" / "json_api", out)
    build(ROOT / "tests" / "duda" / "sqlslow", out)
    return out


def start(make_server, services, tmp_path, name, workers=2, **server):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    srv = duda_server(make_server, services, [web_service(name, DataDir=data)], workers=workers)
    srv.set(**server)
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    srv.start()
    return srv


class Api:
    """JSON requests on one keep-alive connection."""

    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def call(self, method, path, body=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        headers = {"Content-Type": ctype} if data is not None else {}
        self.c.request(method, "/json_api" + path, body=data, headers=headers)
        r = self.c.getresponse()
        payload = r.read()
        doc = json.loads(payload) if payload else None
        if payload:
            assert r.getheader("Content-Type") == "application/json", r.getheaders()
        return r.status, doc


@pytest.fixture
def api(make_server, services, tmp_path):
    srv = start(make_server, services, tmp_path, "json_api")
    yield Api(srv.port)
    assert srv.stop() == 0


def test_every_route(api):
    assert api.call("GET", "/notes") == (200, [])
    st, a = api.call("POST", "/notes", {"title": "first", "body": "hello \"world\"\n"})
    assert st == 201
    assert a["title"] == "first" and a["body"] == "hello \"world\"\n" and a["id"] >= 1
    assert a["created"].endswith("Z") and a["updated"] == a["created"]
    st, b = api.call("POST", "/notes", {"title": "second"})
    assert st == 201 and b["body"] == "" and b["id"] == a["id"] + 1
    st, notes = api.call("GET", "/notes")
    assert st == 200 and [n["title"] for n in notes] == ["first", "second"]
    assert api.call("GET", f"/notes/{a['id']}") == (200, a)
    st, u = api.call("PUT", f"/notes/{a['id']}", {"title": "renamed"})
    assert st == 200 and u["title"] == "renamed" and u["body"] == a["body"]
    st, u = api.call("PATCH", f"/notes/{a['id']}", {"body": "é ünïcode ✓"})
    assert st == 200 and u["title"] == "renamed" and u["body"] == "é ünïcode ✓"
    assert api.call("GET", f"/notes/{a['id']}")[1]["body"] == "é ünïcode ✓"
    assert api.call("DELETE", f"/notes/{a['id']}") == (204, None)
    assert api.call("GET", f"/notes/{a['id']}") == (404, {"error": "not found"})
    assert api.call("DELETE", f"/notes/{a['id']}") == (404, {"error": "not found"})
    assert api.call("PUT", f"/notes/{a['id']}", {"title": "x"}) == (404, {"error": "not found"})
    assert [n["id"] for n in api.call("GET", "/notes")[1]] == [b["id"]]


def test_bad_input(api):
    st, doc = api.call("POST", "/notes", raw='{"title": "x",}')
    assert st == 400 and doc["error"].startswith("not JSON: a syntax error at byte")
    assert api.call("POST", "/notes", raw="") == (400, {"error": "empty: no JSON value"})
    assert api.call("POST", "/notes", raw='{"title": "x"} trailing') == \
        (400, {"error": "not JSON: text after the value at byte 15"})
    assert api.call("POST", "/notes", ["title"]) == \
        (400, {"error": "the body must be a JSON object"})
    assert api.call("POST", "/notes", {"body": "no title"}) == \
        (400, {"error": "missing field: title"})
    assert api.call("POST", "/notes", {"title": 5}) == (400, {"error": "title: must be a string"})
    assert api.call("POST", "/notes", {"title": "t" * 201}) == \
        (400, {"error": "title: longer than 200 bytes"})
    st, n = api.call("POST", "/notes", {"title": "kept"})
    assert st == 201
    assert api.call("PUT", f"/notes/{n['id']}", {}) == \
        (400, {"error": "missing field: title or body"})
    assert api.call("PUT", f"/notes/{n['id']}", {"title": ""}) == \
        (400, {"error": "title: must not be empty"})
    assert api.call("GET", "/notes/abc") == (400, {"error": "id: a positive whole number"})
    assert api.call("DELETE", "/notes/0") == (400, {"error": "id: a positive whole number"})
    # Nothing bad got in.
    assert [x["title"] for x in api.call("GET", "/notes")[1]] == ["kept"]
    # A method the routes do not take.
    api.c.request("POST", f"/json_api/notes/{n['id']}", body="{}")
    r = api.c.getresponse()
    r.read()
    assert r.status == 405 and "DELETE" in r.getheader("Allow")


def test_1000_concurrent_inserts_lose_nothing(make_server, services, tmp_path):
    srv = start(make_server, services, tmp_path, "json_api", TaskQueuePerClient=64)
    threads, per, errors = 20, 50, []

    def client(k):
        a = Api(srv.port)
        for i in range(per):
            st, doc = a.call("POST", "/notes", {"title": f"t{k}-{i}"})
            if st != 201:
                errors.append((st, doc))

    ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    st, notes = Api(srv.port).call("GET", "/notes")
    assert st == 200
    titles = [n["title"] for n in notes]
    assert len(titles) == threads * per
    assert set(titles) == {f"t{k}-{i}" for k in range(threads) for i in range(per)}
    assert len({n["id"] for n in notes}) == threads * per
    assert srv.stop() == 0


def test_run_rows_and_errors(make_server, services, tmp_path):
    srv = start(make_server, services, tmp_path, "sqlslow")
    r = srv.get("/sqlslow/count?n=1000")
    assert (r.status, r.body) == (200, b"rows=2 sum=1007\n")
    r = srv.get("/sqlslow/error")
    assert r.status == 500 and r.body == b"error 1: no such table: no_such_table\n"
    assert srv.stop() == 0


def test_slow_query_does_not_stall_the_worker(make_server, services, tmp_path):
    # One worker: the static request is served by the very worker whose request waits.
    # Timeout: the query may take several seconds on a loaded machine (ASan, parallel builds).
    srv = start(make_server, services, tmp_path, "sqlslow", workers=1, Timeout=60)
    srv.file("static.txt", "static\n")
    n = 3000000
    result = {}

    def slow():
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("GET", f"/sqlslow/count?n={n}")
        r = c.getresponse()
        result["body"] = r.read()
        result["status"] = r.status
        result["took"] = time.monotonic() - t0

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.2)  # the query is running on the task thread
    lat = []
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    while t.is_alive() and len(lat) < 20:
        t0 = time.monotonic()
        c.request("GET", "/static.txt")
        r = c.getresponse()
        assert r.read() == b"static\n"
        lat.append(time.monotonic() - t0)
        time.sleep(0.02)
    t.join()
    assert (result["status"], result["body"]) == (200, f"rows=2 sum={n + 7}\n".encode())
    assert result["took"] > 0.4, result  # the query was slow enough to mean something
    assert lat, "the slow query ended before a static request could be sent"
    # Served while the query ran: far quicker than the query (generously: a quarter).
    assert max(lat) < result["took"] / 4, (lat, result)
    assert srv.stop() == 0


def test_query_refused_when_the_task_queue_is_full(make_server, services, tmp_path):
    """on_done runs at once with error 5 (busy) when the query cannot be queued."""
    srv = start(make_server, services, tmp_path, "sqlslow", workers=1, TaskQueuePerClient=1)
    slow = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    t = threading.Thread(target=lambda: (slow.request("GET", "/sqlslow/count?n=2000000"),
                                         slow.getresponse().read()))
    t.start()
    time.sleep(0.2)
    # Until the slow query holds the client's one place, a quick one is served.
    deadline = time.monotonic() + 5 * SLOW
    while True:
        r = srv.get("/sqlslow/count?n=10")
        if r.status != 200 or not t.is_alive() or time.monotonic() > deadline:
            break
        assert r.body == b"rows=2 sum=17\n"
        time.sleep(0.02)
    t.join()
    assert (r.status, r.body) == (500, b"error 5: busy: the server's task queue is full\n")
    assert srv.get("/sqlslow/count?n=10").body == b"rows=2 sum=17\n"
    assert srv.stop() == 0


def test_reload_keeps_the_data_and_the_packages(make_server, services, tmp_path):
    """SIGHUP loads the service again (its database opened again); the packages stay loaded."""
    srv = start(make_server, services, tmp_path, "json_api")
    old = Api(srv.port)
    st, n = old.call("POST", "/notes", {"title": "before the reload"})
    assert st == 201
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "configuration reloaded" not in srv.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "configuration reloaded" in srv.stderr_text()
    new = Api(srv.port)
    assert new.call("GET", f"/notes/{n['id']}") == (200, n)
    st, m = new.call("POST", "/notes", {"title": "after"})
    assert st == 201 and m["id"] == n["id"] + 1
    # The connection of the old configuration still works, on the old service's copy.
    assert [x["title"] for x in old.call("GET", "/notes")[1]] == ["before the reload", "after"]
    assert srv.stop() == 0
    text = srv.stderr_text()
    assert len(re.findall(r"package 'sqlite' 1\.0 loaded from", text)) == 1, text
