"""Tier 7: the plugin API, through the skeleton plugin and test plugins."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, MONKEY, SLOW, needs_dlopen

SKELETON_SO = BUILD / "plugins" / "monkey-skeleton.so"
TAP_SO = BUILD / "tests" / "plugins" / "monkey-tap.so"
BADABI_SO = BUILD / "tests" / "plugins" / "monkey-badabi.so"
HALFRELOAD_SO = BUILD / "tests" / "plugins" / "monkey-halfreload.so"
HOLD_SO = BUILD / "tests" / "plugins" / "monkey-hold.so"
ABI_SO = {v: BUILD / "tests" / "plugins" / f"monkey-abi-{v}.so"
          for v in ("older", "newer", "newhook")}
# The server's plugin ABI version, as include/monkey/mk_plugin.h defines it.
_ABI_H = (Path(__file__).resolve().parents[3] / "include" / "monkey" / "mk_plugin.h").read_text()
ABI_MAJOR = int(re.search(r"#define MK_PLUGIN_ABI_MAJOR (\d+)", _ABI_H).group(1))
ABI_MINOR = int(re.search(r"#define MK_PLUGIN_ABI_MINOR (\d+)", _ABI_H).group(1))
ABI = f"{ABI_MAJOR}.{ABI_MINOR}"


@pytest.fixture(params=[pytest.param("shared", marks=needs_dlopen), "builtin"])
def skel(make_server, request):
    srv = make_server()
    srv.file("a.txt", "AAAA\n")
    srv.plugins = [str(SKELETON_SO) if request.param == "shared" else "skeleton"]
    (srv.conf / "plugins").mkdir()
    (srv.conf / "plugins" / "skeleton.conf").write_text(
        "[SKELETON]\n    Path /skel\n    Message Hi from the test\n")
    srv.start()
    return srv


def test_content_hook(skel):
    r = skel.get("/skel")
    assert r.status == 200
    assert r.body == b"Hi from the test\n"
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert r.header("x-skeleton-worker") in ("0", "1")
    # Other paths fall through to the static handler.
    assert skel.get("/a.txt").body == b"AAAA\n"
    assert skel.get("/skeleton").status == 404


def test_request_hook_can_refuse(skel):
    r = skel.get("/a.txt", headers={"X-Skeleton-Deny": "1"})
    assert r.status == 403
    assert skel.get("/a.txt").status == 200


def test_request_done_and_accept_hooks(skel):
    c = skel.conn()
    for _ in range(3):
        c.request("GET", "/a.txt")
    text = c.request("GET", "/skel/stats").body.decode()
    c.close()
    requests, conns = int(text.split()[1]), int(text.split()[3])
    assert requests >= 3
    assert conns >= 1


def test_body_for_handler(skel):
    c = skel.conn()
    body = os.urandom(100000)
    r = c.request("POST", "/skel/echo", body=body)
    assert r.status == 200 and r.body == body
    # Empty body.
    r = c.request("POST", "/skel/echo", headers={"Content-Length": "0"})
    assert r.status == 200 and r.body == b""
    # The connection is still in step.
    assert c.request("GET", "/a.txt").body == b"AAAA\n"
    c.close()


def test_chunked_body_for_handler(skel):
    c = skel.conn()
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"4\r\nWiki\r\n5;x=y\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n"
           b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response()
    assert r.status == 200 and r.body == b"Wikipedia in\r\n\r\nchunks."
    assert c.read_response().body == b"AAAA\n"
    c.close()


def test_bad_chunk_size_for_handler_400(skel):
    c = skel.conn()
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"zz\r\nhello\r\n0\r\n\r\n")
    r = c.read_response()
    assert r.status == 400
    assert c.closed()


def test_expect_continue_for_handler(skel):
    c = skel.conn()
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
           b"Expect: 100-continue\r\n\r\n")
    r = c.read_response()
    assert r.status == 100
    c.send(b"hello")
    r = c.read_response()
    assert r.status == 200 and r.body == b"hello"
    assert c.request("GET", "/a.txt").status == 200
    c.close()


def test_body_limit_for_handler(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.set(MaxRequestBody="10K")
    srv.start()
    c = srv.conn()
    c.send(b"POST /skeleton/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(20):
        try:
            c.send(b"400\r\n" + b"x" * 1024 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            break
    r = c.read_response()
    assert r.status == 413
    assert c.closed()


def test_handler_method_check(skel):
    """The echo route takes POST only: the route table answers the rest,
    with one Allow listing exactly its methods."""
    r = skel.get("/skel/echo")
    assert r.status == 405
    assert len(r.headers["allow"]) == 1
    assert r.header("allow") == "POST, OPTIONS"
    r = skel.request("OPTIONS", "/skel/echo")
    assert r.status == 204 and r.header("allow") == "POST, OPTIONS"
    r = skel.request("OPTIONS", "/skel")
    assert r.status == 204 and r.header("allow") == "GET, HEAD, OPTIONS"
    # Static paths keep the static handler's methods.
    r = skel.request("DELETE", "/a.txt")
    assert r.status == 405 and r.header("allow") == "GET, HEAD, OPTIONS"


def test_skeleton_defaults_without_conf(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.start()
    assert srv.get("/skeleton").body == b"Hello from the skeleton plugin\n"


def test_skeleton_conf_error_names_file_and_line(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    (srv.conf / "plugins").mkdir()
    conf = srv.conf / "plugins" / "skeleton.conf"
    conf.write_text("[SKELETON]\n    Path /x\n    Colour blue\n")
    err = srv.run_expect_failure()
    assert f"{conf}:3:" in err
    assert "plugins.load:2:" in err  # which plugin failed


def test_plugin_reload(skel):
    conf = skel.conf / "plugins" / "skeleton.conf"
    conf.write_text("[SKELETON]\n    Path /skel\n    Message Reloaded\n")
    import signal
    import time
    skel.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10 * SLOW
    while skel.get("/skel").body != b"Reloaded\n":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_refused_reload_keeps_plugin_settings(skel):
    import signal
    import time

    def wait_log(text, count):
        deadline = time.monotonic() + 10 * SLOW
        while skel.stderr_text().count(text) < count:
            assert time.monotonic() < deadline, skel.stderr_text()
            time.sleep(0.05)

    conf = skel.conf / "plugins" / "skeleton.conf"
    site = skel.conf / "sites" / "default"
    good_site = site.read_text()
    # A good skeleton.conf, refused with a bad site section: the old Message stays.
    conf.write_text("[SKELETON]\n    Path /skel\n    Message Changed\n")
    site.write_text(good_site + "[SKELETON]\n    Colour blue\n")
    skel.signal(signal.SIGHUP)
    wait_log("reload failed", 1)
    assert f"{site}:5:" in skel.stderr_text()
    assert skel.get("/skel").body == b"Hi from the test\n"
    # A bad skeleton.conf refuses the whole reload: the site's Greeting does not apply.
    conf.write_text("[SKELETON]\n    Colour blue\n")
    site.write_text(good_site + "[SKELETON]\n    Greeting Hello site\n")
    skel.signal(signal.SIGHUP)
    wait_log("reload failed", 2)
    assert f"{conf}:2:" in skel.stderr_text()
    assert skel.get("/skel").body == b"Hi from the test\n"
    # Both fixed: both apply.
    conf.write_text("[SKELETON]\n    Path /skel2\n    Message Changed\n")
    skel.signal(signal.SIGHUP)
    wait_log("configuration reloaded", 1)
    deadline = time.monotonic() + 10 * SLOW
    while skel.get("/skel2").body != b"Hello site\n":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert skel.get("/skel").status == 404


# ---- declared configuration keys (the schema) ----------------------------------

SCHEMA_ERRORS = [
    # (file, text, line, message): every value the schema refuses, named by file and line
    ("plugins/skeleton.conf", "[SKELETON]\n    Path skel\n", 2,
     "Path: 'skel' does not start with '/'"),
    ("plugins/skeleton.conf", "[SKELETON]\n    Path /a/:id\n", 2,
     "Path: '/a/:id' holds a route pattern ('*' or '/:')"),
    ("plugins/skeleton.conf", "[SKELETON]\n    Path /a\n    Path /b\n", 3,
     "'Path' is given twice"),
    ("plugins/skeleton.conf", "# c\n[SKELETON]\n    Message " + "m" * 300 + "\n", 3,
     "Message: longer than 253 bytes"),
    ("plugins/skeleton.conf", "[SKELETON]\n    Greeting hi\n", 2,
     "unknown key 'Greeting' in [SKELETON]"),  # a site key, not a plugin-wide one
    ("plugins/skeleton.conf", "[SKELETON]\n    Path /a\n[OTHER]\n", 3,
     "unknown section [OTHER] (expected [SKELETON])"),
    ("sites/default", None, 5, "unknown key 'Path' in [SKELETON]"),  # a plugin-wide key
]


@pytest.mark.parametrize("case", range(len(SCHEMA_ERRORS)))
@pytest.mark.parametrize("mode", ["start", "check"])
def test_schema_errors_name_file_and_line(make_server, case, mode):
    rel, text, line, message = SCHEMA_ERRORS[case]
    srv = make_server()
    srv.plugins = ["skeleton"]
    (srv.conf / "plugins").mkdir()
    if text is None:
        srv.site_extra = "[SKELETON]\n    Path /x\n"
    else:
        (srv.conf / rel).write_text(text)
    if mode == "start":
        err = srv.run_expect_failure()
    else:
        srv.write_conf()
        p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True,
                           text=True)
        assert p.returncode == 1, p.stderr
        err = p.stderr
    assert f"{srv.conf / rel}:{line}: {message}" in err, err


def test_schema_reload_builds_new_settings(skel):
    """A reload fills new structs; a refused one leaves the running ones in force."""
    import signal
    import time
    conf = skel.conf / "plugins" / "skeleton.conf"
    conf.write_text("[SKELETON]\n    Path /skel\n    Message Bad\n    Message Twice\n")
    skel.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10 * SLOW
    while f"{conf}:4: 'Message' is given twice" not in skel.stderr_text():
        assert time.monotonic() < deadline, skel.stderr_text()
        time.sleep(0.05)
    assert skel.get("/skel").body == b"Hi from the test\n"
    conf.write_text("[SKELETON]\n    Path /other\n")  # Message back to its default
    skel.reload()  # every worker has the new settings once it returns
    assert skel.get("/other").body == b"Hello from the skeleton plugin\n"
    assert skel.get("/skel").status == 404


@needs_dlopen
def test_missing_shared_object(make_server):
    srv = make_server()
    srv.plugins = ["/nonexistent/monkey-x.so"]
    err = srv.run_expect_failure()
    assert "plugins.load:2:" in err and "cannot load plugin" in err


def test_unknown_builtin(make_server):
    srv = make_server()
    srv.plugins = ["nosuchplugin"]
    err = srv.run_expect_failure()
    assert "plugins.load:2:" in err and "nosuchplugin" in err


@needs_dlopen
def test_wrong_abi_is_refused(make_server):
    srv = make_server()
    srv.plugins = [str(BADABI_SO)]
    err = srv.run_expect_failure()
    assert (f"plugins.load:2: plugin '{BADABI_SO}' was built for plugin ABI 103.{ABI_MINOR}, "
            f"this server has 3.{ABI_MINOR}") in err
    assert "rebuild it" in err


@needs_dlopen
@pytest.mark.parametrize("variant", ["older", "newer"])
def test_other_abi_minor_loads(make_server, variant):
    # An older minor (a smaller struct mk_plugin whose tail holds poison the
    # server must not read) and a newer one that leaves its extra hook NULL.
    srv = make_server()
    srv.plugins = [str(ABI_SO[variant])]
    srv.start()
    r = srv.get("/abisize")
    assert r.status == 200
    assert r.body == f"{variant} 1\n".encode()  # MK_API_HAS saw site_hide_dotfiles
    srv.signal(signal.SIGHUP)  # site_init and the other hooks past the size stay unread
    deadline = time.monotonic() + 10 * SLOW
    while "configuration reloaded" not in srv.stderr_text():
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.02)
    r = srv.get("/abisize")
    assert r.status == 200 and r.body == f"{variant} 1\n".encode()


@needs_dlopen
def test_newer_minor_hook_is_refused(make_server):
    srv = make_server()
    srv.plugins = [str(ABI_SO["newhook"])]
    err = srv.run_expect_failure()
    assert (f"plugins.load:2: plugin '{ABI_SO['newhook']}' uses hooks of plugin ABI "
            f"3.{ABI_MINOR + 1}") in err
    assert f"this server (3.{ABI_MINOR}) does not have" in err


@needs_dlopen
def test_reload_prepare_without_commit_is_refused(make_server):
    srv = make_server()
    srv.plugins = [str(HALFRELOAD_SO)]
    err = srv.run_expect_failure()
    assert "plugins.load:2:" in err
    assert "reload_prepare and reload_commit without the other" in err


@needs_dlopen
def test_plugin_loaded_twice(make_server):
    srv = make_server()
    srv.plugins = ["skeleton", str(SKELETON_SO)]
    err = srv.run_expect_failure()
    assert "plugins.load:3:" in err and "already loaded" in err


@needs_dlopen
def test_transport_plugin(make_server):
    srv = make_server()
    data = os.urandom(200000)
    srv.file("data.bin", data)
    srv.plugins = [str(TAP_SO)]
    srv.set(Listen=f"127.0.0.1:{srv.port} tap")
    srv.start()
    c = srv.conn()
    r = c.request("GET", "/data.bin")
    assert r.status == 200 and r.body == data  # sent through the transport's writev
    r = c.request("GET", "/tap")
    # The plugin's transport read both requests on this connection.
    assert int(r.body) > 60
    c.close()


# ---- ABI 2: site sections, tasks, suspension, batches ---------------------------

def test_site_section_read_by_plugin(make_server, tmp_path):
    srv = make_server()
    other = tmp_path / "other"
    other.mkdir()
    srv.plugins = ["skeleton"]
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test\n    DocumentRoot {other}\n"
                                "[SKELETON]\n    Greeting Hello from other.test\n")
    srv.start()
    assert srv.get("/skeleton", headers={"Host": "other.test"}).body == b"Hello from other.test\n"
    assert srv.get("/skeleton").body == b"Hello from the skeleton plugin\n"


def test_site_section_error_names_file_and_line(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.site_extra = "[SKELETON]\n    Greeting a\n    Colour b\n"
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{site}:6:" in err and "Colour" in err


def test_site_section_without_plugin_is_refused(make_server):
    srv = make_server()
    srv.site_extra = "[SKELETON]\n    Greeting a\n"
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{site}:4:" in err and "no loaded plugin reads it" in err


def test_check_mode_runs_plugin_validation(make_server):
    import subprocess
    from conftest import MONKEY
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.write_conf()
    site = srv.conf / "sites" / "default"
    site.write_text(site.read_text() + "[SKELETON]\n    Colour b\n")
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert p.returncode == 1 and f"{site}:5:" in p.stderr


def test_task_does_not_block_the_worker(make_server):
    import time
    srv = make_server()
    srv.file("a.txt", "AAAA\n")
    srv.plugins = ["skeleton"]
    srv.set(Workers=1)
    srv.start()
    ms = int(800 * SLOW)  # the bounds below scale with it
    slow = srv.conn()
    t0 = time.monotonic()
    slow.send(f"GET /skeleton/slow?ms={ms} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    time.sleep(0.1)
    # The only worker keeps serving while the task sleeps.
    assert srv.get("/a.txt").body == b"AAAA\n"
    assert time.monotonic() - t0 < 0.75 * ms / 1000
    r = slow.read_response()
    assert r.status == 200 and r.body == f"slept {ms} ms\n".encode()
    assert time.monotonic() - t0 >= ms / 1000
    # The connection goes on after a resumed request.
    assert slow.request("GET", "/a.txt").body == b"AAAA\n"
    slow.close()


def test_many_tasks_at_once(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.set(TaskQueuePerClient=40)  # all from one address
    srv.start()
    conns = [srv.conn() for _ in range(40)]
    for c in conns:
        c.send(b"GET /skeleton/slow?ms=20 HTTP/1.1\r\nHost: x\r\n\r\n")
    for c in conns:
        assert c.read_response().body == b"slept 20 ms\n"
        c.close()


def test_task_queue_bounds(make_server):
    import select
    import time
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.set(TaskQueuePerPlugin=6, TaskQueuePerClient=4)
    srv.start()

    def flood(n, source, refused):
        """n requests from `source`; returns once `refused` of them are answered."""
        conns = [srv.conn(source=source) for _ in range(n)]
        for c in conns:
            c.send(b"GET /skeleton/slow?ms=600 HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.monotonic() + 0.5 * SLOW  # refusals come at once
        while refused:
            ready, _, _ = select.select([c.sock for c in conns], [], [], 0.05)
            assert len(ready) <= refused
            if len(ready) == refused:
                break
            assert time.monotonic() < deadline
        return conns

    def statuses(conns):
        out = []
        for c in conns:
            r = c.read_response()
            out.append(r.status)
            if r.status == 503:
                assert r.header("retry-after") == "1"
                assert c.closed()
            else:
                assert r.body == b"slept 600 ms\n"
            c.close()
        return sorted(out)

    a = flood(6, "127.0.0.2", 2)  # the client's 4, the rest refused
    b = flood(3, "127.0.0.3", 1)  # the plugin's 6: 4 + 2
    c = flood(3, "127.0.0.4", 3)  # the plugin's share is full
    assert statuses(c) == [503] * 3
    assert statuses(a) == [200] * 4 + [503] * 2
    assert statuses(b) == [200] * 2 + [503]
    # Places free up as tasks end.
    assert statuses(flood(2, "127.0.0.4", 0)) == [200, 200]
    text = srv.stderr_text()
    assert "TaskQueuePerClient" in text and "TaskQueuePerPlugin" in text


def test_task_of_a_client_that_hung_up_is_dropped(make_server):
    import time
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.start()
    # 8 tasks of 500 ms (times SLOW) from 8 clients, gone at once: 4 rounds
    # of work for 2 threads.
    ms = int(500 * SLOW)
    for i in range(8):
        c = srv.conn(source=f"127.0.0.{2 + i}")
        c.send(f"GET /skeleton/slow?ms={ms} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        c.close()
    t0 = time.monotonic()
    c = srv.conn(source="127.0.0.20")
    assert c.request("GET", "/skeleton/slow?ms=10").body == b"slept 10 ms\n"
    c.close()
    # Only the 2 already running are waited for: one round, not four.
    assert time.monotonic() - t0 < 2.4 * ms / 1000


def test_suspended_request_times_out(make_server):
    import time
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.set(Timeout="300ms")
    srv.start()
    c = srv.conn()
    t0 = time.monotonic()
    r = c.request("GET", f"/skeleton/slow?ms={int(1500 * SLOW)}")
    assert r.status == 503
    assert time.monotonic() - t0 < 0.3 + 0.6 * SLOW
    assert c.closed()
    # The late continuation finds the request gone; the server is fine and
    # stops cleanly (the fixture checks the exit status and sanitizers).
    time.sleep(1.5 * SLOW)
    assert srv.get("/skeleton").status == 200


@needs_dlopen
def test_handles_never_resumed_are_freed_at_stop(make_server):
    """The hold plugin keeps the handles of requests that timed out (503) and
    never resumes them: the requests stay allocated while the server runs,
    and the server frees the handles and their requests when it stops (under
    ASan the stop fails on a leak report otherwise)."""
    srv = make_server()
    srv.plugins = [str(HOLD_SO)]
    srv.set(Timeout="300ms")
    srv.start()
    c = srv.conn()
    assert c.request("GET", "/hold/a").status == 503
    c.close()
    assert srv.get("/hold/b").status == 503
    assert srv.get("/held").body == b"held 2\n"
    assert srv.stop() == 0


def test_stop_waits_for_task(make_server):
    import signal
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.start()
    c = srv.conn()
    c.send(b"GET /skeleton/slow?ms=700 HTTP/1.1\r\nHost: x\r\n\r\n")
    import time
    time.sleep(0.1)
    srv.signal(signal.SIGTERM)
    r = c.read_response()
    assert r.status == 200 and r.body == b"slept 700 ms\n"
    assert srv.proc.wait(timeout=10) == 0


def test_batch_hook(skel):
    c = skel.conn()
    for _ in range(5):
        c.request("GET", "/a.txt")
    text = c.request("GET", "/skel/stats").body.decode().split()
    c.close()
    assert int(text[5]) >= 5  # at least one batch per request here
