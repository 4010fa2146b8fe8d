/**
 * @module A fake QStash API on 127.0.0.1 that checks every request against
 * QStash's documented publish API (`POST /v2/publish/<destination>`,
 * `Authorization: Bearer <token>`, `Upstash-Forward-<Header>` for each header
 * meant for the destination, `Upstash-Timeout`, `Upstash-Method`, the body
 * forwarded as is with its `Content-Type`) and, when it accepts a message,
 * forwards it to the destination as QStash would, with its
 * `Upstash-Message-Id`. It counts TCP connections, requests and the publishes
 * the client closed before they were answered, and records every deviation
 * in `violations`.
 */
import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Address the fake listens on. */
const HOST = '127.0.0.1';

/** Path prefix of the publish endpoint (QStash API v2). */
const PUBLISH_PREFIX = '/v2/publish/';

/** Prefix of the headers QStash forwards to the destination, compared lower-cased. */
const FORWARD_PREFIX = 'upstash-forward-';

/** A documented `Upstash-Timeout` value: a duration such as `30s`. */
const TIMEOUT_VALUE = /^\d+(?:\.\d+)?s$/;

/**
 * Headers a publish request may carry that are neither QStash's (`upstash-*`)
 * nor forwarded: the HTTP plumbing undici adds, the token and the body's type.
 */
const PLUMBING_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'content-type',
  'authorization',
  'accept',
  'accept-language',
  'accept-encoding',
  'sec-fetch-mode',
  'user-agent',
]);

/**
 * How the fake answers a publish: accept (201 and forward), fail with a
 * status, reset, hang (never answer, never forward), or hold (take the
 * message and forward it, but answer 201 only at `release()`).
 */
export type QStashBehaviour =
  | { readonly kind: 'accept' }
  | { readonly kind: 'status'; readonly status: number; readonly body?: string }
  | { readonly kind: 'reset' }
  | { readonly kind: 'hang' }
  | { readonly kind: 'hold' };

/** One publish request as the fake understood it. */
export interface PublishRequest {
  /** The destination URL from the path. */
  readonly destination: string;
  /** `Authorization` header. */
  readonly authorization: string | undefined;
  /** `Upstash-Forward-*` headers, prefix removed, names lower-cased. */
  readonly forwarded: Record<string, string>;
  /** `Upstash-Timeout` header. */
  readonly timeout: string | undefined;
  /** `Upstash-Method` header. */
  readonly method: string | undefined;
  /** `Content-Type` of the publish request. */
  readonly contentType: string | undefined;
  /** Every header, names lower-cased. */
  readonly headers: IncomingMessage['headers'];
  /** The body, as text. */
  readonly body: string;
}

/** A running fake QStash. */
export interface FakeQStash {
  /** Base URL to give the SDK as `baseUrl`. */
  readonly url: string;
  /** Publish requests received, in order. */
  readonly publishes: readonly PublishRequest[];
  /** Requests that broke the documented API, described. */
  readonly violations: readonly string[];
  /** TCP connections accepted so far. */
  readonly connections: () => number;
  /** Settles once no connection is open. */
  readonly allClosed: () => Promise<void>;
  /** How the next requests are answered. */
  behaviour: QStashBehaviour;
  /** Settles when `count` requests have arrived (answered or not). */
  readonly received: (count: number) => Promise<void>;
  /** Publishes whose connection the client closed before they were answered. */
  readonly abandoned: () => number;
  /** Settles when the client has closed `count` publishes before they were answered. */
  readonly abandonedAt: (count: number) => Promise<void>;
  /**
   * Answers 201 to the held publishes (`hold`) whose connection is still
   * open; returns how many acknowledgements it wrote.
   */
  readonly release: () => number;
  /** Destroys open connections and stops listening. */
  readonly close: () => Promise<void>;
}

/**
 * Starts a fake QStash that expects `Authorization: Bearer <token>` with the
 * given token.
 */
export async function startFakeQStash(token: string): Promise<FakeQStash> {
  const publishes: PublishRequest[] = [];
  const violations: string[] = [];
  const sockets = new Set<Socket>();
  const closeWaiters: (() => void)[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const abandonWaiters: { count: number; resolve: () => void }[] = [];
  const held: { res: ServerResponse; id: string }[] = [];
  let abandoned = 0;
  let closing = false;
  let arrived = 0;
  let connections = 0;
  let nextId = 0;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      arrived += 1;
      for (const waiter of waiters.filter((w) => arrived >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      const body = Buffer.concat(chunks).toString('utf8');
      const url = req.url ?? '';
      if (req.method !== 'POST' || !url.startsWith(PUBLISH_PREFIX)) {
        violations.push(`unexpected ${req.method} ${url}`);
        res.writeHead(404).end();
        return;
      }
      const published = parsePublish(req, url.slice(PUBLISH_PREFIX.length), body);
      publishes.push(published);
      violations.push(...check(published, token));
      let resetByServer = false;
      res.once('close', () => {
        // Closed before the answer was written, and not by the fake: the client gave up.
        if (res.writableFinished || resetByServer || closing) return;
        abandoned += 1;
        for (const waiter of abandonWaiters.filter((w) => abandoned >= w.count)) {
          abandonWaiters.splice(abandonWaiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      });
      const behaviour = fake.behaviour;
      switch (behaviour.kind) {
        case 'accept': {
          nextId += 1;
          const id = `msg_${nextId}`;
          acknowledge(res, id);
          forward(published, id);
          return;
        }
        case 'hold': {
          // QStash has the message: it delivers it whether or not the client hears the answer.
          nextId += 1;
          const id = `msg_${nextId}`;
          held.push({ res, id });
          forward(published, id);
          return;
        }
        case 'status':
          res
            .writeHead(behaviour.status, { 'content-type': 'text/plain' })
            .end(behaviour.body ?? '');
          return;
        case 'reset':
          resetByServer = true;
          req.socket.destroy();
          return;
        case 'hang':
          return;
      }
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) for (const resolve of closeWaiters.splice(0)) resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;

  const fake: FakeQStash = {
    url: `http://${HOST}:${port}`,
    publishes,
    violations,
    connections: () => connections,
    allClosed: () =>
      sockets.size === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => closeWaiters.push(resolve)),
    behaviour: { kind: 'accept' },
    received: (count) =>
      arrived >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push({ count, resolve })),
    abandoned: () => abandoned,
    abandonedAt: (count) =>
      abandoned >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => abandonWaiters.push({ count, resolve })),
    release: () => {
      let written = 0;
      for (const { res, id } of held.splice(0)) {
        if (res.destroyed) continue;
        acknowledge(res, id);
        written += 1;
      }
      return written;
    },
    close: async () => {
      closing = true;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve, reject) =>
        server.close((e) => (e === undefined ? resolve() : reject(e))),
      );
    },
  };
  return fake;
}

/** Answers an accepted publish as QStash does: 201 with the message id. */
function acknowledge(res: ServerResponse, id: string): void {
  res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ messageId: id }));
}

function parsePublish(req: IncomingMessage, destination: string, body: string): PublishRequest {
  const forwarded: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(FORWARD_PREFIX) && typeof value === 'string') {
      forwarded[name.slice(FORWARD_PREFIX.length)] = value;
    }
  }
  return {
    destination,
    authorization: req.headers.authorization,
    forwarded,
    timeout: header(req, 'upstash-timeout'),
    method: header(req, 'upstash-method'),
    contentType: req.headers['content-type'],
    headers: req.headers,
    body,
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** What a request breaks of the documented publish API. */
function check(p: PublishRequest, token: string): string[] {
  const out: string[] = [];
  let destination: URL | undefined;
  try {
    destination = new URL(p.destination);
  } catch {
    out.push(`destination is not a URL: ${p.destination}`);
  }
  if (destination !== undefined && !['http:', 'https:'].includes(destination.protocol)) {
    out.push(`destination is not http(s): ${p.destination}`);
  }
  if (p.authorization !== `Bearer ${token}`) out.push('authorization is not Bearer <token>');
  if (p.timeout !== undefined && !TIMEOUT_VALUE.test(p.timeout)) {
    out.push(`Upstash-Timeout is not a duration: ${p.timeout}`);
  }
  if (p.method !== undefined && p.method !== 'POST') out.push(`Upstash-Method is ${p.method}`);
  for (const name of Object.keys(p.headers)) {
    if (!name.startsWith('upstash-') && !PLUMBING_HEADERS.has(name)) {
      out.push(`header ${name} is neither a QStash header nor Upstash-Forward-*`);
    }
  }
  return out;
}

/**
 * Delivers an accepted message to its destination, as QStash does, with the
 * forwarded headers and `Upstash-Message-Id`.
 */
function forward(p: PublishRequest, id: string): void {
  const headers: Record<string, string> = { ...p.forwarded, 'upstash-message-id': id };
  if (p.contentType !== undefined) headers['content-type'] = p.contentType;
  const req = request(p.destination, { method: p.method ?? 'POST', headers }, (res) => {
    res.resume();
  });
  req.on('error', () => {});
  req.end(p.body);
}
