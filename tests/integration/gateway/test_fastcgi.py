"""The FastCGI plugin (plugins/fastcgi) with a real php-fpm, started by each
test with its own pool configuration in a temporary folder, on a temporary
unix socket, and stopped by its PID. Pages, forms, cookies and sessions,
redirects, a 50 MB upload and a 200 MB response with bounded server memory,
PATH_INFO, index files, the site's Fallback, a backend down or killed, a
slow backend, the pool limit and the queue, keep-alive connections."""

import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import (BUILD, EMULATED, SANITIZED, SLOW, GuestStrace, Strace, needs_dlopen,
                      read_head, strace_count, vm_rss_kb, wait_for, wait_port)
from gwutil import (FIGURES, CgiConn, add_auth, check_remote_user, env_of, figures, get,
                    plugin_status, with_control)

FCGI_SO = BUILD / "plugins" / "monkey-fastcgi.so"
LOGGER_SO = BUILD / "plugins" / "monkey-logger.so"
PHP_FPM = shutil.which("php-fpm8.2") or (
    "/usr/sbin/php-fpm8.2" if Path("/usr/sbin/php-fpm8.2").exists() else None)

pytestmark = [
    needs_dlopen,
    pytest.mark.skipif(PHP_FPM is None, reason="php-fpm is not installed (tools/deps.sh test)"),
]

PAGES = {
    "index.php": '<?php header("X-Index: 1"); echo "front ", $_SERVER["SCRIPT_NAME"], " ",'
                 ' $_SERVER["REQUEST_URI"], " [", $_GET["q"] ?? "", "]\\n";',
    "info.php": "<?php phpinfo();",
    "env.php": '<?php header("Content-Type: text/plain");\n'
               'foreach (["SCRIPT_NAME","PATH_INFO","SCRIPT_FILENAME","DOCUMENT_ROOT",'
               '"REQUEST_URI","QUERY_STRING","REQUEST_METHOD","SERVER_PORT","HTTPS",'
               '"HTTP_PROXY","HTTP_X_THING","REMOTE_ADDR","SERVER_PROTOCOL"] as $k)'
               ' echo "$k=", $_SERVER[$k] ?? "-", "\\n";',
    "form.php": '<?php echo "name=", $_POST["name"] ?? "-", " n=", $_POST["n"] ?? "-",'
                ' " m=", $_SERVER["REQUEST_METHOD"], "\\n";',
    "session.php": '<?php session_start(); $_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;'
                   ' setcookie("seen", "yes"); echo "n=", $_SESSION["n"], "\\n";',
    "redirect.php": '<?php header("Location: /target.php?from=redirect"); echo "moved";',
    "status.php": '<?php http_response_code(418); echo "teapot";',
    # the variables built from the request's framing and target
    "vars.php": '<?php header("Content-Type: text/plain"); $in = file_get_contents("php://input");'
                ' foreach (["CONTENT_LENGTH","HTTP_CONTENT_LENGTH","HTTP_HOST","REQUEST_URI",'
                '"SERVER_NAME","QUERY_STRING"] as $k) echo "$k=", $_SERVER[$k] ?? "-", "\\n";'
                ' echo "BODY=", $in, "\\n";',
    # the cookies PHP read, and the field they came in
    "cookies.php": '<?php echo json_encode($_COOKIE), " ", $_SERVER["HTTP_COOKIE"] ?? "-";',
    # a status of the query's choosing (a 1xx is no final answer: 502)
    "code.php": '<?php http_response_code((int) $_GET["s"]); header("Upgrade: websocket");'
                ' header("Connection: Upgrade"); echo "code ", $_GET["s"];',
    "upload.php": '<?php $f = $_FILES["file"] ?? null;'
                  ' if (!$f || $f["error"]) { http_response_code(400); echo "error ",'
                  ' $f["error"] ?? "none"; exit; }'
                  ' echo $f["size"], " ", md5_file($f["tmp_name"]), "\\n";',
    "input.php": '<?php $h = hash_init("sha256"); $in = fopen("php://input", "rb"); $n = 0;'
                 ' while (!feof($in)) { $d = fread($in, 65536); $n += strlen($d);'
                 ' hash_update($h, $d); } echo $n, " ", hash_final($h), "\\n";',
    "big.php": '<?php $mb = (int) ($_GET["mb"] ?? 1); $s = str_repeat("y", 1048576);'
               ' for ($i = 0; $i < $mb; $i++) { echo $s; flush(); }',
    "slow.php": '<?php $s = (float) ($_GET["s"] ?? 1); usleep((int) ($s * 1000000));'
                ' echo "slept\\n";',
    "drip.php": '<?php for ($i = 0; $i < 40; $i++) { echo str_repeat("d", 8192); flush();'
                ' usleep(50000); }',
    "fatal.php": '<?php throw new Exception("boom in fatal.php");',
    "target.php": '<?php echo "target ", $_GET["from"] ?? "-", "\\n";',
}


class PhpFpm:
    """A php-fpm master with a static pool on a unix socket in `folder`, or on
    `listen` (HOST:PORT) when given."""

    def __init__(self, folder, children=4, extra="", listen=None):
        self.dir = folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sock = self.dir / "fpm.sock"
        self.listen = listen or str(self.sock)
        (self.dir / "sessions").mkdir(exist_ok=True)
        (self.dir / "tmp").mkdir(exist_ok=True)
        conf = self.dir / "fpm.conf"
        conf.write_text(
            "[global]\n"
            f"error_log = {self.dir}/fpm.log\n"
            "daemonize = no\n"
            "[pool]\n"
            f"listen = {self.listen}\n"
            "pm = static\n"
            f"pm.max_children = {children}\n"
            "catch_workers_output = yes\n"
            f"php_admin_value[session.save_path] = {self.dir}/sessions\n"
            f"php_admin_value[upload_tmp_dir] = {self.dir}/tmp\n"
            "php_admin_value[upload_max_filesize] = 200M\n"
            "php_admin_value[post_max_size] = 200M\n"
            "php_admin_value[memory_limit] = 256M\n"
            "php_admin_value[output_buffering] = 0\n" + extra)
        args = [PHP_FPM, "-F", "-y", str(conf), "-p", str(self.dir)]
        if os.geteuid() == 0:
            args.append("-R")  # a container's root: the pool runs as the test's user
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        if listen:
            host, port = listen.rsplit(":", 1)
            up = wait_port(int(port), host, proc=self.proc)
        else:
            up = wait_for(self.sock.exists, 10)
        if not up:
            self.stop()
            raise RuntimeError("php-fpm did not start: " + self.log())

    def log(self):
        p = self.dir / "fpm.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def kill(self):
        """SIGKILL to the master and its children (its own process group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def fpm(tmp_path):
    f = PhpFpm(tmp_path / "fpm")
    yield f
    f.stop()


def make_php_server(make_server, sock, conf="", site_extra="", control=False):
    srv = make_server()
    for name, text in PAGES.items():
        srv.file(name, text)
    srv.file("static.txt", "static file\n")
    srv.file("50x.html", "site error page\n")
    srv.error_pages = {"502": "/50x.html", "504": "/50x.html"}
    srv.site_conf["Fallback"] = "/index.php"
    srv.site_extra = f"[FASTCGI]\n    Backend unix:{sock}\n    Match \\.php$\n" + site_extra
    srv.plugins = [str(FCGI_SO)]
    srv.set(Workers=1, IndexFiles="index.php index.html", MaxRequestBody="200M")
    (srv.conf / "plugins").mkdir()
    (srv.conf / "plugins" / "fastcgi.conf").write_text("[FASTCGI]\n" + conf)
    return with_control(srv) if control else srv


@pytest.fixture
def php(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock, control=True)
    srv.fpm = fpm
    srv.start()
    return srv


def status_doc(srv):
    return plugin_status(srv, "fastcgi")


def bad_gateway_on(c):
    """On the connection c, /env.php is 502 with the site's error page, and
    the connection stays healthy: a static file follows."""
    r = c.request("GET", "/env.php")
    assert r.status == 502 and r.body == b"site error page\n"
    assert c.request("GET", "/static.txt").body == b"static file\n"


def test_phpinfo(php):
    r = get(php, "/info.php")
    assert r.status == 200
    assert r.header("Transfer-Encoding") == "chunked"
    assert b"PHP Version" in r.body and b"<title>PHP" in r.body
    assert b"FPM/FastCGI" in r.body


def test_index_runs_never_serves_source(php):
    r = get(php, "/")
    assert r.status == 200 and r.header("X-Index") == "1"
    assert r.body == b"front /index.php / []\n"
    assert b"<?php" not in r.body


INDEX_ENV = ('<?php header("Content-Type: text/plain");\n'
             'foreach (["REQUEST_METHOD","SCRIPT_NAME","SCRIPT_FILENAME","REQUEST_URI",'
             '"QUERY_STRING","PATH_INFO","CONTENT_LENGTH"] as $k) echo "$k=", $_SERVER[$k] ?? "-", "\\n";'
             '$in = file_get_contents("php://input");'
             'echo "BODY=", strlen($in), " ", hash("sha256", $in), "\\n";')


def test_index_runs_with_the_method_and_body(make_server, fpm):
    # "/form/" runs /form/index.php as a request for it would, keeping the
    # method and the body (a POST to a front controller), while REQUEST_URI
    # stays what the client sent, as with nginx's index
    srv = make_php_server(make_server, fpm.sock)
    srv.file("form/index.php", INDEX_ENV)
    srv.start()
    body = os.urandom(150000)
    for path, query in (("/form/", "x=1"), ("/form/index.php", "")):
        target = path + ("?" + query if query else "")
        r = get(srv, target, method="POST", body=body,
                headers={"Content-Type": "application/octet-stream"})
        assert r.status == 200, r
        e = env_of(r.body)
        assert e["REQUEST_METHOD"] == "POST" and e["REQUEST_URI"] == target
        assert e["SCRIPT_NAME"] == "/form/index.php" and e["PATH_INFO"] == ""
        assert e["SCRIPT_FILENAME"] == f"{srv.docroot}/form/index.php"
        assert e["QUERY_STRING"] == query and e["CONTENT_LENGTH"] == str(len(body))
        assert e["BODY"] == f"{len(body)} {hashlib.sha256(body).hexdigest()}"
    # a chunked body too (kept whole first, for CONTENT_LENGTH)
    c = CgiConn(srv.port, timeout=30)
    c.send(b"POST /form/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n0\r\n\r\n")
    e = env_of(c.read_response().body)
    c.close()
    assert e["BODY"] == "5 " + hashlib.sha256(b"hello").hexdigest()
    assert e["SCRIPT_NAME"] == "/form/index.php"


def test_index_script_is_checked_as_its_own_path(make_server, fpm):
    # behind [AUTH], "/" runs /index.php only for a client that may run it
    srv = make_php_server(make_server, fpm.sock)
    good, bad = add_auth(srv, "/index.php")
    srv.start()
    for path in ("/", "/index.php", "/?q=1"):
        assert get(srv, path).status == 401, path
        assert get(srv, path, headers={"Authorization": bad}).status == 401, path
    r = get(srv, "/?q=1", headers={"Authorization": good})
    assert r.status == 200 and r.body == b"front /index.php /?q=1 [1]\n"
    r = get(srv, "/", method="POST", body=b"x", headers={"Authorization": good})
    assert r.status == 200 and r.body == b"front /index.php / []\n"
    assert get(srv, "/static.txt").status == 200


def test_params_and_path_info(php):
    r = get(php, "/env.php/a/b?x=1", headers={"Proxy": "http://evil", "X-Thing": "t"})
    e = env_of(r.body)
    assert e["SCRIPT_NAME"] == "/env.php" and e["PATH_INFO"] == "/a/b"
    assert e["SCRIPT_FILENAME"] == f"{php.docroot}/env.php"
    assert e["DOCUMENT_ROOT"] == str(php.docroot)
    assert e["REQUEST_URI"] == "/env.php/a/b?x=1" and e["QUERY_STRING"] == "x=1"
    assert e["SERVER_PORT"] == str(php.port) and e["REMOTE_ADDR"] == "127.0.0.1"
    assert e["HTTPS"] == "-" and e["HTTP_PROXY"] == "-" and e["HTTP_X_THING"] == "t"


WHO = ('<?php header("Content-Type: text/plain");\n'
       'foreach (["REMOTE_USER","AUTH_TYPE","HTTP_AUTHORIZATION","PHP_AUTH_USER",'
       '"HTTP_PROXY_AUTHORIZATION"] as $k) echo "$k=", $_SERVER[$k] ?? "-", "\\n";')


def test_remote_user_behind_the_auth_plugin(make_server, fpm):
    # behind the auth plugin the application learns who (REMOTE_USER) and
    # how (AUTH_TYPE) from the plugin's notes; elsewhere nobody was
    # authenticated, whatever the client sends
    srv = make_php_server(make_server, fpm.sock)
    good, bad = add_auth(srv, "/private")
    srv.file("private/who.php", WHO)
    srv.file("who.php", WHO)
    srv.start()
    check_remote_user(srv, "/private/who.php", "/who.php", good, bad)


def test_authorization_passed_proxy_authorization_not(make_server, fpm):
    # unlike a CGI script, an application gets HTTP_AUTHORIZATION (PHP
    # applications check credentials themselves: PHP_AUTH_USER comes from
    # it), as with nginx and lighttpd; never a proxy's credentials
    srv = make_php_server(make_server, fpm.sock)
    srv.file("who.php", WHO)
    srv.start()
    good = "Basic " + base64.b64encode(b"bob:builder").decode()
    r = get(srv, "/who.php", headers={"Authorization": good, "Proxy-Authorization": good})
    e = env_of(r.body)
    assert e["HTTP_AUTHORIZATION"] == good and e["PHP_AUTH_USER"] == "bob"
    assert e["HTTP_PROXY_AUTHORIZATION"] == "-" and e["REMOTE_USER"] == "-"


def test_front_controller_fallback(php):
    r = get(php, "/blog/2024/hello?q=7")
    assert r.status == 200
    assert r.body == b"front /index.php /blog/2024/hello?q=7 [7]\n"
    # existing files are still themselves
    assert get(php, "/static.txt").body == b"static file\n"


def test_form_post(php):
    body = b"name=Ada+Lovelace&n=42"
    r = get(php, "/form.php", method="POST", body=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.body == b"name=Ada Lovelace n=42 m=POST\n"


def test_cookies_and_sessions(php):
    c = CgiConn(php.port)
    r = c.request("GET", "/session.php")
    assert r.body == b"n=1\n"
    cookies = r.headers["set-cookie"]
    assert any(v.startswith("seen=yes") for v in cookies)
    sid = next(v.split(";")[0] for v in cookies if v.startswith("PHPSESSID="))
    for n in (2, 3):
        r = c.request("GET", "/session.php", headers={"Cookie": sid})
        assert r.body == f"n={n}\n".encode()
    c.close()


def test_repeated_cookie_lines_are_one_http_cookie(php):
    # Two Cookie lines (RFC 6265 asks for one, clients and proxies send
    # more): one HTTP_COOKIE joined with "; ", as the server gives every
    # reader, so PHP sees both cookies (joined with ", " it saw a="1, b=2").
    c = CgiConn(php.port)
    c.send("GET /cookies.php HTTP/1.1\r\nHost: localhost\r\nCookie: a=1\r\nX-Other: y\r\n"
           "Cookie: b=2; c=3\r\n\r\n")
    assert c.read_response().body == b'{"a":"1","b":"2","c":"3"} a=1; b=2; c=3'
    c.close()


def test_redirect_and_status(php):
    r = get(php, "/redirect.php")
    assert r.status == 302 and r.header("Location") == "/target.php?from=redirect"
    r = get(php, "/status.php")
    assert r.status == 418 and r.body == b"teapot"


def test_variables_from_framing_and_target(php):
    # CONTENT_LENGTH is the decimal the server read (RFC 3875 4.1.2), never
    # the field as it came; an absolute-form target's authority chose the
    # site, so it is HTTP_HOST (the Host header ignored, RFC 9112 3.2.2) and
    # REQUEST_URI is its path and query.
    c = CgiConn(php.port, timeout=10)
    for cl in ("3, 3", "003", "3,3"):
        c.send(f"POST /vars.php HTTP/1.1\r\nHost: localhost\r\nContent-Length: {cl}\r\n"
               "Content-Type: text/plain\r\n\r\nabc")
        r = c.read_response()
        e = env_of(r.body)
        assert (r.status, e["CONTENT_LENGTH"], e["BODY"]) == (200, "3", "abc"), (cl, r)
        assert e["HTTP_CONTENT_LENGTH"] == "-"
    c.send(f"GET http://localhost:{php.port}/vars.php?x=1 HTTP/1.1\r\nHost: elsewhere.example\r\n"
           "\r\n")
    e = env_of(c.read_response().body)
    assert e["HTTP_HOST"] == f"localhost:{php.port}", e
    assert e["REQUEST_URI"] == "/vars.php?x=1" and e["QUERY_STRING"] == "x=1", e
    assert e["SERVER_NAME"] == "localhost" and e["CONTENT_LENGTH"] == "-", e
    c.close()


@pytest.mark.parametrize("status", [100, 101, 103])
def test_1xx_status_is_502(php, status):
    # A 1xx is no final response: 101 without the server's own upgrade would
    # leave the client on a connection nobody speaks on. 502, with the
    # site's page; the connection goes on.
    c = CgiConn(php.port, timeout=10)
    r = c.request("GET", f"/code.php?s={status}")
    assert r.status == 502 and r.body == b"site error page\n"
    assert r.header("Upgrade") is None
    assert c.request("GET", "/code.php?s=202").body == b"code 202"
    c.close()
    assert wait_for(lambda: "a 1xx status, which is no final response" in php.stderr_text())


def test_stderr_records_to_the_log(php):
    r = get(php, "/fatal.php")
    assert r.status == 500
    assert wait_for(lambda: "boom in fatal.php" in php.stderr_text())
    assert "fastcgi: /fatal.php:" in php.stderr_text()


def test_stderr_records_to_the_site_error_log(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock)
    logs = srv.dir / "logs"
    logs.mkdir()
    srv.plugins.append(str(LOGGER_SO))
    srv.site_extra += f"[LOGGER]\n    ErrorLog {logs}/error.log\n"
    srv.start()
    assert get(srv, "/fatal.php").status == 500
    err = logs / "error.log"
    assert wait_for(lambda: err.exists() and "boom in fatal.php" in err.read_text())
    line = [x for x in err.read_text().splitlines() if "boom in fatal.php" in x][0]
    assert "[client 127.0.0.1] [site localhost] fastcgi: /fatal.php: " in line
    assert "boom in fatal.php" not in srv.stderr_text()
    srv.stop()


def test_upload_50mb_multipart(php):
    data = os.urandom(1 << 20) * 50
    boundary = "----monkeyboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    rss0 = vm_rss_kb(php.proc.pid)
    r = get(php, "/upload.php", method="POST", body=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert r.status == 200, r.body
    assert r.body.decode().split() == [str(len(data)), hashlib.md5(data).hexdigest()]
    grown = vm_rss_kb(php.proc.pid) - rss0
    if not SANITIZED:
        assert grown < 16 * 1024, f"server grew {grown} KiB for a 50 MB upload"


def test_body_streams_to_php_input(php):
    body = os.urandom(20 << 20)
    rss0 = vm_rss_kb(php.proc.pid)
    r = get(php, "/input.php", method="POST", body=body)
    assert r.body.decode().split() == [str(len(body)), hashlib.sha256(body).hexdigest()]
    if not SANITIZED:
        assert vm_rss_kb(php.proc.pid) - rss0 < 16 * 1024


def test_chunked_upload_5x100k(php):
    # php-fpm reads a body only with CONTENT_LENGTH: a chunked body is kept
    # whole first (memory, then a temporary file) and goes with its length;
    # the connection stays usable (it was once reset after such an upload)
    piece = os.urandom(100 * 1024)
    c = CgiConn(php.port, timeout=30)
    c.send("POST /input.php HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(5):
        c.send(b"19000\r\n" + piece + b"\r\n")
    c.send("0\r\n\r\n")
    r = c.read_response()
    assert r.status == 200
    assert r.body.decode().split() == [str(5 * len(piece)), hashlib.sha256(piece * 5).hexdigest()]
    r = c.request("POST", "/form.php", body=b"name=after",
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 200 and r.body == b"name=after n=- m=POST\n"
    # an empty chunked body: CONTENT_LENGTH 0
    c.send("POST /input.php HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0\r\n\r\n")
    r = c.read_response()
    assert r.body.decode().split() == ["0", hashlib.sha256(b"").hexdigest()]
    c.close()


def test_chunked_body_over_max_request_body_is_413(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock)
    srv.set(MaxRequestBody="300K")
    srv.start()
    c = CgiConn(srv.port, timeout=30)
    c.send(b"POST /input.php HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"64000\r\n" + b"b" * (310 * 1024))
    assert c.read_response().status == 413
    c.close()
    srv.stop()


def test_200mb_response_bounded_memory(php):
    rss0 = vm_rss_kb(php.proc.pid)
    s = socket.create_connection(("127.0.0.1", php.port), timeout=30)
    s.sendall(b"GET /big.php?mb=200 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    f = s.makefile("rb")
    status, headers = read_head(f)
    assert status.startswith("HTTP/1.1 200")
    total, peak = 0, 0
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            f.readline()
            break
        chunk = f.read(size)
        assert chunk.count(b"y") == size
        f.read(2)
        total += size
        if total % (16 << 20) < size:
            peak = max(peak, vm_rss_kb(php.proc.pid) - rss0)
            time.sleep(0.05)  # a slower reader for a moment
    assert total == 200 << 20
    if not SANITIZED:  # ASan's quarantine keeps freed pieces resident
        assert peak < 16 * 1024, f"server grew {peak} KiB while streaming 200 MB"
    f.close()
    s.close()


def test_keepalive_connections_are_pooled(php):
    c = CgiConn(php.port)
    for _ in range(20):
        assert c.request("GET", "/env.php").status == 200
    c.close()
    st = status_doc(php)
    assert st["backend0_up"] == 1
    # one connection served all of them, and stays open for the next request
    assert st["backend0_active"] == 1
    if FIGURES:
        assert st["backend0_requests"] >= 20
    else:
        figures(st)  # none without the metrics


def test_closed_keepalive_connection_is_retried(make_server, tmp_path):
    # a backend that closes a kept-alive connection as soon as the next
    # request arrives on it: that request goes again on a new connection,
    # once, its body included, and the client never sees the failure
    sock = tmp_path / "flaky.sock"
    resp = subprocess.Popen([sys.executable, str(Path(__file__).parent / "fcgi_responder.py"),
                             str(sock), "--race"], start_new_session=True)
    try:
        assert wait_for(sock.exists, 10)
        srv = make_php_server(make_server, sock, control=True)
        srv.start()
        c = CgiConn(srv.port, timeout=30)
        r = c.request("GET", "/env.php")
        assert r.status == 200 and r.body == b"conn 1 req 1 stdin="
        r = c.request("POST", "/form.php", body=b"name=retried",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.status == 200 and r.body == b"conn 2 req 1 stdin=name=retried"
        r = c.request("GET", "/env.php")
        assert r.status == 200 and r.body == b"conn 3 req 1 stdin="
        c.close()
        st = status_doc(srv)
        assert st["retries"] == 2 and st["bad_gateway"] == 0
        srv.stop()
    finally:
        resp.kill()
        resp.wait()


def test_whole_answer_has_a_length(php):
    # php-fpm sends a small page and END_REQUEST together: the page goes out
    # with a Content-Length, so an HTTP/1.0 client keeps its connection
    r = get(php, "/target.php?from=x")
    assert r.status == 200 and r.body == b"target x\n"
    assert r.header("Content-Length") == "9" and r.header("Transfer-Encoding") is None
    c = CgiConn(php.port, timeout=30)
    for _ in range(2):
        c.send("GET /target.php HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        assert r.body == b"target -\n" and r.header("Connection").lower() == "keep-alive"
    c.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace")
def test_system_calls_per_request(make_server, fpm, tmp_path):
    # a keep-alive request to a small page, on a pooled connection, costs 6
    # system calls: read the request, send the records, wait, read the
    # answer, one write of head and body, wait; no file lookup (found scripts
    # are remembered), no getsockname (the connection's address is kept), no
    # interest changes, no wake-up of the worker by itself (16 before)
    # An emulated server's calls are counted by qemu (GuestStrace): strace -p
    # would count the emulator's own thread too.
    php = make_php_server(make_server, fpm.sock)
    del php.site_conf["Fallback"]  # the server's own lookup of the path is another matter
    guest = GuestStrace(php, tmp_path / "qemu-strace.out") if EMULATED else None
    php.start()
    c = CgiConn(php.port, timeout=30)
    for _ in range(3):
        assert c.request("GET", "/target.php").status == 200
    tracer = guest.start() if guest else Strace(php.proc.pid, ["all"], tmp_path / "strace.out")
    try:
        for _ in range(20):
            assert c.request("GET", "/target.php").body == b"target -\n"
    finally:
        lines = tracer.stop()
        c.close()
    assert strace_count(lines, "sendmsg") + strace_count(lines, "writev") == 20
    assert sum(strace_count(lines, n) for n in ("openat2", "openat", "newfstatat")) == 0
    assert strace_count(lines, "epoll_ctl") == 0
    assert strace_count(lines, "write") == 0 and strace_count(lines, "read") == 20
    memory = ("mmap(", "munmap(", "madvise(", "mprotect(")  # the allocator's (ASan's above all)
    calls = [x for x in lines if "resumed>" not in x and "restart_syscall" not in x
             and not any(m in x for m in memory)]
    assert strace_count(lines, "getsockname") <= 1  # asked once per connection
    assert len(calls) <= 20 * 6 + 2, f"{len(calls)} calls:\n" + "\n".join(calls[:60])


def test_x_sendfile_and_x_accel_redirect(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock, site_extra="    XSendfile On\n")
    srv.file("files/report 1%.txt", "the report\n")
    srv.file("accel.php", '<?php header("X-Accel-Redirect: /files/report%201%25.txt?x=1");'
             ' header("Content-Disposition: attachment"); echo "not this";')
    srv.file("send.php", '<?php header("X-Sendfile: " . __DIR__ . "/files/report 1%.txt");'
             ' header("Content-Type: application/x-php"); echo "not this";')
    srv.file("outside.php", '<?php header("X-Sendfile: /etc/passwd"); echo "no";')
    srv.file("missing.php", '<?php header("X-Accel-Redirect: /files/none.txt"); echo "no";')
    srv.file("files/index.html", "files index\n")
    srv.file("dir.php", '<?php header("X-Accel-Redirect: /files/"); echo "no";')
    srv.start()
    r = get(srv, "/dir.php")  # a directory: its index file
    assert r.status == 200 and r.body == b"files index\n"
    assert r.header("Content-Type") == "text/html; charset=utf-8"
    for page in ("/accel.php", "/send.php"):
        r = get(srv, page)
        assert r.status == 200 and r.body == b"the report\n", page
        assert r.header("Content-Type") == "text/plain; charset=utf-8"
        assert r.header("ETag") and r.header("Content-Length") == "11"
        assert r.header("X-Accel-Redirect") is None and r.header("X-Sendfile") is None
    assert get(srv, "/accel.php").header("Content-Disposition") == "attachment"
    r = get(srv, "/accel.php", headers={"Range": "bytes=4-9"})
    assert r.status == 206 and r.body == b"report"
    assert get(srv, "/outside.php").status == 403
    assert get(srv, "/missing.php").status == 404
    srv.stop()
    # off (the default): the fields go to the client as they are
    srv2 = make_php_server(make_server, fpm.sock)
    srv2.file("accel.php", '<?php header("X-Accel-Redirect: /static.txt"); echo "this";')
    srv2.start()
    r = get(srv2, "/accel.php")
    assert r.body == b"this" and r.header("X-Accel-Redirect") == "/static.txt"
    srv2.stop()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_pipelined_request_behind_a_waiting_one(php):
    # the second request arrives while the first waits for php-fpm: it is
    # answered after it, in order, and the waiting connection (readable, its
    # interest narrowed only then) does not keep the worker busy meanwhile
    c = CgiConn(php.port, timeout=30)
    cpu0 = cpu_seconds(php.proc.pid)
    c.send("GET /slow.php?s=0.6 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(0.1)  # the first one waits (parked) when the second comes
    c.send("GET /target.php?from=second HTTP/1.1\r\nHost: localhost\r\n\r\n")
    first = c.read_response()
    second = c.read_response()
    assert first.body == b"slept\n" and second.body == b"target second\n"
    assert cpu_seconds(php.proc.pid) - cpu0 < 0.3, "the worker spun while the request waited"
    c.close()


def test_backend_down_is_502_with_site_page(make_server, tmp_path):
    srv = make_php_server(make_server, tmp_path / "nobody.sock")
    srv.start()
    c = CgiConn(srv.port)
    bad_gateway_on(c)
    c.close()
    assert "fastcgi" in srv.stderr_text()


def test_backend_killed_mid_request(php):
    c = CgiConn(php.port, timeout=10)
    c.send("GET /slow.php?s=3 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(0.5)
    php.fpm.kill()
    r = c.read_response()
    assert r.status == 502 and r.body == b"site error page\n"
    assert c.request("GET", "/static.txt").status == 200
    c.close()


def test_backend_killed_mid_response_cuts_it_short(php):
    s = socket.create_connection(("127.0.0.1", php.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"GET /big.php?mb=100 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    f = s.makefile("rb")
    status, headers = read_head(f)
    assert status.startswith("HTTP/1.1 200")
    f.read(1 << 20)
    php.fpm.kill()
    rest = f.read()  # until the server closes
    assert not rest.endswith(b"0\r\n\r\n"), "a cut response must not look complete"
    f.close()
    s.close()


def test_slow_backend_504(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock, conf="    Timeout 1\n")
    srv.start()
    t0 = time.monotonic()
    c = CgiConn(srv.port, timeout=10)
    r = c.request("GET", "/slow.php?s=3")
    assert r.status == 504 and r.body == b"site error page\n"
    assert time.monotonic() - t0 < 2.5 * SLOW
    assert c.request("GET", "/slow.php?s=0").body == b"slept\n"
    c.close()


def test_pool_limit_queues_then_503(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock,
                          conf="    MaxConnections 1\n    QueueTimeout 600ms\n", control=True)
    srv.start()
    first = CgiConn(srv.port, timeout=10)
    first.send("GET /slow.php?s=1.5 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert wait_for(lambda: status_doc(srv)["backend0_active"] == 1), "the first never started"
    t0 = time.monotonic()
    r = get(srv, "/env.php")  # waits in the queue, then gives up
    assert r.status == 503
    assert 0.5 <= time.monotonic() - t0 < 1.4 * SLOW
    assert first.read_response().body == b"slept\n"
    first.close()
    st = status_doc(srv)
    assert st["queue_timeouts"] == 1 and st["backend0_queued"] == 0


def test_pool_limit_queue_serves_in_turn(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock, conf="    MaxConnections 1\n    QueueTimeout 5\n",
                          control=True)
    srv.start()
    conns = [CgiConn(srv.port, timeout=10) for _ in range(3)]
    for c in conns:
        c.send("GET /slow.php?s=0.6 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    t0 = time.monotonic()
    # one runs, the two others wait in the backend's queue meanwhile
    assert wait_for(lambda: status_doc(srv)["backend0_queued"] == 2, 0.5)
    for c in conns:
        assert c.read_response().body == b"slept\n"
        c.close()
    # one connection: the three ran one after the other
    assert time.monotonic() - t0 >= 1.7
    assert status_doc(srv)["backend0_queued"] == 0


def test_config_check(make_server, tmp_path):
    srv = make_php_server(make_server, tmp_path / "x.sock")
    srv.site_extra = "[FASTCGI]\n    Backend 127.0.0.1:notaport\n    Match \\.php$\n"
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:9:" in err and "bad port" in err
    srv.site_extra = "[FASTCGI]\n    Match \\.php$\n"
    err = srv.run_expect_failure(["-t"])
    assert "Backend" in err


def test_upstream_ms_in_the_access_log(make_server, fpm):
    srv = make_php_server(make_server, fpm.sock)
    srv.plugins.insert(0, str(LOGGER_SO))
    log = srv.dir / "access.log"
    srv.site_extra += (f"[LOGGER]\n    AccessLog {log}\n"
                       "    Format custom %U %s %{upstream_ms}n %{upstream}D %D\n")
    srv.start()
    assert get(srv, "/slow.php?s=0.4").body == b"slept\n"
    assert get(srv, "/static.txt").status == 200
    assert wait_for(lambda: log.exists() and log.read_text().count("\n") >= 2)
    slow, static = log.read_text().splitlines()[:2]
    path, status, ms, us, total = slow.split()
    assert (path, status) == ("/slow.php", "200") and 400 <= int(ms) < 3000 * SLOW
    assert 400000 <= int(us) <= int(total), (us, total)  # %{upstream}D, within %D
    assert static.rsplit(" ", 1)[0] == "/static.txt 200 - -"  # no upstream: no note, no time


def test_clients_leaving_mid_response_under_load(php):
    # A client that resets while the server waits for the backend's next
    # piece: the server finds it gone inside stream_write (it writes at
    # once). Each request must end once, its connection closed.
    for _ in range(3):
        socks = []
        for _ in range(6):
            s = socket.create_connection(("127.0.0.1", php.port), timeout=10)
            s.sendall(b"GET /drip.php HTTP/1.1\r\nHost: localhost\r\n\r\n")
            socks.append(s)
        for s in socks:
            s.recv(100)
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        time.sleep(0.2)
    assert get(php, "/env.php").status == 200

    # what is left open is idle in the pool (no request holds a connection),
    # and no more than php-fpm's 4 workers took: the new connections of a
    # round that came after their requests were gone were taken late, and kept
    def settled():
        st = status_doc(php)
        return st["backend0_active"] == st["backend0_idle"] <= 4
    assert wait_for(settled), status_doc(php)


class SilentBackend:
    """A FastCGI backend that takes connections (it answers FCGI_GET_VALUES,
    as a php-fpm child that took the connection does), reads what comes and
    never answers a request (or, with `head`, answers a header block and
    then nothing); `closed` counts the connections the server closed."""

    VALUES = b"\x0f\x01FCGI_MPXS_CONNS0"

    def __init__(self, path, head=False):
        self.path = str(path)
        self.head = head
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.accepted = 0
        self.begun = 0  # requests read (BEGIN_REQUEST): the connection carries one
        self.closed = 0
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.sock.settimeout(0.1)
        conns = []
        while self.running:
            try:
                c, _ = self.sock.accept()
                c.setblocking(False)
                conns.append(c)
                self.accepted += 1
            except socket.timeout:
                pass
            for c in list(conns):
                try:
                    data = c.recv(65536)
                except BlockingIOError:
                    continue
                if data == b"":
                    conns.remove(c)
                    c.close()
                    self.closed += 1
                elif data[:2] == b"\x01\x09":  # FCGI_GET_VALUES: the result
                    v = self.VALUES
                    c.sendall(bytes([1, 10, 0, 0, 0, len(v), 0, 0]) + v)
                elif data[:2] == b"\x01\x01":  # BEGIN_REQUEST
                    self.begun += 1
                if self.head and data[:2] == b"\x01\x01":
                    # FCGI_STDOUT of request 1: a header block, then silence
                    head = b"Content-Type: text/plain\r\n\r\nhello\n"
                    c.sendall(bytes([1, 6, 0, 1, 0, len(head), 0, 0]) + head)
        for c in conns:
            c.close()

    def stop(self):
        self.running = False
        self.thread.join()
        self.sock.close()


@pytest.fixture
def silent(tmp_path):
    b = SilentBackend(tmp_path / "silent.sock")
    yield b
    b.stop()


def test_server_timeout_first_is_504_and_lets_the_backend_go(make_server, silent):
    # The server's Timeout (2 s) ends the wait before the plugin's (30 s, the
    # default): the gateway's answer, 504, and the backend connection is
    # closed at once, not 28 s later; a reload then (the old configuration
    # freed) finds no request state left to use it (a heap-use-after-free in
    # fcgi_timer_cb under ASan before, and 503 with the connection held).
    srv = make_php_server(make_server, silent.path, control=True)
    srv.set(Timeout="2")
    srv.start()
    t0 = time.monotonic()
    r = get(srv, "/hang.php")
    assert r.status == 504 and r.body == b"site error page\n"
    assert 1.9 <= time.monotonic() - t0 < 4 * SLOW
    assert wait_for(lambda: silent.closed == 1, 1.5 * SLOW), "the backend connection was kept"
    st = status_doc(srv)
    assert st["timeouts"] == 1 and st["backend0_active"] == 0
    srv.reload()
    time.sleep(1.5)  # past the plugin's timer period: nothing of the request is left to run
    assert get(srv, "/static.txt").status == 200
    assert "no answer from the backend within the server's Timeout" in srv.stderr_text()


def test_server_timeout_ends_a_queued_request_with_503(make_server, tmp_path):
    # One connection per worker, held by a response that streams (its head
    # came, then silence): the second request waits in the queue (QueueTimeout
    # 30 s). The server's Timeout gives it up: 503 (the backend is busy, not
    # silent), and it leaves the queue at once.
    silent = SilentBackend(tmp_path / "busy.sock", head=True)
    try:
        srv = make_php_server(make_server, silent.path, control=True,
                              conf="    MaxConnections 1\n    QueueTimeout 30\n")
        srv.set(Timeout="2")
        srv.start()
        first = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
        first.sendall(b"GET /stream.php HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert first.recv(4096).startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        second = get(srv, "/queued.php")
        assert second.status == 503, srv.stderr_text()
        assert 1.9 <= time.monotonic() - t0 < 4 * SLOW
        st = status_doc(srv)
        assert st["backend0_queued"] == 0 and st["queue_timeouts"] == 1
        assert silent.accepted == 1
        first.close()
        assert wait_for(lambda: silent.closed == 1, 2 * SLOW)
    finally:
        silent.stop()


def test_client_gone_lets_the_backend_go_at_once(make_server, silent):
    # The client hangs up while its request waits for the backend: the
    # backend connection is closed then, not at the plugin's Timeout.
    srv = make_php_server(make_server, silent.path)
    srv.start()
    c = CgiConn(srv.port, timeout=10 * SLOW)
    c.send("GET /hang.php HTTP/1.1\r\nHost: localhost\r\n\r\n")
    # the request is on its connection (past the pool's FCGI_GET_VALUES check)
    assert wait_for(lambda: silent.begun == 1, 5 * SLOW)
    c.close()
    assert wait_for(lambda: silent.closed == 1, 2 * SLOW), "the backend connection was kept"
    assert get(srv, "/static.txt").status == 200
