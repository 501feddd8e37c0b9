"""What the tests of the gateways share (gateway/test_cgi.py, gateway/test_fastcgi*.py;
add_auth for http/test_fallback.py too): a client that decodes chunked
bodies, the environment a script prints, the auth plugin in front of a
site, the control plugin's counters of a plugin."""

import base64
import json
import re
import subprocess

from conftest import BUILD, Conn, built_without


class CgiConn(Conn):
    """A Conn for the gateways' responses (Conn decodes their chunked bodies)."""


def get(srv, path, method="GET", **kw):
    """One request on a connection of its own (30 s for the answer); the response."""
    c = CgiConn(srv.port, timeout=30)
    try:
        return c.request(method, path, **kw)
    finally:
        c.close()


def env_of(body):
    """The NAME=VALUE lines of a script's output as a dict."""
    return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)


def read_chunked(f):
    """A chunked body from the file f (after the head), decoded."""
    body = bytearray()
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            f.readline()
            return bytes(body)
        body += f.read(size)
        assert f.read(2) == b"\r\n"


def add_auth(srv, location):
    """Load the auth plugin first, with alice:wonderland allowed under location;
    returns the Authorization values of alice's right and wrong passwords."""
    users = srv.conf / "users"
    subprocess.run([str(BUILD / "bin" / "monkey-passwd"), "-i", "-c", "-C", "4", str(users),
                    "alice"], input=b"wonderland\n", check=True, capture_output=True)
    srv.plugins.insert(0, str(BUILD / "plugins" / "monkey-auth.so"))
    srv.site_extra += f"[AUTH]\n    Location {location}\n    Realm Scripts\n    Users users\n"
    return ("Basic " + base64.b64encode(b"alice:wonderland").decode(),
            "Basic " + base64.b64encode(b"alice:looking-glass").decode())


def check_remote_user(srv, protected, public, good, bad):
    """Behind the auth plugin (add_auth: good and bad credentials) the
    program at `protected` runs only for a valid user and learns who
    (REMOTE_USER) and how (AUTH_TYPE), RFC 3875 4.1.1 and 4.1.11, from the
    plugin's notes, twice: checked on a task thread, then from the
    plugin's cache. At `public` nobody was authenticated, whatever the
    client sends: neither is set (or the program prints "-")."""
    assert get(srv, protected).status == 401
    assert get(srv, protected, headers={"Authorization": bad}).status == 401
    for _ in range(2):
        r = get(srv, protected, headers={"Authorization": good})
        assert r.status == 200
        e = env_of(r.body)
        assert e["REMOTE_USER"] == "alice" and e["AUTH_TYPE"] == "Basic"
    r = get(srv, public, headers={"Authorization": good})
    assert r.status == 200
    e = env_of(r.body)
    assert e.get("REMOTE_USER", "-") == "-" and e.get("AUTH_TYPE", "-") == "-", e


def with_control(srv):
    """Load the control plugin too, its JSON status at /server-status."""
    srv.plugins.append(str(BUILD / "plugins" / "monkey-control.so"))
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "control.conf").write_text(
        f"[CONTROL]\n    Socket {srv.dir}/ctl.sock\n    HttpPath /server-status\n")
    return srv


def plugin_status(srv, name):
    """The counters of plugin `name` in the status of srv (with_control)."""
    r = get(srv, "/server-status")
    assert r.status == 200
    return json.loads(r.body)["plugins"][name]


# The per-server (per-backend) figures of the proxy's and the gateways'
# status (requests, failures, timeouts, ttfb): read from the metrics the plugins
# declare (api->metric_read), which a build without MK_METRICS does not
# keep: there the status has none of them (docs/observability.md).
FIGURES = not built_without("metrics")
FIGURE_KEY = re.compile(r"^(server|backend)\d+_(requests|failures|timeouts|ttfb_ms|ttfb_count)$")


def is_figure(key):
    return FIGURE_KEY.match(key) is not None


def figures(st, **want):
    """Each figure of `want` in st as given; without the metrics, absent."""
    if FIGURES:
        got = {k: st.get(k) for k in want}
        assert got == want, (got, st)
    else:
        assert not [k for k in st if is_figure(k)], st
