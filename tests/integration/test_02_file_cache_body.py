"""Tier 2: small files served from the file cache's memory (FileCacheBody):
no read per request once cached, and a changed file seen again within the
documented bound (one second: the entry's revalidation)."""

import os
import time

import pytest

from conftest import SLOW, Strace
from h2util import needs_tool

BOUND = 1.0  # seconds: FileCacheBody follows the file cache's revalidation


def preads_for_requests(srv, tmp_path, n=5):
    c = srv.conn()
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"  # cached now
    tracer = Strace(srv.proc.pid, ["pread64"], tmp_path / "strace.out")
    try:
        for _ in range(n):
            r = c.request("GET", "/hello.txt")
            assert r.status == 200 and r.body == b"Hello World!\n"
    finally:
        lines = tracer.stop()
    c.close()
    return [line for line in lines if "pread" in line]


@needs_tool("strace")
@pytest.mark.parametrize("body_max,want_preads", [("16K", 0), ("0", 5)])
def test_a_cached_small_file_is_not_read_again(make_server, tmp_path, body_max, want_preads):
    srv = make_server()
    srv.set(Workers=1, FileCacheBody=body_max)
    srv.file("hello.txt", "Hello World!\n")
    srv.start()
    assert len(preads_for_requests(srv, tmp_path)) == want_preads


def test_a_changed_file_is_seen_within_the_bound(make_server):
    srv = make_server()
    srv.set(Workers=1)
    path = srv.file("t.txt", "version one\n")
    srv.start()
    c = srv.conn()
    first = c.request("GET", "/t.txt")
    assert first.body == b"version one\n"
    assert c.request("GET", "/t.txt").body == b"version one\n"
    # Rewritten in place, same size and inode: only the modification time tells.
    with open(path, "r+b") as f:
        f.write(b"version two\n")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    time.sleep(BOUND + 0.1)
    r = c.request("GET", "/t.txt")
    assert r.body == b"version two\n"
    assert r.header("etag") != first.header("etag")
    # Grown, then served whole from memory with its new length.
    path.write_bytes(b"version three, longer\n")
    time.sleep(BOUND + 0.1)
    r = c.request("GET", "/t.txt", headers={"Range": "bytes=8-12"})
    assert r.status == 206 and r.body == b"three"
    c.close()


def test_files_above_the_bound_are_still_served(make_server):
    srv = make_server()
    srv.set(Workers=1, FileCacheBody="1K")
    body = os.urandom(1025)
    srv.file("big.bin", body)
    srv.file("small.bin", body[:1024])
    srv.start()
    c = srv.conn()
    for _ in range(2):
        assert c.request("GET", "/big.bin").body == body
        assert c.request("GET", "/small.bin").body == body[:1024]
    c.close()
