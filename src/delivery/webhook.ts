/**
 * @module Direct HTTP delivery of webhooks (`delivery: fetch`, upstream
 * contract §4.1) over one pooled undici `Agent`: keep-alive connections,
 * pooled per origin, shared by every hook. Every connection the sender's
 * own `Agent` opens goes through the destination check of
 * `destination.ts`, on the address actually connected to; a refused one is a
 * `destination_denied` failure.
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
 *
 * Notifications with `delivery: qstash` (upstream contract §4.2) are published
 * through the official `@upstash/qstash` SDK instead, configured explicitly:
 * no retries, no telemetry, no dev mode (it would download and start a local
 * server), an explicit `baseUrl` and the token from `QSTASH_TOKEN` in the
 * effective environment, so that neither `QSTASH_REGION`, `QSTASH_DEV` nor the
 * process's own variables can change where a message goes. The SDK builds the
 * publish request (`Upstash-*` headers, path, body); the sender sends it. The
 * SDK has no abort signal, fetch or dispatcher option and calls the global
 * `fetch` without a signal, so each publish gets an SDK client whose HTTP
 * layer (its public `http` requester) is the sender's: one request on the
 * sender's pooled `Agent`, aborted at the hook's timeout or the caller's
 * cancellation, its late answer never read.
 *
 * A publish QStash provably did not accept (an error status, a network
 * error, a timeout before the request was written) is followed by one plain
 * fetch unless the hook says `fallback: none`; a missing token falls back the
 * same way. A publish written but unanswered at the timeout has an unknown
 * outcome (QStash may hold the message) and is not followed by a fetch, so
 * the receiver never gets a second copy of a message QStash delivers. A
 * network error after the request was written is unknown too, but falls back
 * as the contract says for every SDK error (§4.2). QStash failures never hold
 * QStash's response, a header value or a token.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { JsonObject } from '@bufbuild/protobuf';
import { Client as QStashClient } from '@upstash/qstash';
import { Agent, type Dispatcher, errors, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { Delivery, Fallback, type Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, type AgentHooksErrorOptions } from '../errors.js';
import { extend } from '../extend.js';
import { LiveSlots, type Slotted } from '../live-slots.js';
import { type Logger, silentLogger } from '../log.js';
import type { DeliverySpan } from '../tracing/tracing.js';
import {
  createGuardedConnector,
  DestinationPolicy,
  destinationDeniedError,
  type Resolver,
} from './destination.js';
import { OriginSlots } from './origin-slots.js';
import {
  checkSigningSecret,
  isSigningViolation,
  newMessageId,
  type SigningKey,
  signatureHeaders,
  signingSecrets,
} from './signing.js';
import {
  checkResolvedHeader,
  checkWebhookHeaders,
  checkWebhookTimeout,
  checkWebhookUrl,
  isValidHeaderValue,
  resolveHeaderTemplate,
  WEBHOOK_RULE_REASON,
  type WebhookRuleReason,
  type WebhookRuleViolation,
} from './webhook-rules.js';

/**
 * Default of `--webhook-max-connections`: sockets open at once to one
 * origin. Requests past it wait in the pool's queue for a free socket, and
 * their hook's timeout runs while they wait.
 */
export const DEFAULT_CONNECTIONS_PER_ORIGIN = 64;

/** Request timeout in seconds when the webhook sets none (upstream default). */
export const DEFAULT_TIMEOUT_SECONDS = 30;

/** Prefix of every delivery failure message. */
const MESSAGE_PREFIX = 'Hook HTTP request failed';

/** Start of an application-relative webhook URL. */
const RELATIVE_PREFIX = '/';

/** The content type of every webhook body. */
const JSON_CONTENT_TYPE = 'application/json';

/** Environment variables that hold the base of application-relative URLs, in order. */
const BASE_URL_VARS = ['INTERNAL_APP_URL', 'APP_URL'] as const;

/** Shape of an error code worth naming in a diagnostic, such as `ECONNREFUSED`. */
const ERROR_CODE = /^[A-Z][A-Z0-9_]*$/;

/** How many `cause` links are followed to find an error code. */
const MAX_CAUSE_DEPTH = 5;

/** `ErrorInfo.reason` of a {@link DeliveryError}, by code. */
const REASON_PREFIX = 'WEBHOOK_';

/** The SDK's own default QStash API endpoint, used when no `--qstash-url` is set. */
export const DEFAULT_QSTASH_URL = 'https://qstash.upstash.io';

/** Variable of the effective environment holding the QStash token, read at each send. */
export const QSTASH_TOKEN_VAR = 'QSTASH_TOKEN';

/** Variable holding the Vercel deployment-protection bypass secret. */
export const VERCEL_BYPASS_SECRET_VAR = 'VERCEL_AUTOMATION_BYPASS_SECRET';

/** Header carrying {@link VERCEL_BYPASS_SECRET_VAR} to the application's own origin. */
export const VERCEL_BYPASS_HEADER = 'x-vercel-protection-bypass';

/**
 * Variables holding the base of application-relative URLs for QStash, in
 * order: `APP_URL || INTERNAL_APP_URL`, the reverse of fetch (contract §4.2).
 */
const QSTASH_BASE_URL_VARS = ['APP_URL', 'INTERNAL_APP_URL'] as const;

/** Diagnostic of a missing QStash token (upstream wording). */
const QSTASH_NO_TOKEN = `${QSTASH_TOKEN_VAR} not available`;

/** Diagnostic of a QStash token that cannot be sent in a header. */
const QSTASH_INVALID_TOKEN = `${QSTASH_TOKEN_VAR} has an invalid value`;

/**
 * The headers of a webhook request before the hook's own: JSON's content type
 * and what the reference system's `fetch` sends by default (Node's), so that a
 * receiver, or a firewall in front of it that refuses a request without a
 * `user-agent`, sees the request it was written for. Not `accept-encoding`:
 * an answer is read as it comes, never decompressed.
 */
function fetchHeaders(): Record<string, string> {
  return {
    'content-type': JSON_CONTENT_TYPE,
    accept: '*/*',
    'accept-language': '*',
    'sec-fetch-mode': 'cors',
    'user-agent': FETCH_USER_AGENT,
  };
}

/** The prefix of the sidecar's own variables (and of its clients' and tools'), which no header template resolves. */
export const OWN_VARIABLE_PREFIX = 'AGENTHOOKS_';

/** The `user-agent` Node's `fetch` sends, and so the reference system's webhooks. */
const FETCH_USER_AGENT = 'node';

/** Diagnostic of a delivery refused because the signing declaration is invalid. */
const SIGNING_INVALID = 'signing secrets are invalid';

/** Diagnostic of a publish dropped because its signing rule changed while it waited. */
const SIGNING_CHANGED = 'signing secrets changed before the publish was sent';

/** Diagnostic of a publish that failed without an HTTP status (upstream wording). */
const QSTASH_PUBLISH_FAILED = 'QStash publish failed';

/** Lowest and highest HTTP status an SDK error may carry to count as `http_error`. */
const MIN_HTTP_STATUS = 100;
const MAX_HTTP_STATUS = 599;

/** Why a webhook delivery failed. */
export type DeliveryErrorCode =
  | 'configuration'
  | 'http_error'
  | 'network_error'
  | 'timeout'
  | 'response_too_large'
  | 'invalid_response'
  | 'cancelled'
  | 'destination_denied';

/**
 * How a delivered notification went: `fetch` (a plain `POST`), `qstash`
 * (published to QStash and acknowledged) or `fallback` (the QStash publish
 * failed and the one plain `POST` that follows it succeeded).
 */
export type DeliveryRoute = 'fetch' | 'qstash' | 'fallback';

/**
 * Outcome of one webhook delivery. `durationMs` runs from the start of the
 * request to the result (QStash publish and fallback included); `status` is
 * the receiver's HTTP status, set once a response arrived: absent for
 * `route: 'qstash'`, where QStash acknowledged the message and the
 * destination's answer is QStash's business. A failure's `route` names the
 * path that produced it (`qstash` with `fallback: none`, `fallback` when the
 * plain `POST` after a failed publish failed too).
 */
export type DeliveryResult =
  | { ok: true; route: DeliveryRoute; status?: number; durationMs: number }
  | {
      ok: false;
      code: DeliveryErrorCode;
      message: string;
      status?: number;
      durationMs: number;
      route?: DeliveryRoute;
      /**
       * The webhook rule that refused the delivery (`webhook-rules.ts`), set
       * for a `configuration` failure of a rule and for `destination_denied`:
       * the reason registration gives for the same webhook.
       */
      rule?: WebhookRuleReason;
    };

/** A failed {@link DeliveryResult}. */
export type DeliveryFailure = Extract<DeliveryResult, { ok: false }>;

/** Outcome of one QStash publish ({@link WebhookSender.publish}). */
export type PublishResult = { ok: true; durationMs: number } | DeliveryFailure;

/** Reads the effective environment; called at each send, so changes apply at once. */
export type EnvReader = () => Readonly<Record<string, string | undefined>>;

/** Options of a {@link WebhookSender}. */
export interface WebhookSenderOptions {
  /**
   * Dispatcher requests go through. Default: one undici `Agent` owned and
   * closed by the sender; a dispatcher passed here is left open by `close()`.
   */
  dispatcher?: Dispatcher;
  /**
   * Effective environment of templates, relative URLs and the QStash
   * variables (`QSTASH_TOKEN`, `APP_URL`, `INTERNAL_APP_URL`,
   * `VERCEL_AUTOMATION_BYPASS_SECRET`). Default: `process.env`.
   */
  env?: EnvReader;
  /** QStash API base URL (`--qstash-url`). Default {@link DEFAULT_QSTASH_URL}. */
  qstashUrl?: string | undefined;
  /**
   * Installs the sender's dispatcher as undici's global dispatcher, so that
   * any global `fetch` of the process shares its pooled connections and its
   * destination check; `close()` puts the previous one back. QStash publishes
   * use the sender's dispatcher either way. Set it for the one sender of a
   * process. Default false.
   */
  globalDispatcher?: boolean;
  /** Where a QStash failure followed by a fallback is logged. Default: silent. */
  logger?: Logger;
  /**
   * Where the sender's own `Agent` may connect (`--webhook-allow`,
   * `--webhook-deny`); a refused connection is a `destination_denied`
   * failure. Default: link-local and cloud metadata addresses are refused.
   * Not used with `dispatcher`.
   */
  destinations?: DestinationPolicy;
  /**
   * Resolves webhook host names before the destination check
   * (`--dns-server`). Default: the system resolver. Not used with `dispatcher`.
   */
  resolver?: Resolver;
  /**
   * Sockets the sender's own `Agent` opens at once to one origin
   * (`--webhook-max-connections`); further requests wait for a free one.
   * Default {@link DEFAULT_CONNECTIONS_PER_ORIGIN}. Not used with `dispatcher`.
   */
  connectionsPerOrigin?: number;
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

/**
 * A payload already written as JSON text, sent as it is: the modifying
 * hooks' contexts, which are carried as text (`modify/raw-json.ts`).
 */
export class EncodedJson {
  constructor(readonly text: string) {}
}

/** What {@link postWebhook} needs besides the webhook and the payload. */
export interface PostWebhookOptions {
  /** Dispatcher the request goes through. */
  readonly dispatcher: Dispatcher;
  /** Effective environment of templates and relative URLs. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /**
   * The environment as it is now, read again when the request had to wait
   * for a connection: a reload meanwhile may have removed its signing key or
   * unbound its origin. Default: `env` (nothing is read again).
   */
  readonly currentEnv?: EnvReader | undefined;
  /** Caller's cancellation; an abort yields `cancelled`. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Takes the unread body of a non-2xx response. Default {@link discardBody}.
   */
  readonly discard?: ((body: Dispatcher.ResponseData['body']) => void) | undefined;
  /**
   * `webhook-id` of a signed request: a fallback resend of a message keeps
   * the message's id. Default: a new id.
   */
  readonly messageId?: string | undefined;
  /**
   * The delivery's span, when tracing is on: its `traceparent` and
   * `tracestate` are added to the headers, over a hook header of the same name.
   */
  readonly trace?: DeliverySpan | undefined;
  /**
   * The dispatcher's connections per origin, when the sender owns it: the
   * request waits here for a connection of its own and is signed only then
   * (see `origin-slots.ts`). Without it, the dispatcher's own queue.
   */
  readonly slots?: OriginSlots | undefined;
}

/** Options of a {@link DeliveryError}. */
export interface DeliveryErrorOptions extends AgentHooksErrorOptions {
  /** The webhook rule that refused the webhook. */
  readonly rule?: WebhookRuleReason | undefined;
}

/**
 * A webhook cannot be sent as configured: a bad URL, header or timeout. No
 * request was made. The message never holds a header value.
 */
export class DeliveryError extends AgentHooksError {
  override readonly name = 'DeliveryError';
  readonly code: DeliveryErrorCode;
  /** The webhook rule that refused the webhook, when one did: the reason registration gives. */
  readonly rule: WebhookRuleReason | undefined;

  constructor(code: DeliveryErrorCode, diagnostic?: string, options: DeliveryErrorOptions = {}) {
    super(
      'failed_precondition',
      // toUpperCase() types its result as string; each WEBHOOK_<CODE> must be an ErrorReason name.
      `${REASON_PREFIX}${code.toUpperCase()}` as `WEBHOOK_${Uppercase<DeliveryErrorCode>}`,
      deliveryMessage(code, diagnostic),
      options,
    );
    this.code = code;
    this.rule = options.rule;
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
 * Returns the `configuration` failure of a broken webhook rule, carrying the
 * rule's reason; its duration runs from `startedAt`.
 *
 * @example violationFailure(checkControlDelivery(webhook), startedAt)
 */
export function violationFailure(
  violation: WebhookRuleViolation,
  startedAt: number,
): DeliveryFailure {
  return extend(deliveryFailure('configuration', startedAt, violation.diagnostic), {
    rule: violation.reason,
  });
}

/**
 * Resolves a webhook URL: an absolute `http:`/`https:` URL as is, an
 * application-relative path (`/path`, not `//`) against `base`.
 *
 * @param base Base of relative paths; for fetch delivery `INTERNAL_APP_URL || APP_URL`.
 * @throws DeliveryError `configuration`, with `rule` `INVALID_WEBHOOK_URL`,
 *   when the URL breaks the URL rule of `webhook-rules.ts`, or resolves
 *   against `base` to a URL that does, or has no usable base.
 */
export function resolveWebhookUrl(url: string, base: string | undefined): URL {
  const violation = checkWebhookUrl(url);
  if (violation !== undefined) throw ruleError(violation);
  if (!url.startsWith(RELATIVE_PREFIX)) return new URL(url);
  if (base === undefined || base === '') {
    throw urlError(`relative URL needs ${BASE_URL_VARS.join(' or ')}`);
  }
  let resolved: URL;
  try {
    resolved = new URL(url, base);
  } catch {
    // The parser's error quotes the base, which may hold a secret: it is not kept.
    throw urlError('base URL is invalid');
  }
  // The base gives a relative URL its scheme and credentials: the rule applies again.
  const unsendable = checkWebhookUrl(resolved.href);
  if (unsendable !== undefined) throw ruleError(unsendable);
  return resolved;
}

/** Where a webhook is sent and for how long, as {@link postWebhook} derives it from the hook. */
interface DeliveryTarget {
  /** The base its URL was resolved against (`INTERNAL_APP_URL || APP_URL`). */
  readonly base: string | undefined;
  /** The hook's URL and timeout as they were when resolved. */
  readonly url: string;
  readonly timeout: number | undefined;
  readonly origin: string;
  /** Path and query. */
  readonly path: string;
  readonly timeoutMs: number;
}

/**
 * Targets by webhook: a stored hook is one object for as long as it stays
 * cached, so its URL is checked and parsed once, not once per request. A
 * changed base (the environment's), URL or timeout resolves it again.
 */
const targets = new WeakMap<Webhook, DeliveryTarget>();

/**
 * The webhook's resolved URL and timeout, checked in registration's order.
 *
 * @throws DeliveryError as {@link resolveWebhookUrl} and for a timeout out of range.
 */
function deliveryTarget(webhook: Webhook, base: string | undefined): DeliveryTarget {
  const cached = targets.get(webhook);
  if (
    cached !== undefined &&
    cached.base === base &&
    cached.url === webhook.url &&
    cached.timeout === webhook.timeout
  ) {
    return cached;
  }
  const url = resolveWebhookUrl(webhook.url, base);
  const target: DeliveryTarget = {
    base,
    url: webhook.url,
    timeout: webhook.timeout,
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    timeoutMs: timeoutMillis(webhook.timeout),
  };
  targets.set(webhook, target);
  return target;
}

/** Whether the webhook sets no header and allows no variable: nothing to resolve or check. */
function hasNoHeaders(webhook: Webhook): boolean {
  if (webhook.allowedEnvVars.length > 0) return false;
  for (const _ in webhook.headers) return false;
  return true;
}

/**
 * Resolves a webhook's headers for sending: names lower-cased, `${VAR}`
 * templates replaced from `env` for the variables in `allowedEnvVars` only.
 * The headers as configured are first held to the rules registration
 * applies (`checkWebhookHeaders`), then each resolved value to
 * `checkResolvedHeader`. The result holds secrets: never log it.
 *
 * @throws DeliveryError `configuration`, with the rule's reason as `rule`,
 *   for a forbidden or invalid name, two names that differ only in case, a
 *   template left unresolved, or a value with CR, LF, NUL or another invalid
 *   character. The message names the header, never its value.
 * @example
 * resolveHeaders({ headers: { Authorization: 'Bearer ${TOKEN}' }, allowedEnvVars: ['TOKEN'] }, { TOKEN: 't' })
 * // { authorization: 'Bearer t' }
 */
export function resolveHeaders(
  webhook: Pick<Webhook, 'headers' | 'allowedEnvVars'>,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const violation = checkWebhookHeaders(webhook);
  if (violation !== undefined) throw ruleError(violation);
  // The sidecar's own settings (its signing keys, its API token) are never
  // sent, whatever a hook lists: a hook stored before that rule may list one.
  const allowed = new Set(
    webhook.allowedEnvVars.filter((name) => !name.startsWith(OWN_VARIABLE_PREFIX)),
  );
  const resolved: Record<string, string> = {};
  for (const [name, template] of Object.entries(webhook.headers)) {
    const value = resolveHeaderTemplate(template, allowed, env);
    const unsendable = checkResolvedHeader(name, value);
    if (unsendable !== undefined) throw ruleError(unsendable);
    resolved[name.toLowerCase()] = value;
  }
  return resolved;
}

/**
 * Destroys a body nobody will read. undici's body then errors (request
 * aborted), and an error without a listener would end the process.
 */
export function destroyUnread(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
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
 * `cancelled`, `destination_denied` (the dispatcher refused the address
 * before connecting) or `network_error`. Nothing is retried and redirects are not
 * followed. Never throws.
 *
 * The request is aborted, body included, when the webhook's timeout elapses
 * or `options.signal` aborts. The timeout also covers the time the request
 * waits in the dispatcher's queue for a connection: it then fails with
 * `timeout` when the timer fires, and nothing is sent.
 */
export async function postWebhook(
  webhook: Webhook,
  payload: JsonObject | EncodedJson,
  options: PostWebhookOptions,
): Promise<WebhookResponse | DeliveryFailure> {
  const startedAt = performance.now();
  const { signal } = options;
  if (signal?.aborted === true) return deliveryFailure('cancelled', startedAt);
  let target: DeliveryTarget;
  let headers: Record<string, string>;
  let body: string;
  try {
    // In registration's order (`checkWebhook`), so both name the same rule first.
    target = deliveryTarget(webhook, baseUrl(options.env));
    headers = hasNoHeaders(webhook)
      ? fetchHeaders()
      : Object.assign(fetchHeaders(), resolveHeaders(webhook, options.env));
    body = payload instanceof EncodedJson ? payload.text : JSON.stringify(payload);
  } catch (e: unknown) {
    if (e instanceof DeliveryError) return errorFailure(e, startedAt);
    return deliveryFailure('configuration', startedAt, 'payload is not serializable');
  }
  // The signing rule first: a hook that must not be sent fails at once, not
  // after a wait for a connection it will never use.
  const signer = signerOf(webhook, target.origin, options.env);
  if (signer instanceof SignFailure) {
    return extend(signer.failure, { durationMs: performance.now() - startedAt });
  }
  const { timeoutMs } = target;
  const deadline = requestDeadline(timeoutMs, signal);
  // A connection of its own first (the timeout covers the wait): signed after
  // it, the request carries the time it is sent in `webhook-timestamp`.
  const { slots } = options;
  const origin = target.origin;
  let holdsSlot = false;
  let waited = false;
  if (slots !== undefined) {
    holdsSlot = slots.tryTake(origin);
    if (!holdsSlot) {
      waited = true;
      holdsSlot = await slots.wait(origin, deadline.signal);
    }
  }
  const releaseSlot = () => {
    if (!holdsSlot) return;
    holdsSlot = false;
    slots?.release(origin);
  };
  const failure = (e: unknown): DeliveryFailure => {
    deadline.release();
    releaseSlot();
    // The caller's abort wins: a result nobody waits for is `cancelled`.
    if (signal?.aborted === true) return deliveryFailure('cancelled', startedAt);
    if (deadline.timedOut()) return deliveryFailure('timeout', startedAt, `after ${timeoutMs} ms`);
    const denied = destinationDeniedError(e);
    if (denied !== undefined) {
      return extend(deliveryFailure('destination_denied', startedAt, denied.diagnostic), {
        rule: WEBHOOK_RULE_REASON.WEBHOOK_DESTINATION_DENIED,
      });
    }
    return deliveryFailure('network_error', startedAt, errorCode(e));
  };
  if (slots !== undefined && !holdsSlot) return failure(deadline.signal.reason);
  // The rule is decided again for a request that waited (a reload meanwhile
  // may have removed its key or unbound its origin): it goes out signed with
  // the keys declared when it is sent, or not at all.
  const signing = waited ? signerNow(webhook, origin, options) : signer;
  if (signing instanceof SignFailure) {
    deadline.release();
    releaseSlot();
    return extend(signing.failure, { durationMs: performance.now() - startedAt });
  }
  // After the hook's own headers: the delivery's trace context wins. The
  // signature covers the body only, so these headers do not change it.
  options.trace?.inject(headers);
  signing?.apply(body, headers, options.messageId);
  try {
    const pending = options.dispatcher.request({
      origin: target.origin,
      path: target.path,
      method: 'POST',
      headers,
      body,
      signal: deadline.signal,
      // The webhook's timeout is the one timer; undici's own would cut long ones short.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    // undici sees the abort of a request queued for a connection only once a
    // connection takes it (and then sends nothing): stop waiting at the abort.
    const response = await untilAborted(pending, deadline.signal);
    if (response === ABORTED) {
      // Its connection is busy until undici is done with the request.
      const slotHeld = holdsSlot;
      holdsSlot = false;
      const done = () => {
        if (slotHeld) slots?.release(origin);
      };
      pending.then((late) => {
        late.body.once('close', done);
        destroyUnread(late.body);
      }, done);
      return failure(deadline.signal.reason);
    }
    const status = response.statusCode;
    // The deadline covers the body too; it and the connection's slot are
    // released once the body is read or discarded.
    response.body.once(
      'close',
      holdsSlot
        ? () => {
            deadline.release();
            releaseSlot();
          }
        : deadline.release,
    );
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
 *
 * @example
 * const sender = new WebhookSender({ env: () => environment.current().env, globalDispatcher: true });
 * const result = await sender.notify(webhook, payload, signal);
 */
export class WebhookSender {
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  /** Requests in flight per origin, held to the owned Agent's connections; none for a given dispatcher. */
  readonly #slots: OriginSlots | undefined;
  readonly #env: EnvReader;
  readonly #logger: Logger;
  readonly #qstashUrl: string;
  /** The global dispatcher this sender replaced, put back by `close()`. */
  readonly #previousGlobal: Dispatcher | undefined;
  /** Bodies being discarded; `close()` destroys them rather than wait for them. */
  readonly #discarding = new LiveSlots<DiscardedBody>();
  #closing: Promise<void> | undefined;

  /** Creates a sender; see {@link WebhookSenderOptions} for the defaults. */
  constructor(options: WebhookSenderOptions = {}) {
    // Agent defaults: keep-alive connections, one pool per origin, no
    // redirects (undici follows them only through an interceptor). Every
    // connection goes through the destination check, on the resolved address.
    const connections = options.connectionsPerOrigin ?? DEFAULT_CONNECTIONS_PER_ORIGIN;
    this.#dispatcher =
      options.dispatcher ??
      new Agent({
        // Per origin: a burst of calls queues on these sockets instead of opening one each.
        connections,
        connect: createGuardedConnector(
          options.destinations ?? new DestinationPolicy(),
          options.resolver,
        ),
      });
    this.#ownsDispatcher = options.dispatcher === undefined;
    // The burst waits in `#slots` rather than in the Agent's queue, so that each
    // request is signed when it has a connection (`origin-slots.ts`).
    this.#slots = this.#ownsDispatcher ? new OriginSlots(connections) : undefined;
    this.#env = options.env ?? (() => process.env);
    this.#logger = options.logger ?? silentLogger;
    const qstashUrl = options.qstashUrl;
    this.#qstashUrl = qstashUrl === undefined || qstashUrl === '' ? DEFAULT_QSTASH_URL : qstashUrl;
    if (options.globalDispatcher === true) {
      // Node's own fetch reads the dispatcher undici's setGlobalDispatcher
      // installs (it sets both the current and the legacy global symbol).
      this.#previousGlobal = getGlobalDispatcher();
      setGlobalDispatcher(this.#dispatcher);
    }
  }

  /**
   * Sends a notification. With `delivery: fetch` it resolves as soon as the
   * response status is known, with `ok` for any 2xx and `http_error` for any
   * other status (3xx included); the body is never read but discarded in the
   * background. With `delivery: qstash` it publishes to QStash (see
   * {@link WebhookSender.publish}) and, when that fails, makes one plain
   * `POST` unless the hook says `fallback: none`. `route` tells which path
   * delivered. `trace`, when tracing is on, is the delivery's span, whose
   * context the request carries (forwarded by QStash). Never throws.
   */
  async notify(
    webhook: Webhook,
    payload: JsonObject | EncodedJson,
    signal?: AbortSignal,
    trace?: DeliverySpan,
  ): Promise<DeliveryResult> {
    if (webhook.delivery !== Delivery.QSTASH) {
      return this.#fetch(webhook, payload, signal, 'fetch', undefined, trace);
    }
    const startedAt = performance.now();
    // One message, one id: the fallback resend carries the publish's `webhook-id`.
    const messageId = newMessageId();
    const published = await this.#publish(webhook, payload, signal, messageId, trace);
    if (published.ok) return { ok: true, route: 'qstash', durationMs: published.durationMs };
    const { failure } = published;
    if (!published.fallsBack || webhook.fallback === Fallback.NONE) {
      return extend(failure, { route: 'qstash' });
    }
    this.#logger.warn('QStash delivery failed, falling back to fetch', {
      code: failure.code,
      httpStatus: failure.status,
      message: failure.message,
    });
    const fallback = await this.#fetch(webhook, payload, signal, 'fallback', messageId, trace);
    return extend(fallback, { durationMs: performance.now() - startedAt });
  }

  /**
   * Publishes a notification to QStash with the SDK's
   * `publishJSON({url, body, headers, timeout})`, once: the URL resolved
   * against `APP_URL || INTERNAL_APP_URL`, the hook's resolved headers
   * (QStash forwards them as `Upstash-Forward-*`) plus
   * `x-vercel-protection-bypass` when the target has the origin of `APP_URL`
   * or `INTERNAL_APP_URL`, and the hook's timeout in seconds (default 30) as
   * QStash's destination timeout. Success means QStash acknowledged the
   * message. No fallback: {@link WebhookSender.notify} decides that.
   *
   * Failures: `configuration` (`QSTASH_TOKEN not available`, or a URL, header
   * or timeout that cannot be sent; no request made), `http_error` (`QStash
   * publish failed (HTTP n)`), `network_error` (`QStash publish failed`),
   * `timeout` (no acknowledgement within the hook's timeout: `QStash publish
   * not sent after n ms` while the request still waited for a connection,
   * `QStash publish unanswered after n ms` once it was written) and
   * `cancelled`. The timeout and the caller's abort abort the request itself:
   * a request not yet written is never sent, and a late acknowledgement is
   * never read. Never throws.
   */
  async publish(
    webhook: Webhook,
    payload: JsonObject,
    signal?: AbortSignal,
  ): Promise<PublishResult> {
    const published = await this.#publish(webhook, payload, signal, newMessageId());
    return published.ok ? published : published.failure;
  }

  /**
   * {@link WebhookSender.publish}, telling whether a failure falls back to
   * fetch. A missing token and a publish QStash provably did not accept do:
   * an error status, a network error (contract §4.2: every SDK error falls
   * back) and a timeout before the request was written. A timeout after it
   * was written does not: QStash may hold the message, and a fetch could
   * deliver it twice. A cancelled call sends nothing more, and an unsendable
   * URL, header or timeout is resolved before QStash is tried (as upstream),
   * so neither does.
   */
  async #publish(
    webhook: Webhook,
    payload: JsonObject | EncodedJson,
    signal: AbortSignal | undefined,
    messageId: string,
    trace?: DeliverySpan,
  ): Promise<
    { ok: true; durationMs: number } | { ok: false; failure: DeliveryFailure; fallsBack: boolean }
  > {
    const startedAt = performance.now();
    const final = (failure: DeliveryFailure) => ({ ok: false as const, failure, fallsBack: false });
    const fallsBack = (failure: DeliveryFailure) => ({
      ok: false as const,
      failure,
      fallsBack: true,
    });
    if (signal?.aborted === true) return final(deliveryFailure('cancelled', startedAt));
    let env: Readonly<Record<string, string | undefined>>;
    let url: URL;
    let headers: Record<string, string>;
    let timeoutMs: number;
    try {
      env = this.#env();
    } catch {
      return final(deliveryFailure('configuration', startedAt, 'environment is unreadable'));
    }
    try {
      // In registration's order (`checkWebhook`), so both name the same rule first.
      url = resolveWebhookUrl(webhook.url, firstOf(env, QSTASH_BASE_URL_VARS));
      timeoutMs = timeoutMillis(webhook.timeout);
      headers = resolveHeaders(webhook, env);
    } catch (e: unknown) {
      if (e instanceof DeliveryError) return final(errorFailure(e, startedAt));
      return final(deliveryFailure('configuration', startedAt));
    }
    const token = env[QSTASH_TOKEN_VAR];
    if (token === undefined || token === '') {
      return fallsBack(deliveryFailure('configuration', startedAt, QSTASH_NO_TOKEN));
    }
    if (!isValidHeaderValue(token)) {
      // It would go into the Authorization header; the value is never quoted.
      return fallsBack(deliveryFailure('configuration', startedAt, QSTASH_INVALID_TOKEN));
    }
    const bypass = env[VERCEL_BYPASS_SECRET_VAR];
    if (bypass !== undefined && bypass !== '' && isApplicationOrigin(url, env)) {
      headers[VERCEL_BYPASS_HEADER] = bypass;
    }
    // QStash forwards it to the receiver (`Upstash-Forward-traceparent`).
    trace?.inject(headers);
    // The signature covers the exact text QStash forwards, so it is written here once;
    // the SDK forwards the signature headers as `Upstash-Forward-webhook-*`.
    let text: string;
    try {
      text = payload instanceof EncodedJson ? payload.text : JSON.stringify(payload);
    } catch {
      return final(deliveryFailure('configuration', startedAt, 'payload is not serializable'));
    }
    const signing = signerOf(webhook, url.origin, env);
    if (signing instanceof SignFailure) {
      return final(extend(signing.failure, { durationMs: performance.now() - startedAt }));
    }
    signing?.apply(text, headers, messageId);
    // A publish that waited for a connection to QStash goes out only if the rule, decided
    // again then, still declares the keys it was signed with: else the fetch fallback
    // decides it afresh.
    const stillSigned = () => {
      try {
        const again = signerOf(webhook, url.origin, this.#env());
        return !(again instanceof SignFailure) && Signing.stillValid(signing, again);
      } catch {
        return false;
      }
    };

    const deadline = requestDeadline(timeoutMs, signal);
    const progress: PublishProgress = { written: false };
    try {
      const client = this.#qstashClient(token, deadline.signal, progress, stillSigned);
      const timeout = webhook.timeout ?? DEFAULT_TIMEOUT_SECONDS;
      await client.publish({
        url: url.href,
        body: text,
        headers: publishHeaders(headers),
        timeout,
      });
      return { ok: true, durationMs: performance.now() - startedAt };
    } catch (e: unknown) {
      // The caller's abort wins over the timeout, as for fetch delivery.
      if (isAborted(signal)) return final(deliveryFailure('cancelled', startedAt));
      if (e instanceof SigningChangedError) {
        return fallsBack(deliveryFailure('configuration', startedAt, SIGNING_CHANGED));
      }
      if (!deadline.timedOut()) return fallsBack(qstashFailure(e, startedAt));
      if (!progress.written) {
        return fallsBack(
          deliveryFailure('timeout', startedAt, `QStash publish not sent after ${timeoutMs} ms`),
        );
      }
      return final(
        deliveryFailure('timeout', startedAt, `QStash publish unanswered after ${timeoutMs} ms`),
      );
    } finally {
      deadline.release();
    }
  }

  /**
   * Sends a webhook and returns a 2xx response with its body unread, for a
   * caller that reads the body (a control); see {@link postWebhook}. Any
   * other status is an `http_error` whose body is discarded unread. `trace`
   * is the delivery's span when tracing is on. Never throws.
   */
  async post(
    webhook: Webhook,
    payload: JsonObject | EncodedJson,
    signal?: AbortSignal,
    messageId?: string,
    trace?: DeliverySpan,
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
      currentEnv: this.#env,
      signal,
      discard: (body) => this.#discard(body),
      messageId,
      trace,
      slots: this.#slots,
    });
  }

  /**
   * Stops the sender: bodies still being discarded are dropped, requests in
   * flight finish, the global dispatcher it installed is put back, and the
   * owned `Agent` closes its connections. Later sends fail with
   * `network_error`. Calling it again returns the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    for (const { body } of this.#discarding.drain()) destroyUnread(body);
    if (this.#previousGlobal !== undefined && getGlobalDispatcher() === this.#dispatcher) {
      setGlobalDispatcher(this.#previousGlobal);
    }
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  /** One plain `POST` whose body is discarded unread. */
  async #fetch(
    webhook: Webhook,
    payload: JsonObject | EncodedJson,
    signal: AbortSignal | undefined,
    route: 'fetch' | 'fallback',
    messageId?: string,
    trace?: DeliverySpan,
  ): Promise<DeliveryResult> {
    const response = await this.post(webhook, payload, signal, messageId, trace);
    if (!response.ok) return route === 'fetch' ? response : extend(response, { route });
    this.#discard(response.body);
    return {
      ok: true,
      route,
      status: response.status,
      durationMs: performance.now() - response.startedAt,
    };
  }

  /**
   * An SDK client for one publish: the SDK builds the request, and its HTTP
   * layer is replaced by {@link createPublishRequester}, which sends it on
   * the sender's dispatcher under `signal` and records in `progress` whether
   * it was written. The SDK's own HTTP layer calls the global `fetch` without
   * an abort signal. Building a client costs a few microseconds.
   */
  #qstashClient(
    token: string,
    signal: RequestSignal,
    progress: PublishProgress,
    stillSigned: () => boolean,
  ): QStashClient {
    const client = new QStashClient({
      baseUrl: this.#qstashUrl,
      token,
      // The SDK's HTTP layer is replaced below; should it ever be used, it does not retry.
      retry: false,
      enableTelemetry: false,
      // Dev mode downloads and starts a local QStash server; false also
      // ignores QSTASH_DEV in the process environment.
      devMode: false,
    });
    client.http = createPublishRequester({
      dispatcher: this.#dispatcher,
      baseUrl: this.#qstashUrl,
      token,
      signal,
      progress,
      stillSigned,
    });
    return client;
  }

  /** Discards a body in the background, tracked so that `close()` can drop it. */
  #discard(body: Dispatcher.ResponseData['body']): void {
    const discarded: DiscardedBody = { body, liveSlot: -1 };
    this.#discarding.add(discarded);
    void discardBody(body).then(() => this.#discarding.delete(discarded));
  }
}

function deliveryMessage(code: DeliveryErrorCode, diagnostic: string | undefined): string {
  return diagnostic === undefined || diagnostic === ''
    ? `${MESSAGE_PREFIX}: ${code}`
    : `${MESSAGE_PREFIX}: ${code}: ${diagnostic}`;
}

/** The `configuration` error of a broken webhook rule. */
function ruleError(violation: WebhookRuleViolation): DeliveryError {
  return new DeliveryError('configuration', violation.diagnostic, { rule: violation.reason });
}

/** A URL the environment cannot resolve: the URL rule, applied at send time. */
function urlError(diagnostic: string): DeliveryError {
  return new DeliveryError('configuration', diagnostic, {
    rule: WEBHOOK_RULE_REASON.INVALID_WEBHOOK_URL,
  });
}

/** The failure of a {@link DeliveryError} raised before a request was made. */
function errorFailure(e: DeliveryError, startedAt: number): DeliveryFailure {
  const failure: DeliveryFailure = extend(deliveryFailure(e.code, startedAt), {
    message: e.message,
  });
  if (e.rule !== undefined) failure.rule = e.rule;
  return failure;
}

function isSuccess(status: number): boolean {
  return status >= 200 && status <= 299;
}

/** A hook that must not be sent: its signing rule failed. */
class SignFailure {
  constructor(readonly failure: DeliveryFailure) {}
}

/** What signs a request: the keys of the secret that applies to it, at the time it is sent. */
class Signing {
  constructor(readonly keys: readonly SigningKey[]) {}

  /** Adds the signature headers of `body` (exactly the text sent) to `headers`, timestamped now. */
  apply(body: string, headers: Record<string, string>, messageId: string | undefined): void {
    Object.assign(headers, signatureHeaders(this.keys, messageId ?? newMessageId(), body));
  }

  /**
   * Whether a request signed with `used` may still go out under the rule of
   * now, `now`: both unsigned, or every key it was signed with still declared
   * (a key added for a rotation leaves it valid; a key removed does not).
   */
  static stillValid(used: Signing | undefined, now: Signing | undefined): boolean {
    if (used === undefined || now === undefined) return used === now;
    return used.keys.every((key) => now.keys.some((k) => k.equals(key)));
  }
}

/**
 * The hook's signing rule for a request to `origin`, decided before the
 * request waits for anything: a {@link SignFailure} for a hook that must not
 * be sent (its secret undeclared or not bound, or the declaration invalid),
 * `undefined` for one sent unsigned, else the {@link Signing} to apply once
 * the request goes out (its `webhook-timestamp` is then the time it is sent).
 */
function signerOf(
  webhook: Webhook,
  origin: string,
  env: Readonly<Record<string, string | undefined>>,
): Signing | SignFailure | undefined {
  let decision: ReturnType<typeof checkSigningSecret>;
  try {
    decision = checkSigningSecret(webhook, origin, signingSecrets(env));
  } catch {
    // The declaration is invalid; its error (never a secret) is the environment's to report.
    return new SignFailure(deliveryFailure('configuration', performance.now(), SIGNING_INVALID));
  }
  if (isSigningViolation(decision)) {
    return new SignFailure(violationFailure(decision, performance.now()));
  }
  return decision.sign ? new Signing(decision.keys) : undefined;
}

/** {@link signerOf} against the environment as it is now (`currentEnv`, else `env`). */
function signerNow(
  webhook: Webhook,
  origin: string,
  options: Pick<PostWebhookOptions, 'env' | 'currentEnv'>,
): Signing | SignFailure | undefined {
  let env: Readonly<Record<string, string | undefined>>;
  try {
    env = options.currentEnv?.() ?? options.env;
  } catch {
    return new SignFailure(
      deliveryFailure('configuration', performance.now(), 'environment is unreadable'),
    );
  }
  return signerOf(webhook, origin, env);
}

/** Base of application-relative URLs for fetch delivery: `INTERNAL_APP_URL || APP_URL`. */
function baseUrl(env: Readonly<Record<string, string | undefined>>): string | undefined {
  return firstOf(env, BASE_URL_VARS);
}

/** The value of the first variable of `names` that is set and not empty. */
function firstOf(
  env: Readonly<Record<string, string | undefined>>,
  names: readonly string[],
): string | undefined {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value !== '') return value;
  }
  return undefined;
}

/** True when `url` has the origin of `APP_URL` or of `INTERNAL_APP_URL` (contract §4.2). */
function isApplicationOrigin(url: URL, env: Readonly<Record<string, string | undefined>>): boolean {
  return QSTASH_BASE_URL_VARS.some((name) => {
    const base = env[name];
    if (base === undefined || base === '') return false;
    try {
      return new URL(base).origin === url.origin;
    } catch {
      return false;
    }
  });
}

/** Whether a publish request reached the socket, filled in by {@link createPublishRequester}. */
interface PublishProgress {
  /**
   * True once the request was handed to a connection to be written: from
   * then on QStash may have received it. Before, aborting it means it is
   * never sent.
   */
  written: boolean;
}

/** What {@link createPublishRequester} needs. */
interface PublishRequesterOptions {
  /** Dispatcher the publish goes through: the sender's. */
  readonly dispatcher: Dispatcher;
  /** QStash API base URL. */
  readonly baseUrl: string;
  /** QStash token, sent as `Authorization: Bearer <token>`. */
  readonly token: string;
  /** Aborts the request: the hook's timeout or the caller's cancellation. */
  readonly signal: RequestSignal;
  /** Where the requester records that the request was written. */
  readonly progress: PublishProgress;
  /** Whether the request, signed before it waited for a connection, may still go out. */
  readonly stillSigned: () => boolean;
}

/** The SDK's HTTP layer, as `Client.http` types it. */
type QStashRequester = QStashClient['http'];

/** A publish dropped before it was written: its signing rule changed while it waited. */
class SigningChangedError extends Error {
  override readonly name = 'SigningChangedError';

  constructor() {
    super(SIGNING_CHANGED);
  }
}

/**
 * The publish's own headers from the hook's resolved ones (lower-cased names).
 * The hook's `content-type`, as fetch sends it, is the publish's, which QStash
 * forwards (else JSON's). The SDK forwards every other header as
 * `Upstash-Forward-<name>` except one named `content-type...`: such a one is
 * forwarded here, so it reaches the receiver as the fetch path sends it.
 */
function publishHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name === 'content-type') continue;
    out[name.startsWith('content-type') ? `upstash-forward-${name}` : name] = value;
  }
  out['content-type'] = headers['content-type'] ?? JSON_CONTENT_TYPE;
  return out;
}

/** A QStash answer outside 2xx; carries only the status, never the response. */
class PublishStatusError extends Error {
  override readonly name = 'PublishStatusError';
  readonly status: number;

  constructor(status: number) {
    super(`QStash answered HTTP ${status}`);
    this.status = status;
  }
}

/**
 * Returns the HTTP layer of an SDK client for one publish. It sends the
 * request the SDK built as the SDK's own layer would (`<baseUrl>/<path>`, the
 * SDK's headers plus `Authorization: Bearer <token>` unless set, the body as
 * given), once, through `dispatcher`, and settles when the answer is
 * complete: resolves on a 2xx, rejects with {@link PublishStatusError} on any
 * other status and with the transport's error on a network failure. When
 * `signal` aborts it rejects at once and aborts the request: one still
 * waiting for a connection is dropped unwritten when it gets one, one written
 * has its connection closed, so a late acknowledgement is never read. The
 * response body is not read: QStash's message id is not used.
 */
function createPublishRequester(options: PublishRequesterOptions) {
  const { dispatcher, signal, progress } = options;
  const authorization = `Bearer ${options.token}`;
  const base = options.baseUrl.replace(/\/$/, '');
  const request = (req: Parameters<QStashRequester['request']>[0]) =>
    new Promise<never>((resolve, reject) => {
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      let settled = false;
      const settle = (e: unknown) => {
        if (settled) return;
        settled = true;
        signal.off('abort', onAbort);
        // An acknowledgement carries nothing the sender uses: `publishJSON` resolves empty.
        if (e === undefined) resolve(undefined as never);
        else reject(e);
      };
      const onAbort = () => {
        controller?.abort(new errors.RequestAbortedError());
        settle(signal.reason);
      };
      if (signal.aborted) {
        settle(signal.reason);
        return;
      }
      signal.once('abort', onAbort);
      let url: URL;
      const headers: Record<string, string> = {};
      try {
        if (typeof req.body !== 'string') throw new TypeError('publish body is not a string');
        url = new URL([req.baseUrl ?? base, ...req.path].join('/'));
        // The SDK passes a `Headers`; its type also admits an iterator of pairs, which `Headers` takes.
        const sdkHeaders = new Headers(req.headers as ConstructorParameters<typeof Headers>[0]);
        for (const [name, value] of sdkHeaders) headers[name] = value;
        headers.authorization ??= authorization;
      } catch (e: unknown) {
        settle(e);
        return;
      }
      dispatcher.dispatch(
        {
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: req.method ?? 'POST',
          headers,
          body: req.body,
          // The hook's timeout is the one timer, as for fetch delivery.
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        {
          onRequestStart(c) {
            controller = c;
            // Aborted while it waited for a connection: dropped before a byte is written.
            if (signal.aborted) c.abort(new errors.RequestAbortedError());
            // Its signing key removed or its origin unbound meanwhile: dropped likewise.
            else if (!options.stillSigned()) c.abort(new SigningChangedError());
            // undici writes a string body at once, after this call returns.
            else progress.written = true;
          },
          onResponseStart(_c, statusCode) {
            status = statusCode;
          },
          onResponseEnd() {
            settle(isSuccess(status) ? undefined : new PublishStatusError(status));
          },
          onResponseError(_c, e) {
            settle(e);
          },
        },
      );
    });
  return {
    request,
    requestStream(): never {
      throw new TypeError('QStash streaming is not used by agenthooks');
    },
    // `publishJSON` reads the token from here for its API targets (not used by agenthooks).
    authorization,
  } satisfies QStashRequester & { authorization: string };
}

/**
 * Maps a QStash publish failure: an error carrying an HTTP status
 * ({@link PublishStatusError}, rate limits included) is `http_error`,
 * anything else `network_error`. No message, response text or cause is
 * kept. Matched on the `status` property, not `instanceof`.
 */
function qstashFailure(e: unknown, startedAt: number): DeliveryFailure {
  const status = e instanceof Error ? (e as { status?: unknown }).status : undefined;
  if (
    typeof status === 'number' &&
    Number.isInteger(status) &&
    status >= MIN_HTTP_STATUS &&
    status <= MAX_HTTP_STATUS
  ) {
    return deliveryFailure(
      'http_error',
      startedAt,
      `${QSTASH_PUBLISH_FAILED} (HTTP ${status})`,
      status,
    );
  }
  return deliveryFailure('network_error', startedAt, QSTASH_PUBLISH_FAILED);
}

/**
 * The abort signal of one request, in the shape undici's `request` also
 * takes: an `EventEmitter` with `aborted` and `reason`. An `AbortSignal` is
 * an `EventTarget`, whose listeners and `abort` event cost several times
 * more per request (measured in the bench's profile of a one-control
 * decision), and every request makes one.
 */
class RequestSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  /** Aborts once: sets `reason` and emits `abort`. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/** The abort signal of one request: the caller's signal or the hook's timeout, whichever fires first. */
interface RequestDeadline {
  readonly signal: RequestSignal;
  /** True when the timeout fired. */
  timedOut(): boolean;
  /** Clears the timer and the listener on the caller's signal; call once the request is over. */
  release(): void;
}

/**
 * Returns a request's deadline. Unlike `AbortSignal.timeout` combined with
 * `AbortSignal.any`, it holds no timer and no listener on a long-lived
 * caller signal (a stream's) once released, so finished requests cost
 * nothing: with a 30 s default timeout, thousands of requests a second would
 * otherwise keep tens of thousands of timers alive.
 */
function requestDeadline(timeoutMs: number, parent: AbortSignal | undefined): RequestDeadline {
  const signal = new RequestSignal();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    signal.abort(new DOMException('the webhook timed out', 'TimeoutError'));
  }, timeoutMs);
  const onParentAbort = () => signal.abort(parent?.reason);
  let unsubscribe: (() => void) | undefined;
  if (parent?.aborted === true) onParentAbort();
  else if (parent !== undefined) unsubscribe = onAbort(parent, onParentAbort);
  return {
    signal,
    timedOut: () => timedOut,
    release() {
      clearTimeout(timer);
      unsubscribe?.();
    },
  };
}

/** A body being discarded in the background, in its sender's {@link LiveSlots}. */
interface DiscardedBody extends Slotted {
  readonly body: Dispatcher.ResponseData['body'];
}

/** Where a caller signal keeps the callbacks of the requests waiting on it. */
const ABORT_WAITERS = Symbol('agenthooks.abortWaiters');

/** A request waiting on a caller signal, in the signal's {@link LiveSlots}. */
interface AbortWaiter extends Slotted {
  readonly callback: () => void;
}

/** A caller signal with its waiting requests' callbacks, behind one listener. */
type WaitedSignal = AbortSignal & { [ABORT_WAITERS]?: LiveSlots<AbortWaiter> };

/**
 * Calls `callback` when `signal` aborts; returns the function that stops
 * waiting. However many requests wait on one signal (a stream's, with many
 * events in flight), the signal gets one listener, so none piles up past
 * Node's `MaxListenersExceededWarning` limit.
 *
 * The callbacks live on the signal itself, not in a `WeakMap` keyed by it:
 * every unary call has its own signal, and on Node 20 (V8 11.3) a `WeakMap`
 * entry per short-lived key drives objects out of the young generation.
 * Measured here: two million entries whose keys died at once promoted
 * 16 MB and ran 17 mark-compacts, against 2 MB and 5 for the same objects
 * without the map.
 */
function onAbort(signal: AbortSignal, callback: () => void): () => void {
  const waited = signal as WaitedSignal;
  let waiters = waited[ABORT_WAITERS];
  if (waiters === undefined) {
    const created = new LiveSlots<AbortWaiter>();
    waiters = created;
    waited[ABORT_WAITERS] = created;
    signal.addEventListener(
      'abort',
      () => {
        for (const waiter of created.drain()) waiter.callback();
      },
      { once: true },
    );
  }
  // In slots, not a `Set`: a stream's signal lives long and sees a waiter
  // come and go per request (see `live-slots.ts`).
  const slots = waiters;
  const waiter: AbortWaiter = { callback, liveSlot: -1 };
  slots.add(waiter);
  return () => slots.delete(waiter);
}

/** True once `signal` has aborted (a call, so that TypeScript does not narrow it across awaits). */
function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

/** What {@link untilAborted} resolves to when the signal fires first. */
const ABORTED: unique symbol = Symbol('aborted');

/**
 * Settles like `promise`, or resolves to {@link ABORTED} as soon as `signal`
 * aborts; `promise` keeps running either way and its rejection stays handled.
 */
function untilAborted<T>(promise: Promise<T>, signal: RequestSignal): Promise<T | typeof ABORTED> {
  return new Promise<T | typeof ABORTED>((resolve, reject) => {
    const onAbort = () => resolve(ABORTED);
    if (signal.aborted) onAbort();
    else signal.once('abort', onAbort);
    promise.then(
      (value) => {
        signal.off('abort', onAbort);
        resolve(value);
      },
      (e: unknown) => {
        signal.off('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** Milliseconds of a webhook timeout in seconds: `ceil(timeout * 1000)`, default 30 s. */
function timeoutMillis(seconds: number | undefined): number {
  const violation = checkWebhookTimeout(seconds);
  if (violation !== undefined) throw ruleError(violation);
  return Math.ceil((seconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000);
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
