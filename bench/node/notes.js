// The node.js peer of examples/json_api for bench/duda_packages.py: GET one
// note of a SQLite database as JSON.
//
//   node bench/node/notes.js PORT WORKERS DBFILE [HOST]
//
// http + better-sqlite3 (bench/node/package.json, installed by
// tools/deps.sh bench). Like hello.js, a cluster of WORKERS processes
// sharing the listening socket. Each worker opens DBFILE (WAL, made and
// filled by the harness with the same notes table the json_api example
// has) and answers GET /json_api/notes/:id with the row as a JSON object
// (the columns the example gives, in its order) or 404 {"error":"not
// found"}. better-sqlite3 is synchronous: the query runs on the event
// loop, which is how it is used (and why it is fast for point reads).
'use strict';

const cluster = require('cluster');
const http = require('http');
const path = require('path');

const port = parseInt(process.argv[2] || '8080', 10);
const workers = parseInt(process.argv[3] || '2', 10);
const dbfile = process.argv[4];
const host = process.argv[5] || '127.0.0.1';

if (cluster.isPrimary && workers > 0) {
    for (let i = 0; i < workers; i++) cluster.fork();
    const stop = () => {
        for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
        setTimeout(() => process.exit(0), 200);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
} else {
    const Database = require(path.join(__dirname, 'node_modules', 'better-sqlite3'));
    const db = new Database(dbfile);
    db.pragma('journal_mode = WAL');
    const one = db.prepare('SELECT id, title, body, created, updated FROM notes WHERE id = ?');
    const route = /^\/json_api\/notes\/(\d+)$/;
    const send = (res, status, doc) => {
        const body = Buffer.from(JSON.stringify(doc) + '\n');
        res.writeHead(status, {'Content-Type': 'application/json', 'Content-Length': body.length});
        res.end(body);
    };
    const server = http.createServer((req, res) => {
        const m = req.method === 'GET' && route.exec(req.url);
        if (!m) return send(res, 404, {error: 'not found'});
        const row = one.get(parseInt(m[1], 10));
        if (!row) return send(res, 404, {error: 'not found'});
        send(res, 200, row);
    });
    server.keepAliveTimeout = 60000;
    server.headersTimeout = 65000;
    server.requestTimeout = 0;
    server.maxRequestsPerSocket = 0;
    server.listen({port, host, backlog: 4096});
    process.on('SIGTERM', () => process.exit(0));
}
