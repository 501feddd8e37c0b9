"""Installation (docs/packaging.md): `cmake --install` into a temporary
DESTDIR, then the installed server started from there with its installed
configuration relocated by that prefix; Duda enabled in that configuration
the way an administrator does; the manual pages against the programs'
--help; the systemd unit checked by systemd-analyze.

The build's install prefix is read from its CMakeCache.txt, so the checks
hold for whatever prefix the build was configured with.
"""

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, Conn, check_sanitizers, free_port, wait_port

pytestmark = pytest.mark.skipif(STATIC, reason="the static build builds only the server")
# The installed programs of a cross build run only under the emulator.
native_only = pytest.mark.skipif(EMULATED, reason="cross build: installed programs need qemu")


def cache(name):
    for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    raise KeyError(name)


def gnu_dir(name, default):
    """An install directory as GNUInstallDirs resolves it (absolute)."""
    prefix = cache("CMAKE_INSTALL_PREFIX")
    try:
        d = cache("CMAKE_INSTALL_" + name)
    except KeyError:
        d = default
    if d.startswith("/"):
        return d
    if prefix == "/usr" and name in ("SYSCONFDIR", "LOCALSTATEDIR"):
        return "/" + d  # GNUInstallDirs: /etc and /var for the /usr prefix
    return f"{prefix}/{d}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """DESTDIR with the build installed into it."""
    dest = tmp_path_factory.mktemp("destdir")
    p = subprocess.run(["cmake", "--install", str(BUILD)], env={"DESTDIR": str(dest),
                       "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return dest


def inside(dest, path):
    return dest / path.lstrip("/")


def with_duda():
    """The build has the duda plugin (MK_DUDA, on by default)."""
    return cache("MK_DUDA").upper() in ("ON", "1", "TRUE", "YES")


def duda_dirs():
    """The installed ServicesRoot and PackagesRoot (duda/duda.cmake)."""
    return (gnu_dir("LOCALSTATEDIR", "var") + "/lib/monkey/duda/services",
            gnu_dir("LIBDIR", "lib") + "/monkey/duda-packages")


def test_install_layout(installed):
    prefix = cache("CMAKE_INSTALL_PREFIX")
    confdir = gnu_dir("SYSCONFDIR", "etc") + "/monkey"
    plugindir = gnu_dir("LIBDIR", "lib") + "/monkey/plugins"
    expect = [
        f"{prefix}/sbin/monkey", f"{prefix}/sbin/monkey-ctl", f"{prefix}/bin/monkey-passwd",
        f"{plugindir}/monkey-logger.so", f"{plugindir}/monkey-control.so",
        f"{plugindir}/monkey-access.so", f"{plugindir}/monkey-auth.so",
        f"{plugindir}/monkey-dirlisting.so",
        f"{prefix}/include/monkey/monkey.h", f"{prefix}/include/monkey/mk_plugin.h",
        f"{confdir}/monkey.conf", f"{confdir}/sites/default", f"{confdir}/plugins.load",
        f"{confdir}/monkey.mime", f"{confdir}/plugins/logger.conf",
        f"{prefix}/share/monkey/htdocs/index.html",
        f"{prefix}/share/man/man8/monkey.8", f"{prefix}/share/man/man5/monkey.conf.5",
        f"{prefix}/share/man/man8/monkey-ctl.8", f"{prefix}/share/man/man1/monkey-passwd.1",
        f"{prefix}/lib/systemd/system/monkey.service",
    ]
    # Duda (MK_DUDA, on by default): the plugin, the helper with its page, the headers,
    # the plugin's configuration.
    if with_duda():
        expect += [f"{plugindir}/monkey-duda.so", f"{prefix}/bin/duda",
                   f"{prefix}/share/man/man1/duda.1", f"{prefix}/include/duda/duda.h",
                   f"{prefix}/include/duda/duda_package.h", f"{confdir}/plugins/duda.conf"]
    missing = [p for p in expect if not inside(installed, p).exists()]
    assert not missing
    assert inside(installed, gnu_dir("LOCALSTATEDIR", "var") + "/log/monkey").is_dir()
    # The installed configuration names installed paths, never the tree's.
    conf = inside(installed, confdir)
    for f in conf.rglob("*"):
        if f.is_file():
            assert str(ROOT) not in f.read_text(), f
            assert "../" not in re.sub(r"#.*", "", f.read_text()), f
    assert f"DocumentRoot {prefix}/share/monkey/htdocs\n" in (conf / "sites/default").read_text()
    load = (conf / "plugins.load").read_text()
    assert f"    Load {plugindir}/monkey-logger.so" in load
    # duda.conf names the installed folders, which exist (ServicesRoot empty); plugins.load
    # has the plugin's line, commented.
    if with_duda():
        services, packages = duda_dirs()
        text = (conf / "plugins/duda.conf").read_text()
        assert f"\n    ServicesRoot {services}\n" in text
        assert f"\n    PackagesRoot {packages}\n" in text
        assert list(inside(installed, services).iterdir()) == []
        assert sorted(p.name for p in inside(installed, packages).glob("*.dpkg")) == sorted(
            p.name for p in (BUILD / "duda-packages").glob("*.dpkg"))
        assert len(re.findall(rf"^# +Load {re.escape(plugindir)}/monkey-duda\.so\s", load,
                              re.M)) == 1
    else:
        assert not (conf / "plugins/duda.conf").exists()
        assert "monkey-duda" not in load
    # The bundled conf/ keeps its relative paths (make run).
    assert "DocumentRoot ../htdocs\n" in (ROOT / "conf/sites/default").read_text()
    assert "    ServicesRoot ../build/duda-services\n" in (
        ROOT / "conf/plugins/duda.conf").read_text()


def relocate(dest, confdir, conf, edit=None):
    """A copy of the installed configuration in conf, edit(conf) applied to
    it, then every absolute path prefixed with DESTDIR (comments left alone);
    returns conf."""
    shutil.copytree(inside(dest, confdir), conf)
    if edit:
        edit(conf)
    for f in conf.rglob("*"):
        if not f.is_file() or f.suffix == ".mime":
            continue
        lines = []
        for line in f.read_text().splitlines(keepends=True):
            if not line.lstrip().startswith("#"):
                line = re.sub(r"(?<=\s)(/[^\s#]+)", lambda m: str(dest) + m.group(1), line)
            lines.append(line)
        f.write_text("".join(lines))
    return conf


@native_only
def test_installed_server_runs_relocated(installed, tmp_path):
    prefix = cache("CMAKE_INSTALL_PREFIX")
    confdir = gnu_dir("SYSCONFDIR", "etc") + "/monkey"
    conf = relocate(installed, confdir, tmp_path / "conf")
    sock = re.search(r"^\s*Socket (\S+)", (conf / "plugins/control.conf").read_text(), re.M)[1]
    logs = re.search(r"^\s*AccessLog (\S+)", (conf / "plugins/logger.conf").read_text(), re.M)[1]
    # Both are relocated already; the run directory is the one not installed.
    Path(sock).parent.mkdir(parents=True, exist_ok=True)
    assert logs.startswith(str(installed)) and Path(logs).parent.is_dir()
    port = free_port()
    err = open(installed / "stderr.log", "w")
    proc = subprocess.Popen([str(inside(installed, prefix + "/sbin/monkey")), "-c", str(conf),
                             "-p", f"127.0.0.1:{port}", "-w", "1"], stderr=err)
    try:
        assert wait_port(port, proc=proc), (installed / "stderr.log").read_text()
        c = Conn(port)
        r = c.request("GET", "/")
        c.close()
        assert r.status == 200
        assert r.body == inside(installed, prefix + "/share/monkey/htdocs/index.html").read_bytes()
        # The installed monkey-ctl answers through the installed control plugin.
        p = subprocess.run([str(inside(installed, prefix + "/sbin/monkey-ctl")), "-c", str(conf),
                            "status"], capture_output=True, text=True, timeout=10 * SLOW)
        assert p.returncode == 0, p.stderr
        assert f"pid          {proc.pid}" in p.stdout
        p = subprocess.run([str(inside(installed, prefix + "/sbin/monkey-ctl")), "-c", str(conf),
                            "stop"], capture_output=True, text=True, timeout=30 * SLOW)
        assert p.returncode == 0, p.stderr
        assert proc.wait(timeout=15 * SLOW) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    check_sanitizers((installed / "stderr.log").read_text())
    # The logger plugin wrote the access log where the configuration says.
    assert '"GET / HTTP/1.1" 200' in open(logs).read()


def enable_duda(conf):
    """What an administrator does to enable Duda: uncomment the plugin's line of plugins.load."""
    load = conf / "plugins.load"
    text, n = re.subn(r"^# (    Load \S+/monkey-duda\.so\s)", r"\1", load.read_text(), flags=re.M)
    assert n == 1
    load.write_text(text)


@native_only
@pytest.mark.skipif(STATIC or not with_duda(), reason="built without Duda")
def test_installed_duda_conf_serves_services(installed, tmp_path):
    """The installed duda.conf as it is: the duda line of plugins.load uncommented and a
    [WEB_SERVICE] section in the site make the installed server serve a service that the
    installed helper built into ServicesRoot, and one that loads packages from PackagesRoot."""
    prefix = cache("CMAKE_INSTALL_PREFIX")
    confdir = gnu_dir("SYSCONFDIR", "etc") + "/monkey"
    conf = relocate(installed, confdir, tmp_path / "conf", enable_duda)
    services, packages = (str(inside(installed, d)) for d in duda_dirs())
    assert f"\n    ServicesRoot {services}\n" in (conf / "plugins/duda.conf").read_text()
    monkey = str(inside(installed, prefix + "/sbin/monkey"))
    # The plugin loads with the shipped duda.conf and no service.
    p = subprocess.run([monkey, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
    # A service named in the site is looked for in ServicesRoot.
    names = ["hello"]
    # chat loads the websocket and broadcaster packages (built with zlib and libcrypto).
    if all((BUILD / "duda-packages" / f"{n}.dpkg").exists() for n in ("websocket", "broadcaster")):
        names.append("chat")
    with open(conf / "sites/default", "a") as f:
        for n in names:
            f.write(f"\n[WEB_SERVICE]\n    Name {n}\n"
                    f"    DocumentRoot {ROOT / 'examples' / n / 'html'}\n")
    p = subprocess.run([monkey, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 1
    assert f"{services}/hello.duda: No such file" in p.stderr
    # The installed helper, pointed into DESTDIR, builds them into ServicesRoot.
    lib = inside(installed, gnu_dir("LIBDIR", "lib") + "/monkey")
    env = {**os.environ, "DUDA_MONKEY": monkey, "DUDA_PLUGIN": str(lib / "plugins/monkey-duda.so"),
           "DUDA_INCLUDE": str(inside(installed, prefix + "/include")),
           "DUDA_PACKAGES": packages, "DUDA_PACKAGES_INCLUDE": str(inside(installed, prefix + "/include"))}
    for n in names:
        p = subprocess.run([str(inside(installed, prefix + "/bin/duda")), "build",
                            str(ROOT / "examples" / n), "-o", services], env=env,
                           capture_output=True, text=True, timeout=120 * SLOW)
        assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([monkey, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
    port = free_port()
    err = open(tmp_path / "stderr.log", "w")
    proc = subprocess.Popen([monkey, "-c", str(conf), "-p", f"127.0.0.1:{port}", "-w", "1"],
                            stderr=err)
    try:
        assert wait_port(port, proc=proc), (tmp_path / "stderr.log").read_text()
        c = Conn(port)
        r = c.request("GET", "/hello/hello")
        assert (r.status, r.body) == (200, b"Hello World!\n")
        if "chat" in names:
            r = c.request("GET", "/chat/")
            assert r.status == 200
            assert r.body == (ROOT / "examples/chat/html/index.html").read_bytes()
        c.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15 * SLOW) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    stderr = (tmp_path / "stderr.log").read_text()
    check_sanitizers(stderr)
    if "chat" in names:
        assert re.search(rf"package 'websocket' \S+ loaded from {re.escape(packages)}/websocket\.dpkg",
                         stderr), stderr


def test_uninstall_removes_the_manifest(tmp_path):
    dest = tmp_path / "dest"
    env = {"DESTDIR": str(dest), "PATH": "/usr/bin:/bin"}
    p = subprocess.run(["cmake", "--install", str(BUILD)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    manifest = (BUILD / "install_manifest.txt").read_text().split()
    assert len(manifest) > 20 and all((dest / m.lstrip("/")).exists() for m in manifest)
    p = subprocess.run(["cmake", "--build", str(BUILD), "--target", "uninstall"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    left = [f for f in dest.rglob("*") if not f.is_dir()]
    assert left == []


def test_unlisted_plugin_name_loads_from_the_plugin_dir(make_server):
    srv = make_server()
    srv.plugins = ["nosuch"]
    err = srv.run_expect_failure()
    plugindir = gnu_dir("LIBDIR", "lib") + "/monkey/plugins"
    assert f"{plugindir}/monkey-nosuch.so" in err
    assert "plugins.load:2:" in err


def options(text):
    """The short and long options a text names (-c, --confdir)."""
    text = text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fP", "")
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+|-[a-zA-Z])(?![\w-])", text))


@pytest.mark.parametrize("prog,page,helparg", [
    ("monkey", "monkey.8", "-h"),
    ("monkey-ctl", "monkey-ctl.8", "--help"),
    ("monkey-passwd", "monkey-passwd.1", "--help"),
])
def test_man_page_options_match_help(prog, page, helparg):
    p = subprocess.run([str(BUILD / "bin" / prog), helparg], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 0
    # Option lines of --help read "  -c, --confdir DIR   text".
    help_opts = {o for m in re.finditer(r"^\s+(-[a-zA-Z]), (--[a-z][a-z0-9-]*)", p.stdout, re.M)
                 for o in m.groups()}
    roff = (ROOT / "man" / page).read_text()
    opts_section = roff.split(".SH OPTIONS", 1)[1].split("\n.SH ", 1)[0]
    man_opts = {o for item in opts_section.split(".TP\n")[1:] for o in options(item.split("\n")[0])}
    assert help_opts and help_opts == man_opts


def test_duda_man_page_matches_usage():
    """duda(1)'s SYNOPSIS lists the helper's usage lines: the same commands and options."""
    tool = BUILD / "bin" / "duda"
    if not tool.exists():
        pytest.skip("the build has no Duda (MK_DUDA=OFF)")
    p = subprocess.run([str(tool), "-h"], capture_output=True, text=True, timeout=10 * SLOW)
    assert p.returncode == 2
    # "  duda build DIR [-o OUT]     build DIR/*.c into OUT/NAME.duda": the synopsis, then
    # what it does.
    usage = [line.strip() for line in p.stderr.splitlines() if line.strip()]
    roff = (ROOT / "man/duda.1").read_text()
    synopsis = roff.split(".SH SYNOPSIS\n", 1)[1].split("\n.SH ", 1)[0]
    lines = []
    for item in synopsis.split("\n.br\n"):
        words = []
        for req in item.splitlines():
            req = req.replace("\\-", "-")
            if req.startswith(".RB [ "):  # .RB [ -o  then .IR OUT ]  or  .RB [ -r ]
                opt = req[len(".RB [ "):]
                words.append("[" + opt.rstrip(" ]") + ("]" if opt.endswith("]") else ""))
            elif req.startswith(".IR "):
                words.append(req[len(".IR "):].replace(" ]", "]"))
            else:
                words.append(req.split(" ", 1)[1])
        lines.append(" ".join(words))
    assert usage and len(lines) == len(usage)
    assert all(u.startswith(m + " ") for m, u in zip(lines, usage)), (lines, usage)


def test_systemd_analyze_verify(installed):
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.skip("systemd-analyze is not installed")
    prefix = cache("CMAKE_INSTALL_PREFIX")
    unit = inside(installed, prefix + "/lib/systemd/system/monkey.service").read_text()
    # The binaries it names are those of DESTDIR, so verify can find them.
    unit = unit.replace(f"{prefix}/sbin/", str(inside(installed, prefix + "/sbin")) + "/")
    (installed / "monkey.service").write_text(unit)
    p = subprocess.run([tool, "verify", "--man=no", str(installed / "monkey.service")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr == ""
    sock = inside(installed, prefix + "/lib/systemd/system/monkey.socket")
    shutil.copy(sock, installed / "monkey.socket")
    p = subprocess.run([tool, "verify", "--man=no", str(installed / "monkey.socket")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
