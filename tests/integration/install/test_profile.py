"""The parts a build leaves out and the size budget (docs/packaging.md, "The
embedded profile").

A build made without a part (cmake/profile.cmake: the supervisor, systemd
support, compression on the fly, the fair balancing mode, the client's
address behind a balancer (PROXY protocol, RealIPFrom), library mode,
HTTP/2) says so where a user meets it: `monkey -t` refuses a configuration
that asks for the part with the file and line of the key and the part's
name, `monkey -S` without the supervisor is a usage error, and `monkey -v`
names what the build left out, as BUILD/features.txt does. In a build with
every part these tests have nothing to check and skip.

The stripped size of bin/monkey is held to tests/size_budget.txt for the
build's kind (the embedded profile, the same linked statically, the
default build) and architecture: tools/size_budget.py measures it with the
architecture's strip.
"""

import importlib.util
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, FEATURES, MONKEY, ROOT, SLOW, built_without

spec = importlib.util.spec_from_file_location("size_budget", ROOT / "tools" / "size_budget.py")
size_budget = importlib.util.module_from_spec(spec)
spec.loader.exec_module(size_budget)

# part of features.txt: (what -v and the messages call it, [SERVER] lines it refuses)
PARTS = {
    "h2": ("HTTP/2", ["Http2IdleTimeout 60", "MaxConcurrentStreams 100"]),
    "compress": ("compression on the fly", ["CompressCache 16M"]),
    "supervisor": ("the supervisor", ["Supervisor On", "SupervisorCrashLimit 5"]),
    "systemd": ("systemd support", []),
    "fair": ("the fair balancing mode", ["Balancing fair"]),
    "realip": ("the client's address behind a balancer",
               ["RealIPFrom 10.0.0.0/8", "RealIPHeader X-Real-IP"]),
    "rules": ("request rules", []),
    "libmonkey": ("library mode", []),
}


def left_out():
    return [p for p in PARTS if built_without(p)]


def check(conf_dir):
    return subprocess.run([str(MONKEY), "-t", "-c", str(conf_dir)], capture_output=True,
                          text=True, timeout=20 * SLOW)


def write_conf(tmp_path, server_line, site_line=None):
    conf = tmp_path / "conf"
    (conf / "sites").mkdir(parents=True, exist_ok=True)
    (tmp_path / "htdocs").mkdir(exist_ok=True)
    (conf / "monkey.conf").write_text(f"[SERVER]\n    Listen 127.0.0.1:2001\n    {server_line}\n")
    site = ("[HOST]\n    ServerName localhost\n    DocumentRoot ../htdocs\n"
            + (f"    {site_line}\n" if site_line else ""))
    (conf / "sites" / "default").write_text(site)
    return conf


def refusals():
    cases = []
    for part in left_out():
        name, lines = PARTS[part]
        cases += [(part, name, line) for line in lines]
    if built_without("compress"):
        cases.append(("compress", "compression on the fly", None))
    if built_without("h2"):
        cases.append(("h2", "HTTP/2", "Listen 2002 h2c"))
    if built_without("realip"):
        cases.append(("realip", PARTS["realip"][0], "Listen 2002 proxy_protocol"))
    return cases


@pytest.mark.parametrize("part,name,line", refusals() or [pytest.param(None, None, None, marks=(
    pytest.mark.skip(reason="this build has every part")))])
def test_monkey_t_names_the_file_line_and_part_of_a_key_left_out(tmp_path, part, name, line):
    if line is None:  # a site key of compression on the fly
        conf = write_conf(tmp_path, "Workers 1", "Compress gzip")
        where, what = conf / "sites" / "default", "Compress gzip"
        line_no = 4
    else:
        conf = write_conf(tmp_path, line)
        where, what, line_no = conf / "monkey.conf", line, 3
    p = check(conf)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    if what.startswith("Listen"):  # an option of the line: h2c, proxy_protocol
        option = what.split()[-1]
        assert (f"{where.resolve()}:{line_no}: Listen: {option}: this server was built without "
                f"{name}") in p.stderr, p.stderr
    else:
        assert p.stderr.strip() == (f"monkey: {where.resolve()}:{line_no}: {what}: this server "
                                    f"was built without {name}"), p.stderr


@pytest.mark.skipif(not built_without("rules"), reason="built with request rules")
def test_monkey_t_names_the_file_line_and_part_of_a_rule_left_out(tmp_path):
    conf = write_conf(tmp_path, "Workers 1")
    site = conf / "sites" / "default"
    site.write_text(site.read_text() + "[RULE]\n    Path /a\n    Return 410\n")
    p = check(conf)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip() == (f"monkey: {site.resolve()}:4: [RULE]: this server was built "
                                "without request rules"), p.stderr


@pytest.mark.skipif(not built_without("supervisor") and not built_without("compress"),
                    reason="built with the supervisor and compression on the fly")
def test_a_value_that_asks_for_nothing_missing_is_taken(tmp_path):
    for server_line, site_line in (("Supervisor Off", None), ("Workers 1", "Compress Off")):
        if server_line.startswith("Supervisor") and not built_without("supervisor"):
            continue
        if site_line and not built_without("compress"):
            continue
        p = check(write_conf(tmp_path, server_line, site_line))
        assert p.returncode == 0, p.stderr
        assert "is valid" in p.stdout


@pytest.mark.skipif(not built_without("supervisor"), reason="built with the supervisor")
def test_minus_S_without_the_supervisor_is_a_usage_error(tmp_path):
    p = subprocess.run([str(MONKEY), "-S", "-c", str(write_conf(tmp_path, "Workers 1"))],
                       capture_output=True, text=True, timeout=20 * SLOW)
    assert p.returncode == 2
    assert p.stderr == "monkey: -S: this server was built without the supervisor\n"
    p = subprocess.run([str(MONKEY), "-h"], capture_output=True, text=True, timeout=20 * SLOW)
    assert "-S, --supervisor     (this server was built without the supervisor)" in p.stdout


@pytest.mark.skipif(not FEATURES, reason="no features.txt")
def test_version_names_the_parts_left_out_as_features_txt_does():
    p = subprocess.run([str(MONKEY), "-v"], capture_output=True, text=True, timeout=20 * SLOW)
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    names = [PARTS[part][0] for part in PARTS if built_without(part)]
    if not names:
        assert len(lines) == 1, lines
        return
    assert lines[1] == f"Built without {', '.join(names)}.", lines


def real_build():
    """The build directory itself: under make cross-test BUILD is its emu/ tree,
    whose bin/monkey is a script that runs the emulator."""
    cache = BUILD / "CMakeCache.txt"
    return cache.resolve().parent if cache.is_symlink() else BUILD


def test_the_stripped_binary_is_within_its_size_budget():
    build = real_build()
    kind, arch, size, text_data, bound = size_budget.budget_check(build)
    if bound is None:
        pytest.skip(f"no size budget for this build ({kind or 'not a budgeted kind'}, {arch})")
    assert size <= bound, (f"{build}/bin/monkey stripped is {size} bytes ({text_data} of text "
                           f"and data), over its budget of {bound} ({kind}, {arch}) in "
                           f"tests/size_budget.txt: docs/packaging.md, \"What each part costs\", "
                           f"tells how to find what grew")


def test_the_budget_file_names_each_kind_once():
    seen = set()
    for line in (ROOT / "tests" / "size_budget.txt").read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        assert len(words) == 3 and words[2].isdigit(), line
        assert words[0] in ("embedded", "embedded-static", "default"), line
        assert words[1] in ("x86_64", "armhf", "aarch64"), line
        assert (words[0], words[1]) not in seen, line
        seen.add((words[0], words[1]))
    assert ("embedded", "x86_64") in seen and ("default", "x86_64") in seen
