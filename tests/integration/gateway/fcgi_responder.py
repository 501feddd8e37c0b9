"""A tiny FastCGI responder for the tests, run as a process of its own:

    python3 fcgi_responder.py ADDRESS [--name NAME] [--race | --last] [--max-conns N]
                              [--ignore-management]

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

Management records (request id 0) are answered as the specification says:
FCGI_GET_VALUES with FCGI_MPXS_CONNS 0, and with FCGI_MAX_CONNS and
FCGI_MAX_REQS N when --max-conns N is given (the responder does not hold
itself to it: it serves every connection in a thread of its own); another
type with FCGI_UNKNOWN_TYPE. With --ignore-management they are read and
dropped without an answer, as by an application that knows none.

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
GET_VALUES, GET_VALUES_RESULT, UNKNOWN_TYPE = 9, 10, 11
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


def pairs(values):
    """A name-value pair stream (1-byte lengths)."""
    return b"".join(bytes([len(n), len(v)]) + n + v for n, v in values)


def next_request_record(conn, opts):
    """The first record of the next request; management records on the way
    are answered (or dropped, opts.ignore_management)."""
    while True:
        rec = read_record(conn)
        if rec is None or rec[1] != 0:
            return rec
        if opts.ignore_management:
            continue
        if rec[0] == GET_VALUES:
            known = {b"FCGI_MPXS_CONNS": b"0"}
            if opts.max_conns:
                known[b"FCGI_MAX_CONNS"] = known[b"FCGI_MAX_REQS"] = str(opts.max_conns).encode()
            asked = params_of(rec[2])
            conn.sendall(record(GET_VALUES_RESULT, 0, pairs(
                (n.encode(), known[n.encode()]) for n in asked if n.encode() in known)))
        else:
            conn.sendall(record(UNKNOWN_TYPE, 0, bytes([rec[0]]) + b"\0" * 7))


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


def serve(conn, number, opts, listener=None):
    """Answer the requests of one connection. With a listener (--last), that
    socket is closed after the first answer, and the connection at the next
    request."""
    name, race = opts.name, opts.race
    for count in range(1, 1000):
        first = next_request_record(conn, opts)
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
    ap.add_argument("--max-conns", type=int, default=0)
    ap.add_argument("--ignore-management", action="store_true")
    args = ap.parse_args()
    srv = LISTENER = listen(args.address)
    if args.last:
        conn, _ = srv.accept()
        serve(conn, 1, args, srv)
        return
    number = 0
    while True:
        conn, _ = srv.accept()
        number += 1
        threading.Thread(target=serve, args=(conn, number, args), daemon=True).start()


if __name__ == "__main__":
    main()
