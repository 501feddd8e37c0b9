#!/usr/bin/env python3
"""Monkey against nginx, lighttpd, h2o (and node.js): the benchmark harness.

Run through `make bench` (bench/run.sh installs the tools first). Python 3
standard library only; charts are drawn with gnuplot. See bench/README.md for
what every scenario measures and how every server is configured.
"""

import argparse
import http.client
import json
import os
import platform
import random
import pwd
import re
import resource
import selectors
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

from procs import descendants, port_open, stop, tree

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = ["nginx", "lighttpd", "h2o"]
ALL_SERVERS = ["monkey"] + PEERS
SCENARIOS = ["ka13", "close13", "ka200k", "ka1m", "sweep", "node", "idle",
             "tls_full", "tls_resume", "tls_ka13", "tls_1m", "tls_idle",
             "h2_13", "h2_200k", "h2c_13", "h2c_200k", "h2_streams", "h2_idle"]
TLS_SERVERS = ["monkey", "nginx", "h2o"]  # the servers of the tls_* and h2_* scenarios
H2C_SERVERS = ["monkey", "h2o"]  # h2c: nginx serves no HTTP/1 on an h2c port
TLS_PLUGIN = os.path.join(ROOT, "build", "plugins", "monkey-tls.so")
# --monkey-binary, --monkey-site, --monkey-server: which Monkey runs, with which lines
# added to its site and to its [SERVER] section.
MONKEY_BINARY = os.path.join(ROOT, "build", "bin", "monkey")
MONKEY_SITE_LINES = []
# --monkey-site-file: text appended to Monkey's site file as it is ([RULE] sections).
MONKEY_SITE_TEXT = []
MONKEY_SERVER_LINES = []
# --nginx-server-file, --nginx-http-file: text added to nginx's server block
# (location, add_header, return) and to its http block (limit_req_zone), the
# same load as --monkey-site-file for the other server.
NGINX_SERVER_TEXT = []
NGINX_HTTP_TEXT = []
# --nginx-main: lines of nginx's main context ('pcre_jit on;').
NGINX_MAIN_LINES = []
# What every TLS client of the harness offers (wrk, openssl s_client, the
# handshake and idle clients), through OPENSSL_CONF: only TLS 1.3 with one
# suite, so every server negotiates the same whatever its own defaults are.
TLS_PROTOCOL, TLS_CIPHER = "TLSv1.3", "TLS_AES_128_GCM_SHA256"
TLS_CLIENT_CONF = f"""openssl_conf = bench_conf
[bench_conf]
ssl_conf = bench_ssl
[bench_ssl]
system_default = bench_tls
[bench_tls]
MinProtocol = {TLS_PROTOCOL}
MaxProtocol = {TLS_PROTOCOL}
Ciphersuites = {TLS_CIPHER}
"""

FILES = {  # name in the document root: size (the 13-byte one is text)
    "hello.txt": 13,
    "file200k.bin": 200 * 1024,
    "file1m.bin": 1024 * 1024,
}
HELLO = b"Hello World!\n"

KEEPALIVE_TIMEOUT = 60      # seconds, every server
KEEPALIVE_REQUESTS = 100000  # per connection, where configurable
MAX_CONNECTIONS = 20000
BACKLOG = 4096
NOFILE = 65536               # asked for; raise_nofile() sets the real figure

SCENARIO_INFO = {
    "ka13": ("13-byte file, keep-alive", "hello.txt", []),
    "close13": ("13-byte file, `Connection: close`", "hello.txt",
                ["-H", "Connection: close"]),
    "ka200k": ("200 KB file, keep-alive", "file200k.bin", []),
    "ka1m": ("1 MB file, keep-alive", "file1m.bin", []),
    "tls_ka13": ("13-byte file, keep-alive, HTTPS", "hello.txt", []),
    "tls_1m": ("1 MB file, keep-alive, HTTPS", "file1m.bin", []),
}
# HTTP/2 with h2load: scenario: (title, file, over TLS, h2load's load arguments).
# h2_streams: one connection, 100 streams at once, 10 rounds of them.
H2_INFO = {
    "h2_13": ("13-byte file, HTTP/2 over TLS (ALPN h2)", "hello.txt", True,
              ["-t2", "-c100", "-m10"]),
    "h2_200k": ("200 KB file, HTTP/2 over TLS (ALPN h2)", "file200k.bin", True,
                ["-t2", "-c100", "-m10"]),
    "h2c_13": ("13-byte file, cleartext HTTP/2 (h2c, prior knowledge)", "hello.txt", False,
               ["-t2", "-c100", "-m10"]),
    "h2c_200k": ("200 KB file, cleartext HTTP/2 (h2c, prior knowledge)", "file200k.bin", False,
                 ["-t2", "-c100", "-m10"]),
    "h2_streams": ("one connection, 100 streams of 1 MB at once, HTTP/2 over TLS",
                   "file1m.bin", True, ["-t1", "-c1", "-m100", "-n1000"]),
}
TLS_HANDSHAKES = {  # scenario: (title, handshake_child() mode)
    "tls_full": ("full TLS handshakes, a new connection and session per request", "new"),
    "tls_resume": ("resumed TLS handshakes, a new connection per request", "reuse"),
}

MODES = {
    # rounds/duration of ka13, close13, ka200k, ka1m; the sweep; node; idle
    "quick": dict(rounds=2, duration=2, warmup=0, sweep=[100, 500, 1000],
                  sweep_rounds=1, sweep_duration=2, node_n=20000, node_c=1000,
                  node_rounds=1, idle_n=10000, idle_rounds=1),
    "full": dict(rounds=5, duration=8, warmup=1, sweep=list(range(100, 1001, 100)),
                 sweep_rounds=3, sweep_duration=4, node_n=100000, node_c=5000,
                 node_rounds=3, idle_n=10000, idle_rounds=3),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes

def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        return int(st[st.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid, started):
    st = start_time(pid)
    if st is None or st != started:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def free_port(preferred):
    """preferred, or the first free port after it (stable configurations from run to run)."""
    for p in [preferred] + list(range(preferred + 1, preferred + 200)):
        if port_open(p):
            continue
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise SystemExit("bench: no free port near %d" % preferred)


def insecure_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the harness's own self-signed certificate
    return ctx


def http_get(port, path, close=False, timeout=10, tls=False):
    c = (http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                     context=insecure_context()) if tls
         else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout))
    try:
        c.request("GET", path, headers={"Connection": "close"} if close else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Server:
    """One running server that this harness started; stopped by its PID."""

    def __init__(self, name, argv, port, workdir, logname, ready_timeout=15.0, env=None):
        self.name, self.argv, self.port = name, argv, port
        self.logpath = os.path.join(workdir, logname)
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env=env)
        self.pid = self.proc.pid
        self.started = start_time(self.pid)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with status %s at start; log %s:\n%s" % (
                    name, self.proc.returncode, self.logpath, self.log_tail()))
            if port_open(port):
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("%s did not accept connections on port %d within %.0f s; log:\n%s"
                           % (name, port, ready_timeout, self.log_tail()))

    def log_tail(self, n=15):
        try:
            with open(self.logpath, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def running(self):
        return self.proc.poll() is None

    def tree(self):
        return tree(self.pid)

    def stop(self, timeout=15.0):
        """SIGTERM to the PID we started, then SIGKILL to it and to each of
        the descendants seen before, one PID at a time."""
        family = [(p, start_time(p)) for p in descendants(self.pid)]
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("bench: %s (PID %d) ignored SIGTERM for %.0f s: SIGKILL" % (
                    self.name, self.pid, timeout))
                os.kill(self.pid, signal.SIGKILL)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    log("bench: %s (PID %d) survives SIGKILL; going on" % (self.name, self.pid))
        deadline = time.time() + 5
        for p, st in family:
            while alive(p, st) and time.time() < deadline:
                time.sleep(0.05)
            if alive(p, st):
                os.kill(p, signal.SIGKILL)
        self.logf.close()
        return self.proc.returncode


# ----------------------------------------------------------- configurations

def nofile_limit():
    return min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], NOFILE)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def config_monkey(d, docroot, port, workers, tls=None, h2=False):
    """tls: None, or (certificate, key) for a TLS listener (the tls plugin).
    h2: a plain listener also speaks h2c (ALPN h2 needs nothing more)."""
    conf = os.path.join(d, "monkey")
    os.makedirs(os.path.join(conf, "sites"), exist_ok=True)
    write(os.path.join(conf, "monkey.conf"), f"""[SERVER]
    Listen 127.0.0.1:{port}{" tls" if tls else " h2c" if h2 else ""}
    Workers {workers}
    KeepAlive On
    KeepAliveTimeout {KEEPALIVE_TIMEOUT}
    MaxKeepAliveRequests {KEEPALIVE_REQUESTS}
    MaxConnections {MAX_CONNECTIONS}
    Backlog {BACKLOG}
    GracefulTimeout 1
    LogLevel warn
""" + "".join("    %s\n" % line for line in MONKEY_SERVER_LINES))
    tls_site = f"[TLS]\n    Certificate {tls[0]}\n    CertificateKey {tls[1]}\n" if tls else ""
    extra = "".join("    %s\n" % line for line in MONKEY_SITE_LINES) + "".join(MONKEY_SITE_TEXT)
    write(os.path.join(conf, "sites", "default"), f"""[HOST]
    ServerName 127.0.0.1 localhost
    DocumentRoot {docroot}
{extra}{tls_site}""")
    # plugins.load names the tls plugin only for TLS; no other plugin, so no
    # access log.
    if tls:
        write(os.path.join(conf, "plugins.load"), "[PLUGINS]\n    Load %s\n" % TLS_PLUGIN)
    return [MONKEY_BINARY, "-c", conf]


def config_nginx(d, docroot, port, workers, single=False, tls=None, h2=False):
    tmp = os.path.join(d, "nginx-tmp")
    os.makedirs(tmp, exist_ok=True)
    # nginx 1.22's default ssl_protocols lacks TLSv1.3: the versions of the others.
    ssl_lines = ("\n        ssl_certificate %s;\n        ssl_certificate_key %s;\n"
                 "        ssl_protocols TLSv1.2 TLSv1.3;" % tls if tls else "")
    conf = os.path.join(d, "nginx.conf")
    write(conf, f"""daemon off;
master_process {"off" if single else "on"};
worker_processes {workers};
worker_rlimit_nofile {nofile_limit()};
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;{"".join(chr(10) + l for l in NGINX_MAIN_LINES)}
events {{
    worker_connections {MAX_CONNECTIONS};
}}
http {{
    access_log off;
    sendfile on;
    keepalive_timeout {KEEPALIVE_TIMEOUT}s;
    keepalive_requests {KEEPALIVE_REQUESTS};
    types {{ text/plain txt; }}
    default_type application/octet-stream;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;{"".join(NGINX_HTTP_TEXT)}
    server {{
        listen 127.0.0.1:{port}{" ssl" if tls else ""}{" http2" if h2 else ""} backlog={BACKLOG};
        root {docroot};{ssl_lines}{"".join(NGINX_SERVER_TEXT)}
    }}
}}
""")
    return ["nginx", "-p", d, "-c", conf, "-e", os.path.join(d, "nginx-error.log")]


def config_lighttpd(d, docroot, port, workers, single=False):
    conf = os.path.join(d, "lighttpd.conf")
    worker_line = "" if single or workers <= 1 else f"server.max-worker = {workers}\n"
    write(conf, f"""server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{d}/lighttpd-error.log"
{worker_line}server.max-keep-alive-requests = {KEEPALIVE_REQUESTS}
server.max-keep-alive-idle = {KEEPALIVE_TIMEOUT}
server.max-fds = {min(2 * MAX_CONNECTIONS, nofile_limit())}
server.max-connections = {min(MAX_CONNECTIONS, nofile_limit() // 2)}
server.listen-backlog = {BACKLOG}
server.network-backend = "sendfile"
mimetype.assign = ( ".txt" => "text/plain", "" => "application/octet-stream" )
""")
    return ["lighttpd", "-D", "-f", conf]


def config_h2o(d, docroot, port, workers, single=False, tls=None, h2=False):
    conf = os.path.join(d, "h2o.conf")
    # Started as root, h2o switches to nobody by default; valgrind's vgdb
    # (callgrind_control) cannot reach a process that changed its user, so
    # h2o keeps the user it was started as (as nginx and lighttpd do here).
    user = "user: %s\n" % pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() == 0 else ""
    ssl_lines = "  ssl:\n    certificate-file: %s\n    key-file: %s\n" % tls if tls else ""
    write(conf, f"""{user}listen:
  host: 127.0.0.1
  port: {port}
{ssl_lines}num-threads: {1 if single else workers}
max-connections: {MAX_CONNECTIONS}
http1-request-timeout: {KEEPALIVE_TIMEOUT}
{"http2-idle-timeout: %d" % KEEPALIVE_TIMEOUT + chr(10) if h2 else ""}error-log: {d}/h2o-error.log
hosts:
  default:
    paths:
      /:
        file.dir: {docroot}
        file.mime.settypes:
          text/plain: .txt
""")
    return ["h2o", "-m", "worker", "-c", conf]


def config_node(d, docroot, port, workers, single=False):
    return ["node", os.path.join(HERE, "node", "hello.js"), str(port), str(workers)]


CONFIGS = {"monkey": config_monkey, "nginx": config_nginx, "lighttpd": config_lighttpd,
           "h2o": config_h2o, "node": config_node}


def server_argv(name, d, docroot, port, workers, single=False, tls=None, h2=False):
    sd = os.path.join(d, name)
    os.makedirs(sd, exist_ok=True)
    kw = {"tls": tls} if tls else {}  # only monkey, nginx and h2o take them
    if h2:
        kw["h2"] = True
    if name == "monkey":
        return config_monkey(sd, docroot, port, 1 if single else workers, **kw)
    return CONFIGS[name](sd, docroot, port, 1 if single else workers, single, **kw)


def make_docroot(d):
    docroot = os.path.join(d, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    with open(os.path.join(docroot, "hello.txt"), "wb") as f:
        f.write(HELLO)
    for name, size in FILES.items():
        if name != "hello.txt":
            with open(os.path.join(docroot, name), "wb") as f:
                f.write(os.urandom(size))
    # Text that compresses (about 5:1), for --cg-file with compression on
    # the fly (--monkey-site "Compress On"); no scenario asks for it.
    words = b"function var return const let this document window if else null true".split()
    rnd = random.Random(13)
    with open(os.path.join(docroot, "text10k.js"), "wb") as f:
        f.write(b" ".join(rnd.choice(words) for _ in range(3000))[:10240])
    os.chmod(os.path.join(docroot, "text10k.js"), 0o644)
    for p in (d, docroot):
        os.chmod(p, 0o755)  # nginx workers run as nobody when started as root
    for name in FILES:
        os.chmod(os.path.join(docroot, name), 0o644)
    return docroot


def check_server(srv, full=True, tls=False):
    """Each file must come back whole with 200: a misconfigured peer would
    otherwise win with fast 404s."""
    names = list(FILES) if full else ["hello.txt"]
    if srv.name == "node":
        names = ["hello.txt"]
    for name in names:
        status, body = http_get(srv.port, "/" + name, tls=tls)
        if status != 200 or len(body) != FILES[name] or (name == "hello.txt" and body != HELLO):
            raise RuntimeError("%s: GET /%s gave %d with %d bytes" % (srv.name, name, status,
                                                                    len(body)))


def check_tls(srv, env):
    """An HTTP/1.0 GET /hello.txt (the server closes after it) must get the
    13 bytes with 200, and the harness's clients (OPENSSL_CONF in env) must
    negotiate TLS_PROTOCOL and TLS_CIPHER. Returns what `openssl s_client
    -brief` saw, and whether the server's close came with a close_notify."""
    info = {"close_notify": "yes"}
    with insecure_context().wrap_socket(socket.create_connection(("127.0.0.1", srv.port),
                                                                 timeout=10),
                                        suppress_ragged_eofs=False) as s:
        s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ssl.SSLEOFError:
                info["close_notify"] = "no"  # closed without a close_notify alert
                break
            if not chunk:
                break
            data += chunk
    if not data.startswith(b"HTTP/1.") or data[9:12] != b"200" or not data.endswith(HELLO):
        raise RuntimeError("%s: an HTTP/1.0 GET /hello.txt over TLS gave %r" % (
            srv.name, data[:80]))
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % srv.port,
                        "-servername", "localhost", "-brief"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=20, env=env)
    for key, rx in (("protocol", r"Protocol version: (\S+)"), ("cipher", r"Ciphersuite: (\S+)"),
                    ("group", r"(?:Peer|Server) Temp Key: ([^,\n]+)"),
                    ("signature", r"Signature type: (\S+)")):
        m = re.search(rx, p.stderr + p.stdout)
        info[key] = m.group(1) if m else None
    if info["protocol"] != TLS_PROTOCOL or info["cipher"] != TLS_CIPHER:
        raise RuntimeError("%s: openssl s_client negotiated %s (expected %s %s): %s" % (
            srv.name, info, TLS_PROTOCOL, TLS_CIPHER, (p.stderr + p.stdout)[-500:]))
    return info


def check_h2(srv, url, env):
    """One request with h2load must be served over HTTP/2 (ALPN h2 over TLS,
    h2c by prior knowledge in cleartext). Returns what h2load saw."""
    p = subprocess.run(["h2load", "-n1", "-c1", "--tls13-ciphers=" + TLS_CIPHER, url],
                       capture_output=True, text=True, timeout=30, env=env)
    info = {}
    for key, rx in (("protocol", r"TLS Protocol: (\S+)"), ("cipher", r"Cipher: (\S+)"),
                    ("group", r"Server Temp Key: ([^\n]+)"),
                    ("alpn", r"Application protocol: (\S+)")):
        m = re.search(rx, p.stdout)
        info[key] = m.group(1).strip() if m else None
    r = parse_h2load(p.stdout)
    if info["alpn"] not in ("h2", "h2c") or r.get("requests") != 1 or r.get("errors"):
        raise RuntimeError("%s: h2load -n1 %s did not get one answer over HTTP/2: %s" % (
            srv.name, url, (p.stdout + p.stderr)[-600:]))
    return info


# ------------------------------------------------------------- load tools

def to_ms(s):
    m = re.match(r"([\d.]+)(us|ms|s|m|h)$", s)
    if not m:
        return None
    v = float(m.group(1))
    return v * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}[m.group(2)]


def parse_wrk(out):
    r = {"tool": "wrk"}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"(\d+) requests in ([\d.]+\w+)", out)
    r["requests"] = int(m.group(1)) if m else None
    for pct in ("50", "99"):
        m = re.search(r"^\s+%s(?:\.0+)?%%\s+(\S+)" % pct, out, re.M)
        r["p%s_ms" % pct] = to_ms(m.group(1)) if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    sock = [int(x) for x in m.groups()] if m else [0, 0, 0, 0]
    r["socket_errors"] = dict(zip(["connect", "read", "write", "timeout"], sock))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    r["errors"] = r["non2xx"] + sum(sock)
    return r


def parse_ab(out, n):
    r = {"tool": "ab"}
    m = re.search(r"Requests per second:\s+([\d.]+)", out)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"Complete requests:\s+(\d+)", out)
    r["requests"] = int(m.group(1)) if m else 0
    m = re.search(r"Failed requests:\s+(\d+)", out)
    failed = int(m.group(1)) if m else 0
    m = re.search(r"Non-2xx responses:\s+(\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    for pct in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+(\d+)" % pct, out, re.M)
        r["p%s_ms" % pct] = float(m.group(1)) if m else None
    r["failed"] = failed
    r["missing"] = max(0, n - r["requests"])
    r["errors"] = failed + r["non2xx"] + r["missing"]
    return r


def parse_h2load(out):
    """h2load's summary: req/s, the requests that succeeded, errors (failed,
    errored, timed out, or answered with a status other than 2xx), mean
    time per request (h2load prints no percentiles)."""
    r = {"tool": "h2load", "rps": None, "requests": 0, "errors": None}
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    if m:
        r["rps"] = float(m.group(3))
        r["seconds"] = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) "
                  r"failed, (\d+) errored, (\d+) timeout", out)
    if m:
        done, ok, failed, errored, timeout = map(int, m.groups())
        r["requests"] = ok
        r["errors"] = failed + errored + timeout
        r["errors_detail"] = dict(done=done, failed=failed, errored=errored, timeout=timeout)
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if m and r["errors"] is not None:
        r["errors"] += sum(map(int, m.groups()[1:]))
        r["requests"] = min(r["requests"], int(m.group(1)))
    m = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
    if m:
        r["mean_ms"] = to_ms(m.group(1))
    return r


def parse_handshakes(out):
    """The JSON lines of several handshake_child() run at once."""
    r = {"tool": "bench.py handshake client", "rps": None, "requests": 0, "resumed": 0,
         "full_handshakes": 0, "errors": 0, "clients": 0}
    lat = []
    for line in out.splitlines():
        try:
            c = json.loads(line)
        except ValueError:
            continue
        r["clients"] += 1
        for k in ("requests", "resumed", "full_handshakes", "errors"):
            r[k] += c[k]
        r["rps"] = (r["rps"] or 0) + c["requests"] / c["seconds"]
        lat += c["latencies_ms"]
    lat.sort()
    for pct in (50, 99):
        r["p%d_ms" % pct] = lat[min(len(lat) - 1, len(lat) * pct // 100)] if lat else None
    return r


def client_rusage_child(out, argv):
    """bench.py --client-rusage OUT -- COMMAND...: run COMMAND (the load tool:
    wrk, h2load, ab, a shell of clients) with this process's stdout and stderr,
    reap it with os.wait4 and write its CPU seconds to OUT as JSON
    {"user_s", "system_s"}; they count COMMAND and every descendant it reaped.
    Exits with COMMAND's status. SIGINT and SIGTERM (mk-watch cutting the run
    short signals the whole process group) are caught and left to COMMAND, so
    its usage is still written; the handlers do not survive the exec."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        proc = subprocess.Popen(argv)
    except OSError as e:
        sys.stderr.write("bench.py --client-rusage: %s: %s\n" % (argv[0], e))
        return 127
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above: keeps Popen from waiting on it again
    with open(out, "w") as f:
        json.dump({"user_s": ru.ru_utime, "system_s": ru.ru_stime}, f)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def client_cpu(path):
    """(user, system) CPU seconds written by client_rusage_child, or (None, None)."""
    try:
        with open(path) as f:
            d = json.load(f)
        return d["user_s"], d["system_s"]
    except (OSError, ValueError, KeyError):
        return None, None


def mk_watch(pid, load, wd, tag, duration=None, env=None):
    """Run LOAD under mk-watch attached to pid; returns (summary, load output)."""
    sj = os.path.join(wd, tag + ".summary.json")
    lo = os.path.join(wd, tag + ".load.txt")
    argv = [os.path.join(ROOT, "build", "bin", "mk-watch"), "--pid", str(pid),
            "--summary-json", sj, "--load-output", lo, "--quiet"]
    if duration is not None:
        argv += ["--duration", str(duration)]
    if load:
        argv += ["--"] + load
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    summary, out = {}, ""
    try:
        with open(sj) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        pass
    try:
        with open(lo, errors="replace") as f:
            out = f.read()
    except OSError:
        pass
    summary["_exit"] = p.returncode
    summary["_stderr"] = p.stderr[-2000:]
    return summary, out


# ---------------------------------------------------------------- the harness

class Bench:
    def __init__(self, args):
        self.args = args
        self.m = MODES[args.mode]
        self.wd = tempfile.mkdtemp(prefix="mk-bench-")
        self.docroot = make_docroot(self.wd)
        self.port = free_port(args.port)
        self.runs = []
        self.problems = []
        self.counter = 0
        self.tls = self.tls_env = None

    def url(self, path, tls=False):
        return "%s://127.0.0.1:%d/%s" % ("https" if tls else "http", self.port, path)

    def cg_loads(self):
        """The two loads of --callgrind, --syscalls and --perf-syscalls:
        (phase, ab argv with the URL, requests) for keep-alive, then close,
        each with the --cg-header headers."""
        ka, cl = self.args.cg_requests, self.args.cg_close
        hdrs = [arg for h in self.args.cg_header for arg in ("-H", h)]
        url = [self.url(self.args.cg_file)]
        return (("keepalive", ["ab", "-q", "-k", "-n", str(ka), "-c", "1"] + hdrs + url, ka),
                ("close", ["ab", "-q", "-n", str(cl), "-c", "1", "-H", "Connection: close"]
                 + hdrs + url, cl))

    def tls_setup(self):
        """The certificate every TLS server uses (ECDSA P-256, self-signed,
        made with the openssl tool) and the clients' OPENSSL_CONF."""
        if self.tls:
            return
        d = os.path.join(self.wd, "tls")
        os.makedirs(d, exist_ok=True)
        crt, key = os.path.join(d, "bench.crt"), os.path.join(d, "bench.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", crt], check=True, capture_output=True)
        conf = os.path.join(d, "openssl-client.cnf")
        write(conf, TLS_CLIENT_CONF)
        self.tls = (crt, key)
        self.tls_env = dict(os.environ, OPENSSL_CONF=conf)

    def tls_servers(self):
        return [s for s in self.args.servers if s in TLS_SERVERS]

    def problem(self, text):
        log("bench: PROBLEM: " + text)
        self.problems.append(text)

    def start(self, name, single=False, wrapper=None, ready_timeout=15.0, tls=False, h2=False):
        argv = server_argv(name, self.wd, self.docroot, self.port, self.args.workers, single,
                           self.tls if tls else None, h2)
        if wrapper:
            argv = wrapper + argv
        self.counter += 1
        srv = Server(name, argv, self.port, self.wd, "%s.log" % name, ready_timeout)
        try:
            check_server(srv, tls=tls)
            srv.tls_info = check_tls(srv, self.tls_env) if tls else None
            srv.h2_info = (check_h2(srv, self.url("hello.txt", tls), self.tls_env if tls
                                    else None) if h2 else None)
        except Exception:
            srv.stop()
            raise
        return srv

    def one(self, name, scenario, rnd, load, extra, parse, warmup=None, tls=False, h2=False):
        """Start NAME, warm up, run LOAD under mk-watch, stop; record a run.
        tls: the server listens with TLS and the load runs with tls_env.
        h2: the server speaks HTTP/2 too (checked with one h2load request)."""
        rec = dict(server=name, scenario=scenario, round=rnd, command=" ".join(load), **extra)
        env = self.tls_env if tls else None
        try:
            srv = self.start(name, tls=tls, h2=h2)
        except Exception as e:
            self.problem("%s did not start for %s: %s" % (name, scenario, e))
            rec["failed"] = str(e)
            self.runs.append(rec)
            return rec
        try:
            rec["tls"] = srv.tls_info
            if h2:
                rec["h2"] = srv.h2_info
            if warmup:
                subprocess.run(warmup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env)
            self.counter += 1
            tag = "run%d" % self.counter
            ru = os.path.join(self.wd, tag + ".client.json")
            wrapped = [sys.executable, os.path.abspath(__file__), "--client-rusage", ru,
                       "--"] + load
            summ, out = mk_watch(srv.pid, wrapped, self.wd, tag, env=env)
            res = parse(out)
            rec.update(res)
            for k in ("cpu_us_per_request", "rss_peak_kb", "pss_peak_kb", "cpu_total_s",
                      "cpu_user_s", "cpu_system_s", "threads_peak", "fds_peak",
                      "processes_peak", "ctx_voluntary", "ctx_involuntary", "duration_s",
                      "requests_source"):
                rec[k] = summ.get(k)
            if rec.get("requests") and rec.get("cpu_us_per_request") is None \
                    and rec.get("cpu_total_s") is not None:
                rec["cpu_us_per_request"] = rec["cpu_total_s"] * 1e6 / rec["requests"]
            rec["client_cpu_user_s"], rec["client_cpu_system_s"] = client_cpu(ru)
            rec["client_cpu_us_per_request"] = rec["total_cpu_us_per_request"] = None
            if rec["client_cpu_user_s"] is not None and rec.get("requests"):
                rec["client_cpu_us_per_request"] = (
                    (rec["client_cpu_user_s"] + rec["client_cpu_system_s"]) * 1e6
                    / rec["requests"])
                if rec.get("cpu_us_per_request") is not None:
                    rec["total_cpu_us_per_request"] = (rec["cpu_us_per_request"]
                                                       + rec["client_cpu_us_per_request"])
            rec["load_exit"] = summ.get("_exit")
            if rec.get("rps") is None or not rec.get("requests"):
                self.problem("%s, %s round %d: no result from `%s` (exit %s): %s" % (
                    name, scenario, rnd, " ".join(load), summ.get("_exit"),
                    (out.strip().splitlines() or ["no output"])[-1][:300]))
            elif rec.get("errors"):
                log("bench: %s %s round %d: %d errors" % (name, scenario, rnd, rec["errors"]))
            if not srv.running():
                self.problem("%s exited during %s round %d (`%s`), status %s; log:\n%s" % (
                    name, scenario, rnd, " ".join(load), srv.proc.returncode, srv.log_tail()))
            rec["load_output"] = out[-3000:]
        finally:
            status = srv.stop()
            if status not in (0, -15, 143, None) and name not in ("node",):
                log("bench: %s stopped with status %s" % (name, status))
        self.runs.append(rec)
        log("bench: %-8s %-8s r%d %s: %s req/s, p99 %s ms, errors %s, %s us CPU/req "
            "(client %s), RSS %s KB" % (
                name, scenario, rnd, extra.get("connections", ""), rec.get("rps"),
                rec.get("p99_ms"), rec.get("errors"), rec.get("cpu_us_per_request"),
                None if rec.get("client_cpu_us_per_request") is None
                else round(rec["client_cpu_us_per_request"], 1), rec.get("rss_peak_kb")))
        return rec

    def wrk(self, conns, dur, path, hdr, tls=False):
        return (["wrk", "-t2", "-c%d" % conns, "-d%ds" % dur, "--latency", "--timeout", "10s"]
                + hdr + [self.url(path, tls)])

    # -- scenarios

    def run_wrk_scenario(self, sc):
        title, path, hdr = SCENARIO_INFO[sc]
        tls = sc.startswith("tls_")
        if tls:
            self.tls_setup()
        for rnd in range(1, self.m["rounds"] + 1):
            for name in self.tls_servers() if tls else self.args.servers:
                load = self.wrk(100, self.m["duration"], path, hdr, tls)
                warm = (self.wrk(100, self.m["warmup"], path, hdr, tls) if self.m["warmup"]
                        else None)
                self.one(name, sc, rnd, load, dict(connections=100), parse_wrk, warm, tls)

    def h2servers(self, sc):
        return [s for s in self.args.servers if s in (TLS_SERVERS if H2_INFO[sc][2] or
                                                       sc == "h2_idle" else H2C_SERVERS)]

    def h2load(self, sc, seconds):
        title, path, tls, args = H2_INFO[sc]
        timing = [] if any(a.startswith("-n") for a in args) else ["-D", str(seconds)]
        return (["h2load"] + args + timing + ["--tls13-ciphers=" + TLS_CIPHER,
                                              self.url(path, tls)])

    def run_h2_scenario(self, sc):
        tls = H2_INFO[sc][2]
        if tls:
            self.tls_setup()
        for rnd in range(1, self.m["rounds"] + 1):
            for name in self.h2servers(sc):
                load = self.h2load(sc, self.m["duration"])
                warm = self.h2load(sc, self.m["warmup"]) if self.m["warmup"] else None
                c = int(next(a for a in H2_INFO[sc][3] if a.startswith("-c"))[2:])
                self.one(name, sc, rnd, load, dict(connections=c), parse_h2load, warm,
                         tls=tls, h2=True)

    def handshake_load(self, mode, seconds):
        """handshake_child() MODE, one per worker, at once; each writes its
        JSON line to its own file, printed at the end (a line longer than a
        pipe's atomic write would otherwise mix with the others)."""
        self.counter += 1
        out = os.path.join(self.wd, "handshakes%d" % self.counter)
        one = "%s %s --handshake-client %d %d %s" % (
            sys.executable, os.path.abspath(__file__), self.port, seconds, mode)
        return ["sh", "-c", "for i in $(seq %d); do %s >%s.$i & done; wait; cat %s.*" % (
            self.args.workers, one, out, out)]

    def run_handshakes(self, sc):
        title, mode = TLS_HANDSHAKES[sc]
        self.tls_setup()
        for rnd in range(1, self.m["rounds"] + 1):
            for name in self.tls_servers():
                load = self.handshake_load(mode, self.m["duration"])
                warm = (self.handshake_load(mode, self.m["warmup"]) if self.m["warmup"]
                        else None)
                rec = self.one(name, sc, rnd, load, dict(connections=self.args.workers),
                               parse_handshakes, warm, tls=True)
                wrong = rec.get("resumed") if mode == "new" else rec.get("full_handshakes")
                if wrong:
                    self.problem("%s, %s round %d: %d of %d handshakes were %s" % (
                        name, sc, rnd, wrong, rec.get("requests"),
                        "resumed" if mode == "new" else "full ones"))

    def run_sweep(self):
        for c in self.m["sweep"]:
            for rnd in range(1, self.m["sweep_rounds"] + 1):
                for name in self.args.servers:
                    load = self.wrk(c, self.m["sweep_duration"], "file200k.bin", [])
                    warm = (self.wrk(c, self.m["warmup"], "file200k.bin", [])
                            if self.m["warmup"] else None)
                    self.one(name, "sweep", rnd, load, dict(connections=c), parse_wrk, warm)

    def run_node(self):
        n, c = self.m["node_n"], self.m["node_c"]
        targets = ["node"] + self.args.servers
        if not shutil.which("node"):
            self.problem("node is not installed: the node scenario runs without it")
            targets = self.args.servers
        for rnd in range(1, self.m["node_rounds"] + 1):
            for name in targets:
                load = ["ab", "-q", "-r", "-s", "30", "-n", str(n), "-c", str(c),
                        self.url("hello.txt")]
                self.one(name, "node", rnd, load, dict(connections=c),
                         lambda out: parse_ab(out, n))

    def run_idle(self, sc="idle"):
        """idle; tls_idle: the same over TLS, the client in a child process;
        h2_idle: over TLS with ALPN h2, the preface and SETTINGS exchanged."""
        n = self.m["idle_n"]
        tls, h2 = sc in ("tls_idle", "h2_idle"), sc == "h2_idle"
        if tls:
            self.tls_setup()
        for rnd in range(1, self.m["idle_rounds"] + 1):
            for name in self.tls_servers() if tls else self.args.servers:
                rec = dict(server=name, scenario=sc, round=rnd, connections=n,
                           command="bench.py idle client: %d %sconnections, one GET "
                                   "/hello.txt each, then idle" % (
                                       n, "HTTP/2 TLS " if h2 else "TLS " if tls else ""))
                try:
                    srv = self.start(name, tls=tls, h2=h2)
                except Exception as e:
                    self.problem("%s did not start for %s: %s" % (name, sc, e))
                    rec["failed"] = str(e)
                    self.runs.append(rec)
                    continue
                clients = None
                try:
                    rec["tls"] = srv.tls_info
                    rec["h2"] = srv.h2_info
                    time.sleep(0.3)
                    self.counter += 1
                    before, _ = mk_watch(srv.pid, None, self.wd, "idle%db" % self.counter, 1)
                    t0 = time.time()
                    clients = IdleClients(self.port, n, self.tls_env if tls else None, h2)
                    stats = clients.stats
                    rec["open_seconds"] = round(time.time() - t0, 2)
                    rec.update(stats)
                    time.sleep(1.0)
                    self.counter += 1
                    after, _ = mk_watch(srv.pid, None, self.wd, "idle%da" % self.counter, 1)
                    rec["still_open"] = clients.count_open()
                    for k in ("rss", "pss"):
                        b, a = before.get(k + "_avg_kb"), after.get(k + "_avg_kb")
                        rec[k + "_before_kb"], rec[k + "_after_kb"] = b, a
                        rec[k + "_kb_per_conn"] = (
                            (a - b) / rec["still_open"] if a is not None and b is not None
                            and rec["still_open"] else None)
                    rec["rss_peak_kb"] = after.get("rss_peak_kb")
                    rec["pss_peak_kb"] = after.get("pss_peak_kb")
                    rec["errors"] = n - rec["still_open"]
                    rec["fds_peak"] = after.get("fds_peak")
                    if rec["errors"]:
                        self.problem("%s, %s round %d: only %d of %d connections were "
                                     "answered and still open (%s)" % (
                                         name, sc, rnd, rec["still_open"], n, stats))
                    if not srv.running():
                        self.problem("%s exited during the %s scenario round %d; log:\n%s"
                                     % (name, sc, rnd, srv.log_tail()))
                finally:
                    if clients:
                        clients.close()
                    srv.stop()
                self.runs.append(rec)
                log("bench: %-8s %-8s r%d: %s open, RSS %s -> %s KB: %s KB/conn" % (
                    name, sc, rnd, rec.get("still_open"), rec.get("rss_before_kb"),
                    rec.get("rss_after_kb"), fmt(rec.get("rss_kb_per_conn"))))

    # -- deterministic figures

    def run_callgrind(self):
        ka, cl = self.args.cg_requests, self.args.cg_close
        out = {}
        for name in self.args.servers:
            cgdir = os.path.join(self.wd, "callgrind-" + name)
            os.makedirs(cgdir, exist_ok=True)
            base = os.path.join(cgdir, "callgrind.out")
            wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       "--trace-children=no", "--callgrind-out-file=" + base + ".%p"]
            log("bench: callgrind %s: %d keep-alive + %d close requests" % (name, ka, cl))
            try:
                srv = self.start(name, single=True, wrapper=wrapper, ready_timeout=120)
            except Exception as e:
                self.problem("%s did not start under callgrind: %s" % (name, e))
                continue
            res = {"requests_keepalive": ka, "requests_close": cl}
            try:
                cc = ["callgrind_control"]
                subprocess.run(cc + ["-i", "on", str(srv.pid)], capture_output=True, text=True,
                               timeout=60)
                (_, load_ka, _), (_, load_cl, _) = self.cg_loads()
                p1 = subprocess.run(load_ka, capture_output=True, text=True)
                subprocess.run(cc + ["--dump=keepalive", str(srv.pid)], capture_output=True,
                               text=True, timeout=60)
                p2 = subprocess.run(load_cl, capture_output=True, text=True)
                subprocess.run(cc + ["--dump=close", str(srv.pid)], capture_output=True,
                               text=True, timeout=60)
                subprocess.run(cc + ["-i", "off", str(srv.pid)], capture_output=True,
                               text=True, timeout=60)
                a1, a2 = parse_ab(p1.stdout, ka), parse_ab(p2.stdout, cl)
                res["errors_keepalive"], res["errors_close"] = a1["errors"], a2["errors"]
                res["ab_keepalive_requests"] = a1["requests"]
                res["ab_close_requests"] = a2["requests"]
                if a1["errors"] or a2["errors"]:
                    self.problem("%s under callgrind: ab reported %d / %d errors" % (
                        name, a1["errors"], a2["errors"]))
            finally:
                srv.stop(timeout=20)
            for fn in sorted(os.listdir(cgdir)):
                path = os.path.join(cgdir, fn)
                trig, total = callgrind_totals(path)
                if trig and "keepalive" in trig:
                    res["ir_keepalive"] = total
                elif trig and "close" in trig:
                    res["ir_close"] = total
            if res.get("ir_keepalive") is not None:
                res["ir_per_request_keepalive"] = res["ir_keepalive"] / ka
            if res.get("ir_close") is not None:
                res["ir_per_request_close"] = res["ir_close"] / cl
            if "ir_keepalive" not in res:
                self.problem("%s: no callgrind dump found in %s" % (name, cgdir))
            out[name] = res
            log("bench: callgrind %s: %s Ir/request keep-alive, %s Ir/request close" % (
                name, fmt(res.get("ir_per_request_keepalive")),
                fmt(res.get("ir_per_request_close"))))
        return out

    def run_syscalls(self):
        ka, cl = self.args.cg_requests, self.args.cg_close
        out = {}
        for name in self.args.servers:
            log("bench: strace %s: %d keep-alive + %d close requests" % (name, ka, cl))
            try:
                srv = self.start(name, single=True)
            except Exception as e:
                self.problem("%s did not start for strace: %s" % (name, e))
                continue
            res = {"requests_keepalive": ka, "requests_close": cl}
            try:
                for phase, load, n in self.cg_loads():
                    self.counter += 1
                    sf = os.path.join(self.wd, "strace-%s-%s.txt" % (name, phase))
                    argv = ["strace", "-c", "-f", "-o", sf]
                    for p in srv.tree():
                        argv += ["-p", str(p)]
                    st = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                    wait_traced(srv.tree(), 10)
                    a = parse_ab(subprocess.run(load,
                                                capture_output=True, text=True).stdout, n)
                    time.sleep(0.2)
                    stop(st, 30, signal.SIGINT)
                    calls, errs, per = parse_strace(sf)
                    res["syscalls_" + phase] = calls
                    res["syscall_errors_" + phase] = errs
                    res["per_request_" + phase] = calls / n if calls is not None else None
                    res["by_syscall_" + phase] = {k: v / n for k, v in per.items()}
                    res["errors_" + phase] = a["errors"]
                    if a["errors"]:
                        self.problem("%s under strace (%s): ab reported %d errors" % (
                            name, phase, a["errors"]))
            finally:
                srv.stop()
            out[name] = res
            log("bench: strace %s: %s syscalls/request keep-alive, %s close" % (
                name, fmt(res.get("per_request_keepalive")), fmt(res.get("per_request_close"))))
        return out


    def run_perf_syscalls(self):
        """System calls per request as --syscalls, counted by perf stat on the
        kernel's syscall tracepoints instead of strace: the server is not
        stopped at each call, so it runs at its own speed against the client,
        and what depends on timing (a read that finds the next request already
        there, an accept that finds another connection) is counted as it
        happens without a tracer. strace slows the server down several times
        and so favours such speculative calls."""
        ka, cl = self.args.cg_requests, self.args.cg_close
        # perf refuses the whole list if one tracepoint is missing (another
        # architecture, an older kernel): ask only for those the kernel has.
        names = [n for n in PERF_SYSCALLS if os.path.isdir(
            "/sys/kernel/tracing/events/syscalls/sys_enter_" + n) or os.path.isdir(
            "/sys/kernel/debug/tracing/events/syscalls/sys_enter_" + n)]
        events = ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + n for n in names]
        out = {}
        for name in self.args.servers:
            log("bench: perf %s: %d keep-alive + %d close requests" % (name, ka, cl))
            try:
                srv = self.start(name, single=True)
            except Exception as e:
                self.problem("%s did not start for perf: %s" % (name, e))
                continue
            res = {"requests_keepalive": ka, "requests_close": cl}
            try:
                for phase, load, n in self.cg_loads():
                    pf = os.path.join(self.wd, "perf-%s-%s.txt" % (name, phase))
                    st = subprocess.Popen(["perf", "stat", "-x,", "-o", pf, "-e",
                                           ",".join(events), "-p",
                                           ",".join(str(p) for p in srv.tree())],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)  # perf opens its counters
                    a = parse_ab(subprocess.run(load,
                                                capture_output=True, text=True).stdout, n)
                    time.sleep(0.2)
                    st.send_signal(signal.SIGINT)
                    try:
                        st.wait(30)
                    except subprocess.TimeoutExpired:
                        st.kill()
                        st.wait()
                    counts = parse_perf_stat(pf)
                    total = counts.pop("raw_syscalls:sys_enter", None)
                    per = {k.rsplit("sys_enter_", 1)[-1]: v for k, v in counts.items() if v}
                    if total is not None:
                        other = total - sum(per.values())
                        if other > 0:
                            per["other"] = other
                    res["syscalls_" + phase] = total
                    res["per_request_" + phase] = total / n if total is not None else None
                    res["by_syscall_" + phase] = {k: v / n for k, v in per.items()}
                    res["errors_" + phase] = a["errors"]
                    if total is None:
                        self.problem("%s: perf stat counted nothing (%s): is perf allowed to "
                                     "read tracepoints (run as root)?" % (name, phase))
                    if a["errors"]:
                        self.problem("%s under perf (%s): ab reported %d errors" % (
                            name, phase, a["errors"]))
            finally:
                srv.stop()
            out[name] = res
            log("bench: perf %s: %s syscalls/request keep-alive, %s close" % (
                name, fmt(res.get("per_request_keepalive")), fmt(res.get("per_request_close"))))
        return out


# The system calls --perf-syscalls names one by one (the rest are "other").
PERF_SYSCALLS = ["read", "recvfrom", "recvmsg", "write", "writev", "sendmsg", "sendto",
                 "sendfile64", "pread64", "epoll_wait", "epoll_pwait", "epoll_ctl", "accept4",
                 "close", "shutdown", "openat", "newfstatat", "newfstat", "setsockopt", "ioctl",
                 "fcntl", "clock_gettime", "futex"]


def parse_perf_stat(path):
    """perf stat -x, output: {event: count}, a float for a time (task-clock,
    in ms); events it could not count ("<not counted>") are left out."""
    counts = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) >= 3 and re.match(r"\d+(\.\d+)?$", parts[0]):
                    v = parts[0]
                    counts[parts[2]] = float(v) if "." in v else int(v)
    except OSError:
        pass
    return counts


def callgrind_totals(path):
    """(trigger, Ir) of a callgrind dump. The totals line at the end is the
    one to trust: after callgrind_control toggled instrumentation, a later
    dump's summary line in the header can wrap around below zero (seen as
    18446744073695949739); the summary is used only without a totals line."""
    trig, total, summary = None, None, None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("desc: Trigger:"):
                    trig = line.strip()
                elif line.startswith("totals:") or line.startswith("summary:"):
                    v = line.split()[1:]
                    if v and line.startswith("totals:"):
                        total = int(v[0])
                    elif v:
                        summary = int(v[0])
    except OSError:
        pass
    return trig, total if total is not None else summary


def wait_traced(pids, timeout):
    """Until every thread of every pid has a tracer (strace attached)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ok = True
        for p in pids:
            try:
                tids = os.listdir("/proc/%d/task" % p)
            except OSError:
                continue
            for t in tids:
                try:
                    with open("/proc/%d/task/%s/status" % (p, t)) as f:
                        m = re.search(r"TracerPid:\s+(\d+)", f.read())
                    if not m or m.group(1) == "0":
                        ok = False
                except OSError:
                    pass
        if ok:
            time.sleep(0.2)
            return True
        time.sleep(0.05)
    return False


def parse_strace(path):
    calls, errs, per = None, None, {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 5 or not re.match(r"[\d.]+$", parts[0]):
                    continue
                name = parts[-1]
                n = int(parts[3])
                e = int(parts[4]) if len(parts) == 6 else 0
                if name == "total":
                    calls, errs = n, e
                else:
                    per[name] = n
    except OSError:
        pass
    return calls, errs, per


def h2_frame(ftype, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + \
        payload


# A minimal HTTP/2 client's first bytes: the preface, empty SETTINGS, and
# GET /hello.txt on stream 1 (END_STREAM | END_HEADERS). The header block is
# HPACK from the static table, no Huffman: :method GET (index 2), :scheme
# https (7), then :path and :authority as literals without indexing whose
# names are static indexes 4 and 1.
H2_IDLE_REQUEST = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0) + h2_frame(
    1, 0x5, 1, b"\x82\x87\x04\x0a/hello.txt\x01\x09localhost"))


def h2_idle_read(st, send):
    """Frames received on an idle HTTP/2 connection: acknowledge the
    server's SETTINGS (with send), and say whether stream 1 ended with a
    200 (:status 200 is static index 8: 0x88) and SETTINGS were exchanged."""
    buf = st["buf"]
    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
        n, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
        sid, payload, buf = int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n], buf[9 + n:]
        if ftype == 4 and not flags & 1:
            send(h2_frame(4, 1, 0))
            st["acked"] = True
        elif ftype == 1 and sid == 1:
            st["ok"] = payload[:1] == b"\x88" and not flags & 0x28  # no padding, no priority
        if ftype in (0, 1) and sid == 1 and flags & 1:
            st["ended"] = True
    st["buf"] = buf
    return st.get("ended") and st.get("acked") and st.get("ok")


def idle_client(port, n, inflight_max=256, timeout=60, tls=None, h2=False):
    """Open n connections, send one GET on each, read the response and keep
    the connection open, idle. Non-blocking sockets and a selector. tls: an
    SSLContext, to make the TLS handshake first (no resumption: a new session
    each time). h2: speak HTTP/2 (tls offers ALPN h2): the preface, SETTINGS
    both ways, one GET (H2_IDLE_REQUEST)."""
    sel = selectors.DefaultSelector()
    req = H2_IDLE_REQUEST if h2 else b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    done, socks = [], []
    opened = failed = inflight = 0
    deadline = time.time() + timeout
    while len(done) + failed < n and time.time() < deadline:
        while opened < n and inflight < inflight_max:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            sel.register(s, selectors.EVENT_WRITE, {"state": "connect", "buf": b"",
                                                    "i": len(socks)})
            socks.append(s)
            opened += 1
            inflight += 1
        for key, ev in sel.select(0.5):
            s, st = key.fileobj, key.data
            if st["state"] == "connect":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    sel.unregister(s)
                    failed += 1
                    inflight -= 1
                    continue
                if tls:
                    sel.unregister(s)
                    s = socks[st["i"]] = tls.wrap_socket(s, server_hostname="localhost",
                                                         do_handshake_on_connect=False)
                    st["state"] = "handshake"
                    sel.register(s, selectors.EVENT_WRITE, st)
                    continue
                s.send(req)
                st["state"] = "read"
                sel.modify(s, selectors.EVENT_READ, st)
            elif st["state"] == "handshake":
                try:
                    s.do_handshake()
                except ssl.SSLWantReadError:
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                except ssl.SSLWantWriteError:
                    sel.modify(s, selectors.EVENT_WRITE, st)
                    continue
                except OSError:
                    sel.unregister(s)
                    failed += 1
                    inflight -= 1
                    continue
                s.send(req)  # a few bytes into an empty socket buffer
                st["state"] = "read"
                sel.modify(s, selectors.EVENT_READ, st)
            else:
                try:
                    data = s.recv(65536)
                except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                        ssl.SSLWantWriteError):
                    continue  # for TLS also: a record that was no data (a ticket)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    failed += 1
                    inflight -= 1
                    continue
                st["buf"] += data
                if h2:
                    if h2_idle_read(st, s.send):
                        sel.unregister(s)
                        inflight -= 1
                        done.append(s)
                    continue
                head, sep, body = st["buf"].partition(b"\r\n\r\n")
                if sep:
                    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                    if m and len(body) >= int(m.group(1)):
                        sel.unregister(s)
                        inflight -= 1
                        done.append(s)
    sel.close()
    return socks, {"answered": len(done), "failed_connections": failed,
                   "not_answered_in_time": n - len(done) - failed}


def count_open(socks):
    """Connections the server has not closed (no EOF pending; for TLS, no
    close_notify either)."""
    n = 0
    for s in socks:
        if isinstance(s, ssl.SSLSocket):
            try:
                n += 1 if s.recv(1) else 0  # data: unexpected, but still open
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                n += 1
            except (OSError, ValueError):
                pass
            continue
        try:
            if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                continue
            n += 1  # unexpected data, but still open
        except (BlockingIOError, InterruptedError):
            n += 1
        except OSError:
            pass
    return n


class IdleClients:
    """The idle scenario's connections: held by this process (plain), or by
    a child process running idle_child() (TLS: started with the clients'
    OPENSSL_CONF, which this process's ssl module was initialised without)."""

    def __init__(self, port, n, tls_env=None, h2=False):
        self.socks, self.child = [], None
        if tls_env is None:
            self.socks, self.stats = idle_client(port, n, h2=h2)
            return
        self.child = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                       "--idle-client", str(port), str(n)] + (["h2"] if h2 else []),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=tls_env)
        self.stats = self.ask() or {"failed_connections": n, "answered": 0,
                                    "child_exit": self.child.poll()}

    def ask(self, line=None):
        try:
            if line:
                self.child.stdin.write(line + "\n")
                self.child.stdin.flush()
            return json.loads(self.child.stdout.readline() or "null")
        except (OSError, ValueError):
            return None

    def count_open(self):
        if self.child is None:
            return count_open(self.socks)
        return (self.ask("count") or {}).get("still_open", 0)

    def close(self):
        for s in self.socks:
            s.close()
        if self.child:
            try:
                self.child.stdin.close()
                self.child.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.child.kill()
                self.child.wait()


def handshake_child(port, seconds, mode):
    """bench.py --handshake-client PORT SECONDS new|reuse: for SECONDS, one
    connection after the other, each a TLS handshake then `GET /hello.txt`
    (HTTP/1.1, Connection: close) read whole by its Content-Length; prints
    one JSON line. new: no session is offered, every handshake is a full one.
    reuse: a first connection (not counted) gets a session (a TLS 1.3 ticket),
    which every connection then offers, as `openssl s_time -reuse` does. The
    session is taken once the answer is read, not at the server's close, so a
    close without close_notify (an unexpected EOF, after which OpenSSL drops
    the session) does not prevent resumption."""
    ctx = insecure_context()
    req = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"

    def fetch(session):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            # Finished and the request are two writes: without this, Nagle
            # holds the request until the server's delayed ACK (40 ms).
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                s.sendall(req)
                buf = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise OSError("closed before the whole answer")
                    buf += chunk
                    head, sep, body = buf.partition(b"\r\n\r\n")
                    m = re.search(rb"(?i)content-length:\s*(\d+)", head) if sep else None
                    if m and len(body) >= int(m.group(1)):
                        break
                if not head.startswith(b"HTTP/1.1 200"):
                    raise OSError("answer %r" % head[:40])
                return s.session, s.session_reused

    r = {"requests": 0, "resumed": 0, "full_handshakes": 0, "errors": 0, "latencies_ms": []}
    session = None
    if mode == "reuse":
        try:
            session = fetch(None)[0]
        except OSError:
            r["errors"] += 1
    start = time.monotonic()
    while time.monotonic() < start + seconds:
        t0 = time.perf_counter()
        try:
            _, reused = fetch(session)
        except OSError:
            r["errors"] += 1
            continue
        r["latencies_ms"].append(round((time.perf_counter() - t0) * 1e3, 3))
        r["requests"] += 1
        r["resumed" if reused else "full_handshakes"] += 1
    r["seconds"] = time.monotonic() - start
    print(json.dumps(r), flush=True)
    return 0


def idle_child(port, n, h2=False):
    """bench.py --idle-client PORT N [h2]: open N TLS connections (idle_client;
    h2: HTTP/2, ALPN h2), print the figures as a JSON line, answer each `count`
    line with the connections still open, close them all at the end of the
    input."""
    ctx = insecure_context()
    if h2:
        ctx.set_alpn_protocols(["h2"])
    socks, stats = idle_client(port, n, timeout=120, tls=ctx, h2=h2)
    ciphers = {s.cipher()[0] for s in socks if isinstance(s, ssl.SSLSocket) and s.cipher()}
    stats["client_ciphers"] = sorted(ciphers)
    if h2:
        stats["alpn"] = sorted({s.selected_alpn_protocol() or "none" for s in socks
                                if isinstance(s, ssl.SSLSocket) and s.cipher()})
    print(json.dumps(stats), flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(json.dumps({"still_open": count_open(socks)}), flush=True)
    for s in socks:
        s.close()
    return 0


# ---------------------------------------------------------------- reporting

METRICS = [  # key, heading, higher is better?, format
    ("rps", "req/s", True, "%.0f"),
    ("p50_ms", "p50 ms", False, "%.2f"),
    ("p99_ms", "p99 ms", False, "%.2f"),
    ("errors", "errors", False, "%.0f"),
    ("cpu_us_per_request", "CPU µs/req", False, "%.1f"),
    ("client_cpu_us_per_request", "client CPU µs/req", False, "%.1f"),
    ("total_cpu_us_per_request", "server + client CPU µs/req", False, "%.1f"),
    ("rss_peak_kb", "peak RSS MiB", False, "MiB"),
    ("pss_peak_kb", "peak PSS MiB", False, "MiB"),
]


def fmt(v, f="%.1f"):
    if v is None:
        return "–"
    if f == "MiB":
        return "%.1f" % (v / 1024.0)
    if isinstance(v, float) and f == "%.0f" and v >= 1e6:
        return "%.3g" % v
    return f % v


def stats(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def cell(st, f):
    if st is None:
        return "–"
    if st["n"] == 1 or st["min"] == st["max"]:
        return fmt(st["median"], f)
    return "%s [%s–%s]" % (fmt(st["median"], f), fmt(st["min"], f), fmt(st["max"], f))


def ratio_cell(mine, peers, higher, peer_names):
    """Monkey's median / the best peer's median for a metric."""
    if mine is None:
        return "–"
    cands = [(st["median"], nm) for st, nm in zip(peers, peer_names) if st is not None]
    if not cands:
        return "–"
    best, who = (max if higher else min)(cands)
    m = mine["median"]
    if best == 0:
        return "0 = 0 (%s)" % who if m == 0 else "%s vs 0 (%s)" % (fmt(m, "%.0f"), who)
    return "%.2f (%s)" % (m / best, who)


def group(runs, scenario, **kw):
    out = {}
    for r in runs:
        if r.get("scenario") != scenario or r.get("failed"):
            continue
        if any(r.get(k) != v for k, v in kw.items()):
            continue
        out.setdefault(r["server"], []).append(r)
    return out


def summarize(runs, scenario, servers, **kw):
    g = group(runs, scenario, **kw)
    return {s: {k: stats([r.get(k) for r in g.get(s, [])]) for k, *_ in METRICS}
            for s in servers}


def table(summary, servers, ratio_against=None):
    peers = [p for p in PEERS if p in servers]
    lines = ["| server | " + " | ".join("%s %s" % (h, "↑" if hi else "↓")
                                        for _, h, hi, _ in METRICS) + " |",
             "|---" * (len(METRICS) + 1) + "|"]
    for s in servers:
        lines.append("| %s | " % s + " | ".join(cell(summary[s][k], f)
                                                  for k, _, _, f in METRICS) + " |")
    if "monkey" in servers and peers:
        lines.append("| **Monkey / best peer** | " + " | ".join(
            ratio_cell(summary["monkey"][k], [summary[p][k] for p in peers], hi, peers)
            for k, _, hi, _ in METRICS) + " |")
    if ratio_against and "monkey" in servers and ratio_against in servers:
        lines.append("| **Monkey / %s** | " % ratio_against + " | ".join(
            ratio_cell(summary["monkey"][k], [summary[ratio_against][k]], hi, [ratio_against])
            for k, _, hi, _ in METRICS) + " |")
    return lines


def report(b, results):
    a, m = b.args, b.m
    servers = a.servers
    L = ["# Monkey benchmark results", ""]
    L += ["- date: %s; mode: `%s`; %d workers per server; servers: %s; scenarios: %s" % (
        results["date"], a.mode, a.workers, ", ".join(servers), ", ".join(a.scenarios) or "none"),
          "- machine: %s, %d CPUs, kernel %s; load average at start %s, at end %s" % (
              results["machine"]["cpu"], os.cpu_count(), platform.release(),
              results["machine"]["loadavg_start"], results["machine"]["loadavg_end"]),
          "- versions: %s" % "; ".join("%s %s" % kv for kv in results["versions"].items()),
          "- wall time: %.1f minutes" % (results["elapsed_s"] / 60.0)]
    L += ["- note: " + a.note] if a.note else []
    L += ["",
          "Each cell: median [min–max] over the rounds. ↑ higher is better, ↓ lower is "
          "better. The ratio row is Monkey's median divided by the best median of "
          "nginx, lighttpd and h2o for that column (the best peer named in brackets): "
          "above 1 is better than the best peer for ↑ columns, below 1 is better for ↓ "
          "columns. CPU µs/req is the CPU time (user + system) of the server's whole "
          "process tree during the run divided by the requests served; client CPU "
          "µs/req is the same for the load tool (wrk, h2load, ab or the Python clients: "
          "user + system from its rusage, children included) and server + client their "
          "sum. On loopback the kernel's TCP work lands on either side depending on how "
          "each behaves, so where the server columns differ by what the client pays "
          "(large files), compare the sum. RSS counts a "
          "page shared by several processes once per process, PSS divides it among them. "
          "Absolute figures on a shared 2-core machine are noise; compare the ratios "
          "within one run. See bench/README.md.", ""]
    tls_done = h2_done = False
    for sc in a.scenarios:
        if sc.startswith("tls_") and not tls_done:
            L += tls_intro(b)
            tls_done = True
        if sc.startswith("h2") and not h2_done:
            L += h2_intro(b)
            h2_done = True
        if sc in SCENARIO_INFO:
            title, path, hdr = SCENARIO_INFO[sc]
            tls = sc.startswith("tls_")
            L += ["## %s: %s" % (sc, title), "",
                  "`wrk -t2 -c100 -d%ds --latency --timeout 10s%s %s`, %d round(s)%s." % (
                      m["duration"], "".join(' -H "%s"' % h for h in hdr[1::2]),
                      "%s://127.0.0.1:PORT/%s" % ("https" if tls else "http", path),
                      m["rounds"],
                      ", after a %d s warm-up" % m["warmup"] if m["warmup"] else ""), ""]
            srv = b.tls_servers() if tls else servers
            L += table(summarize(b.runs, sc, srv), srv) + [""]
        elif sc in H2_INFO:
            L += h2_table(b, sc)
        elif sc in TLS_HANDSHAKES:
            L += handshake_table(b, sc)
        elif sc == "sweep":
            L += ["## sweep: concurrency 100 to 1000 on the 200 KB file", "",
                  "`wrk -t2 -cN -d%ds --latency --timeout 10s http://127.0.0.1:PORT/"
                  "file200k.bin` for N in %s, %d round(s) each. One table per metric; "
                  "charts: `sweep_rps.png`, `sweep_memory.png`." % (
                      m["sweep_duration"], ", ".join(map(str, m["sweep"])), m["sweep_rounds"]),
                  ""]
            peers = [p for p in PEERS if p in servers]
            for k, h, hi, f in METRICS:
                L += ["### %s %s" % (h, "(higher is better)" if hi else "(lower is better)"),
                      "", "| connections | " + " | ".join(servers) +
                      (" | Monkey / best peer |" if "monkey" in servers and peers else " |"),
                      "|---" * (len(servers) + 1 + (1 if "monkey" in servers and peers else 0))
                      + "|"]
                for c in m["sweep"]:
                    sm = summarize(b.runs, "sweep", servers, connections=c)
                    row = "| %d | " % c + " | ".join(cell(sm[s][k], f) for s in servers)
                    if "monkey" in servers and peers:
                        row += " | " + ratio_cell(sm["monkey"][k], [sm[p][k] for p in peers],
                                                  hi, peers)
                    L.append(row + " |")
                L.append("")
        elif sc == "node":
            L += ["## node: ab -n %d -c %d against node.js and each server" % (
                m["node_n"], m["node_c"]), "",
                  "`ab -q -r -s 30 -n %d -c %d http://127.0.0.1:PORT/hello.txt` (HTTP/1.0, "
                  "a new connection per request), %d round(s). node.js serves the same 13 "
                  "bytes from bench/node/hello.js, a cluster of %d workers. ab's percentiles "
                  "are whole milliseconds." % (m["node_n"], m["node_c"], m["node_rounds"],
                                               a.workers), ""]
            srv = (["node"] if group(b.runs, "node").get("node") else []) + servers
            L += table(summarize(b.runs, "node", srv), srv,
                       ratio_against="node" if "node" in srv else None) + [""]
        elif sc in ("idle", "tls_idle", "h2_idle"):
            L += idle_table(b, b.tls_servers() if sc != "idle" else servers, sc)
    if results.get("callgrind"):
        L += ["## callgrind: user-space instructions per request (deterministic)", "",
              "One worker per server under `valgrind --tool=callgrind --instr-atstart=no`; "
              "instrumentation is switched on with `callgrind_control -i on` after start-up, "
              "then `ab -k -n %d -c 1` (keep-alive) and `ab -n %d -c 1 -H 'Connection: close'`"
              " of `/%s` run one after the other, with a `callgrind_control --dump` after each."
              " Ir is every instruction the server's process executed in user space (all "
              "threads), kernel time is not counted. Lower is better." % (
                  a.cg_requests, a.cg_close, a.cg_file), "",
              "| server | Ir/request keep-alive ↓ | Ir/request close ↓ | ab errors |",
              "|---|---|---|---|"]
        cg = results["callgrind"]
        for s in servers:
            r = cg.get(s, {})
            L.append("| %s | %s | %s | %s |" % (s, fmt(r.get("ir_per_request_keepalive"), "%.0f"),
                                               fmt(r.get("ir_per_request_close"), "%.0f"),
                                               "%s / %s" % (r.get("errors_keepalive", "–"),
                                                            r.get("errors_close", "–"))))
        L += det_ratio(cg, servers, ["ir_per_request_keepalive", "ir_per_request_close"], 3)
        L.append("")
    if results.get("syscalls"):
        sy = results["syscalls"]
        L += ["## strace: system calls per request (deterministic)", "",
              "The same loads (`ab -k -n %d -c 1`, then `ab -n %d -c 1 -H 'Connection: "
              "close'`, of `/%s`) against one worker per server, counted by `strace -c -f` "
              "attached to every process of the server after start-up. Lower is better." % (
                  a.cg_requests, a.cg_close, a.cg_file), "",
              "| server | syscalls/request keep-alive ↓ | syscalls/request close ↓ | "
              "keep-alive: the most frequent, per request | close: the most frequent, "
              "per request |", "|---|---|---|---|---|"]
        for s in servers:
            r = sy.get(s, {})

            def top(ph):
                d = r.get("by_syscall_" + ph) or {}
                return ", ".join("%s %.2f" % (k, v) for k, v in
                                 sorted(d.items(), key=lambda kv: -kv[1])[:6])
            L.append("| %s | %s | %s | %s | %s |" % (
                s, fmt(r.get("per_request_keepalive"), "%.2f"),
                fmt(r.get("per_request_close"), "%.2f"), top("keepalive"), top("close")))
        L += det_ratio(sy, servers, ["per_request_keepalive", "per_request_close"], 4)
        L.append("")
    if results.get("perf_syscalls"):
        sy = results["perf_syscalls"]
        L += ["## perf: system calls per request, untraced", "",
              "The same loads, the system calls counted by `perf stat` on the kernel's "
              "syscall tracepoints (`raw_syscalls:sys_enter` for the total) for every process "
              "of the server: nothing stops the server at each call, so a call whose result "
              "depends on timing (an eager read or accept) is counted as it happens at full "
              "speed, where strace, which slows the server several times, lets the client "
              "win every race. Not deterministic: the figures move with the machine's load "
              "by a few hundredths. Lower is better.", "",
              "| server | syscalls/request keep-alive ↓ | syscalls/request close ↓ | "
              "keep-alive: the most frequent, per request | close: the most frequent, "
              "per request |", "|---|---|---|---|---|"]
        for s in servers:
            r = sy.get(s, {})

            def top(ph):
                d = r.get("by_syscall_" + ph) or {}
                return ", ".join("%s %.2f" % (k, v) for k, v in
                                 sorted(d.items(), key=lambda kv: -kv[1])[:6])
            L.append("| %s | %s | %s | %s | %s |" % (
                s, fmt(r.get("per_request_keepalive"), "%.2f"),
                fmt(r.get("per_request_close"), "%.2f"), top("keepalive"), top("close")))
        L += det_ratio(sy, servers, ["per_request_keepalive", "per_request_close"], 4)
        L.append("")
    if b.problems:
        L += ["## Problems seen", ""] + ["- " + p.replace("\n", "\n  ") for p in b.problems]
        L.append("")
    return "\n".join(L) + "\n"


def tls_intro(b):
    """What every tls_* scenario shares: certificate, protocol, servers."""
    L = ["## TLS scenarios", "",
         "Servers: %s (each with its own defaults for session resumption, TLS records "
         "and buffers), %d workers each. Certificate: ECDSA P-256 (prime256v1), "
         "self-signed for `localhost`, made at the start of the run with `openssl req "
         "-x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes`; every server "
         "serves that one. Every client (wrk, openssl s_client, the handshake and idle clients) "
         "reads an `OPENSSL_CONF` that lets it offer only %s with %s, so every server "
         "negotiates the same; `openssl s_client -brief` checks it after each start. The last "
         "column says whether the server sends a `close_notify` alert when it closes after "
         "an HTTP/1.0 answer (without it, an OpenSSL client that reads to the end, such as "
         "`openssl s_time -reuse`, drops the session and never resumes). What the checks "
         "saw:"
         % (", ".join(b.tls_servers()), b.args.workers, TLS_PROTOCOL, TLS_CIPHER),
         "", "| server | protocol | cipher | key exchange | signature | close_notify |",
         "|---|---|---|---|---|---|"]
    for s in b.tls_servers():
        seen = sorted({tuple((r.get("tls") or {}).get(k) or "–" for k in (
            "protocol", "cipher", "group", "signature", "close_notify")) for r in b.runs
            if r.get("server") == s and r.get("scenario", "").startswith("tls_")
            and r.get("tls")})
        for row in seen:
            L.append("| %s | %s |" % (s, " | ".join(row)))
    return L + [""]


def h2_intro(b):
    """What the HTTP/2 scenarios share: servers, configurations, load tool."""
    return ["## HTTP/2 scenarios", "",
            "h2load (nghttp2's load tool) against %s over TLS with ALPN h2 (the certificate, "
            "protocol and suite of the TLS scenarios: h2load offers only %s), and against "
            "%s in cleartext with prior knowledge (h2c; nginx serves no HTTP/1 on a port "
            "with `listen ... http2` and no TLS, so it is measured over TLS only). %d workers "
            "each. Monkey: `Listen 127.0.0.1:PORT tls` (ALPN h2 needs no option) or `Listen "
            "127.0.0.1:PORT h2c`, its HTTP/2 defaults (`MaxConcurrentStreams 100`, "
            "`Http2IdleTimeout 60`); nginx: `listen ... ssl http2`, its defaults "
            "(`http2_max_concurrent_streams 128`); h2o: `http2-idle-timeout: 60`, its "
            "defaults otherwise (100 streams). After every start one `h2load -n1` request "
            "must come back over HTTP/2. CPU µs/req is the CPU time of the server's process "
            "tree (from /proc, sampled by mk-watch) divided by the requests h2load completed; "
            "h2load prints no percentiles, so the p50 and p99 columns stay empty (its mean "
            "time per request is in the JSON, `mean_ms`)." % (
                ", ".join(b.tls_servers()), TLS_CIPHER,
                ", ".join(s for s in b.args.servers if s in H2C_SERVERS), b.args.workers), ""]


def h2_table(b, sc):
    title, path, tls, args = H2_INFO[sc]
    m, srv = b.m, b.h2servers(sc)
    timing = "" if any(a.startswith("-n") for a in args) else " -D %d" % m["duration"]
    L = ["## %s: %s" % (sc, title), "",
         "`h2load %s%s %s://127.0.0.1:PORT/%s`, %d round(s)%s." % (
             " ".join(args), timing, "https" if tls else "http", path, m["rounds"],
             ", after a %d s warm-up" % m["warmup"] if m["warmup"] else ""), ""]
    if sc == "h2_streams":
        L[-2] = L[-2][:-1] + (": 1000 requests of the 1 MB file on one connection, 100 "
                              "streams open at a time; req/s × 1 MiB is the throughput.")
    L += table(summarize(b.runs, sc, srv), srv)
    seen = sorted({"%s: %s" % (s, (r.get("h2") or {}).get("alpn"))
                   for s in srv for r in group(b.runs, sc).get(s, [])})
    return L + ["", "Protocol h2load saw: " + "; ".join(seen) + ".", ""]


def handshake_table(b, sc):
    title, mode = TLS_HANDSHAKES[sc]
    m, srv = b.m, b.tls_servers()
    L = ["## %s: %s" % (sc, title), "",
         "%d × `bench.py --handshake-client PORT %d %s` at once (one per worker), %d "
         "round(s)%s: Python's ssl, one connection after the other, each a handshake then "
         "`GET /hello.txt` (`Connection: close`) read whole. req/s = the sum of each "
         "client's connections / its seconds; p50 and p99 are of connect + handshake + "
         "answer. %s" % (
             b.args.workers, m["duration"], mode, m["rounds"],
             ", after a %d s warm-up" % m["warmup"] if m["warmup"] else "",
             "`new`: no session is offered, each handshake is a full one (ECDHE and an "
             "ECDSA signature)." if mode == "new" else
             "`reuse`: one full handshake first (not counted), then every connection "
             "offers that session (a TLS 1.3 ticket) again."), ""]
    L += table(summarize(b.runs, sc, srv), srv)
    g = group(b.runs, sc)
    L += ["", "Handshakes the clients saw (all rounds, `SSLSocket.session_reused`): " + "; ".join(
        "%s %d resumed, %d full" % (s, sum(r.get("resumed") or 0 for r in g.get(s, [])),
                                    sum(r.get("full_handshakes") or 0 for r in g.get(s, [])))
        for s in srv) + ".", ""]
    return L


def det_ratio(d, servers, keys, cols):
    peers = [p for p in PEERS if p in servers and d.get(p)]
    if "monkey" not in servers or not peers or not d.get("monkey"):
        return []
    cells = []
    for k in keys:
        mine = d["monkey"].get(k)
        cands = [(d[p].get(k), p) for p in peers if d[p].get(k) is not None]
        if mine is None or not cands:
            cells.append("–")
            continue
        best, who = min(cands)
        cells.append("%.2f (%s)" % (mine / best, who) if best else "–")
    return ["| **Monkey / best peer** | " + " | ".join(cells) + " |" * (cols - len(keys)) + " |"]


def idle_table(b, servers, sc="idle"):
    m = b.m
    tls, h2 = sc in ("tls_idle", "h2_idle"), sc == "h2_idle"
    L = ["## %s: %d idle keep-alive %sconnections" % (
        sc, m["idle_n"], "HTTP/2 (TLS) " if h2 else "TLS " if tls else ""),
         "",
         "bench.py opens %d connections (at most 256 connecting at once)%s, sends one "
         "`GET /hello.txt` on each%s, reads the answer and leaves the connection open. The "
         "server's memory is sampled by mk-watch for 1 s before and 1 s after (averages); "
         "KB per connection = (after - before) / connections still open. %d round(s)." % (
             m["idle_n"], ", makes a full TLS handshake on each (Python's ssl, non-blocking, "
             "in a child process%s)" % (", offering ALPN h2" if h2 else "") if tls else "",
             " (HTTP/2: the connection preface, SETTINGS both ways, the SETTINGS of the server "
             "acknowledged, HEADERS on stream 1, the answer read to END_STREAM)" if h2 else "",
             m["idle_rounds"]), "",
         "| server | still open ↑ | RSS before MiB | RSS after MiB | RSS KB/conn ↓ | "
         "PSS KB/conn ↓ | seconds to open |", "|---|---|---|---|---|---|---|"]
    g = group(b.runs, sc)
    sm = {}
    for s in servers:
        rs = g.get(s, [])
        sm[s] = {k: stats([r.get(k) for r in rs]) for k in (
            "still_open", "rss_before_kb", "rss_after_kb", "rss_kb_per_conn",
            "pss_kb_per_conn", "open_seconds")}
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            s, cell(sm[s]["still_open"], "%.0f"), cell(sm[s]["rss_before_kb"], "MiB"),
            cell(sm[s]["rss_after_kb"], "MiB"), cell(sm[s]["rss_kb_per_conn"], "%.2f"),
            cell(sm[s]["pss_kb_per_conn"], "%.2f"), cell(sm[s]["open_seconds"], "%.1f")))
    peers = [p for p in PEERS if p in servers]
    if "monkey" in servers and peers:
        L.append("| **Monkey / best peer** | %s | | | %s | %s | |" % (
            ratio_cell(sm["monkey"]["still_open"], [sm[p]["still_open"] for p in peers],
                       True, peers),
            ratio_cell(sm["monkey"]["rss_kb_per_conn"],
                       [sm[p]["rss_kb_per_conn"] for p in peers], False, peers),
            ratio_cell(sm["monkey"]["pss_kb_per_conn"],
                       [sm[p]["pss_kb_per_conn"] for p in peers], False, peers)))
    if tls and "monkey" in servers and "nginx" in servers and "h2o" in servers:
        for peer in ("nginx", "h2o"):
            L.append("| **Monkey / %s** | | | | %s | %s | |" % ((peer,) + tuple(
                ratio_cell(sm["monkey"][k], [sm[peer][k]], False, [peer])
                for k in ("rss_kb_per_conn", "pss_kb_per_conn"))))
    elif tls and "monkey" in servers and "nginx" in servers:
        L.append("| **Monkey / nginx** | | | | %s | %s | |" % tuple(
            ratio_cell(sm["monkey"][k], [sm["nginx"][k]], False, ["nginx"])
            for k in ("rss_kb_per_conn", "pss_kb_per_conn")))
    return L + [""]


def charts(b, outdir):
    if not shutil.which("gnuplot"):
        b.problem("gnuplot is not installed: no charts")
        return []
    servers = b.args.servers
    made = []
    for key, name, ylabel, scale in (
            ("rps", "sweep_rps.png", "requests/s (median, min-max bars)", 1.0),
            ("rss_peak_kb", "sweep_memory.png", "peak RSS, MiB (solid); peak PSS, MiB (dashed)",
             1 / 1024.0)):
        dat = os.path.join(b.wd, name + ".dat")
        have = False
        with open(dat, "w") as f:
            for s in servers:
                f.write("# %s\n" % s)
                for c in b.m["sweep"]:
                    sm = summarize(b.runs, "sweep", servers, connections=c)[s]
                    st, pst = sm[key], sm["pss_peak_kb"]
                    if st is None:
                        continue
                    have = True
                    row = [c, st["median"] * scale, st["min"] * scale, st["max"] * scale]
                    if pst:
                        row += [pst["median"] * scale, pst["min"] * scale, pst["max"] * scale]
                    else:
                        row += ["NaN"] * 3
                    f.write(" ".join(str(x) for x in row) + "\n")
                f.write("\n\n")
        if not have:
            continue
        png = os.path.join(outdir, name)
        colors = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd"]
        plots = []
        for i, s in enumerate(servers):
            col = colors[i % len(colors)]
            plots.append("'%s' index %d using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb '%s' "
                         "title '%s'" % (dat, i, col, s))
            if key == "rss_peak_kb":
                plots.append("'%s' index %d using 1:5 with linespoints dt 2 lw 1 pt 6 "
                             "lc rgb '%s' title '%s PSS'" % (dat, i, col, s))
        script = """set terminal pngcairo size 900,560 font 'sans,10'
set output '%s'
set title '%s against concurrency, 200 KB file, %d workers (%s mode)'
set xlabel 'concurrent connections (wrk -t2)'
set ylabel '%s'
set grid
set key outside right
set yrange [0:*]
set xrange [0:*]
plot %s
""" % (png, "Requests/s" if key == "rps" else "Memory", b.args.workers, b.args.mode, ylabel,
       ", ".join(plots))
        sp = os.path.join(b.wd, name + ".gp")
        write(sp, script)
        p = subprocess.run(["gnuplot", sp], capture_output=True, text=True)
        if p.returncode != 0:
            b.problem("gnuplot failed for %s: %s" % (name, p.stderr.strip()[-500:]))
        else:
            made.append(png)
    return made


def versions():
    v = {}
    for name, argv, rx in (
            ("monkey", [os.path.join(ROOT, "build", "bin", "monkey"), "-v"], r"Server (\S+)"),
            ("nginx", ["nginx", "-v"], r"nginx/(\S+)"),
            ("lighttpd", ["lighttpd", "-v"], r"lighttpd/(\S+)"),
            ("h2o", ["h2o", "--version"], r"version (\S+)"),
            ("node", ["node", "--version"], r"v(\S+)"),
            ("wrk", ["wrk", "--version"], r"wrk (\S+)"),
            ("ab", ["ab", "-V"], r"Version (\S+)"),
            ("valgrind", ["valgrind", "--version"], r"valgrind-(\S+)"),
            ("openssl", ["openssl", "version"], r"OpenSSL (\S+)")):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            m = re.search(rx, p.stdout + p.stderr)
            v[name] = m.group(1) if m else "?"
        except (OSError, subprocess.TimeoutExpired):
            v[name] = "missing"
    try:
        v["monkey_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return v


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            return m.group(1).strip() if m else platform.machine()
    except OSError:
        return platform.machine()


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = NOFILE
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    except (ValueError, OSError):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def main():
    if sys.argv[1:2] == ["--idle-client"]:
        return idle_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:5] == ["h2"])
    if sys.argv[1:2] == ["--client-rusage"] and sys.argv[3:4] == ["--"]:
        return client_rusage_child(sys.argv[2], sys.argv[4:])
    if sys.argv[1:2] == ["--handshake-client"]:
        return handshake_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    ap = argparse.ArgumentParser(
        prog="bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Benchmark Monkey against nginx, lighttpd and h2o (and node.js).",
        epilog="Scenarios: %s (or all).\n"
               "Examples:\n"
               "  bench/run.sh --quick\n"
               "  bench/run.sh --servers monkey,nginx --scenarios ka13,close13\n"
               "  bench/run.sh --callgrind --syscalls\n"
               "  bench/run.sh --quick --scenarios tls_full,tls_resume,tls_ka13,tls_1m,tls_idle"
               " --name tls\n"
               "  bench/run.sh --quick --scenarios h2_13,h2_200k,h2c_13,h2c_200k,h2_streams,"
               "h2_idle --name h2\n"
               "  make bench BENCH_ARGS='--quick --scenarios sweep'" % " ".join(SCENARIOS))
    ap.add_argument("--quick", action="store_true",
                    help="fewer rounds, shorter runs, 3 sweep points (under 3 minutes)")
    ap.add_argument("--servers", default=",".join(ALL_SERVERS),
                    help="comma-separated subset of %s (default: all)" % ",".join(ALL_SERVERS))
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated subset of %s, 'all' or 'none' (default: all, or "
                         "none when --callgrind/--syscalls is given)" % ",".join(SCENARIOS))
    ap.add_argument("--callgrind", action="store_true",
                    help="instructions per request under callgrind, one worker")
    ap.add_argument("--syscalls", action="store_true",
                    help="system calls per request with strace -c -f, one worker")
    ap.add_argument("--perf-syscalls", action="store_true",
                    help="system calls per request counted by perf stat (no tracer), one worker")
    ap.add_argument("--cg-file", default="hello.txt",
                    help="the file of the --callgrind/--syscalls/--perf-syscalls loads "
                         "(default hello.txt; file200k.bin, file1m.bin, text10k.js)")
    ap.add_argument("--cg-requests", type=int, default=20000,
                    help="keep-alive requests for --callgrind/--syscalls (default 20000)")
    ap.add_argument("--cg-close", type=int, default=2000,
                    help="Connection: close requests for --callgrind/--syscalls (default 2000)")
    ap.add_argument("--cg-header", action="append", default=[], metavar="HEADER",
                    help="a request header of those loads ('Accept-Encoding: gzip, br'); "
                         "repeatable")
    ap.add_argument("--monkey-binary", default=None,
                    help="the monkey binary to run (default build/bin/monkey)")
    ap.add_argument("--monkey-site", action="append", default=[], metavar="LINE",
                    help="a line added to Monkey's site ('Compress On'); repeatable")
    ap.add_argument("--monkey-site-file", action="append", default=[], metavar="FILE",
                    help="a file whose text is appended to Monkey's site file ([RULE] "
                         "sections); repeatable")
    ap.add_argument("--monkey-server", action="append", default=[], metavar="LINE",
                    help="a line added to Monkey's [SERVER] section ('RequestId On'); repeatable")
    ap.add_argument("--nginx-server-file", action="append", default=[], metavar="FILE",
                    help="a file whose text goes into nginx's server block (location, "
                         "add_header: the same rules as --monkey-site-file's); repeatable")
    ap.add_argument("--nginx-main", action="append", default=[], metavar="LINE",
                    help="a line of nginx's main context ('pcre_jit on;'); repeatable")
    ap.add_argument("--nginx-http-file", action="append", default=[], metavar="FILE",
                    help="a file whose text goes into nginx's http block (limit_req_zone); "
                         "repeatable")
    ap.add_argument("--workers", type=int, default=2, help="workers per server (default 2)")
    ap.add_argument("--rounds", type=int, help="override the rounds of every scenario")
    ap.add_argument("--duration", type=int, help="override the seconds of each wrk run")
    ap.add_argument("--port", type=int, default=18080,
                    help="loopback port (default 18080, or the next free one)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"),
                    help="output folder (default bench/results)")
    ap.add_argument("--name", default="results",
                    help="base name of the output files (default results: results.md, "
                         "results.json)")
    ap.add_argument("--note", default="",
                    help="a line for the header of the report (how the run was made)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    global MONKEY_BINARY
    if a.monkey_binary:
        MONKEY_BINARY = os.path.abspath(a.monkey_binary)
    MONKEY_SITE_LINES.extend(a.monkey_site)
    for f in a.monkey_site_file:
        with open(f) as fh:
            MONKEY_SITE_TEXT.append("\n" + fh.read())
    MONKEY_SERVER_LINES.extend(a.monkey_server)
    NGINX_MAIN_LINES.extend(a.nginx_main)
    for files, texts in ((a.nginx_server_file, NGINX_SERVER_TEXT),
                         (a.nginx_http_file, NGINX_HTTP_TEXT)):
        for f in files:
            with open(f) as fh:
                texts.append("\n" + fh.read())
    a.mode = "quick" if a.quick else "full"
    a.servers = [s for s in a.servers.split(",") if s]
    for s in a.servers:
        if s not in ALL_SERVERS:
            ap.error("unknown server %r (choose from %s)" % (s, ", ".join(ALL_SERVERS)))
    if a.scenarios is None:
        a.scenarios = "none" if (a.callgrind or a.syscalls or a.perf_syscalls) else "all"
    a.scenarios = (SCENARIOS if a.scenarios == "all" else [] if a.scenarios == "none"
                   else [s for s in a.scenarios.split(",") if s])
    for s in a.scenarios:
        if s not in SCENARIOS:
            ap.error("unknown scenario %r (choose from %s)" % (s, ", ".join(SCENARIOS)))
    a.scenarios = [s for s in SCENARIOS if s in a.scenarios]

    missing = [t for t in ["wrk", "ab"] + [s for s in a.servers if s != "monkey"]
               if not shutil.which(t)]
    if a.callgrind:
        missing += [t for t in ("valgrind", "callgrind_control") if not shutil.which(t)]
    if a.syscalls and not shutil.which("strace"):
        missing.append("strace")
    if a.perf_syscalls and not shutil.which("perf"):
        missing.append("perf")
    if a.cg_file not in FILES and a.cg_file != "text10k.js":
        ap.error("--cg-file: one of %s, text10k.js" % ", ".join(FILES))
    if any(s.startswith("h2") for s in a.scenarios):
        missing += [t for t in ("h2load",) if not shutil.which(t)]
    if any(s.startswith(("tls_", "h2")) for s in a.scenarios):
        missing += [t for t in ("openssl",) if not shutil.which(t)]
        if "monkey" in a.servers and not os.path.exists(TLS_PLUGIN):
            missing.append("build/plugins/monkey-tls.so (libssl-dev, then make reconfigure)")
    for f in ("monkey", "mk-watch"):
        if not os.access(os.path.join(ROOT, "build", "bin", f), os.X_OK):
            missing.append("build/bin/" + f + " (run make)")
    if missing:
        sys.exit("bench: missing: %s (run `sudo tools/deps.sh bench` or `make bench`)"
                 % ", ".join(missing))

    nofile = raise_nofile()
    b = Bench(a)
    for k in ("rounds", "duration"):
        if getattr(a, k):
            b.m[k] = getattr(a, k)
            b.m["sweep_" + k] = getattr(a, k)
            if k == "rounds":
                b.m["node_rounds"] = b.m["idle_rounds"] = a.rounds
    if nofile[0] < b.m["node_c"] + 100 or nofile[0] < b.m["idle_n"] + 100:
        b.problem("RLIMIT_NOFILE is only %d: the node and idle scenarios may fail" % nofile[0])
    log("bench: %s mode, servers %s, scenarios %s%s%s; port %d; temporary folder %s; "
        "RLIMIT_NOFILE %d" % (a.mode, ",".join(a.servers), ",".join(a.scenarios) or "none",
                              ", callgrind" if a.callgrind else "",
                              ", syscalls" if a.syscalls else "", b.port, b.wd, nofile[0]))
    t0 = time.time()
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "mode": a.mode, "note": a.note,
               "settings": dict(b.m, workers=a.workers, servers=a.servers,
                                scenarios=a.scenarios, keepalive_timeout=KEEPALIVE_TIMEOUT,
                                keepalive_requests=KEEPALIVE_REQUESTS,
                                max_connections=MAX_CONNECTIONS, backlog=BACKLOG,
                                rlimit_nofile=nofile[0], cg_requests=a.cg_requests,
                                cg_close=a.cg_close, cg_file=a.cg_file),
               "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(),
                           "kernel": platform.release(),
                           "loadavg_start": " ".join(open("/proc/loadavg").read().split()[:3])},
               "versions": versions()}
    interrupted = False
    try:
        for sc in a.scenarios:
            log("bench: == scenario %s" % sc)
            if sc in SCENARIO_INFO:
                b.run_wrk_scenario(sc)
            elif sc == "sweep":
                b.run_sweep()
            elif sc == "node":
                b.run_node()
            elif sc in TLS_HANDSHAKES:
                b.run_handshakes(sc)
            elif sc in H2_INFO:
                b.run_h2_scenario(sc)
            elif sc in ("idle", "tls_idle", "h2_idle"):
                b.run_idle(sc)
        if a.callgrind:
            results["callgrind"] = b.run_callgrind()
        if a.syscalls:
            results["syscalls"] = b.run_syscalls()
        if a.perf_syscalls:
            results["perf_syscalls"] = b.run_perf_syscalls()
    except KeyboardInterrupt:
        interrupted = True
        b.problem("interrupted: the results are incomplete")
    results["elapsed_s"] = time.time() - t0
    results["machine"]["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
    results["runs"] = b.runs
    results["problems"] = b.problems
    summ = {}
    for sc in a.scenarios:
        if sc == "sweep":
            summ[sc] = {str(c): summarize(b.runs, sc, a.servers, connections=c)
                        for c in b.m["sweep"]}
        elif sc == "node":
            summ[sc] = summarize(b.runs, sc, ["node"] + a.servers)
        elif sc not in ("idle", "tls_idle", "h2_idle"):
            summ[sc] = summarize(b.runs, sc, a.servers)
    results["summary"] = summ

    os.makedirs(a.out, exist_ok=True)
    made = charts(b, a.out) if "sweep" in a.scenarios else []
    md = report(b, results)
    if made:
        md += "Charts: %s\n" % ", ".join("`%s`" % os.path.basename(p) for p in made)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=False, default=str)
        f.write("\n")
    with open(os.path.join(a.out, a.name + ".md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)
    log("bench: %.1f minutes; wrote %s/%s.md, %s.json%s" % (
        results["elapsed_s"] / 60.0, a.out, a.name, a.name,
        "".join(", " + os.path.basename(p) for p in made)))
    if not a.keep:
        shutil.rmtree(b.wd, ignore_errors=True)
    else:
        log("bench: kept %s" % b.wd)
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
