"""The site key Fallback (server/request.c): a front controller for paths that
name nothing under the document root, like nginx's try_files $uri $uri/ PATH."""

from conftest import Conn


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
