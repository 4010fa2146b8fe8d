/**
 * @module The admin console's HTTP handler, served on its own listener
 * (`--admin-listen`), never on the API listeners. Read-only: GET and HEAD
 * only, anything else 405. With a bearer token configured every request
 * needs it, as `Authorization: Bearer <token>` or as the password of HTTP
 * Basic authentication (so a browser can ask for it; the user name is
 * ignored); otherwise 401. Every answer carries a strict
 * Content-Security-Policy (`default-src 'none'`, scripts and styles from the
 * console's own origin only, no framing), `X-Content-Type-Options: nosniff`
 * and `Cache-Control: no-store`.
 *
 * Pages and their JSON: `/` (`/status.json`), `/config` (`/config.json`),
 * `/environment` (`/environment.json`), `/ops/<id>` (`/ops/<id>.json`;
 * `/ops?id=<id>` is the lookup form's target), `/live` and its server-sent
 * events `/live/events`. Any page also answers JSON with `?format=json`,
 * like Envoy's admin endpoints.
 */
import type * as http from 'node:http';
import type { Logger } from '../log.js';
import { CONSOLE_CSS, LIVE_JS } from './assets.js';
import type { SafeHtml } from './html.js';
import {
  configPage,
  environmentPage,
  errorPage,
  livePage,
  operationPage,
  operationsPage,
  statusPage,
} from './pages.js';
import type { ConsoleSource, DecisionView } from './views.js';

/** The Content-Security-Policy of every answer. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** Headers of every answer. */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'cross-origin-resource-policy': 'same-origin',
};

/** The challenges of a 401: Basic first, so that a browser asks for the token. */
const CHALLENGES = [
  'Basic realm="agenthooks admin", charset="UTF-8"',
  'Bearer realm="agenthooks admin"',
];

/** Decisions and parked calls an operation page shows by default, and at most (`?limit=`). */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;

/** Longest operation id the console looks up. */
const MAX_OPERATION_ID_LENGTH = 512;

/** Live streams open at once; more are answered 503. */
export const MAX_LIVE_STREAMS = 32;

/** Interval of the comment line that keeps a live stream's connection open. */
const HEARTBEAT_MS = 15_000;

/** Bytes a slow live-stream client may leave unread before its stream is ended. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/** Options of {@link createConsoleHandler}. */
export interface ConsoleHandlerOptions {
  readonly source: ConsoleSource;
  /**
   * Checks a request's headers, throwing when the bearer token is missing
   * or wrong; undefined when no token is configured.
   */
  readonly checkToken?: ((header: Headers) => void) | undefined;
  readonly logger: Logger;
}

/** The console's handler, and the close of its live streams at shutdown. */
export interface ConsoleHandler {
  readonly handle: http.RequestListener;
  /** Ends every live stream (their connections would hold the listener's close). */
  close(): void;
}

/**
 * Creates the admin console's request handler.
 *
 * @example
 * const console = createConsoleHandler({ source, checkToken, logger });
 * http.createServer(console.handle).listen(8081, '127.0.0.1');
 */
export function createConsoleHandler(options: ConsoleHandlerOptions): ConsoleHandler {
  const streams = new Set<() => void>();
  const { source, logger } = options;

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://admin.invalid');
    const path = url.pathname;
    const json = url.searchParams.get('format') === 'json';
    const limit = limitOf(url.searchParams.get('limit'));
    if (path === '/console.css') return send(req, res, 200, 'text/css; charset=utf-8', CONSOLE_CSS);
    if (path === '/live.js') {
      return send(req, res, 200, 'text/javascript; charset=utf-8', LIVE_JS);
    }
    if (path === '/' || path === '/status.json') {
      return page(req, res, json || path.endsWith('.json'), await source.status(), statusPage);
    }
    if (path === '/config' || path === '/config.json') {
      return page(req, res, json || path.endsWith('.json'), source.configuration(), configPage);
    }
    if (path === '/environment' || path === '/environment.json') {
      return page(req, res, json || path.endsWith('.json'), source.environment(), environmentPage);
    }
    if (path === '/live') return send(req, res, 200, HTML, livePage().toString());
    if (path === '/live/events') return live(req, res);
    if (path === '/ops' || path === '/ops.json') {
      const id = url.searchParams.get('id');
      if (id === null || id === '') return send(req, res, 200, HTML, operationsPage().toString());
      return operation(req, res, id, json || path.endsWith('.json'), limit);
    }
    if (path.startsWith('/ops/')) {
      let id: string;
      try {
        id = decodeURIComponent(path.slice('/ops/'.length));
      } catch {
        return failure(
          req,
          res,
          400,
          'Bad request',
          'the operation id is not valid percent-encoding',
        );
      }
      // An id ending in `.json` itself is asked for with `?format=json`.
      const asJson = json || (path.endsWith('.json') && url.searchParams.get('format') !== 'html');
      return operation(
        req,
        res,
        asJson && !json ? id.slice(0, -'.json'.length) : id,
        asJson,
        limit,
      );
    }
    return failure(req, res, 404, 'Not found', `no console page at ${path}`);
  }

  async function operation(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    id: string,
    json: boolean,
    limit: number,
  ): Promise<void> {
    // As the RPCs check one (`checkIdentifier`): a store cannot look up U+0000.
    if (id === '' || id.length > MAX_OPERATION_ID_LENGTH || id.includes('\0')) {
      return failure(
        req,
        res,
        400,
        'Bad request',
        `an operation id has 1 to ${MAX_OPERATION_ID_LENGTH} characters, none of them U+0000`,
      );
    }
    return page(req, res, json, await source.operation(id, limit), operationPage);
  }

  function live(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.method === 'HEAD') {
      res.writeHead(200, withSecurity({ 'content-type': 'text/event-stream' }));
      res.end();
      return;
    }
    if (streams.size >= MAX_LIVE_STREAMS) {
      failure(
        req,
        res,
        503,
        'Too many live views',
        `at most ${MAX_LIVE_STREAMS} live views at once`,
      );
      return;
    }
    res.writeHead(
      200,
      withSecurity({
        'content-type': 'text/event-stream; charset=utf-8',
        connection: 'keep-alive',
      }),
    );
    // The retry hint, and a first line so that the browser's open event fires at once.
    res.write('retry: 2000\n: connected\n\n');
    const push = (decision: DecisionView) => {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        stop();
        return;
      }
      // JSON.stringify writes no raw line breaks, so the event is one data line.
      res.write(
        `event: decision\nid: ${decision.decisionId}\ndata: ${JSON.stringify(decision)}\n\n`,
      );
    };
    const unsubscribe = source.decisions.subscribe(push);
    const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    const stop = () => {
      if (!streams.delete(stop)) return;
      clearInterval(heartbeat);
      unsubscribe();
      res.end();
    };
    streams.add(stop);
    req.on('close', stop);
    res.on('error', stop);
  }

  return {
    handle: function adminConsole(req, res) {
      res.on('error', () => {});
      if (!authorized(req, options.checkToken)) {
        res.writeHead(401, withSecurity({ 'content-type': TEXT, 'www-authenticate': CHALLENGES }));
        res.end('a valid bearer token is required\n');
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, withSecurity({ 'content-type': TEXT, allow: 'GET, HEAD' }));
        res.end('the admin console is read-only: GET and HEAD only\n');
        return;
      }
      route(req, res).catch((e: unknown) => {
        logger.warn('admin console request failed', { path: req.url, err: e });
        if (res.headersSent) {
          res.destroy();
          return;
        }
        // The cause stays in the log: it may name the database.
        failure(
          req,
          res,
          503,
          'Unavailable',
          'the sidecar could not read this view now; see its log',
        );
      });
    },
    close() {
      for (const stop of [...streams]) stop();
    },
  };
}

/** `Content-Type` of the pages. */
const HTML = 'text/html; charset=utf-8';
/** `Content-Type` of plain answers. */
const TEXT = 'text/plain; charset=utf-8';

/** Whether the request carries the token (always, when none is configured). */
function authorized(
  req: http.IncomingMessage,
  checkToken: ((header: Headers) => void) | undefined,
): boolean {
  if (checkToken === undefined) return true;
  const given = req.headers.authorization ?? '';
  const header = new Headers();
  const basic = /^basic +([A-Za-z0-9+/=]+)$/i.exec(given);
  if (basic?.[1] !== undefined) {
    // Basic credentials are `user:password`; the password is the token.
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return false;
    header.set('authorization', `Bearer ${decoded.slice(colon + 1)}`);
  } else {
    header.set('authorization', given);
  }
  try {
    checkToken(header);
    return true;
  } catch {
    return false;
  }
}

function withSecurity(
  headers: Record<string, string | string[]>,
): Record<string, string | string[]> {
  return Object.assign({}, SECURITY_HEADERS, headers);
}

/** Sends a body (none for HEAD). */
function send(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  status: number,
  contentType: string,
  body: string,
): void {
  const bytes = Buffer.from(body, 'utf8');
  res.writeHead(
    status,
    withSecurity({ 'content-type': contentType, 'content-length': String(bytes.byteLength) }),
  );
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

/** Sends a view as JSON or as its page. */
function page<T>(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  json: boolean,
  view: T,
  render: (view: T) => SafeHtml,
): void {
  if (json) {
    send(req, res, 200, 'application/json; charset=utf-8', `${JSON.stringify(view, null, 2)}\n`);
  } else {
    send(req, res, 200, HTML, render(view).toString());
  }
}

function failure(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  status: number,
  title: string,
  message: string,
): void {
  send(req, res, status, HTML, errorPage(title, message).toString());
}

function limitOf(text: string | null): number {
  const n = Number(text ?? DEFAULT_LIMIT);
  return Number.isInteger(n) && n > 0 ? Math.min(n, MAX_LIMIT) : DEFAULT_LIMIT;
}
