/**
 * @module A real `node:http` webhook receiver on 127.0.0.1 for delivery
 * tests: it records each request and its socket, counts TCP connections, and
 * answers through a test-supplied responder.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Address the receivers listen on. */
const HOST = '127.0.0.1';

/** One request a {@link Receiver} got. */
export interface ReceivedRequest {
  readonly method: string;
  /** Path and query. */
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  /** Body as text. */
  readonly body: string;
  /** Settles when the request's socket closes. */
  readonly socketClosed: Promise<void>;
}

/** Answers a received request; it may also never answer. */
export type Responder = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A listening receiver; `close()` it in `afterEach`. */
export interface Receiver {
  /** Origin, such as `http://127.0.0.1:41234`. */
  readonly origin: string;
  /** Requests received so far, in order. */
  readonly requests: readonly ReceivedRequest[];
  /** TCP connections accepted so far. */
  readonly connections: () => number;
  /** Settles once `count` requests have been received. */
  readonly received: (count: number) => Promise<void>;
  /** Destroys open connections and stops listening. */
  readonly close: () => Promise<void>;
}

/** Answers 200 with a short text body. */
export const respondOk: Responder = (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
};

/** Starts a receiver on 127.0.0.1, on a free port. */
export async function startReceiver(respond: Responder = respondOk): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  const waiters: { count: number; resolve: () => void }[] = [];
  let connections = 0;

  const closed = new WeakMap<Socket, Promise<void>>();

  const server: Server = createServer((req, res) => {
    const socketClosed = closed.get(req.socket) ?? Promise.resolve();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        socketClosed,
      });
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      respond(req, res, body);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    closed.set(
      socket,
      new Promise<void>((resolve) =>
        socket.once('close', () => {
          sockets.delete(socket);
          resolve();
        }),
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;

  return {
    origin: `http://${HOST}:${port}`,
    requests,
    connections: () => connections,
    received: (count) =>
      requests.length >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push({ count, resolve })),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve, reject) =>
        server.close((e) => (e === undefined ? resolve() : reject(e))),
      );
    },
  };
}

/** Returns the origin of a port on 127.0.0.1 that refuses connections. */
export async function refusedOrigin(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://${HOST}:${port}`;
}
