/**
 * @module A real webhook receiver: a `node:http` server on 127.0.0.1 that
 * records every request and answers as a test tells it to.
 */
import { once } from 'node:events';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the receiver got. */
export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  /** The body parsed as JSON, or `undefined` when it is not JSON. */
  readonly json: unknown;
  /** `performance.now()` when the body was complete. */
  readonly at: number;
}

/** Decides the answer to one request; it may write and end `res` whenever it likes. */
export type Responder = (req: ReceivedRequest, res: http.ServerResponse) => void;

/** A running receiver. */
export interface Receiver {
  /** Base URL, such as `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** TCP connections accepted so far. */
  readonly connections: () => number;
  /** Replaces how requests are answered (default: 204). */
  respond(responder: Responder): void;
  /** Resolves once at least `n` requests arrived. */
  waitForRequests(n: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1, port 0. */
export async function startReceiver(): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let responder: Responder = (_req, res) => {
    res.writeHead(204);
    res.end();
  };
  const waiters: { n: number; resolve: () => void }[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        json,
        at: performance.now(),
      };
      requests.push(received);
      for (const w of [...waiters]) {
        if (requests.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
      responder(received, res);
    });
  });
  server.on('connection', () => {
    connections += 1;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    respond(r) {
      responder = r;
    },
    async waitForRequests(n) {
      if (requests.length < n) {
        await new Promise<void>((resolve) => waiters.push({ n, resolve }));
      }
      return requests;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
