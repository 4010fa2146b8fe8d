/**
 * @module The one guard around every service, whatever the transport: it
 * admits a call (bearer token, draining), times it, records its metrics
 * under the code the client receives, and turns every failure into a
 * `ConnectError` with a `google.rpc.ErrorInfo` (see `errors.ts`). Failures
 * of the sidecar itself (INTERNAL, UNAVAILABLE, DATA_LOSS, UNKNOWN) are
 * logged once per failed call with their cause; a client's own errors are
 * not logged. grpc-js and connect-node serve the guarded implementation
 * as it is, so both answer the same status for the same call.
 */
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { AgentHooksError } from '../errors.js';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { RequestHeaders, RpcSpan, Tracing } from '../tracing/tracing.js';
import {
  BEFORE_ANSWER,
  BEFORE_REQUEST,
  codeName,
  deadlineExceeded,
  isServerSide,
  RefusedRequest,
  toConnectError,
  unimplementedError,
} from './errors.js';
import { attachSink, type SinkTarget, type StreamSink } from './stream-sink.js';

/** Checks a call before it runs; a thrown error answers the call. */
export type Admission = (method: DescMethod, ctx: HandlerContext) => void;

/** Options of {@link guardService}. */
export interface GuardOptions {
  /** Where server-side failures are logged. */
  readonly logger: Logger;
  /** Records each call's code and latency when set. */
  readonly metrics?: Metrics;
  /** Runs before each call (token, draining). */
  readonly admit?: Admission;
  /** Told about each server-side failure (for example to check the store at once). */
  readonly onServerError?: (e: unknown) => void;
  /**
   * Makes a server span per call, the child of the caller's `traceparent`.
   * Without it (tracing off) the guard serves the plain methods: no span, no
   * context, not even a check per call.
   */
  readonly tracing?: Tracing | undefined;
  /** Counts the calls admitted and not yet ended, so that a drain can wait for them. */
  readonly calls?: CallCount | undefined;
}

/** What a guard tells of the calls it runs: each admitted call enters once and leaves once. */
export interface CallCount {
  enter(): void;
  leave(): void;
}

/** A method of a service implementation, as both transports call it. */
// biome-ignore lint/suspicious/noExplicitAny: each method keeps the signature ServiceImpl gives it.
type AnyMethod = (request: any, ctx: HandlerContext) => any;

/**
 * Returns `impl` wrapped in the guard, with every method of `service`
 * present: a method `impl` lacks answers UNIMPLEMENTED through the guard.
 *
 * @example
 * const guarded = guardService(HookService, impl, { logger, metrics, admit });
 * router.service(HookService, guarded);
 */
export function guardService<S extends DescService>(
  service: S,
  impl: Partial<ServiceImpl<S>>,
  options: GuardOptions,
): ServiceImpl<S> {
  const guarded: Record<string, AnyMethod> = {};
  const { tracing } = options;
  for (const method of service.methods) {
    const fn = (impl as Record<string, AnyMethod | undefined>)[method.localName];
    const unary = method.methodKind === 'unary' || method.methodKind === 'client_streaming';
    const plain = unary ? guardUnary(method, fn, options) : guardStream(method, fn, options);
    guarded[method.localName] =
      tracing === undefined
        ? plain
        : unary
          ? traceUnary(method, plain, tracing)
          : traceStream(method, plain, tracing);
  }
  return guarded as ServiceImpl<S>;
}

/**
 * Where the trace context of a call is read: the grpc-js adapter's reader
 * of single metadata values when it has one (no `Headers` built per call),
 * else the request headers.
 */
function traceHeaders(ctx: HandlerContext): RequestHeaders {
  const reader = (ctx as { requestHeaderReader?: RequestHeaders }).requestHeaderReader;
  return reader ?? ctx.requestHeader;
}

/** The guarded unary `plain` inside a server span; the span ends with the code the client gets. */
function traceUnary(method: DescMethod, plain: AnyMethod, tracing: Tracing): AnyMethod {
  return async function tracedUnary(request: unknown, ctx: HandlerContext) {
    const span = tracing.startRpc(method, ctx.protocolName, traceHeaders(ctx), ctx.signal);
    try {
      const response = await plain(request, ctx);
      span.end(OK);
      return response;
    } catch (e: unknown) {
      // The guard has mapped it: a ConnectError.
      const err = e as ConnectError;
      span.end(err.code, err.rawMessage);
      throw e;
    }
  };
}

/** The guarded streaming `plain` inside a server span that lasts as long as the stream. */
function traceStream(method: DescMethod, plain: AnyMethod, tracing: Tracing): AnyMethod {
  return function tracedStream(request: unknown, ctx: HandlerContext) {
    const span = tracing.startRpc(method, ctx.protocolName, traceHeaders(ctx), ctx.signal);
    const inner = (plain(request, ctx) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    return new TracedStream(inner, span);
  };
}

/** The responses of a traced stream: the end, a failure or an early return ends the span. */
class TracedStream implements AsyncIterableIterator<unknown>, SinkTarget<unknown> {
  readonly #inner: AsyncIterator<unknown>;
  readonly #span: RpcSpan;

  constructor(inner: AsyncIterator<unknown>, span: RpcSpan) {
    this.#inner = inner;
    this.#span = span;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  attachSink(sink: StreamSink<unknown>): void {
    attachSink(this.#inner, sink);
  }

  next(): Promise<IteratorResult<unknown>> {
    return this.#inner.next().then(this.#onResult, this.#onError);
  }

  return(): Promise<IteratorResult<unknown>> {
    // The transport gave up (the client went away): CANCELLED.
    this.#span.end(CANCELLED);
    const inner = this.#inner;
    if (inner.return === undefined) return Promise.resolve({ value: undefined, done: true });
    return inner.return();
  }

  readonly #onResult = (result: IteratorResult<unknown>): IteratorResult<unknown> => {
    if (result.done === true) this.#span.end(OK);
    return result;
  };

  readonly #onError = (e: unknown): never => {
    const err = e as ConnectError;
    this.#span.end(err.code, err.rawMessage);
    throw e;
  };
}

function guardUnary(
  method: DescMethod,
  fn: AnyMethod | undefined,
  options: GuardOptions,
): AnyMethod {
  return async function guardedUnary(request: unknown, ctx: HandlerContext) {
    const started = performance.now();
    try {
      options.admit?.(method, ctx);
      if (request instanceof RefusedRequest) throw request.error;
      if (fn === undefined) throw unimplementedError(method);
      // connect-node reads a request's body after its deadline timer started
      // and runs the method whatever came first: a call whose client gave up
      // while its body arrived must not run (and commit) after the fact. Nor
      // one whose deadline has passed although nothing aborted it yet: grpc-js
      // arms a timer even for a deadline of 0 (`grpc-timeout: 0S`).
      if (endedAlready(ctx)) throw endedBeforeRun(ctx);
      const { calls } = options;
      calls?.enter();
      let response: unknown;
      try {
        response = await fn(request, ctx);
      } finally {
        calls?.leave();
      }
      // A method may answer its own abort (a cut-off hook becomes a CANCELLED
      // outcome) instead of throwing it: past the deadline, the client gets
      // DEADLINE_EXCEEDED all the same (grpc-js has sent it already), not OK.
      if (ctx.signal.aborted && deadlinePassed(ctx)) {
        throw deadlineExceeded(BEFORE_ANSWER);
      }
      record(options, method, OK, started);
      return response;
    } catch (e: unknown) {
      throw failed(options, method, deadlineOr(e, ctx), started);
    }
  };
}

/**
 * How near its deadline a cancelled call counts as ended by it. Deadline
 * timers (Connect's, grpc-js's) are armed with the libuv loop's cached time
 * and can fire before `Date.now()` reaches the deadline; grpc-js ends a call
 * at its deadline itself and then cancels the handler without a reason; and a
 * Connect client whose own deadline passes disconnects just before the
 * server's does.
 */
const DEADLINE_SLACK_MS = 10;

/**
 * Whether the call's deadline ended it: Connect's deadline aborts with a
 * DEADLINE_EXCEEDED reason; any other cancel counts when it came within
 * {@link DEADLINE_SLACK_MS} of the deadline.
 */
export function deadlinePassed(ctx: HandlerContext): boolean {
  const reason: unknown = ctx.signal.reason;
  if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) return true;
  const left = ctx.timeoutMs();
  return left !== undefined && left <= DEADLINE_SLACK_MS;
}

/**
 * Whether a call ended before its method ran: aborted, or its deadline
 * already passed (`timeoutMs()` is 0, or below for connect's context).
 */
function endedAlready(ctx: HandlerContext): boolean {
  if (ctx.signal.aborted) return true;
  const left = ctx.timeoutMs();
  return left !== undefined && left <= 0;
}

/** The error of a call that ended (its deadline, or its client cancelled) before its method ran. */
function endedBeforeRun(ctx: HandlerContext): AgentHooksError {
  return deadlinePassed(ctx)
    ? deadlineExceeded(BEFORE_REQUEST)
    : new AgentHooksError('cancelled', 'CANCELLED', 'the call was cancelled before it ran');
}

/**
 * Returns `e`, or DEADLINE_EXCEEDED in its place when it is the cancellation
 * of a call whose deadline has passed: the caller's deadline, not the
 * caller, ended it. grpc-js answers such a call DEADLINE_EXCEEDED itself;
 * this gives Connect and gRPC-Web the same answer, and the metrics the code
 * every client got.
 */
function deadlineOr(e: unknown, ctx: HandlerContext): unknown {
  // The abort's own reason, rethrown (`signal.throwIfAborted()`), counts as
  // well: connect's deadline aborts with a DEADLINE_EXCEEDED that has no ErrorInfo.
  const cancelled =
    e instanceof AgentHooksError
      ? e.kind === 'cancelled'
      : e instanceof ConnectError && (e.code === Code.Canceled || e === ctx.signal.reason);
  if (!cancelled || !deadlinePassed(ctx)) return e;
  return deadlineExceeded(BEFORE_ANSWER, e);
}

function guardStream(
  method: DescMethod,
  fn: AnyMethod | undefined,
  options: GuardOptions,
): AnyMethod {
  return function guardedStream(request: unknown, ctx: HandlerContext) {
    // The gRPC transport counts its streams by the status their client got (see `grpc.ts`).
    const counted = (ctx as { readonly countsStreams?: boolean }).countsStreams !== true;
    return new GuardedStream(method, counted ? options : withoutMetrics(options), () => {
      options.admit?.(method, ctx);
      if (request instanceof RefusedRequest) throw request.error;
      if (fn === undefined) throw unimplementedError(method);
      // As a unary call: a stream whose deadline passed before it started never runs.
      if (endedAlready(ctx)) throw endedBeforeRun(ctx);
      return (fn(request, ctx) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    });
  };
}

/**
 * The responses of a guarded streaming call. The call starts at the first
 * `next()`, as a generator's body would; the end of the responses records
 * OK, and a failure (at the start or from the implementation) is mapped and
 * recorded once. Written out rather than as an async generator around the
 * implementation's: that costs a resumption and several promises per
 * response, and a stream answers one per event.
 */
class GuardedStream implements AsyncIterableIterator<unknown>, SinkTarget<unknown> {
  readonly #method: DescMethod;
  readonly #options: GuardOptions;
  #start: (() => AsyncIterator<unknown>) | undefined;
  #inner: AsyncIterator<unknown> | undefined;
  /** The transport's sink, handed to the implementation's responses once they exist. */
  #sink: StreamSink<unknown> | undefined;
  #started = 0;
  #finished = false;
  /** Whether the call entered {@link GuardOptions.calls} and has not left it yet. */
  #entered = false;

  constructor(method: DescMethod, options: GuardOptions, start: () => AsyncIterator<unknown>) {
    this.#method = method;
    this.#options = options;
    this.#start = start;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  /** Responses written through the sink bypass `next()`; its end and failure still come through it. */
  attachSink(sink: StreamSink<unknown>): void {
    this.#sink = sink;
    if (this.#inner !== undefined) attachSink(this.#inner, sink);
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.#finished) return Promise.resolve({ value: undefined, done: true });
    let inner = this.#inner;
    if (inner === undefined) {
      const start = this.#start as () => AsyncIterator<unknown>;
      this.#start = undefined;
      this.#started = performance.now();
      try {
        inner = start();
      } catch (e: unknown) {
        return Promise.reject(this.#failed(e));
      }
      this.#inner = inner;
      if (this.#sink !== undefined) attachSink(inner, this.#sink);
      this.#entered = this.#options.calls !== undefined;
      this.#options.calls?.enter();
    }
    return inner.next().then(this.#onResult, this.#onError);
  }

  /** Stops early (the transport gave up): the implementation is told, nothing is recorded. */
  return(): Promise<IteratorResult<unknown>> {
    this.#finished = true;
    this.#leave();
    const inner = this.#inner;
    if (inner?.return === undefined) return Promise.resolve({ value: undefined, done: true });
    return inner.return().then(
      () => ({ value: undefined, done: true }),
      (e: unknown) => Promise.reject(toConnectError(e)),
    );
  }

  readonly #onResult = (result: IteratorResult<unknown>): IteratorResult<unknown> => {
    if (result.done === true && !this.#finished) {
      this.#finished = true;
      this.#leave();
      record(this.#options, this.#method, OK, this.#started);
    }
    return result;
  };

  readonly #onError = (e: unknown): never => {
    throw this.#failed(e);
  };

  #failed(e: unknown): ConnectError {
    this.#finished = true;
    this.#leave();
    return failed(this.#options, this.#method, e, this.#started);
  }

  #leave(): void {
    if (!this.#entered) return;
    this.#entered = false;
    this.#options.calls?.leave();
  }
}

/** `options` with no metrics: the transport counts the call itself. */
function withoutMetrics(options: GuardOptions): GuardOptions {
  return options.metrics === undefined ? options : extend(options, { metrics: undefined });
}

/** Maps a failure once: the status the client gets, logged if it is the sidecar's own. */
function failed(
  options: GuardOptions,
  method: DescMethod,
  e: unknown,
  started: number,
): ConnectError {
  const err = toConnectError(e);
  record(options, method, err.code, started);
  if (isServerSide(err.code)) {
    options.logger.error('rpc failed', {
      rpc: `${method.parent.typeName}/${method.name}`,
      code: codeName(err.code),
      err: err.cause ?? err,
    });
    options.onServerError?.(e);
  }
  return err;
}

/** The code of a call that succeeded (gRPC's OK, which Connect's Code has no member for). */
const OK = 0;

/** gRPC's CANCELLED. */
const CANCELLED = 1;

function record(
  options: GuardOptions,
  method: DescMethod,
  code: Code | typeof OK,
  started: number,
): void {
  options.metrics?.rpc(method.name, codeName(code), (performance.now() - started) / 1000);
}
