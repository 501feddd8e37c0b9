"""What the tests of an installed tree share: a DESTDIR that `cmake --install`
filled (install/test_install.py, install/test_embed.py, the Duda tests) or the Debian
packages extracted into a folder (install/test_deb.py). The tree's configuration names
absolute paths; relocated, it names the tree's own files, and its programs
run from there as an administrator would run them."""

import re
import subprocess

from conftest import BUILD, SLOW, Conn, free_port, serving


def cache(name):
    """The value of `name` in the build's CMakeCache.txt (KeyError without it)."""
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


def inside(dest, path):
    """The absolute install path `path` under the tree dest."""
    return dest / path.lstrip("/")


def cmake_install(dest):
    """Install the build into DESTDIR dest."""
    p = subprocess.run(["cmake", "--install", str(BUILD)], env={"DESTDIR": str(dest),
                       "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def prefix_paths(conf, root, drop=()):
    """Every absolute path of the configuration folder conf (comments left
    alone, MIME tables skipped) prefixed by root; lines equal to one of
    `drop` (stripped) are left out."""
    for f in conf.rglob("*"):
        if not f.is_file() or f.suffix == ".mime":
            continue
        lines = []
        for line in f.read_text().splitlines(keepends=True):
            if line.strip() in drop:
                continue
            if not line.lstrip().startswith("#"):
                line = re.sub(r"(?<=\s)(/[^\s#]+)", lambda m: str(root) + m.group(1), line)
            lines.append(line)
        f.write_text("".join(lines))


def enable_duda(conf):
    """What an administrator does to enable Duda: uncomment the plugin's line of plugins.load."""
    load = conf / "plugins.load"
    text, n = re.subn(r"^# (    Load \S+/monkey-duda\.so\s)", r"\1", load.read_text(), flags=re.M)
    assert n == 1
    load.write_text(text)


def config_check(monkey, conf):
    """monkey -t with conf: (exit status, standard error)."""
    p = subprocess.run([monkey, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    return p.returncode, p.stdout + p.stderr


def serve_default_page(monkey, ctl, conf, index, log):
    """The tree's server with conf answers / with the bytes of the file
    index, its monkey-ctl names the server's PID in `status` and stops it
    with `stop`."""
    port = free_port()
    with serving([monkey, "-c", str(conf), "-p", f"127.0.0.1:{port}", "-w", "1"], port,
                 log, ready=True) as proc:  # monkey-ctl stop needs the main loop
        c = Conn(port)
        r = c.request("GET", "/")
        c.close()
        assert r.status == 200
        assert r.body == index.read_bytes()
        p = subprocess.run([ctl, "-c", str(conf), "status"], capture_output=True, text=True,
                           timeout=10 * SLOW)
        assert p.returncode == 0, p.stderr
        assert f"pid          {proc.pid}" in p.stdout
        p = subprocess.run([ctl, "-c", str(conf), "stop"], capture_output=True, text=True,
                           timeout=30 * SLOW)
        assert p.returncode == 0, p.stderr
        proc.wait(timeout=15 * SLOW)


def serve_services(monkey, duda, env, conf, services, examples, names, log):
    """The tree's server with conf (Duda enabled) serves the examples `names`
    (hello first; chat, if named, needs the websocket and broadcaster
    packages) as an administrator sets them up: the configuration checks
    without a service; with a [WEB_SERVICE] section for each (its
    DocumentRoot the example's html folder) it fails for want of
    SERVICES/hello.duda until the tree's duda helper (environment env) has
    built each into services; then the server answers /hello/hello and
    /chat/. Its standard error ends in log."""
    rc, out = config_check(monkey, conf)
    assert rc == 0, out
    with open(conf / "sites/default", "a") as f:
        for n in names:
            f.write(f"\n[WEB_SERVICE]\n    Name {n}\n    DocumentRoot {examples / n / 'html'}\n")
    rc, out = config_check(monkey, conf)
    assert rc == 1 and f"{services}/hello.duda: No such file" in out, out
    for n in names:
        p = subprocess.run([duda, "build", str(examples / n), "-o", str(services)], env=env,
                           capture_output=True, text=True, timeout=120 * SLOW)
        assert p.returncode == 0, p.stdout + p.stderr
    rc, out = config_check(monkey, conf)
    assert rc == 0, out
    port = free_port()
    with serving([monkey, "-c", str(conf), "-p", f"127.0.0.1:{port}", "-w", "1"], port, log):
        c = Conn(port)
        r = c.request("GET", "/hello/hello")
        assert (r.status, r.body) == (200, b"Hello World!\n")
        if "chat" in names:
            r = c.request("GET", "/chat/")
            assert (r.status, r.body) == (200, (examples / "chat/html/index.html").read_bytes())
        c.close()
