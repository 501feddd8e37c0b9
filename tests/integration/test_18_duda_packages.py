"""Duda packages (docs/duda.md, "Packages"): the loader, with the test
packages of tests/duda/packages/ built by `duda package`."""

import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, STATIC
from test_18_duda import build, duda, duda_server, start_fails, web_service

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
    from test_15_install import gnu_dir, inside

    p = subprocess.run(["cmake", "--install", str(BUILD)], env={"DESTDIR": str(tmp_path),
                       "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
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
