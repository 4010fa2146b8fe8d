/**
 * @module The one webhook receiver of the tests and the bench: a real
 * `node:http` server on 127.0.0.1, port 0, that records every request
 * (method, path, headers, raw body, parsed JSON, the socket's close), answers
 * as the test scripts it (status, body, delay, hang, reset), counts
 * connections, and closes every connection when it closes.
 *
 * For bytes `node:http` will not write (malformed lengths, stalled or endless
 * bodies), use the raw-socket receiver in `raw-receiver.ts`.
 */
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Address the receiver listens on. */
const HOST = '127.0.0.1';

/** One request the receiver got. */
export interface ReceivedRequest {
  readonly method: string;
  /** Request target: path and query, such as `/hooks/in?x=1`. */
  readonly path: string;
  /** Headers, names lower-cased. */
  readonly headers: http.IncomingHttpHeaders;
  /** The body as received. */
  readonly raw: Buffer;
  /** The body decoded as UTF-8. */
  readonly body: string;
  /** The body parsed as JSON, or `undefined` when it is not JSON. */
  readonly json: unknown;
  /** `performance.now()` when the body was complete. */
  readonly at: number;
  /** Settles when the socket that carried the request closes. */
  readonly socketClosed: Promise<void>;
}

/** Answers one request by hand; it may write and end `res` whenever it likes, or never. */
export type Responder = (req: ReceivedRequest, res: http.ServerResponse) => void;

/** A scripted answer: a response, no answer at all, or a TCP reset. */
export type Reply =
  | {
      /** Default 200 when a body is given, else 204. */
      readonly status?: number;
      readonly headers?: http.OutgoingHttpHeaders;
      /** Sent as is. */
      readonly body?: string | Buffer;
      /** Sent as JSON (with `content-type: application/json`) instead of `body`. */
      readonly json?: unknown;
      /** Waits this long before answering. */
      readonly delayMs?: number;
    }
  /** Never answers: the socket stays open until the client gives up or the receiver closes. */
  | { readonly hang: true }
  /** Resets the connection (RST) instead of answering, after `delayMs` if given. */
  | { readonly reset: true; readonly delayMs?: number };

/** How to answer: a {@link Reply} or a {@link Responder}. */
export type Answer = Reply | Responder;

/** Options of {@link startReceiver}. */
export interface ReceiverOptions {
  /** How every request is answered unless scripted otherwise; default 204. */
  readonly answer?: Answer;
  /**
   * Whether to keep each request in `requests`. Default true; the bench turns
   * it off so that a long run does not grow the receiver's heap.
   */
  readonly record?: boolean;
}

/** A listening receiver; `close()` it in `afterEach`. */
export interface Receiver {
  /** Base URL, such as `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Requests received so far, in order (empty with `record: false`). */
  readonly requests: readonly ReceivedRequest[];
  /** Requests received so far, recorded or not. */
  count(): number;
  /** TCP connections accepted so far. */
  connections(): number;
  /** TCP connections open now. */
  openConnections(): number;
  /** Settles once no connection is open. */
  allClosed(): Promise<void>;
  /** Replaces how requests are answered from now on (after any scripted answers). */
  respond(answer: Answer): void;
  /** Queues answers for the next requests, one each, in order; then `respond`'s applies. */
  script(...answers: Answer[]): void;
  /** Settles once at least `n` requests arrived; answers the recorded ones. */
  waitForRequests(n: number): Promise<ReceivedRequest[]>;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
}

/** The default answer: 204 No Content. */
const NO_CONTENT: Reply = { status: 204 };

/**
 * Starts a receiver on 127.0.0.1, port 0.
 *
 * @example
 * const receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
 * receiver.script({ hang: true }); // only the first request hangs
 * const [first] = await receiver.waitForRequests(1);
 */
export async function startReceiver(options: ReceiverOptions = {}): Promise<Receiver> {
  const record = options.record ?? true;
  const requests: ReceivedRequest[] = [];
  const scripted: Answer[] = [];
  let fallback: Answer = options.answer ?? NO_CONTENT;
  let count = 0;
  let connections = 0;
  const sockets = new Set<Socket>();
  const socketClosed = new WeakMap<Socket, Promise<void>>();
  const countWaiters = new Set<{ n: number; resolve: () => void }>();
  const closeWaiters = new Set<() => void>();
  const timers = new Set<NodeJS.Timeout>();

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const reply = (r: Reply, req: http.IncomingMessage, res: http.ServerResponse) => {
    if ('hang' in r) return;
    if ('reset' in r) {
      const reset = () => req.socket.resetAndDestroy();
      if (r.delayMs === undefined) reset();
      else later(r.delayMs, reset);
      return;
    }
    const send = () => {
      const headers: http.OutgoingHttpHeaders = { ...r.headers };
      let body: string | Buffer | undefined = r.body;
      if (r.json !== undefined) {
        body = JSON.stringify(r.json);
        headers['content-type'] ??= 'application/json';
      }
      res.writeHead(r.status ?? (body === undefined ? 204 : 200), headers);
      res.end(body);
    };
    if (r.delayMs === undefined) send();
    else later(r.delayMs, send);
  };

  const server = http.createServer(function receive(req, res) {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const body = raw.toString('utf8');
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
        raw,
        body,
        json,
        at: performance.now(),
        socketClosed: socketClosed.get(req.socket) ?? Promise.resolve(),
      };
      count += 1;
      if (record) requests.push(received);
      for (const waiter of countWaiters) {
        if (count >= waiter.n) {
          countWaiters.delete(waiter);
          waiter.resolve();
        }
      }
      const answer = scripted.shift() ?? fallback;
      if (typeof answer === 'function') answer(received, res);
      else reply(answer, req, res);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socketClosed.set(
      socket,
      // Not events.once: it would reject when the socket errors first (a reset).
      new Promise<void>((resolve) =>
        socket.once('close', () => {
          sockets.delete(socket);
          if (sockets.size === 0) {
            for (const waiter of closeWaiters) waiter();
            closeWaiters.clear();
          }
          resolve();
        }),
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://${HOST}:${port}`,
    requests,
    count: () => count,
    connections: () => connections,
    openConnections: () => sockets.size,
    allClosed: () =>
      sockets.size === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => closeWaiters.add(resolve)),
    respond(answer) {
      fallback = answer;
    },
    script(...answers) {
      scripted.push(...answers);
    },
    async waitForRequests(n) {
      if (count < n) await new Promise<void>((resolve) => countWaiters.add({ n, resolve }));
      return requests;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      server.closeAllConnections();
      // A reset or hung socket may no longer be one `node:http` tracks.
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve, reject) =>
        server.close((e) => (e === undefined ? resolve() : reject(e))),
      );
    },
  };
}

/** Answers the URL of a port on 127.0.0.1 that refuses connections. */
export async function refusedUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://${HOST}:${port}`;
}
