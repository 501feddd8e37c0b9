"""The route table (api->route_add), through the routes test plugin."""

import os

import pytest

from conftest import BUILD, needs_dlopen

ROUTES_SO = BUILD / "tests" / "plugins" / "monkey-routes.so"

pytestmark = needs_dlopen


@pytest.fixture
def routed(make_server):
    srv = make_server()
    srv.plugins = [str(ROUTES_SO)]
    srv.file("a.txt", "AAAA\n")
    srv.file("r/decline", "static decline\n")
    srv.file("r/other.txt", "static other\n")
    srv.start()
    return srv


def test_exact_route(routed):
    r = routed.get("/r/hello")
    assert r.status == 200
    assert r.body == b"hello\n"
    assert r.header("content-type") == "text/plain"


def test_parameters(routed):
    assert routed.get("/r/users/42/posts/7").body == b"user=42 post=7\n"
    # Parameters are read from the decoded path.
    assert routed.get("/r/users/caf%C3%A9/posts/a%20b").body == "user=café post=a b\n".encode()
    # A parameter matches one non-empty segment only: these fall through to static files.
    assert routed.get("/r/users/42/posts/7/more").status == 404
    assert routed.get("/r/users/42/posts/").status == 404


def test_precedence(routed):
    assert routed.get("/r/files/special").body == b"exact\n"
    assert routed.get("/r/files/x.txt").body == b"param x.txt\n"
    assert routed.get("/r/files/a/b").body == b"prefix /r/files/a/b\n"
    assert routed.get("/r/files/").body == b"prefix /r/files/\n"
    # Within one pattern the method decides.
    assert routed.request("DELETE", "/r/files/x.txt").body == b"deleted x.txt\n"
    # Not beneath the prefix.
    assert routed.get("/r/files").status == 404


def test_405_lists_the_routes_methods(routed):
    r = routed.get("/r/write")
    assert r.status == 405
    assert r.header("allow") == "POST, PUT, OPTIONS"
    assert routed.request("PUT", "/r/write", body=b"x").body == b"wrote PUT\n"
    assert routed.request("POST", "/r/write", body=b"x").body == b"wrote POST\n"
    # Every route matching the path counts: GET (prefix, param) and DELETE (param).
    r = routed.request("PUT", "/r/files/x.txt", body=b"x")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD, DELETE, OPTIONS"
    # A method the server does not know: 501, with the same Allow.
    r = routed.request("BREW", "/r/write")
    assert r.status == 501
    assert r.header("allow") == "POST, PUT, OPTIONS"


def test_static_paths_keep_their_allow(routed):
    r = routed.request("DELETE", "/a.txt")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD, OPTIONS"
    r = routed.request("OPTIONS", "/a.txt")
    assert r.status == 200
    assert r.header("allow") == "GET, HEAD, OPTIONS"


def test_options_answers_from_the_table(routed):
    r = routed.request("OPTIONS", "/r/write")
    assert r.status == 204
    assert r.header("allow") == "POST, PUT, OPTIONS"
    assert r.body == b""
    r = routed.request("OPTIONS", "/r/users/1/posts/2")
    assert r.status == 204
    assert r.header("allow") == "GET, HEAD, OPTIONS"


def test_head_on_a_get_route(routed):
    c = routed.conn()
    c.send(b"HEAD /r/hello HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response(head_request=True)
    assert r.status == 200
    assert r.header("content-length") == "6"
    assert r.body == b""
    # The connection is in step: the next response is whole.
    assert c.request("GET", "/r/hello").body == b"hello\n"
    c.close()


def test_fallback_to_static_files(routed):
    assert routed.get("/a.txt").body == b"AAAA\n"
    assert routed.get("/r/other.txt").body == b"static other\n"
    assert routed.get("/r/nothing").status == 404
    # A handler that declines hands the request on to the static files.
    assert routed.get("/r/decline").body == b"static decline\n"


def test_body_and_task_through_routes(routed):
    c = routed.conn()
    body = os.urandom(50000)
    r = c.request("POST", "/r/echo", body=body)
    assert r.status == 200 and r.body == body
    r = c.request("GET", "/r/task")
    assert r.status == 200 and r.body == b"task done\n"
    assert c.request("GET", "/a.txt").body == b"AAAA\n"
    c.close()


def test_site_routes_and_reload(routed):
    assert routed.get("/r/v1").body == b"extra /r/v1\n"
    (routed.conf / "plugins").mkdir(exist_ok=True)
    (routed.conf / "plugins" / "routes.conf").write_text("[ROUTES]\n    Extra /r/v2\n")
    routed.reload()  # every worker has the new routes once it returns
    assert routed.get("/r/v2").body == b"extra /r/v2\n"
    assert routed.get("/r/v1").status == 404  # replaced, not added
    assert routed.get("/r/hello").body == b"hello\n"  # init() routes stay


def test_refused_reload_keeps_routes(routed):
    conf = routed.conf / "plugins" / "routes.conf"
    (routed.conf / "plugins").mkdir(exist_ok=True)
    conf.write_text("[ROUTES]\n    Extra /r/v3\n    Conflict On\n")
    routed.reload()
    text = routed.stderr_text()
    site = routed.conf / "sites" / "default"
    assert (f"{site}: routes '/r/hello' (plugin routes) and '/r/hello' (plugin routes) "
            "take the same method") in text
    assert routed.get("/r/v1").body == b"extra /r/v1\n"
    assert routed.get("/r/v3").status == 404


def test_bad_pattern_refuses_start(make_server):
    srv = make_server()
    srv.plugins = [str(ROUTES_SO)]
    (srv.conf / "plugins").mkdir()
    (srv.conf / "plugins" / "routes.conf").write_text("[ROUTES]\n    Extra /r/:\n")
    err = srv.run_expect_failure()
    assert "route pattern '/r/:': an empty parameter name" in err
    assert f"{srv.conf / 'sites' / 'default'}: routes: bad Extra '/r/:'" in err
