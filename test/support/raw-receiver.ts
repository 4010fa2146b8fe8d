/**
 * @module A raw-socket HTTP/1.1 receiver: each request's path names a
 * behaviour that writes exactly the bytes a test wants (lengths, chunking,
 * stalls, resets), so every answer class of a control is real bytes on a
 * real socket.
 */
import { once } from 'node:events';
import * as net from 'node:net';

/** Writes the raw answer to one request on its socket. */
export type RawBehaviour = (socket: net.Socket) => void;

/** A request the raw receiver saw (its request line and body). */
export interface RawRequest {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** A running raw receiver. */
export interface RawReceiver {
  readonly url: string;
  readonly requests: RawRequest[];
  /** Resolves when a socket that carried a request to `path` closes. */
  socketClosed(path: string): Promise<void>;
  /** Resolves when a request to `path` has arrived. */
  requested(path: string): Promise<void>;
  close(): Promise<void>;
}

/** Returns a raw HTTP/1.1 response with a body and a correct Content-Length. */
export function httpResponse(
  status: number,
  body: string | Buffer = '',
  headers: Record<string, string> = {},
): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const lines = [`HTTP/1.1 ${status} X`, `content-length: ${bytes.length}`, 'connection: close'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes]);
}

/** Behaviour: answer with a status and body, then close. */
export function answer(
  status: number,
  body: string | Buffer = '',
  headers: Record<string, string> = {},
): RawBehaviour {
  return (socket) => socket.end(httpResponse(status, body, headers));
}

/** Behaviour: a JSON 200 answer. */
export function json(value: unknown): RawBehaviour {
  return answer(200, JSON.stringify(value), { 'content-type': 'application/json' });
}

/** Starts a raw receiver whose behaviours are looked up by request path. */
export async function startRawReceiver(
  behaviours: Record<string, RawBehaviour>,
): Promise<RawReceiver> {
  const requests: RawRequest[] = [];
  const closed = new Map<string, Promise<void>>();
  const arrivals = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  const arrival = (path: string) => {
    let a = arrivals.get(path);
    if (a === undefined) {
      let resolve = () => {};
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      a = { promise, resolve };
      arrivals.set(path, a);
    }
    return a;
  };
  const server = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let handled = false;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      if (handled) return;
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buffered.length < end + 4 + length) return;
      handled = true;
      const path = head[0]?.split(' ')[1] ?? '';
      requests.push({
        path,
        headers,
        body: buffered.subarray(end + 4, end + 4 + length).toString('utf8'),
      });
      // Not events.once: it would reject when the socket errors first (a reset).
      closed.set(path, new Promise<void>((resolve) => socket.once('close', () => resolve())));
      arrival(path).resolve();
      const behaviour = behaviours[path];
      if (behaviour === undefined) socket.end(httpResponse(404));
      else behaviour(socket);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    socketClosed: (path) => closed.get(path) ?? Promise.reject(new Error(`no request to ${path}`)),
    requested: (path) => arrival(path).promise,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
