"""The site key Fallback (server/request/request.c): a front controller for paths that
name nothing under the document root, like nginx's try_files $uri $uri/ PATH."""

from conftest import BUILD, Conn, needs_dlopen
from gwutil import add_auth


def test_fallback_serves_front_controller(make_server):
    srv = make_server()
    srv.site_conf["Fallback"] = "/front.html"
    srv.file("front.html", "front controller\n")
    srv.file("real.txt", "a real file\n")
    srv.file("dir/index.html", "dir index\n")
    srv.start()
    c = Conn(srv.port)
    r = c.request("GET", "/pretty/url/42?page=2")
    assert r.status == 200 and r.body == b"front controller\n"
    # what exists is served as before
    assert c.request("GET", "/real.txt").body == b"a real file\n"
    assert c.request("GET", "/dir/").body == b"dir index\n"
    r = c.request("GET", "/dir")
    assert r.status == 301 and r.header("Location") == "/dir/"
    c.close()


def test_without_fallback_404(make_server):
    srv = make_server()
    srv.file("front.html", "front controller\n")
    srv.start()
    assert srv.get("/pretty/url").status == 404


def test_fallback_must_be_a_normalised_path(make_server):
    srv = make_server()
    srv.site_conf["Fallback"] = "/a/../index.php"
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:4:" in err and "Fallback" in err
    srv.site_conf["Fallback"] = "index.php"
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:4:" in err and "Fallback" in err


@needs_dlopen
def test_fallback_passes_the_checks_of_its_own_path(make_server):
    # the request goes on as a request for the fallback's path: the request
    # hooks (authentication, access rules) check that path too, so a
    # Fallback inside a protected Location does not open it to everybody
    srv = make_server()
    srv.site_conf["Fallback"] = "/private/front.html"
    srv.file("private/front.html", "front controller\n")
    srv.file("open.txt", "open\n")
    good, bad = add_auth(srv, "/private")
    srv.start()
    c = Conn(srv.port)
    assert c.request("GET", "/open.txt").body == b"open\n"
    r = c.request("GET", "/pretty/url")
    assert r.status == 401 and r.header("WWW-Authenticate").startswith("Basic realm=")
    assert c.request("GET", "/pretty/url", headers={"Authorization": bad}).status == 401
    r = c.request("GET", "/pretty/url", headers={"Authorization": good})
    assert r.status == 200 and r.body == b"front controller\n"
    c.close()


@needs_dlopen
def test_fallback_denied_by_the_access_rules(make_server):
    srv = make_server()
    srv.site_conf["Fallback"] = "/app/front.html"
    srv.file("app/front.html", "front controller\n")
    srv.file("open.txt", "open\n")
    srv.plugins = [str(BUILD / "plugins" / "monkey-access.so")]
    srv.site_extra = "[ACCESS]\n    Deny all path /app\n"
    srv.start()
    c = Conn(srv.port)
    assert c.request("GET", "/open.txt").body == b"open\n"
    assert c.request("GET", "/app/front.html").status == 403
    assert c.request("GET", "/pretty/url").status == 403
    c.close()
