"""HTTP/2 and a reload (SIGHUP) or a stop: a graceful shutdown in two steps
(RFC 9113 section 6.8): the shutdown notice (GOAWAY with the last stream id
2^31-1) and a PING, then, once the PING's ACK came, GOAWAY with the last
stream id. A request the client sent before it saw the notice is served;
the streams in flight finish, and new connections take the new
configuration."""

import hashlib
import os
import signal
import socket
import threading
import time

import hpack
import pytest

from conftest import SLOW
from h2util import H2_MARKS, PREFACE, H2Client, h2c_server
from test_h2 import frame, raw_h2

pytestmark = H2_MARKS

MIB = 1 << 20


def reload(srv, **site):
    """Rewrite the configuration with `site` changes, SIGHUP, wait for the log line."""
    srv.site_conf.update(site)
    srv.write_conf()
    srv.reload()


class Frames:
    """Frames read from a raw socket: (type, flags, stream, payload)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def next(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big"), self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        return f


NOTICE = (2**31 - 1, 0)  # the shutdown notice: last stream 2^31-1, NO_ERROR


def goaway_of(f):
    return (int.from_bytes(f[3][:4], "big") & 0x7fffffff, int.from_bytes(f[3][4:8], "big"))


def other_root(srv, text):
    root = srv.dir / "htdocs2"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text(text)
    return str(root)


def test_reload_sends_goaway_and_the_stream_in_flight_finishes(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(2 * MIB)
    srv.file("big.bin", big)
    srv.start()
    s = raw_h2(srv)
    block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"),
                                    (":authority", "localhost"), (":path", "/big.bin")])
    s.sendall(frame(1, 0x5, 1, block))  # END_STREAM | END_HEADERS
    frames = Frames(s)
    body, ended = b"", False
    # the stream's initial window (65535 bytes) goes out, then the server waits
    while len(body) < 65535:
        ftype, flags, sid, payload = frames.next()
        if ftype == 0:
            body += payload
    reload(srv, DocumentRoot=other_root(srv, "new configuration\n"))
    goaways = []
    while len(goaways) < 2:  # this client does not answer the PING: a second later
        f = frames.next()
        assert f is not None, "closed without GOAWAY"
        if f[0] == 7:
            goaways.append(goaway_of(f))
    assert goaways == [NOTICE, (1, 0)]  # then last stream 1, NO_ERROR
    inc = (4 * MIB).to_bytes(4, "big")
    s.sendall(frame(8, 0, 1, inc) + frame(8, 0, 0, inc))
    while not ended:
        f = frames.next()
        assert f is not None, "closed before the stream ended"
        if f[0] == 0 and f[2] == 1:
            body += f[3]
            ended = bool(f[1] & 1)
    assert hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    # its last stream done, the old connection closes
    while frames.next() is not None:
        pass
    s.close()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["data"] == b"new configuration\n"
    c.close()
    assert srv.proc.poll() is None


def test_reload_closes_an_idle_h2_connection_with_goaway(make_server):
    # Raw frames: Python's h2 takes no frame after a GOAWAY, not even the PING
    # that follows the shutdown notice.
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    frames = Frames(s)
    s.sendall(get_frame(hpack.Encoder(), 1))
    read_answer(frames, 1)
    reload(srv, DocumentRoot=other_root(srv, "reloaded\n"))
    goaways = []
    while True:
        f = frames.next()
        if f is None:
            break
        if f[0] == 6 and not f[1] & 1:
            s.sendall(frame(6, 1, 0, f[3]))  # the PING's ACK
        if f[0] == 7:
            goaways.append(goaway_of(f))
    assert goaways == [NOTICE, (1, 0)]
    s.close()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["data"] == b"reloaded\n"
    c.close()


def test_reload_keeps_http1_keepalive_connections_on_an_h2c_listener(make_server):
    srv = h2c_server(make_server).start()
    c = srv.conn()
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    reload(srv, DocumentRoot=other_root(srv, "reloaded\n"))
    assert c.request("GET", "/hello.txt").body == b"reloaded\n"
    c.close()


def get_frame(enc, sid, path="/hello.txt"):
    return frame(1, 0x5, sid, enc.encode([(":method", "GET"), (":scheme", "http"),
                                          (":authority", "localhost"), (":path", path)]))


def read_answer(frames, sid):
    """Read frames until stream sid's answer ended: (its :status block seen, body)."""
    body = b""
    while True:
        f = frames.next()
        assert f is not None, f"closed before stream {sid} ended"
        if f[2] == sid and f[0] == 0:
            body += f[3]
        if f[2] == sid and f[0] in (0, 1) and f[1] & 1:
            return body
        assert not (f[2] == sid and f[0] == 3), f"stream {sid} reset"


@pytest.mark.parametrize("how", ["reload", "stop"])
def test_a_request_sent_as_the_shutdown_notice_arrives_is_served(make_server, how):
    """The client sends a request right as the first GOAWAY (the shutdown
    notice) arrives, before it answers the PING behind it: the request is
    served, and the final GOAWAY names its stream."""
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    frames = Frames(s)
    enc = hpack.Encoder()
    s.sendall(get_frame(enc, 1))
    assert read_answer(frames, 1) == b"Hello World!\n"
    if how == "reload":
        reload(srv, DocumentRoot=other_root(srv, "reloaded\n"))
    else:
        srv.signal(signal.SIGTERM)
    ping, goaways, body3, ended3 = None, [], b"", False
    while not goaways:
        f = frames.next()
        assert f is not None, "closed without GOAWAY"
        if f[0] == 6 and not f[1] & 1:
            ping = f[3]
        if f[0] == 7:
            goaways.append(goaway_of(f))
    assert goaways == [NOTICE]
    s.sendall(get_frame(enc, 3))  # on its way before the client saw the notice
    while ping is None:
        f = frames.next()
        assert f is not None, "no PING after the shutdown notice"
        if f[0] == 6 and not f[1] & 1:
            ping = f[3]
        elif f[0] == 7:
            goaways.append(goaway_of(f))
    s.sendall(frame(6, 1, 0, ping))  # the ACK, after the request
    while True:
        f = frames.next()
        if f is None:
            break
        if f[0] == 7:
            goaways.append(goaway_of(f))
        elif f[2] == 3 and f[0] == 0:
            body3 += f[3]
            ended3 = ended3 or bool(f[1] & 1)
        assert not (f[2] == 3 and f[0] == 3), "stream 3 was reset"
    assert goaways == [NOTICE, (3, 0)]
    assert ended3 and body3 == (b"reloaded\n" if how == "reload" else b"Hello World!\n")
    s.close()
    if how == "stop":
        assert srv.proc.wait(timeout=10 * SLOW) == 0


def keep_asking(port, tls, stop, tally):
    """A client that is fair to the shutdown: on each connection, eight
    requests in flight at all times, also after the shutdown notice, until
    the final GOAWAY; then a new connection. A stream at or below the final
    GOAWAY's last stream id that gets no answer is lost; one above it was
    never taken, and is retried."""
    from tlsutil import client_context
    while not stop.is_set():
        s = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
        if tls:
            s = client_context(alpn=["h2"]).wrap_socket(s, server_hostname="localhost")
        scheme = "https" if tls else "http"
        s.sendall(PREFACE + frame(4, 0, 0))
        frames, enc, dec = Frames(s), hpack.Encoder(), hpack.Decoder()
        sid, open_, final = 1, set(), None
        while True:
            while final is None and not stop.is_set() and len(open_) < 8:
                s.sendall(frame(1, 0x5, sid, enc.encode([
                    (":method", "GET"), (":scheme", scheme), (":authority", "localhost"),
                    (":path", "/hello.txt")])))
                open_.add(sid)
                tally["sent"] += 1
                sid += 2
            if not open_:
                break
            f = frames.next()
            if f is None:
                break
            ftype, flags, fsid, payload = f[0], f[1], f[2] & 0x7fffffff, f[3]
            if ftype == 4 and not flags & 1:
                s.sendall(frame(4, 1, 0))
            elif ftype == 6 and not flags & 1:
                s.sendall(frame(6, 1, 0, payload))
            elif ftype == 7:
                last = goaway_of(f)[0]
                if last != NOTICE[0]:
                    final = last
                    for x in [x for x in open_ if x > final]:
                        open_.discard(x)
                        tally["refused"] += 1
            elif ftype == 1:
                dec.decode(payload)  # the table stays in step
                if flags & 1:
                    open_.discard(fsid)
                    tally["ok"] += 1
            elif ftype == 0:
                if payload:
                    s.sendall(frame(8, 0, 0, len(payload).to_bytes(4, "big")))
                if flags & 1:
                    open_.discard(fsid)
                    tally["ok"] += 1
            elif ftype == 3 and fsid in open_:
                open_.discard(fsid)
                tally["lost"] += 1  # reset: not answered
        tally["lost"] += sum(1 for x in open_ if final is None or x <= final)
        tally["refused"] += sum(1 for x in open_ if final is not None and x > final)
        s.close()


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_reloads_under_load_lose_no_stream_they_took(make_server, tls):
    # Four clients, eight streams each in flight, a reload every 200 ms for
    # 6 s: every stream at or below a final GOAWAY's last stream id is
    # answered, over TLS as over h2c. (Clients that lost requests at reloads
    # in the soak runs: h2load counts the streams above the last id, which
    # RFC 9113 lets a client retry, as failed; python-h2 treats the shutdown
    # notice as the end and drops what the server is still answering.)
    if tls:
        from tlsutil import TLS_SO, tls_server
        if not TLS_SO.exists():
            pytest.skip("built without OpenSSL (MK_TLS off)")
        srv = tls_server(make_server)
    else:
        srv = h2c_server(make_server)
    srv.set(Workers=2)
    srv.start()
    stop = threading.Event()
    tally = {"sent": 0, "ok": 0, "refused": 0, "lost": 0}
    clients = [threading.Thread(target=keep_asking, args=(srv.port, tls, stop, tally))
               for _ in range(4)]
    for t in clients:
        t.start()
    t0 = time.monotonic()
    reloads = 0
    while time.monotonic() - t0 < 6:
        time.sleep(0.2)
        srv.signal(signal.SIGHUP)
        reloads += 1
    stop.set()
    for t in clients:
        t.join(timeout=30 * SLOW)
    assert tally["lost"] == 0, tally
    assert tally["ok"] + tally["refused"] == tally["sent"], tally
    assert tally["ok"] > 1000 and srv.stderr_text().count("configuration reloaded") > 10, tally
