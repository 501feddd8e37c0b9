"""Tier 2: small files served from the file cache's memory (FileCacheBody):
no read per request once cached, and a changed file seen again within the
documented bound (one second: the entry's revalidation)."""

import os
import time

import pytest

from conftest import Strace
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
        lines = [line for line in tracer.stop() if "pread" in line]
    c.close()
    return lines


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


def test_a_changed_file_is_served_stale_at_most_for_the_bound(make_server):
    """The copy in memory may be stale until the entry is checked again: the
    rest of the second (the worker's time(2)) in which the file changed. A
    change made in the same second as the last check is therefore not seen
    at once, and is seen once the bound has passed."""
    srv = make_server()
    srv.set(Workers=1)
    srv.start()
    c = srv.conn()
    for attempt in range(20):
        name = f"s{attempt}.txt"
        path = srv.file(name, "old content\n")
        # Start early in a second, so that both requests fall in it.
        frac = time.time() % 1
        if not 0.05 <= frac <= 0.4:
            time.sleep((1.05 - frac) % 1)
        second = int(time.time())
        assert c.request("GET", "/" + name).body == b"old content\n"  # cached, checked now
        with open(path, "r+b") as f:  # same size and inode: only the time tells
            f.write(b"new content\n")
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
        r = c.request("GET", "/" + name)
        now = time.time()
        if int(now) == second and now % 1 < 0.9:
            assert r.body == b"old content\n"  # within the bound: the copy in memory
            break
    else:
        pytest.fail("no two requests fell in the same second")
    time.sleep(BOUND + 0.1)
    assert c.request("GET", "/" + name).body == b"new content\n"
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
