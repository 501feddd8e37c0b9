"""MaxConnectionsPerClient: the open connections of one client address,
counted across the workers (core/keycount.c, conn.c, worker.c), refused
past the bound as past MaxConnections: 503 with Retry-After: 1."""

import time

from conftest import SLOW, Conn, needs_part

pytestmark = needs_part("rules", "request rules and client limits")


def refused(srv, source="127.0.0.1"):
    c = Conn(srv.port, source=source)
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response()
    ok = r.status == 503 and r.header("retry-after") == "1" and c.closed()
    c.close()
    return ok


def test_connections_per_client_across_workers(make_server):
    srv = make_server()
    srv.set(MaxConnectionsPerClient=3, Workers=2)
    srv.file("a.txt", "a\n")
    srv.start()
    time.sleep(0.3)  # let the start-up probe connection close
    held = [Conn(srv.port) for _ in range(3)]
    for c in held:
        assert c.request("GET", "/a.txt").status == 200
    assert refused(srv)
    # another address has its own count
    other = Conn(srv.port, source="127.0.0.2")
    assert other.request("GET", "/a.txt").status == 200
    # a closed connection gives its place back
    held[0].close()
    deadline = time.monotonic() + 5 * SLOW
    while True:
        c = Conn(srv.port)
        try:
            st = c.request("GET", "/a.txt").status
        except (EOFError, OSError):
            st = 0
        if st == 200 or time.monotonic() > deadline:
            break
        c.close()
        time.sleep(0.05)
    assert st == 200
    assert refused(srv)
    for x in held[1:] + [c, other]:
        x.close()


def test_reload_changes_the_bound(make_server):
    srv = make_server()
    srv.set(Workers=1)
    srv.file("a.txt", "a\n")
    srv.start()
    time.sleep(0.3)
    held = [Conn(srv.port) for _ in range(2)]
    for c in held:
        assert c.request("GET", "/a.txt").status == 200
    srv.set(MaxConnectionsPerClient=1)
    srv.write_conf()
    srv.reload()
    # the connections open before the bound are not counted: a new one is
    c = Conn(srv.port)
    assert c.request("GET", "/a.txt").status == 200
    assert refused(srv)
    for x in held + [c]:
        x.close()
