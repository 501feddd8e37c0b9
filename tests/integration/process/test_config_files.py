"""Tier 6: the files of a configuration: Include, ${NAME} variables, monkey -T.

Every file the server reads (monkey.conf, sites/*, plugins.load, plugins/*.conf, monkey.mime)
goes through the same reader, so Include and variables work in each; errors name the included
file and its line, and monkey -T prints the configuration after both.
"""

import os
import subprocess

import pytest

from conftest import BUILD, MONKEY, SLOW, STATIC, check_sanitizers

ACCESS_SO = BUILD / "plugins" / "monkey-access.so"


def monkey(srv, *args, env=None):
    """Run monkey with srv's configuration directory; return the completed process."""
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf), *args], capture_output=True, text=True,
                       timeout=10 * SLOW, env={**os.environ, **(env or {})})
    check_sanitizers(p.stderr)
    return p


def included_server(make_server):
    """A server whose [SERVER] keys and site root come from included files and variables.

    monkey.conf:            1 [SERVER]   2 Include conf.d/*.conf   3 Timeout 5
    conf.d/10-listen.conf:  1 # the address   2 Listen ${MK_TEST_LISTEN}
    conf.d/20-workers.conf: 1 Workers ${MK_TEST_WORKERS:-2}
    sites/default:          1 [HOST]   2 ServerName localhost   3 Include ../site.d/root.site
    site.d/root.site:       1 DocumentRoot ${MK_TEST_ROOT}
    """
    srv = make_server()
    srv.raw_conf = "[SERVER]\n    Include conf.d/*.conf\n    Timeout 5\n"
    (srv.conf / "conf.d").mkdir()
    (srv.conf / "conf.d" / "10-listen.conf").write_text(
        "    # the address\n    Listen ${MK_TEST_LISTEN}\n")
    (srv.conf / "conf.d" / "20-workers.conf").write_text("    Workers ${MK_TEST_WORKERS:-2}\n")
    (srv.conf / "site.d").mkdir()
    (srv.conf / "site.d" / "root.site").write_text("    DocumentRoot ${MK_TEST_ROOT}\n")
    srv.site_conf = {"ServerName": "localhost", "Include": "../site.d/root.site"}
    srv.env = {"MK_TEST_LISTEN": f"127.0.0.1:{srv.port}", "MK_TEST_ROOT": str(srv.docroot)}
    srv.file("index.html", "included root\n")
    return srv


def test_serves_with_included_files_and_variables(make_server):
    srv = included_server(make_server)
    srv.start()
    r = srv.get("/index.html")
    assert r.status == 200 and r.body == b"included root\n", r
    assert srv.stop() == 0


def test_reload_reads_includes_again(make_server, tmp_path):
    srv = included_server(make_server)
    other = tmp_path / "other"
    other.mkdir()
    (other / "index.html").write_text("other root\n")
    srv.start()
    assert srv.get("/index.html").body == b"included root\n"

    # The site file is unchanged: only the file it includes is.
    root_site = srv.conf / "site.d" / "root.site"
    root_site.write_text(f"    DocumentRoot {other}\n")
    srv.reload()
    assert srv.get("/index.html").body == b"other root\n"

    # A broken included file refuses the reload and names itself; the running one stays.
    root_site.write_text("    DocumentRoot ${MK_TEST_NOT_SET}\n")
    srv.reload()
    assert f"{root_site}:1: environment variable MK_TEST_NOT_SET is not set" in srv.stderr_text()
    assert srv.get("/index.html").body == b"other root\n"
    assert srv.stop() == 0


# (what to change, the file and the line the error names, the message)
BROKEN = [
    ("unknown key", lambda c: (c / "conf.d" / "20-workers.conf").write_text(
        "    Workers 2\n\n    Wrokers 3\n"), "conf.d/20-workers.conf", 3, "unknown key 'Wrokers'"),
    ("bad value", lambda c: (c / "conf.d" / "20-workers.conf").write_text(
        "    Workers many\n"), "conf.d/20-workers.conf", 1, "Workers"),
    ("unset variable", lambda c: (c / "site.d" / "root.site").write_text(
        "\n    DocumentRoot ${MK_TEST_UNSET}\n"), "site.d/root.site", 2,
     "environment variable MK_TEST_UNSET is not set"),
    ("missing plain file", lambda c: (c / "monkey.conf").write_text(
        "[SERVER]\n    Include conf.d/*.conf\n    Include nothere.conf\n"), "monkey.conf", 3,
     "cannot open"),
    ("cycle", lambda c: (c / "conf.d" / "20-workers.conf").write_text(
        "    Include ../monkey.conf\n"), "conf.d/20-workers.conf", 1, "includes itself"),
    ("key outside a section", lambda c: (c / "monkey.conf").write_text(
        "Include conf.d/*.conf\n[SERVER]\n"), "conf.d/10-listen.conf", 2,
     "key outside of any [SECTION]"),
    ("site key error", lambda c: (c / "site.d" / "root.site").write_text(
        "    DocumentRoot /nonexistent-monkey-root\n"), "site.d/root.site", 1, "DocumentRoot"),
    ("plugins.load", lambda c: ((c / "plugins.d").mkdir(), (c / "plugins.d" / "a.load").write_text(
        "\n    Lod access\n"), (c / "plugins.load").write_text(
        "[PLUGINS]\n    Include plugins.d/*.load\n")), "plugins.d/a.load", 2,
     "unknown key 'Lod' in [PLUGINS]"),
]


@pytest.mark.parametrize("change,file,line,message", [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_check_names_the_included_file_and_line(make_server, change, file, line, message):
    srv = included_server(make_server)
    srv.write_conf()
    change(srv.conf)
    p = monkey(srv, "-t", env=srv.env)
    assert p.returncode == 1, p
    assert f"{srv.conf / file}:{line}: " in p.stderr and message in p.stderr, p.stderr


def test_wildcard_matching_nothing_is_fine(make_server):
    srv = included_server(make_server)
    srv.raw_conf = ("[SERVER]\n    Include conf.d/*.conf\n    Include none.d/*.conf\n"
                    "    Timeout 5\n")
    srv.write_conf()
    p = monkey(srv, "-t", env=srv.env)
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(STATIC, reason="static binary: no shared-object plugins")
def test_plugin_errors_name_the_included_file(make_server):
    """A plugin's site section in an included file: its message names that file."""
    srv = included_server(make_server)
    srv.plugins = [str(ACCESS_SO)]
    (srv.conf / "site.d" / "access.site").write_text(
        "[ACCESS]\n    Default allow\n    Deny 1.2.3.4/99\n")
    srv.site_extra = "Include ../site.d/access.site\n"
    srv.write_conf()
    p = monkey(srv, "-t", env=srv.env)
    assert p.returncode == 1, p
    assert f"{srv.conf / 'site.d' / 'access.site'}:3: " in p.stderr, p.stderr


def split_dump(text):
    """The parts of monkey -T's output: {first file: its text}."""
    parts, name = {}, None
    for chunk in text.split("\n\n"):
        name = chunk.split("\n", 1)[0].removeprefix("# file ")
        parts[name] = chunk.rstrip("\n") + "\n"
    return parts


def test_dump_prints_every_file_after_includes_and_variables(make_server, tmp_path):
    srv = included_server(make_server)
    srv.write_conf()
    p = monkey(srv, "-T", env=srv.env)
    assert p.returncode == 0, p.stderr
    assert "configuration" in p.stderr and "is valid" in p.stderr  # the verdict goes to stderr
    conf = srv.conf
    parts = split_dump(p.stdout)
    assert list(parts) == [str(conf / "monkey.conf"), str(conf / "sites" / "default")], p.stdout
    main = parts[str(conf / "monkey.conf")]
    assert main == (f"# file {conf}/monkey.conf\n"
                    f"# file {conf}/conf.d/10-listen.conf (Include at {conf}/monkey.conf:2)\n"
                    f"# file {conf}/conf.d/20-workers.conf (Include at {conf}/monkey.conf:2)\n"
                    "[SERVER]\n"
                    f"# from {conf}/conf.d/10-listen.conf\n"
                    f"    Listen 127.0.0.1:{srv.port}\n"
                    f"# from {conf}/conf.d/20-workers.conf\n"
                    "    Workers 2\n"
                    f"# from {conf}/monkey.conf\n"
                    "    Timeout 5\n"), main
    site = parts[str(conf / "sites" / "default")]
    assert f"    DocumentRoot {srv.docroot}\n" in site and "${" not in site, site

    # The output reads back: the parts as a configuration, without any variable set.
    back = tmp_path / "back"
    (back / "sites").mkdir(parents=True)
    (back / "monkey.conf").write_text(main)
    (back / "sites" / "default").write_text(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MK_TEST_")}
    q = subprocess.run([str(MONKEY), "-c", str(back), "-T"], capture_output=True, text=True,
                       timeout=10 * SLOW, env=env)
    check_sanitizers(q.stderr)
    assert q.returncode == 0, q.stderr
    again = split_dump(q.stdout)
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("#")]  # noqa: E731
    assert strip(again[str(back / "monkey.conf")]) == strip(main)
    assert strip(again[str(back / "sites" / "default")]) == strip(site)


def test_dump_refuses_a_broken_configuration(make_server):
    srv = included_server(make_server)
    srv.write_conf()
    p = monkey(srv, "-T")  # without the variables
    assert p.returncode == 1 and p.stdout == "", p
    assert "environment variable MK_TEST_LISTEN is not set" in p.stderr, p.stderr
