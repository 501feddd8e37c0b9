"""Tier 6: an address another program listens on is refused, in every mode.

With Balancing reuseport each worker binds its own SO_REUSEPORT socket, which
the kernel lets share a port with any program of the same user that sets
SO_REUSEPORT too: a second Monkey on the same port would start and take a
share of the connections. The server probes each address it binds itself
first (server/runtime/listener.c, mk_listener_probe), so the second one exits with
"Address already in use", and the first keeps every connection. The same
goes for a reload that adds a busy address: refused, and the running
configuration stays. Sockets passed by a service manager or a supervisor are
not probed (process/test_systemd.py, process/test_supervisor.py).
"""

import re
import signal
import socket
import time

import pytest

from conftest import (BALANCINGS, SLOW, Conn, free_port, needs_ipv6, needs_part, owns_listener,
                      wait_port)

needs_supervisor = needs_part("supervisor", "the supervisor")


def busy_message(spec):
    # EADDRINUSE: "Address already in use" (glibc), "Address in use" (musl)
    return re.compile(rf"monkey\.conf:\d+: Listen {re.escape(spec)}: Address (already )?in use")


def site(make_server, name, port, listen, **conf):
    """A server on `port` whose /who.txt answers its name."""
    srv = make_server(name)
    srv.port = port
    srv.file("who.txt", f"{name}\n")
    srv.set(Listen=listen, **conf)
    return srv


def start_on(srv, host):
    srv.start(wait=False)
    assert wait_port(srv.port, host=host, proc=srv.proc), srv.stderr_text()
    return srv


def all_answered_by(port, host, name, n=200):
    """n new connections to host:port, each answered by the server `name`."""
    for _ in range(n):
        c = Conn(port, host=host)
        try:
            r = c.request("GET", "/who.txt", headers={"Connection": "close"})
        finally:
            c.close()
        assert r.status == 200 and r.body == f"{name}\n".encode()


def reuseport_listener(host, port):
    """A listening socket of another program that sets SO_REUSEPORT."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((host, port))
    s.listen(16)
    return s


def wait_log(srv, text, timeout=5.0):
    deadline = time.monotonic() + timeout * SLOW
    while text not in srv.stderr_text():
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.05)


# (first Listen, second Listen, host the clients use): {p} is the port.
ADDRESSES = [
    pytest.param("127.0.0.1:{p}", "127.0.0.1:{p}", "127.0.0.1", id="same-ipv4"),
    # The second's specific address would take every connection to it.
    pytest.param("{p}", "127.0.0.1:{p}", "127.0.0.1", id="any-then-ipv4"),
    pytest.param("127.0.0.1:{p}", "{p}", "127.0.0.1", id="ipv4-then-any"),
    pytest.param("{p}", "{p}", "127.0.0.1", id="same-any"),
    pytest.param("[::1]:{p}", "[::1]:{p}", "::1", id="same-ipv6", marks=needs_ipv6),
    pytest.param("{p}", "[::1]:{p}", "::1", id="any-then-ipv6", marks=needs_ipv6),
]


@pytest.mark.parametrize("balancing", BALANCINGS)
@pytest.mark.parametrize("first_listen,second_listen,host", ADDRESSES)
def test_second_server_on_the_port_is_refused(make_server, first_listen, second_listen, host,
                                              balancing):
    port = free_port()
    first = start_on(site(make_server, "first", port, first_listen.format(p=port)), host)
    spec = second_listen.format(p=port)
    second = site(make_server, "second", port, spec, Balancing=balancing)
    err = second.run_expect_failure()
    assert busy_message(spec).search(err), err
    all_answered_by(port, host, "first")
    assert first.stop() == 0


@needs_supervisor
@pytest.mark.parametrize("first_args,second_args",
                         [([], ["-S"]), (["-S"], []), (["-S"], ["-S"])],
                         ids=["plain-then-supervised", "supervised-then-plain", "both-supervised"])
def test_second_server_with_a_supervisor_is_refused(make_server, first_args, second_args):
    port = free_port()
    first = site(make_server, "first", port, f"127.0.0.1:{port}")
    first.start(first_args)
    spec = f"127.0.0.1:{port}"
    err = site(make_server, "second", port, spec).run_expect_failure(second_args)
    assert busy_message(spec).search(err), err
    all_answered_by(port, "127.0.0.1", "first")
    assert first.stop() == 0


def test_program_with_reuseport_blocks_the_start(make_server):
    holder = reuseport_listener("127.0.0.1", 0)
    port = holder.getsockname()[1]
    srv = site(make_server, "srv", port, f"127.0.0.1:{port}")
    err = srv.run_expect_failure()
    assert busy_message(f"127.0.0.1:{port}").search(err), err
    holder.close()
    srv.start()
    all_answered_by(port, "127.0.0.1", "srv", n=20)


@pytest.mark.parametrize("args", [[], pytest.param(["-S"], marks=needs_supervisor)],
                         ids=["plain", "supervised"])
@pytest.mark.parametrize("host", ["127.0.0.1", pytest.param("::1", marks=needs_ipv6)])
def test_reload_adding_a_busy_address_is_refused(make_server, tmp_path, args, host):
    port = free_port()
    srv = site(make_server, "old", port, f"127.0.0.1:{port}")
    srv.start(args)
    holder = reuseport_listener(host, 0)
    busy = holder.getsockname()[1]
    spec = f"[{host}]:{busy}" if ":" in host else f"{host}:{busy}"
    newroot = tmp_path / "newroot"
    newroot.mkdir()
    (newroot / "who.txt").write_text("new\n")
    srv.site_conf["DocumentRoot"] = str(newroot)
    srv.set(Listen=[f"127.0.0.1:{srv.port}", spec])
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    wait_log(srv, "reload failed")
    assert busy_message(spec).search(srv.stderr_text()), srv.stderr_text()
    # The running configuration stays: the old site, and no socket on the port.
    all_answered_by(srv.port, "127.0.0.1", "old", n=20)
    assert not owns_listener(srv.proc, busy)
    # Once the other program is gone, the same reload goes through.
    holder.close()
    srv.signal(signal.SIGHUP)
    assert wait_port(busy, host=host, proc=srv.proc), srv.stderr_text()
    assert Conn(busy, host=host).request("GET", "/who.txt").body == b"new\n"
    assert srv.stop() == 0


def test_an_address_beside_its_own_socket_is_not_probed(make_server):
    """The server's own sockets are not another program: a port-only Listen
    beside one address of the same port, at start and added on reload."""
    port = free_port()
    srv = site(make_server, "srv", port, [f"127.0.0.1:{port}", str(port)])
    srv.start()
    assert Conn(port, host="127.0.0.2").request("GET", "/who.txt").body == b"srv\n"
    srv.set(Listen=f"127.0.0.1:{port}")
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    wait_log(srv, "configuration reloaded")
    srv.set(Listen=[f"127.0.0.1:{port}", str(port)], HideVersion="On")
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5 * SLOW
    while srv.get("/who.txt").header("server") != "Monkey":
        assert "reload failed" not in srv.stderr_text(), srv.stderr_text()
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.05)
    assert Conn(port, host="127.0.0.2").request("GET", "/who.txt").body == b"srv\n"
    assert srv.stop() == 0
