"""The Debian packages (docs/packaging.md, "Debian packages"): `make deb-test`
builds them into $MK_DEB (build-deb/) and runs this file; without MK_DEB it
is skipped, so the ordinary integration suite does not build packages.

lintian reports no error and only the warnings docs/packaging.md explains;
the packages hold what they should (dpkg-deb -c) and nothing outside the
directories a package of Monkey owns; the server extracted from the package
(dpkg-deb -x) runs from that root with the packaged configuration relocated
into it, serves the default page and answers monkey-ctl; and a purge, done
as dpkg would (the package's file list, then what postrm purge removes),
leaves nothing behind of what the package and the running server wrote.

monkey-duda holds the duda plugin and every package of duda/packages, built
against Debian's libraries (dh_shlibdeps names them in Depends), and the
plugin's duda.conf, a configuration file naming the packaged folders: with
the plugin's line of plugins.load uncommented and a [WEB_SERVICE] section,
the extracted server serves services built into its ServicesRoot.
monkey-duda-dev holds the duda helper, the headers and the examples. The
helper extracted with the server and the plugin writes, builds and serves a
new service, and serves every example with the command its README gives for
the installed copy; every installed header compiles.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, Conn, free_port, serving
from installutil import enable_duda, prefix_paths, serve_default_page, serve_services

DEB = os.environ.get("MK_DEB")
pytestmark = pytest.mark.skipif(not DEB, reason="MK_DEB unset: run through make deb-test")

# Every path of the monkey package lies under one of these.
OWNED = ("etc/monkey/", "etc/logrotate.d/monkey", "lib/systemd/system/monkey.",
         "usr/sbin/monkey", "usr/bin/monkey-passwd", "usr/lib/{arch}/monkey/",
         "usr/lib/tmpfiles.d/monkey.conf",
         "usr/share/monkey/", "usr/share/doc/monkey/", "usr/share/man/man", "var/log/monkey/")


def deb(name):
    found = sorted(Path(ROOT / DEB).glob(f"{name}_*.deb"))
    assert len(found) == 1, found
    return found[0]


def multiarch():
    p = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                       text=True, check=True)
    return p.stdout.strip()


def contents(name):
    """The paths of a package (no leading ./), directories ending in /."""
    p = subprocess.run(["dpkg-deb", "-c", str(deb(name))], capture_output=True, text=True,
                       check=True)
    paths = []
    for line in p.stdout.splitlines():
        path = line.split(None, 5)[5].split(" -> ")[0]
        if path != "./":
            paths.append(path[2:])
    return paths


def control_file(name, member):
    p = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb(name))], capture_output=True,
                       check=True)
    t = subprocess.run(["tar", "xO", "./" + member], input=p.stdout, capture_output=True,
                       check=True)
    return t.stdout.decode()


def explained_lintian_tags():
    """The tags of the table under "### lintian" in docs/packaging.md."""
    doc = (ROOT / "docs/packaging.md").read_text()
    section = doc.split("### lintian", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M))


def test_lintian_no_errors_and_warnings_explained():
    changes = sorted(Path(ROOT / DEB).glob("monkey_*.changes"))
    assert len(changes) == 1, changes
    p = subprocess.run(["lintian", "--pedantic", "--fail-on", "none", str(changes[0])],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    tags = re.findall(r"^([EWIPX]): [^:]+: ([a-z0-9-]+)", p.stdout, re.M)
    assert [t for t in tags if t[0] == "E"] == [], p.stdout
    unexplained = {t for level, t in tags if level == "W"} - explained_lintian_tags()
    assert not unexplained, p.stdout


def test_monkey_package_contents():
    arch = multiarch()
    paths = contents("monkey")
    expect = [
        "usr/sbin/monkey", "usr/sbin/monkey-ctl", "usr/bin/monkey-passwd",
        f"usr/lib/{arch}/monkey/plugins/monkey-logger.so",
        f"usr/lib/{arch}/monkey/plugins/monkey-control.so",
        f"usr/lib/{arch}/monkey/plugins/monkey-auth.so",
        "lib/systemd/system/monkey.service", "lib/systemd/system/monkey.socket",
        "usr/share/man/man8/monkey.8.gz", "usr/share/man/man5/monkey.conf.5.gz",
        "usr/share/man/man8/monkey-ctl.8.gz", "usr/share/man/man1/monkey-passwd.1.gz",
        "etc/monkey/monkey.conf", "etc/monkey/sites/default", "etc/monkey/plugins.load",
        "etc/monkey/plugins/logger.conf", "etc/logrotate.d/monkey",
        "usr/share/monkey/htdocs/index.html", "usr/share/doc/monkey/copyright",
        "var/log/monkey/", "usr/lib/tmpfiles.d/monkey.conf",
    ]
    assert [p for p in expect if p not in paths] == []
    # Nothing outside what the package owns (the parents of those are
    # directories shared with every package: etc/, usr/lib/ ...).
    owned = tuple(o.format(arch=arch) for o in OWNED)
    stray = [p for p in paths if not p.endswith("/") and not p.startswith(owned)]
    assert stray == []
    assert not any(p.startswith("usr/include/") for p in paths)
    assert [p for p in paths if "duda" in p] == []  # monkey-duda, monkey-duda-dev
    # dh marks every file of /etc as a configuration file.
    conffiles = control_file("monkey", "conffiles").split()
    etc = ["/" + p for p in paths if p.startswith("etc/") and not p.endswith("/")]
    assert sorted(conffiles) == sorted(etc)


def test_monkey_built_against_its_compression_libraries(tmp_path):
    """The server links libbrotlienc and zlib (Compress: br and gzip, Build-Depends
    libbrotli-dev and zlib1g-dev), and dh_shlibdeps made their packages Depends of monkey."""
    root = extract(tmp_path, "monkey")
    sonames = needed(root / "usr/sbin/monkey")
    for lib in ("libbrotlienc.so.", "libz.so."):
        assert any(s.startswith(lib) for s in sonames), (lib, sonames)
    depends = relations("monkey", "Depends")
    for pkg in ("libbrotli1", "zlib1g"):
        assert pkg in depends, (pkg, depends)


def test_monkey_dev_package_contents():
    arch = multiarch()
    paths = contents("monkey-dev")
    files = [p for p in paths if not p.endswith("/")]
    for f in ("usr/include/monkey/monkey.h", "usr/include/monkey/mk_lib.h",
              "usr/include/monkey/mk_plugin.h", f"usr/lib/{arch}/libmonkey.so",
              f"usr/lib/{arch}/pkgconfig/monkey.pc"):
        assert f in files, f
    assert [p for p in files if not p.startswith((
        "usr/include/monkey/", "usr/share/doc/monkey-dev/", f"usr/lib/{arch}/libmonkey.so",
        f"usr/lib/{arch}/pkgconfig/monkey.pc"))] == []
    listing = subprocess.run(["dpkg-deb", "-c", str(deb("monkey-dev"))], capture_output=True,
                             text=True, check=True).stdout
    assert f"usr/lib/{arch}/libmonkey.so -> libmonkey.so.0" in listing
    depends = relations("monkey-dev", "Depends")
    assert depends["libmonkey0"] == "= " + field("libmonkey0", "Version")
    assert field("monkey-dev", "Architecture") != "all"  # the multiarch link and monkey.pc
    assert field("monkey-dev", "Multi-Arch") == "same"


def test_libmonkey0_package_contents():
    """The shared library alone, Debian's way: its SONAME file and link, a shlibs and a
    symbols file (every function of the library API, at the version that brought it) and
    the ldconfig trigger."""
    arch = multiarch()
    files = [p for p in contents("libmonkey0") if not p.endswith("/")]
    libs = [p for p in files if p.startswith(f"usr/lib/{arch}/libmonkey.so.")]
    assert len(libs) == 2 and f"usr/lib/{arch}/libmonkey.so.0" in libs, libs
    assert any(re.fullmatch(rf"usr/lib/{arch}/libmonkey\.so\.0\.\d+\.\d+", p) for p in libs), libs
    assert [p for p in files if p not in libs and not p.startswith(
        "usr/share/doc/libmonkey0/")] == []
    assert field("libmonkey0", "Multi-Arch") == "same"
    assert field("libmonkey0", "Section") == "libs"
    assert control_file("libmonkey0", "shlibs").split()[:3] == ["libmonkey", "0", "libmonkey0"]
    symbols = control_file("libmonkey0", "symbols")
    assert symbols.startswith("libmonkey.so.0 libmonkey0 #MINVER#\n")
    exported = set(re.findall(r"^ (mk_\w+)@MONKEY_0 ", symbols, re.M))
    headers = [ROOT / "include/monkey/monkey.h", ROOT / "include/monkey/mk_lib.h"]
    api = set()
    for h in headers:
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        api |= set(re.findall(r"^[a-z].*?\b(mk_\w+)\(", text, flags=re.M))
    assert exported == api, exported ^ api
    assert "activate-noawait ldconfig" in control_file("libmonkey0", "triggers")


def test_pkg_config_and_a_program_from_the_packages(tmp_path):
    """docs/library.md from the packages: with libmonkey0 and monkey-dev, pkg-config
    --cflags --libs monkey works (with no other module: monkey.pc requires none), a program
    built with it links libmonkey.so.0 and runs."""
    root = extract(tmp_path, "libmonkey0", "monkey-dev")
    arch = multiarch()
    pcdir = root / f"usr/lib/{arch}/pkgconfig"
    env = {**os.environ, "PKG_CONFIG_LIBDIR": str(pcdir)}
    p = subprocess.run(["pkg-config", "--cflags", "--libs", "monkey"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    flags = p.stdout.split()
    assert "-Wl,-rpath" not in p.stdout  # /usr/lib/<multiarch>: ldconfig's
    (tmp_path / "prog.c").write_text(
        "#include <stdio.h>\n#include <monkey/monkey.h>\n"
        "int main(void) { printf(\"%s\\n\", mk_server_version()); return 0; }\n")
    p = subprocess.run(["cc", "-o", str(tmp_path / "prog"), str(tmp_path / "prog.c"), *flags],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert needed(tmp_path / "prog")[0] == "libmonkey.so.0"
    # Extracted, not installed: the loader is told where.
    p = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "LD_LIBRARY_PATH": str(root / f"usr/lib/{arch}")})
    assert p.returncode == 0 and re.fullmatch(r"0\.\d+\.\d+", p.stdout.strip()), p


def test_monkey_package_relations_and_description():
    """Provides httpd (as nginx and lighttpd do), Recommends logrotate (its
    /etc/logrotate.d/monkey) and ssl-cert (the snakeoil pair of the site's TLS comment),
    and a description that names every plugin the package ships."""
    assert "httpd" in relations("monkey", "Provides")
    recommends = relations("monkey", "Recommends")
    assert "logrotate" in recommends and "ssl-cert" in recommends
    arch = multiarch()
    plugindir = f"usr/lib/{arch}/monkey/plugins/"
    plugins = sorted(p[len(plugindir) + len("monkey-"):-3] for p in contents("monkey")
                     if p.startswith(plugindir) and p.endswith(".so"))
    assert {"cgi", "fastcgi", "tls", "logger"} <= set(plugins)
    description = " ".join(field("monkey", "Description").split())
    missing = [p for p in plugins if not re.search(rf"\b{p}\b", description)]
    assert missing == [], description


def test_maintainer_scripts():
    postinst = control_file("monkey", "postinst")
    assert re.search(r"adduser --system --group --no-create-home --home /nonexistent\b[^\n]*\\\n"
                     r"[^\n]* monkey\n", postinst), postinst
    assert "chown monkey:adm /var/log/monkey" in postinst
    assert "deb-systemd-helper enable 'monkey.service'" in postinst
    # The runtime directory at once (tmpfiles.d), after the user exists.
    assert re.search(r"systemd-tmpfiles .*--create monkey\.conf", postinst), postinst
    assert postinst.index("adduser --system") < postinst.index("systemd-tmpfiles")
    # The snakeoil key's group, when ssl-cert is installed.
    assert "adduser --quiet monkey ssl-cert" in postinst
    assert "'monkey.socket'" not in postinst  # an example: not enabled
    postrm = control_file("monkey", "postrm")
    assert purge_paths(postrm) == ["/var/log/monkey", "/run/monkey"]
    for script in (postinst, postrm):
        subprocess.run(["sh", "-n"], input=script, text=True, check=True)


def test_logrotate_reopens_through_monkey_ctl(tmp_path):
    root = extract(tmp_path)
    text = (root / "etc/logrotate.d/monkey").read_text()
    assert text.startswith("/var/log/monkey/*.log {")
    assert "/usr/sbin/monkey-ctl reopen" in text
    assert "--signal=USR1 monkey.service" in text
    if shutil.which("logrotate"):
        subprocess.run(["logrotate", "--debug", str(root / "etc/logrotate.d/monkey")],
                       capture_output=True, check=True)


def test_packaged_configuration_runs_as_monkey(tmp_path):
    root = extract(tmp_path)
    conf = root / "etc/monkey"
    arch = multiarch()
    assert re.search(r"^    User monkey$", (conf / "monkey.conf").read_text(), re.M)
    assert re.search(r"^    Listen 80$", (conf / "monkey.conf").read_text(), re.M)
    site = (conf / "sites/default").read_text()
    assert "    DocumentRoot /usr/share/monkey/htdocs\n" in site
    assert "Relative to the configuration directory" not in site and "build/" not in site
    assert ("#     Certificate /etc/ssl/certs/ssl-cert-snakeoil.pem\n"
            "#     CertificateKey /etc/ssl/private/ssl-cert-snakeoil.key\n") in site
    tmpfiles = (root / "usr/lib/tmpfiles.d/monkey.conf").read_text()
    assert [line for line in tmpfiles.splitlines() if line and line[0] != "#"] == [
        "d /run/monkey 0755 monkey monkey -"]
    load = (conf / "plugins.load").read_text()
    for p in ("logger", "control"):
        assert re.search(rf"^    Load /usr/lib/{arch}/monkey/plugins/monkey-{p}\.so\s", load, re.M)
    assert "    Socket /run/monkey/monkey.sock\n" in (conf / "plugins/control.conf").read_text()
    assert "    AccessLog /var/log/monkey/access.log\n" in (conf / "plugins/logger.conf").read_text()
    # The duda plugin (monkey-duda) is named, commented out.
    assert re.search(rf"^#     Load /usr/lib/{arch}/monkey/plugins/monkey-duda\.so\s", load, re.M)
    unit = (root / "lib/systemd/system/monkey.service").read_text()
    assert "\nUser=monkey\n" in unit
    assert "\nExecStart=/usr/sbin/monkey -c /etc/monkey\n" in unit
    assert "\nReadWritePaths=/var/log/monkey\n" in unit


def extract(tmp_path, *names):
    """The packages (default: monkey) extracted into one temporary root."""
    root = tmp_path / "root"
    for name in names or ("monkey",):
        subprocess.run(["dpkg-deb", "-x", str(deb(name)), str(root)], check=True)
    return root


def relocate(root, edit=None):
    """The packaged configuration, edit(conf) applied to it, with every
    absolute path prefixed by root (comments left alone). `User monkey` is
    dropped: the test may run as root on a system without that user, and the
    server would switch to a user who cannot read the temporary root."""
    conf = root / "etc/monkey"
    if edit:
        edit(conf)
    prefix_paths(conf, root, drop=("User monkey",))
    (root / "run/monkey").mkdir(parents=True)
    return conf


def serve(root):
    """Start the extracted server, fetch /, ask monkey-ctl, stop it."""
    serve_default_page(str(root / "usr/sbin/monkey"), str(root / "usr/sbin/monkey-ctl"),
                       relocate(root), root / "usr/share/monkey/htdocs/index.html",
                       root.parent / "stderr.log")


def test_extracted_server_serves_the_default_page(tmp_path):
    root = extract(tmp_path)
    serve(root)
    assert '"GET / HTTP/1.1" 200' in (root / "var/log/monkey/access.log").read_text()


def purge_paths(postrm):
    """The paths that postrm removes on purge."""
    m = re.search(r'if \[ "\$1" = purge \]; then\n\s*rm -rf ([^\n]+)\n', postrm)
    assert m, postrm
    return m[1].split()


def test_purge_leaves_nothing(tmp_path):
    """Run the extracted server, then remove what dpkg removes on purge: every
    path of the package's file list (files, then directories left empty) and
    what postrm purge deletes. The root must end up empty: the server wrote
    nothing (logs, control socket) outside those."""
    root = extract(tmp_path)
    serve(root)
    assert (root / "var/log/monkey/access.log").exists()
    paths = contents("monkey")
    for p in paths:
        if not p.endswith("/"):
            (root / p).unlink()
    for p in purge_paths(control_file("monkey", "postrm")):
        shutil.rmtree(root / p.lstrip("/"), ignore_errors=True)
    for p in sorted((p for p in paths if p.endswith("/")), key=len, reverse=True):
        d = root / p
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    # run/ is made by the test for the control socket (systemd's
    # RuntimeDirectory on a real system).
    if (root / "run").is_dir() and not any((root / "run").iterdir()):
        (root / "run").rmdir()
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == []


# ---- monkey-duda and monkey-duda-dev ------------------------------------------------------------

def tree_duda_packages():
    """The packages of duda/packages: all are built (the Build-Depends give each its library)."""
    return sorted(p.parent.name for p in (ROOT / "duda/packages").glob("*/package.cmake"))


def tree_duda_examples():
    """The examples that are Duda services (embed and fastcgi_responder are not)."""
    return sorted(d.name for d in (ROOT / "examples").iterdir()
                  if (d / f"{d.name}.c").is_file()
                  and "#include <duda/duda.h>" in (d / f"{d.name}.c").read_text())


def field(name, key):
    p = subprocess.run(["dpkg-deb", "-f", str(deb(name)), key], capture_output=True, text=True,
                       check=True)
    return p.stdout.strip()


def relations(name, key):
    """A relation field as {package: version constraint or ""}; alternatives kept as "a | b"."""
    out = {}
    for rel in field(name, key).split(","):
        rel = rel.strip()
        if not rel:
            continue
        m = re.fullmatch(r"([^\s(]+)(?: \(([^)]*)\))?", rel)
        out[m[1] if m else rel] = (m[2] or "") if m else ""
    return out


def needed(path):
    """The DT_NEEDED sonames of an ELF file."""
    p = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


def owner(soname):
    """The Debian package that holds the system library soname (as dh_shlibdeps finds it)."""
    arch = multiarch()
    p = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True)
    paths = [m[1] for m in re.finditer(rf"^\s+{re.escape(soname)} \([^)]*\) => (\S+)$",
                                       p.stdout, re.M) if arch in m[1]]
    assert paths, soname
    path = paths[0]
    for cand in (path, os.path.realpath(path), "/usr" + path, path.removeprefix("/usr")):
        q = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
        if q.returncode == 0:
            return q.stdout.split(":", 1)[0]
    raise AssertionError(f"no package holds {path}")


def test_monkey_duda_package_contents():
    arch = multiarch()
    files = [p for p in contents("monkey-duda") if not p.endswith("/")]
    pkgdir = f"usr/lib/{arch}/monkey/duda-packages/"
    assert f"usr/lib/{arch}/monkey/plugins/monkey-duda.so" in files
    assert sorted(p[len(pkgdir):-5] for p in files if p.startswith(pkgdir)) == tree_duda_packages()
    assert [p for p in files if p.startswith(pkgdir) and not p.endswith(".dpkg")] == []
    for doc in ("copyright", "README.Debian", "duda.md.gz", "changelog.gz"):
        assert f"usr/share/doc/monkey-duda/{doc}" in files
    assert "etc/monkey/plugins/duda.conf" in files
    assert "var/lib/monkey/duda/services/" in contents("monkey-duda")
    owned = (f"usr/lib/{arch}/monkey/plugins/monkey-duda.so", pkgdir, "usr/share/doc/monkey-duda/",
             "etc/monkey/plugins/duda.conf")
    assert [p for p in files if not p.startswith(owned)] == []
    # duda.conf is a configuration file: dpkg keeps the administrator's changes.
    assert control_file("monkey-duda", "conffiles").split() == ["/etc/monkey/plugins/duda.conf"]
    # No maintainer script: removing the package leaves the deployed services alone.
    members = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb("monkey-duda"))],
                             capture_output=True, check=True).stdout
    names = subprocess.run(["tar", "t"], input=members, capture_output=True, check=True)
    assert not re.search(rb"(pre|post)(inst|rm)", names.stdout), names.stdout
    # The plugin is loaded by the server of the same build: the very version.
    assert relations("monkey-duda", "Depends")["monkey"] == "= " + field("monkey", "Version")


def test_monkey_duda_built_against_debian_libraries(tmp_path):
    """Each package links the system library it wraps, and dh_shlibdeps turned every library
    the plugin and the packages need into a Depends of monkey-duda."""
    root = extract(tmp_path, "monkey-duda")
    pkgdir = root / f"usr/lib/{multiarch()}/monkey/duda-packages"
    wraps = {"json": "libcjson.so.", "sqlite": "libsqlite3.so.", "redis": "libhiredis.so.",
             "memcache": "libmemcached.so.", "websocket": "libz.so.", "base64": "libcrypto.so.",
             "sha1": "libcrypto.so.", "sha256": "libcrypto.so."}
    libs = set(needed(root / f"usr/lib/{multiarch()}/monkey/plugins/monkey-duda.so"))
    for name in tree_duda_packages():
        sonames = needed(pkgdir / f"{name}.dpkg")
        if name in wraps:
            assert any(s.startswith(wraps[name]) for s in sonames), (name, sonames)
        libs |= set(sonames)
    depends = relations("monkey-duda", "Depends")
    missing = {s: owner(s) for s in libs if owner(s) not in depends}
    assert missing == {}, depends
    for lib in ("libcjson", "libsqlite3", "libhiredis", "libmemcached", "libssl3", "zlib1g"):
        assert any(d.startswith(lib) for d in depends), (lib, depends)


def test_monkey_duda_dev_package_contents():
    paths = contents("monkey-duda-dev")
    files = [p for p in paths if not p.endswith("/")]
    for f in ("usr/bin/duda", "usr/include/duda/duda.h", "usr/include/duda/duda_package.h",
              "usr/share/man/man1/duda.1.gz"):
        assert f in files, f
    headers = sorted(p[len("usr/include/duda/packages/"):-2] for p in files
                     if p.startswith("usr/include/duda/packages/"))
    assert headers == tree_duda_packages()
    # Its documentation folder is monkey-duda's, where the examples go, as in the tree and
    # uncompressed, so that a copy builds.
    assert "usr/share/doc/monkey-duda-dev -> monkey-duda" in subprocess.run(
        ["dpkg-deb", "-c", str(deb("monkey-duda-dev"))], capture_output=True, text=True,
        check=True).stdout
    ex = "usr/share/doc/monkey-duda/examples/"
    shipped = sorted(p[len(ex):] for p in files if p.startswith(ex))
    tree = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", *(
        f"examples/{e}" for e in tree_duda_examples())], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout.split()
    assert shipped == sorted(t[len("examples/"):] for t in tree)
    owned = ("usr/bin/duda", "usr/include/duda/", "usr/share/man/man1/duda.1.gz", ex,
             "usr/share/doc/monkey-duda-dev")
    assert [p for p in files if not p.startswith(owned)] == []
    depends = relations("monkey-duda-dev", "Depends")
    assert depends["monkey-duda"] == "= " + field("monkey-duda", "Version")
    assert "libhiredis-dev" in depends  # <duda/packages/redis.h> includes <hiredis/hiredis.h>
    assert "gcc | c-compiler" in relations("monkey-duda-dev", "Recommends")


def duda_env(root):
    """The extracted helper pointed at the extracted server, plugin, headers and packages."""
    lib = root / f"usr/lib/{multiarch()}/monkey"
    return {**os.environ, "DUDA_MONKEY": str(root / "usr/sbin/monkey"),
            "DUDA_PLUGIN": str(lib / "plugins/monkey-duda.so"),
            "DUDA_INCLUDE": str(root / "usr/include"),
            "DUDA_PACKAGES": str(lib / "duda-packages"),
            "DUDA_PACKAGES_INCLUDE": str(root / "usr/include")}


def test_helper_names_the_packaged_files(tmp_path):
    """The installed paths compiled into the helper are files of the packages."""
    root = extract(tmp_path, "monkey", "monkey-duda", "monkey-duda-dev")
    text = (root / "usr/bin/duda").read_text()
    defaults = dict(re.findall(r"^([A-Z_]+)=\$\{DUDA_[A-Z_]+:-'([^']*)'\}$", text, re.M))
    assert sorted(defaults) == ["INCLUDE", "MONKEY", "PACKAGES", "PACKAGES_INCLUDE", "PLUGIN"]
    assert defaults["MONKEY"] == "/usr/sbin/monkey"
    assert (root / defaults["PLUGIN"].lstrip("/")).is_file()
    assert (root / defaults["INCLUDE"].lstrip("/") / "duda/duda.h").is_file()
    assert (root / defaults["PACKAGES_INCLUDE"].lstrip("/") / "duda/packages/json.h").is_file()
    assert (root / defaults["PACKAGES"].lstrip("/") / "json.dpkg").is_file()
    assert "BUILD_CFLAGS=''\n" in text


def test_installed_headers_compile(tmp_path):
    """Every header of monkey-duda-dev compiles on its own with the extracted root's include
    folder and the system's (the -dev packages of Depends)."""
    root = extract(tmp_path, "monkey-duda-dev")
    inc = root / "usr/include"
    headers = sorted(str(h.relative_to(inc)) for h in (inc / "duda").rglob("*.h"))
    assert len(headers) == 2 + len(tree_duda_packages())
    for h in headers:
        p = subprocess.run(["cc", "-fsyntax-only", "-Wall", "-Werror", "-I", str(inc), "-x", "c",
                            "-"], input=f"#include <{h}>\n", capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, (h, p.stderr)


def test_packaged_duda_conf_serves_services(tmp_path):
    """The packaged duda.conf as it is, the duda line of plugins.load uncommented and
    [WEB_SERVICE] sections added: the extracted server serves services that the extracted
    helper built into ServicesRoot, one of them on packages of PackagesRoot."""
    root = extract(tmp_path, "monkey", "monkey-duda", "monkey-duda-dev")
    arch = multiarch()
    text = (root / "etc/monkey/plugins/duda.conf").read_text()
    assert "\n    ServicesRoot /var/lib/monkey/duda/services\n" in text
    assert f"\n    PackagesRoot /usr/lib/{arch}/monkey/duda-packages\n" in text
    services = root / "var/lib/monkey/duda/services"
    assert services.is_dir() and list(services.iterdir()) == []

    conf = relocate(root, enable_duda)
    ex = root / "usr/share/doc/monkey-duda/examples"
    serve_services(str(root / "usr/sbin/monkey"), str(root / "usr/bin/duda"), duda_env(root), conf,
                   services, ex, ["hello", "chat"], tmp_path / "stderr.log")
    pkgs = root / f"usr/lib/{arch}/monkey/duda-packages"
    assert f"package 'websocket' 1.0 loaded from {pkgs}/websocket.dpkg" in (
        tmp_path / "stderr.log").read_text()


def serve_service(root, work, name, check, args=None):
    """duda -w work/name (or duda -w ARGS, in work) with the extracted helper; check(port)
    while it serves."""
    port = free_port()
    log = work / f"{name}.log"
    with serving([str(root / "usr/bin/duda"), "-w", *(args or [name]), "-p", str(port)], port,
                 log, timeout=60, cwd=work, env=duda_env(root)):
        check(port)
    assert f"duda: serving {name} on http://localhost:{port}/{name}/" in log.read_text()


def snapshot(folder):
    """Every path under folder with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")}


def test_installed_example_commands(tmp_path):
    """Each packaged example's README gives the command that runs it where it is installed
    (duda -w on the read-only folder with -o, or on a copy for the services that write into
    their own folders): run as written, with the paths of the extracted root, it serves the
    example, and the packaged folder is left as it was."""
    root = extract(tmp_path, "monkey", "monkey-duda", "monkey-duda-dev")
    doc = "/usr/share/doc/monkey-duda/examples"
    ex = root / doc.lstrip("/")
    before = snapshot(ex)
    work = tmp_path / "work"
    work.mkdir()
    for name in tree_duda_examples():
        readme = (ex / name / "README.md").read_text()
        m = re.search(rf"^(?:# installed: )?(cp -r {doc}/{name} \. && )?duda -w (\S+)(?: -o (\S+))?$",
                      readme, re.M)
        assert m, f"{name}: no installed command in its README"
        if m[1]:
            shutil.copytree(ex / name, work / name)
            assert (m[2], m[3]) == (name, None), m[0]
            args = [name]
        else:
            assert (m[2], m[3]) == (f"{doc}/{name}", f"{name}-build"), m[0]
            args = [str(ex / name), "-o", m[3]]

        def check(port, name=name):
            c = Conn(port)
            r = c.request("GET", f"/{name}/")
            c.close()
            assert r.status < 500, (name, r.status)

        serve_service(root, work, name, check, args)
    assert snapshot(ex) == before


def test_extracted_helper_builds_and_serves_a_new_service(tmp_path):
    root = extract(tmp_path, "monkey", "monkey-duda", "monkey-duda-dev")
    work = tmp_path / "work"
    work.mkdir()
    duda = [str(root / "usr/bin/duda")]
    for args in (["new", "hello2"], ["build", "hello2"]):
        p = subprocess.run(duda + args, cwd=work, env=duda_env(root), capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
    assert (work / "hello2/build/hello2.duda").read_bytes()[:4] == b"\x7fELF"

    def check(port):
        c = Conn(port)
        r = c.request("GET", "/hello2/hello")
        assert (r.status, r.body) == (200, b"Hello World!\n")
        r = c.request("GET", "/hello2/index.html")
        assert r.status == 200 and b"The static files of hello2" in r.body
        c.close()

    serve_service(root, work, "hello2", check)


def test_extracted_helper_serves_the_json_api_example(tmp_path):
    """The packaged example, copied out of the documentation, on the packaged json and sqlite
    packages."""
    root = extract(tmp_path, "monkey", "monkey-duda", "monkey-duda-dev")
    work = tmp_path / "work"
    shutil.copytree(root / "usr/share/doc/monkey-duda/examples/json_api", work / "json_api")

    def check(port):
        c = Conn(port)
        r = c.request("POST", "/json_api/notes", headers={"Content-Type": "application/json"},
                      body=b'{"title": "milk", "body": "2 l"}')
        assert r.status == 201, r
        note = json.loads(r.body)
        assert (note["id"], note["title"], note["body"]) == (1, "milk", "2 l")
        r = c.request("GET", "/json_api/notes/1")
        assert r.status == 200 and json.loads(r.body)["title"] == "milk"
        r = c.request("GET", "/json_api/notes/2")
        assert r.status == 404
        c.close()

    serve_service(root, work, "json_api", check)
    assert (work / "json_api/data/notes.db").is_file()
    assert "package 'sqlite' 1.0 loaded from " + str(root) in (work / "json_api.log").read_text()
