"""[WEB_SERVICE] sections read through the declarative schema (the duda
plugin's section_schemas, plugin ABI 3.4): errors name the site file and the
line, at start and with `monkey -t`, and every section is its own."""

import re
import subprocess

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC
from test_duda import build, duda_server

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
]

# The site file starts with [HOST], ServerName and DocumentRoot (lines 1-3), then a
# blank line: the first [WEB_SERVICE] header is line 5.
CASES = [
    ("    Name hello\n    Nmae x\n", r"sites/default:7: unknown key 'Nmae' in \[WEB_SERVICE\]"),
    ("    Name hello\n    Name again\n", r"sites/default:7: 'Name' is given twice"),
    ("    Name hello\n    Enabled maybe\n", r"sites/default:7: .*Enabled.*maybe"),
    ("    Root On\n", r"sites/default:5: \[WEB_SERVICE\] without Name"),
    ("    Name a/b\n", r"sites/default:6: Name: 'a/b': 1 to 64 letters"),
    ("    Name " + "n" * 65 + "\n", r"sites/default:6: Name: .*longer than 64"),
]


def monkey(conf, *args):
    return subprocess.run([str(BUILD / "bin" / "monkey"), "-c", str(conf), *args],
                          capture_output=True, text=True, timeout=20 * SLOW)


@pytest.mark.parametrize("body,error", CASES)
def test_errors_name_file_and_line(make_server, tmp_path, body, error):
    srv = duda_server(make_server, tmp_path, ["[WEB_SERVICE]\n" + body])
    srv.write_conf()
    lines = (srv.conf / "sites" / "default").read_text().splitlines()
    assert lines[4] == "[WEB_SERVICE]", lines
    for args in ([], ["-t"]):
        p = monkey(srv.conf, *args)
        assert p.returncode != 0
        assert re.search(error, p.stderr), p.stderr


def test_each_section_its_own(make_server, tmp_path):
    """The same keys in two sections are no repeat; each section has its own defaults."""
    out = tmp_path / "services"
    build(ROOT / "examples" / "hello", out)
    build(ROOT / "examples" / "query_string", out)
    html = ROOT / "examples" / "hello" / "html"
    sections = ["[WEB_SERVICE]\n    Name hello\n    DocumentRoot " + str(html) + "\n",
                "[WEB_SERVICE]\n    Name query_string\n",
                "[WEB_SERVICE]\n    Name ghost\n    Enabled Off\n"]
    srv = duda_server(make_server, out, sections)
    srv.write_conf()
    assert monkey(srv.conf, "-t").returncode == 0
    srv.start()
    assert srv.get("/hello/hello").status == 200
    assert srv.get("/query_string/?name=x").status == 200
    # DocumentRoot belongs to hello's section only.
    assert srv.get("/hello/index.html").status == 200
    assert srv.get("/query_string/index.html").status == 404
    assert srv.get("/ghost/x").status == 404
    assert srv.stop() == 0
