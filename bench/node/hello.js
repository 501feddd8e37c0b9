// The seeds' node.js comparison: a hello-world HTTP server.
//
//   node bench/node/hello.js PORT [WORKERS] [HOST]
//
// For a fair fight against servers running two workers, it runs a cluster:
// the primary process forks WORKERS (default 2) workers that share the
// listening socket (Node's default round-robin scheduling on Linux: the
// primary accepts and hands each connection to a worker). Every response is
// the same 13 bytes the other servers send from hello.txt. Keep-alive idle
// timeout 60 s and no per-connection request limit, as configured for the
// other servers by bench/bench.py. SIGTERM or SIGINT stops the workers, then
// the primary.
'use strict';

const cluster = require('cluster');
const http = require('http');

const port = parseInt(process.argv[2] || '8080', 10);
const workers = parseInt(process.argv[3] || '2', 10);
const host = process.argv[4] || '127.0.0.1';
const body = Buffer.from('Hello World!\n');

if (cluster.isPrimary && workers > 0) {
    for (let i = 0; i < workers; i++) cluster.fork();
    const stop = () => {
        for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
        setTimeout(() => process.exit(0), 200);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
} else {
    const server = http.createServer((req, res) => {
        res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': body.length});
        res.end(body);
    });
    server.keepAliveTimeout = 60000;
    server.headersTimeout = 65000;
    server.requestTimeout = 0;
    server.maxRequestsPerSocket = 0;
    server.listen({port, host, backlog: 4096});
    process.on('SIGTERM', () => process.exit(0));
}
