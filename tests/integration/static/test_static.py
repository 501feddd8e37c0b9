"""Tier 2: static files: types, directories, validators, ranges, containment."""

import email.utils
import os
import re
import shutil
import time

import pytest

from conftest import SLOW, Strace, small_window
from rangeutil import boundary_of, check_parts, email_parts, read_parts
from straceutil import corked_writes


@pytest.fixture
def site(make_server):
    srv = make_server()
    srv.file("index.html", "<h1>index</h1>\n")
    srv.file("hello.txt", "Hello World!\n")
    srv.file("empty.txt", b"")
    srv.file("digits.txt", "0123456789")
    srv.file("dir/index.html", "dir index\n")
    srv.file("noindex/file.txt", "inside\n")
    srv.file("hello world.txt", "spaced\n")
    srv.file(".hidden", "dotfile\n")
    for ext in ("css", "js", "json", "svg", "png", "jpg", "webp", "woff2", "wasm", "mjs",
                "unknownext", "HTML"):
        srv.file(f"type.{ext}", "x")
    srv.file("noext", "x")
    return srv


@pytest.fixture
def server_site(site):
    site.start()
    return site


@pytest.mark.parametrize("name,ctype", [
    ("type.css", "text/css; charset=utf-8"),
    ("type.js", "text/javascript; charset=utf-8"),
    ("type.mjs", "text/javascript; charset=utf-8"),
    ("type.json", "application/json"),
    ("type.svg", "image/svg+xml"),
    ("type.png", "image/png"),
    ("type.jpg", "image/jpeg"),
    ("type.webp", "image/webp"),
    ("type.woff2", "font/woff2"),
    ("type.wasm", "application/wasm"),
    ("type.HTML", "text/html; charset=utf-8"),
    ("type.unknownext", "application/octet-stream"),
    ("noext", "application/octet-stream"),
])
def test_mime_types(server_site, name, ctype):
    r = server_site.get("/" + name)
    assert r.status == 200
    assert r.header("content-type") == ctype


def test_mime_table_from_conf_dir(site):
    """The table is the configuration's monkey.mime when there is one."""
    (site.conf / "monkey.mime").write_text("[MIMETYPES]\n    unknownext text/x-custom\n")
    site.start()
    assert site.get("/type.unknownext").header("content-type") == "text/x-custom"
    # Extensions the file does not list get DefaultMimeType.
    assert site.get("/type.css").header("content-type") == "application/octet-stream"


def test_bundled_mime_table_is_complete():
    from conftest import ROOT
    text = (ROOT / "conf" / "monkey.mime").read_text()
    for ext in ("html", "css", "js", "json", "svg", "png", "jpg", "webp", "woff2", "wasm",
                "avif", "mp4", "pdf", "txt", "ico", "xml"):
        assert f"\n    {ext} " in text, ext


def test_empty_file(server_site):
    r = server_site.get("/empty.txt")
    assert r.status == 200
    assert r.header("content-length") == "0"
    assert r.body == b""


def test_directory_redirect(server_site):
    r = server_site.get("/dir")
    assert r.status == 301
    assert r.header("location") == "/dir/"
    r = server_site.get("/dir?a=1&b=2")
    assert r.status == 301
    assert r.header("location") == "/dir/?a=1&b=2"
    r = server_site.get("/dir/")
    assert r.status == 200 and r.body == b"dir index\n"


@pytest.mark.parametrize("target,location", [
    # The redirect is built from the normalised path: never "//host" or a scheme.
    ("//evil.example/..%2fdir", "/dir/"),
    ("//evil.example/%2e%2e/dir", "/dir/"),
    ("//dir", "/dir/"),
    ("///dir", "/dir/"),
    ("/./dir", "/dir/"),
    ("/%2fdir", "/dir/"),
    ("http://localhost//evil.example/..%2fdir", "/dir/"),
    ("http://localhost//dir", "/dir/"),
    ("//evil.example/..%2fdir?next=//x", "/dir/?next=//x"),
    # Bytes that are not plain path characters are encoded again.
    ("/sp%20ace", "/sp%20ace/"),
    ("/per%25cent", "/per%25cent/"),
    ("/q%3fmark", "/q%3Fmark/"),
    ("/caf%c3%a9", "/caf%C3%A9/"),
])
def test_directory_redirect_stays_on_site(server_site, target, location):
    for name in ("sp ace", "per%cent", "q?mark", "caf\u00e9"):
        (server_site.docroot / name).mkdir(exist_ok=True)
    r = server_site.get(target)
    assert r.status == 301, (target, r.status)
    assert r.header("location") == location
    assert b"evil" not in r.raw_head


def test_directory_without_index_is_forbidden(server_site):
    assert server_site.get("/noindex/").status == 403
    assert server_site.get("/noindex/file.txt").status == 200


def test_index_files_setting(site):
    site.set(IndexFiles="start.txt index.html")
    site.file("dir/start.txt", "start\n")
    site.start()
    assert site.get("/dir/").body == b"start\n"
    assert site.get("/").body == b"<h1>index</h1>\n"


def test_index_files_per_site(site, tmp_path):
    """IndexFiles in a site's [HOST] replaces the server's for that site only: the PHP site
    finds index.php, the other site keeps the server's names and never looks for it."""
    php = tmp_path / "php-site"
    for root in (php, site.docroot):
        (root / "app").mkdir(parents=True, exist_ok=True)
        (root / "app" / "index.php").write_text(f"php index of {root.name}\n")
        (root / "app" / "index.html").write_text(f"html index of {root.name}\n")
    (php / "only-html").mkdir()
    (php / "only-html" / "index.html").write_text("the next name\n")
    site.extra_sites["php"] = (f"[HOST]\n    ServerName php.test\n    DocumentRoot {php}\n"
                               "    IndexFiles index.php index.html\n")
    site.start()
    assert site.get("/app/", headers={"Host": "php.test"}).body == b"php index of php-site\n"
    assert site.get("/app/", headers={"Host": "php.test"}).body == b"php index of php-site\n"
    assert site.get("/only-html/", headers={"Host": "php.test"}).body == b"the next name\n"
    # The default site has the server's IndexFiles (index.html index.htm): index.html.
    assert site.get("/app/").body == b"html index of htdocs\n"
    site.stop()
    # The other way round: the server names index.php first, a site only index.html.
    site.set(IndexFiles="index.php index.html")
    site.site_conf["IndexFiles"] = "index.html"
    site.start()
    assert site.get("/app/").body == b"html index of htdocs\n"
    assert site.get("/app/", headers={"Host": "php.test"}).body == b"php index of php-site\n"
    site.stop()
    # A site with names only it has: the server's are not tried there.
    site.site_conf["IndexFiles"] = "start.txt"
    site.start()
    assert site.get("/app/").status == 403
    site.stop()
    # Checked as the server's are, with the site file's line.
    site.site_conf["IndexFiles"] = "index.html sub/index.html"
    err = site.run_expect_failure()
    assert "sites/default:4: IndexFiles: 'sub/index.html' is not a plain file name" in err, err


def test_hidden_index_name_is_not_served(site):
    # the index file's path is checked as a request for it: with
    # HideDotFiles On (the default) a hidden index name is 404, never served;
    # a directory without it still gets the next name
    site.set(IndexFiles=".index.html index.html")
    site.file("dot/.index.html", "hidden index\n")
    site.file("dot/index.html", "plain index\n")
    site.start()
    for path in ("/dot/", "/dot/.index.html"):
        r = site.get(path)
        assert r.status == 404 and b"hidden index" not in r.body, path
    assert site.get("/dir/").body == b"dir index\n"
    site.stop()
    site.site_conf["HideDotFiles"] = "Off"
    site.start()
    assert site.get("/dot/").body == b"hidden index\n"


def test_index_file_answers_every_method_as_its_own_path(server_site):
    # "/dir/" is answered as "/dir/index.html" would be, for each method
    r = server_site.request("HEAD", "/dir/")
    assert r.status == 200 and r.header("content-length") == "10"
    assert server_site.request("POST", "/dir/", body=b"x").status == 405
    r = server_site.request("OPTIONS", "/dir/")
    assert r.status == 200 and r.header("allow") == "GET, HEAD, OPTIONS"
    etag = server_site.get("/dir/index.html").header("etag")
    assert server_site.get("/dir/").header("etag") == etag
    assert server_site.get("/dir/", headers={"If-None-Match": etag}).status == 304


def test_percent_encoded_name_and_query(server_site):
    r = server_site.get("/hello%20world.txt")
    assert r.status == 200 and r.body == b"spaced\n"
    r = server_site.get("/hello.txt?x=1")
    assert r.status == 200 and r.body == b"Hello World!\n"
    r = server_site.get("/%68ello.txt")
    assert r.status == 200 and r.body == b"Hello World!\n"


def test_dot_segments_inside_root(server_site):
    r = server_site.get("/dir/../hello.txt")
    assert r.status == 200 and r.body == b"Hello World!\n"
    r = server_site.get("//./hello.txt")
    assert r.status == 200


def test_absolute_form_target(server_site):
    r = server_site.get("http://localhost/hello.txt")
    assert r.status == 200 and r.body == b"Hello World!\n"


@pytest.mark.parametrize("target", [
    "/../etc/passwd",
    "/../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E/etc/passwd",
    "/..%2f..%2f..%2fetc%2fpasswd",
    "/dir/../../etc/passwd",
    "/%2e%2e%5c%2e%2e%5cetc%5cpasswd",
    "/..\\..\\etc\\passwd",
    "/hello.txt%00.html",
    "/%00",
    "http://localhost/../../etc/passwd",
    "/%",
    "/%zz",
])
def test_traversal_attempts_rejected(server_site, target):
    r = server_site.get(target)
    assert r.status == 400, (target, r.status)
    assert b"root:" not in r.body


def test_symlinks_refused_by_default(site, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    os.symlink(outside, site.docroot / "out.txt")
    os.symlink(site.docroot / "hello.txt", site.docroot / "in.txt")
    os.symlink(site.docroot / "dir", site.docroot / "linkdir")
    site.start()
    for path in ("/out.txt", "/in.txt", "/linkdir/index.html", "/linkdir/"):
        r = site.get(path)
        assert r.status == 403, (path, r.status)
        assert b"secret" not in r.body


def test_symlinks_allowed_by_site(site, tmp_path):
    outside = tmp_path / "shared.txt"
    outside.write_text("shared\n")
    os.symlink(outside, site.docroot / "out.txt")
    os.symlink(site.docroot / "dir", site.docroot / "linkdir")
    site.site_conf["Symlinks"] = "On"
    site.start()
    assert site.get("/out.txt").body == b"shared\n"
    assert site.get("/linkdir/").body == b"dir index\n"


def test_special_files_are_forbidden(site):
    os.mkfifo(site.docroot / "fifo")
    site.start()
    r = site.get("/fifo")  # must not block the worker on open()
    assert r.status == 403
    assert site.get("/hello.txt").status == 200


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file_is_forbidden(site):
    site.file("locked.txt", "locked", mode=0)
    site.start()
    assert site.get("/locked.txt").status == 403


def test_large_file_is_complete(site):
    data = os.urandom(3 * 1024 * 1024 + 17)
    site.file("big.bin", data)
    site.start()
    r = site.get("/big.bin")
    assert r.status == 200
    assert r.header("content-length") == str(len(data))
    assert r.body == data


@pytest.mark.parametrize("target", [
    "/.hidden",
    "/%2ehidden",
    "/%2Ehidden",
    "/dir/../.hidden",
    "/dir/%2e%2e/%2ehidden",
    "http://localhost/.hidden",
    "/.git/config",
    "/.git/",
    "/.git",
    "/%2egit/config",
    "/dir/.inner.txt",
    "/.well-known/.secret",
    "/.nothing-here",
])
def test_dotfiles_answer_404(site, target):
    site.file(".git/config", "[core]\n")
    site.file("dir/.inner.txt", "inner\n")
    site.file(".well-known/.secret", "secret\n")
    site.start()
    for method in ("GET", "HEAD"):
        c = site.conn()
        r = c.request(method, target)
        c.close()
        assert r.status == 404, (method, target, r.status)
        assert b"dotfile" not in r.body and b"core" not in r.body and b"secret" not in r.body


def test_well_known_is_served(site):
    site.file(".well-known/acme-challenge/token", "proof\n")
    site.start()
    r = site.get("/.well-known/acme-challenge/token")
    assert r.status == 200 and r.body == b"proof\n"
    assert site.get("/%2ewell-known/acme-challenge/token").body == b"proof\n"
    r = site.get("/.well-known")
    assert r.status == 301 and r.header("location") == "/.well-known/"
    # Only the top-level folder is an exception.
    site.file("dir/.well-known/x", "x")
    assert site.get("/dir/.well-known/x").status == 404


def test_dotfiles_served_with_hide_dot_files_off(site):
    site.site_conf["HideDotFiles"] = "Off"
    site.file(".git/config", "[core]\n")
    site.start()
    assert site.get("/.hidden").body == b"dotfile\n"
    assert site.get("/%2ehidden").body == b"dotfile\n"
    assert site.get("/.git/config").body == b"[core]\n"


def test_options(server_site):
    r = server_site.request("OPTIONS", "/hello.txt")
    assert r.status == 200
    assert r.header("allow") == "GET, HEAD, OPTIONS"
    assert r.header("content-length") == "0"
    r = server_site.request("OPTIONS", "*")
    assert r.status == 200
    assert r.header("allow") == "GET, HEAD, OPTIONS"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE"])
def test_other_methods_405(server_site, method):
    c = server_site.conn()
    r = c.request(method, "/hello.txt", body=b"data" if method in ("POST", "PUT") else b"")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD, OPTIONS"
    # The connection stays usable.
    assert c.request("GET", "/hello.txt").status == 200
    c.close()


def test_unknown_method_501(server_site):
    c = server_site.conn()
    c.send(b"BREW /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response()
    assert r.status == 501
    assert c.closed()


# ---- validators ----------------------------------------------------------------

def test_etag_and_if_none_match(server_site):
    r = server_site.get("/hello.txt")
    etag = r.header("etag")
    r2 = server_site.get("/hello.txt", headers={"If-None-Match": etag})
    assert r2.status == 304
    assert r2.body == b""
    assert r2.header("etag") == etag
    assert r2.header("content-length") is None
    assert server_site.get("/hello.txt", headers={"If-None-Match": '"other"'}).status == 200
    assert server_site.get("/hello.txt", headers={"If-None-Match": f'"x", W/{etag}'}).status == 304
    assert server_site.get("/hello.txt", headers={"If-None-Match": "*"}).status == 304


def test_if_modified_since(server_site):
    r = server_site.get("/hello.txt")
    lm = r.header("last-modified")
    assert server_site.get("/hello.txt", headers={"If-Modified-Since": lm}).status == 304
    old = email.utils.formatdate(time.time() - 86400 * 365, usegmt=True)
    assert server_site.get("/hello.txt", headers={"If-Modified-Since": old}).status == 200
    # Obsolete date forms are understood too (RFC 9110 section 5.6.7).
    future = time.gmtime(time.time() + 86400)
    asctime = (time.strftime("%a %b ", future) + f"{future.tm_mday:2d}" +
               time.strftime(" %H:%M:%S %Y", future))
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", future)
    assert server_site.get("/hello.txt", headers={"If-Modified-Since": asctime}).status == 304
    assert server_site.get("/hello.txt", headers={"If-Modified-Since": rfc850}).status == 304
    # An invalid date is ignored.
    assert server_site.get("/hello.txt", headers={"If-Modified-Since": "yesterday"}).status == 200
    # If-None-Match takes precedence over If-Modified-Since.
    r = server_site.get("/hello.txt", headers={"If-None-Match": '"no"', "If-Modified-Since": lm})
    assert r.status == 200


def raw_get(srv, path, lines):
    """GET with header lines given as (name, value) pairs, repeats allowed."""
    c = srv.conn()
    try:
        head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
        head += "".join(f"{n}: {v}\r\n" for n, v in lines)
        c.send(head + "\r\n")
        return c.read_response()
    finally:
        c.close()


def test_repeated_if_none_match_lines_are_one_list(server_site):
    """RFC 9110 section 5.3: two lines mean the same as one combined line."""
    etag = server_site.get("/hello.txt").header("etag")
    r = raw_get(server_site, "/hello.txt", [("If-None-Match", '"x"'), ("If-None-Match", etag)])
    assert r.status == 304 and r.header("etag") == etag
    r = raw_get(server_site, "/hello.txt", [("If-None-Match", f'"x", {etag}')])
    assert r.status == 304
    r = raw_get(server_site, "/hello.txt", [("If-None-Match", '"x"'), ("If-None-Match", '"y"')])
    assert r.status == 200 and r.body == b"Hello World!\n"


def test_repeated_if_match_lines_are_one_list(server_site):
    etag = server_site.get("/hello.txt").header("etag")
    r = raw_get(server_site, "/hello.txt", [("If-Match", '"x"'), ("If-Match", etag)])
    assert r.status == 200 and r.body == b"Hello World!\n"
    r = raw_get(server_site, "/hello.txt", [("If-Match", etag), ("If-Match", '"x"')])
    assert r.status == 200
    r = raw_get(server_site, "/hello.txt", [("If-Match", '"x"'), ("If-Match", '"y"')])
    assert r.status == 412


def test_if_range_with_a_list_does_not_match(server_site):
    """If-Range holds one entity tag (RFC 9110 section 13.1.5): a list, or two
    lines, never match, so the Range is ignored and the whole file is sent."""
    etag = server_site.get("/digits.txt").header("etag")
    for lines in ([("If-Range", f'{etag}, "zz"')],
                  [("If-Range", f'"zz", {etag}')],
                  [("If-Range", etag), ("If-Range", etag)],
                  [("If-Range", etag), ("If-Range", '"zz"')]):
        r = raw_get(server_site, "/digits.txt", [("Range", "bytes=0-1")] + lines)
        assert r.status == 200 and r.body == b"0123456789", lines
        assert r.header("content-range") is None
    r = raw_get(server_site, "/digits.txt", [("Range", "bytes=0-1"), ("If-Range", f" {etag} ")])
    assert r.status == 206 and r.body == b"01"


def test_two_range_lines_are_ignored(server_site):
    """Two Range lines are an invalid range: the header is ignored (200)."""
    for lines in ([("Range", "bytes=0-1"), ("Range", "bytes=2-3")],
                  [("Range", "bytes=0-1"), ("Range", "bytes=0-1")],
                  [("Range", "bytes=50-60"), ("Range", "bytes=0-1")]):
        r = raw_get(server_site, "/digits.txt", lines)
        assert r.status == 200 and r.body == b"0123456789", lines
        assert r.header("content-range") is None


def test_repeated_date_conditions_are_ignored(server_site):
    """A date field with more than one member is ignored (RFC 9110 13.1.3, 13.1.4)."""
    lm = server_site.get("/hello.txt").header("last-modified")
    old = email.utils.formatdate(time.time() - 86400 * 365, usegmt=True)
    r = raw_get(server_site, "/hello.txt", [("If-Modified-Since", lm), ("If-Modified-Since", lm)])
    assert r.status == 200 and r.body == b"Hello World!\n"
    r = raw_get(server_site, "/hello.txt",
                [("If-Unmodified-Since", old), ("If-Unmodified-Since", old)])
    assert r.status == 200


def test_if_match_and_if_unmodified_since(server_site):
    etag = server_site.get("/hello.txt").header("etag")
    assert server_site.get("/hello.txt", headers={"If-Match": etag}).status == 200
    assert server_site.get("/hello.txt", headers={"If-Match": '"nope"'}).status == 412
    assert server_site.get("/hello.txt", headers={"If-Match": f"W/{etag}"}).status == 412
    old = email.utils.formatdate(time.time() - 86400 * 365, usegmt=True)
    assert server_site.get("/hello.txt", headers={"If-Unmodified-Since": old}).status == 412


def test_changed_file_is_seen_within_a_second(site):
    """Each worker's open-file cache revalidates an entry the first time it is
    used in a new second: from the second after a change on, every worker
    serves the new file."""
    site.start()
    conns = [site.conn() for _ in range(8)]  # spread over the workers
    e1 = None
    for c in conns:
        e1 = c.request("GET", "/digits.txt").header("etag")
    site.file("digits.txt", "01234567890")
    time.sleep(1.1)
    for c in conns:
        r = c.request("GET", "/digits.txt")
        assert r.body == b"01234567890"
        assert r.header("etag") != e1
        assert c.request("GET", "/digits.txt", headers={"If-None-Match": e1}).status == 200
        c.close()


def test_deleted_file_is_gone_within_a_second(site):
    site.start()
    conns = [site.conn() for _ in range(8)]
    for c in conns:
        assert c.request("GET", "/hello.txt").status == 200
    (site.docroot / "hello.txt").unlink()
    time.sleep(1.1)
    for c in conns:
        assert c.request("GET", "/hello.txt").status == 404
        c.close()


def test_file_cache_off_sees_changes_at_once(site):
    site.set(FileCache=0)
    site.start()
    e1 = site.get("/digits.txt").header("etag")
    time.sleep(0.01)
    site.file("digits.txt", "01234567890")
    r = site.get("/digits.txt")
    assert r.body == b"01234567890" and r.header("etag") != e1


def test_cached_file_served_to_many(site):
    """Many requests share one cache entry; replacing the file mid-way is safe."""
    site.start()
    c = site.conn()
    for i in range(50):
        assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    c.close()


# ---- ranges --------------------------------------------------------------------

@pytest.mark.parametrize("spec,body,crange", [
    ("bytes=0-4", b"01234", "bytes 0-4/10"),
    ("bytes=5-", b"56789", "bytes 5-9/10"),
    ("bytes=-3", b"789", "bytes 7-9/10"),
    ("bytes=-100", b"0123456789", "bytes 0-9/10"),
    ("bytes=8-100", b"89", "bytes 8-9/10"),
    ("bytes=3-3", b"3", "bytes 3-3/10"),
])
def test_single_range(server_site, spec, body, crange):
    r = server_site.get("/digits.txt", headers={"Range": spec})
    assert r.status == 206
    assert r.body == body
    assert r.header("content-range") == crange
    assert r.header("content-length") == str(len(body))


@pytest.mark.parametrize("spec", ["bytes=10-", "bytes=100-200", "bytes=-0", "bytes=10-,20-30",
                                  "bytes=-0,100-"])
def test_unsatisfiable_range(server_site, spec):
    c = server_site.conn()
    r = c.request("GET", "/digits.txt", headers={"Range": spec})
    assert r.status == 416
    assert r.header("content-range") == "bytes */10"
    assert c.request("GET", "/hello.txt").status == 200  # still usable
    c.close()


@pytest.mark.parametrize("spec", ["items=0-1", "bytes=5-2", "bytes=abc", "bytes=0-1,5-2"])
def test_ignored_range_gives_whole_file(server_site, spec):
    r = server_site.get("/digits.txt", headers={"Range": spec})
    assert r.status == 200
    assert r.body == b"0123456789"


# ---- several ranges: multipart/byteranges (RFC 9110 section 14.6) -------------

DIGITS = b"0123456789"


@pytest.mark.parametrize("spec,ranges", [
    ("bytes=0-1,3-4", [(0, 1), (3, 4)]),
    ("bytes=0-0,-2", [(0, 0), (8, 9)]),
    ("bytes=1-2,5-", [(1, 2), (5, 9)]),
    ("bytes=0-0,2-2,4-4,6-6,8-8", [(0, 0), (2, 2), (4, 4), (6, 6), (8, 8)]),
    ("bytes=0-4,5-9", [(0, 4), (5, 9)]),            # adjacent: two parts, as asked
    ("bytes=1-2,100-200,5-6", [(1, 2), (5, 6)]),    # the unsatisfiable one left out
    (" bytes=1-2 , 5-6 ,", [(1, 2), (5, 6)]),
])
def test_several_ranges_are_a_multipart_answer(server_site, spec, ranges):
    c = server_site.conn()
    whole = c.request("GET", "/digits.txt")
    r = c.request("GET", "/digits.txt", headers={"Range": spec})
    assert r.status == 206, r
    assert r.header("content-range") is None
    assert r.header("content-length") == str(len(r.body))
    ctype = r.header("content-type")
    check_parts(ctype, r.body, DIGITS, ranges, whole.header("content-type"))
    assert email_parts(ctype, r.body) == [(f"bytes {a}-{b}/10", DIGITS[a:b + 1]) for a, b in ranges]
    # the representation's own fields, as on the single range
    for name in ("etag", "last-modified", "accept-ranges"):
        assert r.header(name) == whole.header(name), name
    # exact length: the connection goes on with the next answer
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    c.close()


def test_one_satisfiable_range_of_several_is_a_single_part(server_site):
    r = server_site.get("/digits.txt", headers={"Range": "bytes=2-3,50-60,-0"})
    assert r.status == 206
    assert r.header("content-range") == "bytes 2-3/10"
    assert r.body == b"23"
    assert r.header("content-type").startswith("text/plain")


@pytest.mark.parametrize("spec", [
    "bytes=0-1,1-2",      # overlap by one byte
    "bytes=0-1,0-1",      # the same range twice
    "bytes=0-5,2-3",      # one inside the other
    "bytes=5-6,0-1",      # out of order
    "bytes=-2,0-1",       # out of order once the suffix is resolved
    "bytes=0-,2-3",       # the open range covers the rest
    "bytes=0-1,-100",     # the suffix covers everything
    "bytes=0-1,6-7,3-4",  # the third goes back
])
def test_overlapping_or_out_of_order_ranges_get_the_whole_file(server_site, spec):
    """RFC 9110 section 14.2 lets a server ignore such sets (the shape of a
    denial of service: the same bytes asked for many times): 200, all of it."""
    r = server_site.get("/digits.txt", headers={"Range": spec})
    assert r.status == 200, r
    assert r.body == DIGITS
    assert r.header("content-range") is None
    assert r.header("content-type").startswith("text/plain")


def test_at_most_32_ranges(site):
    data = bytes(range(256)) * 4
    site.file("k.bin", data)
    site.start()
    specs = [(3 * i, 3 * i + 1) for i in range(33)]
    spec = "bytes=" + ",".join(f"{a}-{b}" for a, b in specs[:32])
    r = site.get("/k.bin", headers={"Range": spec})
    assert r.status == 206
    check_parts(r.header("content-type"), r.body, data, specs[:32], "application/octet-stream")
    # one more, or one more that is not even satisfiable: the field is ignored
    for extra in (f"{specs[32][0]}-{specs[32][1]}", "5000-6000"):
        r = site.get("/k.bin", headers={"Range": spec + "," + extra})
        assert r.status == 200 and r.body == data, extra
        assert r.header("content-range") is None


def test_multipart_of_a_large_file(site):
    """Parts far apart in a file larger than the head's buffer: sent with
    sendfile, over a kept connection, twice."""
    data = os.urandom(1 << 20)
    site.file("big.bin", data)
    site.start()
    ranges = [(0, 99), (4096, 300000), (500000, 500000), ((1 << 20) - 70000, (1 << 20) - 1)]
    spec = "bytes=" + ",".join(f"{a}-{b}" for a, b in ranges[:-1]) + ",-70000"
    c = site.conn()
    for _ in range(2):
        r = c.request("GET", "/big.bin", headers={"Range": spec})
        assert r.status == 206
        assert r.header("content-length") == str(len(r.body))
        check_parts(r.header("content-type"), r.body, data, ranges, "application/octet-stream")
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    c.close()


def test_multipart_boundary_is_new_each_answer_and_not_in_the_file(site):
    # A file that holds boundaries like the server's: those it sent before,
    # and a run of hexadecimal digits. The next answers' are new.
    site.file("b.txt", "x" * 100)
    site.file("f.txt", "0123456789abcdef" * 16)
    site.start()
    seen = set()
    c = site.conn()
    for i in range(30):
        r = c.request("GET", "/f.txt" if i % 2 else "/b.txt", headers={"Range": "bytes=0-1,10-20"})
        assert r.status == 206
        b = boundary_of(r.header("content-type"))
        assert b not in seen
        seen.add(b)
        read_parts(r.header("content-type"), r.body)
    c.close()
    # another connection, other workers: still new
    for _ in range(8):
        r = site.get("/b.txt", headers={"Range": "bytes=0-1,10-20"})
        b = boundary_of(r.header("content-type"))
        assert b not in seen
        seen.add(b)


def test_multipart_with_if_range(server_site):
    r = server_site.get("/digits.txt")
    etag, lm = r.header("etag"), r.header("last-modified")
    spec = "bytes=0-1,8-9"
    for validator in (etag, lm):
        r = server_site.get("/digits.txt", headers={"Range": spec, "If-Range": validator})
        assert r.status == 206
        check_parts(r.header("content-type"), r.body, DIGITS, [(0, 1), (8, 9)],
                    "text/plain; charset=utf-8")
    old = email.utils.formatdate(time.time() - 86400, usegmt=True)
    for validator in ('"stale"', old, f"W/{etag}"):
        r = server_site.get("/digits.txt", headers={"Range": spec, "If-Range": validator})
        assert r.status == 200 and r.body == DIGITS, validator
        assert r.header("content-type").startswith("text/plain")


def test_head_ignores_several_ranges(server_site):
    c = server_site.conn()
    r = c.request("HEAD", "/digits.txt", headers={"Range": "bytes=0-1,3-4"})
    assert r.status == 200
    assert r.header("content-length") == "10"
    assert r.header("content-type").startswith("text/plain")
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    c.close()


def test_multipart_to_http10_client(server_site):
    c = server_site.conn()
    c.send("GET /digits.txt HTTP/1.0\r\nRange: bytes=0-1,3-4\r\n\r\n")
    data = b""
    while True:
        chunk = c.sock.recv(65536)
        if not chunk:
            break
        data += chunk
    c.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 206 ")
    ctype = [line.split(b": ", 1)[1] for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-type:")][0].decode()
    assert f"Content-Length: {len(body)}".encode() in head
    check_parts(ctype, body, DIGITS, [(0, 1), (3, 4)], "text/plain; charset=utf-8")


def test_range_on_empty_file(server_site):
    r = server_site.get("/empty.txt", headers={"Range": "bytes=0-"})
    assert r.status == 416
    assert r.header("content-range") == "bytes */0"


def test_if_range(server_site):
    r = server_site.get("/digits.txt")
    etag, lm = r.header("etag"), r.header("last-modified")
    assert server_site.get("/digits.txt", headers={"Range": "bytes=0-1", "If-Range": etag}).status == 206
    r = server_site.get("/digits.txt", headers={"Range": "bytes=0-1", "If-Range": '"stale"'})
    assert r.status == 200 and r.body == b"0123456789"
    assert server_site.get("/digits.txt", headers={"Range": "bytes=0-1", "If-Range": lm}).status == 206
    old = email.utils.formatdate(time.time() - 86400, usegmt=True)
    assert server_site.get("/digits.txt", headers={"Range": "bytes=0-1", "If-Range": old}).status == 200


def test_head_ignores_range(server_site):
    c = server_site.conn()
    r = c.request("HEAD", "/digits.txt", headers={"Range": "bytes=0-1"})
    assert r.status == 200
    assert r.header("content-length") == "10"
    c.close()


def test_range_of_large_file(site):
    data = os.urandom(1024 * 1024)
    site.file("big.bin", data)
    site.start()
    r = site.get("/big.bin", headers={"Range": "bytes=1000-500999"})
    assert r.status == 206
    assert r.body == data[1000:501000]


SEND_CALLS = ["setsockopt", "epoll_wait", "epoll_pwait", "write", "writev", "sendmsg", "sendto",
              "sendfile"]


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_large_file_is_sent_corked_and_uncorked_before_waiting(site, tmp_path):
    # MSG_MORE holds the head back for one call only: an ACK processed
    # between the head and the body, or between two 64 KiB steps of one
    # sendfile(2), pushed a partial segment out on its own (1 MB left in
    # 21.5 segments under load instead of 18.2). A file body of more than
    # four steps goes out corked (TCP_CORK), head included, and the cork is
    # off before the worker waits (the kernel holds a partial segment up to
    # 200 ms). A smaller body, or none, is not corked.
    data = os.urandom(1 << 20)
    site.file("big.bin", data)
    site.file("steps.bin", data[:4 * 65536])
    site.start()
    conn = site.conn()
    assert conn.request("GET", "/hello.txt").status == 200
    cases = (("GET", "/big.bin", {}, data, True),
             ("GET", "/big.bin", {"Range": "bytes=1000-300999"}, data[1000:301000], True),
             ("GET", "/big.bin", {"Range": "bytes=0-262143"}, data[:262144], False),
             ("GET", "/steps.bin", {}, data[:262144], False),
             ("HEAD", "/big.bin", {}, b"", False))
    for method, path, headers, body, corked in cases:
        tracer = Strace(site.proc.pid, SEND_CALLS, tmp_path / "cork.out")
        try:
            r = conn.request(method, path, headers=headers)
        finally:
            lines = tracer.stop()
        assert r.body == body
        inside, outside, waits = corked_writes(lines)
        assert waits == 0, lines
        if corked:
            assert inside >= 2 and outside == 0, lines  # the head, then sendfile
        else:
            assert (inside, outside) == (0, 0), lines
    conn.close()


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_multipart_parts_go_with_sendfile_corked(site, tmp_path):
    # A multipart body larger than the head's buffer: the part heads from
    # memory (writev), each part's bytes with sendfile(2), the file never
    # read by the worker; corked from the head to the closing delimiter
    # (each sendfile would otherwise end in a partial segment). A small one
    # rides in the head's buffer: one write. The boundaries' random bytes
    # are drawn twenty answers at a time.
    data = os.urandom(1 << 20)
    site.file("big.bin", data)
    site.start()
    conn = site.conn()
    assert conn.request("GET", "/big.bin", headers={"Range": "bytes=0-0"}).status == 206
    calls = SEND_CALLS + ["pread64", "read", "getrandom"]
    ranges = [(10, 5000), (70000, 70010), (200000, 399999)]
    spec = "bytes=" + ",".join(f"{a}-{b}" for a, b in ranges)
    tracer = Strace(site.proc.pid, calls, tmp_path / "parts.out")
    try:
        for _ in range(4):
            r = conn.request("GET", "/big.bin", headers={"Range": spec})
            check_parts(r.header("content-type"), r.body, data, ranges, "application/octet-stream")
    finally:
        lines = tracer.stop()
    inside, outside, waits = corked_writes(lines)
    assert waits == 0 and outside == 0, lines
    assert sum(1 for line in lines if " sendfile(" in line) >= 4 * 3, lines
    assert not [line for line in lines if " pread64(" in line], lines
    assert sum(1 for line in lines if " getrandom(" in line) <= 1, lines
    tracer = Strace(site.proc.pid, calls, tmp_path / "small.out")
    try:
        r = conn.request("GET", "/big.bin", headers={"Range": "bytes=0-9,100-109"})
        check_parts(r.header("content-type"), r.body, data, [(0, 9), (100, 109)],
                    "application/octet-stream")
    finally:
        lines = tracer.stop()
    writes = [line for line in lines if re.search(r" (write|writev|sendmsg|sendto|sendfile)\(",
                                                   line)]
    assert len(writes) == 1 and " sendfile(" not in writes[0], lines
    assert not [line for line in lines if "TCP_CORK" in line], lines
    conn.close()


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_multipart_to_a_slow_reader_is_uncorked_while_waiting(site, tmp_path):
    # The socket fills in the middle of the parts (a part head's write or a
    # sendfile meets EAGAIN): the worker waits uncorked, and goes on where
    # it stopped, every byte in place.
    data = os.urandom(6 << 20)
    site.file("huge.bin", data)
    site.start()
    ranges = [(5, 10), (100, 2 << 20), ((2 << 20) + 1, (2 << 20) + 1), (3 << 20, (6 << 20) - 1)]
    spec = "bytes=" + ",".join(f"{a}-{b}" for a, b in ranges)
    sock = small_window(site.port, 16384, timeout=10)
    tracer = Strace(site.proc.pid, SEND_CALLS, tmp_path / "slow.out")
    try:
        sock.sendall(f"GET /huge.bin HTTP/1.1\r\nHost: localhost\r\nRange: {spec}\r\n\r\n"
                     .encode())
        time.sleep(0.3 * SLOW)  # the socket fills and the worker waits
        got = b""
        while b"\r\n\r\n" not in got:
            got += sock.recv(65536)
        head, body = got.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"(?i)\r\ncontent-length: (\d+)", head).group(1))
        while len(body) < length:
            chunk = sock.recv(65536)
            assert chunk, len(body)
            body += chunk
            time.sleep(0.0005)
    finally:
        lines = tracer.stop()
        sock.close()
    ctype = re.search(rb"(?i)\r\ncontent-type: ([^\r]*)", head).group(1).decode()
    check_parts(ctype, body, data, ranges, "application/octet-stream")
    inside, outside, waits = corked_writes(lines)
    assert waits == 0, lines
    assert sum(1 for line in lines if " sendfile(" in line) >= 4, lines


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_large_file_to_a_slow_reader_is_uncorked_while_waiting(site, tmp_path):
    # The socket fills, sendfile(2) meets EAGAIN and the worker waits for
    # the socket to drain: uncorked, or the body's last partial segment of
    # each turn would wait up to 200 ms. Each turn corks again while more
    # than four steps are left, so only the last sendfile may go uncorked.
    data = os.urandom(6 << 20)
    site.file("huge.bin", data)
    site.start()
    sock = small_window(site.port, 16384, timeout=10)
    tracer = Strace(site.proc.pid, SEND_CALLS, tmp_path / "slow.out")
    try:
        sock.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(0.3 * SLOW)  # the socket fills and the worker waits
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < len(data):
            chunk = sock.recv(65536)
            assert chunk, len(got)
            got += chunk
            time.sleep(0.0005)
    finally:
        lines = tracer.stop()
        sock.close()
    assert got.split(b"\r\n\r\n", 1)[1] == data
    inside, outside, waits = corked_writes(lines)
    assert waits == 0, lines
    sendfiles = sum(1 for line in lines if " sendfile(" in line)
    assert sendfiles >= 2, lines  # the worker waited at least once
    assert inside + outside == sendfiles + 1 and outside <= 1, lines
