#!/usr/bin/env python3
"""The WebSocket benchmark: the Duda websocket/broadcaster packages against node's ws.

    python3 bench/websocket.py [--seconds 10] [--conns 64] [--clients 1000]
                               [--fanouts 200] [--idle 5000] [--workers 2]

Two targets, the same endpoints, the same client program (this file):
  monkey  build/bin/monkey with the test service tests/duda/wstest and the
          packages of build/duda-packages (/wstest/echo, /wstest/room)
  node    bench/node/ws.js: a cluster of --workers processes with the `ws`
          package (tools/deps.sh bench installs it with npm)

Three measures for each:
  echo     --conns connections, each sending a 32-byte text message and
           waiting for its echo, for --seconds: round trips per second, and
           the server's CPU time per round trip (user + system time of its
           processes over the run, divided by the round trips)
  fan-out  --clients connections in the room; one of them sends a message
           and every client must receive it before the next of --fanouts
           messages: deliveries per second, the median time of one fan-out,
           and the server's CPU time per delivery
  memory   --idle open idle connections on /wstest/echo (measured first, on
           the fresh server): the growth of the server's resident memory
           divided by their number

The client is Python with raw sockets (selectors, one thread): it masks
with a zero key and parses frames with a few slices, so it is cheap, but on
a small machine it may still be the bottleneck of the per-second figures;
the CPU time per operation of the server does not depend on that. Python 3
standard library only. Prints a Markdown report.
"""

import argparse
import base64
import os
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from duda import BUILD, HERE, ROOT, Target, cpu_seconds, free_port, rss_kb, tree, wait_port  # noqa

MSG = b"x" * 32


def frame(payload, opcode=1):
    """A client frame masked with a zero key (the payload stays as it is)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    return head + b"\0\0\0\0" + payload


def parse(buf):
    """Take the complete server frames off buf: their payloads."""
    out, i, n = [], 0, len(buf)
    while n - i >= 2:
        ln, h = buf[i + 1] & 0x7f, 2
        if ln == 126:
            if n - i < 4:
                break
            ln, h = int.from_bytes(buf[i + 2:i + 4], "big"), 4
        elif ln == 127:
            if n - i < 10:
                break
            ln, h = int.from_bytes(buf[i + 2:i + 10], "big"), 10
        if n - i < h + ln:
            break
        out.append(bytes(buf[i + h:i + h + ln]))
        i += h + ln
    del buf[:i]
    return out


def ws_open(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError(f"handshake on {path}: closed")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"handshake on {path}: {head[:40]!r}")
    buf = bytearray(head.split(b"\r\n\r\n", 1)[1])
    s.setblocking(False)
    return s, buf


def echo(port, conns, seconds):
    sel = selectors.DefaultSelector()
    for _ in range(conns):
        s, buf = ws_open(port, "/wstest/echo")
        sel.register(s, selectors.EVENT_READ, buf)
        s.send(frame(MSG))
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(1):
            buf = key.data
            buf += key.fileobj.recv(65536)
            got = parse(buf)
            done += len(got)
            if got:
                key.fileobj.send(frame(MSG) * len(got))
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return done


def fanout(port, clients, count):
    sel = selectors.DefaultSelector()
    conns = []
    for _ in range(clients):
        s, buf = ws_open(port, "/wstest/room")
        sel.register(s, selectors.EVENT_READ, buf)
        conns.append(s)
    time.sleep(0.5)  # every connection has joined
    sender = conns[0]
    times = []
    for m in range(count):
        payload = f"m{m:06d}".encode() + MSG
        left = clients
        t0 = time.monotonic()
        sender.setblocking(True)
        sender.sendall(frame(payload))
        sender.setblocking(False)
        while left:
            for key, _ in sel.select(5):
                buf = key.data
                buf += key.fileobj.recv(65536)
                for got in parse(buf):
                    if got != payload:
                        raise RuntimeError(f"fan-out: {got[:20]!r} where {payload[:20]!r}")
                    left -= 1
        times.append(time.monotonic() - t0)
    for s in conns:
        s.close()
    return times


def memory(target, port, n):
    pids = tree(target.proc.pid)
    before = rss_kb(pids)
    conns = [ws_open(port, "/wstest/echo")[0] for _ in range(n)]
    time.sleep(0.5)
    after = rss_kb(tree(target.proc.pid))
    for s in conns:
        s.close()
    return (after - before) * 1024 / n


def monkey_conf(tmp, port, workers, services):
    conf = os.path.join(tmp, "conf")
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    docroot = os.path.join(tmp, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers {workers}\n"
                "    KeepAliveTimeout 60\n    MaxConnections 20000\n    Backlog 4096\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(f"[HOST]\n    ServerName localhost\n    DocumentRoot {docroot}\n\n"
                "[WEB_SERVICE]\n    Name wstest\n")
    with open(os.path.join(conf, "plugins.load"), "w") as f:
        f.write(f"[PLUGINS]\n    Load {os.path.join(BUILD, 'plugins', 'monkey-duda.so')}\n")
    with open(os.path.join(conf, "plugins", "duda.conf"), "w") as f:
        f.write(f"[DUDA]\n    ServicesRoot {services}\n"
                f"    PackagesRoot {os.path.join(BUILD, 'duda-packages')}\n")
    return conf


def run_target(name, cmd, port, args, tmp):
    t = Target(name, cmd, "/", tmp)
    try:
        if not wait_port(port):
            raise RuntimeError(f"{name} did not start (see {tmp}/{name}.log)")
        mem = memory(t, port, args.idle)  # first: before other runs grow the heap
        pids = tree(t.proc.pid)
        c0 = cpu_seconds(pids)
        trips = echo(port, args.conns, args.seconds)
        echo_cpu = cpu_seconds(tree(t.proc.pid)) - c0
        c0 = cpu_seconds(tree(t.proc.pid))
        t0 = time.monotonic()
        times = fanout(port, args.clients, args.fanouts)
        wall = time.monotonic() - t0
        fan_cpu = cpu_seconds(tree(t.proc.pid)) - c0
        deliveries = args.clients * args.fanouts
        return {
            "echo_rps": trips / args.seconds,
            "echo_cpu_us": echo_cpu / trips * 1e6 if trips else None,
            "fan_per_s": deliveries / wall,
            "fan_median_ms": statistics.median(times) * 1e3,
            "fan_cpu_us": fan_cpu / deliveries * 1e6,
            "mem_per_conn": mem,
        }
    finally:
        t.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--fanouts", type=int, default=200)
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=("monkey", "node"))
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    tmp = tempfile.mkdtemp(prefix="ws-bench-")
    services = os.path.join(tmp, "services")
    subprocess.run([os.path.join(BUILD, "bin", "duda"), "build",
                    os.path.join(ROOT, "tests", "duda", "wstest"), "-o", services],
                   check=True, stdout=subprocess.DEVNULL)
    results = {}
    names = [args.only] if args.only else ["monkey", "node"]
    for name in names:
        port = free_port()
        if name == "node":
            if not shutil.which("node") or not os.path.isdir(
                    os.path.join(HERE, "node", "node_modules", "ws")):
                print("node or its ws package is missing (tools/deps.sh bench): node left out",
                      file=sys.stderr)
                continue
            cmd = ["node", os.path.join(HERE, "node", "ws.js"), str(port), str(args.workers)]
        else:
            conf = monkey_conf(os.path.join(tmp, "monkey"), port, args.workers, services)
            cmd = [os.path.join(BUILD, "bin", "monkey"), "-c", conf]
        results[name] = run_target(name, cmd, port, args, tmp)

    print(f"## WebSocket: {args.workers} workers; echo {args.conns} connections x "
          f"{args.seconds} s; fan-out {args.fanouts} messages to {args.clients} clients; "
          f"memory over {args.idle} idle connections\n")
    print("| server | echo round trips/s | CPU µs/round trip | fan-out deliveries/s "
          "| fan-out median ms | CPU µs/delivery | memory/connection |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['echo_rps']:.0f} | {r['echo_cpu_us']:.1f} | {r['fan_per_s']:.0f} "
              f"| {r['fan_median_ms']:.2f} | {r['fan_cpu_us']:.2f} "
              f"| {r['mem_per_conn'] / 1024:.1f} KiB |")
    if "monkey" in results and "node" in results:
        m, n = results["monkey"], results["node"]
        print(f"\nmonkey/node: echo {m['echo_rps'] / n['echo_rps']:.2f}x round trips/s, "
              f"{m['echo_cpu_us'] / n['echo_cpu_us']:.2f}x CPU per round trip; fan-out "
              f"{m['fan_per_s'] / n['fan_per_s']:.2f}x deliveries/s, "
              f"{m['fan_cpu_us'] / n['fan_cpu_us']:.2f}x CPU per delivery; memory per "
              f"connection {m['mem_per_conn'] / n['mem_per_conn']:.2f}x")


if __name__ == "__main__":
    main()
