"""The CGI plugin (plugins/cgi): real shell and Python scripts, spawned by the
real server. Environment, request bodies, large and slow output, clients that
do not read or go away, bad header blocks, timeouts, NPH scripts, redirects,
MaxScripts and the reaping of every child."""

import hashlib
import os
import signal
import socket
import threading
import time

import pytest

from conftest import BUILD, SANITIZED, SLOW, needs_dlopen, read_head, vm_rss_kb, wait_for
from gwutil import (CgiConn, add_auth, check_remote_user, env_of, get, plugin_status, read_chunked,
                    with_control)
from h2util import H2_MARKS, H2Client

CGI_SO = BUILD / "plugins" / "monkey-cgi.so"
PHP_CGI = "/usr/bin/php-cgi"

pytestmark = needs_dlopen

SCRIPTS = {
    "env.sh": '#!/bin/sh\necho "Content-Type: text/plain"\necho\nenv\n',
    "post.py": (
        "import hashlib, os, sys\n"
        "data = sys.stdin.buffer.read()\n"
        "sys.stdout.write('Content-Type: text/plain\\r\\n\\r\\n')\n"
        "sys.stdout.write('%d %s %s\\n' % (len(data), hashlib.sha256(data).hexdigest(),\n"
        "                 os.environ.get('CONTENT_LENGTH', '-')))\n"
    ),
    # MB megabytes of 'x' (QUERY_STRING is the count)
    "big.sh": '#!/bin/sh\nprintf "Content-Type: application/octet-stream\\r\\n\\r\\n"\n'
    'head -c $((QUERY_STRING * 1048576)) /dev/zero | tr "\\0" x\n',
    # writes forever, after leaving its process id behind
    "forever.sh": '#!/bin/sh\necho $$ > "$DOCUMENT_ROOT/forever.pid"\n'
    'printf "Content-Type: text/plain\\r\\n\\r\\n"\nexec yes\n',
    # pieces with pauses
    "drip.sh": '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
    "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 8192 /dev/zero; sleep 0.05; done\n",
    "slowout.sh": '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
    "for i in 1 2 3; do echo piece$i; sleep 0.2; done\n",
    "silent.sh": '#!/bin/sh\necho $$ > "$DOCUMENT_ROOT/silent.pid"\nsleep 30\n',
    # its header block, then nothing for 30 s (the response waits for it)
    "quiet.sh": '#!/bin/sh\necho $$ > "$DOCUMENT_ROOT/quiet.pid"\n'
    'printf "Content-Type: text/plain\\r\\n\\r\\n"\nexec sleep 30\n',
    "bad.sh": '#!/bin/sh\necho "this is not a header"\necho\necho body\n',
    "empty.sh": "#!/bin/sh\nexit 0\n",
    "status.sh": '#!/bin/sh\necho "Status: 404 Not Here"\necho "Content-Type: text/plain"\n'
    'echo "X-Script: yes"\necho "Content-Length: 999"\necho\necho gone\n',
    # the status of its query, with the fields of an upgrade
    "code.sh": '#!/bin/sh\necho "Status: $QUERY_STRING"\necho "Upgrade: websocket"\n'
    'echo "Connection: Upgrade"\necho\necho body\n',
    "nph-101.sh": '#!/bin/sh\nprintf "HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: h2c\\r\\n'
    'Connection: Upgrade\\r\\n\\r\\n"\n',
    "away.sh": '#!/bin/sh\necho "Location: https://example.com/elsewhere"\necho\n',
    "local.sh": '#!/bin/sh\necho "Location: /cgi-bin/env.sh/from?redir=1"\necho\n',
    "tofile.sh": '#!/bin/sh\necho "Location: /plain.txt"\necho\n',
    "nph-raw.sh": '#!/bin/sh\nprintf "HTTP/1.1 203 Non-Authoritative\\r\\nX-Nph: 1\\r\\n'
    'Content-Type: text/plain\\r\\n\\r\\nraw body\\n"\n',
    "stderr.sh": '#!/bin/sh\necho "oops: something broke" >&2\n'
    'printf "Content-Type: text/plain\\r\\n\\r\\nok\\n"\n',
    # a 1300-byte stderr line while the request body streams, then a line
    # without a newline while the response streams
    "longerr.py": (
        "import sys\n"
        "sys.stdin.buffer.read()\n"
        "sys.stderr.write('e' * 1300 + '\\n'); sys.stderr.flush()\n"
        "sys.stdout.write('Content-Type: text/plain\\r\\n\\r\\n'); sys.stdout.flush()\n"
        "import time; time.sleep(0.1)\n"
        "sys.stderr.write('after the head'); sys.stderr.flush()\n"
        "time.sleep(0.1)\n"
        "sys.stdout.write('ok\\n')\n"
    ),
    "pgroup.sh": '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
    'echo "$(ps -o pgid= -p $$ | tr -d " ") $$ $(pwd)"\n',
    "noexec.sh": '#!/bin/sh\necho "Content-Type: text/plain"\necho\necho no\n',
    # writes a line every 50 ms for ever, ignoring SIGTERM (noting it) and
    # failed writes
    "noterm.py": (
        "import os, signal, time\n"
        "d = os.environ['DOCUMENT_ROOT']\n"
        "signal.signal(signal.SIGTERM, lambda s, f: open(d + '/noterm.term', 'w').close())\n"
        "open(d + '/noterm.pid', 'w').write(str(os.getpid()))\n"
        "os.write(1, b'Content-Type: text/plain\\r\\n\\r\\n')\n"
        "while True:\n"
        "    try:\n"
        "        os.write(1, b'tick\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "    time.sleep(0.05)\n"
    ),
    # prints nothing, ignoring SIGTERM (noting it)
    "silentterm.py": (
        "import os, signal, time\n"
        "d = os.environ['DOCUMENT_ROOT']\n"
        "signal.signal(signal.SIGTERM, lambda s, f: open(d + '/silentterm.term', 'w').close())\n"
        "open(d + '/silentterm.pid', 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    ),
    # never reads its standard input
    "noread.py": (
        "import os, time\n"
        "open(os.environ['DOCUMENT_ROOT'] + '/noread.pid', 'w').write(str(os.getpid()))\n"
        "time.sleep(30)\n"
    ),
    # reads a little of its standard input, closes it, then answers
    "closein.py": (
        "import os, sys, time\n"
        "data = os.read(0, 10)\n"
        "os.close(0)\n"
        "time.sleep(0.3)\n"
        "sys.stdout.write('Content-Type: text/plain\\r\\n\\r\\nread %d\\n' % len(data))\n"
    ),
    "hello.php": '<?php header("X-Php: " . PHP_SAPI); echo "php ", $_GET["x"] ?? "-", " ",'
                 ' $_POST["name"] ?? "-", " ", $_SERVER["SCRIPT_NAME"], " ",'
                 ' $_SERVER["REDIRECT_STATUS"] ?? "-", " ", $_SERVER["PATH_INFO"] ?? "-", "\\n";',
}


@pytest.fixture
def cgi(make_server):
    srv = make_server()
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    for name, text in SCRIPTS.items():
        path = bindir / name
        path.write_text(text)
        path.chmod(0o644 if name.endswith(".py") or name == "noexec.sh" else 0o755)
    srv.file("plain.txt", "plain file\n")
    srv.file("app/hello.cgi", '#!/bin/sh\necho "Content-Type: text/plain"\necho\n'
             'echo "hello $SCRIPT_NAME [$PATH_INFO]"\n', mode=0o755)
    srv.file("app/index.cgi", '#!/bin/sh\necho "Content-Type: text/plain"\necho\necho index\n',
             mode=0o755)
    srv.plugins = [str(CGI_SO)]
    srv.site_extra = (
        "[CGI]\n"
        f"    ScriptAlias /cgi-bin/ {bindir}\n"
        "    Match \\.cgi$\n"
        "    Interpreter .py /usr/bin/python3\n"
    )
    (srv.conf / "plugins").mkdir()
    (srv.conf / "plugins" / "cgi.conf").write_text(
        "[CGI]\n    Timeout 1\n    KillGrace 500ms\n    MaxScripts 4\n")
    srv.set(Workers=1, IndexFiles="index.html index.cgi")
    srv.bindir = bindir
    return srv


def get_stream(srv, path, version="HTTP/1.1", headers=""):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(f"GET {path} {version}\r\nHost: localhost\r\n{headers}\r\n".encode())
    f = s.makefile("rb")
    status, hdrs = read_head(f)
    return s, f, status, hdrs


def zombies_of(pid):
    """Zombie children of process pid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as st:
                fields = st.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(int(d))
    return out


def children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as st:
                fields = st.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as st:
            return st.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_environment(cgi):
    cgi.start()
    r = get(cgi, "/cgi-bin/env.sh/a/b%20c?x=1&y=2",
                headers={"Proxy": "http://evil:1", "X-Thing": "one", "Cookie": "a=1"})
    assert r.status == 200
    e = env_of(r.body)
    assert e["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert e["REQUEST_METHOD"] == "GET"
    assert e["SCRIPT_NAME"] == "/cgi-bin/env.sh"
    assert e["PATH_INFO"] == "/a/b c"
    assert e["PATH_TRANSLATED"] == f"{cgi.docroot}/a/b c"
    assert e["QUERY_STRING"] == "x=1&y=2"
    assert e["REQUEST_URI"] == "/cgi-bin/env.sh/a/b%20c?x=1&y=2"
    assert e["SCRIPT_FILENAME"] == str(cgi.bindir / "env.sh")
    assert e["DOCUMENT_ROOT"] == str(cgi.docroot)
    assert e["REMOTE_ADDR"] == "127.0.0.1" and int(e["REMOTE_PORT"]) > 0
    assert e["SERVER_NAME"] == "localhost"
    assert e["SERVER_PORT"] == str(cgi.port)
    assert e["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert e["HTTP_X_THING"] == "one" and e["HTTP_COOKIE"] == "a=1"
    assert "HTTP_PROXY" not in e  # httpoxy
    assert "HTTPS" not in e
    # run in its own directory
    assert e["PWD"] == str(cgi.bindir)


def test_own_process_group_and_directory(cgi):
    cgi.start()
    r = get(cgi, "/cgi-bin/pgroup.sh")
    pgid, pid, cwd = r.body.decode().split()
    assert pgid == pid  # the leader of its own group
    assert cwd == str(cgi.bindir)


def test_match_extension_and_index(cgi):
    cgi.start()
    r = get(cgi, "/app/hello.cgi/more/info")
    assert r.status == 200
    assert r.body == b"hello /app/hello.cgi [/more/info]\n"
    cgi.file("index.cgi", "never served\n")
    r = get(cgi, "/app/")
    assert r.status == 200 and r.body == b"index\n"
    # a file the expression does not select is static
    assert get(cgi, "/plain.txt").body == b"plain file\n"


def test_post_body_streams_to_stdin(cgi):
    cgi.start()
    body = os.urandom(3 * 1024 * 1024 + 17)
    c = CgiConn(cgi.port, timeout=20)
    r = c.request("POST", "/cgi-bin/post.py", body=body)
    n, digest, cl = r.body.decode().split()
    assert (int(n), digest, cl) == (len(body), hashlib.sha256(body).hexdigest(), str(len(body)))
    # the connection stays usable
    r = c.request("GET", "/cgi-bin/env.sh")
    assert r.status == 200
    c.close()


def test_chunked_post(cgi):
    cgi.start()
    c = CgiConn(cgi.port)
    c.send("POST /cgi-bin/post.py HTTP/1.1\r\nHost: localhost\r\n"
           "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    r = c.read_response()
    n, digest, cl = r.body.decode().split()
    assert int(n) == 11 and digest == hashlib.sha256(b"hello world").hexdigest()
    assert cl == "11"  # the chunked body was kept whole first: its length is known
    c.close()


def test_chunked_upload_5x100k(cgi):
    # a chunked body bigger than what is kept in memory (a temporary file
    # holds the rest): the script gets all of it with CONTENT_LENGTH, and the
    # connection stays usable (it was once reset after such an upload)
    cgi.start()
    piece = os.urandom(100 * 1024)
    c = CgiConn(cgi.port, timeout=30)
    c.send("POST /cgi-bin/post.py HTTP/1.1\r\nHost: localhost\r\n"
           "Transfer-Encoding: chunked\r\n\r\n")
    for _ in range(5):
        c.send(b"19000\r\n" + piece + b"\r\n")
    c.send("0\r\n\r\n")
    r = c.read_response()
    n, digest, cl = r.body.decode().split()
    assert r.status == 200 and int(n) == 5 * len(piece) and cl == str(5 * len(piece))
    assert digest == hashlib.sha256(piece * 5).hexdigest()
    r = c.request("GET", "/cgi-bin/env.sh")
    assert r.status == 200
    c.close()


def test_five_chunked_100k_posts_on_one_connection(cgi):
    # five chunked POSTs of 100 KB, one after the other on one keep-alive
    # connection, each read whole by the script (a report once said such a
    # series got a connection reset; it did not reproduce)
    cgi.start()
    c = CgiConn(cgi.port, timeout=30)
    for i in range(5):
        piece = os.urandom(100 * 1024)
        c.send("POST /cgi-bin/post.py HTTP/1.1\r\nHost: localhost\r\n"
               "Transfer-Encoding: chunked\r\n\r\n")
        c.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(piece), piece))
        r = c.read_response()
        n, digest, cl = r.body.decode().split()
        assert r.status == 200 and int(n) == len(piece), i
        assert digest == hashlib.sha256(piece).hexdigest()
        assert r.header("Connection") is None
    assert c.request("GET", "/cgi-bin/env.sh").status == 200
    c.close()


def test_large_output_chunked_and_bounded(cgi):
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/big.sh?64")
    assert status.startswith("HTTP/1.1 200")
    assert headers["transfer-encoding"] == "chunked"
    body = read_chunked(f)
    assert len(body) == 64 * 1048576 and body.count(b"x") == len(body)
    s.close()


def test_http10_close_delimited(cgi):
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/slowout.sh", version="HTTP/1.0")
    assert "transfer-encoding" not in headers
    assert f.read() == b"piece1\npiece2\npiece3\n"
    s.close()


def test_slow_output_arrives_in_pieces(cgi):
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/slowout.sh")
    assert status.startswith("HTTP/1.1 200")
    t0 = time.monotonic()
    size = int(f.readline(), 16)
    first = f.read(size)
    assert first == b"piece1\n"
    f.read(2)
    # the first piece came before the script ended (it sleeps 0.4 s more)
    assert time.monotonic() - t0 < 0.4 * SLOW + 0.3
    assert read_chunked(f) == b"piece2\npiece3\n"
    s.close()


def test_non_reading_client_holds_memory(cgi):
    cgi.start()
    rss0 = vm_rss_kb(cgi.proc.pid)
    s = socket.create_connection(("127.0.0.1", cgi.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /cgi-bin/forever.sh HTTP/1.1\r\nHost: localhost\r\n\r\n")
    pidfile = cgi.docroot / "forever.pid"
    assert wait_for(pidfile.exists)
    time.sleep(1.0)  # the script writes as fast as it can; nobody reads
    grown = vm_rss_kb(cgi.proc.pid) - rss0
    assert SANITIZED or grown < 8 * 1024, f"server grew {grown} KiB for a client that does not read"
    pid = int(pidfile.read_text())
    assert alive(pid)
    s.close()
    # the client went away: SIGTERM to the group, the child reaped
    assert wait_for(lambda: not alive(pid)), "script not killed"
    assert wait_for(lambda: not zombies_of(cgi.proc.pid)), "zombie left"


def test_killed_client_kills_script(cgi):
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/forever.sh")
    assert f.read(4096)
    pid = int((cgi.docroot / "forever.pid").read_text())
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    f.close()
    s.close()  # reset
    assert wait_for(lambda: not alive(pid)), "script not killed"
    assert wait_for(lambda: not children_of(cgi.proc.pid)), "child left behind"
    # the server goes on
    assert get(cgi, "/cgi-bin/env.sh").status == 200


@pytest.mark.parametrize("pipelined", [False, True])
def test_client_leaving_a_silent_stream_kills_the_script_at_once(cgi, pipelined):
    # The script printed its header block and says nothing more: the
    # response waits for it. A client that closes is noticed at once (not at
    # SendTimeout, 30 s), so the script gets its SIGTERM within ~2 s; a
    # request pipelined meanwhile does not hide the close.
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/quiet.sh")
    assert status.startswith("HTTP/1.1 200")
    pid = pid_in(cgi.docroot / "quiet.pid")
    if pipelined:
        s.sendall(b"GET /plain.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(0.2)
    assert alive(pid)
    f.close()
    s.close()
    assert wait_for(lambda: not alive(pid), timeout=2), "script not killed within 2 s"
    assert wait_for(lambda: not children_of(cgi.proc.pid)), "child left behind"
    assert get(cgi, "/cgi-bin/env.sh").status == 200


@pytest.mark.parametrize("how", ["reset", "close"])
def test_h2_client_leaving_a_silent_stream_kills_the_script_at_once(cgi, how):
    # The same over HTTP/2: RST_STREAM ends that stream (and its script) at
    # once, the connection and its other streams go on; closing the
    # connection ends every stream on it.
    for m in H2_MARKS:
        if m.args[0]:
            pytest.skip(m.kwargs["reason"])
    cgi.set(Listen=f"127.0.0.1:{cgi.port} h2c")
    cgi.start()
    c = H2Client(cgi.port)
    sid = c.request("/cgi-bin/quiet.sh")
    while not c.streams[sid]["headers"]:
        assert c.read_once()
    assert c.streams[sid]["headers"][":status"] == "200"
    pid = pid_in(cgi.docroot / "quiet.pid")
    assert alive(pid)
    if how == "reset":
        c.conn.reset_stream(sid, 8)  # CANCEL
        c.flush()
        assert wait_for(lambda: not alive(pid), timeout=2), "script not killed within 2 s"
        st = c.get("/cgi-bin/env.sh")
        assert st["headers"][":status"] == "200" and b"GATEWAY_INTERFACE" in st["data"]
        assert c.goaway is None
    else:
        c.close()
        assert wait_for(lambda: not alive(pid), timeout=2), "script not killed within 2 s"
    assert wait_for(lambda: not children_of(cgi.proc.pid)), "child left behind"
    c.close()


def test_bad_header_block_is_502(cgi):
    cgi.error_pages = {"502": "502.html"}
    cgi.file("502.html", "site bad gateway page\n")
    cgi.start()
    c = CgiConn(cgi.port)
    r = c.request("GET", "/cgi-bin/bad.sh")
    assert r.status == 502 and r.body == b"site bad gateway page\n"
    r = c.request("GET", "/cgi-bin/empty.sh")
    assert r.status == 502
    # the client's connection stays healthy
    assert c.request("GET", "/plain.txt").body == b"plain file\n"
    c.close()


def test_repeated_cookie_lines_are_one_http_cookie(cgi):
    # Several Cookie lines become one HTTP_COOKIE joined with "; " (the
    # server's one Cookie field), not ", " as other repeated headers are.
    cgi.start()
    c = CgiConn(cgi.port, timeout=10)
    c.send("GET /cgi-bin/env.sh HTTP/1.1\r\nHost: localhost\r\nCookie: a=1\r\nX-A: 1\r\n"
           "Cookie: b=2\r\nX-A: 2\r\n\r\n")
    e = env_of(c.read_response().body)
    assert e["HTTP_COOKIE"] == "a=1; b=2" and e["HTTP_X_A"] == "1, 2", e
    c.close()


def test_variables_from_framing_and_target(cgi):
    # CONTENT_LENGTH is the decimal the server read (RFC 3875 4.1.2), not
    # the field as it came ("3, 3" is a list the server accepts as 3); an
    # absolute-form target's authority chose the site (RFC 9112 3.2.2), so
    # it is HTTP_HOST whatever Host says, and REQUEST_URI its path and query.
    cgi.start()
    c = CgiConn(cgi.port, timeout=10)
    for cl in ("3, 3", "003", "3,,3"):
        c.send(f"POST /cgi-bin/post.py HTTP/1.1\r\nHost: localhost\r\nContent-Length: {cl}\r\n"
               "\r\nabc")
        r = c.read_response()
        assert r.status == 200
        assert r.body.decode().split() == ["3", hashlib.sha256(b"abc").hexdigest(), "3"], cl
    c.send("POST /cgi-bin/env.sh HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0, 0\r\n\r\n")
    e = env_of(c.read_response().body)
    assert e["CONTENT_LENGTH"] == "0" and "HTTP_CONTENT_LENGTH" not in e, e
    c.send(f"GET http://localhost:{cgi.port}/cgi-bin/env.sh/p?x=1 HTTP/1.1\r\n"
           "Host: elsewhere.example\r\n\r\n")
    e = env_of(c.read_response().body)
    assert e["HTTP_HOST"] == f"localhost:{cgi.port}", e
    assert e["REQUEST_URI"] == "/cgi-bin/env.sh/p?x=1" and e["QUERY_STRING"] == "x=1", e
    assert e["SERVER_NAME"] == "localhost" and e["PATH_INFO"] == "/p", e
    c.close()


def test_1xx_status_is_502(cgi):
    # A 1xx is no final response (101 without the server's own upgrade
    # leaves the client on a connection nobody speaks on): 502, logged, and
    # the client's connection goes on; an NPH script's status line too.
    cgi.start()
    c = CgiConn(cgi.port, timeout=10)
    for path in ("/cgi-bin/code.sh?101", "/cgi-bin/code.sh?100", "/cgi-bin/code.sh?103",
                 "/cgi-bin/nph-101.sh"):
        r = c.request("GET", path)
        assert r.status == 502, (path, r)
        assert r.header("Upgrade") is None
    r = c.request("GET", "/cgi-bin/code.sh?202")
    assert (r.status, r.body) == (202, b"body\n")
    c.close()
    assert wait_for(lambda: "a 1xx status, which is no final response" in cgi.stderr_text())


def test_silent_script_is_504_and_killed(cgi):
    cgi.start()
    t0 = time.monotonic()
    r = get(cgi, "/cgi-bin/silent.sh")
    assert r.status == 504
    assert time.monotonic() - t0 >= 0.9
    pid = int((cgi.docroot / "silent.pid").read_text())
    assert wait_for(lambda: not alive(pid))
    assert wait_for(lambda: not children_of(cgi.proc.pid))


def test_status_and_framing_fields(cgi):
    cgi.start()
    r = get(cgi, "/cgi-bin/status.sh")
    assert r.status == 404 and r.reason == "Not Found"
    assert r.header("X-Script") == "yes"
    assert r.header("Content-Type") == "text/plain"
    # the script's Content-Length is dropped: the server frames the body
    assert "999" not in r.raw_head.decode()


def test_redirects(cgi):
    cgi.start()
    r = get(cgi, "/cgi-bin/away.sh")
    assert r.status == 302 and r.header("Location") == "https://example.com/elsewhere"
    r = get(cgi, "/cgi-bin/local.sh")  # a local redirect runs the other script
    assert r.status == 200
    e = env_of(r.body)
    assert e["SCRIPT_NAME"] == "/cgi-bin/env.sh" and e["PATH_INFO"] == "/from"
    assert e["QUERY_STRING"] == "redir=1" and e["REQUEST_METHOD"] == "GET"
    r = get(cgi, "/cgi-bin/tofile.sh")
    assert r.status == 200 and r.body == b"plain file\n"
    # the file goes out as the static handler sends it: its type, validators, ranges
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    assert r.header("ETag") and r.header("Last-Modified")
    assert r.header("Content-Length") == "11"
    r = get(cgi, "/cgi-bin/tofile.sh", headers={"Range": "bytes=0-4"})
    assert r.status == 206 and r.body == b"plain"
    r = get(cgi, "/cgi-bin/tofile.sh", headers={"If-None-Match": r.header("ETag")})
    assert r.status == 304 and r.body == b""


def redirect_script(srv, name, location):
    """A script of cgi-bin that answers with a local redirect to location."""
    path = srv.bindir / name
    path.write_text(f'#!/bin/sh\necho "Location: {location}"\necho\n')
    path.chmod(0o755)


def test_local_redirect_is_a_new_request_through_every_check(cgi):
    # RFC 3875 6.2.2: the server answers a local redirect as it would answer
    # a request for the new URL. So a script outside the protected Location
    # cannot run one inside it without credentials, nor reach a path the
    # access rules deny or a hidden name
    good, _ = add_auth(cgi, "/cgi-bin/private/")
    cgi.plugins.insert(0, str(BUILD / "plugins" / "monkey-access.so"))
    cgi.site_extra += "[ACCESS]\n    Deny all path /cgi-bin/denied/\n"
    for sub in ("private", "denied"):
        (cgi.bindir / sub).mkdir()
        (cgi.bindir / sub / "env.sh").write_text(SCRIPTS["env.sh"])
        (cgi.bindir / sub / "env.sh").chmod(0o755)
    (cgi.bindir / ".secret.sh").write_text(SCRIPTS["env.sh"])
    (cgi.bindir / ".secret.sh").chmod(0o755)
    cgi.file(".hidden.txt", "hidden\n")
    redirect_script(cgi, "to-private.sh", "/cgi-bin/private/env.sh?who=me")
    redirect_script(cgi, "to-denied.sh", "/cgi-bin/denied/env.sh")
    redirect_script(cgi, "to-secret.sh", "/cgi-bin/.secret.sh")
    redirect_script(cgi, "to-encoded.sh", "/cgi-bin/%2esecret.sh")
    redirect_script(cgi, "to-hidden.sh", "/.hidden.txt")
    redirect_script(cgi, "to-dotdot.sh", "/cgi-bin/x/../private/env.sh")
    cgi.start()
    assert get(cgi, "/cgi-bin/private/env.sh").status == 401
    r = get(cgi, "/cgi-bin/to-private.sh")
    assert r.status == 401 and r.header("WWW-Authenticate").startswith("Basic realm=")
    assert get(cgi, "/cgi-bin/to-dotdot.sh").status == 401
    r = get(cgi, "/cgi-bin/to-private.sh", headers={"Authorization": good})
    assert r.status == 200
    e = env_of(r.body)
    assert e["SCRIPT_NAME"] == "/cgi-bin/private/env.sh" and e["QUERY_STRING"] == "who=me"
    assert e["REMOTE_USER"] == "alice" and e["AUTH_TYPE"] == "Basic"
    assert get(cgi, "/cgi-bin/denied/env.sh").status == 403
    assert get(cgi, "/cgi-bin/to-denied.sh").status == 403
    for name in ("to-secret.sh", "to-encoded.sh", "to-hidden.sh"):
        r = get(cgi, "/cgi-bin/" + name)
        assert r.status == 404 and b"hidden" not in r.body and b"SCRIPT_NAME" not in r.body, name


def test_local_redirect_is_a_get_without_the_body(cgi):
    # the new request is a GET (a HEAD stays a HEAD) of the new URL, without
    # the body the first script was given: no CONTENT_LENGTH, nothing on stdin
    redirect_script(cgi, "post-then.sh",
                    "/cgi-bin/post.py?from=post#frag")
    logs = cgi.dir / "logs"
    logs.mkdir()
    cgi.plugins.append(str(BUILD / "plugins" / "monkey-logger.so"))
    cgi.site_extra += f'[LOGGER]\n    AccessLog {logs}/access.log\n    Format custom "%r" %m %U %>s\n'
    cgi.start()
    c = CgiConn(cgi.port)
    r = c.request("POST", "/cgi-bin/post-then.sh", body=b"x" * 5000)
    assert r.status == 200
    assert r.body == b"0 %s -\n" % hashlib.sha256(b"").hexdigest().encode()
    redirect_script(cgi, "env-then.sh", "/cgi-bin/env.sh?q=1")
    r = c.request("POST", "/cgi-bin/env-then.sh", body=b"a=1", headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    e = env_of(r.body)
    assert e["REQUEST_METHOD"] == "GET" and e["QUERY_STRING"] == "q=1"
    assert e["REQUEST_URI"] == "/cgi-bin/env.sh?q=1"
    assert "CONTENT_LENGTH" not in e and "CONTENT_TYPE" not in e
    r = c.request("HEAD", "/cgi-bin/tofile.sh")
    assert r.status == 200 and r.header("Content-Length") == "11" and r.body == b""
    # the connection goes on with the next request
    assert c.request("GET", "/plain.txt").body == b"plain file\n"
    c.close()
    # the access log keeps the client's request line; %m and %U are what was answered
    log = logs / "access.log"
    assert wait_for(lambda: log.exists() and log.read_text().count("\n") >= 4)
    assert log.read_text().splitlines()[:2] == [
        '"POST /cgi-bin/post-then.sh HTTP/1.1" GET /cgi-bin/post.py 200',
        '"POST /cgi-bin/env-then.sh HTTP/1.1" GET /cgi-bin/env.sh 200']


def test_local_redirect_loop_ends_with_500(cgi):
    redirect_script(cgi, "loop.sh", "/cgi-bin/loop.sh")
    redirect_script(cgi, "ping.sh", "/cgi-bin/pong.sh")
    redirect_script(cgi, "pong.sh", "/cgi-bin/ping.sh")
    with_control(cgi)
    cgi.start()
    for path in ("/cgi-bin/loop.sh", "/cgi-bin/ping.sh"):
        r = get(cgi, path)
        assert r.status == 500
    assert "more than 10 internal redirects" in cgi.stderr_text()
    # a chain below the bound is followed: each script ran once
    for i in range(9):
        redirect_script(cgi, f"hop{i}.sh", f"/cgi-bin/hop{i + 1}.sh")
    redirect_script(cgi, "hop9.sh", "/plain.txt")
    r = get(cgi, "/cgi-bin/hop0.sh")
    assert r.status == 200 and r.body == b"plain file\n"
    # a route of the site (the control plugin's) takes a redirected request too
    redirect_script(cgi, "to-status.sh", "/server-status")
    r = get(cgi, "/cgi-bin/to-status.sh")
    assert r.status == 200 and b'"plugins"' in r.body
    assert wait_for(lambda: plugin_status(cgi, "cgi")["running"] == 0)


def test_nph_script(cgi):
    cgi.start()
    r = get(cgi, "/cgi-bin/nph-raw.sh")
    assert r.status == 203
    assert r.header("X-Nph") == "1"


def test_stderr_goes_to_the_log(cgi):
    cgi.start()
    assert get(cgi, "/cgi-bin/stderr.sh").body == b"ok\n"
    assert wait_for(lambda: "oops: something broke" in cgi.stderr_text())
    assert "/cgi-bin/stderr.sh" in cgi.stderr_text()


def test_stderr_goes_to_the_site_error_log(cgi):
    # with the logger and an ErrorLog for the site, stderr lines go there
    # (named by client, site and script, bounded in length), not to the server log
    logs = cgi.dir / "logs"
    logs.mkdir()
    cgi.plugins.append(str(BUILD / "plugins" / "monkey-logger.so"))
    cgi.site_extra += f"[LOGGER]\n    ErrorLog {logs}/error.log\n"
    cgi.start()
    assert get(cgi, "/cgi-bin/stderr.sh").body == b"ok\n"
    c = CgiConn(cgi.port)
    r = c.request("POST", "/cgi-bin/longerr.py", body=b"x" * 100000)
    c.close()
    assert r.status == 200 and r.body == b"ok\n"
    err = logs / "error.log"

    def text():
        return err.read_text() if err.exists() else ""
    assert wait_for(lambda: "after the head" in text() and "oops" in text()), \
        text() + "\n--- server log:\n" + cgi.stderr_text()
    lines = text().splitlines()
    oops = [line for line in lines if "oops" in line]
    assert len(oops) == 1
    assert "[client 127.0.0.1] [site localhost] cgi: /cgi-bin/stderr.sh: oops: something broke" \
        in oops[0]
    pieces = [line.split("cgi: /cgi-bin/longerr.py: ")[1] for line in lines if "longerr" in line]
    assert pieces == ["e" * 512, "e" * 512, "e" * 276, "after the head"]
    assert "oops" not in cgi.stderr_text() and "eeee" not in cgi.stderr_text()


def test_not_executable_is_403_and_missing_404(cgi):
    cgi.start()
    assert get(cgi, "/cgi-bin/noexec.sh").status == 403
    assert get(cgi, "/cgi-bin/nothere.sh").status == 404


def test_max_scripts_503(cgi):
    (cgi.conf / "plugins" / "cgi.conf").write_text(
        "[CGI]\n    Timeout 3\n    MaxScripts 1\n")
    cgi.start()
    first = CgiConn(cgi.port)
    first.send("GET /cgi-bin/silent.sh HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert wait_for((cgi.docroot / "silent.pid").exists)
    r = get(cgi, "/cgi-bin/env.sh")
    assert r.status == 503 and r.header("Retry-After") == "1"
    first.close()
    assert first.sock.fileno() == -1


def test_no_zombies_after_many(cgi):
    cgi.start()
    c = CgiConn(cgi.port)
    for _ in range(30):
        assert c.request("GET", "/cgi-bin/env.sh").status == 200
    c.close()
    assert wait_for(lambda: not children_of(cgi.proc.pid))


def test_config_errors_name_file_and_line(cgi):
    cgi.site_extra = "[CGI]\n    ScriptAlias /cgi-bin/ /does/not/exist\n"
    err = cgi.run_expect_failure(["-t"])
    assert "sites/default:5:" in err and "does not exist" in err
    cgi.site_extra = "[CGI]\n    Interpreter .py /no/python\n"
    err = cgi.run_expect_failure(["-t"])
    assert "sites/default:5:" in err and "interpreter" in err
    cgi.site_extra = "[CGI]\n    Match (\n"
    err = cgi.run_expect_failure(["-t"])
    assert "sites/default:5:" in err and "regular expression" in err


def test_timeout_counts_from_the_end_of_the_body(cgi):
    # Timeout 1 s: an upload of 1.5 s is the client's time, not the script's
    cgi.start()
    c = CgiConn(cgi.port, timeout=10)
    c.send("POST /cgi-bin/post.py HTTP/1.1\r\nHost: localhost\r\nContent-Length: 30\r\n\r\n")
    for _ in range(3):
        time.sleep(0.5)
        c.send(b"0123456789")
    r = c.read_response()
    assert r.status == 200
    assert r.body.decode().split()[0] == "30"
    c.close()


def test_clients_leaving_mid_response_under_load(cgi):
    # A client that resets while the server waits for the script's next
    # piece: the server finds it gone inside stream_write (it writes at once)
    cgi.start()
    for _ in range(3):
        socks = []
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", cgi.port), timeout=10)
            s.sendall(b"GET /cgi-bin/drip.sh HTTP/1.1\r\nHost: localhost\r\n\r\n")
            socks.append(s)
        for s in socks:
            s.recv(100)
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        assert wait_for(lambda: not children_of(cgi.proc.pid)), "scripts left running"
    assert get(cgi, "/cgi-bin/env.sh").status == 200


def pid_in(path):
    """The process id a script wrote to path, once it is there whole."""
    assert wait_for(lambda: path.exists() and path.read_text().strip().isdigit()), path
    return int(path.read_text())


def test_environment_complete(cgi):
    # the rest of the RFC 3875 set: what the server is and where, who asks
    # from where, what the body is; HTTPS is tested over TLS
    # (gateway/test_gateway_tls.py)
    cgi.start()
    c = CgiConn(cgi.port)
    r = c.request("GET", "/cgi-bin/env.sh")
    e = env_of(r.body)
    assert e["GATEWAY_INTERFACE"] == "CGI/1.1" and e["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert e["SERVER_SOFTWARE"] == "Monkey"
    assert e["SERVER_ADDR"] == "127.0.0.1" and e["SERVER_PORT"] == str(cgi.port)
    assert e["REMOTE_HOST"] == "127.0.0.1"  # the address: no reverse lookup
    assert e["REMOTE_PORT"] == str(c.sock.getsockname()[1])
    assert e["REQUEST_SCHEME"] == "http" and "HTTPS" not in e
    assert e["REDIRECT_STATUS"] == "200"
    assert e["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert e["QUERY_STRING"] == ""  # present and empty without a query
    for absent in ("CONTENT_TYPE", "CONTENT_LENGTH", "AUTH_TYPE", "PATH_TRANSLATED"):
        assert absent not in e, absent
    # the script's environment is this set and nothing of the server's own
    assert set(e) - {"PWD", "SHLVL", "_", "OLDPWD"} <= {
        "GATEWAY_INTERFACE", "SERVER_SOFTWARE", "SERVER_NAME", "SERVER_PORT", "SERVER_ADDR",
        "SERVER_PROTOCOL", "REQUEST_METHOD", "REQUEST_URI", "REQUEST_SCHEME", "QUERY_STRING",
        "SCRIPT_NAME", "SCRIPT_FILENAME", "PATH_INFO", "DOCUMENT_ROOT", "REMOTE_ADDR",
        "REMOTE_HOST", "REMOTE_PORT", "REDIRECT_STATUS", "PATH", "HTTP_HOST"}, sorted(e)
    # a body: its type and length, not as HTTP_ variables; no AUTH_TYPE for
    # an Authorization header the server did not verify (RFC 3875 4.1.1:
    # the scheme the server used to authenticate the user)
    r = c.request("POST", "/cgi-bin/env.sh", body=b"a=1&b=2", headers={
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": "Bearer abc.def"})
    e = env_of(r.body)
    assert e["REQUEST_METHOD"] == "POST"
    assert e["CONTENT_TYPE"] == "application/x-www-form-urlencoded"
    assert e["CONTENT_LENGTH"] == "7"
    assert "HTTP_CONTENT_TYPE" not in e and "HTTP_CONTENT_LENGTH" not in e
    assert "AUTH_TYPE" not in e and "REMOTE_USER" not in e
    # repeated headers joined; names with other bytes than letters, digits
    # and '-' left out; a chunked body decoded, so no HTTP_TRANSFER_ENCODING
    c.send("POST /cgi-bin/env.sh HTTP/1.1\r\nHost: localhost\r\nX-Multi: a\r\n"
           "X_Under: 1\r\nX-Multi: b\r\nTransfer-Encoding: chunked\r\n\r\n"
           "3\r\nabc\r\n0\r\n\r\n")
    e = env_of(c.read_response().body)
    assert e["HTTP_X_MULTI"] == "a, b"
    assert "HTTP_X_UNDER" not in e and "HTTP_X__UNDER" not in e
    assert "HTTP_TRANSFER_ENCODING" not in e and e["CONTENT_LENGTH"] == "3"
    # more headers than the gateway gathers on its stack: names repeated
    # in any case joined in request order, names that look alike (length,
    # first, middle and last byte) kept apart
    fill = "".join(f"X-Fill-{i}: {i}\r\n" for i in range(40))
    c.send("GET /cgi-bin/env.sh HTTP/1.1\r\nHost: localhost\r\nX-Multi: a\r\n"
           "Xa-1bZ: first\r\n" + fill + "x-multi: b\r\nXc-1dZ: second\r\n"
           "X-MULTI: c\r\nXa-1bz: again\r\n\r\n")
    e = env_of(c.read_response().body)
    assert e["HTTP_X_MULTI"] == "a, b, c"
    assert e["HTTP_XA_1BZ"] == "first, again" and e["HTTP_XC_1DZ"] == "second"
    assert all(e[f"HTTP_X_FILL_{i}"] == str(i) for i in range(40))
    c.close()
    # HTTP/1.0
    c = CgiConn(cgi.port)
    c.send("GET /cgi-bin/env.sh HTTP/1.0\r\nHost: localhost\r\n\r\n")
    c.closed()
    assert b"SERVER_PROTOCOL=HTTP/1.0\n" in c.buf
    c.close()


def test_remote_user_with_the_auth_plugin(cgi):
    # behind the auth plugin a script runs only for a valid user, and learns
    # who and how; outside the protected Location nobody was authenticated
    good, bad = add_auth(cgi, "/cgi-bin/")
    cgi.file("open/env.cgi", SCRIPTS["env.sh"], mode=0o755)
    cgi.start()
    check_remote_user(cgi, "/cgi-bin/env.sh", "/open/env.cgi", good, bad)
    r = get(cgi, "/open/env.cgi", headers={"Authorization": good})
    assert "REMOTE_USER" not in env_of(r.body)  # not even as "-"


def test_index_script_is_checked_as_its_own_path(cgi):
    # "/app/" runs /app/index.cgi only as a request for /app/index.cgi would:
    # a Location naming the script protects the directory too
    good, bad = add_auth(cgi, "/app/index.cgi")
    cgi.start()
    for path in ("/app/index.cgi", "/app/"):
        assert get(cgi, path).status == 401, path
        assert get(cgi, path, headers={"Authorization": bad}).status == 401, path
        r = get(cgi, path, headers={"Authorization": good})
        assert r.status == 200 and r.body == b"index\n", path
    r = get(cgi, "/app/hello.cgi")
    assert r.status == 200 and r.body == b"hello /app/hello.cgi []\n"


CREDENTIALS = {"Authorization": "Bearer abc.def", "Proxy-Authorization": "Basic eDp5"}


def test_credentials_are_not_passed_by_default(cgi):
    # RFC 3875 4.1.18: a script does not see the credentials of the
    # Authorization and Proxy-Authorization headers, nor their scheme as
    # AUTH_TYPE: the server authenticated nobody
    cgi.start()
    e = env_of(get(cgi, "/cgi-bin/env.sh", headers=CREDENTIALS).body)
    assert "HTTP_AUTHORIZATION" not in e and "HTTP_PROXY_AUTHORIZATION" not in e
    assert "AUTH_TYPE" not in e and "REMOTE_USER" not in e


def test_pass_authorization_gives_scripts_the_credentials(cgi):
    # PassAuthorization On (Apache's CGIPassAuth): for scripts that check
    # credentials themselves; behind the auth plugin they get both the
    # header and the user it authenticated
    cgi.site_extra += "    PassAuthorization On\n"
    good, _ = add_auth(cgi, "/cgi-bin/private/")
    (cgi.bindir / "private").mkdir()
    (cgi.bindir / "private" / "env.sh").write_text(SCRIPTS["env.sh"])
    (cgi.bindir / "private" / "env.sh").chmod(0o755)
    cgi.start()
    e = env_of(get(cgi, "/cgi-bin/env.sh", headers=CREDENTIALS).body)
    assert e["HTTP_AUTHORIZATION"] == "Bearer abc.def"
    assert e["HTTP_PROXY_AUTHORIZATION"] == "Basic eDp5"
    e = env_of(get(cgi, "/cgi-bin/private/env.sh", headers={"Authorization": good}).body)
    assert e["HTTP_AUTHORIZATION"] == good and e["REMOTE_USER"] == "alice"


def test_sigterm_ignored_then_sigkill_after_kill_grace(cgi):
    # a script that ignores SIGTERM: when its client goes away it gets
    # SIGTERM, KillGrace (500 ms) later SIGKILL, and is reaped
    with_control(cgi)
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/noterm.py")
    assert status.startswith("HTTP/1.1 200")
    assert f.readline().strip() == b"5" and f.readline() == b"tick\n"
    pid = pid_in(cgi.docroot / "noterm.pid")
    assert pid in children_of(cgi.proc.pid)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    f.close()
    s.close()  # reset: the server finds the client gone at its next write
    term = cgi.docroot / "noterm.term"
    assert wait_for(term.exists), "no SIGTERM"
    t_term = time.monotonic()
    assert alive(pid), "killed before KillGrace"
    assert wait_for(lambda: not alive(pid)), "not killed after KillGrace"
    assert time.monotonic() - t_term >= 0.3
    # reaped: no zombie, nothing left of it in /proc
    assert wait_for(lambda: not os.path.exists(f"/proc/{pid}")), "zombie left"
    assert not zombies_of(cgi.proc.pid)
    st = plugin_status(cgi, "cgi")
    assert st["killed"] == 1 and st["running"] == 0


def test_silent_script_ignoring_sigterm_gets_sigkill_after_kill_grace(cgi):
    # Timeout (1 s) gives up a script that prints nothing: 504, SIGTERM,
    # and KillGrace (500 ms) later SIGKILL, as for a client that goes away
    with_control(cgi)
    cgi.start()
    r = get(cgi, "/cgi-bin/silentterm.py")
    assert r.status == 504
    pid = pid_in(cgi.docroot / "silentterm.pid")
    assert wait_for((cgi.docroot / "silentterm.term").exists), "no SIGTERM"
    assert wait_for(lambda: not alive(pid), timeout=3), "not killed after KillGrace"
    assert wait_for(lambda: not os.path.exists(f"/proc/{pid}")), "zombie left"
    st = plugin_status(cgi, "cgi")
    assert st["timeouts"] == 1 and st["killed"] == 1 and st["running"] == 0


def test_script_that_does_not_read_holds_the_client_back(cgi):
    # a 256 MB upload to a script that never reads: the server stops
    # reading the client once its 64 KiB window and the pipe are full, so
    # the client's send blocks and the server's memory stays flat
    cgi.set(MaxRequestBody="1G")
    cgi.start()
    rss0 = vm_rss_kb(cgi.proc.pid)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    s.settimeout(10 * SLOW)
    s.connect(("127.0.0.1", cgi.port))
    s.sendall(b"POST /cgi-bin/noread.py HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Length: 268435456\r\n\r\n")
    pid = pid_in(cgi.docroot / "noread.pid")
    s.setblocking(False)
    piece = b"u" * 65536
    sent, last_progress = 0, time.monotonic()
    while time.monotonic() - last_progress < 1.0 * SLOW:
        try:
            sent += s.send(piece)
            last_progress = time.monotonic()
        except BlockingIOError:
            time.sleep(0.02)
        assert sent < 64 << 20, "the server read on: nothing held the client back"
    # what went: the socket buffers of both sides, the window and the pipe
    assert sent < 8 << 20, sent
    grown = vm_rss_kb(cgi.proc.pid) - rss0
    assert SANITIZED or grown < 8 * 1024, f"server grew {grown} KiB"
    assert alive(pid)
    s.close()
    assert wait_for(lambda: not alive(pid)), "script not killed"
    assert wait_for(lambda: not children_of(cgi.proc.pid))


def test_script_closing_its_input_early(cgi):
    # the script reads 10 bytes and closes its standard input: the rest of
    # an 8 MB body is dropped, its answer arrives, the connection goes on
    cgi.start()
    body = os.urandom(8 << 20)
    c = CgiConn(cgi.port, timeout=30)
    c.send(f"POST /cgi-bin/closein.py HTTP/1.1\r\nHost: localhost\r\n"
           f"Content-Length: {len(body)}\r\n\r\n")
    sender = threading.Thread(target=c.sock.sendall, args=(body,))
    sender.start()
    r = c.read_response()
    sender.join()
    assert r.status == 200 and r.body.startswith(b"read ")
    assert 0 < int(r.body.split()[1]) <= 10
    assert c.request("GET", "/cgi-bin/env.sh").status == 200
    c.close()


def test_control_counters(cgi):
    # running, spawned, refused (503), timeouts (504), bad_heads (502), killed
    (cgi.conf / "plugins" / "cgi.conf").write_text(
        "[CGI]\n    Timeout 1\n    KillGrace 500ms\n    MaxScripts 1\n")
    with_control(cgi)
    cgi.start()
    assert get(cgi, "/cgi-bin/env.sh").status == 200
    assert wait_for(lambda: plugin_status(cgi, "cgi")["running"] == 0)  # reaped: its slot is free
    assert get(cgi, "/cgi-bin/bad.sh").status == 502
    assert wait_for(lambda: plugin_status(cgi, "cgi")["running"] == 0)
    before = plugin_status(cgi, "cgi")
    assert before["spawned"] == 2 and before["bad_heads"] == 1
    assert before["refused"] == 0 and before["timeouts"] == 0
    first = CgiConn(cgi.port, timeout=10)
    first.send("GET /cgi-bin/silent.sh HTTP/1.1\r\nHost: localhost\r\n\r\n")
    pid_in(cgi.docroot / "silent.pid")
    assert plugin_status(cgi, "cgi")["running"] == 1
    assert get(cgi, "/cgi-bin/env.sh").status == 503  # MaxScripts 1
    assert first.read_response().status == 504
    first.close()
    assert wait_for(lambda: plugin_status(cgi, "cgi")["running"] == 0)
    after = plugin_status(cgi, "cgi")
    assert after["spawned"] == 3 and after["refused"] == 1 and after["timeouts"] == 1
    assert after["bad_heads"] == 1 and after["killed"] == before["killed"] + 1


def test_upstream_ms_in_the_access_log(cgi):
    log = cgi.dir / "access.log"
    cgi.plugins.insert(0, str(BUILD / "plugins" / "monkey-logger.so"))
    cgi.site_extra += (f"[LOGGER]\n    AccessLog {log}\n"
                       "    Format custom %U %s %{upstream_ms}n %{upstream}D %D\n")
    cgi.start()
    s, f, status, headers = get_stream(cgi, "/cgi-bin/slowout.sh")
    assert read_chunked(f) == b"piece1\npiece2\npiece3\n"
    s.close()
    assert get(cgi, "/plain.txt").status == 200
    assert wait_for(lambda: log.exists() and log.read_text().count("\n") >= 2)
    slow, static = log.read_text().splitlines()[:2]
    path, status, ms, us, total = slow.split()
    # from the start of the script to the end of its answer (it sleeps 0.6 s)
    assert (path, status) == ("/cgi-bin/slowout.sh", "200") and 550 <= int(ms) < 5000 * SLOW
    # the same span in microseconds (%{upstream}D), within the request's %D
    assert 550000 <= int(us) <= int(total), (us, total)
    assert static.rsplit(" ", 1)[0] == "/plain.txt 200 - -"


@pytest.mark.skipif(not os.access(PHP_CGI, os.X_OK), reason="php-cgi is not installed")
def test_php_cgi_as_interpreter(cgi):
    # php-cgi runs .php pages through the cgi plugin: it refuses to run
    # without REDIRECT_STATUS (cgi.force_redirect), which the plugin sets
    cgi.site_extra += f"    Interpreter .php {PHP_CGI}\n"
    cgi.start()
    c = CgiConn(cgi.port)
    r = c.request("GET", "/cgi-bin/hello.php/more?x=1")
    assert r.status == 200, r
    assert r.header("X-Php") == "cgi-fcgi"
    assert r.header("Content-Type").startswith("text/html")
    assert r.body == b"php 1 - /cgi-bin/hello.php 200 /more\n"
    r = c.request("POST", "/cgi-bin/hello.php", body=b"name=form",
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 200 and r.body == b"php - form /cgi-bin/hello.php 200 \n"
    c.close()


@pytest.mark.parametrize("proto", ["http/1.1", "h2c"])
def test_server_timeout_first_is_504_and_stops_the_script_at_once(cgi, proto):
    # The server's Timeout (2 s) ends the wait for the header block before
    # the plugin's (10 s here): the gateway's answer, 504, and the script
    # gets SIGTERM then, so its MaxScripts place comes back within KillGrace
    # (before, 503 and the script ran on until the plugin's Timeout).
    (cgi.conf / "plugins" / "cgi.conf").write_text(
        "[CGI]\n    Timeout 10\n    KillGrace 500ms\n    MaxScripts 4\n")
    with_control(cgi)
    cgi.set(Timeout="2")
    if proto == "h2c":
        for m in H2_MARKS:
            if m.args[0]:
                pytest.skip(m.kwargs["reason"])
        cgi.set(Listen=f"127.0.0.1:{cgi.port} h2c")
    cgi.start()
    t0 = time.monotonic()
    if proto == "h2c":
        c = H2Client(cgi.port)
        status = c.get("/cgi-bin/silent.sh")["headers"][":status"]
        c.close()
    else:
        status = get(cgi, "/cgi-bin/silent.sh").status
    assert status in (504, "504")
    assert 1.9 <= time.monotonic() - t0 < 5 * SLOW
    pid = pid_in(cgi.docroot / "silent.pid")
    assert wait_for(lambda: not alive(pid), timeout=1.5 * SLOW), "script not stopped at once"
    assert wait_for(lambda: not children_of(cgi.proc.pid))
    st = plugin_status(cgi, "cgi")
    assert st["running"] == 0 and st["timeouts"] == 1, st
    assert "no header block within the server's Timeout" in cgi.stderr_text()
