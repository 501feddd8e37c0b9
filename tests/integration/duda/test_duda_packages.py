"""Duda packages (docs/duda.md, "Packages"): the loader, with the test
packages of tests/duda/packages/ built by `duda package`; the tree's
base64, sha1 and sha256 packages through the crypto test service; and
`duda -w` on each package example."""

import contextlib
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import time

import pytest

from conftest import (BUILD, EMULATED, ROOT, SLOW, STATIC, Conn, check_sanitizers, free_port,
                      serving)
from installutil import cmake_install, gnu_dir, inside
from test_duda import build, duda, duda_server, start_fails, web_service

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: packages are built for the host"),
]

TESTS = ROOT / "tests" / "duda"


def package(src, out):
    p = duda("package", src, "-o", out)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def with_packages(srv, services, packages):
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {packages}\n")
    return srv


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(services, packages): the package users and the test packages."""
    svc = tmp_path_factory.mktemp("services")
    pkg = tmp_path_factory.mktemp("packages")
    for name in ("testpkg", "oldpkg"):
        package(TESTS / "packages" / name, pkg)
    for name in ("pkguser", "pkgmissing", "pkgold"):
        build(TESTS / name, svc)
    # The same service under a second name: two services share one copy of the package.
    p = duda("build", TESTS / "pkguser", "-o", svc / "second",
             env={"CFLAGS": "-DSVCNAME=pkguser2"})
    assert p.returncode == 0, p.stdout + p.stderr
    (svc / "second" / "pkguser.duda").rename(svc / "pkguser2.duda")
    return svc, pkg


def test_package_loaded_once_and_shared(make_server, built):
    svc, pkg = built
    srv = with_packages(duda_server(make_server, svc, [web_service("pkguser"),
                                                      web_service("pkguser2")]), svc, pkg)
    srv.start()
    for name in ("pkguser", "pkguser2"):
        r = srv.get(f"/{name}/sum")
        assert r.status == 200, r
        # init() ran once for the two services: one copy per process.
        assert r.body == b"testpkg: 2+3=5 inits=1\n"
    # A reload loads the services again; they take the package before the old ones drop it.
    srv.signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "configuration reloaded" not in srv.stderr_text() and time.time() < deadline:
        time.sleep(0.05)
    assert "configuration reloaded" in srv.stderr_text()
    r = srv.get("/pkguser/sum")
    assert r.body == b"testpkg: 2+3=5 inits=1\n"
    assert srv.stop() == 0
    assert len(re.findall(r"package 'testpkg' 1\.0 loaded from", srv.stderr_text())) == 1


def test_missing_package_refused(make_server, built):
    svc, pkg = built
    srv = with_packages(duda_server(make_server, svc, [web_service("pkgmissing")]), svc, pkg)
    err = start_fails(srv)
    assert re.search(r"sites/default:\d+: \[WEB_SERVICE\] pkgmissing: package 'nosuchpkg': "
                     r".*/nosuchpkg\.dpkg: No such file or directory", err), err


def test_package_of_another_abi_refused(make_server, built):
    svc, pkg = built
    srv = with_packages(duda_server(make_server, svc, [web_service("pkgold")]), svc, pkg)
    err = start_fails(srv)
    assert re.search(r"\[WEB_SERVICE\] pkgold: package 'oldpkg' \(.*/oldpkg\.dpkg\) was built for "
                     r"Duda package ABI 99\.0, this server has 1\.0 \(rebuild it", err), err


def test_duda_package_refuses_a_non_package(tmp_path):
    p = duda("package", TESTS / "pkguser", "-o", tmp_path)
    assert p.returncode == 1
    assert "the package has no DUDA_PACKAGE(\"pkguser\", ...)" in p.stderr


def test_make_install_installs_packages(tmp_path):
    """cmake --install puts the tree's packages, their headers and duda_package.h in place,
    and the installed helper points PackagesRoot at them."""
    cmake_install(tmp_path)
    pkgdir = gnu_dir("LIBDIR", "lib") + "/monkey/duda-packages"
    inc = gnu_dir("INCLUDEDIR", "include")
    built = sorted(f.name for f in (BUILD / "duda-packages").glob("*.dpkg"))
    assert built, "no package built"
    assert sorted(f.name for f in inside(tmp_path, pkgdir).glob("*.dpkg")) == built
    for f in built:
        assert inside(tmp_path, f"{inc}/duda/packages/{f[:-5]}.h").is_file()
    assert inside(tmp_path, f"{inc}/duda/duda_package.h").is_file()
    helper = inside(tmp_path, gnu_dir("BINDIR", "bin") + "/duda").read_text()
    assert f"PACKAGES=${{DUDA_PACKAGES:-'{pkgdir}'}}" in helper


# ---- the tree's base64, sha1 and sha256 packages, loaded by a service ------------------------

TREE_PACKAGES = BUILD / "duda-packages"


def crypto_server(make_server, tmp_path):
    """The crypto test service (tests/duda/crypto) on the tree's packages."""
    for name in ("base64", "sha1", "sha256"):
        if not (TREE_PACKAGES / f"{name}.dpkg").exists():
            pytest.skip(f"the {name} package is not built (libssl-dev)")
    svc = build(TESTS / "crypto", tmp_path / "services")
    srv = with_packages(duda_server(make_server, svc, [web_service("crypto")]), svc,
                        TREE_PACKAGES)
    srv.start()
    return srv


RFC4648 = [(b"", b""), (b"f", b"Zg=="), (b"fo", b"Zm8="), (b"foo", b"Zm9v"),
           (b"foob", b"Zm9vYg=="), (b"fooba", b"Zm9vYmE="), (b"foobar", b"Zm9vYmFy")]

# FIPS 180-2 "abc", RFC 2202 and RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
DIGESTS = {
    "sha1": {"abc": "a9993e364706816aba3e25717850c26c9cd0d89d",
             "": "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
    "sha256": {"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
               "": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
}
HMACS = {
    "sha1": [("0b" * 20, b"Hi There", "b617318655057264e28bc0b6fb378c8ef146be00"),
             (b"Jefe".hex(), b"what do ya want for nothing?",
              "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
             ("aa" * 80, b"Test Using Larger Than Block-Size Key - Hash Key First",
              "aa4ae5e15272d00e95705637ce8a3b55ed402112")],
    "sha256": [("0b" * 20, b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
               (b"Jefe".hex(), b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
               ("aa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")],
}


def post(srv, path, body):
    return srv.request("POST", "/crypto/" + path, body=body)


@pytest.mark.parametrize("own", ["", "?own=1"], ids=["request", "caller"])
def test_base64_package_through_a_service(make_server, tmp_path, own):
    srv = crypto_server(make_server, tmp_path)
    for raw, text in RFC4648:
        r = post(srv, "base64/encode" + own, raw)
        assert (r.status, r.body) == (200, text), raw
        r = post(srv, "base64/decode" + own, text)
        assert (r.status, r.body) == (200, raw), text
    data = bytes(range(256)) * 4
    text = post(srv, "base64/encode" + own, data).body
    assert post(srv, "base64/decode" + own, text).body == data
    for bad in (b"Zm9", b"Zm9v!A==", b"Zm 9", b"Z=9v", b"Zg=a", b"Zm9vYmFy\n"):
        r = post(srv, "base64/decode" + own, bad)
        assert (r.status, r.body) == (400, b"not base64\n"), bad
    for name in ("base64", "sha1", "sha256"):
        assert re.search(rf"package '{name}' \S+ loaded from \S+/{name}\.dpkg", srv.stderr_text())


@pytest.mark.parametrize("alg", ["sha1", "sha256"])
@pytest.mark.parametrize("own", ["", "?own=1"], ids=["request", "caller"])
def test_sha_packages_through_a_service(make_server, tmp_path, alg, own):
    srv = crypto_server(make_server, tmp_path)
    size = 20 if alg == "sha1" else 32
    for data, want in DIGESTS[alg].items():
        r = post(srv, f"{alg}/hex{own}", data.encode())
        assert (r.status, r.body.decode()) == (200, want), data
        r = post(srv, f"{alg}/digest", data.encode())
        assert (r.status, r.body) == (200, bytes.fromhex(want)), data
        assert len(r.body) == size
    big = os.urandom(100_000)
    assert post(srv, f"{alg}/hex{own}", big).body.decode() == hashlib.new(alg, big).hexdigest()
    for key, data, want in HMACS[alg]:
        sep = "&" if own else "?"
        r = post(srv, f"{alg}/hmac_hex{own}{sep}key={key}", data)
        assert (r.status, r.body.decode()) == (200, want), key
        r = post(srv, f"{alg}/hmac?key={key}", data)
        assert (r.status, r.body) == (200, bytes.fromhex(want)), key
    # An empty key is a key of zero bytes.
    r = post(srv, f"{alg}/hmac_hex{own}", b"")
    assert r.body.decode() == hmac.new(b"", b"", alg).hexdigest()
    assert post(srv, f"{alg}/hmac?key=abc", b"x").status == 400
    assert post(srv, f"{alg}/nothing", b"x").status == 404


# ---- duda -w on the package examples ------------------------------------------------------


@contextlib.contextmanager
def served_w(folder, tmp_path):
    """`duda -w FOLDER -p PORT` while the block runs (conftest.serving): yields
    the port; its output must hold no sanitizer report."""
    port = free_port()
    log = tmp_path / f"{folder.name}-w.log"
    with serving([str(BUILD / "bin" / "duda"), "-w", str(folder), "-o", str(tmp_path / "out"),
                  "-p", str(port)], port, log):
        yield port
    check_sanitizers(log.read_text())


def example_copy(name, tmp_path):
    """A copy of examples/NAME: the service writes into its own folders (DataDir)."""
    dst = tmp_path / name
    shutil.copytree(ROOT / "examples" / name, dst)
    return dst


def need_packages(*names):
    for name in names:
        if not (TREE_PACKAGES / f"{name}.dpkg").exists():
            pytest.skip(f"the {name} package is not built")


def test_duda_w_chat(tmp_path):
    ws_client = pytest.importorskip("websockets.sync.client",
                                    reason="Python's websockets 13 or later (tools/deps.sh test)")
    need_packages("websocket", "broadcaster")
    with served_w(example_copy("chat", tmp_path), tmp_path) as port:
        c = Conn(port)
        r = c.request("GET", "/chat/")
        assert r.status == 200 and b'id="who"' in r.body
        c.close()
        with ws_client.connect(f"ws://127.0.0.1:{port}/chat/ws?nick=w") as ws:
            assert json.loads(ws.recv(timeout=5 * SLOW))["type"] == "here"
            assert json.loads(ws.recv(timeout=5 * SLOW))["nick"] == "w"
            ws.send("hi")
            assert json.loads(ws.recv(timeout=5 * SLOW)) == {"type": "message", "nick": "w",
                                                              "text": "hi"}


def test_duda_w_json_api(tmp_path):
    need_packages("json", "sqlite")
    folder = example_copy("json_api", tmp_path)
    with served_w(folder, tmp_path) as port:
        c = Conn(port)
        r = c.request("POST", "/json_api/notes", headers={"Content-Type": "application/json"},
                      body=b'{"title": "milk", "body": "2 l"}')
        assert r.status == 201, r
        note = json.loads(r.body)
        r = c.request("GET", f"/json_api/notes/{note['id']}")
        assert (r.status, json.loads(r.body)) == (200, note)
        assert c.request("GET", "/json_api/notes/x").status == 400
        c.close()
    assert (folder / "data" / "notes.db").is_file()  # DataDir is the folder's data/


def test_duda_w_redis_counter(tmp_path):
    from test_duda_redis import REDIS_SERVER, Redis
    need_packages("redis", "websocket")
    if REDIS_SERVER is None:
        pytest.skip("no redis-server (tools/deps.sh test installs it)")
    redis = Redis(tmp_path).start()
    folder = example_copy("redis_counter", tmp_path)
    conf = folder / "conf" / "redis.conf"
    conf.write_text(conf.read_text().replace("redis://127.0.0.1:6379/0", redis.url + "/0"))
    try:
        with served_w(folder, tmp_path) as port:
            c = Conn(port)
            assert c.request("GET", "/redis_counter/").status == 200
            for n in (1, 2):
                assert c.request("GET", "/redis_counter/hit").body == b'{"hits":%d}\n' % n
            c.close()
            assert redis.call("GET", "redis_counter:hits") == b"2"
    finally:
        redis.stop()
