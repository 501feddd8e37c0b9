"""A tiny FastCGI responder for the tests, run as a process of its own:

    python3 fcgi_responder.py ADDRESS [--name NAME] [--race | --last]

ADDRESS is a unix socket path, or HOST:PORT to listen on TCP. A unix socket
appears only once the responder listens (it is bound under another name,
then renamed).

Every request is answered, on a kept-alive connection (FCGI_KEEP_CONN), with
"[NAME ]conn N req M stdin=BODY": the responder's name (none by default), its
connection's number, the request's number on that connection and the
request body. The request's QUERY_STRING may ask for something else with
mode=MODE:

    overloaded    END_REQUEST with protocol status FCGI_OVERLOADED, no output
    cant-mpx      END_REQUEST with FCGI_CANT_MPX_CONN
    unknown-role  END_REQUEST with FCGI_UNKNOWN_ROLE
    garbage       bytes that are no record (an HTTP response)
    version       a STDOUT record of FastCGI version 2
    other-id      STDOUT and END_REQUEST for another request id
    bad-end       an END_REQUEST of 4 bytes instead of 8
    hold          the usual answer, once the file named by until=PATH exists
    die           no answer: once the file named by until=PATH exists, the
                  responder stops listening (a connect is refused at once),
                  then exits, which closes its connections

After a mode that breaks the protocol the responder sends nothing more on
the connection and waits for the server to close it.

With --race, the second request on any connection is never answered: the
responder reads its first record and closes the connection, as php-fpm does
when it drops an idle connection at the moment the server reuses it.

With --last, the responder answers one request and stops: it closes its
listening socket (the socket file stays, so a connect is refused at once),
and when the next request comes on the kept-alive connection it reads its
first record and closes that connection too, without an answer, as a
php-fpm that was stopped between two requests."""

import argparse
import os
import socket
import struct
import threading
import time
from urllib.parse import parse_qs

BEGIN, END, PARAMS, STDIN, STDOUT = 1, 3, 4, 5, 6
COMPLETE, CANT_MPX, OVERLOADED, UNKNOWN_ROLE = 0, 1, 2, 3
BREAKS = {"garbage", "version", "other-id", "bad-end"}


def read_exact(conn, n):
    data = b""
    while len(data) < n:
        piece = conn.recv(n - len(data))
        if not piece:
            return None
        data += piece
    return data


def read_record(conn):
    head = read_exact(conn, 8)
    if head is None:
        return None
    _, rtype, rid, clen, plen, _ = struct.unpack(">BBHHBB", head)
    content = read_exact(conn, clen + plen)
    if content is None:
        return None
    return rtype, rid, content[:clen]


def record(rtype, rid, content=b"", version=1):
    return struct.pack(">BBHHBB", version, rtype, rid, len(content), 0, 0) + content


def end_request(rid, protocol_status=COMPLETE):
    return record(END, rid, struct.pack(">IB3x", 0, protocol_status))


def params_of(data):
    """The name-value pairs of a PARAMS stream."""
    out, pos = {}, 0

    def length():
        nonlocal pos
        if data[pos] < 128:
            pos += 1
            return data[pos - 1]
        pos += 4
        return struct.unpack(">I", data[pos - 4:pos])[0] & 0x7FFFFFFF

    while pos < len(data):
        nlen = length()
        vlen = length()
        name = data[pos:pos + nlen].decode("latin-1")
        out[name] = data[pos + nlen:pos + nlen + vlen].decode("latin-1")
        pos += nlen + vlen
    return out


def answer(mode, rid, name, number, count, body):
    """The bytes that answer one request."""
    if mode == "overloaded":
        return end_request(rid, OVERLOADED)
    if mode == "cant-mpx":
        return end_request(rid, CANT_MPX)
    if mode == "unknown-role":
        return end_request(rid, UNKNOWN_ROLE)
    if mode == "garbage":
        return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nnot FastCGI\r\n"
    text = (f"{name} " if name else "") + f"conn {number} req {count} stdin="
    out = b"Content-Type: text/plain\r\n\r\n" + text.encode() + body
    if mode == "version":
        return record(STDOUT, rid, out, version=2)
    if mode == "other-id":
        return record(STDOUT, rid + 1, out) + record(STDOUT, rid + 1) + end_request(rid + 1)
    if mode == "bad-end":
        return record(STDOUT, rid, out) + record(STDOUT, rid) + record(END, rid, b"\0\0\0\0")
    return record(STDOUT, rid, out) + record(STDOUT, rid) + end_request(rid)


def serve(conn, number, name, race, listener=None):
    """Answer the requests of one connection. With a listener (--last), that
    socket is closed after the first answer, and the connection at the next
    request."""
    for count in range(1, 1000):
        first = read_record(conn)
        if first is None:
            break
        if (race or listener) and count == 2:
            break  # the race: closed just as it is reused
        rid, params, body, stdin_done = first[1], b"", b"", False
        while not stdin_done:
            rec = read_record(conn)
            if rec is None:
                conn.close()
                return
            if rec[0] == PARAMS:
                params += rec[2]
            elif rec[0] == STDIN:
                body += rec[2]
                stdin_done = rec[2] == b""
        query = parse_qs(params_of(params).get("QUERY_STRING", ""))
        mode = query.get("mode", [""])[0]
        if mode in ("hold", "die"):
            until = query.get("until", [""])[0]
            while not os.path.exists(until):
                time.sleep(0.02)
        if mode == "die":
            LISTENER.shutdown(socket.SHUT_RDWR)
            os._exit(0)
        conn.sendall(answer(mode, rid, name, number, count, body))
        if listener:
            listener.close()
        if mode in BREAKS:
            while conn.recv(65536):
                pass  # until the server closes the connection
            break
    conn.close()


def listen(address):
    if ":" in address and not address.startswith("/"):
        host, port = address.rsplit(":", 1)
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, int(port)))
        srv.listen(64)
        return srv
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(address + ".tmp")
    srv.listen(64)
    os.rename(address + ".tmp", address)  # it exists once it listens
    return srv


LISTENER = None


def main():
    global LISTENER
    ap = argparse.ArgumentParser()
    ap.add_argument("address")
    ap.add_argument("--name", default="")
    ap.add_argument("--race", action="store_true")
    ap.add_argument("--last", action="store_true")
    args = ap.parse_args()
    srv = LISTENER = listen(args.address)
    if args.last:
        conn, _ = srv.accept()
        serve(conn, 1, args.name, False, srv)
        return
    number = 0
    while True:
        conn, _ = srv.accept()
        number += 1
        threading.Thread(target=serve, args=(conn, number, args.name, args.race),
                         daemon=True).start()


if __name__ == "__main__":
    main()
