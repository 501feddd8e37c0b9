"""Tier 10: the access plugin (plugins/access): allow and deny by client address and path.

The plugin is loaded as a shared object (by name from a static binary that has
it built in, e.g. MK_BUILTIN_PLUGINS="skeleton;access"). The test client is 127.0.0.1; a second
IPv4 client, 127.0.0.2 (also loopback on Linux), plays "somebody else", and ::1
is the IPv6 client when the host has IPv6. Many rule sets are checked against
one server by giving each its own site (ServerName caseN.test) and choosing the
site with the Host header.
"""

import socket
import subprocess

import pytest

from conftest import (BUILD, HAS_IPV6, MONKEY, ROOT, SLOW, STATIC, Conn, can_bind, needs_ipv6,
                      wait_for, wait_port)

ACCESS_SO = BUILD / "plugins" / "monkey-access.so"
HOLD_SO = BUILD / "tests" / "plugins" / "monkey-hold.so"


def access_built_in():
    """A static binary loads only built-in plugins: is this one of them?"""
    try:
        return b"per site (Mandril)" in MONKEY.read_bytes()  # the plugin's description
    except OSError:
        return False


# Loaded as a shared object, or by name from a static binary that has it built in.
PLUGIN = "access" if STATIC else str(ACCESS_SO)
pytestmark = pytest.mark.skipif(STATIC and not access_built_in(),
                                reason="static binary without the access plugin built in")

FILES = {
    "index.html": "<h1>index</h1>\n",
    "a.txt": "A\n",
    "admin.txt": "admin.txt\n",
    "admin/index.html": "admin index\n",
    "admin/x.txt": "admin x\n",
    "administrator/x.txt": "administrator x\n",
    "public/a.txt": "public a\n",
    "private/secret.key": "secret\n",
    "private/readme.txt": "readme\n",
    "my docs/a.txt": "spaced\n",
}


needs_127_0_0_2 = pytest.mark.skipif(not can_bind("127.0.0.2"),
                                     reason="cannot bind 127.0.0.2 as a source address")


class SourceConn(Conn):
    """A client connection from a chosen IPv4 source address (127.0.0.2)."""

    def __init__(self, port, source, host="127.0.0.1", timeout=5.0):
        self.sock = socket.socket(socket.AF_INET)
        self.sock.settimeout(timeout * SLOW)
        self.sock.bind((source, 0))
        self.sock.connect((host, port))
        self.buf = b""


def section(rules):
    return "[ACCESS]\n" + "".join(f"    {r}\n" for r in rules)


def site_text(name, docroot, rules):
    return f"[HOST]\n    ServerName {name}\n    DocumentRoot {docroot}\n" + section(rules)


def make_access(make_server, rules=None, sites=None, conf=None):
    """A server with the plugin, the FILES, `rules` in the default site and
    one extra site per entry of `sites` (name -> rules). Not started."""
    srv = make_server()
    srv.plugins = [PLUGIN]
    for rel, text in FILES.items():
        srv.file(rel, text)
    if rules is not None:
        srv.site_extra = section(rules)
    for name, site_rules in (sites or {}).items():
        srv.extra_sites[name] = site_text(name, srv.docroot, site_rules)
    if conf is not None:
        (srv.conf / "plugins").mkdir(exist_ok=True)
        (srv.conf / "plugins" / "access.conf").write_text(conf)
    return srv


def statuses(conn, host, paths):
    """Status of each path, asked on one keep-alive connection."""
    return [conn.request("GET", p, headers={"Host": host}).status for p in paths]


def check_table(conn, table, what):
    """Ask GET /a.txt on each caseN.test site; report every mismatch at once."""
    wrong = []
    for i, (rules, want) in enumerate(table):
        got = conn.request("GET", "/a.txt", headers={"Host": f"case{i}.test"}).status
        if got != want:
            wrong.append((rules, want, got))
    assert not wrong, f"{what}: (rules, expected, got): {wrong}"


# Rule sets and the status GET /a.txt gets from 127.0.0.1.
IPV4_TABLE = [
    (["Deny 127.0.0.0/8"], 403),
    (["Deny 10.0.0.0/8"], 200),
    (["Deny 127.0.0.1"], 403),          # a bare address is one host
    (["Deny 127.0.0.2"], 200),
    (["Deny 127.0.0.1/32"], 403),
    (["Deny 127.0.0.2/32"], 200),
    (["Deny 127.0.0.0/31"], 403),       # 127.0.0.0 and 127.0.0.1
    (["Deny 127.0.0.2/31"], 200),       # 127.0.0.2 and 127.0.0.3
    (["Deny 128.0.0.0/1"], 200),
    (["Deny 0.0.0.0/1"], 403),
    (["Deny 0.0.0.0/0"], 403),          # every IPv4 client
    (["Deny ::/0"], 200),               # every IPv6 client: not an IPv4 one
    (["Deny ::1/128"], 200),
    (["Deny ::ffff:127.0.0.1/128"], 403),  # an IPv4-mapped rule is an IPv4 rule
    (["Deny ::ffff:127.0.0.0/104"], 403),
    (["Deny ::ffff:10.0.0.0/104"], 200),
    (["Deny 127.255.255.255/8"], 403),  # bits beyond the prefix are ignored
    (["Deny all"], 403),
    (["Allow 127.0.0.1", "Default deny"], 200),
    (["Allow 127.0.0.0/8", "Default deny"], 200),
    (["Allow 10.0.0.0/8", "Default deny"], 403),
    (["Allow ::1", "Default deny"], 403),
    (["Allow 0.0.0.0/0", "Default deny"], 200),
]

# Rule sets and the status GET /a.txt gets from ::1.
IPV6_TABLE = [
    (["Deny ::1"], 403),
    (["Deny ::1/128"], 403),
    (["Deny 0:0:0:0:0:0:0:1/128"], 403),
    (["Deny ::2/128"], 200),
    (["Deny ::/127"], 403),             # :: and ::1
    (["Deny ::2/127"], 200),            # ::2 and ::3
    (["Deny ::/0"], 403),               # every IPv6 client
    (["Deny 8000::/1"], 200),
    (["Deny 0.0.0.0/0"], 200),          # every IPv4 client: not an IPv6 one
    (["Deny 127.0.0.1"], 200),
    (["Deny ::ffff:0.0.0.1/128"], 200),  # IPv4 0.0.0.1, not ::1
    (["Deny all"], 403),
    (["Allow ::1/128", "Default deny"], 200),
    (["Allow 2001:db8::/32", "Default deny"], 403),
    (["Allow 127.0.0.0/8", "Default deny"], 403),
]


def table_sites(table):
    return {f"case{i}.test": rules for i, (rules, _) in enumerate(table)}


# ---- addresses -------------------------------------------------------------------

def test_ipv4_cidr_rules(make_server):
    srv = make_access(make_server, sites=table_sites(IPV4_TABLE))
    srv.start()
    c = srv.conn()
    check_table(c, IPV4_TABLE, "IPv4 client on an IPv4 socket")
    c.close()
    # The rule with host bits set was accepted with a warning naming it.
    assert "'127.255.255.255/8' has bits set beyond its prefix length" in srv.stderr_text()


@needs_ipv6
def test_ipv6_cidr_rules(make_server):
    srv = make_access(make_server, sites=table_sites(IPV6_TABLE))
    srv.set(Listen=f"[::1]:{srv.port}")
    srv.start(wait=False)
    assert wait_port(srv.port, host="::1", proc=srv.proc), srv.stderr_text()
    c = Conn(srv.port, host="::1")
    check_table(c, IPV6_TABLE, "IPv6 client on an IPv6 socket")
    c.close()


@needs_ipv6
def test_dual_stack_ipv4_client_matches_ipv4_rules(make_server):
    # One site per rule set of both tables: case0.. for IPv4, then IPv6.
    n4 = len(IPV4_TABLE)
    sites = table_sites(IPV4_TABLE + IPV6_TABLE)
    srv = make_access(make_server, sites=sites)
    srv.set(Listen=str(srv.port))  # [::]:PORT, IPv4 clients arrive as ::ffff:a.b.c.d
    srv.start()
    c = srv.conn()
    check_table(c, IPV4_TABLE, "IPv4 client on a dual-stack socket")
    c.close()
    c6 = Conn(srv.port, host="::1")
    wrong = []
    for i, (rules, want) in enumerate(IPV6_TABLE):
        got = c6.request("GET", "/a.txt", headers={"Host": f"case{n4 + i}.test"}).status
        if got != want:
            wrong.append((rules, want, got))
    c6.close()
    assert not wrong, f"IPv6 client on a dual-stack socket: {wrong}"


@needs_127_0_0_2
def test_other_ipv4_client(make_server):
    srv = make_access(make_server, sites={
        "one.test": ["Deny 127.0.0.1"],
        "net.test": ["Allow 127.0.0.1", "Deny 127.0.0.0/8"],
        "pair.test": ["Deny 127.0.0.2/31"],
    })
    srv.start()
    c1, c2 = srv.conn(), SourceConn(srv.port, "127.0.0.2")
    assert statuses(c1, "one.test", ["/a.txt"]) == [403]
    assert statuses(c2, "one.test", ["/a.txt"]) == [200]
    assert statuses(c1, "net.test", ["/a.txt"]) == [200]
    assert statuses(c2, "net.test", ["/a.txt"]) == [403]
    assert statuses(c1, "pair.test", ["/a.txt"]) == [200]
    assert statuses(c2, "pair.test", ["/a.txt"]) == [403]
    c1.close()
    c2.close()


# ---- order, paths, regular expressions ---------------------------------------------

def test_first_match_wins(make_server):
    srv = make_access(make_server, sites={
        "allow-first.test": ["Allow 127.0.0.1", "Deny 127.0.0.0/8"],
        "deny-first.test": ["Deny 127.0.0.0/8", "Allow 127.0.0.1"],
        "path-allow-first.test": ["Allow path /admin/x.txt", "Deny path /admin"],
        "path-deny-first.test": ["Deny path /admin", "Allow path /admin/x.txt"],
        "default-last.test": ["Default deny", "Allow path /public"],
    })
    srv.start()
    c = srv.conn()
    assert statuses(c, "allow-first.test", ["/a.txt"]) == [200]
    assert statuses(c, "deny-first.test", ["/a.txt"]) == [403]
    assert statuses(c, "path-allow-first.test", ["/admin/x.txt", "/admin/"]) == [200, 403]
    assert statuses(c, "path-deny-first.test", ["/admin/x.txt", "/admin/"]) == [403, 403]
    # Default decides only when no rule matched, wherever it is written.
    assert statuses(c, "default-last.test", ["/public/a.txt", "/a.txt"]) == [200, 403]
    c.close()


def test_path_prefix_at_segment_boundary(make_server):
    srv = make_access(make_server, sites={
        "p.test": ["Deny path /admin"],
        "slash.test": ["Deny path /admin/"],   # the same rule
        "root.test": ["Deny path /"],
        "file.test": ["Deny path /admin.txt"],
        "space.test": ["Deny path /my docs"],  # the prefix runs to the end of the line
    })
    srv.start()
    c = srv.conn()
    covered = ["/admin", "/admin/", "/admin/x.txt", "/admin/nothing/here"]
    outside = ["/administrator/x.txt", "/admin.txt", "/a.txt", "/"]
    for host in ("p.test", "slash.test"):
        assert statuses(c, host, covered) == [403] * 4, host
        assert statuses(c, host, outside) == [200] * 4, host
    # Paths are decoded and normalised before the check: no way around it.
    evasions = ["/%61dmin/x.txt", "//admin//x.txt", "/public/../admin/x.txt", "/./admin/x.txt",
                "/admin/x.txt?q=1", "/admin%2fx.txt"]
    assert statuses(c, "p.test", evasions) == [403] * len(evasions)
    # Case matters, like the file system's: /ADMIN is another (missing) path.
    assert statuses(c, "p.test", ["/ADMIN/x.txt"]) == [404]
    c.send(b"GET http://p.test/admin/x.txt HTTP/1.1\r\nHost: p.test\r\n\r\n")
    assert c.read_response().status == 403
    assert statuses(c, "root.test", ["/", "/a.txt", "/admin/x.txt"]) == [403] * 3
    assert statuses(c, "file.test", ["/admin.txt", "/admin/x.txt"]) == [403, 200]
    assert statuses(c, "space.test", ["/my%20docs/a.txt", "/a.txt"]) == [403, 200]
    c.close()


def test_regex_rules(make_server):
    srv = make_access(make_server, sites={
        "re.test": [r"Deny regex ^/private/.*\.key$"],
        "loose.test": [r"Deny regex \.key"],
        "allow.test": [r"Allow regex ^/(public|admin)/[a-z]+\.txt$", "Default deny"],
    })
    srv.start()
    c = srv.conn()
    assert statuses(c, "re.test", ["/private/secret.key", "/private/readme.txt",
                                   "/private/sub/none.key", "/%70rivate/secret.key",
                                   "/private//secret.key"]) == [403, 200, 403, 403, 403]
    # Anchors: not at the start, not with more after ".key" (those files are missing).
    assert statuses(c, "re.test", ["/x/private/a.key", "/private/secret.key.bak"]) == [404, 404]
    # Without anchors the expression matches anywhere in the path.
    assert statuses(c, "loose.test", ["/x/private/a.key", "/private/secret.key.bak",
                                      "/a.txt"]) == [403, 403, 200]
    assert statuses(c, "allow.test", ["/public/a.txt", "/admin/x.txt", "/administrator/x.txt",
                                      "/a.txt"]) == [200, 200, 403, 403]
    # Long paths are matched whole (musl, without REG_STARTEND, copies them).
    long = "/private/" + "a" * 3000
    assert statuses(c, "re.test", [long + ".key", long + ".txt"]) == [403, 404]
    # '.' matches a newline decoded from %0a: it cannot split the path in two.
    assert statuses(c, "re.test", ["/private/x%0ay.key"]) == [403]
    c.close()


@needs_127_0_0_2
def test_only_localhost_sees_admin(make_server):
    """'Only localhost may see /admin', written as an allow list and as a deny rule."""
    srv = make_access(make_server, sites={
        # Allow list: everything is denied but what is allowed.
        "allowlist.test": ["Allow 127.0.0.1 path /admin", "Allow path /public",
                           "Allow regex ^/[a-z]+\\.txt$", "Default deny"],
        # Deny rule: everything is allowed but /admin from anybody else.
        "denyrule.test": ["Allow 127.0.0.1 path /admin", "Deny all path /admin"],
    })
    srv.set(Listen=[f"127.0.0.1:{srv.port}"] + ([f"[::1]:{srv.port}"] if HAS_IPV6 else []))
    srv.start()
    local, other = srv.conn(), SourceConn(srv.port, "127.0.0.2")
    paths = ["/admin/x.txt", "/admin/", "/public/a.txt", "/a.txt"]
    for host in ("allowlist.test", "denyrule.test"):
        assert statuses(local, host, paths) == [200, 200, 200, 200], host
        assert statuses(other, host, paths) == [403, 403, 200, 200], host
    # Outside the allowed paths the allow list denies both.
    assert statuses(local, "allowlist.test", ["/index.html"]) == [403]
    assert statuses(local, "denyrule.test", ["/index.html"]) == [200]
    if HAS_IPV6:
        c6 = Conn(srv.port, host="::1")
        # ::1 is not 127.0.0.1: "all" covers both families.
        assert statuses(c6, "denyrule.test", ["/admin/x.txt", "/a.txt"]) == [403, 200]
        assert statuses(c6, "allowlist.test", ["/admin/x.txt", "/a.txt"]) == [403, 200]
        c6.close()
    local.close()
    other.close()


def test_default_deny_and_allow(make_server):
    srv = make_access(make_server, rules=["Default deny"], sites={
        "open.test": ["Default allow"],
        "public.test": ["Allow path /public", "Default deny"],
        "empty.test": [],
    })
    srv.start()
    c = srv.conn()
    assert statuses(c, "localhost", ["/", "/a.txt", "/nothing"]) == [403, 403, 403]
    assert statuses(c, "open.test", ["/", "/a.txt"]) == [200, 200]
    assert statuses(c, "public.test", ["/public/a.txt", "/a.txt"]) == [200, 403]
    assert statuses(c, "empty.test", ["/a.txt"]) == [200]  # an empty section allows all
    c.close()


def test_rules_are_per_site(make_server):
    srv = make_access(make_server, sites={
        "a.test": ["Deny path /admin"],
        "b.test": ["Deny path /public", "Deny 127.0.0.1 regex \\.txt$"],
    })
    srv.start()
    c = srv.conn()
    paths = ["/admin/x.txt", "/public/a.txt", "/index.html", "/a.txt"]
    assert statuses(c, "localhost", paths) == [200, 200, 200, 200]  # no [ACCESS]
    assert statuses(c, "a.test", paths) == [403, 200, 200, 200]
    assert statuses(c, "b.test", paths) == [403, 403, 200, 403]
    c.close()


def test_denied_before_any_file_access(make_server):
    srv = make_access(make_server, sites={
        "p.test": ["Deny path /admin", "Deny regex ^/secret"],
        "d.test": ["Default deny"],
    })
    srv.file("forbidden.html", "<p>no</p>\n")
    srv.extra_sites["p.test"] += "[ERROR_PAGES]\n    403 forbidden.html\n"
    srv.start()
    c = srv.conn()
    # The site's own 403 page is the body.
    r = c.request("GET", "/admin/x.txt", headers={"Host": "p.test"})
    assert r.status == 403 and r.body == b"<p>no</p>\n"
    # Missing files: 403 from the rule, not 404 from the file handler.
    missing = ["/admin/nope.txt", "/admin/no/such/dir/", "/secret-plans.pdf"]
    assert statuses(c, "p.test", missing) == [403, 403, 403]
    assert statuses(c, "d.test", ["/nope"]) == [403]
    assert statuses(c, "localhost", ["/admin/nope.txt"]) == [404]
    # A directory without its slash: 403, not the 301 that would reveal it.
    assert statuses(c, "p.test", ["/admin"]) == [403]
    assert statuses(c, "localhost", ["/admin"]) == [301]
    c.close()


def test_rules_see_the_index_files_path(make_server):
    # a directory answered with its index file: the rules check the index
    # file's path too (nginx's index is an internal redirect), so a rule
    # written for it covers the directory
    srv = make_access(make_server, sites={
        "p.test": ["Deny path /admin/index.html"],
        "r.test": ["Deny regex /index\\.html$"],
    })
    srv.start()
    c = srv.conn()
    assert statuses(c, "p.test", ["/admin/index.html", "/admin/", "/admin/x.txt", "/"]) == [
        403, 403, 200, 200]
    assert statuses(c, "r.test", ["/", "/admin/", "/a.txt", "/admin"]) == [403, 403, 200, 301]
    assert statuses(c, "localhost", ["/", "/admin/"]) == [200, 200]
    r = c.request("HEAD", "/admin/", headers={"Host": "p.test"})
    assert r.status == 403
    c.close()


def test_denied_keeps_the_connection(make_server):
    srv = make_access(make_server, rules=["Deny path /admin"])
    srv.start()
    c = srv.conn()
    r = c.request("GET", "/admin/x.txt")
    assert r.status == 403
    assert (r.header("connection") or "").lower() != "close"
    assert c.request("GET", "/a.txt").body == b"A\n"
    # A denied request with a body: the body is skipped, the connection stays in step.
    r = c.request("POST", "/admin/x.txt", body=b"x" * 5000)
    assert r.status == 403
    assert c.request("GET", "/a.txt").body == b"A\n"
    # Pipelined: denied, allowed, denied, allowed.
    c.send(b"GET /admin/ HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
           b"HEAD /admin/x.txt HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /public/a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 403
    assert c.read_response().body == b"A\n"
    assert c.read_response(head_request=True).status == 403
    assert c.read_response().body == b"public a\n"
    # HTTP/1.0 without keep-alive: 403, then closed as usual.
    r = c.request("GET", "/admin/x.txt", version="HTTP/1.0")
    assert r.status == 403
    assert c.closed()
    c.close()


def test_non_path_targets(make_server):
    srv = make_access(make_server, sites={
        "root.test": ["Deny path /", "Deny regex .*"],
        "d.test": ["Default deny"],
    })
    srv.start()
    c = srv.conn()
    # OPTIONS * has no path: path rules do not match it, Default does.
    c.send(b"OPTIONS * HTTP/1.1\r\nHost: root.test\r\n\r\n")
    assert c.read_response().status == 200
    c.send(b"OPTIONS * HTTP/1.1\r\nHost: d.test\r\n\r\n")
    assert c.read_response().status == 403
    c.close()


# ---- reload and the plugin-wide file ----------------------------------------------

def test_reload_picks_up_changed_rules(make_server):
    srv = make_access(make_server, rules=["Deny path /admin"])
    srv.start()
    assert srv.get("/admin/x.txt").status == 403
    assert srv.get("/public/a.txt").status == 200
    site = srv.conf / "sites" / "default"
    head = site.read_text().split("[ACCESS]")[0]
    site.write_text(head + section(["Deny path /public"]))
    srv.reload()
    assert srv.get("/public/a.txt").status == 403
    assert srv.get("/admin/x.txt").status == 200
    # A bad rule on reload is refused with file:line; the rules in force stay.
    site.write_text(head + section(["Deny path /admin", "Deny 10.0.0.0/40"]))
    srv.reload()
    assert f"{site}:6: '10.0.0.0/40': prefix length /40 is out of range" in srv.stderr_text()
    assert srv.get("/public/a.txt").status == 403
    assert srv.get("/admin/x.txt").status == 200
    # Removing the section removes the rules.
    site.write_text(head)
    srv.reload()
    assert srv.get("/public/a.txt").status == 200


def test_log_denied(make_server):
    srv = make_access(make_server, rules=["Deny path /admin", "Default allow"],
                      sites={"d.test": ["Allow path /public", "Default deny"]},
                      conf="[ACCESS]\n    LogDenied On\n")
    srv.start()
    assert srv.get("/admin/x%0ay.txt").status == 403
    assert srv.get("/a.txt", headers={"Host": "d.test"}).status == 403
    assert srv.get("/a.txt").status == 200
    site = srv.conf / "sites" / "default"
    d = srv.conf / "sites" / "d.test"
    log = srv.stderr_text()
    # Client, method, path (control bytes shown as '?'), the deciding line.
    assert f"access: denied 127.0.0.1 GET /admin/x?y.txt by rule at {site}:5" in log
    assert f"access: denied 127.0.0.1 GET /a.txt by Default at {d}:6" in log
    assert "GET /a.txt by rule" not in log
    # A bad access.conf on reload is refused and the setting in force stays.
    (srv.conf / "plugins" / "access.conf").write_text("[ACCESS]\n    LogDenied Maybe\n")
    srv.reload()
    assert "access.conf:2: LogDenied: expected On or Off, got 'Maybe'" in srv.stderr_text()
    before = srv.stderr_text().count("access: denied")
    assert srv.get("/admin/x.txt").status == 403
    assert srv.stderr_text().count("access: denied") == before + 1
    # Switched off by a reload: no new lines.
    (srv.conf / "plugins" / "access.conf").write_text("[ACCESS]\n    LogDenied Off\n")
    srv.reload()
    before = srv.stderr_text().count("access: denied")
    assert srv.get("/admin/x.txt").status == 403
    assert srv.get("/a.txt", headers={"Host": "d.test"}).status == 403
    assert srv.stderr_text().count("access: denied") == before


@pytest.mark.skipif(STATIC, reason="static binary: no shared-object test plugins")
def test_request_keeps_log_setting_of_its_configuration(make_server):
    """LogDenied comes from the request's configuration, like its rules: a
    request held across a reload that turns LogDenied on is judged by the
    old rules and, as the old configuration says, not logged."""
    srv = make_access(make_server, rules=["Deny path /hold", "Deny path /admin"],
                      conf="[ACCESS]\n    LogDenied Off\n")
    srv.plugins = [str(HOLD_SO), PLUGIN]  # hold runs first, access after it
    srv.start()
    held = srv.conn()
    held.send(b"GET /hold/x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert wait_for(lambda: srv.get("/held").body == b"held 1\n")
    (srv.conf / "plugins" / "access.conf").write_text("[ACCESS]\n    LogDenied On\n")
    srv.reload()
    assert "configuration reloaded" in srv.stderr_text()
    assert srv.get("/release").body == b"released 1\n"
    assert held.read_response().status == 403
    assert "access: denied" not in srv.stderr_text()
    # Requests of the new configuration are logged.
    assert srv.get("/admin/x").status == 403
    assert wait_for(lambda: "access: denied 127.0.0.1 GET /admin/x by rule" in srv.stderr_text())
    assert srv.stderr_text().count("access: denied") == 1


def test_refused_reload_changes_no_access_setting(make_server):
    srv = make_access(make_server, rules=["Deny path /admin"], conf="[ACCESS]\n    LogDenied On\n")
    srv.start()
    conf = srv.conf / "plugins" / "access.conf"
    site = srv.conf / "sites" / "default"
    head = site.read_text().split("[ACCESS]")[0]

    def denials():
        return srv.stderr_text().count("access: denied")

    # A good access.conf turning LogDenied off, refused with a bad rule: still on.
    conf.write_text("[ACCESS]\n    LogDenied Off\n")
    site.write_text(head + section(["Deny path /admin", "Deny 10.0.0.0/40"]))
    srv.reload()
    assert "reload failed" in srv.stderr_text()
    before = denials()
    assert srv.get("/admin/x.txt").status == 403
    assert denials() == before + 1
    # A bad access.conf refuses the whole reload: the new rules do not apply.
    conf.write_text("[ACCESS]\n    LogDenied Maybe\n")
    site.write_text(head + section(["Deny path /public"]))
    srv.reload()
    assert srv.stderr_text().count("reload failed") == 2
    assert "access.conf:2: LogDenied: expected On or Off, got 'Maybe'" in srv.stderr_text()
    assert srv.get("/public/a.txt").status == 200
    assert srv.get("/admin/x.txt").status == 403
    assert denials() == before + 2


def test_no_log_by_default(make_server):
    srv = make_access(make_server, rules=["Deny path /admin"])
    srv.start()
    assert srv.get("/admin/x.txt").status == 403
    assert "access: denied" not in srv.stderr_text()


# ---- bad configuration -------------------------------------------------------------

BAD_RULES = [
    ("Allow 10.0.0.300", "'10.0.0.300' is not an IPv4 or IPv6 address"),
    ("Allow localhost", "'localhost' is not an IPv4 or IPv6 address"),
    ("Allow [::1]", "is not an IPv4 or IPv6 address"),
    ("Allow 10.0.0.0/33", "prefix length /33 is out of range for IPv4 (0 to 32)"),
    ("Deny ::1/129", "prefix length /129 is out of range for IPv6 (0 to 128)"),
    ("Deny 10.0.0.0/", "the prefix length after '/' must be a number"),
    ("Deny 10.0.0.0/-1", "the prefix length after '/' must be a number"),
    ("Deny 10.0.0.0/8/8", "the prefix length after '/' must be a number"),
    ("Deny ::ffff:10.0.0.0/64", "IPv4-mapped address needs a prefix of 96 or more"),
    ("Deny regex ^/(a", "bad regular expression '^/(a': "),
    ("Deny regex a{2,1}", "bad regular expression 'a{2,1}': "),
    ("Permit 10.0.0.0/8", "unknown key 'Permit' (Allow, Deny or Default)"),
    ("Allow path public", "path prefix 'public' must start with '/'"),
    ("Allow path /a/../b", "has an empty, '.' or '..' segment"),
    ("Allow path /a//b", "has an empty, '.' or '..' segment"),
    ("Allow path", "'path' needs a path prefix"),
    ("Allow regex", "'regex' needs a regular expression"),
    ("Allow 10.0.0.0/8 paht /x", "unexpected 'paht' after the address"),
    ("Allow 10.0.0.1 10.0.0.2", "unexpected '10.0.0.2' after the address"),
    ("Default maybe", "Default takes allow or deny, not 'maybe'"),
    ("Default deny", "Default given twice (first at line 5)"),
]


@pytest.mark.parametrize("rule,message", BAD_RULES, ids=[r for r, _ in BAD_RULES])
def test_bad_rule_is_refused_with_file_and_line(make_server, rule, message):
    # Lines: 1 [HOST], 2 ServerName, 3 DocumentRoot, 4 [ACCESS], 5 the good rule, 6 the bad.
    srv = make_access(make_server, rules=["Default allow", rule])
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{site}:6: " in err and message in err, err
    if message.startswith("bad regular expression"):
        # regerror()'s text follows.
        assert err.split(message, 1)[1].strip(), err


def test_bad_rule_in_other_site_names_that_file(make_server):
    srv = make_access(make_server, sites={"b.test": ["Allow 127.0.0.1", "Deny 1.2.3.4/99"]})
    err = srv.run_expect_failure()
    assert f"{srv.conf / 'sites' / 'b.test'}:6: " in err and "/99" in err, err


def test_check_mode_validates_rules(make_server):
    srv = make_access(make_server, rules=["Allow 10.0.0.0/8", "Deny regex ^/(x"])
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    site = srv.conf / "sites" / "default"
    assert p.returncode == 1 and f"{site}:6: bad regular expression" in p.stderr, p.stderr
    srv.site_extra = section(["Allow 10.0.0.0/8", r"Deny regex ^/(x)", "Default deny"])
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("text,line,message", [
    ("[ACCESS]\n    LogDenied On\n    Colour blue\n", 3, "unknown key 'Colour'"),
    ("[ACCESS]\n    LogDenied Sometimes\n", 2, "LogDenied: expected On or Off, got 'Sometimes'"),
    ("[RULES]\n    LogDenied On\n", 1, "unknown section [RULES]"),  # the header line
])
def test_bad_plugin_conf_is_refused(make_server, text, line, message):
    srv = make_access(make_server, conf=text)
    err = srv.run_expect_failure()
    conf = srv.conf / "plugins" / "access.conf"
    assert f"{conf}:{line}: {message}" in err, err
    assert "plugins.load:2:" in err  # which plugin failed


def test_default_conf_file_is_valid(make_server):
    srv = make_access(make_server, rules=["Deny path /admin"],
                      conf=(ROOT / "conf" / "plugins" / "access.conf").read_text())
    srv.start()
    assert srv.get("/admin/x.txt").status == 403
    assert srv.get("/a.txt").status == 200

