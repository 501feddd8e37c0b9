// The WebSocket peer of bench/websocket.py: node.js with the `ws` package
// (npm; tools/deps.sh bench installs it into bench/node/node_modules).
//
//   node bench/node/ws.js PORT [WORKERS]
//
// Like bench/node/hello.js it runs a cluster of WORKERS (default 2)
// processes sharing the listening socket, to meet servers running two
// workers. The same two endpoints as the Monkey side (tests/duda/wstest):
//   /wstest/echo   every message is sent back
//   /wstest/room   every message goes to every connection of the room, on
//                  every worker: a worker sends it to the primary, which
//                  hands it to each worker (the usual way to broadcast
//                  across a node cluster), and each writes its own clients.
// permessage-deflate is off, as on the Monkey side.
'use strict';

const cluster = require('cluster');
const http = require('http');
const path = require('path');
const { WebSocketServer } = require(path.join(__dirname, 'node_modules', 'ws'));

const port = parseInt(process.argv[2] || '8080', 10);
const workers = parseInt(process.argv[3] || '2', 10);

if (cluster.isPrimary) {
  const children = [];
  for (let i = 0; i < workers; i++) {
    const w = cluster.fork();
    w.on('message', (m) => { for (const c of children) c.send(m); });
    children.push(w);
  }
  const stop = () => { for (const c of children) c.kill(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  const server = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  const echo = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const room = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  echo.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  room.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      process.send({ b: isBinary, d: isBinary ? data.toString('base64') : data.toString() });
    });
  });
  process.on('message', (m) => {
    const payload = m.b ? Buffer.from(m.d, 'base64') : m.d;
    for (const c of room.clients) c.send(payload, { binary: m.b });
  });
  server.on('upgrade', (req, socket, head) => {
    const wss = req.url === '/wstest/echo' ? echo : req.url === '/wstest/room' ? room : null;
    if (!wss) { socket.destroy(); return; }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  server.listen(port, '127.0.0.1');
}
