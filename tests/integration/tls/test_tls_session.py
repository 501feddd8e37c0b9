"""TLS session resumption, protocols and ciphers, and the tls plugin's counters
(plugins/tls: tls_session.c, tls_conf.c, tls_stats.c): tickets on TLS 1.3 and
1.2, session ids, ticket keys rotated by the server or shared through a
TicketKeyFile, no resumption across sites, no early data, Protocols, Ciphers
and Ciphersuites and their checks, the server's cipher order (TLS 1.2), and the counters in the control plugin's
status. Resumption is driven with `openssl s_client -sess_out/-sess_in`."""

import json
import math
import os
import re
import signal
import socket
import ssl
import subprocess
import time

import pytest

from conftest import BUILD, MONKEY, SLOW
from tlsutil import TLS_MARKS, make_cert, tls_connect, tls_section, tls_server

pytestmark = TLS_MARKS

CONTROL_SO = BUILD / "plugins" / "monkey-control.so"
CTL = BUILD / "bin" / "monkey-ctl"


def control_conf(srv):
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "control.conf").write_text("[CONTROL]\n    Socket ctl.sock\n")


def wait_ctl_socket(srv):
    deadline = time.monotonic() + 10 * SLOW
    while not (srv.conf / "ctl.sock").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def tls_conf(srv, text):
    """Write conf/plugins/tls.conf: the plugin-wide [TLS] keys."""
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "tls.conf").write_text("[TLS]\n" + text)


def s_client(srv, sni, *args, sess_out=None, sess_in=None, path="/hello.txt"):
    """One HTTPS request with openssl s_client; returns its output (text)."""
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{srv.port}", "-servername", sni,
           "-ign_eof", *args]
    if sess_out:
        cmd += ["-sess_out", str(sess_out)]
    if sess_in:
        cmd += ["-sess_in", str(sess_in)]
    request = f"GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n"
    p = subprocess.run(cmd, input=request, capture_output=True, text=True, timeout=20 * SLOW)
    return p.stdout + p.stderr


def outcome(out):
    """"New" or "Reused", from s_client's summary line."""
    m = re.search(r"^(New|Reused), (TLSv1\.[23])", out, re.M)
    assert m, out
    return m.group(1)


def ticket_name(out):
    """The key name of the last session ticket s_client printed (its first 16 bytes)."""
    rows = re.findall(r"TLS session ticket:\n\s+0000 - ([0-9a-f -]+?)  ", out)
    assert rows, out
    return rows[-1].replace("-", " ").replace(" ", "")


def resume(srv, tmp_path, sni1, sni2, *args, other=None):
    """A session from `srv` (SNI sni1), offered again to `other` or `srv` (SNI
    sni2): (first output, second output)."""
    sess = tmp_path / "session.pem"
    if sess.exists():
        sess.unlink()
    first = s_client(srv, sni1, *args, sess_out=sess)
    assert outcome(first) == "New"
    assert sess.exists(), first
    second = s_client(other or srv, sni2, *args, sess_in=sess)
    return first, second


VERSIONS = [pytest.param(["-tls1_3"], id="tls1.3"), pytest.param(["-tls1_2"], id="tls1.2")]
ALL_KINDS = VERSIONS + [pytest.param(["-tls1_2", "-no_ticket"], id="session-id")]


def key_file(path, *keys):
    path.write_bytes(b"".join(keys))
    return path


# ---- resumption ------------------------------------------------------------------


@pytest.mark.parametrize("args", ALL_KINDS)
def test_session_resumes(make_server, tmp_path, args):
    srv = tls_server(make_server).start()
    first, second = resume(srv, tmp_path, "localhost", "localhost", *args)
    assert outcome(second) == "Reused", second
    assert "HTTP/1.1 200 OK" in second and "Hello World!" in second
    if "-no_ticket" in args:
        assert "TLS session ticket:" not in first  # a session id, kept by the server
    else:
        assert "TLS session ticket lifetime hint: 3600 (seconds)" in first


def per_worker_requests(srv):
    return [w["requests"] for w in json.loads(ctl_status(srv, True))["per_worker"]]


@pytest.mark.parametrize("args", ALL_KINDS)
def test_one_session_resumes_on_every_worker(make_server, tmp_path, args):
    """Ticket keys and the session cache belong to the server, not to a
    worker: a session made on one connection resumes on 20 new ones, which
    the kernel spreads over the workers (SO_REUSEPORT, one socket each)."""
    srv = tls_server(make_server, plugins=[str(CONTROL_SO)])
    srv.set(Workers=2, Balancing="reuseport")
    control_conf(srv)
    srv.start()
    wait_ctl_socket(srv)
    sess = tmp_path / "session.pem"
    assert outcome(s_client(srv, "localhost", *args, sess_out=sess)) == "New"
    for i in range(20):
        out = s_client(srv, "localhost", *args, sess_in=sess)
        assert outcome(out) == "Reused", f"connection {i + 1}: {out}"
        assert "Hello World!" in out
    served = per_worker_requests(srv)
    assert sum(served) == 21
    # 21 connections from 21 source ports: both workers took some (the
    # chance that the kernel's hash sent all to one is 2 / 2^21)
    assert len(served) == 2 and all(served), served


@pytest.mark.parametrize("args", ALL_KINDS)
def test_session_of_another_site_does_not_resume(make_server, tmp_path, args):
    srv = tls_server(make_server, sites=["a.test", "b.test"]).start()
    first, second = resume(srv, tmp_path, "a.test", "b.test", *args)
    assert outcome(second) == "New", second
    assert "subject=CN = b.test" in second
    assert "site b.test" in s_client(srv, "b.test", *args, path="/site.txt")
    # The same session on its own site does resume.
    sess = tmp_path / "session.pem"
    assert outcome(s_client(srv, "a.test", *args, sess_in=sess)) == "Reused"


def test_tickets_off_keeps_session_ids(make_server, tmp_path):
    srv = tls_server(make_server)
    tls_conf(srv, "    SessionTickets Off\n")
    srv.start()
    first, second = resume(srv, tmp_path, "localhost", "localhost", "-tls1_2")
    assert "TLS session ticket:" not in first  # the client asked for one; none came
    assert outcome(second) == "Reused"  # by session id


@pytest.mark.parametrize("args", VERSIONS)
def test_tickets_off_and_no_cache_resume_nothing(make_server, tmp_path, args):
    srv = tls_server(make_server)
    tls_conf(srv, "    SessionTickets Off\n    SessionCache 0\n")
    srv.start()
    first, second = resume(srv, tmp_path, "localhost", "localhost", *args)
    assert outcome(second) == "New", second


def test_early_data_stays_off(make_server, tmp_path):
    srv = tls_server(make_server).start()
    first, _ = resume(srv, tmp_path, "localhost", "localhost", "-tls1_3")
    assert "Max Early Data: 0" in first
    early = tmp_path / "early.txt"
    early.write_text("GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
    out = s_client(srv, "localhost", "-tls1_3", "-early_data", str(early),
                   sess_in=tmp_path / "session.pem")
    assert outcome(out) == "Reused"
    assert "Early data was not sent" in out


# ---- ticket keys -----------------------------------------------------------------


def test_ticket_keys_rotate_and_old_tickets_are_renewed(make_server, tmp_path):
    # Keys are made as tickets need them: each step below waits from the
    # moment the key it counts on was made at the latest, and the period
    # leaves a slow handshake (sanitizers, one CPU) time to fit in it.
    period = math.ceil(SLOW)
    srv = tls_server(make_server)
    tls_conf(srv, f"    TicketKeyRotation {period}s\n")
    srv.start()
    sess = tmp_path / "session.pem"
    first = s_client(srv, "localhost", "-tls1_2", sess_out=sess)
    made = time.monotonic()  # the first key, made by this first ticket
    name1 = ticket_name(first)
    # Within the period the same key seals, and a resumption keeps its ticket.
    again = s_client(srv, "localhost", "-tls1_2", sess_in=sess)
    assert outcome(again) == "Reused" and ticket_name(again) == name1
    time.sleep(max(0.0, made + period + 0.1 - time.monotonic()))
    # One period later the key is the previous one: it still opens, and the
    # ticket is renewed under the new key.
    renewed = tmp_path / "renewed.pem"
    second = s_client(srv, "localhost", "-tls1_2", sess_in=sess, sess_out=renewed)
    made = time.monotonic()  # the second key, made by this renewal
    assert outcome(second) == "Reused"
    assert ticket_name(second) != name1
    time.sleep(max(0.0, made + period + 0.1 - time.monotonic()))
    # Another period later (two since the first key was made) the next key
    # takes the place of the second, and the first is gone: a full handshake.
    assert outcome(s_client(srv, "localhost", "-tls1_2", sess_in=sess)) == "New"


@pytest.mark.parametrize("args", VERSIONS)
def test_ticket_key_file_shared_by_two_servers(make_server, tmp_path, args):
    k1, k2 = os.urandom(80), os.urandom(80)
    srv1 = tls_server(make_server)
    tls_conf(srv1, f"    TicketKeyFile {key_file(tmp_path / 'k1.key', k1)}\n")
    srv1.start()
    # Server 2 seals with k2 and still opens k1's tickets (two files; a
    # relative path is relative to the configuration directory).
    srv2 = tls_server(make_server)
    key_file(srv2.conf / "k2.key", k2)
    tls_conf(srv2, f"    TicketKeyFile k2.key\n    TicketKeyFile {tmp_path / 'k1.key'}\n")
    srv2.start()
    srv3 = tls_server(make_server).start()  # keys of its own
    first, second = resume(srv1, tmp_path, "localhost", "localhost", *args, other=srv2)
    assert ticket_name(first) == k1[:16].hex()
    assert outcome(second) == "Reused", second
    assert ticket_name(second) == k2[:16].hex()  # renewed under the key that seals
    sess = tmp_path / "session.pem"
    assert outcome(s_client(srv3, "localhost", *args, sess_in=sess)) == "New"


def test_ticket_key_file_is_read_again_on_reload(make_server, tmp_path):
    keys = key_file(tmp_path / "ticket.key", os.urandom(80))
    srv = tls_server(make_server)
    tls_conf(srv, f"    TicketKeyFile {keys}\n")
    srv.start()
    first, second = resume(srv, tmp_path, "localhost", "localhost", "-tls1_3")
    assert outcome(second) == "Reused"
    key_file(keys, os.urandom(80))
    before = srv.stderr_text().count("configuration reloaded")
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10 * SLOW
    while srv.stderr_text().count("configuration reloaded") == before:
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.05)
    out = s_client(srv, "localhost", "-tls1_3", sess_in=tmp_path / "session.pem")
    assert outcome(out) == "New", out
    assert ticket_name(out) == keys.read_bytes()[:16].hex()


# ---- protocols and ciphers -------------------------------------------------------


def test_tls13_only_refuses_a_tls12_client(make_server):
    srv = tls_server(make_server)
    tls_conf(srv, "    Protocols TLSv1.3\n")
    srv.start()
    with pytest.raises(ssl.SSLError):
        tls_connect(srv.port, sni="localhost", max_version=ssl.TLSVersion.TLSv1_2)
    s = tls_connect(srv.port, sni="localhost")
    assert s.version() == "TLSv1.3"
    s.close()


def test_tls12_only_refuses_a_tls13_client(make_server):
    srv = tls_server(make_server)
    tls_conf(srv, "    Protocols TLSv1.2\n")
    srv.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW) as raw:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(raw, server_hostname="localhost")
    s = tls_connect(srv.port, sni="localhost")
    assert s.version() == "TLSv1.2"
    s.close()


def test_ciphers_limit_what_a_tls12_client_gets(make_server):
    srv = tls_server(make_server)
    tls_conf(srv, "    Ciphers ECDHE-ECDSA-CHACHA20-POLY1305\n"
                  "    Ciphersuites TLS_AES_128_GCM_SHA256\n")
    srv.start()
    s = tls_connect(srv.port, sni="localhost", max_version=ssl.TLSVersion.TLSv1_2)
    assert s.cipher()[0] == "ECDHE-ECDSA-CHACHA20-POLY1305"
    s.close()
    out = s_client(srv, "localhost", "-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384")
    assert "Cipher is (NONE)" in out or "handshake failure" in out, out
    s = tls_connect(srv.port, sni="localhost")
    assert s.cipher()[0] == "TLS_AES_128_GCM_SHA256"
    s.close()


def negotiated(out):
    """The cipher from s_client's summary line ("New, TLSv1.2, Cipher is NAME")."""
    m = re.search(r"^(?:New|Reused), TLSv1\.[23], Cipher is (\S+)", out, re.M)
    assert m, out
    return m.group(1)


@pytest.mark.parametrize("prefer", [None, "On", "Off"])
def test_tls12_cipher_is_the_servers_choice(make_server, prefer):
    srv = tls_server(make_server, sites=["a.test"])
    if prefer:
        tls_conf(srv, f"    PreferServerCiphers {prefer}\n")
    srv.start()
    # Two suites Ciphers allows, in the client's order: AES-256 first, where
    # the server's list has AES-128 first. Every site's context alike.
    client_order = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"
    for sni in ("localhost", "a.test"):
        out = s_client(srv, sni, "-tls1_2", "-cipher", client_order)
        assert negotiated(out) == ("ECDHE-ECDSA-AES256-GCM-SHA384" if prefer == "Off"
                                   else "ECDHE-ECDSA-AES128-GCM-SHA256"), (sni, prefer)
    # A client that lists ChaCha20 first (no AES hardware) keeps it.
    out = s_client(srv, "localhost", "-tls1_2", "-cipher",
                   "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256")
    assert negotiated(out) == "ECDHE-ECDSA-CHACHA20-POLY1305"
    # TLS 1.3: the client's choice among Ciphersuites (the server lists AES-256 first).
    out = s_client(srv, "localhost", "-tls1_3", "-ciphersuites",
                   "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384")
    assert negotiated(out) == "TLS_AES_128_GCM_SHA256"


def check(srv):
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=20 * SLOW)
    return p.returncode, p.stderr


@pytest.mark.parametrize("text,line,reason", [
    ("    Ciphers NO-SUCH-CIPHER\n", 2, r"OpenSSL accepts no cipher in 'NO-SUCH-CIPHER'"),
    ("    SessionCache 10\n    Ciphersuites TLS_NO_SUCH\n", 3,
     r"OpenSSL accepts no TLS 1.3 suite in 'TLS_NO_SUCH'"),
    ("    Protocols TLSv1.2 TLSv1.1\n", 2, r"TLSv1.1 is not accepted"),
    ("    Protocols TLSv1.4\n", 2, r"unknown protocol 'TLSv1.4'"),
    ("    PreferServerCiphers sometimes\n", 2, r"PreferServerCiphers"),
    ("    TicketKeyFile short.key\n", 2, r"TicketKeyFile .*short\.key: 48 bytes"),
    ("    TicketKeyFile missing.key\n", 2, r"TicketKeyFile .*missing\.key: No such file"),
])
def test_bad_settings_are_refused_with_file_and_line(make_server, text, line, reason):
    srv = tls_server(make_server)
    (srv.conf / "short.key").write_bytes(os.urandom(48))
    tls_conf(srv, text)
    rc, err = check(srv)
    assert rc == 1
    assert re.search(rf"plugins/tls\.conf:{line}: .*{reason}", err), err


def test_good_settings_pass_monkey_t(make_server):
    srv = tls_server(make_server)
    (srv.conf / "two.key").write_bytes(os.urandom(160))
    tls_conf(srv, "    Protocols TLSv1.3 TLSv1.2\n    Ciphers ECDHE+AESGCM\n"
                  "    Ciphersuites TLS_AES_256_GCM_SHA384\n    SessionCache 100\n"
                  "    SessionTimeout 10m\n    TicketKeyFile two.key\n")
    assert check(srv) == (0, check(srv)[1])


# ---- counters --------------------------------------------------------------------


def ctl_status(srv, json_out):
    args = [str(CTL), "-s", str(srv.conf / "ctl.sock")] + (["--json"] if json_out else [])
    p = subprocess.run(args + ["status"], capture_output=True, text=True, timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    return p.stdout


def tls_counters(srv):
    """The handshake counters (the ACME ones, when built with it, are test_acme.py's)."""
    return {k: v for k, v in json.loads(ctl_status(srv, True))["plugins"]["tls"].items()
            if not k.startswith("acme_")}


def test_counters_in_the_control_status(make_server, tmp_path):
    srv = tls_server(make_server, plugins=[str(CONTROL_SO)])
    control_conf(srv)
    srv.start()
    wait_ctl_socket(srv)
    deadline = time.monotonic() + 10 * SLOW
    assert tls_counters(srv) == {"handshakes": 0, "resumptions": 0, "failures": 0,
                                 "plain_http": 0}
    for _ in range(3):  # three full handshakes
        tls_connect(srv.port, sni="localhost").close()
    first, second = resume(srv, tmp_path, "localhost", "localhost", "-tls1_3")  # a fourth, one resumed
    assert outcome(second) == "Reused"
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW) as s:  # a failed one
        s.sendall(b"\x16\x03\x01\x00\x05hello")
        s.recv(100)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW) as s:  # plain HTTP
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        s.recv(1000)
    want = {"handshakes": 5, "resumptions": 1, "failures": 1, "plain_http": 1}
    while tls_counters(srv) != want:  # the server counts a failure as it closes
        assert time.monotonic() < deadline + 10 * SLOW, tls_counters(srv)
        time.sleep(0.05)
    text = ctl_status(srv, False)
    block = text[text.index("plugin tls\n"):]
    assert [kv for kv in re.findall(r"^    (\w+)\s+(\d+)$", block, re.M)
            if not kv[0].startswith("acme_")] == [
        ("handshakes", "5"), ("resumptions", "1"), ("failures", "1"), ("plain_http", "1")]


def test_site_without_tls_keys_still_resumes_on_the_default_certificate(make_server, tmp_path):
    srv = tls_server(make_server, sites=["a.test"])
    root = srv.dir / "root-c"
    root.mkdir()
    srv.extra_sites["c.test"] = f"[HOST]\n    ServerName c.test\n    DocumentRoot {root}\n"
    srv.start()
    first, second = resume(srv, tmp_path, "c.test", "c.test", "-tls1_2")
    assert "subject=CN = localhost" in first
    assert outcome(second) == "Reused"
    # c.test's session is c.test's: not the default site's, though the certificate is.
    assert outcome(s_client(srv, "localhost", "-tls1_2", sess_in=tmp_path / "session.pem")) == "New"
