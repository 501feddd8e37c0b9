"""Tier 2: static files compressed on the fly (the site key Compress and its
companions): the choice by Accept-Encoding, the bytes decompressing to the
file, Vary, per-encoding validators, conditional requests, ranges over the
encoded bytes, HEAD, the limits (types, sizes, the cache bound), a file
changed on disk, HTTP/2 and TLS."""

import gzip
import json
import os
import random
import re
import subprocess
import threading
import time

import pytest

from conftest import BUILD, SLOW, vm_rss_kb, wait_for
from h2util import H2_MARKS, H2Client
from rangeutil import check_parts
from tlsutil import TLS_MARKS, https, tls_server

try:
    import brotli
except ImportError:  # tools/deps.sh test installs it
    brotli = None

CONTROL_SO = BUILD / "plugins" / "monkey-control.so"
CTL = BUILD / "bin" / "monkey-ctl"


def _built(option, found_line):
    cache = BUILD / "CMakeCache.txt"
    text = cache.read_text() if cache.exists() else ""
    return f"{option}:BOOL=ON" in text and re.search(found_line, text, re.M) is not None


HAVE_BR = _built("MK_BROTLI", r"^BROTLIENC_FOUND:INTERNAL=1$")
HAVE_GZIP = _built("MK_ZLIB", r"^ZLIB_INCLUDE_DIR:PATH=(?!.*NOTFOUND)")

needs_br = [pytest.mark.skipif(not HAVE_BR, reason="built without brotli (libbrotli-dev)"),
            pytest.mark.skipif(brotli is None, reason="no Python brotli module")]
needs_gzip = pytest.mark.skipif(not HAVE_GZIP, reason="built without zlib (zlib1g-dev)")
pytestmark = [needs_gzip] + needs_br

WORDS = ("function var return const let this document window if else for while null true "
         "false new typeof undefined prototype length push").split()


def text(n, seed=1):
    """n bytes of JavaScript-like text that compresses (to about a quarter)."""
    rnd = random.Random(seed)
    out = []
    size = 0
    while size < n:
        w = rnd.choice(WORDS) + rnd.choice((" ", "(", ");\n", ".", " = "))
        out.append(w)
        size += len(w)
    return "".join(out)[:n].encode()


def decode(body, coding):
    if coding == "br":
        return brotli.decompress(body)
    if coding == "gzip":
        return gzip.decompress(body)
    return body


JS = text(40000)


def compress_site(make_server, **site):
    srv = make_server()
    srv.site_conf["Compress"] = "On"
    srv.site_conf.update(site)
    srv.file("app.js", JS)
    srv.file("style.css", text(3000, seed=2))
    srv.file("small.txt", b"tiny\n" * 20)  # 100 bytes: below CompressMinSize
    srv.file("photo.png", text(20000, seed=3))  # compresses, but not a type listed
    srv.file("dir/index.html", text(5000, seed=4))
    return srv


@pytest.fixture
def site(make_server):
    return compress_site(make_server).start()


def control(srv):
    """Load the control plugin (a shared object) with its socket in the conf folder."""
    srv.plugins.append(str(CONTROL_SO))
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "control.conf").write_text("[CONTROL]\n    Socket ctl.sock\n")
    srv.sock = srv.conf / "ctl.sock"


def zstats(srv):
    deadline = time.monotonic() + 10 * SLOW
    while not srv.sock.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    p = subprocess.run([str(CTL), "-s", str(srv.sock), "--json", "status"], capture_output=True,
                       text=True, timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["compress"]


SELECTION = [
    (None, None),
    ("", None),
    ("gzip", "gzip"),
    ("x-gzip", "gzip"),
    ("gzip, deflate, br", "br"),
    ("gzip, deflate, br, zstd", "br"),
    ("br;q=0.5, gzip;q=0.8", "gzip"),
    ("br;q=0, gzip", "gzip"),
    ("br;q=0, gzip;q=0", None),
    ("gzip;q=0.5, identity", None),
    ("identity", None),
    ("zstd", None),
    ("*", "br"),
    ("*;q=0.5, gzip", "gzip"),
    ("*;q=0", None),  # nothing acceptable: the file itself (RFC 9110 12.5.3)
    ("compress, deflate", None),
]


def test_coding_chosen_by_accept_encoding(site):
    c = site.conn()
    for ae, want in SELECTION:
        headers = {} if ae is None else {"Accept-Encoding": ae}
        r = c.request("GET", "/app.js", headers=headers)
        assert r.status == 200, ae
        assert r.header("vary") == "Accept-Encoding", ae
        assert r.header("content-type") == "text/javascript; charset=utf-8", ae
        assert r.header("content-encoding") == want, ae
        assert int(r.header("content-length")) == len(r.body), ae
        assert decode(r.body, want) == JS, ae
        if want:
            assert len(r.body) < len(JS) // 2, ae


def test_only_the_codings_listed(make_server):
    srv = compress_site(make_server, Compress="gzip").start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") is None and r.body == JS
    assert r.header("vary") == "Accept-Encoding"
    r = srv.get("/app.js", headers={"Accept-Encoding": "br, gzip"})
    assert r.header("content-encoding") == "gzip" and gzip.decompress(r.body) == JS


def test_directory_index_and_other_types(site):
    r = site.get("/dir/", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") == "br"
    assert r.header("content-type") == "text/html; charset=utf-8"
    assert brotli.decompress(r.body) == text(5000, seed=4)
    r = site.get("/style.css", headers={"Accept-Encoding": "gzip"})
    assert r.header("content-encoding") == "gzip"
    assert gzip.decompress(r.body) == text(3000, seed=2)


def test_type_not_listed_and_small_file_left_alone(site):
    for path, body in (("/photo.png", text(20000, seed=3)), ("/small.txt", b"tiny\n" * 20)):
        r = site.get(path, headers={"Accept-Encoding": "br, gzip"})
        assert r.status == 200, path
        assert r.header("content-encoding") is None, path
        assert r.header("vary") is None, path  # never compressed: the answer does not vary
        assert r.body == body, path


def test_types_size_limits_and_levels_configurable(make_server):
    srv = compress_site(make_server, CompressTypes="text/css image/*", CompressMinSize=50,
                        CompressMaxSize="25K", CompressGzipLevel=1, CompressBrotliLevel=11)
    srv.file("big.css", text(30000, seed=5))
    srv.start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert r.header("content-encoding") is None and r.header("vary") is None  # not listed now
    r = srv.get("/photo.png", headers={"Accept-Encoding": "gzip"})  # image/* takes it
    assert r.header("content-encoding") == "gzip" and r.header("etag").endswith('-gzip1"')
    r = srv.get("/style.css", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") == "br" and r.header("etag").endswith('-br11"')
    r = srv.get("/small.txt", headers={"Accept-Encoding": "gzip"})  # text/plain: not listed
    assert r.header("content-encoding") is None
    r = srv.get("/big.css", headers={"Accept-Encoding": "gzip"})  # over CompressMaxSize
    assert r.header("content-encoding") is None and r.body == text(30000, seed=5)


def test_off_by_default(make_server):
    srv = make_server()
    srv.file("app.js", JS)
    srv.start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip, br"})
    assert r.header("content-encoding") is None and r.header("vary") is None
    assert r.body == JS


def test_validators_are_per_encoding(site):
    ident = site.get("/app.js")
    gz = site.get("/app.js", headers={"Accept-Encoding": "gzip"})
    br = site.get("/app.js", headers={"Accept-Encoding": "br"})
    tags = {ident.header("etag"), gz.header("etag"), br.header("etag")}
    assert len(tags) == 3
    # derived from the file's tag: the coding and its level appended
    assert gz.header("etag") == ident.header("etag")[:-1] + '-gzip6"'
    assert br.header("etag") == ident.header("etag")[:-1] + '-br5"'
    assert gz.header("last-modified") == ident.header("last-modified")
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "If-None-Match": br.header("etag")})
    assert r.status == 304 and r.body == b""
    assert r.header("vary") == "Accept-Encoding"
    assert r.header("etag") == br.header("etag")
    r = site.get("/app.js", headers={"Accept-Encoding": "gzip", "If-None-Match": br.header("etag")})
    assert r.status == 200 and gzip.decompress(r.body) == JS
    r = site.get("/app.js", headers={"If-None-Match": br.header("etag")})
    assert r.status == 200 and r.body == JS
    r = site.get("/app.js", headers={"Accept-Encoding": "gzip", "If-Match": br.header("etag")})
    assert r.status == 412 and r.header("content-encoding") is None
    r = site.get("/app.js", headers={"Accept-Encoding": "gzip",
                                     "If-Modified-Since": gz.header("last-modified")})
    assert r.status == 304


def test_conditional_request_answered_without_compressing(make_server):
    srv = compress_site(make_server, Compress="br")
    control(srv)
    srv.start()
    ident = srv.get("/app.js")
    tag = ident.header("etag")[:-1] + '-br5"'
    r = srv.get("/app.js", headers={"Accept-Encoding": "br", "If-None-Match": tag})
    assert r.status == 304 and r.header("etag") == tag
    assert zstats(srv)["compressions"] == 0
    r = srv.get("/app.js", headers={"Accept-Encoding": "br"})
    assert r.header("etag") == tag and brotli.decompress(r.body) == JS
    assert zstats(srv)["compressions"] == 1


def test_range_applies_to_the_encoded_bytes(site):
    br = site.get("/app.js", headers={"Accept-Encoding": "br"})
    full = br.body
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=10-99"})
    assert r.status == 206
    assert r.header("content-encoding") == "br"
    assert r.header("content-range") == f"bytes 10-99/{len(full)}"
    assert r.body == full[10:100]
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=-20"})
    assert r.status == 206 and r.body == full[-20:]
    # If-Range with the encoded tag keeps the range; the identity tag does not.
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=0-1",
                                     "If-Range": br.header("etag")})
    assert r.status == 206 and r.body == full[:2]
    ident = site.get("/app.js")
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=0-1",
                                     "If-Range": ident.header("etag")})
    assert r.status == 200 and r.body == full
    r = site.get("/app.js", headers={"Accept-Encoding": "br", "Range": f"bytes={len(full)}-"})
    assert r.status == 416
    assert r.header("content-range") == f"bytes */{len(full)}"
    assert r.header("content-encoding") is None  # the error page is not encoded


def test_several_ranges_apply_to_the_encoded_bytes(site):
    """A multipart answer from a body compressed on the fly: its parts are
    ranges of the encoded bytes (from memory), as a single range is. The
    first request of a file waits for its compression."""
    for coding in ("gzip", "br"):
        r = site.get("/style.css", headers={"Accept-Encoding": coding, "Range": "bytes=0-1,5-9"})
        assert r.status == 206, r
        assert r.header("content-encoding") == coding
        whole = site.get("/style.css", headers={"Accept-Encoding": coding})
        assert r.header("etag") == whole.header("etag")
        assert r.header("vary") == "Accept-Encoding"
        check_parts(r.header("content-type"), r.body, whole.body, [(0, 1), (5, 9)],
                    whole.header("content-type"))
    br = site.get("/app.js", headers={"Accept-Encoding": "br"})
    full = br.body
    assert len(full) > 8000
    ranges = [(0, 99), (1000, 4999), (len(full) - 3000, len(full) - 1)]
    c = site.conn()
    for extra in ({}, {"If-Range": br.header("etag")}):
        r = c.request("GET", "/app.js", headers=dict({"Accept-Encoding": "br",
                                                      "Range": "bytes=0-99,1000-4999,-3000"},
                                                     **extra))
        assert r.status == 206 and r.header("content-encoding") == "br"
        check_parts(r.header("content-type"), r.body, full, ranges, br.header("content-type"))
    ident = site.get("/app.js")
    r = c.request("GET", "/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=0-1,5-6",
                                             "If-Range": ident.header("etag")})
    assert r.status == 200 and r.body == full
    r = c.request("GET", "/app.js", headers={"Accept-Encoding": "br", "Range": "bytes=0-9,5-6"})
    assert r.status == 200 and r.body == full
    c.close()


def test_head_announces_the_encoded_length(site):
    get = site.get("/app.js", headers={"Accept-Encoding": "gzip"})
    c = site.conn()
    r = c.request("HEAD", "/app.js", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200 and r.body == b""
    assert r.header("content-encoding") == "gzip"
    assert r.header("content-length") == str(len(get.body))
    assert r.header("etag") == get.header("etag")
    # a HEAD first, on a file not compressed yet, then a GET on the same connection
    r = c.request("HEAD", "/style.css", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") == "br"
    n = int(r.header("content-length"))
    r = c.request("GET", "/style.css", headers={"Accept-Encoding": "br"})
    assert len(r.body) == n and brotli.decompress(r.body) == text(3000, seed=2)
    c.close()


def test_changed_file_seen_within_a_second(make_server):
    # One worker: each worker's file cache sees the change within the second.
    site = compress_site(make_server)
    site.set(Workers=1)
    site.start()
    old = site.get("/app.js", headers={"Accept-Encoding": "br"})
    assert brotli.decompress(old.body) == JS
    new = text(30000, seed=9)
    site.file("app.js", new)
    changed = time.monotonic()
    # The file cache revalidates once a second: the change shows within it.
    assert wait_for(lambda: brotli.decompress(site.get(
        "/app.js", headers={"Accept-Encoding": "br"}).body) == new, timeout=3)
    assert time.monotonic() - changed < 2.0 * SLOW + 0.5
    r = site.get("/app.js", headers={"Accept-Encoding": "br"})
    assert r.header("etag") != old.header("etag")
    assert brotli.decompress(r.body) == new


def test_precompressed_variant_first_then_on_the_fly(make_server):
    srv = compress_site(make_server, Precompressed="On")
    gz = srv.file("app.js.gz", gzip.compress(b"the precompressed variant\n"))
    st = os.stat(srv.docroot / "app.js")
    os.utime(gz, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    srv.start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert gzip.decompress(r.body) == b"the precompressed variant\n"
    assert r.header("etag").endswith('-gzip"')
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip, br"})  # no app.js.br: made here
    assert r.header("content-encoding") == "br" and brotli.decompress(r.body) == JS
    assert r.header("etag").endswith('-br5"')


def test_each_file_compressed_once_and_requests_share_the_work(make_server):
    srv = compress_site(make_server)
    srv.set(Workers=1)
    big = text(1 << 20, seed=7)
    srv.file("big.js", big)
    control(srv)
    srv.start()
    results = []

    def fetch():
        r = srv.get("/big.js", headers={"Accept-Encoding": "br"})
        results.append((r.header("content-encoding"), brotli.decompress(r.body) == big))

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [("br", True)] * 8
    z = zstats(srv)
    # One job; each other request waited for it (then found its result) or
    # came later and found the result at once.
    assert z["compressions"] == 1 and z["hits"] == 7, z
    for _ in range(3):
        assert brotli.decompress(srv.get("/big.js", headers={"Accept-Encoding": "br"}).body) == big
    z = zstats(srv)
    assert z["compressions"] == 1 and z["hits"] >= 3, z


def test_cache_bound_honoured(make_server):
    srv = compress_site(make_server, Compress="gzip", CompressMinSize=1)
    srv.set(Workers=1, CompressCache="64K")
    files = {f"/f{i}.txt": text(20000, seed=100 + i) for i in range(40)}
    for path, body in files.items():
        srv.file(path[1:], body)
    control(srv)
    srv.start()
    c = srv.conn()
    for _ in range(2):
        for i, (path, body) in enumerate(files.items()):
            r = c.request("GET", path, headers={"Accept-Encoding": "gzip"})
            assert r.header("content-encoding") == "gzip", path
            assert gzip.decompress(r.body) == body, path
            if i % 8 == 7:
                assert zstats(srv)["bytes"] <= 64 * 1024
    c.close()
    z = zstats(srv)
    assert z["bytes"] <= 64 * 1024 and z["evictions"] > 0, z
    assert 0 < z["entries"] < 40, z
    assert z["compressions"] > 40, z  # the second pass found most evicted


def test_large_file_not_compressed_and_memory_bounded(make_server):
    # 64 MB of one byte would compress to almost nothing: over
    # CompressMaxSize it is sent as it is, never read into memory.
    srv = compress_site(make_server, CompressMaxSize="1M")
    with open(srv.docroot / "bomb.txt", "wb") as f:
        f.truncate(64 << 20)
    control(srv)
    srv.start()
    rss = vm_rss_kb(srv.proc.pid)
    r = srv.request("HEAD", "/bomb.txt", headers={"Accept-Encoding": "gzip, br"})
    assert r.header("content-encoding") is None and r.header("content-length") == str(64 << 20)
    r = srv.get("/bomb.txt", headers={"Accept-Encoding": "gzip, br", "Range": "bytes=-100"})
    assert r.status == 206 and r.header("content-encoding") is None and r.body == bytes(100)
    assert zstats(srv)["compressions"] == 0
    assert vm_rss_kb(srv.proc.pid) - rss < 16 * 1024


def test_no_room_sends_the_file_itself(make_server):
    # The bound cannot hold the result's worst case: answered unencoded, not refused.
    srv = compress_site(make_server, Compress="gzip")
    srv.set(CompressCache="16K")
    control(srv)
    srv.start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200 and r.header("content-encoding") is None and r.body == JS
    assert r.header("vary") == "Accept-Encoding"
    assert zstats(srv)["skipped"] >= 1
    r = srv.get("/style.css", headers={"Accept-Encoding": "gzip"})  # 3 KB fits
    assert r.header("content-encoding") == "gzip"


def test_file_that_does_not_shrink_is_sent_as_it_is(make_server):
    srv = compress_site(make_server)
    srv.set(Workers=1)
    noise = os.urandom(8000)
    srv.file("noise.txt", noise)
    control(srv)
    srv.start()
    for _ in range(3):
        r = srv.get("/noise.txt", headers={"Accept-Encoding": "gzip"})
        assert r.header("content-encoding") is None and r.body == noise
        assert r.header("vary") == "Accept-Encoding"
    assert zstats(srv)["compressions"] == 1  # remembered: not tried again (one worker)


@pytest.mark.parametrize("key,value,words", [
    ("Compress", "zstd", ["Compress", "'zstd'"]),
    ("CompressTypes", "text/*; charset=utf-8", ["CompressTypes", "not a media type"]),
    ("CompressBrotliLevel", "12", ["CompressBrotliLevel"]),
    ("CompressGzipLevel", "0", ["CompressGzipLevel"]),
    ("CompressMinSize", "8M", ["CompressMinSize", "CompressMaxSize"]),
])
def test_bad_values_name_the_line(make_server, key, value, words):
    srv = make_server()
    srv.site_conf["Compress"] = "On"
    srv.site_conf[key] = value
    err = srv.run_expect_failure()
    assert "sites/default:" in err, err
    for w in words:
        assert w in err, err


@H2_MARKS[0]
@H2_MARKS[1]
def test_http2_streams_share_one_compression(make_server):
    srv = compress_site(make_server)
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1)
    big = text(1 << 20, seed=11)
    srv.file("big.js", big)
    control(srv)
    srv.start()
    c = H2Client(srv.port)
    # the five requests leave in one write, so the server reads them together
    flush, c.flush = c.flush, lambda: None
    sids = [c.request("/big.js", headers=[("accept-encoding", "gzip, br")]) for _ in range(5)]
    c.flush = flush
    c.flush()
    c.wait(sids)
    for sid in sids:
        s = c.streams[sid]
        assert s["headers"][":status"] == "200"
        assert s["headers"]["content-encoding"] == "br"
        assert s["headers"]["vary"] == "Accept-Encoding"
        assert int(s["headers"]["content-length"]) == len(s["data"])
        assert brotli.decompress(s["data"]) == big
    z = zstats(srv)
    # the streams came together: the four others waited for the first one's job
    assert z["compressions"] == 1 and z["hits"] == 4 and z["waits"] >= 1, z
    s = c.get("/app.js", headers=[("accept-encoding", "gzip"), ("range", "bytes=5-9")])
    full = c.get("/app.js", headers=[("accept-encoding", "gzip")])["data"]
    assert s["headers"][":status"] == "206" and s["data"] == full[5:10]
    s = c.get("/app.js")
    assert "content-encoding" not in s["headers"] and s["data"] == JS
    c.close()


@TLS_MARKS[0]
@TLS_MARKS[1]
@TLS_MARKS[2]
def test_tls(make_server):
    srv = tls_server(make_server)
    srv.site_conf["Compress"] = "On"
    srv.file("app.js", JS)
    srv.start()
    for coding in ("br", "gzip"):
        status, headers, body = https(srv, "/app.js", headers={"Accept-Encoding": coding})
        assert status == 200 and headers["content-encoding"] == coding
        assert decode(body, coding) == JS


def test_reload_keeps_serving_and_applies_new_levels(make_server):
    srv = compress_site(make_server)
    srv.start()
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert r.header("etag").endswith('-gzip6"')
    srv.site_conf["CompressGzipLevel"] = "9"
    srv.write_conf()
    srv.signal(__import__("signal").SIGHUP)
    assert wait_for(lambda: srv.get("/app.js", headers={"Accept-Encoding": "gzip"}).header(
        "etag").endswith('-gzip9"'))
    r = srv.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert gzip.decompress(r.body) == JS
