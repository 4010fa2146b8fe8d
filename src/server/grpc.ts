/**
 * @module Serves protobuf-es service implementations (Connect's `ServiceImpl`
 * shape) on a `@grpc/grpc-js` server, with codecs from our descriptors. The
 * same implementation object is served by connect-node on the HTTP port.
 *
 * - Cancellation and deadlines reach the implementation as
 *   `HandlerContext.signal` and `timeoutMs()`.
 * - Streams respect backpressure: a response write that the transport cannot
 *   take waits for `drain`, and requests are read only as the
 *   implementation consumes them.
 * - Errors become a gRPC status with `google.rpc.Status` in
 *   `grpc-status-details-bin`.
 */
import type { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromBinary,
  toBinary,
} from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type HandlerContext,
} from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { LiveSlots, type Slotted } from '../live-slots.js';
import type { Logger } from '../log.js';
import { type CallAborter, CallSignal } from './call-signal.js';
import {
  MalformedRequest,
  TooComplexRequest,
  toConnectError,
  toGrpcStatus,
  unimplementedError,
} from './errors.js';
import { answerTransportRefusals, onStreamClosed } from './grpc-refusals.js';
import { deadlinePassed } from './guard.js';
import { countNodes, mayExceedNodes } from './message-nodes.js';
import { handDecoderOf } from './request-codec.js';
import { RequestStream, readsRequestStream } from './request-stream.js';
import { handEncoderOf } from './response-codec.js';
import { attachSink, type StreamSink } from './stream-sink.js';
import { holdsValues, valueProblem, valueRefusal } from './value-kinds.js';
import { noteWireBytes } from './wire-bytes.js';

/** A service implementation: methods by local name, as Connect's router takes them. */
// biome-ignore lint/suspicious/noExplicitAny: implementations are checked against ServiceImpl where they are written.
export type AnyServiceImpl = Record<string, (...args: any[]) => any>;

/** Options of {@link addService}. */
export interface AddServiceOptions {
  /** Aborts every handler's signal when the server shuts down hard. */
  readonly shutdownSignal?: AbortSignal;
  /** Logs failures that escaped the guard (a transport write that failed). */
  readonly logger: Logger;
  /** Most nodes a request may decode into (`--max-message-nodes`). */
  readonly maxMessageNodes: number;
  /** What bounds a request's size, as a `MESSAGE_TOO_LARGE` message names it; default `--max-message-bytes`. */
  readonly messageBound?: string;
  /**
   * Hears of each request grpc-js refused itself (the method's name, the
   * code's name), to count it; only on a service whose guard counts calls.
   */
  readonly onRefused?: (method: string, code: string) => void;
  /**
   * Response-streaming methods (by name) whose next response is taken only
   * once the one before was written: what the transport holds is then at
   * most one message, so a response not yet written can still be taken back
   * (a `Handle` call whose decision gave up on it). Others keep up to
   * grpc-js's 16 in its buffer, for throughput.
   */
  readonly writeOneAtATime?: ReadonlySet<string>;
  /**
   * Hears how each bidi stream ended for its client (the method's name, the
   * code's name of the status grpc-js sent, or CANCELLED when the client was
   * gone, and its seconds), to count it: the guard cannot tell a stream its
   * client cancelled from one that ended, since grpc-js ends the requests of
   * both alike. Only on a service whose guard counts calls.
   */
  readonly onStreamEnd?: (method: string, code: string, seconds: number) => void;
}

/**
 * Registers every method of `service` on a grpc-js server. `impl` is the
 * guarded implementation (`guard.ts`): it admits calls and maps errors, so
 * this adapter only carries messages, signals and statuses.
 */
export function addService(
  server: grpc.Server,
  service: DescService,
  impl: AnyServiceImpl,
  options: AddServiceOptions,
): void {
  const definition: Record<string, grpc.MethodDefinition<object, object>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  const live = new LiveCalls(options.shutdownSignal);
  for (const method of service.methods) {
    const decode =
      handDecoderOf(method.input) ?? ((bytes: Uint8Array) => fromBinary(method.input, bytes));
    const requestStream = readsRequestStream(method);
    // grpc-js answers INTERNAL when a deserializer throws; the guard answers
    // INVALID_ARGUMENT instead, as connect-node does for bad JSON. A message
    // that would decode into too many nodes, or that holds a Value JSON
    // cannot write, is refused before it is decoded (large arguments too,
    // which the hand decoder leaves undecoded).
    const maxNodes = options.maxMessageNodes;
    const checksValues = holdsValues(method.input);
    const decodeOrMark = (bytes: Buffer): object => {
      if (
        mayExceedNodes(bytes.length, maxNodes) &&
        countNodes(method.input, bytes, maxNodes) > maxNodes
      ) {
        return new TooComplexRequest(method, maxNodes);
      }
      const bad = checksValues ? valueProblem(method.input, bytes) : undefined;
      if (bad !== undefined) return valueRefusal(method, bad);
      try {
        return decode(bytes);
      } catch (e: unknown) {
        return new MalformedRequest(method, e);
      }
    };
    const deserialize = requestStream
      ? (bytes: Buffer) => {
          const request = decodeOrMark(bytes);
          noteWireBytes(request, bytes.length);
          return request;
        }
      : decodeOrMark;
    // The messages grpc-js refuses before this deserializer runs.
    answerTransportRefusals(deserialize, {
      method,
      bound: options.messageBound ?? '--max-message-bytes',
      // A stream the client writes runs its method anyway (its requests end), and
      // the guard counts the call then.
      onRefused: requestStream ? undefined : options.onRefused,
      statusOf: grpcStatusOf,
    });
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream,
      responseStream:
        method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
      requestSerialize: (value: object) =>
        Buffer.from(toBinary(method.input, create(method.input, value as Record<string, unknown>))),
      // A stream's requests carry their size, for the bounds that hold many of them.
      requestDeserialize: deserialize,
      responseSerialize: responseSerializer(method.output),
      responseDeserialize: (bytes: Buffer) => fromBinary(method.output, bytes),
      originalName: method.localName,
    };
    const fn = impl[method.localName];
    // The guard gives every method of the service an implementation.
    if (fn === undefined) throw new Error(`${service.typeName}.${method.name} has no handler`);
    handlers[method.localName] = createHandler(service, method, fn, options, live);
  }
  server.addService(definition as grpc.ServiceDefinition, handlers);
}

/**
 * A response's wire bytes, in a `Buffer` over the encoder's own array (not
 * a copy). `create` returns a message of this type as is; it fills in a
 * plain init object.
 */
function serializeMessage(schema: DescMessage, value: object): Buffer {
  const bytes = toBinary(schema, create(schema, value as Record<string, unknown>));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The response serializer of a method: its hand encoder first when the
 * output type has one (`response-codec.ts`), else `toBinary`.
 */
function responseSerializer(schema: DescMessage): (value: object) => Buffer {
  const byHand = handEncoderOf(schema);
  if (byHand === undefined) return (value) => serializeMessage(schema, value);
  return (value) => byHand(value) ?? serializeMessage(schema, value);
}

/**
 * Reasons the handler signal aborts with, made once: an abort without a
 * reason builds a DOMException with a stack trace on every call.
 */
const CALL_COMPLETED = new ConnectError('the call completed', Code.Canceled);
const CLIENT_CANCELLED = new ConnectError('client cancelled the call', Code.Canceled);

type GrpcCall =
  | grpc.ServerUnaryCall<object, object>
  | grpc.ServerWritableStream<object, object>
  | grpc.ServerDuplexStream<object, object>;

/**
 * The handler context of one grpc-js call, built for the hot path: one
 * AbortController, and nothing else until it is read. Connect's
 * `createHandlerContext` links the call's signal to the shutdown signal and
 * to a deadline timer (a listener and a timer per call) and copies the
 * metadata into `Headers` up front; here grpc-js enforces the deadline
 * itself (it cancels the call, which aborts the signal), the shutdown
 * aborts the live calls from one listener ({@link LiveCalls}), and the
 * headers are built only when read.
 */
/** One request header at a time, from a call's metadata; see `requestHeaderReader` (and the token check of `request-gate.ts`). */
export class MetadataHeaders {
  constructor(readonly metadata: grpc.Metadata) {}

  get(name: string): string | undefined {
    const value = this.metadata.get(name)[0];
    return typeof value === 'string' ? value : undefined;
  }
}

class GrpcHandlerContext implements HandlerContext, Slotted {
  readonly protocolName = 'grpc';
  /** Whether this transport counts the call's end (a bidi stream with `onStreamEnd`): the guard does not then. */
  countsStreams = false;
  /** Its slot among the live calls ({@link LiveCalls}). */
  liveSlot = -1;
  readonly requestMethod = 'POST';
  /** A unary call's plain signal, or a stream's real one (see `call-signal.ts`). */
  readonly #controller: CallAborter;
  /** Aborts the handler when the client cancels (or grpc-js enforces the deadline). */
  readonly onCancelled = (): void => {
    if (!this.signal.aborted) this.#controller.abort(CLIENT_CANCELLED);
  };
  #requestHeader: Headers | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;
  #values: ContextValues | undefined;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    readonly call: GrpcCall,
  ) {
    this.#controller = method.methodKind === 'unary' ? new CallSignal() : new AbortController();
  }

  get url(): string {
    return `/${this.service.typeName}/${this.method.name}`;
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  readonly timeoutMs = (): number | undefined => {
    const deadline = this.call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
    return Number.isFinite(deadlineMs) ? Math.max(0, deadlineMs - Date.now()) : undefined;
  };

  get requestHeader(): Headers {
    if (this.#requestHeader === undefined) {
      const header = new Headers();
      for (const [key, value] of Object.entries(this.call.metadata.getMap())) {
        if (typeof value === 'string') header.set(key, value);
      }
      this.#requestHeader = header;
    }
    return this.#requestHeader;
  }

  /**
   * Reads single request headers straight from the metadata, for the
   * guard's trace context: cheaper than building every header into
   * `Headers` when only `traceparent` and `tracestate` are wanted.
   */
  get requestHeaderReader(): MetadataHeaders {
    return new MetadataHeaders(this.call.metadata);
  }

  get responseHeader(): Headers {
    this.#responseHeader ??= new Headers();
    return this.#responseHeader;
  }

  get responseTrailer(): Headers {
    this.#responseTrailer ??= new Headers();
    return this.#responseTrailer;
  }

  get values(): ContextValues {
    this.#values ??= createContextValues();
    return this.#values;
  }

  abort(reason: unknown): void {
    this.#controller.abort(reason);
  }
}

/**
 * The calls in progress, so that a hard shutdown aborts each one's signal
 * from a single listener on the shutdown signal.
 */
class LiveCalls {
  readonly #calls = new LiveSlots<GrpcHandlerContext>();
  readonly #shutdown: AbortSignal | undefined;

  constructor(shutdownSignal: AbortSignal | undefined) {
    this.#shutdown = shutdownSignal;
    shutdownSignal?.addEventListener(
      'abort',
      () => {
        for (const ctx of this.#calls.drain()) ctx.abort(shutdownSignal.reason);
      },
      { once: true },
    );
  }

  /** Starts a call's context; {@link LiveCalls.endUnary} or {@link LiveCalls.endStream} ends it. */
  start(service: DescService, method: DescMethod, call: GrpcCall): GrpcHandlerContext {
    const ctx = new GrpcHandlerContext(service, method, call);
    if (this.#shutdown?.aborted) {
      ctx.abort(this.#shutdown.reason);
      return ctx;
    }
    this.#calls.add(ctx);
    // A client cancellation (or a deadline grpc-js enforces) aborts the handler.
    // grpc-js also emits 'cancelled' when a finished call closes: a unary
    // call stops listening when it ends, a stream's signal has already been
    // aborted with CALL_COMPLETED by then.
    (call as EventEmitter).once('cancelled', ctx.onCancelled);
    return ctx;
  }

  /**
   * Ends a unary call. Its signal is left as it is: the handler awaited all
   * the work it did (what it detaches runs under the background scope, with
   * its own signal), so nothing is left to stop, and on Node 20 an
   * `AbortSignal`'s abort builds an `Event` (about 6 µs) on every call.
   */
  endUnary(ctx: GrpcHandlerContext): void {
    this.#calls.delete(ctx);
    (ctx.call as EventEmitter).off('cancelled', ctx.onCancelled);
  }

  /**
   * Ends a stream: its signal aborts with CALL_COMPLETED, so that the events
   * still in flight (a handler reply, an email lookup) stop waiting.
   */
  endStream(ctx: GrpcHandlerContext): void {
    this.#calls.delete(ctx);
    ctx.abort(CALL_COMPLETED);
  }
}

function grpcError(e: unknown, method: DescMethod, logger: Logger): Partial<grpc.StatusObject> {
  // The guard answers with ConnectErrors; anything else failed outside it.
  if (!(e instanceof ConnectError)) {
    logger.error('rpc failed outside the guard', { rpc: method.name, err: e });
  }
  return grpcStatusOf(toConnectError(e));
}

/**
 * `err` as grpc-js sends a status: its code, message, and the
 * `google.rpc.Status` (ErrorInfo and the other details) in
 * `grpc-status-details-bin`. Metadata is made per call: grpc-js may add to it.
 */
export function grpcStatusOf(err: ConnectError): grpc.StatusObject {
  const status = toGrpcStatus(err);
  const metadata = new grpc.Metadata();
  metadata.set('grpc-status-details-bin', Buffer.from(status.details));
  return { code: status.code as number as grpc.status, details: status.message, metadata };
}

function createHandler(
  service: DescService,
  method: DescMethod,
  fn: AnyServiceImpl[string],
  options: AddServiceOptions,
  live: LiveCalls,
): grpc.UntypedHandleCall {
  switch (method.methodKind) {
    case 'unary':
      return (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
        const ctx = live.start(service, method, call);
        void (async () => {
          try {
            const response = await fn(call.request, ctx);
            callback(null, response);
          } catch (e: unknown) {
            callback(grpcError(e, method, options.logger));
          } finally {
            live.endUnary(ctx);
          }
        })();
      };
    case 'server_streaming':
      return (call: grpc.ServerWritableStream<object, object>) =>
        serveStream(service, method, call, options, live, (ctx) => fn(call.request, ctx));
    case 'bidi_streaming':
      return (call: grpc.ServerDuplexStream<object, object>) =>
        // Not the Readable's own iterator: it destroys the stream when the
        // requests end, which would drop the responses still to be written
        // and the status; this one leaves the stream to `end()`.
        serveStream(service, method, call, options, live, (ctx) =>
          fn(new RequestStream(call), ctx),
        );
    default:
      return (
        call: grpc.ServerReadableStream<object, object>,
        callback: grpc.sendUnaryData<object>,
      ) => {
        void call;
        // No RPC of ours streams only requests; grpc-js cannot hand such a call to the guard.
        callback(grpcError(unimplementedError(method), method, options.logger));
      };
  }
}

/**
 * Serves a server-streaming or bidi call: runs `run`, writes its responses
 * with backpressure, then ends the call
 * with OK or the error's status.
 */
function serveStream(
  service: DescService,
  method: DescMethod,
  call: grpc.ServerWritableStream<object, object> | grpc.ServerDuplexStream<object, object>,
  options: AddServiceOptions,
  live: LiveCalls,
  run: (ctx: HandlerContext) => unknown,
): void {
  const ctx = live.start(service, method, call);
  const oneAtATime = options.writeOneAtATime?.has(method.name) === true;
  const { onStreamEnd } = options;
  if (onStreamEnd !== undefined && method.methodKind === 'bidi_streaming') {
    const started = performance.now();
    // Once its HTTP/2 stream closed: then a client's reset is known.
    ctx.countsStreams = onStreamClosed(call, (code, reset) => {
      // A client whose deadline passed stops the call itself (its requests end as
      // after a half-close, and it never reads the status): DEADLINE_EXCEEDED.
      const ended =
        deadlinePassed(ctx) && (reset || code === grpc.status.OK)
          ? grpc.status.DEADLINE_EXCEEDED
          : reset
            ? grpc.status.CANCELLED
            : code;
      onStreamEnd(
        method.name,
        ended === undefined ? 'UNKNOWN' : (grpc.status[ended] ?? 'UNKNOWN'),
        (performance.now() - started) / 1000,
      );
    });
  }
  void (async () => {
    try {
      await writeAll(call, run(ctx) as AsyncIterable<object>, ctx.signal, oneAtATime);
      call.end();
    } catch (e: unknown) {
      call.emit('error', grpcError(e, method, options.logger));
    } finally {
      live.endStream(ctx);
    }
  })();
}

/**
 * Writes every response, waiting for `drain` whenever the transport's buffer
 * is full, or, `oneAtATime`, for each response to be written before the next.
 */
async function writeAll(
  call: grpc.ServerWritableStream<object, object> | grpc.ServerDuplexStream<object, object>,
  responses: AsyncIterable<object>,
  signal: AbortSignal,
  oneAtATime: boolean,
): Promise<void> {
  const iterator = responses[Symbol.asyncIterator]();
  // A response ready while this loop waits for the next is written at once by the sink.
  if (!oneAtATime) attachSink(iterator, transportSink(call, signal));
  for await (const response of { [Symbol.asyncIterator]: () => iterator }) {
    if (oneAtATime) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        signal.addEventListener('abort', done);
        // Called once the transport took it, or failed (the call then ends).
        call.write(response, done);
      });
      signal.throwIfAborted();
      continue;
    }
    if (call.write(response)) continue;
    await new Promise<void>((resolve) => {
      const done = () => {
        call.off('drain', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      call.on('drain', done);
      signal.addEventListener('abort', done);
    });
    signal.throwIfAborted();
  }
}

/**
 * Responses a call's buffer holds before its sink waits for it to drain. Only
 * `DispatchStream`'s acks go through a sink (an event id and its outcomes).
 */
const SINK_ROOM = 64;

/**
 * Writes a stream's responses to its call as they are produced ({@link StreamSink}).
 * Its two listeners are added once per call: a full buffer can come every few
 * acks, and adding an abort listener each time cost a stream more than the
 * write itself.
 */
function transportSink(
  call: grpc.ServerWritableStream<object, object> | grpc.ServerDuplexStream<object, object>,
  signal: AbortSignal,
): StreamSink<object> {
  let waiting: ((writable: boolean) => void) | undefined;
  const resume = (writable: boolean) => {
    const then = waiting;
    waiting = undefined;
    then?.(writable);
  };
  const onDrain = () => resume(true);
  const onEnded = () => {
    call.off('drain', onDrain);
    resume(false);
  };
  call.on('drain', onDrain);
  signal.addEventListener('abort', onEnded, { once: true });
  return {
    // grpc-js writes a call's messages one at a time, and its buffer reports
    // full at 16: a burst of acks filled it every few events and sent each
    // next event down the waiting path. The sink takes small responses, so
    // it waits only from SINK_ROOM on; 'drain' still follows, the buffer having
    // reported full.
    write: (response) => call.write(response) || call.writableLength < SINK_ROOM,
    drained: (then) => {
      if (signal.aborted) then(false);
      else waiting = then;
    },
  };
}
