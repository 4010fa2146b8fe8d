/**
 * @module Direct HTTP delivery of webhooks (`delivery: fetch`, upstream
 * contract §4.1) over one pooled undici `Agent`: keep-alive connections,
 * pooled per origin, shared by every hook.
 *
 * A delivery is one `POST` of `JSON.stringify(payload)` with
 * `content-type: application/json` and the hook's resolved headers. Redirects
 * are never followed, nothing is retried, and the timeout covers the response
 * headers and body. Failures are results, never exceptions, and their messages
 * read `Hook HTTP request failed: <code>[: <diagnostic>]`: they never hold a
 * header value, a token or response text.
 *
 * Notifications resolve as soon as the status is known; their body is
 * discarded in the background. Controls use {@link WebhookSender.post} and
 * read the bounded body themselves.
 */
import { performance } from 'node:perf_hooks';
import type { JsonObject } from '@bufbuild/protobuf';
import { Agent, type Dispatcher } from 'undici';
import type { Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, type AgentHooksErrorOptions } from '../errors.js';

/** Request timeout in seconds when the webhook sets none (upstream default). */
export const DEFAULT_TIMEOUT_SECONDS = 30;

/** Largest timeout in seconds: the longest delay a Node timer supports (2^31 - 1 ms). */
const MAX_TIMEOUT_SECONDS = 2_147_483.647;

/** Prefix of every delivery failure message. */
const MESSAGE_PREFIX = 'Hook HTTP request failed';

/** Header names a webhook cannot set, compared lower-cased. */
const FORBIDDEN_HEADERS = new Set([
  'host',
  'content-length',
  'connection',
  'transfer-encoding',
  'trailer',
  'upgrade',
]);

/** Prefixes of header names a webhook cannot set, compared lower-cased. */
const FORBIDDEN_HEADER_PREFIXES = ['proxy-', 'sec-', 'upstash-'] as const;

/** An RFC 9110 token: the only valid header name. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A `${VAR}` template in a header value. */
const TEMPLATE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Left by an unresolved template. */
const TEMPLATE_OPENER = '${';

/**
 * Characters a header value cannot hold: CR, LF, NUL and every other control
 * character but HTAB, and anything outside Latin-1 (RFC 9110 field-value).
 */
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** Schemes a webhook URL may use. */
const HTTP_PROTOCOLS = new Set(['http:', 'https:']);

/** Environment variables that hold the base of application-relative URLs, in order. */
const BASE_URL_VARS = ['INTERNAL_APP_URL', 'APP_URL'] as const;

/** Shape of an error code worth naming in a diagnostic, such as `ECONNREFUSED`. */
const ERROR_CODE = /^[A-Z][A-Z0-9_]*$/;

/** How many `cause` links are followed to find an error code. */
const MAX_CAUSE_DEPTH = 5;

/** `ErrorInfo.reason` of a {@link DeliveryError}, by code. */
const REASON_PREFIX = 'WEBHOOK_';

/** Why a webhook delivery failed. */
export type DeliveryErrorCode =
  | 'configuration'
  | 'http_error'
  | 'network_error'
  | 'timeout'
  | 'response_too_large'
  | 'invalid_response'
  | 'cancelled';

/**
 * Outcome of one webhook delivery. `durationMs` runs from the start of the
 * request to the result; `status` is set once a response arrived.
 */
export type DeliveryResult =
  | { ok: true; status: number; durationMs: number }
  | { ok: false; code: DeliveryErrorCode; message: string; status?: number; durationMs: number };

/** A failed {@link DeliveryResult}. */
export type DeliveryFailure = Extract<DeliveryResult, { ok: false }>;

/** Reads the effective environment; called at each send, so changes apply at once. */
export type EnvReader = () => Readonly<Record<string, string | undefined>>;

/** Options of a {@link WebhookSender}. */
export interface WebhookSenderOptions {
  /**
   * Dispatcher requests go through. Default: one undici `Agent` owned and
   * closed by the sender; a dispatcher passed here is left open by `close()`.
   */
  dispatcher?: Dispatcher;
  /** Effective environment of templates and relative URLs. Default: `process.env`. */
  env?: EnvReader;
}

/**
 * A 2xx response whose body has not been read. The request's timeout and
 * abort signal still cover the body: reading it fails once either fires.
 */
export interface WebhookResponse {
  readonly ok: true;
  /** HTTP status, 200 to 299. */
  readonly status: number;
  /** Response headers, names lower-cased. */
  readonly headers: Dispatcher.ResponseData['headers'];
  /** Response body stream; read it, `dump()` it or destroy it. */
  readonly body: Dispatcher.ResponseData['body'];
  /** `performance.now()` when the request started. */
  readonly startedAt: number;
  /** Maps an error raised while reading `body` to `cancelled`, `timeout` or `network_error`. */
  readonly failure: (e: unknown) => DeliveryFailure;
}

/** What {@link postWebhook} needs besides the webhook and the payload. */
export interface PostWebhookOptions {
  /** Dispatcher the request goes through. */
  readonly dispatcher: Dispatcher;
  /** Effective environment of templates and relative URLs. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Caller's cancellation; an abort yields `cancelled`. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Takes the unread body of a non-2xx response. Default {@link discardBody}.
   */
  readonly discard?: ((body: Dispatcher.ResponseData['body']) => void) | undefined;
}

/**
 * A webhook cannot be sent as configured: a bad URL, header or timeout. No
 * request was made. The message never holds a header value.
 */
export class DeliveryError extends AgentHooksError {
  override readonly name = 'DeliveryError';
  readonly code: DeliveryErrorCode;

  constructor(code: DeliveryErrorCode, diagnostic?: string, options: AgentHooksErrorOptions = {}) {
    super(
      'failed_precondition',
      `${REASON_PREFIX}${code.toUpperCase()}`,
      deliveryMessage(code, diagnostic),
      options,
    );
    this.code = code;
  }
}

/**
 * Returns a failed {@link DeliveryResult} whose duration runs from `startedAt`
 * (a `performance.now()` value) to now.
 *
 * @example deliveryFailure('response_too_large', startedAt, 'over 65536 bytes')
 */
export function deliveryFailure(
  code: DeliveryErrorCode,
  startedAt: number,
  diagnostic?: string,
  status?: number,
): DeliveryFailure {
  const failure: DeliveryFailure = {
    ok: false,
    code,
    message: deliveryMessage(code, diagnostic),
    durationMs: performance.now() - startedAt,
  };
  if (status !== undefined) failure.status = status;
  return failure;
}

/**
 * Resolves a webhook URL: an absolute `http:`/`https:` URL as is, an
 * application-relative path (`/path`, not `//`) against `base`.
 *
 * @param base Base of relative paths; for fetch delivery `INTERNAL_APP_URL || APP_URL`.
 * @throws DeliveryError `configuration` when the URL cannot be resolved, is
 *   not HTTP(S) or holds credentials.
 */
export function resolveWebhookUrl(url: string, base: string | undefined): URL {
  if (url.includes('\\')) throw configuration('URL contains a backslash');
  const relative = url.startsWith('/');
  if (relative && url.startsWith('//')) throw configuration('URL is protocol-relative');
  if (relative && (base === undefined || base === '')) {
    throw configuration(`relative URL needs ${BASE_URL_VARS.join(' or ')}`);
  }
  let resolved: URL;
  try {
    resolved = relative ? new URL(url, base) : new URL(url);
  } catch {
    // The parser's error quotes the URL, which may hold a secret: it is not kept.
    throw configuration(relative ? 'base URL is invalid' : 'URL is invalid');
  }
  if (!HTTP_PROTOCOLS.has(resolved.protocol)) throw configuration('URL is not HTTP(S)');
  if (resolved.username !== '' || resolved.password !== '') {
    throw configuration('URL has credentials');
  }
  return resolved;
}

/**
 * Resolves a webhook's headers for sending: names lower-cased, `${VAR}`
 * templates replaced from `env` for the variables in `allowedEnvVars` only.
 * The result holds secrets: never log it.
 *
 * @throws DeliveryError `configuration` for a forbidden or invalid name, two
 *   names that differ only in case, a template left unresolved, or a value
 *   with CR, LF, NUL or another invalid character. The message names the
 *   header, never its value.
 * @example
 * resolveHeaders({ headers: { Authorization: 'Bearer ${TOKEN}' }, allowedEnvVars: ['TOKEN'] }, { TOKEN: 't' })
 * // { authorization: 'Bearer t' }
 */
export function resolveHeaders(
  webhook: Pick<Webhook, 'headers' | 'allowedEnvVars'>,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const allowed = new Set(webhook.allowedEnvVars);
  const resolved: Record<string, string> = {};
  for (const [rawName, template] of Object.entries(webhook.headers)) {
    if (!HEADER_NAME.test(rawName)) throw configuration('invalid header name');
    const name = rawName.toLowerCase();
    if (isForbiddenHeader(name)) throw configuration(`forbidden header ${name}`);
    if (Object.hasOwn(resolved, name)) throw configuration(`duplicate header ${name}`);
    const value = template.replace(TEMPLATE, (match, variable: string) => {
      const replacement = allowed.has(variable) ? env[variable] : undefined;
      return replacement ?? match;
    });
    if (value.includes(TEMPLATE_OPENER)) {
      throw configuration(`header ${name} has an unresolved template`);
    }
    if (INVALID_HEADER_VALUE.test(value))
      throw configuration(`header ${name} has an invalid value`);
    resolved[name] = value;
  }
  return resolved;
}

/**
 * Drains a response body unread in the background, so that its connection
 * returns to the pool; a body over undici's dump limit (128 KiB) closes its
 * connection instead. Errors are swallowed: nobody waits for the body.
 */
export function discardBody(body: Dispatcher.ResponseData['body']): Promise<void> {
  return body.dump().then(
    () => undefined,
    () => undefined,
  );
}

/**
 * Sends one webhook `POST` and returns the 2xx response with its body unread,
 * or a failure: `configuration` (no request sent), `http_error` for any other
 * status (3xx included; its body goes to `options.discard`), `timeout`,
 * `cancelled` or `network_error`. Nothing is retried and redirects are not
 * followed. Never throws.
 *
 * The request is aborted, body included, when the webhook's timeout elapses
 * or `options.signal` aborts.
 */
export async function postWebhook(
  webhook: Webhook,
  payload: JsonObject,
  options: PostWebhookOptions,
): Promise<WebhookResponse | DeliveryFailure> {
  const startedAt = performance.now();
  const { signal } = options;
  if (signal?.aborted === true) return deliveryFailure('cancelled', startedAt);
  let url: URL;
  let headers: Record<string, string>;
  let body: string;
  let timeoutMs: number;
  try {
    url = resolveWebhookUrl(webhook.url, baseUrl(options.env));
    headers = { 'content-type': 'application/json', ...resolveHeaders(webhook, options.env) };
    timeoutMs = timeoutMillis(webhook.timeout);
    body = JSON.stringify(payload);
  } catch (e: unknown) {
    if (e instanceof DeliveryError)
      return { ...deliveryFailure(e.code, startedAt), message: e.message };
    return deliveryFailure('configuration', startedAt, 'payload is not serializable');
  }

  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
  const failure = (e: unknown): DeliveryFailure => {
    // The caller's abort wins: a result nobody waits for is `cancelled`.
    if (signal?.aborted === true) return deliveryFailure('cancelled', startedAt);
    if (timeout.aborted) return deliveryFailure('timeout', startedAt, `after ${timeoutMs} ms`);
    return deliveryFailure('network_error', startedAt, errorCode(e));
  };
  try {
    const response = await options.dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers,
      body,
      signal: combined,
      // The webhook's timeout is the one timer; undici's own would cut long ones short.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    const status = response.statusCode;
    if (!isSuccess(status)) {
      (options.discard ?? discardBody)(response.body);
      return deliveryFailure('http_error', startedAt, `HTTP ${status}`, status);
    }
    return { ok: true, status, headers: response.headers, body: response.body, startedAt, failure };
  } catch (e: unknown) {
    return failure(e);
  }
}

/**
 * Sends webhooks over one pooled undici `Agent`: one keep-alive connection
 * pool per origin, shared by every call. Create one per process and `close()`
 * it at shutdown.
 */
export class WebhookSender {
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #env: EnvReader;
  /** Bodies being discarded; `close()` destroys them rather than wait for them. */
  readonly #discarding = new Set<Dispatcher.ResponseData['body']>();
  #closing: Promise<void> | undefined;

  /** Creates a sender; see {@link WebhookSenderOptions} for the defaults. */
  constructor(options: WebhookSenderOptions = {}) {
    // Agent defaults: keep-alive connections, one pool per origin, no
    // redirects (undici follows them only through an interceptor).
    this.#dispatcher = options.dispatcher ?? new Agent();
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#env = options.env ?? (() => process.env);
  }

  /**
   * Sends a notification: resolves as soon as the response status is known,
   * with `ok` for any 2xx and `http_error` for any other status (3xx
   * included). The body is never read; it is discarded in the background.
   * Never throws.
   */
  async notify(
    webhook: Webhook,
    payload: JsonObject,
    signal?: AbortSignal,
  ): Promise<DeliveryResult> {
    const response = await this.post(webhook, payload, signal);
    if (!response.ok) return response;
    this.#discard(response.body);
    return {
      ok: true,
      status: response.status,
      durationMs: performance.now() - response.startedAt,
    };
  }

  /**
   * Sends a webhook and returns a 2xx response with its body unread, for a
   * caller that reads the body (a control); see {@link postWebhook}. Any
   * other status is an `http_error` whose body is discarded unread. Never throws.
   */
  async post(
    webhook: Webhook,
    payload: JsonObject,
    signal?: AbortSignal,
  ): Promise<WebhookResponse | DeliveryFailure> {
    let env: Readonly<Record<string, string | undefined>>;
    try {
      env = this.#env();
    } catch {
      return deliveryFailure('configuration', performance.now(), 'environment is unreadable');
    }
    return postWebhook(webhook, payload, {
      dispatcher: this.#dispatcher,
      env,
      signal,
      discard: (body) => this.#discard(body),
    });
  }

  /**
   * Stops the sender: bodies still being discarded are dropped, requests in
   * flight finish, and the owned `Agent` closes its connections. Later sends
   * fail with `network_error`. Calling it again returns the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    for (const body of this.#discarding) body.destroy();
    this.#discarding.clear();
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  /** Discards a body in the background, tracked so that `close()` can drop it. */
  #discard(body: Dispatcher.ResponseData['body']): void {
    this.#discarding.add(body);
    void discardBody(body).then(() => this.#discarding.delete(body));
  }
}

function deliveryMessage(code: DeliveryErrorCode, diagnostic: string | undefined): string {
  return diagnostic === undefined || diagnostic === ''
    ? `${MESSAGE_PREFIX}: ${code}`
    : `${MESSAGE_PREFIX}: ${code}: ${diagnostic}`;
}

function configuration(diagnostic: string): DeliveryError {
  return new DeliveryError('configuration', diagnostic);
}

function isForbiddenHeader(name: string): boolean {
  return (
    FORBIDDEN_HEADERS.has(name) ||
    FORBIDDEN_HEADER_PREFIXES.some((prefix) => name.startsWith(prefix))
  );
}

function isSuccess(status: number): boolean {
  return status >= 200 && status <= 299;
}

/** Base of application-relative URLs for fetch delivery: `INTERNAL_APP_URL || APP_URL`. */
function baseUrl(env: Readonly<Record<string, string | undefined>>): string | undefined {
  for (const name of BASE_URL_VARS) {
    const value = env[name];
    if (value !== undefined && value !== '') return value;
  }
  return undefined;
}

/** Milliseconds of a webhook timeout in seconds: `ceil(timeout * 1000)`, default 30 s. */
function timeoutMillis(seconds: number | undefined): number {
  const value = seconds ?? DEFAULT_TIMEOUT_SECONDS;
  if (!Number.isFinite(value) || value <= 0 || value > MAX_TIMEOUT_SECONDS) {
    throw configuration('timeout out of range');
  }
  return Math.ceil(value * 1000);
}

/** The first error code such as `ECONNREFUSED` along the cause chain; never a message. */
function errorCode(e: unknown): string | undefined {
  let current = e;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && ERROR_CODE.test(code)) return code;
    current = current.cause;
  }
  return undefined;
}
