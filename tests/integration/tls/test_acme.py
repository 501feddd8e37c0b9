"""ACME (plugins/tls/tls_acme.c) against Pebble, Let's Encrypt's test CA, with
real HTTP-01 validation: Pebble asks pebble-challtestsrv (its DNS) for the
site's names, which answers 127.0.0.1, and fetches the challenge from the
server's plain listener. Pebble and the DNS server are started per test on
temporary ports (tools/deps.sh test installs both, pinned); the tests skip
only when the binaries are missing."""

import json
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import BUILD, MONKEY, SLOW, free_port, wait_for, wait_port
from tlsutil import TLS_MARKS, TLS_SO, make_cert

PEBBLE_DIRS = [os.environ.get("MK_PEBBLE_DIR", ""), "/usr/local/bin", str(Path.home() / "go/bin")]


def _tool(name):
    for d in PEBBLE_DIRS:
        if d and (Path(d) / name).is_file():
            return str(Path(d) / name)
    return shutil.which(name)


CONTROL_SO = BUILD / "plugins" / "monkey-control.so"
CTL = BUILD / "bin" / "monkey-ctl"
PEBBLE = _tool("pebble")
CHALLTESTSRV = _tool("pebble-challtestsrv")

pytestmark = TLS_MARKS + [
    pytest.mark.skipif(PEBBLE is None or CHALLTESTSRV is None,
                       reason="no pebble / pebble-challtestsrv (tools/deps.sh test installs them)"),
    pytest.mark.skipif(not (TLS_SO.parent.parent / "features.txt").exists() or
                       "acme\ton" not in (TLS_SO.parent.parent / "features.txt").read_text(),
                       reason="built without ACME (MK_ACME off)"),
]


class Pebble:
    """Pebble and its DNS server on temporary ports, validating against the
    server's plain port `http_port` (and `tls_port` for TLS-ALPN-01)."""

    def __init__(self, folder, http_port, tls_port, validity=7776000, dns_ip="127.0.0.1",
                 eab=None):
        self.dir = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = folder / "pebble.crt", folder / "pebble.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=pebble", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(self.key), "-out", str(self.cert)],
                       check=True, capture_output=True)
        self.http_port, self.tls_port, self.validity = http_port, tls_port, validity
        self.eab = eab  # {key id: base64url HMAC key}: external account binding required
        self.dns_ip = dns_ip
        self.procs = []
        # Four ports picked free may be taken by the time the tools bind
        # them: on a failed start, again with others.
        for attempt in range(3):
            self.configure()
            if self.start(must=attempt == 2):
                break
            self.stop()

    def configure(self):
        self.port, self.mgmt = free_port(), free_port()
        self.dns, self.dns_mgmt = free_port(), free_port()
        conf = {"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}",
            "managementListenAddress": f"127.0.0.1:{self.mgmt}",
            "certificate": str(self.cert), "privateKey": str(self.key),
            "httpPort": self.http_port, "tlsPort": self.tls_port,
            "ocspResponderURL": "", "externalAccountBindingRequired": bool(self.eab),
            "externalAccountMACKeys": self.eab or {},
            "retryAfter": {"authz": 1, "order": 1},
            "profiles": {"default": {"description": "test", "validityPeriod": self.validity}},
        }}
        (self.dir / "pebble.json").write_text(json.dumps(conf))

    def start(self, must=True):
        self.dns_log = open(self.dir / "challtestsrv.log", "a")
        self.procs.append(subprocess.Popen(
            [CHALLTESTSRV, "-defaultIPv4", self.dns_ip, "-defaultIPv6", "",
             "-dnsserver", f"127.0.0.1:{self.dns}", "-management", f"127.0.0.1:{self.dns_mgmt}",
             "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""],
            stdout=self.dns_log, stderr=subprocess.STDOUT))
        self.log = open(self.dir / "pebble.log", "a")
        env = {**os.environ, "PEBBLE_VA_NOSLEEP": "1"}
        env.pop("PEBBLE_VA_ALWAYS_VALID", None)
        self.procs.append(subprocess.Popen(
            [PEBBLE, "-config", str(self.dir / "pebble.json"), "-dnsserver",
             f"127.0.0.1:{self.dns}"], stdout=self.log, stderr=subprocess.STDOUT, env=env))
        up = all(wait_port(p, timeout=10, proc=proc) for p, proc in
                 ((self.dns_mgmt, self.procs[0]), (self.port, self.procs[1]),
                  (self.mgmt, self.procs[1])))
        assert up or not must, self.log_text()
        return up

    @property
    def directory(self):
        return f"https://127.0.0.1:{self.port}/dir"

    def log_text(self):
        return (self.dir / "pebble.log").read_text(errors="replace")

    def root(self):
        """Pebble's root certificate (PEM), from its management interface."""
        ctx = ssl.create_default_context(cafile=str(self.cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.mgmt}/roots/0", context=ctx,
                                    timeout=10 * SLOW) as r:
            return r.read().decode()

    def issued(self):
        """How many certificates Pebble issued (its log says so for each)."""
        return self.log_text().count("Issued certificate serial")

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


@pytest.fixture
def acme(make_server, tmp_path):
    """make(names, **site keys) -> (server, pebble): a server whose default
    site gets its certificate from a Pebble made for its ports."""
    pebbles = []

    def make(names=("a.test",), validity=7776000, dns_ip="127.0.0.1", state=None, srv=None,
             pebble=None, extra="", eab=None):
        srv = srv or make_server()
        if not hasattr(srv, "tls_port"):
            srv.tls_port = free_port()
        if pebble is None:
            pebble = Pebble(tmp_path / f"pebble{len(pebbles)}", srv.port, srv.tls_port,
                            validity=validity, dns_ip=dns_ip, eab=eab)
            pebbles.append(pebble)
        srv.state = state or (tmp_path / "acme-state")
        srv.plugins = [str(TLS_SO)]
        srv.set(Listen=[f"127.0.0.1:{srv.port}", f"127.0.0.1:{srv.tls_port} tls"], Workers=2)
        srv.site_conf["ServerName"] = " ".join(names)
        srv.site_extra = ("[TLS]\n"
                          f"    ACME {pebble.directory}\n"
                          f"    ACMECACertificate {pebble.cert}\n"
                          f"    ACMEStateDir {srv.state}\n"
                          "    ACMEEmail admin@a.test\n"
                          "    ACMERetry 1s\n" + extra)
        srv.file("hello.txt", "Hello ACME\n")
        return srv, pebble

    yield make
    for p in pebbles:
        p.stop()


def peer_cert(port, name, root=None):
    """The server's certificate (DER) for SNI `name`; with `root` (PEM), the
    chain and the name are verified against it (ssl.SSLError otherwise)."""
    if root:
        ctx = ssl.create_default_context(cadata=root)
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW) as s:
        with ctx.wrap_socket(s, server_hostname=name) as t:
            return t.getpeercert(binary_form=True)


def cert_text(der):
    return subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial", "-subject",
                           "-issuer", "-ext", "subjectAltName"],
                          input=der, capture_output=True, check=True).stdout.decode()


def wait_verified(srv, pebble, name="a.test", timeout=30.0, not_serial=None):
    """Wait until a client trusting Pebble's root verifies the server's
    chain for `name`; the certificate's text."""
    root = pebble.root()
    found = {}

    def ok():
        try:
            text = cert_text(peer_cert(srv.tls_port, name, root))
        except (ssl.SSLError, OSError):
            return False
        if not_serial and not_serial in text:
            return False
        found["text"] = text
        return True

    assert wait_for(ok, timeout=timeout), srv.stderr_text() + pebble.log_text()[-3000:]
    return found["text"]


def serial_of(text):
    return next(line for line in text.splitlines() if line.startswith("serial="))


def test_http01_gets_a_certificate_that_verifies(acme):
    srv, pebble = acme(names=("a.test", "www.a.test"))
    srv.start()
    # Until the order succeeds: the self-signed stand-in, for the site's names.
    t0 = time.monotonic()
    text = wait_verified(srv, pebble, "a.test")
    took = time.monotonic() - t0
    assert "DNS:a.test" in text and "DNS:www.a.test" in text
    assert "Pebble Intermediate" in text or "Pebble" in text
    wait_verified(srv, pebble, "www.a.test")
    log = srv.stderr_text()
    assert "a temporary self-signed one serves" in log
    assert "waiting for the CA to fetch http://" in log
    assert "installed" in log
    assert pebble.issued() == 1
    print(f"first valid certificate {took:.2f}s after start")
    # The state directory and its files: the server's alone.
    st = srv.state.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700
    files = sorted(p.name for p in srv.state.iterdir())
    assert "a.test.crt" in files and "a.test.key" in files
    assert any(f.startswith("account-") and f.endswith(".key") for f in files)
    for p in srv.state.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    # Plain HTTP of the site otherwise as before.
    assert srv.get("/hello.txt").status == 200


def test_challenge_answered_before_site_rules(acme):
    """The challenge path is answered by the server itself even when the
    site redirects every plain request to HTTPS (RedirectHTTPS) and a
    [RULE] answers 403 for it: Pebble's validation still succeeds."""
    srv, pebble = acme(extra="    RedirectHTTPS on\n")
    srv.site_extra += "[RULE]\n    Prefix /.well-known/\n    Return 403\n"
    srv.start()
    wait_verified(srv, pebble)
    r = srv.get("/.well-known/acme-challenge/unknown-token")
    assert r.status in (308, 403)


def test_restart_reuses_account_and_certificate(acme):
    srv, pebble = acme()
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    account = next(srv.state.glob("account-*.key")).read_bytes()
    assert srv.stop() == 0
    srv.proc = None
    srv.start()
    # The stored certificate serves at once: no stand-in, no order.
    text = cert_text(peer_cert(srv.tls_port, "a.test", pebble.root()))
    assert serial_of(text) == first
    time.sleep(0.5)
    assert "ordering" not in srv.stderr_text()
    assert "temporary self-signed" not in srv.stderr_text()
    assert next(srv.state.glob("account-*.key")).read_bytes() == account
    assert pebble.issued() == 1


def test_state_dir_readable_by_others_is_refused(acme, tmp_path):
    state = tmp_path / "open-state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    srv, _ = acme(state=state)
    err = srv.run_expect_failure()
    assert "ACMEStateDir" in err and "mode 0755" in err and "chmod 700" in err
    assert "sites/default:" in err


def test_state_dir_is_made_0700(acme, tmp_path):
    state = tmp_path / "deep" / "state"
    srv, pebble = acme(state=state)
    srv.start()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    wait_verified(srv, pebble)


def test_failing_challenge_keeps_the_stand_in_and_backs_off(acme):
    """The DNS answers an address where nothing listens: the challenge
    fails, the site keeps its self-signed stand-in, the error is logged and
    the next attempts come after 1 s, then 2 s (ACMERetry doubled)."""
    srv, pebble = acme(dns_ip="127.0.0.2")
    srv.start()
    assert wait_for(lambda: "next attempt in 2s" in srv.stderr_text(), timeout=30), \
        srv.stderr_text()
    log = srv.stderr_text()
    assert "http-01 for a.test failed" in log
    assert "next attempt in 1s" in log
    assert "temporary self-signed" in log
    text = cert_text(peer_cert(srv.tls_port, "a.test"))
    assert "monkey ACME stand-in" in text
    with pytest.raises(ssl.SSLError):
        peer_cert(srv.tls_port, "a.test", pebble.root())
    assert pebble.issued() == 0


def test_two_servers_sharing_a_state_dir_get_one_certificate(acme, make_server):
    a, pebble = acme()
    a.start()
    assert wait_for(lambda: "ordering a certificate" in a.stderr_text(), timeout=10)
    b, _ = acme(pebble=pebble, state=a.state)
    b.start()
    first = serial_of(wait_verified(a, pebble))
    assert serial_of(wait_verified(b, pebble)) == first
    assert "ordering" not in b.stderr_text()
    assert pebble.issued() == 1


def test_unknown_challenge_token_is_not_answered(acme):
    srv, pebble = acme()
    srv.start()
    wait_verified(srv, pebble)
    assert srv.get("/.well-known/acme-challenge/nosuchtoken").status == 404


def test_short_lived_certificate_renews_during_a_download(acme):
    """Pebble issues 12-second certificates: the server renews at two
    thirds of that and installs the new one while a TLS download started
    under the first goes on to its end."""
    srv, pebble = acme(validity=12)
    body = os.urandom(4 << 20)
    srv.file("big.bin", body)
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    ctx = ssl.create_default_context(cadata=pebble.root())
    sock = socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10 * SLOW)
    t = ctx.wrap_socket(sock, server_hostname="a.test")
    t.sendall(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
    got = b""
    deadline = time.monotonic() + 30 * SLOW
    renewed = None
    while True:
        chunk = t.recv(16384)
        if not chunk:
            break
        got += chunk
        if renewed is None and len(got) > 65536:
            try:
                renewed = serial_of(wait_verified(srv, pebble, not_serial=first,
                                                  timeout=20))
            except AssertionError:
                renewed = ""
        assert time.monotonic() < deadline
        time.sleep(0.001)
    t.close()
    head, _, data = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert data == body
    assert renewed and renewed != first
    assert pebble.issued() >= 2


def test_check_refuses_a_wildcard_name(acme):
    srv, _ = acme(names=("*.a.test",))
    err = srv.run_expect_failure(["-t"])
    assert "wildcard" in err and "sites/default:" in err


def test_check_refuses_acme_with_certificate_files(acme, tmp_path):
    crt, key = make_cert(tmp_path / "certs", "a.test")
    srv, _ = acme(extra=f"    Certificate {crt}\n    CertificateKey {key}\n")
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:" in err and "Certificate and ACME together" in err


def test_check_refuses_bad_values(acme):
    srv, _ = acme(extra="    ACMEKeyType dsa\n")
    assert "ACMEKeyType" in srv.run_expect_failure(["-t"])
    srv, _ = acme(srv=srv, extra="    ACMEEABKeyID kid-1\n")
    assert "ACMEEABKeyID and ACMEEABKey go together" in srv.run_expect_failure(["-t"])
    srv, _ = acme(srv=srv, extra="    ACMEEABKeyID kid-1\n    ACMEEABKey not*base64\n")
    assert "base64url" in srv.run_expect_failure(["-t"])
    srv.site_extra = "[TLS]\n    ACME http://plain.example/dir\n"
    assert "https://" in srv.run_expect_failure(["-t"])


def test_check_does_no_network(acme, tmp_path):
    """monkey -t accepts an unreachable directory: the check does no network."""
    srv, pebble = acme(state=tmp_path / "never-made")
    pebble.stop()
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf), "-t"], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "never-made").exists()


def with_control(srv):
    srv.plugins.append(str(CONTROL_SO))
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "control.conf").write_text(
        "[CONTROL]\n    Socket ctl.sock\n    MetricsPath /metrics\n")


def ctl(srv, *args):
    return subprocess.run([str(CTL), "-s", str(srv.conf / "ctl.sock"), *args],
                          capture_output=True, text=True, timeout=20 * SLOW)


def test_control_status_and_renew(acme):
    """monkey-ctl acme status shows each site's certificate, its expiry and
    next renewal; acme renew NAME orders a new certificate at once, which
    handshakes then get; the counters are in the control status."""
    srv, pebble = acme(names=("a.test", "www.a.test"))
    with_control(srv)
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    p = ctl(srv, "acme", "status")
    assert p.returncode == 0, p.stderr
    assert "names a.test www.a.test" in p.stdout
    assert "certificate from the CA" in p.stdout
    assert "expires 20" in p.stdout and "renewal 20" in p.stdout
    assert "error -" in p.stdout
    status = json.loads(ctl(srv, "--json", "status").stdout)["plugins"]["tls"]
    assert status["acme_sites"] == 1 and status["acme_obtained"] == 1
    assert status["acme_first_expiry"] > time.time()
    if "metrics\ton" in (BUILD / "features.txt").read_text():
        metrics = srv.get("/metrics").body.decode()
        assert 'monkey_tls_acme_sites{state="all"} 1' in metrics
        assert 'monkey_tls_acme_sites{state="waiting"} 0' in metrics
        assert "monkey_tls_acme_certificates_total 1" in metrics
        assert "monkey_tls_acme_failures_total " in metrics
        for family in ("sites gauge", "certificates_total counter", "failures_total counter",
                       "expiry_timestamp_seconds gauge", "next_attempt_timestamp_seconds gauge"):
            assert f"# TYPE monkey_tls_acme_{family}" in metrics, family
        expiry = int(re.search(r"^monkey_tls_acme_expiry_timestamp_seconds (\d+)$", metrics,
                               re.M).group(1))
        assert expiry > time.time()
    p = ctl(srv, "acme", "renew", "www.a.test")
    assert p.returncode == 0 and "renewal of www.a.test started" in p.stdout, p.stdout + p.stderr
    renewed = serial_of(wait_verified(srv, pebble, not_serial=first))
    assert renewed != first
    assert pebble.issued() == 2
    p = ctl(srv, "acme", "renew", "nosuch.test")
    assert p.returncode != 0 and "no ACME site is named nosuch.test" in p.stdout + p.stderr


def test_reload_keeps_the_certificate(acme):
    """A reload (SIGHUP) builds the site's context from the certificate in
    force: no stand-in, no new order."""
    srv, pebble = acme()
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    srv.reload()
    text = cert_text(peer_cert(srv.tls_port, "a.test", pebble.root()))
    assert serial_of(text) == first
    time.sleep(0.5)
    assert pebble.issued() == 1
    assert srv.stderr_text().count("temporary self-signed") == 1


def test_renewal_after_a_ca_restart(acme):
    """Pebble restarted forgets everything (its root, the account): the next
    renewal of a short-lived certificate registers the stored account key
    again and gets a certificate of the new root."""
    srv, pebble = acme(validity=12)
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    old_root = pebble.root()
    pebble.stop()
    assert pebble.start()
    assert pebble.root() != old_root
    text = wait_verified(srv, pebble, not_serial=first, timeout=25)
    assert serial_of(text) != first
    assert "installed" in srv.stderr_text()


def test_tls_alpn01_without_a_plain_listener(acme):
    """A server with TLS listeners only answers TLS-ALPN-01 (RFC 8737):
    Pebble's acme-tls/1 handshake gets the challenge certificate, and the
    site its certificate, which a client trusting Pebble's root verifies."""
    srv, pebble = acme(names=("b.test",))
    srv.set(Listen=f"127.0.0.1:{srv.tls_port} tls")
    srv.port = srv.tls_port  # the server's only port, for the start's wait
    srv.start()
    text = wait_verified(srv, pebble, "b.test")
    assert "DNS:b.test" in text
    log = srv.stderr_text()
    assert "waiting for the CA's acme-tls/1 handshake for b.test" in log
    assert "fetch http://" not in log
    # An ordinary client offering acme-tls/1 gets the site's certificate, not a challenge's.
    ctx = ssl.create_default_context(cadata=pebble.root())
    ctx.set_alpn_protocols(["acme-tls/1"])
    with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=5 * SLOW) as s:
        try:
            with ctx.wrap_socket(s, server_hostname="b.test") as t:
                assert t.selected_alpn_protocol() is None
        except ssl.SSLError:
            pass  # refused (no protocol in common) is fine too; never the challenge certificate


def test_renewal_information_ari_renews_early(acme):
    """ACME Renewal Information (RFC 9773): a 90-day certificate is renewed
    at once when the CA's suggested window has begun (set through Pebble's
    management interface), and left alone when it has not."""
    srv, pebble = acme()
    srv.start()
    first = serial_of(wait_verified(srv, pebble))
    assert srv.stop() == 0
    srv.proc = None
    # Restarted with the CA's window still months away: the stored certificate stays.
    srv.start()
    time.sleep(1.0)
    assert serial_of(cert_text(peer_cert(srv.tls_port, "a.test", pebble.root()))) == first
    assert "ARI" not in srv.stderr_text()
    assert srv.stop() == 0
    srv.proc = None
    now = time.time()
    window = {"suggestedWindow": {
        "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 120)),
        "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 60))}}
    body = json.dumps({"Certificate": (srv.state / "a.test.crt").read_text(),
                       "ARIResponse": json.dumps(window)}).encode()
    ctx = ssl.create_default_context(cafile=str(pebble.cert))
    req = urllib.request.Request(f"https://127.0.0.1:{pebble.mgmt}/set-renewal-info/", data=body,
                                 method="POST")
    with urllib.request.urlopen(req, context=ctx, timeout=10 * SLOW) as r:
        assert r.status == 200
    srv.start()
    renewed = serial_of(wait_verified(srv, pebble, not_serial=first))
    assert renewed != first
    assert "renewal information (ARI) says renew now" in srv.stderr_text()
    assert pebble.issued() == 2


EAB_KEY = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"


def test_external_account_binding(acme):
    """A CA that requires external account binding: with ACMEEABKeyID and
    ACMEEABKey the account is made and the certificate comes."""
    srv, pebble = acme(eab={"kid-1": EAB_KEY},
                       extra=f"    ACMEEABKeyID kid-1\n    ACMEEABKey {EAB_KEY}\n")
    srv.start()
    wait_verified(srv, pebble)


def test_external_account_binding_missing_is_reported(acme):
    srv, pebble = acme(eab={"kid-1": EAB_KEY})
    srv.start()
    assert wait_for(lambda: "next attempt in 1s" in srv.stderr_text(), timeout=15), \
        srv.stderr_text()
    assert "newAccount: HTTP 403" in srv.stderr_text()
    assert "externalAccountRequired" in srv.stderr_text()


def test_rsa_key_type(acme):
    srv, pebble = acme(extra="    ACMEKeyType rsa\n")
    srv.start()
    wait_verified(srv, pebble)
    key = subprocess.run(["openssl", "pkey", "-in", str(srv.state / "a.test.key"), "-noout",
                          "-text"], capture_output=True, text=True, check=True).stdout
    assert "Private-Key: (2048 bit" in key


def test_ca_unreachable_then_back(acme):
    """The CA down at start: the stand-in serves, the error and its back-off
    are logged; once the CA is up the next attempt gets the certificate."""
    srv, pebble = acme()
    pebble.stop()
    srv.start()
    assert wait_for(lambda: "next attempt in 2s" in srv.stderr_text(), timeout=15), \
        srv.stderr_text()
    assert "Connection refused" in srv.stderr_text()
    assert "monkey ACME stand-in" in cert_text(peer_cert(srv.tls_port, "a.test"))
    assert pebble.start()
    wait_verified(srv, pebble, timeout=30)
