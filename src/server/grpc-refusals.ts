/**
 * @module The requests grpc-js refuses itself, answered as every other
 * protocol answers them. Before a method's deserializer runs, grpc-js ends a
 * call on its own, with a bare status and none of our code in the way:
 *
 * - a message larger than `grpc.max_receive_message_length`, or one that
 *   decompresses to more: RESOURCE_EXHAUSTED, no details;
 * - a compressed message that does not decompress (a corrupt gzip body), or
 *   a `grpc-timeout` that is not a timeout: INTERNAL, as if the sidecar had
 *   failed;
 * - a unary call with no request message, or two: UNIMPLEMENTED;
 * - a call whose deadline passed: DEADLINE_EXCEEDED, `Deadline exceeded`, no
 *   details;
 * - a message flagged compressed with no `grpc-encoding` named: read as if
 *   it were not compressed (grpc-js takes `identity` for the missing header).
 *
 * Over Connect and gRPC-Web the same requests are `MESSAGE_TOO_LARGE`,
 * `MALFORMED_REQUEST`, `INVALID_TIMEOUT` or `DEADLINE_EXCEEDED`, with their
 * `ErrorInfo` (`http.ts`, `guard.ts`). grpc-js sends those statuses from its
 * innermost call object, beneath every interceptor (or passes them down from
 * its own handler wrapper), so {@link answerTransportRefusals} wraps that
 * class's `sendStatus` once:
 * a status grpc-js made itself (it carries no metadata, and its text is one
 * of grpc-js's own) for a method {@link addService} registered becomes
 * ours, and is counted under the code the client gets (a deadline only
 * when the method never ran: the guard counts the calls that did).
 * Everything else passes through as it was. The compressed message without
 * an encoding is refused where grpc-js decompresses each message (its
 * `decompressMessage`, wrapped once too), before it is decoded.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { BaseServerInterceptingCall } from '@grpc/grpc-js/build/src/server-interceptors.js';
import type { AgentHooksError } from '../errors.js';
import {
  BEFORE_ANSWER,
  BEFORE_REQUEST,
  COMPRESSED_WITHOUT_ENCODING,
  codeName,
  deadlineExceeded,
  EXTRA_MESSAGE,
  invalidTimeout,
  MalformedRequest,
  NO_MESSAGE,
  NOT_DECOMPRESSIBLE,
  TooLargeRequest,
  toConnectError,
} from './errors.js';

/** What a refusal of one method's request needs: set by `addService` per method. */
export interface RefusalTarget {
  readonly method: DescMethod;
  /** Names the bound in a `MESSAGE_TOO_LARGE` message (`--max-message-bytes`). */
  readonly bound: string;
  /** Hears of each refusal (the method's name and the code's name), to count it. */
  readonly onRefused?: ((method: string, code: string) => void) | undefined;
  /** Turns an error into the status the client gets. */
  readonly statusOf: (err: ReturnType<typeof toConnectError>) => grpc.StatusObject;
}

/** Targets by the request deserializer grpc-js keeps on the call's handler. */
const targets = new WeakMap<object, RefusalTarget>();

/** grpc-js's own texts (1.14), each the refusal of a client's request. */
const TOO_LARGE =
  /^Received message (?:larger than max \(\d+ vs \d+\)|that decompresses to a size larger than \d+)$/;
const DECOMPRESS_FAILED = 'Failed to decompress message';
const BAD_TIMEOUT = /^Invalid grpc-timeout value "(.*)"$/s;
const NO_REQUEST = 'Received no request message for server streaming method ';
const SECOND_REQUEST = 'Received a second request message for server streaming method ';
const DEADLINE_EXCEEDED = 'Deadline exceeded';
/**
 * The status {@link answerTransportRefusals} fails a message flagged
 * compressed with, when the call names no encoding; grpc-js sends it as its
 * own, and {@link refusalOf} answers it as the others.
 */
const NO_ENCODING = 'Received a compressed message, but the call names no grpc-encoding';
/** The codes of those refusals. */
const REFUSAL_CODES: ReadonlySet<grpc.status> = new Set([
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.INTERNAL,
  grpc.status.UNIMPLEMENTED,
  grpc.status.DEADLINE_EXCEEDED,
]);

/** The part of grpc-js's innermost call this module reads. */
interface BaseCall {
  readonly handler: { readonly deserialize?: unknown; readonly type?: string } | null;
  readonly maxReceiveMessageSize: number;
  /** Whether the client ended its side (its request is complete). */
  readonly receivedHalfClose?: boolean;
  /** Messages (and the half-close) read but not yet handed on. */
  readonly readQueue?: readonly unknown[];
  readonly stream?: {
    readonly closed: boolean;
    readonly destroyed: boolean;
    readonly headersSent: boolean;
    /** The `RST_STREAM` code it closed with: not 0 when the client (or a cut-off) reset it. */
    readonly rstCode?: number;
  };
  /** Whether the response headers went out (a stream's first message sends them). */
  readonly metadataSent?: boolean;
  /** Whether a status was sent after them (its trailers are on the way). */
  readonly wantTrailers?: boolean;
}

/** A status as grpc-js's `sendStatus` takes it. */
type SentStatus = Parameters<BaseServerInterceptingCall['sendStatus']>[0];

let installed = false;

/**
 * Answers grpc-js's own refusals of `deserialize`'s requests as `target`
 * says. The first call wraps grpc-js's `sendStatus` for the process.
 */
export function answerTransportRefusals(deserialize: object, target: RefusalTarget): void {
  targets.set(deserialize, target);
  if (installed) return;
  installed = true;
  const proto = BaseServerInterceptingCall.prototype;
  const send = proto.sendStatus;
  proto.sendStatus = function sendStatus(this: BaseServerInterceptingCall, status) {
    // Ours carry metadata (their details); grpc-js's refusals none, and never OK.
    const refusal = status.metadata == null && REFUSAL_CODES.has(status.code);
    const sent = refusal ? (ours(this, status) ?? status) : status;
    if ((this as unknown as BaseCall).handler?.type === 'bidi') noteStreamStatus(this, sent.code);
    send.call(this, sent);
  };
  // grpc-js decompresses a message flagged compressed with the call's encoding,
  // and `identity` (the message as it is) when the call names none; the gRPC
  // spec makes that an error, and so does connect for gRPC-Web.
  const decompress = (proto as unknown as DecompressingCall).decompressMessage;
  if (typeof decompress !== 'function') return;
  (proto as unknown as DecompressingCall).decompressMessage = function decompressMessage(
    this: BaseServerInterceptingCall,
    message: Buffer,
    encoding: string,
  ) {
    const deserialize = (this as unknown as BaseCall).handler?.deserialize;
    if (
      encoding === 'identity' &&
      message[0] === COMPRESSED_FLAG &&
      typeof deserialize === 'function' &&
      targets.has(deserialize)
    ) {
      // grpc-js sends a rejection of this as the call's status.
      return Promise.reject({ code: grpc.status.INTERNAL, details: NO_ENCODING });
    }
    return decompress.call(this, message, encoding);
  };
}

/** grpc-js's decompression of one message (a private method of its innermost call). */
interface DecompressingCall {
  decompressMessage(message: Buffer, encoding: string): Buffer | Promise<Buffer>;
}

/** A gRPC message's flag byte when the message is compressed. */
const COMPRESSED_FLAG = 1;

/** gRPC's CANCELLED. */
const CANCELLED_CODE = grpc.status.CANCELLED;

/** The code each bidi stream's client got: its first status, or CANCELLED when none could go out. */
const streamStatus = new WeakMap<object, grpc.status>();

function noteStreamStatus(call: BaseServerInterceptingCall, code: grpc.status): void {
  if (streamStatus.has(call)) return;
  const { stream } = call as unknown as BaseCall;
  // A stream the client reset (or that was cut off) takes no status: the client saw CANCELLED.
  const gone = stream === undefined || stream.closed || stream.destroyed;
  streamStatus.set(call, gone ? CANCELLED_CODE : code);
}

/**
 * Calls `done` once the HTTP/2 stream of a bidi call (the call a handler
 * gets) has closed, with the status grpc-js sent it and whether the client
 * reset the stream (`RST_STREAM`: it cancelled, or gave up at its deadline).
 * A client's reset ends the requests as a half-close does, before grpc-js or
 * the stream know of it: only the closed stream tells them apart. Answers
 * false when the call's stream cannot be found (`done` is not called).
 */
export function onStreamClosed(
  call: object,
  done: (code: grpc.status | undefined, reset: boolean) => void,
): boolean {
  const base = baseCallOf(call);
  const stream = (base as unknown as BaseCall | undefined)?.stream as
    | (NonNullable<BaseCall['stream']> & { once(event: 'close', f: () => void): void })
    | undefined;
  if (base === undefined || stream === undefined) return false;
  const report = () => done(streamStatus.get(base), (stream.rstCode ?? 0) !== 0);
  if (stream.closed) report();
  else stream.once('close', report);
  return true;
}

/**
 * grpc-js's innermost call (the one that sends) of the call a handler gets:
 * grpc-js keeps the intercepting call it wraps as `call`, and each
 * intercepting call the next one as `nextCall`.
 */
function baseCallOf(call: object): BaseServerInterceptingCall | undefined {
  let inner = (call as { call?: unknown }).call;
  for (let depth = 0; depth < MAX_INTERCEPTORS && inner !== undefined; depth++) {
    if (inner instanceof BaseServerInterceptingCall) return inner;
    inner = (inner as { nextCall?: unknown }).nextCall;
  }
  return undefined;
}

/** How deep {@link baseCallOf} looks through intercepting calls (the server has one interceptor). */
const MAX_INTERCEPTORS = 8;

/** Our status for a refusal grpc-js made itself, or `undefined` for any other status. */
function ours(call: BaseServerInterceptingCall, status: SentStatus): grpc.StatusObject | undefined {
  const { handler, maxReceiveMessageSize, stream, metadataSent, wantTrailers } =
    call as unknown as BaseCall;
  // Only a call's first status: grpc-js also sends statuses to calls it already
  // ended (after a refusal, the client's end of stream reports "no request
  // message") or the client cancelled, and then sends nothing. A stream that
  // answered messages sent its headers with the first; its status goes in the
  // trailers, and one was sent once it wants them.
  if (stream === undefined || stream.closed || stream.destroyed) return undefined;
  if (metadataSent === true ? wantTrailers === true : stream.headersSent) return undefined;
  const deserialize = handler?.deserialize;
  if (typeof deserialize !== 'function') return undefined;
  const target = targets.get(deserialize);
  if (target === undefined) return undefined;
  const ran = methodRan(call as unknown as BaseCall);
  const refused = refusalOf(target, status, maxReceiveMessageSize, ran);
  if (refused === undefined) return undefined;
  const err = toConnectError(refused);
  // The guard counts a call whose method ran, its deadline's end included.
  if (!ran || status.code !== grpc.status.DEADLINE_EXCEEDED) {
    target.onRefused?.(target.method.name, codeName(err.code));
  }
  return target.statusOf(err);
}

/**
 * Whether grpc-js has handed the call to its method: a stream's at its
 * headers, a unary call's once its message and half-close were read and
 * passed on.
 */
function methodRan(call: BaseCall): boolean {
  const type = call.handler?.type;
  if (type === 'bidi' || type === 'clientStream') return true;
  return call.receivedHalfClose === true && call.readQueue?.length === 0;
}

/** Our error for a status grpc-js made when it refused a request, or `undefined`. */
function refusalOf(
  target: RefusalTarget,
  status: SentStatus,
  maxReceiveMessageSize: number,
  ran: boolean,
): AgentHooksError | undefined {
  const details = status.details ?? '';
  switch (status.code) {
    case grpc.status.DEADLINE_EXCEEDED:
      if (details !== DEADLINE_EXCEEDED) return undefined;
      return deadlineExceeded(ran ? BEFORE_ANSWER : BEFORE_REQUEST);
    case grpc.status.RESOURCE_EXHAUSTED:
      if (!TOO_LARGE.test(details)) return undefined;
      return new TooLargeRequest(maxReceiveMessageSize, target.bound).error;
    case grpc.status.INTERNAL: {
      if (details === DECOMPRESS_FAILED) {
        return new MalformedRequest(target.method, undefined, NOT_DECOMPRESSIBLE).error;
      }
      if (details === NO_ENCODING) {
        return new MalformedRequest(target.method, undefined, COMPRESSED_WITHOUT_ENCODING).error;
      }
      const timeout = BAD_TIMEOUT.exec(details)?.[1];
      return timeout === undefined ? undefined : invalidTimeout('grpc-timeout', timeout);
    }
    case grpc.status.UNIMPLEMENTED: {
      // grpc-js words these for every method with a single request message.
      const problem = details.startsWith(NO_REQUEST)
        ? NO_MESSAGE
        : details.startsWith(SECOND_REQUEST)
          ? EXTRA_MESSAGE
          : undefined;
      return problem === undefined
        ? undefined
        : new MalformedRequest(target.method, undefined, problem).error;
    }
    default:
      return undefined;
  }
}
