"""Tier 11: the auth plugin (HTTP Basic authentication) and monkey-passwd.

The plugin is loaded from plugins.load as a shared object. Password files
are written with monkey-passwd (bcrypt) and `openssl passwd -6` (SHA-512
crypt); most use bcrypt cost 4 so the tests stay fast, and the tests about
timing use cost 10 to 12.
"""

import base64
import os
import pty
import select
import signal
import stat
import subprocess
import time

import pytest

from conftest import BUILD, MONKEY, SLOW, needs_dlopen, wait_for

AUTH_SO = BUILD / "plugins" / "monkey-auth.so"
PASSWD = BUILD / "bin" / "monkey-passwd"
UNITS = BUILD / "tests" / "test_auth_units"

pytestmark = needs_dlopen


def basic(user, password):
    raw = f"{user}:{password}".encode() if isinstance(user, str) else user + b":" + password
    return "Basic " + base64.b64encode(raw).decode()


def passwd(*args, password="secret", check=True):
    """Run monkey-passwd -i with `password` on standard input."""
    p = subprocess.run([str(PASSWD), "-i", *map(str, args)], input=password + "\n",
                       capture_output=True, text=True, timeout=60)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def sha512_hash(password, salt="saltsalt"):
    p = subprocess.run(["openssl", "passwd", "-6", "-salt", salt, password],
                       capture_output=True, text=True, check=True)
    return p.stdout.strip()


def auth_server(make_server, users=None, site_extra=None, conf=None, cost=4):
    """A server whose /private is protected by realm "Private" (users file conf/users)."""
    srv = make_server()
    srv.file("private/a.txt", "secret A\n")
    srv.file("private/inner/b.txt", "secret B\n")
    srv.file("privateer.txt", "not protected\n")
    srv.file("pub/c.txt", "public C\n")
    srv.plugins = [str(AUTH_SO)]
    users_file = srv.conf / "users"
    if users is None:
        passwd("-c", "-C", cost, users_file, "alice", password="wonderland")
        with open(users_file, "a") as f:
            f.write("carol:" + sha512_hash("s3cr3t pass") + "\n")
    else:
        users_file.write_text(users)
    srv.site_extra = site_extra if site_extra is not None else (
        "[AUTH]\n    Location /private\n    Realm Private\n    Users users\n")
    if conf is not None:
        (srv.conf / "plugins").mkdir()
        (srv.conf / "plugins" / "auth.conf").write_text(conf)
    return srv


def assert_challenge(r, realm="Private"):
    assert r.status == 401, r
    assert r.header("www-authenticate") == f'Basic realm="{realm}", charset="UTF-8"'


@pytest.fixture
def srv(make_server):
    return auth_server(make_server).start()


# ---- the plugin's pure parts --------------------------------------------------

def test_unit_tests_pass():
    p = subprocess.run([str(UNITS)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


# ---- answers -------------------------------------------------------------------

def test_correct_credentials_bcrypt_and_sha512(srv):
    r = srv.get("/private/a.txt", headers={"Authorization": basic("alice", "wonderland")})
    assert r.status == 200 and r.body == b"secret A\n"
    r = srv.get("/private/a.txt", headers={"Authorization": basic("carol", "s3cr3t pass")})
    assert r.status == 200 and r.body == b"secret A\n"
    # The scheme is case-insensitive; extra spaces are allowed.
    r = srv.get("/private/a.txt",
                headers={"Authorization": "bAsIc   " + basic("alice", "wonderland")[6:]})
    assert r.status == 200


def test_refusals_carry_the_challenge(srv):
    assert_challenge(srv.get("/private/a.txt"))
    assert_challenge(srv.get("/private/a.txt", headers={"Authorization": basic("alice", "x")}))
    assert_challenge(srv.get("/private/a.txt", headers={"Authorization": basic("bob", "x")}))
    # A user's password does not work for another user.
    assert_challenge(srv.get("/private/a.txt",
                             headers={"Authorization": basic("carol", "wonderland")}))
    assert_challenge(srv.request("HEAD", "/private/a.txt"))
    assert_challenge(srv.request("POST", "/private/a.txt", body=b"x"))


MALFORMED = [
    "Bearer abc",
    "Basic",
    "Basic ",
    "Basic !!!!",
    "Basic YWxpY2U6d29uZGVybGFuZA",        # alice:wonderland without its padding
    "Basic YWxpY2U6d29uZGVybGFuZA==x",
    "Basic YW=xpY2U6d29uZGVybGFuZA==",
    "Basic=" + basic("alice", "wonderland")[6:],
    "Basicc " + basic("alice", "wonderland")[6:],
    "Basic " + base64.b64encode(b"alicewonderland").decode(),   # no colon
    basic(b"alice\0", b"wonderland"),
    basic(b"alice", b"wonder\0land"),
    basic(b"alice", b"wonder\x01land"),
    basic(b"alice", b"wonder\x7fland"),
    basic(b"a" * 300, b"wonderland"),                            # user name too long
    basic(b"alice", b"w" * 2000),                                # credentials too long
    basic(b"alice", b"wonderland") + " extra",
]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_authorization_401(srv, value):
    c = srv.conn()
    assert_challenge(c.request("GET", "/private/a.txt", headers={"Authorization": value}))
    # The connection goes on: a malformed header is an ordinary refusal.
    r = c.request("GET", "/private/a.txt", headers={"Authorization": basic("alice", "wonderland")})
    assert r.status == 200
    c.close()


def test_two_authorization_headers_401(srv):
    good = basic("alice", "wonderland")
    c = srv.conn()
    c.send(f"GET /private/a.txt HTTP/1.1\r\nHost: x\r\nAuthorization: {good}\r\n"
           f"Authorization: {good}\r\n\r\n")
    assert_challenge(c.read_response())
    c.close()


def test_authenticated_requests_carry_the_user_in_notes(make_server):
    # a request let through carries the notes remote_user and auth_type
    # (api->note_set) for the other plugins: the logger prints them here.
    # A refused request and one outside every Location have none; there the
    # logger's %u is the name the client sent (unverified, as Apache's on a
    # 401), and for an authenticated request the user the plugin noted, even
    # when the header is one the logger cannot read (a tab after "Basic")
    from test_logger import LOGGER_SO, wait_lines
    srv = auth_server(make_server)
    srv.plugins.append(str(LOGGER_SO))
    (srv.dir / "logs").mkdir()
    srv.site_extra += ("[LOGGER]\n    AccessLog ../logs/access.log\n"
                       "    Format custom %>s|%U|%{remote_user}n|%{auth_type}n|%u\n")
    srv.start()
    alice, carol = basic("alice", "wonderland"), basic("carol", "s3cr3t pass")
    for value, path in [(alice, "/private/a.txt"),  # verified on a task thread
                        (alice, "/private/inner/b.txt"),  # from the cache
                        (carol, "/private/a.txt"),
                        (carol.replace(" ", "\t"), "/private/inner/b.txt"),
                        (basic("alice", "nope"), "/private/a.txt"),
                        (alice, "/pub/c.txt")]:
        srv.get(path, headers={"Authorization": value})
    # (each worker writes its own lines: sorted, as their order may vary)
    assert sorted(wait_lines(srv.dir / "logs" / "access.log", 6)) == sorted([
        "200|/private/a.txt|alice|Basic|alice",
        "200|/private/inner/b.txt|alice|Basic|alice",
        "200|/private/a.txt|carol|Basic|carol",
        "200|/private/inner/b.txt|carol|Basic|carol",
        "401|/private/a.txt|-|-|alice",
        "200|/pub/c.txt|-|-|alice"])


def test_paths_outside_every_location_are_not_protected(srv):
    assert srv.get("/pub/c.txt").body == b"public C\n"
    assert srv.get("/privateer.txt").body == b"not protected\n"  # not a segment of /private
    # The root is outside every location: no challenge; a directory without
    # an index (and no dirlisting) is refused by the static handler.
    r = srv.get("/")
    assert r.status == 403
    assert r.header("www-authenticate") is None
    for path in ("/private", "/private/", "/private/inner/b.txt", "//private/a.txt",
                 "/pub/../private/a.txt", "/%70rivate/a.txt", "/private/./a.txt",
                 "/private/nothing-here"):
        assert_challenge(srv.get(path))


def test_index_file_is_checked_as_its_own_path(make_server):
    # a directory answered with its index file: the index file's path goes
    # through the request hooks too (nginx's index is an internal redirect),
    # so a Location naming the index file protects the directory as well
    srv = auth_server(make_server, site_extra=(
        "[AUTH]\n    Location /dir/index.html\n    Realm Private\n    Users users\n"))
    srv.file("dir/index.html", "dir index\n")
    srv.file("dir/other.txt", "other\n")
    srv.start()
    for path in ("/dir/index.html", "/dir/", "/dir//", "/pub/../dir/"):
        assert_challenge(srv.get(path))
    assert_challenge(srv.request("HEAD", "/dir/"))
    assert_challenge(srv.get("/dir/", headers={"Authorization": basic("alice", "nope")}))
    good = {"Authorization": basic("alice", "wonderland")}
    c = srv.conn()
    for _ in range(2):  # verified on a task thread, then from the plugin's cache
        r = c.request("GET", "/dir/", headers=good)
        assert r.status == 200 and r.body == b"dir index\n"
    assert c.request("GET", "/dir/other.txt").status == 200
    assert_challenge(c.request("GET", "/dir/"))
    c.close()


def test_longest_location_wins(make_server):
    srv = make_server()
    srv.file("area/x.txt", "outer\n")
    srv.file("area/inner/y.txt", "inner\n")
    srv.plugins = [str(AUTH_SO)]
    passwd("-c", "-C", 4, srv.conf / "outer.users", "olivia", password="o-pass")
    passwd("-c", "-C", 4, srv.conf / "inner.users", "ian", password="i-pass")
    # The inner section comes first and the two [AUTH] sections follow each other.
    srv.site_extra = (f"[AUTH]\n    Location /area/inner/\n    Realm Inner realm\n"
                      f"    Users inner.users\n"
                      f"[AUTH]\n    Realm Outer realm\n    Location /area\n"
                      f"    Users {srv.conf / 'outer.users'}\n")
    srv.start()
    olivia = {"Authorization": basic("olivia", "o-pass")}
    ian = {"Authorization": basic("ian", "i-pass")}
    assert srv.get("/area/x.txt", headers=olivia).body == b"outer\n"
    assert_challenge(srv.get("/area/x.txt", headers=ian), "Outer realm")
    assert srv.get("/area/inner/y.txt", headers=ian).body == b"inner\n"
    assert_challenge(srv.get("/area/inner/y.txt", headers=olivia), "Inner realm")
    assert_challenge(srv.get("/area/inner"), "Inner realm")
    assert_challenge(srv.get("/area/innerx"), "Outer realm")


def test_realm_is_quoted(make_server):
    srv = auth_server(make_server, site_extra=(
        '[AUTH]\n    Location /\n    Realm Team "A" \\ ops\n    Users users\n')).start()
    r = srv.get("/pub/c.txt")
    assert r.status == 401
    assert r.header("www-authenticate") == 'Basic realm="Team \\"A\\" \\\\ ops", charset="UTF-8"'
    assert srv.get("/pub/c.txt", headers={"Authorization": basic("alice", "wonderland")}).status \
        == 200


def test_only_the_site_with_a_section_is_protected(make_server, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("other\n")
    srv = auth_server(make_server, site_extra="")
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test\n    DocumentRoot {other}\n"
                                "[AUTH]\n    Location /\n    Realm Other\n    Users users\n")
    srv.start()
    assert srv.get("/private/a.txt").status == 200
    assert_challenge(srv.get("/o.txt", headers={"Host": "other.test"}), "Other")
    r = srv.get("/o.txt", headers={"Host": "other.test",
                                   "Authorization": basic("carol", "s3cr3t pass")})
    assert r.status == 200 and r.body == b"other\n"


def test_keepalive_survives_401(srv):
    c = srv.conn()
    r = c.request("GET", "/private/a.txt")
    assert_challenge(r)
    assert (r.header("connection") or "").lower() != "close"
    assert c.request("GET", "/private/a.txt",
                     headers={"Authorization": basic("alice", "nope")}).status == 401
    r = c.request("GET", "/private/a.txt", headers={"Authorization": basic("alice", "wonderland")})
    assert r.status == 200 and r.body == b"secret A\n"
    assert c.request("GET", "/pub/c.txt").status == 200
    # Pipelined: a refused request and an accepted one.
    good = basic("carol", "s3cr3t pass")
    c.send(f"GET /private/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
           f"GET /private/a.txt HTTP/1.1\r\nHost: x\r\nAuthorization: {good}\r\n\r\n")
    assert c.read_response().status == 401
    assert c.read_response().status == 200
    c.close()


# ---- work off the worker, timing, cache ----------------------------------------

def test_verification_does_not_block_the_worker(make_server):
    srv = auth_server(make_server, cost=12)
    srv.set(Workers=1)
    srv.start()
    slow = srv.conn()
    # Wrong password: never cached, so each try costs a full bcrypt.
    slow.send(f"GET /private/a.txt HTTP/1.1\r\nHost: x\r\n"
              f"Authorization: {basic('alice', 'not-it')}\r\n\r\n")
    t0 = time.monotonic()
    time.sleep(0.02)
    fast = srv.get("/pub/c.txt")
    fast_time = time.monotonic() - t0
    assert fast.body == b"public C\n"
    # The only worker answered while the verification was still running.
    pending, _, _ = select.select([slow.sock], [], [], 0)
    assert not pending, f"the verification ended before the other request ({fast_time:.3f} s)"
    assert_challenge(slow.read_response())
    total = time.monotonic() - t0
    assert total > fast_time
    slow.close()


def test_unknown_user_costs_as_much_as_a_known_one(make_server):
    srv = auth_server(make_server, cost=10).start()

    def timed(user):
        c = srv.conn()
        t0 = time.monotonic()
        r = c.request("GET", "/private/a.txt", headers={"Authorization": basic(user, "guess")})
        c.close()
        assert r.status == 401
        return time.monotonic() - t0

    known = min(timed("alice") for _ in range(3))
    unknown = min(timed("nobody") for _ in range(3))
    # Without the dummy verification an unknown user would cost well under 1 ms.
    assert unknown > 0.5 * known, (known, unknown)
    assert known > 0.01, known


def test_cache_skips_the_second_hash(make_server):
    srv = auth_server(make_server, cost=12).start()
    good = {"Authorization": basic("alice", "wonderland")}
    c = srv.conn()
    t0 = time.monotonic()
    assert c.request("GET", "/private/a.txt", headers=good).status == 200
    first = time.monotonic() - t0
    t0 = time.monotonic()
    assert c.request("GET", "/private/a.txt", headers=good).status == 200
    second = time.monotonic() - t0
    assert second < first / 4, (first, second)
    # The cache holds credentials, not users: a wrong password still fails.
    assert_challenge(c.request("GET", "/private/a.txt",
                               headers={"Authorization": basic("alice", "wonderlan")}))
    c.close()


def test_cache_off(make_server):
    srv = auth_server(make_server, cost=11, conf="[AUTH]\n    CacheSize 0\n").start()
    good = {"Authorization": basic("alice", "wonderland")}
    times = []
    for _ in range(2):
        t0 = time.monotonic()
        assert srv.get("/private/a.txt", headers=good).status == 200
        times.append(time.monotonic() - t0)
    assert times[1] > times[0] / 3, times


def test_cache_expires(make_server):
    srv = auth_server(make_server, cost=11, conf="[AUTH]\n    CacheTTL 1\n").start()
    good = {"Authorization": basic("alice", "wonderland")}
    t0 = time.monotonic()
    assert srv.get("/private/a.txt", headers=good).status == 200
    first = time.monotonic() - t0
    time.sleep(2.1)
    t0 = time.monotonic()
    assert srv.get("/private/a.txt", headers=good).status == 200
    again = time.monotonic() - t0
    assert again > first / 3, (first, again)


# ---- bounded verification work ---------------------------------------------------
#
# Each attempt queues a bcrypt on the task threads (two here: Workers 2). The
# queue must not outlive clients that left, nor let one client or one plugin
# take it over. Waits are measured in rounds: the time the two threads take
# for two verifications side by side, on this machine, now.

DIRLISTING_SO = BUILD / "plugins" / "monkey-dirlisting.so"


def attempt(user="alice", password="wrong"):
    return (f"GET /private/a.txt HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: {basic(user, password)}\r\n\r\n").encode()


def one_round(srv):
    """Seconds for two verifications at once (a wrong password is never cached)."""
    times = []
    for _ in range(2):
        pair = [srv.conn(), srv.conn(source="127.0.0.9")]
        t0 = time.monotonic()
        for c in pair:
            c.send(attempt(password="calibrating"))
        for c in pair:
            assert_challenge(c.read_response())
            c.close()
        times.append(time.monotonic() - t0)
    return min(times)


def test_attempts_of_clients_that_hung_up_are_dropped(make_server):
    srv = auth_server(make_server, cost=12).start()
    rnd = one_round(srv)
    # 40 attempts closed at once by the client, from 5 addresses (8 each,
    # within TaskQueuePerClient): each would cost a whole verification.
    for i in range(40):
        c = srv.conn(source=f"127.0.0.{2 + i % 5}")
        c.send(attempt())
        c.close()
    t0 = time.monotonic()
    r = srv.get("/private/a.txt", headers={"Authorization": basic("alice", "wonderland")})
    elapsed = time.monotonic() - t0
    assert r.status == 200 and r.body == b"secret A\n"
    # Behind the 40 the real user would wait 20 rounds; only the attempts
    # already running when their clients left are waited for.
    assert elapsed < 5 * rnd, (elapsed, rnd)


def test_one_client_cannot_fill_the_queue(make_server):
    srv = auth_server(make_server, cost=12)
    # The 8 queued attempts wait up to 5 rounds of bcrypt: on a loaded machine
    # that passes the default Timeout (5 s), whose 503 is not the refusal
    # tested here.
    srv.server_conf["Timeout"] = str(int(30 * SLOW))
    srv.start()
    rnd = one_round(srv)
    flood = [srv.conn(source="127.0.0.2") for _ in range(20)]
    for c in flood:
        c.send(attempt())
    # TaskQueuePerClient (8) of them are queued, the rest refused at once.
    deadline = time.monotonic() + 2 * SLOW
    while len(select.select([c.sock for c in flood], [], [], 0.05)[0]) < 12:
        assert time.monotonic() < deadline, "no attempt was refused"
    t0 = time.monotonic()
    r = srv.get("/private/a.txt", headers={"Authorization": basic("alice", "wonderland")})
    elapsed = time.monotonic() - t0
    assert r.status == 200
    statuses = []
    for c in flood:
        r = c.read_response()
        statuses.append(r.status)
        if r.status == 503:
            assert r.header("retry-after") == "1", r
        c.close()
    assert statuses.count(401) >= 8 and statuses.count(503) >= 10, statuses
    assert statuses.count(401) + statuses.count(503) == 20, statuses
    assert "TaskQueuePerClient" in srv.stderr_text()
    # The real user, another client with nothing running, went before the
    # flood's queued attempts: a round for those running, one for its own
    # (5 rounds behind the 8 queued, 11 behind all 20).
    assert elapsed < 4 * rnd, (elapsed, rnd)


def test_password_flood_does_not_starve_listings(make_server):
    srv = auth_server(make_server, cost=12, site_extra=(
        "[AUTH]\n    Location /private\n    Realm Private\n    Users users\n"
        "[DIRLISTING]\n    Path /pub\n"))
    srv.plugins = [str(AUTH_SO), str(DIRLISTING_SO)]
    srv.start()
    rnd = one_round(srv)
    # Unknown users cost a verification too, and share the task threads
    # with the listings.
    flood = [srv.conn(source=f"127.0.0.{2 + i % 5}") for i in range(40)]
    for i, c in enumerate(flood):
        c.send(attempt(user=f"nobody{i}"))
    t0 = time.monotonic()
    r = srv.get("/pub/")
    elapsed = time.monotonic() - t0
    assert r.status == 200 and b"c.txt" in r.body, r
    # The plugins take turns: the listing waits for the attempts already
    # running, not for the 40 queued (20 rounds, past Timeout).
    assert elapsed < 5 * rnd, (elapsed, rnd)
    for c in flood:
        c.close()


# ---- reload ---------------------------------------------------------------------

def test_reload_adds_and_removes_users(srv):
    alice = {"Authorization": basic("alice", "wonderland")}
    dave = {"Authorization": basic("dave", "new-user")}
    assert srv.get("/private/a.txt", headers=alice).status == 200  # now in the cache
    assert srv.get("/private/a.txt", headers=dave).status == 401
    users = srv.conf / "users"
    lines = [line for line in users.read_text().splitlines() if not line.startswith("alice:")]
    users.write_text("\n".join(lines) + "\n")
    passwd("-C", 4, users, "dave", password="new-user")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: srv.get("/private/a.txt", headers=dave).status == 200)
    # Removed, and the cached credential went with the old configuration.
    assert_challenge(srv.get("/private/a.txt", headers=alice))
    assert srv.get("/private/a.txt",
                   headers={"Authorization": basic("carol", "s3cr3t pass")}).status == 200


def test_reload_with_a_bad_password_file_keeps_the_old_one(srv):
    alice = {"Authorization": basic("alice", "wonderland")}
    users = srv.conf / "users"
    users.write_text(users.read_text() + "mallory:$1$ab$dslkcXxVH.x8LwW1W/oAB/\n")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: f"{users}:3:" in srv.stderr_text())
    assert "MD5" in srv.stderr_text()
    assert srv.get("/private/a.txt", headers=alice).status == 200


def test_bad_auth_conf_refuses_the_whole_reload(srv):
    dave = {"Authorization": basic("dave", "new-user")}
    (srv.conf / "plugins").mkdir(exist_ok=True)
    conf = srv.conf / "plugins" / "auth.conf"
    conf.write_text("[AUTH]\n    CacheSize lots\n")
    passwd("-C", 4, srv.conf / "users", "dave", password="new-user")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: "reload failed" in srv.stderr_text())
    assert f"{conf}:2:" in srv.stderr_text()
    # The users file changed with it is not read either.
    assert_challenge(srv.get("/private/a.txt", headers=dave))
    conf.write_text("[AUTH]\n    CacheSize 8\n")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: srv.get("/private/a.txt", headers=dave).status == 200)


def test_reload_reads_auth_conf(make_server):
    srv = auth_server(make_server, cost=11, conf="[AUTH]\n    CacheSize 0\n").start()
    (srv.conf / "plugins" / "auth.conf").write_text("[AUTH]\n    CacheSize 8\n")
    srv.signal(signal.SIGHUP)
    assert wait_for(lambda: "configuration reloaded" in srv.stderr_text())
    good = {"Authorization": basic("alice", "wonderland")}
    t0 = time.monotonic()
    assert srv.get("/private/a.txt", headers=good).status == 200
    first = time.monotonic() - t0
    t0 = time.monotonic()
    assert srv.get("/private/a.txt", headers=good).status == 200
    assert time.monotonic() - t0 < first / 4  # the cache is on again


# ---- configuration refused at start ---------------------------------------------

GOOD_BCRYPT = "$2b$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO"

BAD_SECTIONS = [
    # (section text, line of the error in the site file, part of the message)
    ("[AUTH]\n    Location /p\n    Realm R\n    Users users\n    Colour blue\n", 8, "Colour"),
    ("[AUTH]\n    Location /p\n    Users users\n", 5, "Realm is missing"),
    ("[AUTH]\n    Realm R\n    Users users\n", 5, "Location is missing"),
    ("[AUTH]\n    Location /p\n    Realm R\n", 5, "Users is missing"),
    ("[AUTH]\n    Location p\n    Realm R\n    Users users\n", 5, "must start with '/'"),
    ("[AUTH]\n    Location /a/../b\n    Realm R\n    Users users\n", 5, "'..'"),
    ("[AUTH]\n    Location /a//b\n    Realm R\n    Users users\n", 5, "'//'"),
    ("[AUTH]\n    Location /p\n    Location /q\n    Realm R\n    Users users\n", 6, "twice"),
    ("[AUTH]\n    Location /p\n    Realm R\n    Users users\n"
     "[AUTH]\n    Location /p/\n    Realm S\n    Users users\n", 9, "already protected at line 5"),
    ("[AUTH]\n    Location /p\n    Realm R\n    Users missing.users\n", 7, "cannot open"),
    ("[AUTH]\n    Location /p\n    Realm R\n    Users /\n", 7, "not a regular file"),
    ("[AUTH]\n    Location /p\n    Realm " + "r" * 300 + "\n    Users users\n", 6, "1 to 255"),
]


@pytest.mark.parametrize("section,line,message", BAD_SECTIONS)
def test_bad_section_refused_with_file_and_line(make_server, section, line, message):
    srv = auth_server(make_server, users=f"alice:{GOOD_BCRYPT}\n", site_extra=section)
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{site}:{line}:" in err and message in err, err


BAD_USERS = [
    # (password file, line of the error, part of the message)
    ("alice:$1$ab$dslkcXxVH.x8LwW1W/oAB/\n", 1, "MD5"),
    (f"alice:{GOOD_BCRYPT}\nbob:$apr1$ab$jiiV6N7hIIuIoJbc1hxOE/\n", 2, "Apache MD5"),
    (f"# comment\n\nalice:{GOOD_BCRYPT}\nbob:abJnggxhB/yWI\n", 4, "DES"),
    ("alice:secret\n", 1, "plain-text"),
    ("alice:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\n", 1, "SHA-1"),
    ("alice:$5$abc$xyz\n", 1, "SHA-256"),
    (f"alice:{GOOD_BCRYPT[:-1]}\n", 1, "malformed bcrypt"),
    (f"alice:{GOOD_BCRYPT}\nalice:{GOOD_BCRYPT}\n", 2, "listed twice"),
    (f"alice:{GOOD_BCRYPT}\nbob\n", 2, "user:hash"),
    (f"alice:{GOOD_BCRYPT}\n:{GOOD_BCRYPT}\n", 2, "1 to 255"),
    (f"alice:{GOOD_BCRYPT}\nbo\0b:{GOOD_BCRYPT}\n", 2, "NUL"),
    ("alice:\n", 1, "empty hash"),
]


@pytest.mark.parametrize("users,line,message", BAD_USERS)
def test_bad_password_file_refused_with_file_and_line(make_server, users, line, message):
    srv = auth_server(make_server, users=users)
    err = srv.run_expect_failure()
    site = srv.conf / "sites" / "default"
    assert f"{srv.conf / 'users'}:{line}:" in err and message in err, err
    assert f"{site}:7" in err  # the Users entry that named the file


def test_check_mode_refuses_a_bad_password_file(make_server):
    srv = auth_server(make_server, users=f"alice:{GOOD_BCRYPT}\nbob:$1$ab$dslkcXxVH.x8LwW1W/oAB/\n")
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert p.returncode == 1 and f"{srv.conf / 'users'}:2:" in p.stderr, p.stderr
    (srv.conf / "users").write_text(f"alice:{GOOD_BCRYPT}\n")
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("conf,line,message", [
    ("[AUTH]\n    CacheSize 10\n    Colour blue\n", 3, "unknown key"),
    ("[AUTH]\n    CacheSize 70000\n", 2, "CacheSize"),
    ("[AUTH]\n    CacheSize -1\n", 2, "CacheSize"),
    ("[AUTH]\n    CacheTTL 0\n", 2, "CacheTTL"),
    ("[OTHER]\n    CacheTTL 5\n", 1, "unknown section [OTHER]"),  # the header line
])
def test_bad_plugin_conf_refused(make_server, conf, line, message):
    srv = auth_server(make_server, conf=conf)
    err = srv.run_expect_failure()
    assert f"{srv.conf / 'plugins' / 'auth.conf'}:{line}:" in err and message in err, err
    assert "plugins.load:2:" in err


def test_section_without_plugin_is_refused(make_server):
    srv = auth_server(make_server)
    srv.plugins = []
    err = srv.run_expect_failure()
    assert f"{srv.conf / 'sites' / 'default'}:4:" in err


# ---- monkey-passwd -----------------------------------------------------------------

def test_passwd_creates_replaces_and_appends(tmp_path):
    f = tmp_path / "users"
    old_umask = os.umask(0)  # the mode comes from the tool, not from the umask
    try:
        passwd("-c", "-C", 4, f, "alice", password="one")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    lines = f.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alice:$2b$04$") and len(lines[0]) == 66
    # A comment and a line without an end survive; bob is appended after them.
    f.write_bytes(f.read_bytes() + b"# the team\r\nzed:" + GOOD_BCRYPT.encode())
    passwd("-C", 5, f, "bob", password="two")
    lines = f.read_bytes().decode().split("\n")
    assert lines[0].startswith("alice:$2b$04$")
    assert lines[1] == "# the team\r"
    assert lines[2] == "zed:" + GOOD_BCRYPT
    assert lines[3].startswith("bob:$2b$05$") and lines[4] == ""
    # Replace alice in place, with SHA-512 crypt; everything else is untouched.
    before = f.read_bytes().decode().split("\n")
    passwd("--sha512", f, "alice", password="three")
    after = f.read_bytes().decode().split("\n")
    assert after[0].startswith("alice:$6$") and after[0] != before[0]
    assert after[1:] == before[1:]
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    passwd("--sha512", "-C", 6000, f, "zed", password="four")
    assert f.read_bytes().decode().split("\n")[2].startswith("zed:$6$rounds=6000$")
    # No temporary file is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users"]


def test_passwd_hashes_work_with_the_server(make_server):
    srv = auth_server(make_server, users="")
    users = srv.conf / "users"
    passwd("-C", 4, users, "bcrypt-user", password="pw one")
    passwd("--sha512", users, "sha-user", password="pw:two")
    passwd("-C", 4, users, "späß", password="ünïcödé")
    srv.start()
    for user, password in (("bcrypt-user", "pw one"), ("sha-user", "pw:two")):
        r = srv.get("/private/a.txt", headers={"Authorization": basic(user, password)})
        assert r.status == 200, user
        assert_challenge(srv.get("/private/a.txt",
                                 headers={"Authorization": basic(user, password + "x")}))
    r = srv.get("/private/a.txt",
                headers={"Authorization": basic("späß".encode(), "ünïcödé".encode())})
    assert r.status == 200


def test_passwd_refusals_and_exit_statuses(tmp_path):
    f = tmp_path / "users"
    assert passwd(f, "alice", check=False).returncode == 1            # missing without -c
    passwd("-c", "-C", 4, f, "alice")
    before = f.read_bytes()
    p = passwd("-c", "-C", 4, f, "bob", check=False)                 # exists with -c
    assert p.returncode == 1 and "exists" in p.stderr
    assert passwd("-C", 4, f, "bob", password="", check=False).returncode == 3
    assert passwd("-C", 4, f, "bob", password="a\x01b", check=False).returncode == 3
    assert passwd("-C", 4, f, "bob", password="x" * 600, check=False).returncode == 3
    assert passwd("-C", 3, f, "bob", check=False).returncode == 2
    assert passwd("-C", "12x", f, "bob", check=False).returncode == 2
    assert passwd("--sha512", "-C", 999, f, "bob", check=False).returncode == 2
    assert passwd("-C", 4, f, "bo:b", check=False).returncode == 2
    assert passwd("-C", 4, f, "", check=False).returncode == 2
    assert passwd("-C", 4, f, " bob", check=False).returncode == 2
    assert passwd("-C", 4, f, check=False).returncode == 2
    assert passwd("--bogus", f, "bob", check=False).returncode == 2
    p = subprocess.run([str(PASSWD), "-i", "-C", "4", str(f), "bob"], input=b"a\0b\n",
                       capture_output=True)
    assert p.returncode == 3
    assert f.read_bytes() == before                                   # nothing changed
    assert passwd("-C", 4, tmp_path / "no" / "dir", "bob", check=False).returncode == 1
    # Without -i and without a terminal.
    p = subprocess.run([str(PASSWD), str(f), "bob"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, start_new_session=True)
    assert p.returncode == 3 and "-i" in p.stderr


def test_passwd_help():
    p = subprocess.run([str(PASSWD), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for word in ("SYNOPSIS", "-c", "-C", "--sha512", "-i", "EXIT STATUS", "0640"):
        assert word in p.stdout


def run_on_terminal(args, answers):
    """Run monkey-passwd on a pseudo-terminal, typing `answers`; (status, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(PASSWD), [str(PASSWD), *map(str, args)])
    out = b""
    for answer in answers:
        deadline = time.monotonic() + 10
        while not out.rstrip().endswith(b":"):
            assert time.monotonic() < deadline, out
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                out += os.read(fd, 1024)
        os.write(fd, answer.encode() + b"\n")
        out += b"\n--\n"
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_passwd_reads_the_terminal_without_echo(tmp_path):
    f = tmp_path / "users"
    rc, out = run_on_terminal(["-c", "-C", 4, f, "alice"], ["hidden-pw", "hidden-pw"])
    assert rc == 0, out
    assert "New password:" in out and "Re-type new password:" in out
    assert "hidden-pw" not in out
    assert f.read_text().startswith("alice:$2b$04$")
    rc, out = run_on_terminal(["-C", 4, f, "bob"], ["one", "two"])
    assert rc == 3 and "do not match" in out
    assert "bob" not in f.read_text()


def test_shipped_auth_conf_is_valid(make_server):
    from conftest import ROOT
    shipped = (ROOT / "conf" / "plugins" / "auth.conf").read_text()
    srv = auth_server(make_server, conf=shipped).start()
    good = {"Authorization": basic("alice", "wonderland")}
    assert srv.get("/private/a.txt", headers=good).status == 200
