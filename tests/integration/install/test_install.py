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
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, check_sanitizers, free_port
from installutil import (cache, cmake_install, enable_duda, gnu_dir, inside, prefix_paths,
                         serve_default_page, serve_services)

pytestmark = pytest.mark.skipif(STATIC, reason="the static build builds only the server")
# The installed programs of a cross build run only under the emulator.
native_only = pytest.mark.skipif(EMULATED, reason="cross build: installed programs need qemu")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """DESTDIR with the build installed into it."""
    dest = tmp_path_factory.mktemp("destdir")
    cmake_install(dest)
    return dest


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
    prefix_paths(conf, dest)
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
    serve_default_page(str(inside(installed, prefix + "/sbin/monkey")),
                       str(inside(installed, prefix + "/sbin/monkey-ctl")), conf,
                       inside(installed, prefix + "/share/monkey/htdocs/index.html"),
                       installed / "stderr.log")
    check_sanitizers((installed / "stderr.log").read_text())
    # The logger plugin wrote the access log where the configuration says.
    assert '"GET / HTTP/1.1" 200' in open(logs).read()


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
    # The installed helper, pointed into DESTDIR.
    lib = inside(installed, gnu_dir("LIBDIR", "lib") + "/monkey")
    env = {**os.environ, "DUDA_MONKEY": monkey, "DUDA_PLUGIN": str(lib / "plugins/monkey-duda.so"),
           "DUDA_INCLUDE": str(inside(installed, prefix + "/include")),
           "DUDA_PACKAGES": packages, "DUDA_PACKAGES_INCLUDE": str(inside(installed, prefix + "/include"))}
    # chat loads the websocket and broadcaster packages (built with zlib and libcrypto).
    names = ["hello"]
    if all((BUILD / "duda-packages" / f"{n}.dpkg").exists() for n in ("websocket", "broadcaster")):
        names.append("chat")
    serve_services(monkey, str(inside(installed, prefix + "/bin/duda")), env, conf, services,
                   ROOT / "examples", names, tmp_path / "stderr.log")
    stderr = (tmp_path / "stderr.log").read_text()
    check_sanitizers(stderr)
    if "chat" in names:
        assert re.search(rf"package 'websocket' \S+ loaded from {re.escape(packages)}/websocket\.dpkg",
                         stderr), stderr


def test_uninstall_removes_the_manifest(tmp_path):
    dest = tmp_path / "dest"
    env = {"DESTDIR": str(dest), "PATH": "/usr/bin:/bin"}
    cmake_install(dest)
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
            elif req.startswith(".RI "):  # .RI [ ADDR :] PORT ]: the pieces run together
                words.append("".join(req[len(".RI "):].split()))
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


# ---- the prefix, the unit's user and its directories -----------------------------------------

def test_paths_follow_a_new_prefix(tmp_path):
    """A build configured without a prefix, then with -DCMAKE_INSTALL_PREFIX=/usr (what
    `make install PREFIX=/usr` does): nothing it installs or generates names /usr/local
    any more (the systemd unit directory was cached from the first configure)."""
    build = tmp_path / "build"
    for args in ([], ["-DCMAKE_INSTALL_PREFIX=/usr"]):
        p = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DMK_TESTS=OFF", *args],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    text = (build / "CMakeCache.txt").read_text()
    assert "MK_SYSTEMD_UNITDIR:PATH=/usr/lib/systemd/system\n" in text
    assert "MK_SYSUSERSDIR:PATH=/usr/lib/sysusers.d\n" in text
    assert "MK_TMPFILESDIR:PATH=/usr/lib/tmpfiles.d\n" in text
    stale = []
    for f in build.rglob("*"):
        if f.is_file() and (f.name == "cmake_install.cmake" or f.parent.name in (
                "systemd", "sysusers.d", "tmpfiles.d", "install-bin", "pkgconfig")
                or "install-conf" in f.parts):
            for line in f.read_text(errors="replace").splitlines():
                # MK_LD_DIRS: the dynamic linker's directories, /usr/local/lib among them
                if "/usr/local" in line and "MK_LD_DIRS" not in line:
                    stale.append(f"{f.relative_to(build)}: {line.strip()}")
    assert stale == []
    unit = (build / "systemd/monkey.service").read_text()
    assert "\nExecStart=/usr/sbin/monkey -c /etc/monkey\n" in unit
    # A directory given stays.
    p = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_INSTALL_PREFIX=/opt/m",
                        "-DMK_SYSTEMD_UNITDIR=/etc/systemd/system"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    text = (build / "CMakeCache.txt").read_text()
    assert "MK_SYSTEMD_UNITDIR:PATH=/etc/systemd/system\n" in text
    assert "MK_TMPFILESDIR:PATH=/opt/m/lib/tmpfiles.d\n" in text


def unit_user(installed):
    unit = inside(installed, cache("MK_SYSTEMD_UNITDIR") + "/monkey.service").read_text()
    return re.search(r"^User=(\S+)$", unit, re.M)[1]


def runtime_dirs(installed):
    """The control socket's and the logs' directories of the installed configuration."""
    conf = inside(installed, gnu_dir("SYSCONFDIR", "etc") + "/monkey")
    sock = re.search(r"^\s*Socket (\S+)", (conf / "plugins/control.conf").read_text(), re.M)[1]
    logs = re.search(r"^\s*AccessLog (\S+)", (conf / "plugins/logger.conf").read_text(), re.M)[1]
    run = str(Path(sock).parent)
    return re.sub(r"^/var/run/", "/run/", run), str(Path(logs).parent)


def test_installed_sysusers_and_tmpfiles_entries(installed, tmp_path):
    """The unit runs as User=monkey: the installation has the sysusers.d entry that makes
    that user and the tmpfiles.d entry that makes the control socket's and the logs'
    directories its own; systemd-sysusers and systemd-tmpfiles accept them (--root)."""
    user = unit_user(installed)
    sysusers = inside(installed, cache("MK_SYSUSERSDIR") + "/monkey.conf")
    tmpfiles = inside(installed, cache("MK_TMPFILESDIR") + "/monkey.conf")
    entries = [line for line in sysusers.read_text().splitlines() if line and line[0] != "#"]
    assert entries == [f'u {user} - "Monkey HTTP Server" /nonexistent']
    run, logs = runtime_dirs(installed)
    entries = [line for line in tmpfiles.read_text().splitlines() if line and line[0] != "#"]
    assert entries == [f"d {run} 0755 {user} {user} -", f"d {logs} 0755 {user} {user} -"]

    tool = shutil.which("systemd-sysusers")
    if not tool or not shutil.which("systemd-tmpfiles"):
        pytest.skip("systemd-sysusers or systemd-tmpfiles is not installed")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    p = subprocess.run([tool, f"--root={root}", str(sysusers)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    passwd = (root / "etc/passwd").read_text()
    m = re.search(rf"^{user}:x:(\d+):(\d+):Monkey HTTP Server:/nonexistent:(\S+)$", passwd, re.M)
    assert m, passwd
    assert m[3].endswith("nologin")
    p = subprocess.run(["systemd-tmpfiles", f"--root={root}", "--create", str(tmpfiles)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for d in (run, logs):
        st = os.stat(inside(root, d))
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (int(m[1]), int(m[2]), 0o755), d


@native_only
@pytest.mark.skipif(os.geteuid() != 0, reason="the server makes its runtime directory as root")
def test_installed_server_makes_its_runtime_directory(tmp_path):
    """Right after `make install`, outside systemd (no RuntimeDirectory=, no tmpfiles run):
    `monkey -t` accepts the configuration although the control socket's directory does not
    exist, and the server started as root makes it, owned by its User, answers monkey-ctl
    there and removes its socket when it stops (as that user)."""
    import pwd
    import tempfile
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to drop to")
    # A root that 'nobody' may walk through (pytest's folders are root's alone).
    dest = Path(tempfile.mkdtemp(prefix="mk-rundir-", dir="/tmp"))
    try:
        dest.chmod(0o755)
        cmake_install(dest)
        prefix = cache("CMAKE_INSTALL_PREFIX")
        conf = relocate(dest, gnu_dir("SYSCONFDIR", "etc") + "/monkey", dest / "conf")
        text = (conf / "monkey.conf").read_text()
        text = re.sub(r"^\s*#?\s*User \S+\n", "", text, flags=re.M)
        (conf / "monkey.conf").write_text(text.replace("[SERVER]\n", "[SERVER]\n    User nobody\n", 1))
        sock = Path(re.search(r"^\s*Socket (\S+)", (conf / "plugins/control.conf").read_text(),
                              re.M)[1])
        run = sock.parent
        run.parent.mkdir(parents=True, exist_ok=True)  # /run, on a real system
        assert not run.exists()
        monkey = str(inside(dest, prefix + "/sbin/monkey"))
        p = subprocess.run([monkey, "-t", "-c", str(conf)], capture_output=True, text=True,
                           timeout=30 * SLOW)
        assert p.returncode == 0, p.stdout + p.stderr
        assert not run.exists()  # checking creates nothing
        serve_default_page(monkey, str(inside(dest, prefix + "/sbin/monkey-ctl")), conf,
                           inside(dest, prefix + "/share/monkey/htdocs/index.html"),
                           dest / "stderr.log")
        st = run.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (nobody.pw_uid, nobody.pw_gid, 0o755)
        assert not sock.exists()  # removed at stop by 'nobody'
        stderr = (dest / "stderr.log").read_text()
        check_sanitizers(stderr)
        assert f"control: created the socket's directory {run} (owner nobody)" in stderr
    finally:
        shutil.rmtree(dest, ignore_errors=True)


@native_only
def test_installed_site_comments_name_what_is_installed(installed, tmp_path):
    """The installed sites/default says what the installed files are: no note that its
    absolute DocumentRoot is relative, no build/ certificate; its commented [TLS] section
    names ssl-cert's snakeoil pair, and uncommenting it with the tls plugin's Load line and
    the Listen ... tls line of monkey.conf, as the comment says, gives a valid configuration."""
    if not (BUILD / "plugins/monkey-tls.so").exists():
        pytest.skip("built without OpenSSL (MK_TLS off)")
    confdir = gnu_dir("SYSCONFDIR", "etc") + "/monkey"
    site = (inside(installed, confdir) / "sites/default").read_text()
    assert "Relative to the configuration directory" not in site
    assert "build/" not in site and "../" not in site
    assert ("# [TLS]\n#     Certificate /etc/ssl/certs/ssl-cert-snakeoil.pem\n"
            "#     CertificateKey /etc/ssl/private/ssl-cert-snakeoil.key\n") in site

    def enable_tls(conf):
        text = (conf / "sites/default").read_text()
        (conf / "sites/default").write_text(re.sub(r"^# (\[TLS\]|    Certificate)", r"\1", text,
                                                   flags=re.M))
        load = (conf / "plugins.load").read_text()
        load, n = re.subn(r"^# (    Load \S+/monkey-tls\.so\s)", r"\1", load, flags=re.M)
        assert n == 1
        (conf / "plugins.load").write_text(load)
        main = (conf / "monkey.conf").read_text()
        main, n = re.subn(r"^    # Listen 443 tls$", f"    Listen 127.0.0.1:{free_port()} tls", main, flags=re.M)
        assert n == 1
        (conf / "monkey.conf").write_text(main)

    conf = relocate(installed, confdir, tmp_path / "conf", enable_tls)
    # The snakeoil pair, as ssl-cert makes it, under DESTDIR.
    cert = inside(installed, "/etc/ssl/certs/ssl-cert-snakeoil.pem")
    key = inside(installed, "/etc/ssl/private/ssl-cert-snakeoil.key")
    cert.parent.mkdir(parents=True, exist_ok=True)
    key.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   capture_output=True, check=True, timeout=60)
    p = subprocess.run([str(inside(installed, cache("CMAKE_INSTALL_PREFIX") + "/sbin/monkey")),
                        "-t", "-c", str(conf)], capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
