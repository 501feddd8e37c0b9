"""Tier 2: precompressed variants (the site key Precompressed): the choice by
Accept-Encoding, Vary, per-encoding validators, ranges over the encoded bytes,
stale variants, HEAD and HTTP/2."""

import os

import pytest

from h2util import H2_MARKS, H2Client
from rangeutil import check_parts

BODY = b"the original file body\n"
VARIANTS = {"br": b"BR-encoded bytes", "zstd": b"ZSTD-encoded bytes!", "gzip": b"GZIP-encoded"}
SUFFIX = {"br": ".br", "zstd": ".zst", "gzip": ".gz"}


def add_variants(srv, name, codings=("br", "zstd", "gzip")):
    base = srv.file(name, BODY)
    for c in codings:
        v = srv.file(name + SUFFIX[c], VARIANTS[c])
        st = os.stat(base)
        os.utime(v, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    return base


@pytest.fixture
def site(make_server):
    srv = make_server()
    srv.site_conf["Precompressed"] = "On"
    add_variants(srv, "app.css")
    add_variants(srv, "gz.txt", ("gzip",))
    add_variants(srv, "dir/index.html", ("br",))
    srv.file("plain.txt", "no variants\n")
    return srv.start()


SELECTION = [
    (None, None),
    ("", None),
    ("gzip", "gzip"),
    ("x-gzip", "gzip"),
    ("gzip, deflate, br, zstd", "br"),
    ("gzip, deflate, zstd", "zstd"),
    ("br;q=0.5, gzip;q=0.8", "gzip"),
    ("br;q=0.5, gzip;q=0.8, zstd;q=0.9", "zstd"),
    ("br;q=0, zstd;q=0, gzip", "gzip"),
    ("br;q=0, zstd;q=0, gzip;q=0", None),
    ("gzip;q=0.5, identity", None),
    ("identity", None),
    ("*", "br"),
    ("*;q=0.5, gzip", "gzip"),
    ("*;q=0", None),  # nothing acceptable: the file itself (RFC 9110 12.5.3)
    ("compress, deflate", None),
]


def test_variant_chosen_by_accept_encoding(site):
    c = site.conn()
    for ae, want in SELECTION:
        headers = {} if ae is None else {"Accept-Encoding": ae}
        r = c.request("GET", "/app.css", headers=headers)
        assert r.status == 200, ae
        assert r.header("vary") == "Accept-Encoding", ae
        assert r.header("content-type") == "text/css; charset=utf-8", ae
        assert r.header("content-encoding") == want, ae
        assert r.body == (VARIANTS[want] if want else BODY), ae


def test_repeated_accept_encoding_lines_are_one_list(site):
    r = site.raw(b"GET /app.css HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: br;q=0\r\n"
                 b"Accept-Encoding: zstd;q=0.1, gzip;q=0.2\r\nConnection: close\r\n\r\n")
    assert b"\r\nContent-Encoding: gzip\r\n" in r
    assert r.endswith(VARIANTS["gzip"])


def test_missing_variant_falls_back_to_the_next(site):
    r = site.get("/gz.txt", headers={"Accept-Encoding": "br, zstd, gzip"})
    assert r.header("content-encoding") == "gzip" and r.body == VARIANTS["gzip"]
    r = site.get("/plain.txt", headers={"Accept-Encoding": "br, gzip"})
    assert r.header("content-encoding") is None and r.body == b"no variants\n"
    assert r.header("vary") == "Accept-Encoding"


def test_directory_index_variant(site):
    r = site.get("/dir/", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") == "br" and r.body == VARIANTS["br"]
    assert r.header("content-type") == "text/html; charset=utf-8"


def test_validators_are_per_encoding(site):
    ident = site.get("/app.css")
    gz = site.get("/app.css", headers={"Accept-Encoding": "gzip"})
    br = site.get("/app.css", headers={"Accept-Encoding": "br"})
    tags = {ident.header("etag"), gz.header("etag"), br.header("etag")}
    assert len(tags) == 3
    assert gz.header("last-modified") != ident.header("last-modified")
    # The variant's tag matches only when that variant is chosen again.
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip",
                                      "If-None-Match": gz.header("etag")})
    assert r.status == 304
    assert r.header("vary") == "Accept-Encoding"
    assert r.header("etag") == gz.header("etag")
    r = site.get("/app.css", headers={"Accept-Encoding": "br",
                                      "If-None-Match": gz.header("etag")})
    assert r.status == 200 and r.body == VARIANTS["br"]
    r = site.get("/app.css", headers={"If-None-Match": gz.header("etag")})
    assert r.status == 200 and r.body == BODY


def test_variants_keeping_the_original_mtime_have_distinct_tags(make_server):
    # gzip -k, brotli and zstd keep the source's modification time: here the
    # file and its variants share it and their sizes too, so only the coding
    # tells their entity tags apart.
    srv = make_server()
    srv.site_conf["Precompressed"] = "On"
    base = srv.file("same.txt", b"0123456789abcdef")
    for c, body in (("br", b"BBBBBBBBBBBBBBBB"), ("zstd", b"ZZZZZZZZZZZZZZZZ"),
                    ("gzip", b"GGGGGGGGGGGGGGGG")):
        v = srv.file("same.txt" + SUFFIX[c], body)
        st = os.stat(base)
        os.utime(v, ns=(st.st_atime_ns, st.st_mtime_ns))
    srv.start()
    got = {}
    for c in (None, "br", "zstd", "gzip"):
        r = srv.get("/same.txt", headers={"Accept-Encoding": c} if c else {})
        assert r.status == 200 and r.header("content-encoding") == c
        got[c] = r.header("etag")
    assert len(set(got.values())) == 4, got
    for c, tag in got.items():
        for other in (None, "br", "zstd", "gzip"):
            r = srv.get("/same.txt", headers=dict({"If-None-Match": tag},
                                                  **({"Accept-Encoding": other} if other else {})))
            assert r.status == (304 if other == c else 200), (c, other)


def test_range_applies_to_the_encoded_bytes(site):
    gz = site.get("/app.css", headers={"Accept-Encoding": "gzip"})
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "Range": "bytes=2-5"})
    assert r.status == 206
    assert r.header("content-encoding") == "gzip"
    assert r.header("content-range") == f"bytes 2-5/{len(VARIANTS['gzip'])}"
    assert r.body == VARIANTS["gzip"][2:6]
    # If-Range with the variant's tag keeps the range; the identity tag does not.
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-1",
                                      "If-Range": gz.header("etag")})
    assert r.status == 206 and r.body == VARIANTS["gzip"][:2]
    ident = site.get("/app.css")
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-1",
                                      "If-Range": ident.header("etag")})
    assert r.status == 200 and r.body == VARIANTS["gzip"]


def test_several_ranges_apply_to_the_encoded_bytes(site):
    """A multipart answer from a variant: its parts are ranges of the
    variant's bytes, as a single range is, with the variant's validators."""
    gz = site.get("/app.css", headers={"Accept-Encoding": "gzip"})
    v = VARIANTS["gzip"]
    for extra in ({}, {"If-Range": gz.header("etag")}):
        r = site.get("/app.css", headers=dict({"Accept-Encoding": "gzip",
                                               "Range": "bytes=0-1,4-5,-2"}, **extra))
        assert r.status == 206
        assert r.header("content-encoding") == "gzip"
        assert r.header("etag") == gz.header("etag")
        assert r.header("vary") == "Accept-Encoding"
        assert r.header("content-range") is None
        check_parts(r.header("content-type"), r.body, v, [(0, 1), (4, 5), (len(v) - 2, len(v) - 1)],
                    gz.header("content-type"))
    # the identity tag in If-Range: the whole variant
    ident = site.get("/app.css")
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-1,4-5",
                                      "If-Range": ident.header("etag")})
    assert r.status == 200 and r.body == v


def test_error_answers_are_not_encoded(site):
    # A 416 or 412 carries the server's error page, not the variant: no
    # Content-Encoding, or a client would try to decode the page.
    gz = site.get("/app.css", headers={"Accept-Encoding": "gzip"})
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "Range": "bytes=500-"})
    assert r.status == 416
    assert r.header("content-range") == f"bytes */{len(VARIANTS['gzip'])}"
    assert r.header("content-encoding") is None
    assert r.body.startswith(b"<!DOCTYPE html>")
    r = site.get("/app.css", headers={"Accept-Encoding": "br", "If-Match": gz.header("etag")})
    assert r.status == 412 and r.header("content-encoding") is None
    r = site.get("/app.css", headers={"Accept-Encoding": "gzip", "If-Match": gz.header("etag")})
    assert r.status == 200 and r.header("content-encoding") == "gzip"


def test_head_announces_the_variant(site):
    r = site.request("HEAD", "/app.css", headers={"Accept-Encoding": "zstd"})
    assert r.status == 200 and r.body == b""
    assert r.header("content-encoding") == "zstd"
    assert r.header("content-length") == str(len(VARIANTS["zstd"]))


def test_stale_variant_is_not_used(site):
    base = site.docroot / "app.css"
    st = os.stat(base)
    os.utime(site.docroot / "app.css.br", ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    r = site.get("/app.css", headers={"Accept-Encoding": "br, gzip;q=0.5"})
    assert r.header("content-encoding") == "gzip" and r.body == VARIANTS["gzip"]
    r = site.get("/app.css", headers={"Accept-Encoding": "br"})
    assert r.header("content-encoding") is None and r.body == BODY


def test_off_by_default(make_server):
    srv = make_server()
    add_variants(srv, "app.css")
    srv.start()
    r = srv.get("/app.css", headers={"Accept-Encoding": "gzip, br"})
    assert r.header("content-encoding") is None and r.header("vary") is None
    assert r.body == BODY


def test_only_the_codings_listed(make_server):
    srv = make_server()
    srv.site_conf["Precompressed"] = "gzip zstd"
    add_variants(srv, "app.css")
    srv.start()
    r = srv.get("/app.css", headers={"Accept-Encoding": "br, gzip"})
    assert r.header("content-encoding") == "gzip" and r.body == VARIANTS["gzip"]


def test_bad_value_names_the_line(make_server):
    srv = make_server()
    srv.site_conf["Precompressed"] = "gzip deflate"
    err = srv.run_expect_failure()
    assert "sites/default:4:" in err and "Precompressed" in err and "'deflate'" in err


@H2_MARKS[0]
@H2_MARKS[1]
def test_http2_sends_the_variant(make_server):
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1)
    srv.site_conf["Precompressed"] = "On"
    add_variants(srv, "app.css")
    srv.start()
    c = H2Client(srv.port)
    s = c.get("/app.css", headers=[("accept-encoding", "gzip, br")])
    assert s["headers"][":status"] == "200"
    assert s["headers"]["content-encoding"] == "br"
    assert s["headers"]["vary"] == "Accept-Encoding"
    assert s["data"] == VARIANTS["br"]
    s = c.get("/app.css")
    assert "content-encoding" not in s["headers"] and s["data"] == BODY
    c.close()
