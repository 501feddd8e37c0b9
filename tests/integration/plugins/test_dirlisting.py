"""Tier 9: the dirlisting plugin (plugins/dirlisting), loaded as a shared object.

Each test starts the real server with monkey-dirlisting.so from plugins.load
and reads the listings as a client would: rows are parsed from the HTML,
links are followed back through the server.
"""

import html
import os
import re
import signal
import subprocess
import time
from collections import namedtuple

import pytest

from conftest import BUILD, MONKEY, SLOW, needs_dlopen, wait_for

pytestmark = needs_dlopen

SO = BUILD / "plugins" / "monkey-dirlisting.so"
T = 1700000000  # 2023-11-14 22:13:20 UTC
T_TEXT = "2023-11-14 22:13:20"
T_ISO = "2023-11-14T22:13:20Z"

ROW = re.compile(
    r'<tr class="(parent|d|f)"><td class="n"><a href="([^"]*)">([^<]*)</a></td>'
    r'<td class="s"(?: title="(\d+) bytes")?>([^<]*)</td>'
    r'<td class="m">(?:<time datetime="([^"]*)">([^<]*)</time>)?</td></tr>')
Row = namedtuple("Row", "kind href name exact size iso mtime")


def rows(body):
    """The listing's rows, names unescaped; every <tr> of the body must parse."""
    text = body.decode("utf-8")
    found = [Row(k, h, html.unescape(n), int(e) if e else None, s, i or None, m or None)
             for k, h, n, e, s, i, m in ROW.findall(text)]
    assert text.count("<tr class=") == len(found), text
    return found


def names(body):
    return [r.name for r in rows(body) if r.kind != "parent"]


def lister(make_server, section="[DIRLISTING]\n    Enable On\n", plugin_conf=None, **server):
    srv = make_server()
    srv.plugins = [str(SO)]
    srv.site_extra = section
    if plugin_conf is not None:
        (srv.conf / "plugins").mkdir(exist_ok=True)
        (srv.conf / "plugins" / "dirlisting.conf").write_text(plugin_conf)
    if server:
        srv.set(**server)
    return srv


def set_times(*paths):
    for p in paths:
        os.utime(p, (T, T), follow_symlinks=False)


# ---- content --------------------------------------------------------------------

def test_listing_content_order_sizes_times(make_server):
    srv = lister(make_server)
    files = {"a.txt": 5, "B.txt": 0, "c.bin": 1500, "big.bin": 3 * 1024 * 1024}
    for name, size in files.items():
        with open(srv.file(f"pub/{name}"), "wb") as f:
            f.truncate(size)
    for d in ("zdir", "Adir", "sub dir"):
        (srv.docroot / "pub" / d).mkdir()
    set_times(*(srv.docroot / "pub").iterdir())
    srv.start()

    r = srv.get("/pub/")
    assert r.status == 200
    assert r.header("content-type") == "text/html; charset=utf-8"
    text = r.body.decode()
    assert text.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    assert "<title>Index of /pub/</title>" in text and "<h1>Index of /pub/</h1>" in text
    assert text.rstrip().endswith("</html>")
    got = rows(r.body)
    assert got[0] == Row("parent", "../", "../", None, "-", None, None)
    # Directories first, then files, each group in byte order.
    assert [x.name for x in got[1:]] == ["Adir/", "sub dir/", "zdir/",
                                         "B.txt", "a.txt", "big.bin", "c.bin"]
    assert [x.kind for x in got[1:]] == ["d"] * 3 + ["f"] * 4
    assert got[2].href == "sub%20dir/"
    by_name = {x.name: x for x in got}
    assert (by_name["a.txt"].exact, by_name["a.txt"].size) == (5, "5 B")
    assert (by_name["B.txt"].exact, by_name["B.txt"].size) == (0, "0 B")
    assert (by_name["c.bin"].exact, by_name["c.bin"].size) == (1500, "1.5 KiB")
    assert (by_name["big.bin"].exact, by_name["big.bin"].size) == (3145728, "3.0 MiB")
    assert by_name["zdir/"].size == "-" and by_name["zdir/"].exact is None
    for x in got[1:]:
        assert (x.iso, x.mtime) == (T_ISO, T_TEXT)
    assert "3 directories, 4 files" in text
    # A subdirectory is listed too, with its parent link.
    r = srv.get("/pub/sub%20dir/")
    assert r.status == 200 and rows(r.body) == [Row("parent", "../", "../", None, "-", None, None)]


def test_counts_in_words(make_server):
    """One of a kind is singular: "1 directory, 1 file", "more than 1 entry"."""
    srv = lister(make_server)
    srv.file("one/a.txt", "a")
    srv.file("one/sub/b.txt", "b")
    srv.file("none/.keep", "")
    srv.start()
    assert "<p class=\"count\">1 directory, 1 file</p>" in srv.get("/one/").body.decode()
    assert "<p class=\"count\">0 directories, 0 files</p>" in srv.get("/none/").body.decode()
    srv.stop()
    srv = lister(make_server, plugin_conf="[DIRLISTING]\n    MaxEntries 1\n")
    srv.file("two/a.txt", "a")
    srv.file("two/b.txt", "b")
    srv.start()
    assert "Truncated: this directory has more than 1 entry; only 1 is listed." in \
        srv.get("/two/").body.decode()


def test_the_sites_own_index_files(make_server):
    """api->index_file gives the site's IndexFiles when it has some: a directory holding
    only the server's index name is listed on a site whose IndexFiles does not name it."""
    srv = lister(make_server)
    srv.site_conf["IndexFiles"] = "start.txt"
    srv.file("pub/index.html", "not an index on this site\n")
    srv.file("own/start.txt", "the site's index\n")
    srv.start()
    r = srv.get("/pub/")
    assert r.status == 200 and names(r.body) == ["index.html"]
    assert srv.get("/own/").body == b"the site's index\n"


def test_root_has_no_parent_link(make_server):
    srv = lister(make_server)
    srv.file("x.txt", "x")
    srv.start()
    r = srv.get("/")
    assert r.status == 200
    assert "<title>Index of /</title>" in r.body.decode()
    got = rows(r.body)
    assert [x.kind for x in got] == ["f"] and got[0].name == "x.txt"


NASTY = ["<b>&\"x'.txt", "a b.txt", "100%.txt", "#hash.txt", "q?.txt", "caf\u00e9 \u6587.txt",
         "semi;colon+plus=.txt", "<img src=x onerror=alert(1)>", ".-_~x"]


def test_escaping_and_links_fetch_the_right_file(make_server):
    srv = lister(make_server, "[DIRLISTING]\n    Enable On\n    ShowHidden On\n")
    srv.site_conf["HideDotFiles"] = "Off"  # ".-_~x" and ".hidden" are served
    for i, name in enumerate(NASTY):
        srv.file(f"pub/{name}", f"content {i}\n")
    srv.file("pub/d<ir> &%/inner.txt", "inner\n")
    srv.file("pub/.hidden", "h")
    srv.start()

    r = srv.get("/pub/")
    assert r.status == 200
    text = r.body.decode()
    # No name reaches the page unescaped.
    assert "<b>" not in text and "<img" not in text and "x'.txt" not in text
    got = {x.name: x for x in rows(r.body) if x.kind != "parent"}
    assert set(got) == set(NASTY) | {"d<ir> &%/", ".hidden"}
    for x in got.values():
        # Links hold unreserved characters and %XX escapes only ('/' ends a directory).
        assert re.fullmatch(r"(?:[A-Za-z0-9._~-]|%[0-9A-F]{2})+/?", x.href), x.href
    assert got["a b.txt"].href == "a%20b.txt"
    assert got["100%.txt"].href == "100%25.txt"
    assert got["caf\u00e9 \u6587.txt"].href == "caf%C3%A9%20%E6%96%87.txt"
    assert got[".-_~x"].href == ".-_~x"
    assert got["d<ir> &%/"].href == "d%3Cir%3E%20%26%25/"
    c = srv.conn()
    for i, name in enumerate(NASTY):
        resp = c.request("GET", "/pub/" + got[name].href)
        assert resp.status == 200 and resp.body == f"content {i}\n".encode(), name
    sub = c.request("GET", "/pub/" + got["d<ir> &%/"].href)
    assert sub.status == 200
    assert "<title>Index of /pub/d&lt;ir&gt; &amp;%/</title>" in sub.body.decode()
    inner = rows(sub.body)[1]
    assert inner.name == "inner.txt"
    assert c.request("GET", "/pub/" + got["d<ir> &%/"].href + inner.href).body == b"inner\n"
    c.close()


def test_invalid_utf8_and_control_bytes(make_server):
    srv = lister(make_server)
    pub = srv.docroot / "pub"
    pub.mkdir()
    for raw, content in ((b"\xff\xfe.txt", b"latin\n"), (b"new\nline.txt", b"nl\n")):
        with open(os.path.join(bytes(pub), raw), "wb") as f:
            f.write(content)
    with open(os.path.join(bytes(pub), b"back\\slash.txt"), "wb") as f:
        f.write(b"bs\n")
    srv.start()
    r = srv.get("/pub/")
    got = {x.href: x for x in rows(r.body) if x.kind == "f"}
    # The page stays valid UTF-8; the bytes are shown as U+FFFD and kept in the link.
    assert set(got) == {"%FF%FE.txt", "new%0Aline.txt"}  # a backslash is never served
    assert got["%FF%FE.txt"].name == "\ufffd\ufffd.txt"
    assert got["new%0Aline.txt"].name == "new\ufffdline.txt"
    assert srv.get("/pub/%FF%FE.txt").body == b"latin\n"
    assert srv.get("/pub/new%0Aline.txt").body == b"nl\n"


def test_sort_nocase_and_stylesheet(make_server):
    srv = lister(make_server, plugin_conf="[DIRLISTING]\n    Sort nocase\n"
                 "    Stylesheet /css/list.css?a=1&b=\"2\"\n")
    for name in ("b.txt", "A.txt", "a.txt", "C.txt", "_x.txt"):
        srv.file(f"pub/{name}", "x")
    for d in ("zz", "Yy", "aa"):
        (srv.docroot / "pub" / d).mkdir()
    srv.start()
    r = srv.get("/pub/")
    # ASCII letters fold to lower case ('_' sorts before them); equal folds in byte order.
    assert names(r.body) == ["aa/", "Yy/", "zz/", "_x.txt", "A.txt", "a.txt", "b.txt", "C.txt"]
    text = r.body.decode()
    assert '<link rel="stylesheet" href="/css/list.css?a=1&amp;b=&quot;2&quot;">' in text
    assert "<style>" not in text


def test_hidden_files(make_server):
    srv = lister(make_server)
    srv.file("pub/.secret", "s")
    srv.file("pub/.hdir/x.txt", "x")
    srv.file("pub/shown.txt", "x")
    srv.start()
    r = srv.get("/pub/")
    assert names(r.body) == ["shown.txt"]
    assert b".secret" not in r.body and b".hdir" not in r.body
    # A hidden directory is not listed either: the site hides it (404).
    r = srv.get("/pub/.hdir/")
    assert r.status == 404 and b"Index of" not in r.body


def test_hidden_files_not_listed_while_the_site_hides_them(make_server):
    """With [HOST] HideDotFiles On (the default) the server answers 404 for
    hidden names, so ShowHidden lists only what it serves: /.well-known/."""
    srv = lister(make_server, "[DIRLISTING]\n    Enable On\n    ShowHidden On\n")
    srv.file("pub/.secret", "s")
    srv.file("pub/.hdir/x.txt", "x")
    srv.file("pub/shown.txt", "x")
    srv.file(".well-known/.inner", "i")
    srv.file(".well-known/token", "t")
    srv.file(".git/config", "c")
    srv.start()
    assert names(srv.get("/pub/").body) == ["shown.txt"]
    assert names(srv.get("/").body) == [".well-known/", "pub/"]
    r = srv.get("/.well-known/")
    assert r.status == 200 and names(r.body) == ["token"]
    for path in ("/pub/.hdir/", "/%2egit/", "/.git/", "/pub/.secret"):
        r = srv.get(path)
        assert r.status == 404 and b"Index of" not in r.body, path
    # Every link of a listing leads somewhere the server serves.
    for path in ("/", "/pub/", "/.well-known/"):
        for row in rows(srv.get(path).body):
            if row.kind != "parent":
                assert srv.get(path + row.href).status == 200, (path, row.href)


def test_hidden_files_shown_with_show_hidden(make_server):
    srv = lister(make_server, "[DIRLISTING]\n    Enable On\n    ShowHidden On\n")
    srv.site_conf["HideDotFiles"] = "Off"
    srv.file("pub/.secret", "s")
    srv.file("pub/.hdir/x.txt", "x")
    srv.file("pub/shown.txt", "x")
    srv.start()
    r = srv.get("/pub/")
    assert names(r.body) == [".hdir/", ".secret", "shown.txt"]
    r = srv.get("/pub/.hdir/")
    assert r.status == 200 and names(r.body) == ["x.txt"]


def test_special_files_not_listed(make_server):
    srv = lister(make_server)
    srv.file("pub/f.txt", "x")
    os.mkfifo(srv.docroot / "pub" / "fifo")
    srv.start()
    assert names(srv.get("/pub/").body) == ["f.txt"]


# ---- where listings are enabled ---------------------------------------------------

def test_enabled_per_path_only(make_server):
    srv = lister(make_server, "[DIRLISTING]\n    Path /pub\n    Path /deep/er/\n")
    for d in ("pub", "pub/sub", "other", "public", "deep/er", "deep/er/x", "deep/other"):
        srv.file(f"{d}/f.txt", "x")
    srv.start()
    for path in ("/pub/", "/pub/sub/", "/deep/er/", "/deep/er/x/"):
        r = srv.get(path)
        assert r.status == 200 and names(r.body)[-1] == "f.txt", path
    for path in ("/", "/other/", "/public/", "/deep/", "/deep/other/"):
        r = srv.get(path)
        assert r.status == 403 and b"Index of" not in r.body, path
    # Files are served as usual and "dir" is still redirected by the core.
    assert srv.get("/pub/f.txt").body == b"x"
    r = srv.get("/pub")
    assert r.status == 301 and r.header("location") == "/pub/"


def test_not_enabled_without_section_or_with_enable_off(make_server, tmp_path):
    srv = lister(make_server, "[DIRLISTING]\n    Enable Off\n    ShowHidden On\n")
    other = tmp_path / "other"
    (other / "pub").mkdir(parents=True)
    (other / "pub" / "o.txt").write_text("o")
    srv.extra_sites["other"] = f"[HOST]\n    ServerName other.test\n    DocumentRoot {other}\n"
    srv.file("pub/f.txt", "x")
    srv.start()
    assert srv.get("/pub/").status == 403
    assert srv.get("/pub/", headers={"Host": "other.test"}).status == 403


def test_enabled_per_site(make_server, tmp_path):
    srv = lister(make_server, "")
    other = tmp_path / "other"
    (other / "pub").mkdir(parents=True)
    (other / "pub" / "o.txt").write_text("o")
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test\n    DocumentRoot {other}\n"
                                "[DIRLISTING]\n    Enable On\n")
    srv.file("pub/f.txt", "x")
    srv.start()
    assert srv.get("/pub/").status == 403
    r = srv.get("/pub/", headers={"Host": "other.test"})
    assert r.status == 200 and names(r.body) == ["o.txt"]


def test_index_file_is_served_instead(make_server):
    srv = lister(make_server)
    srv.file("pub/index.html", "<p>the index</p>\n")
    srv.file("pub/other.txt", "x")
    srv.file("alt/index.htm", "htm index\n")
    srv.file("dirindex/index.html/inside.txt", "x")  # a directory named like the index
    srv.start()
    r = srv.get("/pub/")
    assert r.status == 200 and r.body == b"<p>the index</p>\n"
    assert srv.get("/alt/").body == b"htm index\n"
    r = srv.get("/dirindex/")
    assert r.status == 200 and names(r.body) == ["index.html/"]


def test_head_and_keepalive(make_server):
    srv = lister(make_server)
    for i in range(20):
        srv.file(f"pub/file{i:02}.txt", "x" * i)
    srv.start()
    c = srv.conn()
    full = c.request("GET", "/pub/")
    head = c.request("HEAD", "/pub/")
    assert head.status == 200 and head.body == b""
    assert head.header("content-type") == "text/html; charset=utf-8"
    assert int(head.header("content-length")) == len(full.body) > 0
    # Nothing of a body followed the HEAD response: the next answer is in step.
    assert c.request("GET", "/pub/file03.txt").body == b"xxx"
    c.close()


def test_other_methods_are_not_listings(make_server):
    srv = lister(make_server)
    srv.file("pub/f.txt", "x")
    srv.start()
    r = srv.request("POST", "/pub/", body=b"data")
    assert r.status == 405 and b"Index of" not in r.body
    assert srv.request("DELETE", "/pub/").status == 405


def test_max_entries_truncates(make_server):
    srv = lister(make_server, plugin_conf="[DIRLISTING]\n    MaxEntries 5\n")
    for i in range(12):
        srv.file(f"pub/f{i:02}.txt", "x")
    srv.start()
    r = srv.get("/pub/")
    got = names(r.body)
    assert len(got) == 5 and got == sorted(got)
    assert "Truncated: this directory has more than 5 entries; only 5 are listed." in \
        r.body.decode()
    # Exactly at the limit: no note.
    srv2 = lister(make_server, plugin_conf="[DIRLISTING]\n    MaxEntries 12\n")
    for i in range(12):
        srv2.file(f"pub/f{i:02}.txt", "x")
    srv2.start()
    r = srv2.get("/pub/")
    assert len(names(r.body)) == 12 and b"Truncated" not in r.body


# ---- a large directory, off the worker ----------------------------------------------

def test_large_directory_listed_while_worker_serves(make_server):
    srv = lister(make_server, Workers=1, Timeout=30)
    big = srv.docroot / "big"
    big.mkdir()
    expected = []
    for i in range(10000):
        name = f"entry-{i:05d}-{'x' * 40}.dat"
        (big / name).write_bytes(b"")
        expected.append(name)
    srv.file("small.txt", "small\n")
    srv.start()

    t0 = time.monotonic()
    r = srv.get("/big/")
    single = time.monotonic() - t0
    assert r.status == 200
    got = rows(r.body)
    assert [x.kind for x in got] == ["parent"] + ["f"] * 10000
    assert [x.name for x in got[1:]] == expected  # sorted, nothing lost
    assert all(x.exact == 0 for x in got[1:])

    # Several listings at once keep the task threads busy; a small request
    # sent meanwhile to the only worker is answered long before they finish.
    n = 6
    conns = [srv.conn(timeout=30) for _ in range(n)]
    t0 = time.monotonic()
    for c in conns:
        c.send(b"GET /big/ HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.01 * SLOW)
    ts = time.monotonic()
    small = srv.get("/small.txt")
    small_latency = time.monotonic() - ts
    small_done = time.monotonic() - t0
    assert small.body == b"small\n"
    for c in conns:
        resp = c.read_response()
        assert resp.status == 200 and len(resp.body) == len(r.body)
        c.close()
    listings_done = time.monotonic() - t0
    print(f"\n10000 entries: one listing {single * 1000:.1f} ms ({len(r.body)} bytes); "
          f"{n} concurrent listings {listings_done * 1000:.1f} ms; small request answered "
          f"after {small_latency * 1000:.1f} ms, {small_done * 1000:.1f} ms after the first send")
    assert small_done < listings_done / 3
    assert small_latency < listings_done / 4


# ---- containment ---------------------------------------------------------------------

def test_no_traversal_above_root(make_server):
    srv = lister(make_server)
    srv.file("pub/f.txt", "x")
    srv.start()
    for target in ("/../", "/pub/../../", "/%2e%2e/", "/pub/%2E%2E/%2e%2e/"):
        out = srv.raw(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 400 "), (target, out[:40])
        assert b"Index of" not in out
    # A dot segment inside the root is normalised by the core: /pub/sub/.. is /pub/.
    srv.file("pub/sub/g.txt", "g")
    r = srv.get("/pub/sub/../")
    assert r.status == 200 and "<title>Index of /pub/</title>" in r.body.decode()


@pytest.fixture
def outside(tmp_path):
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("secret\n")
    return out


def make_links(srv, outside):
    srv.file("pub/plain.txt", "plain\n")
    srv.file("pub/realdir/r.txt", "r\n")
    pub = srv.docroot / "pub"
    os.symlink(outside, pub / "outlink")
    os.symlink(outside / "secret.txt", pub / "filelink")
    os.symlink("realdir", pub / "inlink")
    os.symlink("nowhere", pub / "dangling")


def test_symlinks_not_listed_when_site_refuses_them(make_server, outside):
    srv = lister(make_server)
    make_links(srv, outside)
    os.symlink(outside, srv.docroot / "root-out")
    srv.start()
    r = srv.get("/pub/")
    assert names(r.body) == ["realdir/", "plain.txt"]
    for link in ("outlink", "filelink", "inlink", "dangling"):
        assert link.encode() not in r.body
    # And not followed: the static handler refuses them.
    for path in ("/pub/outlink/", "/pub/filelink", "/pub/inlink/", "/root-out/"):
        resp = srv.get(path)
        assert resp.status == 403 and b"secret" not in resp.body, path


def test_symlinks_listed_when_site_follows_them(make_server, outside):
    srv = lister(make_server)
    srv.site_conf["Symlinks"] = "On"
    make_links(srv, outside)
    srv.start()
    r = srv.get("/pub/")
    got = {x.name: x for x in rows(r.body)}
    # Described by their targets; the dangling one is left out.
    assert names(r.body) == ["inlink/", "outlink/", "realdir/", "filelink", "plain.txt"]
    assert got["filelink"].exact == len("secret\n")
    assert srv.get("/pub/" + got["filelink"].href).body == b"secret\n"
    assert names(srv.get("/pub/outlink/").body) == ["secret.txt"]


# ---- configuration --------------------------------------------------------------------

@pytest.mark.parametrize("section, bad_line, word", [
    ("[DIRLISTING]\n    Enable On\n    Colour red\n", 6, "Colour"),
    ("[DIRLISTING]\n    Enable Maybe\n", 5, "Enable"),
    ("[DIRLISTING]\n    Enable On\n    Enable Off\n", 6, "twice"),
    ("[DIRLISTING]\n    ShowHidden sometimes\n", 5, "ShowHidden"),
    ("[DIRLISTING]\n    Path pub\n", 5, "start with '/'"),
    ("[DIRLISTING]\n    Path /pub\n    Path /a/../b\n", 6, "'..'"),
])
def test_bad_site_section_names_file_and_line(make_server, section, bad_line, word):
    srv = lister(make_server, section)
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{site}:{bad_line}:" in err and word in err, err


@pytest.mark.parametrize("text, bad_line, word", [
    ("[DIRLISTING]\n    Sort random\n", 2, "Sort"),
    ("# comment\n[DIRLISTING]\n    MaxEntries 0\n", 3, "MaxEntries"),
    ("[DIRLISTING]\n    MaxEntries 2000000\n", 2, "MaxEntries"),
    ("[DIRLISTING]\n    Sort bytes\n    Stylesheet a b.css\n", 3, "Stylesheet"),
    ("[DIRLISTING]\n    Sort bytes\n    Sort nocase\n", 3, "twice"),
    ("[DIRLISTING]\n    Colour red\n", 2, "Colour"),
    ("[OTHER]\n    Sort bytes\n", 1, "unknown section [OTHER]"),  # the header line
])
def test_bad_plugin_conf_names_file_and_line(make_server, text, bad_line, word):
    srv = lister(make_server, plugin_conf=text)
    err = srv.run_expect_failure()
    conf = srv.conf / "plugins" / "dirlisting.conf"
    assert f"{conf}:{bad_line}:" in err and word in err, err


def test_check_mode_validates_site_section(make_server):
    srv = lister(make_server, "[DIRLISTING]\n    Path relative\n")
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    site = srv.conf / "sites" / "default"
    assert p.returncode == 1 and f"{site}:5:" in p.stderr, p.stderr
    srv.site_extra = "[DIRLISTING]\n    Path /pub\n"
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_shipped_default_conf_is_valid(make_server):
    from conftest import ROOT
    srv = lister(make_server, plugin_conf=(ROOT / "conf" / "plugins" / "dirlisting.conf")
                 .read_text())
    srv.file("pub/f.txt", "x")
    srv.start()
    assert names(srv.get("/pub/").body) == ["f.txt"]


def test_reload_rereads_plugin_and_site_configuration(make_server):
    srv = lister(make_server, "[DIRLISTING]\n    Path /pub\n",
                 plugin_conf="[DIRLISTING]\n    Sort bytes\n")
    for name in ("b.txt", "C.txt", "a.txt"):
        srv.file(f"pub/{name}", "x")
    srv.file("other/o.txt", "o")
    srv.start()
    assert names(srv.get("/pub/").body) == ["C.txt", "a.txt", "b.txt"]
    assert srv.get("/other/").status == 403
    (srv.conf / "plugins" / "dirlisting.conf").write_text("[DIRLISTING]\n    Sort nocase\n")
    site = srv.conf / "sites" / "default"
    site.write_text(site.read_text().replace("Path /pub", "Path /pub\n    Path /other"))
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: srv.stderr_text().count("configuration reloaded") == 1)
    assert srv.get("/other/").status == 200
    assert names(srv.get("/pub/").body) == ["a.txt", "b.txt", "C.txt"]
    # A bad plugin file refuses the whole reload: neither it nor the site
    # change made with it takes effect.
    (srv.conf / "plugins" / "dirlisting.conf").write_text("[DIRLISTING]\n    Sort weird\n")
    site.write_text(site.read_text().replace("    Path /other\n", ""))
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: "reload failed" in srv.stderr_text())
    assert srv.proc.poll() is None
    assert srv.get("/other/").status == 200
    assert names(srv.get("/pub/").body) == ["a.txt", "b.txt", "C.txt"]
    assert "dirlisting.conf:2:" in srv.stderr_text()
    # Fixed, the next reload applies both.
    (srv.conf / "plugins" / "dirlisting.conf").write_text("[DIRLISTING]\n    Sort bytes\n")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: srv.stderr_text().count("configuration reloaded") == 2)
    assert srv.get("/other/").status == 403
    assert names(srv.get("/pub/").body) == ["C.txt", "a.txt", "b.txt"]
