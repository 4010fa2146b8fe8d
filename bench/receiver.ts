/**
 * @module The webhook receiver of the bench, run as its own child process: a
 * `node:http` server on 127.0.0.1 (port 0), as test/support/receiver.ts is,
 * that reads and parses each JSON body and answers `/allow` with
 * `{"decision":"allow"}` (controls) and `/notify` with 204
 * (notifications). `GET /stats` answers the request count and the size of
 * the last body per path, and `GET /last?path=/allow` the last body itself,
 * which is how the undici baseline learns the sidecar's payload (and posts
 * the very same bytes). Prints `{"port": N}` once listening; stops on SIGTERM.
 *
 * Usage: `node dist/bench/receiver.js`
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/** The body of an allowing control answer. */
const ALLOW_BODY = JSON.stringify({ decision: 'allow' });

/** Per path: requests received and the byte size of the last body. */
const stats: Record<string, { count: number; lastBodyBytes: number; invalidJson: number }> = {};
/** Per path: the last body received. */
const lastBodies = new Map<string, Buffer>();

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const path = req.url ?? '';
    if (req.method === 'GET' && path === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(stats));
      return;
    }
    if (req.method === 'GET' && path.startsWith('/last?')) {
      const wanted = new URLSearchParams(path.slice('/last?'.length)).get('path') ?? '';
      const body = lastBodies.get(wanted);
      res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' });
      res.end(body ?? '');
      return;
    }
    const body = Buffer.concat(chunks);
    lastBodies.set(path, body);
    const entry = stats[path] ?? { count: 0, lastBodyBytes: 0, invalidJson: 0 };
    stats[path] = entry;
    entry.count += 1;
    entry.lastBodyBytes = body.length;
    try {
      JSON.parse(body.toString('utf8'));
    } catch {
      entry.invalidJson += 1;
    }
    if (path === '/allow') {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(ALLOW_BODY),
      });
      res.end(ALLOW_BODY);
      return;
    }
    res.writeHead(204);
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close();
  process.exit(0);
});
