#!/usr/bin/env python3
"""The WebSocket benchmark: the Duda websocket/broadcaster packages against node's ws.

    python3 bench/websocket.py [--seconds 10] [--conns 64] [--clients 1000]
                               [--fanouts 200] [--idle 5000] [--workers 2] [--warmup 3]
                               [--client c|python] [--only monkey|node] [--quick]
                               [--pin [--server-cpus LIST] [--client-cpus LIST]]

Two targets, the same endpoints, the same client program:
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

After the memory, and before the measures, an unmeasured echo run of
--warmup seconds and a fan-out of 10 messages warm the server up (node's JIT
compiler would otherwise count its start against node). The rates and the
server's CPU time cover the measured phase only: the
connections are opened (and upgraded) first, then the server's CPU time is
sampled, then the messages flow. Every echo and every delivery is checked
against the message sent; one that differs is counted as an error.

The client (--client): `c` (the default when built) is build/bin/mk-wsload
(bench/wsload.c, built with the tests): C, epoll, one thread, masked frames
with a fresh key each. `python` is the client of this file: selectors, one
thread, frames masked with a zero key; on a small machine it bounds the
per-second figures. Both report how busy the server and the client were
(CPU time over wall time, in CPUs): the side that used all of its CPUs
bounded the run. --pin and its lists place them as bench/duda.py does (the
server's whole tree under `taskset -c SERVER`, the client under `taskset -c
CLIENT`). --quick (2 s of echo, 20 fan-outs, 500 idle connections, 1 s of
warm-up) only checks that it runs. Python 3 standard library only. Prints a
Markdown report.
"""

import argparse
import base64
import json
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
from duda import (BUILD, HERE, ROOT, CpuMeter, Placement, Target, add_pin_args, cpu_of,  # noqa
                  free_port, rss_kb, self_cpu, tree, wait_port)

WSLOAD = os.path.join(BUILD, "bin", "mk-wsload")
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


class PythonClient:
    """The client of this file: open() upgrades the connections, echo() or
    fanout() sends the messages (the measured phase), close() closes them."""

    def __init__(self, port, placement):
        self.port = port

    def open(self, path, n):
        self.sel = selectors.DefaultSelector()
        self.conns = []
        for _ in range(n):
            s, buf = ws_open(self.port, path)
            self.sel.register(s, selectors.EVENT_READ, buf)
            self.conns.append(s)

    def cpu(self):
        return self_cpu()

    def echo(self, seconds):
        """(round trips, errors, seconds) of one outstanding MSG per connection."""
        for s in self.conns:
            s.send(frame(MSG))
        done = errors = 0
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            for key, _ in self.sel.select(1):
                buf = key.data
                buf += key.fileobj.recv(65536)
                got = parse(buf)
                for g in got:
                    if g == MSG:
                        done += 1
                    else:
                        errors += 1
                if got:
                    key.fileobj.send(frame(MSG) * len(got))
        return done, errors, time.monotonic() - t0

    def fanout(self, count):
        """(deliveries, errors, seconds, the time of each fan-out)."""
        sender, clients = self.conns[0], len(self.conns)
        times, done, errors = [], 0, 0
        t0 = time.monotonic()
        for m in range(count):
            payload = f"m{m:06d}".encode() + MSG
            left = clients
            f0 = time.monotonic()
            sender.setblocking(True)
            sender.sendall(frame(payload))
            sender.setblocking(False)
            while left:
                ready = self.sel.select(10)
                if not ready:
                    raise RuntimeError(f"fan-out {m}: {left} deliveries missing after 10 s")
                for key, _ in ready:
                    buf = key.data
                    buf += key.fileobj.recv(65536)
                    for got in parse(buf):
                        if got == payload:
                            done += 1
                            left -= 1
                        else:
                            errors += 1
            times.append(time.monotonic() - f0)
        return done, errors, time.monotonic() - t0, times

    def close(self):
        for s in self.conns:
            s.close()


class CClient:
    """build/bin/mk-wsload, one process per measure: it opens the
    connections and prints "open"; run() tells it to go and reads its JSON
    result, while it still holds the connections; close() lets it close
    them and exit."""

    def __init__(self, port, placement):
        self.port, self.placement = port, placement

    def open(self, path, n, mode, extra):
        cmd = self.placement.client_cmd(
            [WSLOAD, "-p", str(self.port), "-u", path, "-m", mode, "-c", str(n), "-w"] + extra)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "open":
            self.proc.wait()
            raise RuntimeError(f"mk-wsload did not open its connections (exit "
                               f"{self.proc.returncode})")

    def cpu(self):
        return cpu_of(self.proc.pid) or 0.0

    def run(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"mk-wsload ended without a result (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)

    def echo(self, seconds):
        r = self.run()
        return r["round_trips"], r["errors"], r["seconds"]

    def fanout(self, count):
        r = self.run()
        return r["deliveries"], r["errors"], r["seconds"], [r["median_ms"] / 1e3]


def measured(target, client, what, *args):
    """Run client.what(*args) between two samples of the server's CPU time
    and the client's: (its result, server CPU seconds, client CPU seconds)."""
    meter = CpuMeter(target.proc.pid)
    c0 = client.cpu()
    result = getattr(client, what)(*args)
    client_cpu = client.cpu() - c0
    server_cpu, _, _ = meter.stop()
    target.placement.verify(target.proc.pid)
    return result, server_cpu, client_cpu


def echo(target, port, args, placement, seconds):
    if args.client == "c":
        client = CClient(port, placement)
        client.open("/wstest/echo", args.conns, "echo", ["-d", str(seconds)])
    else:
        client = PythonClient(port, placement)
        client.open("/wstest/echo", args.conns)
    try:
        (trips, errors, wall), server, own = measured(target, client, "echo", seconds)
    finally:
        client.close()
    return {"echo_rps": trips / wall, "echo_cpu_us": server / trips * 1e6 if trips else None,
            "echo_errors": errors, "echo_server_load": server / wall,
            "echo_client_load": own / wall}


def fanout(target, port, args, placement, fanouts):
    if args.client == "c":
        client = CClient(port, placement)
        client.open("/wstest/room", args.clients, "fanout", ["-n", str(fanouts)])
    else:
        client = PythonClient(port, placement)
        client.open("/wstest/room", args.clients)
    if args.client == "python":
        time.sleep(0.5)  # every connection has joined the room (mk-wsload waits as long)
    try:
        (done, errors, wall, times), server, own = measured(target, client, "fanout", fanouts)
    finally:
        client.close()
    return {"fan_per_s": done / wall, "fan_median_ms": statistics.median(times) * 1e3,
            "fan_cpu_us": server / done * 1e6 if done else None, "fan_errors": errors,
            "fan_server_load": server / wall, "fan_client_load": own / wall}


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


def run_target(name, cmd, port, args, tmp, placement):
    t = Target(name, cmd, "/", tmp, placement)
    try:
        if not wait_port(port):
            raise RuntimeError(f"{name} did not start (see {tmp}/{name}.log)")
        t.settle()
        result = {"mem_per_conn": memory(t, port, args.idle)}  # first: on the fresh heap
        if args.warmup:
            echo(t, port, args, placement, args.warmup)
            fanout(t, port, args, placement, 10)
        result.update(echo(t, port, args, placement, args.seconds))
        result.update(fanout(t, port, args, placement, args.fanouts))
        return result
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
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", choices=("monkey", "node"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--client", choices=("c", "python"),
                    help="the load client (default: c when build/bin/mk-wsload is built)")
    add_pin_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.fanouts, args.idle, args.warmup = 2, 20, 500, 1
    placement = Placement(args)
    if args.client is None:
        args.client = "c" if os.access(WSLOAD, os.X_OK) else "python"
        if args.client == "python":
            print(f"{WSLOAD} is not built (it is built with the tests): the Python client "
                  "is used", file=sys.stderr)
    elif args.client == "c" and not os.access(WSLOAD, os.X_OK):
        sys.exit(f"websocket.py: {WSLOAD} is not built (make, with the tests)")
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
        results[name] = run_target(name, cmd, port, args, tmp, placement)
    shutil.rmtree(tmp, ignore_errors=True)

    client = ("the C client build/bin/mk-wsload (bench/wsload.c)" if args.client == "c"
              else "the Python client of bench/websocket.py")
    print(f"## WebSocket: {args.workers} workers; echo {args.conns} connections x "
          f"{args.seconds} s after {args.warmup} s of warm-up; fan-out {args.fanouts} messages to {args.clients} clients; "
          f"memory over {args.idle} idle connections\n")
    print(f"Client: {client}; {placement.describe()}. Server and client load: CPU time over "
          f"wall time of the measured phase, in CPUs (the server has {placement.server_cpus()}, "
          f"the client {placement.client_cpus()}).\n")
    print("| server | echo round trips/s | CPU µs/round trip | errors | server load "
          "| client load | memory/connection |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['echo_rps']:.0f} | {r['echo_cpu_us']:.1f} | {r['echo_errors']} "
              f"| {r['echo_server_load']:.2f} | {r['echo_client_load']:.2f} "
              f"| {r['mem_per_conn'] / 1024:.1f} KiB |")
    print("\n| server | fan-out deliveries/s | fan-out median ms | CPU µs/delivery | errors "
          "| server load | client load |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['fan_per_s']:.0f} | {r['fan_median_ms']:.2f} "
              f"| {r['fan_cpu_us']:.2f} | {r['fan_errors']} | {r['fan_server_load']:.2f} "
              f"| {r['fan_client_load']:.2f} |")
    if "monkey" in results and "node" in results:
        m, n = results["monkey"], results["node"]
        print(f"\nmonkey/node: echo {m['echo_rps'] / n['echo_rps']:.2f}x round trips/s "
              f"(bar: >= 3x), {m['echo_cpu_us'] / n['echo_cpu_us']:.2f}x CPU per round trip; "
              f"fan-out {m['fan_per_s'] / n['fan_per_s']:.2f}x deliveries/s (bar: >= 3x), "
              f"{m['fan_cpu_us'] / n['fan_cpu_us']:.2f}x CPU per delivery; memory per "
              f"connection {m['mem_per_conn'] / n['mem_per_conn']:.2f}x (bar: < 1x)")


if __name__ == "__main__":
    main()
