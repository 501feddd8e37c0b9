"""The library (docs/library.md): libmonkey.so and monkey.pc installed into
a temporary DESTDIR; examples/embed built against that installation with
its Makefile and pkg-config, run, and both of its routes fetched (the JSON
status route the program answers, a static file). The shared object
exports the library API and nothing else, under a versioned SONAME.

A program built with docs/library.md's `cc ... $(pkg-config --cflags --libs
monkey)` runs without LD_LIBRARY_PATH: installed under a prefix the dynamic
linker does not search (an rpath from monkey.pc), and installed for real
under the configured prefix (/usr/local: ldconfig run by the installation),
in a private mount namespace with overlays, so the machine is left as it was.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, Conn, check_sanitizers, free_port, serving
from h2util import built_with_h2
from installutil import cmake_install

pytestmark = [
    pytest.mark.skipif(STATIC, reason="the static build makes no shared library"),
    pytest.mark.skipif(EMULATED, reason="cross build: the example would need qemu"),
    pytest.mark.skipif(not shutil.which("pkg-config"), reason="pkg-config is not installed"),
    pytest.mark.skipif(not list((BUILD / "lib").glob("libmonkey.so*")),
                       reason="built with MK_LIBMONKEY=OFF"),
]

HEADERS = [ROOT / "include/monkey/monkey.h", ROOT / "include/monkey/mk_lib.h"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """DESTDIR with the build installed into it, and the directory of monkey.pc."""
    dest = tmp_path_factory.mktemp("destdir")
    cmake_install(dest)
    pcs = list(dest.rglob("pkgconfig/monkey.pc"))
    assert len(pcs) == 1, pcs
    return dest, pcs[0].parent


def api_functions():
    """Every function the public headers declare."""
    names = set()
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names |= set(re.findall(r"^[a-z].*?\b(mk_\w+)\(", text, flags=re.M))
    return names


def test_shared_library_exports_the_api_only(installed):
    dest, pcdir = installed
    libdir = pcdir.parent
    sonames = list(libdir.glob("libmonkey.so.*.*.*"))
    assert len(sonames) == 1, sonames
    real = sonames[0]
    dyn = subprocess.run(["objdump", "-p", str(real)], capture_output=True, text=True).stdout
    major = real.name.split(".")[2]
    assert re.search(rf"SONAME\s+libmonkey\.so\.{major}\n", dyn)
    assert (libdir / f"libmonkey.so.{major}").is_symlink()
    assert (libdir / "libmonkey.so").is_symlink()

    nm = subprocess.run(["nm", "-D", "--defined-only", str(real)], capture_output=True,
                        text=True).stdout
    exported = {line.split()[2].split("@")[0] for line in nm.splitlines()
                if len(line.split()) == 3 and line.split()[1] in "TDBR"}
    assert exported == api_functions(), exported ^ api_functions()


def test_pkg_config_names_the_installation(installed):
    dest, pcdir = installed
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
    cflags = subprocess.run(["pkg-config", "--cflags", "monkey"], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "monkey"], env=env, capture_output=True,
                          text=True, check=True).stdout.split()
    inc = [f[2:] for f in cflags if f.startswith("-I")]
    assert inc and os.path.exists(os.path.join(inc[0], "monkey", "monkey.h"))
    assert "-lmonkey" in libs
    libdir = [f[2:] for f in libs if f.startswith("-L")][0]
    assert os.path.realpath(libdir) == os.path.realpath(pcdir.parent)


def test_example_builds_with_pkg_config_and_serves(installed, tmp_path):
    dest, pcdir = installed
    src = tmp_path / "embed"
    src.mkdir()
    for name in ("embed.c", "Makefile"):
        shutil.copy(ROOT / "examples/embed" / name, src / name)
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
    p = subprocess.run(["make", "-C", str(src)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    # Built against the installed library, not the build tree's.
    ldd = subprocess.run(["ldd", str(src / "embed")], capture_output=True, text=True).stdout
    assert str(dest) in ldd, ldd

    docroot = tmp_path / "htdocs"
    docroot.mkdir()
    (docroot / "index.html").write_text("<h1>static beside the program</h1>\n")
    port = free_port()
    h2c = built_with_h2() and shutil.which("curl") is not None
    listen = f"127.0.0.1:{port}" + (" h2c" if h2c else "")
    log = tmp_path / "embed.log"
    with serving([str(src / "embed"), "-l", listen, "-w", "2", str(docroot)], port, log):
        for n in (1, 2):
            c = Conn(port)
            r = c.request("GET", "/api/status")
            c.close()
            assert r.status == 200
            assert r.headers["content-type"] == ["application/json"]
            st = json.loads(r.body)
            assert st["server"] == "monkey" and st["requests"] == n
            assert re.fullmatch(r"\d+\.\d+\.\d+", st["version"])
        c = Conn(port)
        r = c.request("GET", "/")
        c.close()
        assert r.status == 200
        assert r.body == b"<h1>static beside the program</h1>\n"
        if h2c:  # the program's handler answers HTTP/2 streams alike
            p = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-w", "\n%{http_version}",
                                f"http://127.0.0.1:{port}/api/status"], capture_output=True,
                               text=True, timeout=10 * SLOW)
            body, version = p.stdout.rsplit("\n", 1)
            assert version == "2" and json.loads(body)["requests"] == 3, p.stdout
    check_sanitizers(log.read_text())


# ---- a program built with pkg-config runs as it is (no LD_LIBRARY_PATH) ----------------------

PROG = """#include <stdio.h>
#include <monkey/monkey.h>
int main(void) { printf("libmonkey %s\\n", mk_server_version()); return 0; }
"""


def env_without_ld_path(**extra):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


def build_prog(tmp_path, env):
    """docs/library.md's command: cc -o prog prog.c $(pkg-config --cflags --libs monkey)."""
    (tmp_path / "prog.c").write_text(PROG)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "monkey"], env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    p = subprocess.run(["cc", "-o", str(tmp_path / "prog"), str(tmp_path / "prog.c"), *flags],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return tmp_path / "prog"


def test_program_runs_from_a_prefix_off_the_linker_path(tmp_path):
    """Installed with a prefix the dynamic linker does not search (/opt/...), monkey.pc
    gives the program an rpath: it runs without LD_LIBRARY_PATH."""
    dest = tmp_path / "dest"
    p = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", "/opt/monkey-test"],
                       env={"DESTDIR": str(dest), "PATH": "/usr/bin:/bin"}, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    pcs = list((dest / "opt/monkey-test").rglob("pkgconfig/monkey.pc"))
    assert len(pcs) == 1, pcs
    prog = build_prog(tmp_path, env_without_ld_path(PKG_CONFIG_PATH=str(pcs[0].parent)))
    p = subprocess.run([str(prog)], env=env_without_ld_path(), capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("libmonkey ")
    assert "-Wl,-rpath,${libdir} " in pcs[0].read_text()


def can_overlay():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                       capture_output=True)
    return p.returncode == 0


@pytest.mark.skipif(not can_overlay(), reason="needs root and unshare (a private mount namespace)")
def test_program_runs_after_install_under_the_configured_prefix(tmp_path):
    """`make install` for real (prefix /usr/local unless configured otherwise), then
    docs/library.md's cc ... $(pkg-config --cflags --libs monkey): the program runs as it
    is. The installation is made in a private mount namespace, every directory it writes
    (and /etc, for ldconfig's cache) under an overlay whose changes go to tmp_path, so the
    machine is left as it was."""
    stage = tmp_path / "stage"
    cmake_install(stage)
    tops = sorted({p.relative_to(stage).parts[0] for p in stage.rglob("*")} | {"etc"})
    (tmp_path / "prog.c").write_text(PROG)
    script = ["set -e"]
    for top in tops:
        for d in ("upper", "work"):
            (tmp_path / "ovl" / top / d).mkdir(parents=True)
        script.append(f"mount -t overlay overlay -o lowerdir=/{top},"
                      f"upperdir={tmp_path}/ovl/{top}/upper,workdir={tmp_path}/ovl/{top}/work /{top}")
    script += [
        f"cmake --install {BUILD} >{tmp_path}/install.log 2>&1",
        f"cc -o {tmp_path}/prog {tmp_path}/prog.c $(pkg-config --cflags --libs monkey)",
        f"{tmp_path}/prog",
    ]
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        "\n".join(script)], env=env_without_ld_path(), capture_output=True,
                       text=True, timeout=300)
    log = (tmp_path / "install.log").read_text() if (tmp_path / "install.log").exists() else ""
    assert p.returncode == 0, p.stdout + p.stderr + log
    assert p.stdout.startswith("libmonkey "), p.stdout
    # What the installation wrote stayed in the overlays.
    assert list((tmp_path / "ovl").glob("*/upper/**/libmonkey.so.0"))
