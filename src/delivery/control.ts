/**
 * @module HTTP layer and response parser of control webhooks (hooks with
 * `responseHandling: toolCall`), upstream contract §3.
 *
 * {@link executeControl} sends one `POST` through a {@link WebhookSender} and
 * reads the answer: a non-2xx status is an `http_error` and its body is never
 * read; a 204 counts as an empty body; any other 2xx body is decoded as its
 * `content-encoding` says (gzip, deflate, br, as `fetch` does), read with a
 * hard cap of {@link RESPONSE_MAX_BYTES} decoded bytes, decoded as strict UTF-8 and handed to
 * {@link parseControlResponse}. The webhook's timeout covers the headers and
 * the body. A caller's abort always wins: a decision that arrives after it is
 * dropped. Results never hold response text, header values or secrets.
 */
import { performance } from 'node:perf_hooks';
import { Transform, type TransformCallback } from 'node:stream';
import {
  createBrotliDecompress,
  createGunzip,
  createInflate,
  createInflateRaw,
  type ZlibOptions,
  constants as zlibConstants,
} from 'node:zlib';
import type { JsonObject } from '@bufbuild/protobuf';
import { ResponseHandling, type Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { extend } from '../extend.js';
import type { DeliverySpan } from '../tracing/tracing.js';
import {
  type DeliveryErrorCode,
  type DeliveryFailure,
  deliveryFailure,
  destroyUnread,
  discardBody,
  violationFailure,
  type WebhookResponse,
  type WebhookSender,
} from './webhook.js';
import { checkControlDelivery, type WebhookRuleReason } from './webhook-rules.js';

/** Largest control response body in bytes (`AGENT_HOOK_RESPONSE_MAX_BYTES`, 64 KiB). */
export const RESPONSE_MAX_BYTES = 65_536;

/** A 2xx status whose body is treated as empty, unread (contract §3). */
const NO_CONTENT = 204;

/** Key of the decision in a response object. */
const DECISION_KEY = 'decision';

/** Key of a deny's optional reason in a response object. */
const REASON_KEY = 'reason';

/** Strict UTF-8: invalid bytes throw rather than become U+FFFD. A leading BOM is dropped. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A decimal `content-length` value. */
const DECIMAL = /^\d+$/;

/** Diagnostic of a body over {@link RESPONSE_MAX_BYTES}. */
const TOO_LARGE = `over ${RESPONSE_MAX_BYTES} bytes`;

/** Diagnostic of a body that is not UTF-8. */
const NOT_UTF8 = 'body is not valid UTF-8';
/** Message of a body whose `content-encoding` does not decode. */
const UNDECODABLE = 'body does not decode as its content-encoding says';
/** Most codings a `content-encoding` may stack, as `fetch` allows (undici's bound). */
const MAX_CODINGS = 5;
/** Message of a body with more codings than fetch takes. */
const TOO_MANY_CODINGS = `more than ${MAX_CODINGS} content-encodings`;

/** Diagnostic of a `decision` that is not a valid allow or deny. */
const INVALID_DECISION = 'invalid decision';

/** What a control webhook decided about a tool call. */
export type ControlDecision =
  | { readonly decision: 'allow' }
  | { readonly decision: 'deny'; readonly reason?: string };

/**
 * Outcome of one control webhook. `success` carries a decision; `ignored` is
 * a notification response (no decision: continue with the next control,
 * `onError` not consulted); `error` follows the hook's `onError`; `cancelled`
 * never grants permission. `durationMs` runs from the start of the request.
 */
export type ControlResult =
  | { status: 'success'; decision: ControlDecision; httpStatus: number; durationMs: number }
  | { status: 'ignored'; httpStatus: number; durationMs: number }
  | {
      status: 'error';
      code: DeliveryErrorCode;
      message: string;
      httpStatus?: number;
      durationMs: number;
      /** The webhook rule that refused the request; see `DeliveryFailure.rule`. */
      rule?: WebhookRuleReason;
    }
  | { status: 'cancelled'; durationMs: number };

/** Result of {@link parseControlResponse}. */
export type ParsedControlResponse =
  | { status: 'success'; decision: ControlDecision }
  | { status: 'ignored' }
  | { status: 'error'; code: 'response_too_large' | 'invalid_response' };

/**
 * What {@link executeControl} needs of a {@link WebhookSender}: its `post`.
 * A `WebhookSender` is one.
 */
export type ControlSender = Pick<WebhookSender, 'post'>;

/**
 * Parses a decoded control response body (upstream `parseToolCallHookResponse`).
 * Pure; never throws.
 *
 * - More than {@link RESPONSE_MAX_BYTES} UTF-8 bytes: `response_too_large`.
 * - Not JSON, JSON that is not an object, or an object without an own
 *   `decision` key: `ignored` (a notification response).
 * - `decision` present: `{decision:'allow'}` or `{decision:'deny', reason?: string}`
 *   is a `success`, other keys dropped (an allow's `reason` too); anything
 *   else is `invalid_response`. An empty reason stays `''`.
 *
 * @example
 * parseControlResponse('{"decision":"deny","reason":"no"}');
 * // { status: 'success', decision: { decision: 'deny', reason: 'no' } }
 * parseControlResponse('{"hookSpecificOutput":{}}'); // { status: 'ignored' }
 */
export function parseControlResponse(text: string): ParsedControlResponse {
  if (Buffer.byteLength(text, 'utf8') > RESPONSE_MAX_BYTES) {
    return { status: 'error', code: 'response_too_large' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { status: 'ignored' };
  }
  // JSON.parse makes `__proto__` an own data key, never the prototype, so
  // Object.hasOwn sees only the keys the receiver sent.
  if (!isJsonObject(value) || !Object.hasOwn(value, DECISION_KEY)) return { status: 'ignored' };
  const decision = value[DECISION_KEY];
  if (decision === 'allow') return { status: 'success', decision: { decision: 'allow' } };
  if (decision === 'deny') {
    if (!Object.hasOwn(value, REASON_KEY)) {
      return { status: 'success', decision: { decision: 'deny' } };
    }
    const reason = value[REASON_KEY];
    if (typeof reason === 'string') return { status: 'success', decision: { decision, reason } };
  }
  return { status: 'error', code: 'invalid_response' };
}

/**
 * POSTs a control payload and reads the receiver's decision. Never throws.
 *
 * Errors: `configuration` (no request sent, also for a webhook that is not a
 * fetch-delivered `toolCall` hook), `http_error` (any non-2xx, 3xx included;
 * the body is not read), `response_too_large` (reading stops with the first
 * chunk that goes past {@link RESPONSE_MAX_BYTES}, or at once for a larger
 * `content-length`), `invalid_response` (bad UTF-8 or an invalid decision),
 * `timeout` (headers and body), `network_error` (including a reset mid-body).
 * An abort of `signal` at any point, even after the body arrived, is
 * `cancelled`.
 *
 * @example
 * const result = await executeControl(sender, hook.webhook, payload, signal);
 * if (result.status === 'success' && result.decision.decision === 'deny') block(result.decision.reason);
 */
export async function executeControl(
  sender: ControlSender,
  webhook: Webhook,
  payload: JsonObject,
  signal?: AbortSignal,
  trace?: DeliverySpan,
): Promise<ControlResult> {
  const startedAt = performance.now();
  if (signal?.aborted === true) return cancelled(startedAt);
  // A notification's response is never parsed (contract §3), and QStash
  // cannot carry a response: a control is a direct fetch with toolCall.
  if (webhook.responseHandling !== ResponseHandling.TOOL_CALL) {
    return fromFailure(deliveryFailure('configuration', startedAt, 'not a toolCall webhook'));
  }
  const fetchOnly = checkControlDelivery(webhook);
  if (fetchOnly !== undefined) return fromFailure(violationFailure(fetchOnly, startedAt));
  let response: WebhookResponse | DeliveryFailure;
  try {
    response = await sender.post(webhook, payload, signal, undefined, trace);
  } catch {
    // `post` never throws; a sender that does is a transport failure, not an allow.
    return settle(deliveryFailure('network_error', startedAt), signal);
  }
  if (!response.ok) return settle(response, signal);
  return settle(await readDecision(response, signal), signal);
}

/** Reads, decodes and parses a 2xx body; the failure keeps the HTTP status. */
async function readDecision(
  response: WebhookResponse,
  signal: AbortSignal | undefined,
): Promise<ControlResult | DeliveryFailure> {
  const { status, startedAt } = response;
  let text: string;
  if (status === NO_CONTENT) {
    void discardBody(response.body);
    text = '';
  } else {
    const read = await readBounded(response);
    if (!(read instanceof Uint8Array)) return read;
    try {
      text = UTF8.decode(read);
    } catch {
      return deliveryFailure('invalid_response', startedAt, NOT_UTF8, status);
    }
  }
  // A decision that arrives after the caller gave up is dropped (contract §3).
  if (signal?.aborted === true) return cancelled(startedAt);
  const parsed = parseControlResponse(text);
  const durationMs = performance.now() - startedAt;
  switch (parsed.status) {
    case 'success':
      return { status: 'success', decision: parsed.decision, httpStatus: status, durationMs };
    case 'ignored':
      return { status: 'ignored', httpStatus: status, durationMs };
    case 'error':
      return deliveryFailure(
        parsed.code,
        startedAt,
        parsed.code === 'response_too_large' ? TOO_LARGE : INVALID_DECISION,
        status,
      );
  }
}

/**
 * Reads a body of at most `maxBytes` (default {@link RESPONSE_MAX_BYTES})
 * bytes, decoded as its `content-encoding` says (see {@link decodersOf} and
 * {@link readCapped}). A plain body that declares more is refused unread.
 */
export function readBounded(
  response: WebhookResponse,
  maxBytes = RESPONSE_MAX_BYTES,
): Promise<Uint8Array | DeliveryFailure> {
  const { body, status, startedAt } = response;
  const decoders = decodersOf(response.headers['content-encoding']);
  if (decoders === 'too_many') {
    destroyUnread(body);
    return Promise.resolve(
      deliveryFailure('invalid_response', startedAt, TOO_MANY_CODINGS, status),
    );
  }
  // The declared length is of the body on the wire: it bounds a plain body only.
  const declared = response.headers['content-length'];
  if (
    decoders === undefined &&
    typeof declared === 'string' &&
    DECIMAL.test(declared) &&
    Number(declared) > maxBytes
  ) {
    destroyUnread(body);
    return Promise.resolve(
      deliveryFailure('response_too_large', startedAt, `over ${maxBytes} bytes`, status),
    );
  }
  return readCapped(response, decoders ?? [], maxBytes);
}

/**
 * Reads `response`'s body through `decoders` (none for a plain body), the cap
 * counting what comes out of them: decoded bytes, as the reference reads the
 * decoded body. Reading stops at the first chunk past the cap and destroys
 * the body (which closes the connection), so an endless body or a small bomb
 * is never read or inflated further. A body that does not decode is an
 * `invalid_response`.
 *
 * It listens to the streams' events rather than iterating them: an async
 * iterator costs a promise per chunk and `finished` bookkeeping per body,
 * which a decision on the hot path pays for nothing.
 */
function readCapped(
  response: WebhookResponse,
  decoders: readonly Transform[],
  maxBytes: number,
): Promise<Uint8Array | DeliveryFailure> {
  const { body, status, startedAt } = response;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let bodyEnded = false;
    /** Bytes of the body on the wire, counted only when decoders run. */
    let bodyBytes = 0;
    const settle = (result: Uint8Array | DeliveryFailure) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    // The error listeners stay: a stream destroyed with an error after the
    // end must not throw for want of one.
    const stop = () => {
      body.destroy();
      for (const decoder of decoders) decoder.destroy();
    };
    let source: NodeJS.ReadableStream = body;
    for (const decoder of decoders) {
      source.pipe(decoder);
      decoder.on('error', () => {
        // An empty body reads as empty whatever its coding says, as fetch reads it.
        settle(
          bodyBytes === 0 && bodyEnded
            ? Buffer.alloc(0)
            : deliveryFailure('invalid_response', startedAt, UNDECODABLE, status),
        );
        stop();
      });
      source = decoder;
    }
    source.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.byteLength;
      if (size > maxBytes) {
        settle(deliveryFailure('response_too_large', startedAt, `over ${maxBytes} bytes`, status));
        stop();
        return;
      }
      chunks.push(chunk);
    });
    source.once('end', () =>
      settle(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)),
    );
    if (decoders.length > 0) {
      body.on('data', (chunk: Buffer) => {
        bodyBytes += chunk.byteLength;
      });
    }
    body.once('end', () => {
      bodyEnded = true;
    });
    // The sender maps an abort, its timeout or a socket error to the right code.
    const onBodyError = (e: unknown) => {
      if (!settled) settle(extend(response.failure(e), { status }));
      stop();
    };
    body.on('error', onBodyError);
    // Closed without an end or an error: destroyed mid-body.
    body.once('close', () => {
      if (!bodyEnded) onBodyError(prematureClose());
    });
  });
}

/**
 * The decoders of a `content-encoding`, as `fetch` (the reference's reader)
 * applies them: the codings in reverse order, `gzip` (or `x-gzip`), `deflate`
 * (zlib-wrapped or raw) and `br`. `undefined` when there is nothing to decode,
 * and also when a coding is anything else (`identity` and an empty one
 * included): `fetch` then hands the body on as it came, and so does this.
 * More than {@link MAX_CODINGS} codings: `'too_many'`, which `fetch` refuses.
 */
function decodersOf(header: string | string[] | undefined): Transform[] | undefined | 'too_many' {
  if (header === undefined) return undefined;
  const codings = (Array.isArray(header) ? header.join(',') : header)
    .toLowerCase()
    .split(',')
    .map((c) => c.trim());
  if (codings.length > MAX_CODINGS) return 'too_many';
  const known = (c: string) => c === 'gzip' || c === 'x-gzip' || c === 'deflate' || c === 'br';
  if (!codings.every(known)) return undefined;
  return codings.reverse().map((coding) => {
    if (coding === 'br') return createBrotliDecompress();
    // Lenient on a stream cut short, as fetch is.
    const options = { flush: zlibConstants.Z_SYNC_FLUSH, finishFlush: zlibConstants.Z_SYNC_FLUSH };
    return coding === 'deflate' ? new InflateEither(options) : createGunzip(options);
  });
}

/**
 * `deflate` as fetch reads it: zlib-wrapped (RFC 1950) when the first byte
 * says so (compression method 8 in its low nibble), else raw (RFC 1951),
 * which many servers send under that name.
 */
class InflateEither extends Transform {
  readonly #options: ZlibOptions;
  #inner: Transform | undefined;

  constructor(options: ZlibOptions) {
    super();
    this.#options = options;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.#inner === undefined) {
      const inner =
        ((chunk[0] ?? 0) & 0x0f) === 0x08
          ? createInflate(this.#options)
          : createInflateRaw(this.#options);
      inner.on('data', (data: Buffer) => this.push(data));
      inner.once('error', (e) => this.destroy(e));
      this.#inner = inner;
    }
    this.#inner.write(chunk, () => done());
  }

  override _flush(done: TransformCallback): void {
    const inner = this.#inner;
    if (inner === undefined) {
      done();
      return;
    }
    inner.once('end', () => done());
    inner.end();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.#inner?.destroy();
    done(error);
  }
}

/** The error of a body that closed before its end, coded as Node's stream helpers code it. */
function prematureClose(): Error {
  return Object.assign(new Error('premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** Turns a failure into a result; the caller's abort wins over any outcome. */
function settle(
  outcome: ControlResult | DeliveryFailure,
  signal: AbortSignal | undefined,
): ControlResult {
  const result = 'ok' in outcome ? fromFailure(outcome) : outcome;
  // Cancellation never grants permission, and an error after an abort
  // would let onError: continue run on: a result nobody waits for is cancelled.
  if (signal?.aborted === true && result.status !== 'cancelled') {
    return { status: 'cancelled', durationMs: result.durationMs };
  }
  return result;
}

function fromFailure(failure: DeliveryFailure): ControlResult {
  const { code, message, status, durationMs, rule } = failure;
  if (code === 'cancelled') return { status: 'cancelled', durationMs };
  const result: ControlResult = { status: 'error', code, message, durationMs };
  if (status !== undefined) result.httpStatus = status;
  if (rule !== undefined) result.rule = rule;
  return result;
}

function cancelled(startedAt: number): ControlResult {
  return { status: 'cancelled', durationMs: performance.now() - startedAt };
}

/** True for what JSON.parse makes of a `{…}`: a non-null, non-array object. */
function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
