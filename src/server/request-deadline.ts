/**
 * @module The deadline of a gRPC call's request message. grpc-js holds a
 * call from its headers until its message is complete, with no bound of its
 * own: a client that sends headers and part of a message keeps the call (and
 * its connection: a call is in flight, so it is never idle) for as long as
 * it likes. {@link requestMessageDeadline} ends a unary or server-streaming
 * call whose message is not complete within `--request-timeout`, as the HTTP
 * listener does with a request (Node's `requestTimeout`). Streams that the
 * client writes (DispatchStream, Handle) are long-lived and not bounded here.
 */
import { constants, type Http2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { AgentHooksError } from '../errors.js';
import { toConnectError } from './errors.js';
import { grpcStatusOf } from './grpc.js';

/**
 * A server interceptor that ends a call whose request did not arrive in full
 * (its message and the client's half-close, after which grpc-js runs the
 * method) within `timeoutMs` of its headers: `DEADLINE_EXCEEDED`, reason
 * `REQUEST_TIMEOUT`, then the stream is reset (`RST_STREAM` with `NO_ERROR`,
 * as gRPC servers end a stream the client keeps open), so that it no longer
 * counts against the connection's streams or keeps it from going idle.
 * `onTimeout` hears of each such call (its method's name), to count it.
 * Calls whose client streams are passed through.
 *
 * @example
 * new grpc.Server({ interceptors: [requestMessageDeadline(60_000, count)] });
 */
export function requestMessageDeadline(
  timeoutMs: number,
  onTimeout?: (method: string) => void,
): grpc.ServerInterceptor {
  const status = timeoutStatus(timeoutMs);
  return (method, call) => {
    // The call itself, unwrapped: a stream's every message would pay for a
    // pass-through layer. grpc-js only calls the interface's methods on what
    // an interceptor returns (`getServerInterceptingCall` chains them), so
    // the type's extra members are never read.
    if (method.requestStream) return call as grpc.ServerInterceptingCall;
    let timer: NodeJS.Timeout | undefined;
    const stop = () => {
      clearTimeout(timer);
      timer = undefined;
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => {
        timer = setTimeout(() => {
          timer = undefined;
          call.sendStatus(status());
          onTimeout?.(method.path.slice(method.path.lastIndexOf('/') + 1));
          resetLater(call);
        }, timeoutMs);
        next({
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
