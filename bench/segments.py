#!/usr/bin/env python3
"""TCP segments and CPU per large-file response: one sequential client.

For each server and file, one keep-alive connection asks for the file N
times in a row, reading 8 KiB at a time as wrk does. The client's own
socket counts what crossed the wire (TCP_INFO, before and after): the data
segments the server sent and the segments the client sent back (ACKs and
requests). The segment counts depend on the server's send pattern, not on
the machine's load, where CPU times on a shared machine move by tens of
percent; the server's CPU (every thread's run time from
/proc/PID/task/*/schedstat, in ns) and the client's (getrusage) are given
beside them as min and median over the rounds.

    bench/segments.py --servers monkey,nginx,lighttpd -n 300 --rounds 5 \\
        --out bench/results/segments
"""

import argparse
import json
import os
import resource
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from procs import run_ns  # noqa: E402

TCP_INFO_LEN = 160
FILES = {"/file200k.bin": "200 KB", "/file1m.bin": "1 MB"}


def tcp_counts(sock):
    """(segments sent, data segments received) of the client's socket:
    struct tcp_info's tcpi_segs_out at offset 136, tcpi_data_segs_in at 152."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    return struct.unpack_from("I", raw, 136)[0], struct.unpack_from("I", raw, 152)[0]


def fetch(sock, request, buf):
    """Send request and read one response whose head fits in buf."""
    sock.sendall(request)
    view = memoryview(buf)
    have = 0
    while b"\r\n\r\n" not in buf[:have]:
        n = sock.recv_into(view[have:], 8192)
        assert n, "the server closed the connection"
        have += n
    head, _, rest = bytes(buf[:have]).partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    left = length - len(rest)
    while left > 0:
        n = sock.recv_into(view, 8192)
        assert n, "the server closed the connection"
        left -= n


def one_round(port, path, n, pids):
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    buf = bytearray(65536)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fetch(sock, request, buf)  # the connection's first response is not counted
    out0, data0 = tcp_counts(sock)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    ns0 = run_ns(pids)
    for _ in range(n):
        fetch(sock, request, buf)
    ns1 = run_ns(pids)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    out1, data1 = tcp_counts(sock)
    sock.close()
    client = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {"data_segments": (data1 - data0) / n, "client_segments": (out1 - out0) / n,
            "server_cpu_us": (ns1 - ns0) / 1e3 / n, "client_cpu_us": client * 1e6 / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="monkey,nginx,lighttpd",
                    help="names; monkey-LABEL=PATH runs that Monkey binary as one more server")
    ap.add_argument("--paths", default=",".join(FILES))
    ap.add_argument("-n", type=int, default=300, help="requests per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--monkey-binary")
    ap.add_argument("--out", help="write OUT.json and OUT.md")
    a = ap.parse_args()
    if a.monkey_binary:
        bench.MONKEY_BINARY = os.path.abspath(a.monkey_binary)
    servers, paths = a.servers.split(","), a.paths.split(",")
    names = [spec.partition("=")[0] for spec in servers]
    d = tempfile.mkdtemp(prefix="mk-segments-")
    docroot = bench.make_docroot(d)
    started = {}
    try:
        for i, spec in enumerate(servers):
            port = bench.free_port(24100 + 10 * i)
            # monkey-LABEL=PATH: another Monkey binary, side by side
            name, _, binary = spec.partition("=")
            if binary:
                bench.MONKEY_BINARY = os.path.abspath(binary)
            kind = "monkey" if name.startswith("monkey") else name
            argv = bench.server_argv(kind, os.path.join(d, str(i)), docroot, port, 1, single=True)
            started[name] = bench.Server(name, argv, port, d, "%d.log" % i)
        rows = {(s, p): [] for s in names for p in paths}
        for _ in range(a.rounds):  # servers and files alternate within a round
            for path in paths:
                for name, srv in started.items():
                    rows[name, path].append(one_round(srv.port, path, a.n, srv.tree()))
    finally:
        for srv in started.values():
            srv.stop()
    results = []
    for (name, path), rs in rows.items():
        cell = {"server": name, "path": path, "requests": a.n, "rounds": a.rounds}
        for k in rs[0]:
            vals = [r[k] for r in rs]
            cell[k] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
        results.append(cell)
    lines = ["| file | server | data segments ↓ | client segments ↓ | server CPU µs min / median ↓ "
             "| client CPU µs min / median |", "|---|---|---|---|---|---|"]
    for c in results:
        lines.append("| %s | %s | %.2f | %.2f | %.1f / %.1f | %.1f / %.1f |" % (
            FILES.get(c["path"], c["path"]), c["server"], c["data_segments"]["median"],
            c["client_segments"]["median"], c["server_cpu_us"]["min"],
            c["server_cpu_us"]["median"], c["client_cpu_us"]["min"], c["client_cpu_us"]["median"]))
    print("\n".join(lines))
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                       "load_average": os.getloadavg(), "results": results}, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write("`bench/segments.py`, servers %s, %s, load average %.2f at the end: one "
                    "keep-alive client, %d requests a round, %d rounds, one worker per server. "
                    "Segments: medians per response, from the client socket's TCP_INFO.\n\n"
                    % (", ".join(names), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       os.getloadavg()[0], a.n, a.rounds))
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
