"""An HTTP/1.1 upstream for the proxy's tests (test_proxy.py): keep-alive,
strict enough to see what the proxy sends, started as a process on a
port and stopped by its PID.

    proxy_upstream.py PORT NAME [--raw FILE] [--blackhole] [--close | --half | --hang]
                      [--tls CERT KEY [--client-ca CA]]

Paths: /echo (JSON of the request as received: method, target, version,
fields in order, body, and the server's NAME and connection number),
/chunked?n=N (N pieces, chunked), /big?n=BYTES (Content-Length, streamed),
/stall?n=BYTES (Content-Length 2*BYTES, BYTES of it, then silence),
/status/CODE (that status, no body for 204 and 304), /hop (hop-by-hop
fields in the response), /continue (a 100 and a 103 before the answer),
/hints?s=SECONDS (a 103 with two Link fields, the answer that long after),
/trailers?s=SECONDS (chunked, the TE received as its body, its trailer
fields that long after), /sink (the body read as it comes and dropped:
"BYTES CRC32" of it),
/extra (a second answer after the first), /bad (Content-Length and
Transfer-Encoding), /sleep?s=SECONDS (the echo after that long), /stats
(connections accepted, requests served, requests answered whole, requests
being answered now and the most at once),
.../answer?status=CODE&h=Name:Value&h=... (that status and
those fields, values %-decoded, repeatable; the body is the request's head
as received), .../head (the request's head as received, as text),
/health (200, or the status /sethealth/CODE set; its requests are counted
in "health", not "requests", as soon as they are read; /sethealth/0 makes it hang;
/healthgate/N lets N more /health requests be answered and holds the ones after
them until it is called again, /healthgate/-1 answers them all again; a held
one is answered with the status set when it is let go). --raw appends every byte
received to FILE; --blackhole accepts and never answers; --tls serves over
TLS with that certificate (and asks for a client certificate signed by
--client-ca): /echo's document then has "tls" (the SNI name the client
sent, its version, whether the session was resumed, the client
certificate's subject) and /stats counts "handshakes" and "resumed".
Failing modes, for every path but /stats, each request counted once read
whole: --close closes the connection without answering, --half sends a
head with Content-Length 200000 and half of that body then closes, --hang
never answers and keeps the connection."""

import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import zlib

PORT = int(sys.argv[1])
NAME = sys.argv[2]
RAW = sys.argv[sys.argv.index("--raw") + 1] if "--raw" in sys.argv else None
BLACKHOLE = "--blackhole" in sys.argv
TLS = None
if "--tls" in sys.argv:
    i = sys.argv.index("--tls")
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    TLS.load_cert_chain(sys.argv[i + 1], sys.argv[i + 2])
    if "--client-ca" in sys.argv:
        TLS.verify_mode = ssl.CERT_REQUIRED
        TLS.load_verify_locations(sys.argv[sys.argv.index("--client-ca") + 1])
    SNI = {}

    def remember_sni(sock, name, ctx):
        SNI[id(sock)] = name

    TLS.sni_callback = remember_sni
MODE = next((m for m in ("--close", "--half", "--hang") if m in sys.argv), None)
stats = {"connections": 0, "requests": 0, "health": 0, "handshakes": 0, "resumed": 0,
         "active": 0, "peak": 0, "answered": 0}
health = {"code": 200, "hosts": [], "gate": None}  # gate: /health answers let out, None: all
lock = threading.Lock()
gate_moved = threading.Condition()


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.head = b""

    def _more(self):
        data = self.sock.recv(65536)
        if RAW and data:
            with lock, open(RAW, "ab") as f:
                f.write(data)
        if not data:
            raise EOFError
        self.buf += data

    def line(self):
        while b"\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\n", 1)
        return line.rstrip(b"\r")

    def exact(self, n):
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_request(rd):
    line = rd.line()
    while line == b"":
        line = rd.line()
    rd.head = line + b"\r\n"
    method, target, version = line.decode("latin-1").split(" ")
    fields = []
    while True:
        ln = rd.line()
        rd.head += ln + b"\r\n"
        if not ln:
            break
        k, v = ln.decode("latin-1").split(":", 1)
        fields.append([k, v.strip()])
    low = {k.lower(): v for k, v in fields}
    body = b""
    if target.startswith("/sink"):
        body = sink(rd, low)
    elif "transfer-encoding" in low:
        while True:
            size = int(rd.line().split(b";")[0], 16)
            if size == 0:
                while rd.line():
                    pass
                break
            body += rd.exact(size)
            rd.line()
    elif "content-length" in low:
        body = rd.exact(int(low["content-length"]))
    return method, target, version, fields, body


def sink(rd, low):
    """A body read and dropped as it comes (/sink): b"BYTES CRC32"."""
    n, crc = 0, 0
    if "transfer-encoding" in low:
        while True:
            size = int(rd.line().split(b";")[0], 16)
            if size == 0:
                while rd.line():
                    pass
                break
            left = size
            while left:
                if not rd.buf:
                    rd._more()
                piece, rd.buf = rd.buf[:left], rd.buf[left:]
                n, crc, left = n + len(piece), zlib.crc32(piece, crc), left - len(piece)
            rd.line()
    else:
        left = int(low.get("content-length", "0"))
        while left:
            if not rd.buf:
                rd._more()
            piece, rd.buf = rd.buf[:left], rd.buf[left:]
            n, crc, left = n + len(piece), zlib.crc32(piece, crc), left - len(piece)
    return b"%d %08x" % (n, crc)


def send_all(sock, data):
    sock.sendall(data)


def answer(sock, conn_no, req, head):
    method, target, version, fields, body = req
    path, _, query = target.partition("?")
    q = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
    head_only = method == "HEAD"
    if path == "/health":
        with gate_moved:
            while health["gate"] is not None and health["gate"] <= 0:
                gate_moved.wait()
            if health["gate"] is not None:
                health["gate"] -= 1
            code = health["code"]
        if code == 0:
            time.sleep(3600)
        send_all(sock, b"HTTP/1.1 %d X\r\nContent-Length: 2\r\n\r\nhc" % code)
    elif path.startswith("/healthgate/"):
        n = int(path[12:])
        with gate_moved:
            health["gate"] = None if n < 0 else (health["gate"] or 0) + n
            gate_moved.notify_all()
        out = json.dumps({"gate": health["gate"]}).encode()
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
    elif path.startswith("/sethealth/"):
        health["code"] = int(path[11:])
        hosts = json.dumps(health["hosts"][-5:]).encode()
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(hosts) + hosts)
    elif path.endswith("/answer"):
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        code = int(dict(pairs).get("status", "200"))
        out = b"HTTP/1.1 %d X\r\n" % code
        for k, v in pairs:
            if k == "h":
                out += v.encode("latin-1") + b"\r\n"
        send_all(sock, out + b"Content-Length: %d\r\n\r\n" % len(head)
                 + (b"" if head_only else head))
    elif path.endswith("/head"):
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(head) + (b"" if head_only else head))
    elif path == "/stats":
        out = json.dumps(stats).encode()
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
    elif path.startswith("/status/"):
        code = int(path[8:])
        if code in (204, 304):
            send_all(sock, b"HTTP/1.1 %d X\r\nX-Name: %s\r\n\r\n" % (code, NAME.encode()))
        else:
            send_all(sock, b"HTTP/1.1 %d X\r\nContent-Length: 2\r\n\r\nok" % code)
    elif path == "/chunked":
        n = int(q.get("n", "3"))
        out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
        if not head_only:
            for i in range(n):
                piece = b"piece %d;" % i
                out += b"%x;ext=1\r\n%s\r\n" % (len(piece), piece)
            out += b"0\r\nX-Trailer: t\r\n\r\n"
        send_all(sock, out)
    elif path == "/big":
        n = int(q.get("n", "1000000"))
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
        if not head_only:
            chunk = bytes(range(256)) * 256
            left = n
            while left > 0:
                k = min(left, len(chunk))
                send_all(sock, chunk[:k])
                left -= k
    elif path == "/stall":
        # half of the body announced, then silence (the connection kept)
        n = int(q.get("n", "100000"))
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (2 * n)
                 + (bytes(range(256)) * (n // 256 + 1))[:n])
        while sock.recv(65536):
            pass
    elif path == "/hop":
        send_all(sock, b"HTTP/1.1 200 OK\r\nConnection: X-Secret\r\nX-Secret: s\r\n"
                       b"Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\n"
                       b"Upgrade: h2c\r\nX-Kept: k\r\nContent-Length: 2\r\n\r\nok")
    elif path == "/continue":
        send_all(sock, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
                       b"Link: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
    elif path == "/hints":
        # 103 with two Link fields (and a field that is not one), then the answer s later
        send_all(sock, b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n"
                       b"X-Not-A-Hint: x\r\nLink: </app.js>; rel=preload; as=script\r\n\r\n")
        time.sleep(float(q.get("s", "0")))
        send_all(sock, b"HTTP/1.1 200 OK\r\nLink: </style.css>; rel=preload\r\n"
                       b"Content-Length: 4\r\n\r\nbody")
    elif path == "/sink":
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    elif path == "/trailers":
        # chunked with trailer fields, good and banned; the body says what TE came
        te = {k.lower(): v for k, v in fields}.get("te", "")
        piece = b"te=" + te.encode()
        first = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
                 b"%x\r\n%s\r\n" % (len(piece), piece))
        last = (b"0\r\nX-Checksum: abc\r\nContent-Length: 99\r\nSet-Cookie: a=b\r\n"
                b"Grpc-Status:0 \r\n\r\n")
        if float(q.get("s", "0")) > 0:
            send_all(sock, first)
            time.sleep(float(q["s"]))
            first = b""
        send_all(sock, first + last)  # s=0: all of it in one write
    elif path == "/extra":
        # a second answer nobody asked for, after the first: never the next request's
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        time.sleep(0.05)
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
    elif path == "/sleep":
        with lock:
            stats["active"] += 1
            stats["peak"] = max(stats["peak"], stats["active"])
        time.sleep(float(q.get("s", "0.5")))
        with lock:
            stats["active"] -= 1
        answer(sock, conn_no, (method, "/echo", version, fields, body), head)
    elif path == "/bad":
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked"
                       b"\r\n\r\nok")
    else:
        doc = {"name": NAME, "conn": conn_no, "method": method, "target": target,
               "version": version, "fields": fields, "body": body.decode("latin-1")}
        if TLS:
            peer = sock.getpeercert()
            doc["tls"] = {"sni": SNI.get(id(sock)), "version": sock.version(),
                          "resumed": sock.session_reused,
                          "client": dict(x[0] for x in peer["subject"]) if peer else None}
        out = json.dumps(doc).encode()
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\nX-Name: %s\r\n\r\n" % (len(out), NAME.encode())
                 + (b"" if head_only else out))


def fail(sock):
    if MODE == "--half":
        send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + b"h" * 100000)
    elif MODE == "--hang":
        while sock.recv(65536):
            pass


def serve(sock, conn_no):
    if TLS:
        try:
            sock = TLS.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError):
            sock.close()
            return
        with lock:
            stats["handshakes"] += 1
            stats["resumed"] += sock.session_reused
    rd = Reader(sock)
    try:
        while True:
            req = read_request(rd)
            with lock:
                if req[1] == "/health":
                    stats["health"] += 1
                    health["hosts"].append({k.lower(): v for k, v in req[3]}.get("host"))
                else:
                    stats["requests"] += 1
            if MODE and not req[1].startswith("/stats"):
                fail(sock)
                return
            answer(sock, conn_no, req, rd.head)
            if not req[1].startswith("/stats"):
                with lock:
                    stats["answered"] += 1  # its last byte went out
    except (EOFError, ConnectionError, ValueError, OSError):
        pass
    finally:
        sock.close()


def main():
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", PORT))
    lsock.listen(128)
    if BLACKHOLE:
        held = []
        while True:
            s, _ = lsock.accept()
            held.append(s)
    while True:
        s, _ = lsock.accept()
        with lock:
            stats["connections"] += 1
            n = stats["connections"]
        threading.Thread(target=serve, args=(s, n), daemon=True).start()


main()
