"""Tier 2: Cache-Control and Expires on static files (the site key
CacheControl): by prefix and extension, on 200, 206 and 304, not on errors,
and over HTTP/2."""

import email.utils

import pytest

from h2util import H2_MARKS, H2Client

RULES = [
    "/ no-cache",
    ".css max-age=3600",
    "/assets/ max-age=31536000, immutable",
    "/assets/tmp/ no-store",
]


def with_rules(srv):
    srv.site_extra = "".join(f"    CacheControl {r}\n" for r in RULES)
    # appended to the site file right after the [HOST] keys (no [ERROR_PAGES] here)
    srv.file("index.html", "<h1>home</h1>\n")
    srv.file("style.css", "body{}\n")
    srv.file("assets/app.js", "js\n")
    srv.file("assets/tmp/x.css", "tmp\n")
    srv.file("dir/index.html", "dir\n")
    return srv


@pytest.fixture
def site(make_server):
    return with_rules(make_server()).start()


def expires_delta(r):
    exp = email.utils.parsedate_to_datetime(r.header("expires"))
    date = email.utils.parsedate_to_datetime(r.header("date"))
    return (exp - date).total_seconds()


@pytest.mark.parametrize("path,value,max_age", [
    ("/", "no-cache", None),
    ("/index.html", "no-cache", None),
    ("/style.css", "max-age=3600", 3600),
    ("/assets/app.js", "max-age=31536000, immutable", 31536000),
    ("/assets/tmp/x.css", "no-store", None),
    ("/dir/", "no-cache", None),
])
def test_rule_per_path(site, path, value, max_age):
    r = site.get(path)
    assert r.status == 200
    assert r.header("cache-control") == value
    if max_age is None:
        assert r.header("expires") is None
    else:
        assert abs(expires_delta(r) - max_age) <= 1


def test_repeated_on_304_and_206(site):
    r = site.get("/style.css")
    n = site.get("/style.css", headers={"If-None-Match": r.header("etag")})
    assert n.status == 304
    assert n.header("cache-control") == "max-age=3600"
    assert abs(expires_delta(n) - 3600) <= 1
    p = site.get("/style.css", headers={"Range": "bytes=0-1"})
    assert p.status == 206 and p.header("cache-control") == "max-age=3600"


def test_not_on_errors(site):
    r = site.get("/missing.css")
    assert r.status == 404
    assert r.header("cache-control") is None and r.header("expires") is None
    r = site.get("/dir")
    assert r.status == 301 and r.header("cache-control") is None


def test_none_without_rules(make_server):
    srv = make_server()
    srv.file("style.css", "body{}\n")
    srv.start()
    r = srv.get("/style.css")
    assert r.status == 200
    assert r.header("cache-control") is None and r.header("expires") is None


def test_bad_rule_names_the_line(make_server):
    srv = make_server()
    srv.site_extra = "    CacheControl assets/ max-age=1\n"
    err = srv.run_expect_failure()
    assert "sites/default:4:" in err and "normalised path prefix" in err


@H2_MARKS[0]
@H2_MARKS[1]
def test_http2(make_server):
    srv = with_rules(make_server())
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1)
    srv.start()
    c = H2Client(srv.port)
    s = c.get("/assets/app.js")
    assert s["headers"][":status"] == "200"
    assert s["headers"]["cache-control"] == "max-age=31536000, immutable"
    assert "expires" in s["headers"]
    c.close()
