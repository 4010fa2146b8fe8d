/**
 * @module The webhook receiver of the bench, run as its own child process:
 * the tests' receiver (`test/support/receiver.ts`, a `node:http` server on
 * 127.0.0.1 port 0 that reads and parses each JSON body), without keeping
 * the requests. It answers `/allow` with `{"decision":"allow"}` (controls)
 * and `/notify` with 204 (notifications). `GET /stats` answers the request
 * count and the size of the last body per path, and `GET /last?path=/allow`
 * the last body itself, which is how the undici baseline learns the
 * sidecar's payload (and posts the very same bytes). Prints `{"port": N}`
 * once listening; stops on SIGTERM.
 *
 * Usage: `node dist/bench/receiver.js`
 */
import type { ServerResponse } from 'node:http';
import { type ReceivedRequest, startReceiver } from '../test/support/receiver.js';
import { ALLOW_PATH, MODIFY_PATH } from './lib/messages.js';

/** The body of an allowing control answer. */
const ALLOW_BODY = JSON.stringify({ decision: 'allow' });
/** Prefix of the request for the last body of a path. */
const LAST_PREFIX = '/last?';

/** Per path: requests received, the byte size of the last body, and bodies that were not JSON. */
const stats: Record<string, { count: number; lastBodyBytes: number; invalidJson: number }> = {};
/** Per path: the last body received. */
const lastBodies = new Map<string, Buffer>();

function sendJson(res: ServerResponse, status: number, body: string | Buffer): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function answer(req: ReceivedRequest, res: ServerResponse): void {
  if (req.method === 'GET' && req.path === '/stats') {
    sendJson(res, 200, JSON.stringify(stats));
    return;
  }
  if (req.method === 'GET' && req.path.startsWith(LAST_PREFIX)) {
    const wanted = new URLSearchParams(req.path.slice(LAST_PREFIX.length)).get('path') ?? '';
    const body = lastBodies.get(wanted);
    sendJson(res, body === undefined ? 404 : 200, body ?? '');
    return;
  }
  lastBodies.set(req.path, req.raw);
  const entry = stats[req.path] ?? { count: 0, lastBodyBytes: 0, invalidJson: 0 };
  stats[req.path] = entry;
  entry.count += 1;
  entry.lastBodyBytes = req.raw.length;
  if (req.json === undefined) entry.invalidJson += 1;
  if (req.path === ALLOW_PATH) {
    sendJson(res, 200, ALLOW_BODY);
    return;
  }
  if (req.path === MODIFY_PATH) {
    sendJson(res, 200, '{}');
    return;
  }
  res.writeHead(204);
  res.end();
}

const receiver = await startReceiver({ answer, record: false });
process.stdout.write(`${JSON.stringify({ port: Number(new URL(receiver.url).port) })}\n`);
process.once('SIGTERM', () => {
  void receiver.close().finally(() => process.exit(0));
});
