"""A WebSocket upstream for the proxy's tunnel tests (test_proxy_websocket.py),
Python's websockets library, started as a process on a port and stopped by
its PID.

    ws_upstream.py PORT [--raw101] [--tls CERT KEY]

Paths (after a first segment the proxy's route keeps, /ws): /echo (every message back, text as text, binary as binary, no size
limit), /close (a close frame 4001 "bye" right after the handshake),
/flood?n=N&size=BYTES (N binary messages of BYTES each, as fast as the
connection takes them, then a close frame 1000), /status/CODE (that status
and the body "plain CODE" instead of the switch). --raw101 is not
websockets: every request, upgrade or not, gets a 101 with Upgrade:
websocket, followed in the same write by the bytes "early-bytes", then
what the client sends is echoed back raw (a request for .../sink: never
read again, the connection kept). --tls serves the WebSocket paths over
TLS with that certificate.
"""

import asyncio
import sys
import urllib.parse

PORT = int(sys.argv[1])


def route_path(target):
    """The path without the route's prefix: /ws/echo is /echo."""
    path = urllib.parse.urlsplit(target).path
    return path[3:] if path.startswith("/ws/") else path


async def raw101():
    async def client(reader, writer):
        head = b""
        while b"\r\n\r\n" not in head:
            got = await reader.read(65536)
            if not got:
                writer.close()
                return
            head += got
        rest = head.split(b"\r\n\r\n", 1)[1]
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: upgrade\r\nX-Up: raw\r\n\r\nearly-bytes")
        if b"/sink" in head.split(b"\r\n", 1)[0]:
            await asyncio.sleep(3600)
        if rest:
            writer.write(rest)
        while True:
            got = await reader.read(65536)
            if not got:
                break
            writer.write(got)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(client, "127.0.0.1", PORT)
    async with server:
        await server.serve_forever()


async def websocket():
    from websockets.asyncio.server import serve
    from websockets.datastructures import Headers
    from websockets.http11 import Response

    def process_request(conn, request):
        path = route_path(request.path)
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            body = f"plain {code}".encode()
            return Response(code, "X", Headers([("Content-Type", "text/plain"),
                                                ("Content-Length", str(len(body)))]), body)
        return None

    async def handler(ws):
        url = urllib.parse.urlsplit(ws.request.path)
        path = route_path(ws.request.path)
        if path == "/close":
            await ws.close(4001, "bye")
            return
        if path == "/flood":
            q = urllib.parse.parse_qs(url.query)
            n, size = int(q["n"][0]), int(q["size"][0])
            block = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            for _ in range(n):
                await ws.send(block)
            await ws.close(1000, "done")
            return
        async for msg in ws:
            await ws.send(msg)

    tls = None
    if "--tls" in sys.argv:
        import ssl
        i = sys.argv.index("--tls")
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[i + 1], sys.argv[i + 2])
    async with serve(handler, "127.0.0.1", PORT, process_request=process_request,
                     max_size=None, ping_interval=None, close_timeout=10,
                     compression=None, ssl=tls):
        await asyncio.get_running_loop().create_future()


asyncio.run(raw101() if "--raw101" in sys.argv[2:] else websocket())
