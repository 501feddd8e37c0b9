"""A tiny FastCGI responder for the tests, run as a process of its own:

    python3 fcgi_responder.py SOCKET_PATH

It listens on a unix socket and answers every request with its connection's
number, the request's number on that connection and the request body:
"conn N req M stdin=BODY". Connections are kept alive (FCGI_KEEP_CONN), but
the second request on any connection is never answered: the responder reads
its first record and closes the connection, as php-fpm does when it drops an
idle connection at the moment the server reuses it."""

import os
import socket
import struct
import sys
import threading

BEGIN, END, PARAMS, STDIN, STDOUT = 1, 3, 4, 5, 6


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


def record(rtype, rid, content=b""):
    return struct.pack(">BBHHBB", 1, rtype, rid, len(content), 0, 0) + content


def serve(conn, number):
    for count in range(1, 1000):
        first = read_record(conn)
        if first is None:
            break
        if count == 2:
            break  # the race: closed just as it is reused
        rid, body, stdin_done = first[1], b"", False
        while not stdin_done:
            rec = read_record(conn)
            if rec is None:
                conn.close()
                return
            if rec[0] == STDIN:
                body += rec[2]
                stdin_done = rec[2] == b""
        out = b"Content-Type: text/plain\r\n\r\n" + f"conn {number} req {count} stdin=".encode()
        out += body
        conn.sendall(record(STDOUT, rid, out) + record(STDOUT, rid) +
                     record(END, rid, struct.pack(">IB3x", 0, 0)))
    conn.close()


def main():
    path = sys.argv[1]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".tmp")
    srv.listen(64)
    os.rename(path + ".tmp", path)  # it exists once it listens
    number = 0
    while True:
        conn, _ = srv.accept()
        number += 1
        threading.Thread(target=serve, args=(conn, number), daemon=True).start()


if __name__ == "__main__":
    main()
