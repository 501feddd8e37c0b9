"""Tier 8: the logger plugin (plugins/logger), loaded as a shared object.

Every test starts the real server with monkey-logger.so from plugins.load and
reads the log files it writes: the formats field by field, one file per site,
the error log, no interleaving under load from many connections, rotation
with SIGUSR1, nothing lost at a graceful stop, dropped lines counted when the
log cannot keep up, and configurations refused with their file and line.
"""

import base64
import json
import os
import re
import signal
import socket
import stat
import subprocess
import threading
import time
from datetime import datetime

import pytest

from conftest import BUILD, MONKEY, SLOW, needs_dlopen

LOGGER_SO = BUILD / "plugins" / "monkey-logger.so"
SKELETON_SO = BUILD / "plugins" / "monkey-skeleton.so"

pytestmark = needs_dlopen

HELLO = b"Hello World!\n"
# host ident user [time] "request" status bytes "referer" "user-agent"
COMBINED = re.compile(
    r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) (\S+)'
    r' "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$')
COMMON = re.compile(r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) (\S+)$')
ERROR = re.compile(r'^\[([^\]]+)\] \[client (\S+)\] \[site (\S+)\] (\d{3}) "((?:[^"\\]|\\.)*)"(.*)$')


def logger_server(make_server, site_logger="", plugin_conf=None, name=None):
    """A server with the logger loaded, a logs/ folder and hello.txt."""
    srv = make_server(name)
    srv.plugins = [str(LOGGER_SO)]
    srv.logs = srv.dir / "logs"
    srv.logs.mkdir()
    srv.file("hello.txt", HELLO)
    (srv.logs / "plain").write_text("a file, not a folder\n")
    if site_logger:
        srv.site_extra = "[LOGGER]\n" + "".join(
            f"    {line.replace('{logs}', str(srv.logs))}\n" for line in site_logger)
    if plugin_conf is not None:
        (srv.conf / "plugins").mkdir(exist_ok=True)
        (srv.conf / "plugins" / "logger.conf").write_text(plugin_conf)
    return srv


def read_lines(path, whole=True):
    """The lines of `path`. With whole=False, a file read while the writer is
    still copying into it (a reader can see part of one write) may end in a
    partial line, which is left out; otherwise it must end with a newline."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    if not whole:
        data = data[:data.rfind(b"\n") + 1]
    assert data == b"" or data.endswith(b"\n"), f"partial line at the end of {path}"
    return data.decode("latin-1").splitlines()


def wait_lines(path, n, timeout=5.0, settle=0.2):
    """The lines of `path` once it has n of them; fails if it gets more."""
    deadline = time.monotonic() + timeout * SLOW
    lines = read_lines(path, whole=False)
    while len(lines) < n:
        assert time.monotonic() < deadline, f"{path}: {len(lines)} lines, expected {n}: {lines[-3:]}"
        time.sleep(0.02)
        lines = read_lines(path, whole=False)
    time.sleep(settle)
    lines = read_lines(path)
    assert len(lines) == n, f"{path}: {len(lines)} lines, expected {n}"
    return lines


def body_clf(resp):
    """%b: the body bytes the server sent, "-" for none (HEAD, 304)."""
    return str(len(resp.body)) if resp.body else "-"


def total_bytes(resp):
    """Bytes the server sent for a response: head, blank line and body."""
    return len(resp.raw_head) + 4 + len(resp.body)


def check_time(text):
    t = datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp()
    assert abs(t - time.time()) < 120, text


def test_common_format(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "Format common"])
    srv.start()
    c = srv.conn()
    r1 = c.request("GET", "/hello.txt")
    r2 = c.request("GET", "/missing.txt")
    r3 = c.request("HEAD", "/hello.txt", version="HTTP/1.0", headers={"Connection": "keep-alive"})
    c.close()
    assert (r1.status, r2.status, r3.status) == (200, 404, 200)
    lines = wait_lines(srv.logs / "access.log", 3)
    expect = [("GET /hello.txt HTTP/1.1", 200, r1), ("GET /missing.txt HTTP/1.1", 404, r2),
              ("HEAD /hello.txt HTTP/1.0", 200, r3)]
    for line, (request, status, resp) in zip(lines, expect):
        m = COMMON.match(line)
        assert m, line
        assert m.group(1) == "127.0.0.1"
        assert m.group(2) == "-" and m.group(3) == "-"
        check_time(m.group(4))
        assert m.group(5) == request
        assert int(m.group(6)) == status
        assert m.group(7) == body_clf(resp)


def test_combined_format_is_the_default(make_server):
    srv = logger_server(make_server, ["AccessLog {logs}/access.log"])  # absolute
    srv.start()
    c = srv.conn()
    r1 = c.request("GET", "/hello.txt", headers={"Referer": "http://example.com/page?x=1",
                                                 "User-Agent": "TestAgent/1.0 (x; y)"})
    r2 = c.request("GET", "/hello.txt?q=a%20b", headers={"User-Agent": 'evil"agent\\ \tx'})
    c.close()
    lines = wait_lines(srv.logs / "access.log", 2)
    m = COMBINED.match(lines[0])
    assert m, lines[0]
    assert m.group(5) == "GET /hello.txt HTTP/1.1"
    assert (m.group(6), m.group(7)) == ("200", body_clf(r1))
    assert m.group(8) == "http://example.com/page?x=1"
    assert m.group(9) == "TestAgent/1.0 (x; y)"
    m = COMBINED.match(lines[1])
    assert m, lines[1]
    assert m.group(5) == "GET /hello.txt?q=a%20b HTTP/1.1"
    assert m.group(7) == body_clf(r2)
    assert m.group(8) == "-"  # no Referer
    # A quote, a backslash and a tab from the client cannot break the field.
    assert m.group(9) == 'evil\\"agent\\\\ \\x09x'


def test_custom_format_every_specifier(make_server):
    spec = "|".join(["%h", "%a", "%l", "%u", "%t", "%r", "%s", "%>s", "%b", "%B", "%O",
                     "%{X-Test}i", "%{X-Missing}i", "%D", "%T", "%m", "%U", "%q", "%H", "%v",
                     "%V", "%P", "%%", "%<s"])
    srv = logger_server(make_server, ["AccessLog ../logs/custom.log", "Format custom " + spec])
    srv.file("dir/page.txt", "page\n")
    srv.start()
    c = srv.conn()
    auth = base64.b64encode(b"alice:s3cr:et").decode()
    r1 = c.request("GET", "/dir/page.txt?x=1&y=2",
                   headers={"Host": "localhost", "X-Test": "some value",
                            "Authorization": "Basic " + auth})
    r2 = c.request("POST", "/dir/../missing", headers={"Host": "Other.Example:8080"}, body=b"abc")
    c.close()
    lines = wait_lines(srv.logs / "custom.log", 2)
    f = lines[0].split("|")
    assert len(f) == 24, lines[0]
    assert f[0] == f[1] == "127.0.0.1"
    assert f[2] == "-"
    assert f[3] == "alice"
    assert f[4].startswith("[") and f[4].endswith("]")
    check_time(f[4][1:-1])
    assert f[5] == "GET /dir/page.txt?x=1&y=2 HTTP/1.1"
    assert f[6] == f[7] == f[23] == "200"
    assert f[8] == body_clf(r1) and int(f[9]) == len(r1.body)
    assert int(f[10]) == total_bytes(r1)
    assert f[11] == "some value"
    assert f[12] == "-"
    assert int(f[13]) >= 0 and f[14] == "0"
    assert f[15] == "GET"
    assert f[16] == "/dir/page.txt"
    assert f[17] == "?x=1&y=2"
    assert f[18] == "HTTP/1.1"
    assert f[19] == "localhost"  # the site's first ServerName
    assert f[20] == "localhost"  # the Host of the request
    assert int(f[21]) == srv.proc.pid
    assert f[22] == "%"
    g = lines[1].split("|")
    assert r2.status == 405  # static files take no POST
    assert g[3] == "-"  # no Authorization
    assert g[5] == "POST /dir/../missing HTTP/1.1"  # as received
    assert g[6] == "405"
    assert g[15] == "POST"
    assert g[16] == "/missing"  # normalised
    assert g[17] == ""  # no query
    assert g[19] == "localhost"  # the only site answers every host
    assert g[20] == "Other.Example"


def json_lines(path, n):
    """The n lines of `path`, each parsed as JSON (the file's bytes read as UTF-8, strictly)."""
    lines = wait_lines(path, n)
    return [json.loads(line.encode("latin-1").decode("utf-8")) for line in lines]


def raw_request(c, head):
    """Send a request head of raw bytes on Conn c; the response."""
    c.send(head + b"\r\n\r\n")
    return c.read_response(head_request=head.startswith(b"HEAD "))


def test_json_format(make_server):
    """Format json: one JSON object per line, whatever bytes the client sent (RFC 8259:
    UTF-8 as it is, quotes, backslashes and control bytes escaped, each byte of invalid
    UTF-8 as \\u00XX, an absent value an empty string)."""
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "Format json"])
    srv.file("café.txt", "coffee\n")
    srv.start()
    c = srv.conn()
    r1 = raw_request(c, "GET /hello.txt?q=1&r=%C3%BC HTTP/1.1\r\nHost: localhost\r\n"
                        "User-Agent: Müller/1.0 ☃ \"quoted\" back\\slash\ttab\r\n"
                        "Referer: http://example.com/ä".encode())
    r2 = raw_request(c, b"GET /caf%C3%A9.txt HTTP/1.1\r\nHost: localhost\r\n"
                        b"User-Agent: bad \xff\xfe \xc3( \xed\xa0\x80 \xe2\x82 end")
    r3 = raw_request(c, b"HEAD /missing%FF HTTP/1.1\r\nHost: localhost\r\n"
                        b"Authorization: Basic " + base64.b64encode("jürgen:pw".encode()))
    c.close()
    assert (r1.status, r2.status, r3.status) == (200, 200, 404)
    a, b, d = json_lines(srv.logs / "access.log", 3)
    assert set(a) == {"time", "client", "user", "request", "method", "path", "query",
                      "protocol", "status", "body_bytes", "bytes", "duration_us", "upstream_us",
                      "site", "host", "referer", "user_agent", "request_id", "trace_id"}
    assert a["upstream_us"] is None  # a static file: no upstream
    t = datetime.strptime(a["time"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
    assert abs(t - time.time()) < 120, a["time"]
    assert a["client"] == "127.0.0.1" and a["user"] == ""
    assert a["request"] == "GET /hello.txt?q=1&r=%C3%BC HTTP/1.1"
    assert (a["method"], a["path"], a["query"], a["protocol"]) == \
        ("GET", "/hello.txt", "?q=1&r=%C3%BC", "HTTP/1.1")
    assert a["status"] == 200 and a["body_bytes"] == len(HELLO)
    assert a["bytes"] == total_bytes(r1) and isinstance(a["duration_us"], int)
    assert (a["site"], a["host"]) == ("localhost", "localhost")
    assert a["referer"] == "http://example.com/ä"
    assert a["user_agent"] == 'Müller/1.0 ☃ "quoted" back\\slash\ttab'
    # The decoded path is UTF-8 as sent; bytes that are not UTF-8 are one \\u00XX each.
    assert b["path"] == "/café.txt"
    assert b["user_agent"] == "bad \u00ff\u00fe \u00c3( \u00ed\u00a0\u0080 \u00e2\u0082 end"
    raw = (srv.logs / "access.log").read_bytes().splitlines()[1]
    assert b"\\u00ff\\u00fe \\u00c3(" in raw and b"\\t" not in raw
    assert d["status"] == 404 and d["body_bytes"] == 0 and d["method"] == "HEAD"
    assert d["path"] == "/missing\u00ff" and d["user"] == "jürgen"
    assert d["referer"] == "" and d["user_agent"] == ""
    assert a["request_id"] == "" and a["trace_id"] == ""  # RequestId, TraceContext Off
    # Every byte but the newline is printable ASCII or part of a UTF-8 character.
    data = (srv.logs / "access.log").read_bytes()
    assert not any(ch < 0x20 and ch != 0x0a or ch == 0x7f for ch in data)


def test_custom_format_with_json_escaping(make_server):
    """escape=json before a custom format (nginx's escape=json): the same escaping for the
    fields of a format of one's own, %b a number, absent values empty; in a LogFormat too."""
    spec = ('escape=json {"ua":"%{User-Agent}i","b":%b,"x":"%{X-Missing}i","u":"%u","l":"%l",'
            '"n":"%{upstream_ms}n","r":"%r","ssl":"%{ssl_protocol}x","t":"%t"}')
    srv = logger_server(make_server, ["AccessLog ../logs/custom.log", "Format custom " + spec],
                        f"[LOGGER]\n    LogFormat mine {spec}\n")
    other = srv.dir / "other"
    other.mkdir()
    (other / "o.txt").write_text("o\n")
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test\n    DocumentRoot {other}\n"
                                f"[LOGGER]\n    AccessLog {srv.logs}/named.log\n    Format mine\n")
    srv.start()
    c = srv.conn()
    raw_request(c, b'HEAD /hello.txt HTTP/1.1\r\nHost: localhost\r\nUser-Agent: a"\\\xe2\x98\x83\xff')
    raw_request(c, b"GET /o.txt HTTP/1.1\r\nHost: other.test\r\nUser-Agent: \xc3\xbc")
    c.close()
    (one,) = json_lines(srv.logs / "custom.log", 1)
    assert one == {"ua": 'a"\\☃\u00ff', "b": 0, "x": "", "u": "", "l": "", "n": "",
                   "r": "HEAD /hello.txt HTTP/1.1", "ssl": "", "t": one["t"]}
    assert one["t"].startswith("[") and one["t"].endswith("]")
    (named,) = json_lines(srv.logs / "named.log", 1)
    assert named["ua"] == "ü" and named["b"] == 2


def test_custom_format_without_escaping(make_server):
    """escape=none: the client's bytes as they are (UTF-8 readable in the log), but control
    bytes still \\xhh, so no line can be forged."""
    srv = logger_server(make_server, ["AccessLog ../logs/raw.log",
                                      'Format custom escape=none "%{User-Agent}i" %U'])
    srv.start()
    c = srv.conn()
    raw_request(c, "GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n"
                   "User-Agent: Müller \"q\" \\ \tz".encode())
    c.close()
    line = wait_lines(srv.logs / "raw.log", 1)[0].encode("latin-1")
    assert line == '"Müller "q" \\ \\x09z" /hello.txt'.encode()


def test_json_line_too_long_stays_json(make_server):
    """A line cut at 4096 bytes is cut inside its strings: still one valid JSON object."""
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "Format json"])
    srv.start()
    ua = "é" * 2000 + "U" * 3000
    c = srv.conn()
    r = raw_request(c, f"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nReferer: {'R' * 6000}\r\n"
                       f"User-Agent: {ua}".encode())
    r2 = raw_request(c, f"GET /hello.txt?2 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {ua}".encode())
    c.close()
    assert r.status == r2.status == 200
    for line in wait_lines(srv.logs / "access.log", 2):
        assert len(line) <= 4095
        doc = json.loads(line.encode("latin-1").decode("utf-8"))
        assert doc["status"] == 200 and doc["body_bytes"] == len(HELLO) and doc["time"]
        if doc["query"] == "?2":
            # The last string is cut where the line ends, within a character's bytes.
            assert doc["referer"] == "" and doc["user_agent"].endswith("...")
            assert ua.startswith(doc["user_agent"][:-3]) and len(doc["user_agent"]) > 1000
        else:
            # A string that does not fit leaves the room the fields after it need.
            assert doc["referer"].endswith("...") and set(doc["referer"][:-3]) == {"R"}
            assert ua.startswith(doc["user_agent"].removesuffix("..."))


def test_named_format_and_plugin_wide_defaults(make_server):
    plugin_conf = ("[LOGGER]\n"
                   "    LogFormat short %v %>s %U\n"
                   "    AccessLog ../logs/all.log\n"
                   "    Format short\n")
    srv = logger_server(make_server, [], plugin_conf)
    other_root = srv.dir / "other"
    other_root.mkdir()
    (other_root / "o.txt").write_text("other\n")
    # The default site has no [LOGGER]: it uses the defaults of logger.conf.
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test\n    DocumentRoot {other_root}\n"
                                f"[LOGGER]\n    AccessLog ../logs/other.log\n    Format common\n")
    srv.start()
    assert srv.get("/hello.txt").status == 200
    assert srv.get("/o.txt", headers={"Host": "other.test"}).status == 200
    assert wait_lines(srv.logs / "all.log", 1) == ["localhost 200 /hello.txt"]
    line = wait_lines(srv.logs / "other.log", 1)[0]
    assert COMMON.match(line) and '"GET /o.txt HTTP/1.1" 200' in line


def test_two_sites_two_logs(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/a.log", "ErrorLog ../logs/a.err"])
    other_root = srv.dir / "b"
    other_root.mkdir()
    (other_root / "b.txt").write_text("bbb\n")
    srv.extra_sites["b"] = (f"[HOST]\n    ServerName b.test\n    DocumentRoot {other_root}\n"
                            f"[LOGGER]\n    AccessLog ../logs/b.log\n    ErrorLog ../logs/b.err\n")
    srv.start()
    c = srv.conn()
    for i in range(5):
        assert c.request("GET", f"/hello.txt?a={i}").status == 200
        assert c.request("GET", f"/b.txt?b={i}", headers={"Host": "b.test"}).status == 200
    assert c.request("GET", "/nope-b", headers={"Host": "B.TEST"}).status == 404
    c.close()
    a = wait_lines(srv.logs / "a.log", 5)
    b = wait_lines(srv.logs / "b.log", 6)
    assert all("/hello.txt?a=" in line for line in a)
    assert all("/b.txt?b=" in line or "/nope-b" in line for line in b)
    assert read_lines(srv.logs / "a.err") == []
    assert len(wait_lines(srv.logs / "b.err", 1)) == 1


def test_error_log(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "ErrorLog ../logs/error.log"])
    srv.start()
    assert srv.get("/hello.txt").status == 200
    assert srv.get("/no/such/file").status == 404
    for bad in (b"GARBAGE\r\n\r\n", b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n"):
        assert srv.raw(bad).startswith(b"HTTP/1.1 400 ")
    errors = wait_lines(srv.logs / "error.log", 4)
    parsed = [ERROR.match(line) for line in errors]
    assert all(parsed), errors
    for m in parsed:
        check_time(m.group(1))
        assert m.group(2) == "127.0.0.1"
        assert m.group(3) == "localhost"
        assert m.group(6) == ""
    assert sorted((m.group(4), m.group(5)) for m in parsed) == [
        ("400", "-"),  # no request line could be read
        ("400", "GET / HTTP/1.1"),
        ("400", "GET /../../etc/passwd HTTP/1.1"),
        ("404", "GET /no/such/file HTTP/1.1"),
    ]
    # Every request is in the access log, the bad ones too.
    assert len(wait_lines(srv.logs / "access.log", 5)) == 5


def test_request_without_response_is_an_error(make_server):
    srv = logger_server(make_server, ["ErrorLog ../logs/error.log"])
    srv.plugins.append(str(SKELETON_SO))
    srv.start()
    c = srv.conn()
    # The skeleton's echo waits for a body that never comes: the client gives up.
    c.send(b"POST /skeleton/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    time.sleep(0.2)
    c.close()
    line = wait_lines(srv.logs / "error.log", 1)[0]
    assert line.endswith('200 "POST /skeleton/echo HTTP/1.1" '
                         '(the response was not sent whole)'), line


def pipelined_client(port, cid, count, burst, agent, errors):
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(20 * SLOW)
        sent = 0
        while sent < count:
            n = min(burst, count - sent)
            req = b"".join(f"GET /hello.txt?c={cid}&n={sent + i} HTTP/1.1\r\nHost: x\r\n"
                           f"User-Agent: {agent}\r\n\r\n".encode() for i in range(n))
            s.sendall(req)
            sent += n
            got, buf = 0, b""
            while got < n:
                chunk = s.recv(65536)
                assert chunk, "closed"
                buf += chunk
                got = buf.count(b"HTTP/1.1 200 OK")
        s.close()
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))


def run_clients(port, clients, per_client, burst=50, long_agent=True):
    errors, threads = [], []
    for cid in range(clients):
        agent = ("A" * 1500 + str(cid)) if long_agent and cid % 2 else f"client-{cid}"
        t = threading.Thread(target=pipelined_client,
                             args=(port, cid, per_client, burst, agent, errors))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def check_complete(lines, clients, per_client, long_agent=True):
    seen = set()
    for line in lines:
        m = COMBINED.match(line)
        assert m, f"malformed line: {line[:200]!r}"
        q = re.match(r"GET /hello\.txt\?c=(\d+)&n=(\d+) HTTP/1\.1$", m.group(5))
        assert q, line[:200]
        cid, n = int(q.group(1)), int(q.group(2))
        agent = m.group(9)
        long = long_agent and cid % 2
        assert agent == ("A" * 1500 + str(cid) if long else f"client-{cid}"), line[:200]
        seen.add((cid, n))
    assert seen == {(c, n) for c in range(clients) for n in range(per_client)}


def test_many_connections_no_interleaving(make_server):
    # Long lines (1.5 KB) and bursts of 50 pipelined requests: a batch holds
    # many lines and is written in several PIPE_BUF writes of whole lines.
    srv = logger_server(make_server, ["AccessLog ../logs/access.log"])
    srv.start()
    clients, per_client = 8, 300
    run_clients(srv.port, clients, per_client)
    lines = wait_lines(srv.logs / "access.log", clients * per_client, timeout=15)
    check_complete(lines, clients, per_client)


def test_graceful_stop_loses_nothing(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log"])
    srv.start()
    clients, per_client = 6, 500
    run_clients(srv.port, clients, per_client, burst=100)
    # Stop at once: lines still in worker buffers and pipes must reach the file.
    assert srv.stop() == 0
    lines = read_lines(srv.logs / "access.log")
    assert len(lines) == clients * per_client
    check_complete(lines, clients, per_client)


def test_graceful_stop_with_a_lagging_log_loses_nothing(make_server):
    # The log is a FIFO read only once the stop began: the lines wait in the
    # pipe and in worker buffers, and the stop must still deliver every one.
    srv = logger_server(make_server, [], "[LOGGER]\n    PipeSize 16K\n")
    fifo = srv.logs / "fifo"
    os.mkfifo(fifo)
    srv.site_extra = f"[LOGGER]\n    AccessLog {fifo}\n"
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got = []

    def drain():
        os.set_blocking(reader, True)
        while chunk := os.read(reader, 65536):
            got.append(chunk)

    try:
        srv.start()
        clients, per_client = 4, 800
        run_clients(srv.port, clients, per_client, burst=100, long_agent=False)
        t = threading.Thread(target=drain)
        t.start()
        assert srv.stop() == 0
        t.join(10)
    finally:
        os.close(reader)
    lines = b"".join(got).decode().splitlines()
    assert len(lines) == clients * per_client
    check_complete(lines, clients, per_client, long_agent=False)


def test_sigusr1_reopens(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "ErrorLog ../logs/error.log"])
    srv.start()
    log, err = srv.logs / "access.log", srv.logs / "error.log"
    c = srv.conn()
    for i in range(3):
        c.request("GET", f"/hello.txt?old={i}")
    c.request("GET", "/old-missing")
    wait_lines(log, 4)
    wait_lines(err, 1)
    log.rename(srv.logs / "access.log.1")
    err.rename(srv.logs / "error.log.1")
    srv.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5 * SLOW
    while not (log.exists() and err.exists()):
        assert time.monotonic() < deadline, "the logs were not reopened"
        time.sleep(0.02)
    for i in range(5):
        c.request("GET", f"/hello.txt?new={i}")
    c.request("GET", "/new-missing")
    c.close()
    new = wait_lines(log, 6)
    assert all("new=" in line or "/new-missing" in line for line in new)
    old = read_lines(srv.logs / "access.log.1")
    assert len(old) == 4 and all("old" in line for line in old)
    old_err = read_lines(srv.logs / "error.log.1")
    assert len(old_err) == 1 and "/old-missing" in old_err[0]
    assert "/new-missing" in wait_lines(err, 1)[0]
    # Reopening without a rename appends to the same file.
    srv.signal(signal.SIGUSR1)
    time.sleep(0.3)
    assert srv.get("/hello.txt?again").status == 200
    assert "again" in wait_lines(log, 7)[-1]


def test_reopen_after_switching_to_user(make_server, nobody_dir, tmp_path):
    """Started as root with User, the files the server creates before the
    switch (the access and error logs of the logger, the server's own Log)
    are given to the User, so that SIGUSR1 can open them again afterwards,
    with or without a rotation before it; a symbolic link planted at a log
    path is not followed at the reopen."""
    logs, uid = nobody_dir[0], nobody_dir[1].pw_uid
    srv = logger_server(make_server, [f"AccessLog {logs}/access.log",
                                      f"ErrorLog {logs}/error.log"])
    srv.set(User="nobody", Log=str(logs / "server.log"))
    srv.start()
    log, err, own = logs / "access.log", logs / "error.log", logs / "server.log"
    c = srv.conn()
    c.request("GET", "/hello.txt?before")
    c.request("GET", "/missing-before")
    wait_lines(log, 2)
    wait_lines(err, 1)
    for f in (log, err, own):
        assert f.stat().st_uid == uid, f"{f.name} is not the User's"
    # A reopen without a rotation: the same files, opened by the User now.
    srv.signal(signal.SIGUSR1)
    c.request("GET", "/hello.txt?same")
    assert "same" in wait_lines(log, 3)[-1]
    # logrotate's way: rename, then a signal; the new files are the User's.
    log.rename(logs / "access.log.1")
    own.rename(logs / "server.log.1")
    srv.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5 * SLOW
    while not (log.exists() and own.exists()):
        assert time.monotonic() < deadline, "the logs were not reopened"
        time.sleep(0.02)
    c.request("GET", "/hello.txt?rotated")
    assert "rotated" in wait_lines(log, 1)[0]
    assert log.stat().st_uid == uid
    # A link planted at a log path (the directory is the User's) is not
    # followed: the reopen keeps the file it had.
    target = logs / "elsewhere"
    target.write_text("not a log\n")
    os.chown(target, uid, -1)
    log.rename(logs / "access.log.2")
    log.symlink_to(target)
    srv.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5 * SLOW
    while "cannot reopen" not in srv.stderr_text() + own.read_text():
        assert time.monotonic() < deadline, srv.stderr_text() + own.read_text()
        time.sleep(0.02)
    c.request("GET", "/hello.txt?after-link")
    c.close()
    assert "after-link" in wait_lines(logs / "access.log.2", 2)[-1]
    assert target.read_text() == "not a log\n"
    text = srv.stderr_text() + (logs / "server.log.1").read_text() + own.read_text()
    assert not re.search(r"cannot reopen[^\n]*Permission denied", text), text
    assert re.search(r"cannot reopen \S+/access.log: Too many levels of symbolic links", text), text
    assert srv.stop() == 0


def test_bad_logger_conf_refuses_the_whole_reload(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/first.log"])
    srv.start()
    first, second = srv.logs / "first.log", srv.logs / "second.log"
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "logger.conf").write_text("[LOGGER]\n    BufferLimit 1T\n")
    srv.site_extra = "[LOGGER]\n    AccessLog ../logs/second.log\n"
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5 * SLOW
    while "reload failed" not in srv.stderr_text():
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.05)
    assert "logger.conf:2:" in srv.stderr_text()
    # The site change made with it did not apply: no new file, lines go to the old one.
    assert srv.get("/hello.txt?after").status == 200
    assert "after" in wait_lines(first, 1)[0]
    assert not second.exists()


def open_fds(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def test_reload_switches_files_and_closes_the_old(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/first.log"])
    srv.start()
    first, second = srv.logs / "first.log", srv.logs / "second.log"
    assert srv.get("/hello.txt?one").status == 200
    wait_lines(first, 1)
    srv.site_extra = "[LOGGER]\n    AccessLog ../logs/second.log\n"
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    # Until each worker takes the new configuration, lines may still go to first.log.
    deadline = time.monotonic() + 5 * SLOW
    sent = 0
    while not any("two=" in line for line in read_lines(second)):
        assert time.monotonic() < deadline, "second.log gets nothing"
        assert srv.get(f"/hello.txt?two={sent}").status == 200
        sent += 1
        time.sleep(0.05)
    time.sleep(0.3 * SLOW)  # the last "two" lines arrive
    before = len(read_lines(second))
    assert srv.get("/hello.txt?three").status == 200
    lines = wait_lines(second, before + 1)
    assert "three" in lines[-1]
    # Every request is in exactly one of the files.
    both = read_lines(first) + lines
    assert sorted(re.search(r"\?(\S+) ", line).group(1) for line in both) == sorted(
        ["one", "three"] + [f"two={i}" for i in range(sent)])
    # The old file is closed once no site and no worker uses it.
    deadline = time.monotonic() + 10 * SLOW
    while str(first) in open_fds(srv.proc.pid):
        assert time.monotonic() < deadline, "first.log stays open"
        assert srv.get("/hello.txt").status == 200  # keeps the workers turning
        time.sleep(0.2)


def test_long_line_is_cut(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log"])
    srv.start()
    assert srv.get("/hello.txt", headers={"User-Agent": "U" * 6000}).status == 200
    assert srv.get("/hello.txt?next").status == 200
    # Two connections may be logged by two workers: their order is not fixed.
    lines = sorted(wait_lines(srv.logs / "access.log", 2), key=len)
    assert len(lines[1]) == 4095 and lines[1].endswith("UUU...")
    assert COMBINED.match(lines[0]) and "?next" in lines[0]


def test_full_log_drops_and_counts(make_server):
    srv = logger_server(make_server, [], "[LOGGER]\n    BufferLimit 16K\n    PipeSize 16K\n")
    fifo = srv.logs / "fifo"
    os.mkfifo(fifo)
    srv.site_extra = f"[LOGGER]\n    AccessLog {fifo}\n"
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        srv.start()
        clients, per_client = 4, 1000
        # Nobody reads the FIFO: its buffer, the pipe and the worker buffers fill up.
        run_clients(srv.port, clients, per_client, burst=100, long_agent=False)
        got = []

        def drain():
            os.set_blocking(reader, True)
            while True:
                chunk = os.read(reader, 65536)
                if not chunk:
                    return
                got.append(chunk)

        t = threading.Thread(target=drain)
        t.start()
        assert srv.stop() == 0
        t.join(10)
        lines = b"".join(got).decode().splitlines()
        assert all(COMBINED.match(line) for line in lines)
        text = srv.stderr_text()
        dropped = sum(int(n) for n in re.findall(r"(\d+) lines? dropped \(", text))
        assert dropped > 0, text
        assert len(lines) + dropped == clients * per_client, (len(lines), dropped)
    finally:
        os.close(reader)


def test_check_mode_creates_no_files(make_server):
    srv = logger_server(make_server, ["AccessLog ../logs/access.log", "ErrorLog ../logs/error.log"],
                        "[LOGGER]\n    AccessLog ../logs/default.log\n")
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf), "-t"], capture_output=True, text=True,
                       timeout=20 * SLOW)
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in srv.logs.iterdir()) == ["plain"]


BAD_SITE = [
    # the [LOGGER] entries, which of them is wrong (1-based), what the message says
    (["AccessLog ../logs/nodir/access.log"], 1, "No such file or directory"),
    (["AccessLog ../logs"], 1, "Is a directory"),
    (["ErrorLog ../logs/plain/error.log"], 1, "Not a directory"),
    (["AccessLog ../logs/a.log", "Colour blue"], 2, "has no key 'Colour'"),
    (["AccessLog ../logs/a.log", "Format fancy"], 2, "unknown format 'fancy'"),
    (["AccessLog ../logs/a.log", "Format custom %h %Z"], 2, "unknown specifier '%Z'"),
    (["AccessLog ../logs/a.log", "Format custom %{Bad/Name}i"], 2, "header name"),
    (["AccessLog ../logs/a.log", "Format custom %{X}o"], 2, "only %{Header}i"),
    (["AccessLog ../logs/a.log", "Format custom %"], 2, "unknown specifier"),
    (["AccessLog ../logs/a.log", "Format custom escape=xml %h"], 2,
     "'escape=xml': the escaping is escape=default, escape=json or escape=none"),
    (["AccessLog ../logs/a.log", "Format custom escape=json"], 2, "empty format"),
    (["AccessLog ../logs/a.log", "Format custom %{%Y-%m}t"], 2, "unknown %{FORMAT}t (iso8601)"),
    (["AccessLog ../logs/a.log", "Format custom %{local}t"], 2, "unknown %{FORMAT}t (iso8601)"),
    (["AccessLog ../logs/a.log", "Format custom %{upstreams}D"], 2,
     "unknown %{...}D (%{upstream}D)"),
    (["AccessLog ../logs/a.log", "Format custom %{X}q"], 2, "and %{upstream}D take a name"),
    (["AccessLog ../logs/a.log", "Format custom escape=json " + "x" * 2100], 2,
     "more than half a line"),
    (["Format common"], 1, "Format without an access log"),
    (["AccessLog ../logs/a.log", "AccessLog ../logs/b.log"], 2, "given twice"),
    (["AccessLog ../logs/a.log", "Format common", "Format combined"], 3, "given twice"),
]


@pytest.mark.parametrize("lines,lineno,reason", BAD_SITE)
@pytest.mark.parametrize("check", [False, True], ids=["start", "check"])
def test_bad_site_section_is_refused(make_server, lines, lineno, reason, check):
    srv = logger_server(make_server, lines)
    # The default site file: [HOST] and 2 entries, then [LOGGER] on line 4.
    err = srv.run_expect_failure(["-t"] if check else None)
    site = srv.conf / "sites" / "default"
    assert f"{site}:{lineno + 4}:" in err, err
    assert reason in err, err
    if check:
        assert not (srv.logs / "a.log").exists()


BAD_PLUGIN_CONF = [
    ("[LOGGER]\n    Colour blue\n", 2, "unknown key 'Colour'"),
    ("[OTHER]\n    AccessLog x\n", 1, "unknown section [OTHER]"),  # the header line
    ("[LOGGER]\n    LogFormat custom %h\n", 2, "reserved name"),
    ("[LOGGER]\n    LogFormat JSON %h\n", 2, "reserved name"),
    ("[LOGGER]\n    LogFormat j escape=JSN {}\n", 2, "'escape=JSN': the escaping is"),
    ("[LOGGER]\n    LogFormat x %h %Q\n", 2, "unknown specifier '%Q'"),
    ("[LOGGER]\n    LogFormat x %h\n    LogFormat X %h\n", 3, "defined twice"),
    ("[LOGGER]\n    Format nonesuch\n", 2, "unknown format 'nonesuch'"),
    ("[LOGGER]\n    BufferLimit 1K\n", 2, "BufferLimit"),
    ("[LOGGER]\n    PipeSize lots\n", 2, "PipeSize"),
]


@pytest.mark.parametrize("text,lineno,reason", BAD_PLUGIN_CONF)
def test_bad_plugin_conf_is_refused(make_server, text, lineno, reason):
    srv = logger_server(make_server, [], text)
    err = srv.run_expect_failure()
    assert f"{srv.conf / 'plugins' / 'logger.conf'}:{lineno}:" in err, err
    assert reason in err, err
    assert "plugins.load:2:" in err  # which plugin failed


def test_bad_default_path_names_plugin_conf(make_server):
    srv = logger_server(make_server, [], "[LOGGER]\n    Format common\n"
                                         "    ErrorLog ../logs/nodir/error.log\n")
    for args in (None, ["-t"]):
        err = srv.run_expect_failure(args)
        assert f"{srv.conf / 'plugins' / 'logger.conf'}:3: ErrorLog" in err, err
        assert "No such file or directory" in err


def test_unreadable_directory_is_refused(make_server):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    srv = logger_server(make_server, ["AccessLog ../logs/locked/access.log"])
    locked = srv.logs / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR)
    try:
        err = srv.run_expect_failure()
        assert f"{srv.conf / 'sites' / 'default'}:5: AccessLog" in err
        assert "Permission denied" in err
    finally:
        locked.chmod(stat.S_IRWXU)
