"""The standalone FastCGI responder of examples/fastcgi_responder, built with
the server, as the backend of the fastcgi plugin over a unix socket: its
page and parameters, request bodies, a body of many STDOUT records, STDERR
in the server's log, kept-alive connections and concurrent clients. The
responder is started by each test and stopped by its PID."""

import socket
import struct
import subprocess
import time

import pytest

from conftest import BUILD, SLOW, needs_dlopen
from fcgi_responder import params_of, read_record, record
from gwutil import CgiConn, figures, get
from test_fastcgi import make_php_server, status_doc

RESPONDER = BUILD / "examples" / "fastcgi-responder"

pytestmark = [
    needs_dlopen,
    pytest.mark.skipif(not RESPONDER.exists(), reason="examples not built"),
]


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def page_of(body):
    lines = body.decode().splitlines()
    return lines[0], dict(line.split("=", 1) for line in lines[1:5]), lines[5]


@pytest.fixture
def app(make_server, tmp_path):
    sock = tmp_path / "app.sock"
    proc = subprocess.Popen([str(RESPONDER), "-n", "example", f"unix:{sock}"],
                            start_new_session=True)
    deadline = time.monotonic() + 10 * SLOW
    while True:  # until it accepts (the socket file exists before listen())
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "no responder"
            time.sleep(0.02)
    srv = make_php_server(make_server, sock, control=True)
    srv.site_extra = f"[FASTCGI]\n    Backend unix:{sock}\n    Match \\.app$\n"
    srv.file("hello.app", "")
    srv.app_sock = sock
    srv.start()
    yield srv
    srv.stop()
    proc.kill()  # the listener; each connection's child ends with its connection
    proc.wait()


def test_page_and_parameters_on_one_kept_connection(app):
    c = CgiConn(app.port)
    for n in range(1, 11):
        r = c.request("GET", "/hello.app/a/b?x=1")
        assert r.status == 200
        assert r.header("Content-Type") == "text/plain; charset=utf-8"
        assert r.header("X-Responder") == "example"
        first, params, stdin = page_of(r.body)
        assert first == f"example: request {n} on this connection"
        assert params == {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/hello.app",
                          "PATH_INFO": "/a/b", "QUERY_STRING": "x=1"}
        assert stdin == f"stdin: 0 bytes, fnv1a {fnv1a(b''):08x}"
    c.close()
    st = status_doc(app)
    assert st["backend0_active"] == 1
    figures(st, backend0_requests=10)


def test_request_body(app):
    body = bytes(range(256)) * 12289  # 3 MB and a bit, in many STDIN records
    c = CgiConn(app.port, timeout=30)
    r = c.request("POST", "/hello.app", body=body)
    assert r.status == 200
    first, params, stdin = page_of(r.body)
    assert params["REQUEST_METHOD"] == "POST"
    assert stdin == f"stdin: {len(body)} bytes, fnv1a {fnv1a(body):08x}"
    c.close()


def test_a_body_of_many_records(app):
    r = get(app, "/hello.app?lines=100000")
    assert r.status == 200 and r.header("Transfer-Encoding") == "chunked"
    lines = r.body.decode().splitlines()[6:]
    assert len(lines) == 100000
    assert lines[0] == "line 1" and lines[-1] == "line 100000"


def test_stderr_reaches_the_log(app):
    r = get(app, "/hello.app?log=hello-from-the-responder")
    assert r.status == 200
    assert "fastcgi: /hello.app: example: hello-from-the-responder" in app.stderr_text()


def test_concurrent_clients(app):
    conns = [CgiConn(app.port, timeout=10) for _ in range(4)]
    for i, c in enumerate(conns):
        c.send(f"GET /hello.app?client={i} HTTP/1.1\r\nHost: localhost\r\n\r\n")
    for i, c in enumerate(conns):
        first, params, stdin = page_of(c.read_response().body)
        assert params["QUERY_STRING"] == f"client={i}"
        c.close()


def test_management_records_roles_and_multiplexing(app):
    # spoken to directly, as a web server would: FCGI_GET_VALUES is
    # answered, an unknown management type named, another role refused, a
    # second request while one is open refused (no multiplexing)
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10 * SLOW)
        s.connect(str(app.app_sock))
        s.sendall(record(9, 0, b"\x0e\x00FCGI_MAX_CONNS"))
        rtype, rid, content = read_record(s)
        assert (rtype, rid) == (10, 0)
        assert params_of(content) == {"FCGI_MPXS_CONNS": "0"}
        s.sendall(record(42, 0, b""))
        assert read_record(s) == (11, 0, bytes([42]) + b"\0" * 7)
        s.sendall(record(1, 5, struct.pack(">HB5x", 2, 1)))  # the authorizer role
        assert read_record(s) == (3, 5, struct.pack(">IB3x", 0, 3))  # FCGI_UNKNOWN_ROLE
        begin = struct.pack(">HB5x", 1, 1)  # a responder, FCGI_KEEP_CONN
        s.sendall(record(1, 6, begin) + record(1, 7, begin))
        assert read_record(s) == (3, 7, struct.pack(">IB3x", 0, 1))  # FCGI_CANT_MPX_CONN
        s.sendall(record(4, 6, b"\x0c\x03QUERY_STRINGa=1") + record(4, 6) + record(5, 6))
        rtype, rid, content = read_record(s)
        assert (rtype, rid) == (6, 6) and b"QUERY_STRING=a=1\n" in content
        assert read_record(s) == (6, 6, b"")
        assert read_record(s) == (3, 6, struct.pack(">IB3x", 0, 0))
