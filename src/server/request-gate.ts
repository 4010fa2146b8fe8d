/**
 * @module What a gRPC call must show before its request message is read in
 * full. grpc-js holds a unary (or server-streaming) call from its headers
 * until its message is complete, and runs the method only then, with no
 * bound of its own: a client that sends headers and part of a message keeps
 * the call (and its connection: a call is in flight, so it is never idle)
 * for as long as it likes, and the part it sent stays buffered. The HTTP
 * listener answers both before it reads a body (Node's `requestTimeout`,
 * the token check on the headers); {@link requestGate} does the same for
 * gRPC:
 *
 * - a call whose message is not complete within `--request-timeout` ends
 *   with `DEADLINE_EXCEEDED`, reason `REQUEST_TIMEOUT`;
 * - with a token configured, a call whose metadata lacks it ends at its
 *   headers with `UNAUTHENTICATED`, reason `UNAUTHENTICATED` (what the guard
 *   answers), so an unauthenticated client cannot have messages of up to
 *   `--max-message-bytes` buffered on each of its streams.
 *
 * Streams that the client writes (DispatchStream, Handle) are long-lived:
 * no deadline bounds them, but the token is checked at their headers too
 * (the guard's own check would answer the call and leave the client's side
 * of the stream, and the message it is sending, open).
 */
import { constants, type Http2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { AgentHooksError } from '../errors.js';
import { type HeaderReader, unauthenticated } from './auth.js';
import { toConnectError } from './errors.js';
import { grpcStatusOf, MetadataHeaders } from './grpc.js';

/** What {@link requestGate} checks, and whom it tells. */
export interface RequestGateOptions {
  /** `--request-timeout`: from the call's headers to its complete request. */
  readonly timeoutMs: number;
  /** Hears of each call that timed out (its method's name), to count it. */
  readonly onTimeout?: (method: string) => void;
  /**
   * Whether a call's metadata carries what its service requires (the
   * bearer token); absent when no token is configured, and then the
   * metadata is not looked at.
   */
  readonly authorized?: (service: string, header: HeaderReader) => boolean;
  /** Hears of each call refused at its headers (its method's name), to count it. */
  readonly onUnauthenticated?: (method: string) => void;
}

/**
 * A server interceptor for the checks above. A refused call gets its status
 * and then its stream is reset (`RST_STREAM` with `NO_ERROR`, as gRPC
 * servers end a stream the client keeps open), so that it no longer counts
 * against the connection's streams, keeps it from going idle, or sends
 * more of its message.
 *
 * @example
 * new grpc.Server({ interceptors: [requestGate({ timeoutMs: 60_000, onTimeout: count })] });
 */
export function requestGate(options: RequestGateOptions): grpc.ServerInterceptor {
  const { timeoutMs, onTimeout, authorized, onUnauthenticated } = options;
  const timedOut = timeoutStatus(timeoutMs);
  const refused = () => grpcStatusOf(unauthenticated());
  return (method, call) => {
    let timer: NodeJS.Timeout | undefined;
    const stop = () => {
      clearTimeout(timer);
      timer = undefined;
    };
    const admit: grpc.ServerListener['onReceiveMetadata'] =
      authorized === undefined
        ? undefined
        : (metadata, next) => {
            if (authorized(serviceOf(method.path), new MetadataHeaders(metadata))) next(metadata);
            else {
              // The method never starts: its metadata is not passed on.
              stop();
              endCall(call, method.path, refused(), onUnauthenticated);
            }
          };
    if (method.requestStream) {
      // The call itself, unwrapped, unless a token is checked: a stream's
      // every message would pay for a pass-through layer. grpc-js only calls
      // the interface's methods on what an interceptor returns
      // (`getServerInterceptingCall` chains them), so the type's extra
      // members are never read.
      if (admit === undefined) return call as grpc.ServerInterceptingCall;
      return new grpc.ServerInterceptingCall(call, {
        start: (next) => next({ onReceiveMetadata: admit }),
      });
    }
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => {
        timer = setTimeout(() => {
          timer = undefined;
          endCall(call, method.path, timedOut(), onTimeout);
        }, timeoutMs);
        next({
          onReceiveMetadata: admit,
          onReceiveHalfClose: (nextHalfClose) => {
            stop();
            nextHalfClose();
          },
          onCancel: stop,
        });
      },
      sendStatus: (sent, next) => {
        stop();
        next(sent);
      },
    });
  };
}

/** Ends `call` with `status`, tells `tell` its method's name, and resets its stream. */
function endCall(
  call: grpc.ServerInterceptingCallInterface,
  path: string,
  status: grpc.StatusObject,
  tell: ((method: string) => void) | undefined,
): void {
  call.sendStatus(status);
  tell?.(path.slice(path.lastIndexOf('/') + 1));
  resetLater(call);
}

/** The service of a gRPC path (`/pkg.Service/Method`). */
function serviceOf(path: string): string {
  return path.slice(1, path.lastIndexOf('/'));
}

/**
 * Resets the HTTP/2 stream under grpc-js's call once its status went out,
 * when the client still keeps its side open. The stream is a private member
 * of grpc-js's innermost call; when it is not there (another grpc-js), the
 * stream stays until the client ends it, as before.
 */
function resetLater(call: grpc.ServerInterceptingCallInterface): void {
  const stream = (call as unknown as { stream?: Partial<Http2Stream> }).stream;
  if (typeof stream?.close !== 'function') return;
  setImmediate(() => {
    if (stream.closed !== true && stream.destroyed !== true) {
      stream.close?.(constants.NGHTTP2_NO_ERROR);
    }
  });
}

/** The status a timed-out call ends with, made per call (grpc-js may change its metadata). */
function timeoutStatus(timeoutMs: number): () => grpc.StatusObject {
  const seconds = String(timeoutMs / 1000);
  const err = toConnectError(
    new AgentHooksError(
      'deadline_exceeded',
      'REQUEST_TIMEOUT',
      `the request message did not arrive within ${seconds} s (--request-timeout)`,
      { metadata: { limit: seconds } },
    ),
  );
  return () => grpcStatusOf(err);
}
