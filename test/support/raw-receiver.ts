/**
 * @module A raw-socket HTTP/1.1 receiver on 127.0.0.1, port 0, for the
 * answers `node:http` will not write: wrong lengths, chunking, stalled or
 * endless bodies, resets mid-body. It parses requests (Content-Length
 * framing, several per connection) and hands each to a behaviour that writes
 * exactly the bytes a test wants. Well-formed answers belong to the HTTP
 * receiver in `receiver.ts`.
 */
import { once } from 'node:events';
import * as net from 'node:net';

/** Address the receiver listens on. */
const HOST = '127.0.0.1';
/** End of a request head. */
const HEAD_END = Buffer.from('\r\n\r\n');

/** One request the raw receiver got. */
export interface RawRequest {
  /** Request line and headers, without the blank line. */
  readonly head: string;
  /** Request target: path and query. */
  readonly path: string;
  /** Headers, names lower-cased. */
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  readonly socket: net.Socket;
  /** Settles when the request's socket closes. */
  readonly socketClosed: Promise<void>;
}

/** Writes the raw answer to one request on its socket; it may also never answer. */
export type RawBehaviour = (socket: net.Socket, request: RawRequest) => void;

/** A running raw receiver; `close()` it in `afterEach`. */
export interface RawReceiver {
  /** Base URL, such as `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Requests received so far, in order. */
  readonly requests: readonly RawRequest[];
  /** TCP connections accepted so far. */
  connections(): number;
  /** Settles once at least `n` requests arrived. */
  waitForRequests(n: number): Promise<readonly RawRequest[]>;
  /** Resolves when a request to `path` has arrived. */
  requested(path: string): Promise<void>;
  /** Resolves when the socket that carried the last request to `path` closes. */
  socketClosed(path: string): Promise<void>;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
}

/** Returns a raw HTTP/1.1 response with a body, a correct Content-Length and `connection: close`. */
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

/** Splits a request head into its path and headers. */
function parseHead(head: string): { path: string; headers: Record<string, string> } {
  const [requestLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { path: requestLine.split(' ')[1] ?? '', headers };
}

/**
 * Starts a raw receiver. `behaviour` answers every request, or, as a map,
 * the requests to each path (others get a 404).
 *
 * @example
 * const raw = await startRawReceiver({ '/allow': json({ decision: 'allow' }), '/never': () => {} });
 */
export async function startRawReceiver(
  behaviour: RawBehaviour | Readonly<Record<string, RawBehaviour>>,
): Promise<RawReceiver> {
  const respond: RawBehaviour =
    typeof behaviour === 'function'
      ? behaviour
      : (socket, request) => (behaviour[request.path] ?? answer(404))(socket, request);
  const requests: RawRequest[] = [];
  const sockets = new Set<net.Socket>();
  const countWaiters = new Set<{ n: number; resolve: () => void }>();
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
  let connections = 0;

  const server = net.createServer(function receive(socket) {
    connections += 1;
    sockets.add(socket);
    // The client may reset the socket while the receiver still writes.
    socket.on('error', () => undefined);
    // Not events.once: it would reject when the socket errors first (a reset).
    const socketClosed = new Promise<void>((resolve) =>
      socket.once('close', () => {
        sockets.delete(socket);
        resolve();
      }),
    );
    let buffered = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      for (;;) {
        const headEnd = buffered.indexOf(HEAD_END);
        if (headEnd < 0) return;
        const head = buffered.subarray(0, headEnd).toString('latin1');
        const { path, headers } = parseHead(head);
        const length = Number(headers['content-length'] ?? 0);
        const bodyStart = headEnd + HEAD_END.length;
        if (buffered.length < bodyStart + length) return;
        const request: RawRequest = {
          head,
          path,
          headers,
          body: buffered.subarray(bodyStart, bodyStart + length),
          socket,
          socketClosed,
        };
        buffered = buffered.subarray(bodyStart + length);
        requests.push(request);
        for (const waiter of countWaiters) {
          if (requests.length >= waiter.n) {
            countWaiters.delete(waiter);
            waiter.resolve();
          }
        }
        arrival(path).resolve();
        respond(socket, request);
      }
    });
  });
  server.listen(0, HOST);
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://${HOST}:${port}`,
    requests,
    connections: () => connections,
    async waitForRequests(n) {
      if (requests.length < n) {
        await new Promise<void>((resolve) => countWaiters.add({ n, resolve }));
      }
      return requests;
    },
    requested: (path) => arrival(path).promise,
    socketClosed: (path) =>
      requests.findLast((r) => r.path === path)?.socketClosed ??
      Promise.reject(new Error(`no request to ${path}`)),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve, reject) =>
        server.close((e) => (e === undefined ? resolve() : reject(e))),
      );
    },
  };
}
