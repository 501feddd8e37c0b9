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
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, Conn, free_port, wait_port

DEB = os.environ.get("MK_DEB")
pytestmark = pytest.mark.skipif(not DEB, reason="MK_DEB unset: run through make deb-test")

# Every path of the monkey package lies under one of these.
OWNED = ("etc/monkey/", "etc/logrotate.d/monkey", "lib/systemd/system/monkey.",
         "usr/sbin/monkey", "usr/bin/monkey-passwd", "usr/lib/{arch}/monkey/",
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
        "var/log/monkey/",
    ]
    assert [p for p in expect if p not in paths] == []
    # Nothing outside what the package owns (the parents of those are
    # directories shared with every package: etc/, usr/lib/ ...).
    owned = tuple(o.format(arch=arch) for o in OWNED)
    stray = [p for p in paths if not p.endswith("/") and not p.startswith(owned)]
    assert stray == []
    assert not any(p.startswith("usr/include/") for p in paths)
    # dh marks every file of /etc as a configuration file.
    conffiles = control_file("monkey", "conffiles").split()
    etc = ["/" + p for p in paths if p.startswith("etc/") and not p.endswith("/")]
    assert sorted(conffiles) == sorted(etc)


def test_monkey_dev_package_contents():
    paths = contents("monkey-dev")
    files = [p for p in paths if not p.endswith("/")]
    assert "usr/include/monkey/monkey.h" in files
    assert "usr/include/monkey/mk_plugin.h" in files
    assert [p for p in files if not p.startswith(("usr/include/monkey/",
                                                  "usr/share/doc/monkey-dev/"))] == []


def test_maintainer_scripts():
    postinst = control_file("monkey", "postinst")
    assert re.search(r"adduser --system --group --no-create-home --home /nonexistent\b[^\n]*\\\n"
                     r"[^\n]* monkey\n", postinst), postinst
    assert "chown monkey:adm /var/log/monkey" in postinst
    assert "deb-systemd-helper enable 'monkey.service'" in postinst
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
    assert "    DocumentRoot /usr/share/monkey/htdocs\n" in (conf / "sites/default").read_text()
    load = (conf / "plugins.load").read_text()
    for p in ("logger", "control"):
        assert re.search(rf"^    Load /usr/lib/{arch}/monkey/plugins/monkey-{p}\.so\s", load, re.M)
    assert "    Socket /run/monkey/monkey.sock\n" in (conf / "plugins/control.conf").read_text()
    assert "    AccessLog /var/log/monkey/access.log\n" in (conf / "plugins/logger.conf").read_text()
    unit = (root / "lib/systemd/system/monkey.service").read_text()
    assert "\nUser=monkey\n" in unit
    assert "\nExecStart=/usr/sbin/monkey -c /etc/monkey\n" in unit
    assert "\nReadWritePaths=/var/log/monkey\n" in unit


def extract(tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb("monkey")), str(root)], check=True)
    return root


def relocate(root):
    """The packaged configuration with every absolute path prefixed by root
    (comments left alone). `User monkey` is dropped: the test may run as root
    on a system without that user, and the server would switch to a user who
    cannot read the temporary root."""
    conf = root / "etc/monkey"
    for f in conf.rglob("*"):
        if not f.is_file() or f.suffix == ".mime":
            continue
        lines = []
        for line in f.read_text().splitlines(keepends=True):
            if line.strip() == "User monkey":
                continue
            if not line.lstrip().startswith("#"):
                line = re.sub(r"(?<=\s)(/[^\s#]+)", lambda m: str(root) + m.group(1), line)
            lines.append(line)
        f.write_text("".join(lines))
    (root / "run/monkey").mkdir(parents=True)
    return conf


def serve(root):
    """Start the extracted server, fetch /, ask monkey-ctl, stop it."""
    conf = relocate(root)
    port = free_port()
    err = open(root.parent / "stderr.log", "w")
    proc = subprocess.Popen([str(root / "usr/sbin/monkey"), "-c", str(conf), "-p",
                             f"127.0.0.1:{port}", "-w", "1"], stderr=err)
    ctl = [str(root / "usr/sbin/monkey-ctl"), "-c", str(conf)]
    try:
        assert wait_port(port, proc=proc), (root.parent / "stderr.log").read_text()
        c = Conn(port)
        r = c.request("GET", "/")
        c.close()
        assert r.status == 200
        assert r.body == (root / "usr/share/monkey/htdocs/index.html").read_bytes()
        p = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=10)
        assert p.returncode == 0, p.stderr
        assert f"pid          {proc.pid}" in p.stdout
        p = subprocess.run(ctl + ["stop"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()


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
