/**
 * @module The HTTP/1.1 listener's request handler: the Connect protocol and
 * gRPC-Web for the guarded services (connect-node's universal handlers),
 * then a fallback for plain paths (`/metrics`, `/healthz`).
 *
 * connect-node answers a binary request body it cannot decode with
 * INTERNAL (`parse binary: ...`), where bad JSON gets INVALID_ARGUMENT.
 * Such an answer is replaced by the guard's own: the guarded method is
 * called with a {@link MalformedRequest}, so the call is admitted, counted
 * and answered INVALID_ARGUMENT (`MALFORMED_REQUEST`) as over grpc-js.
 */
import type * as http from 'node:http';
import type { DescMethod } from '@bufbuild/protobuf';
import {
  type ConnectError,
  type ConnectRouter,
  createConnectRouter,
  createHandlerContext,
  type HandlerContext,
} from '@connectrpc/connect';
import {
  createAsyncIterable,
  encodeEnvelope,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from '@connectrpc/connect/protocol';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import {
  createTrailerSerialization,
  setTrailerStatus,
  trailerFlag,
} from '@connectrpc/connect/protocol-grpc-web';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from '@connectrpc/connect-node';
import type { Logger } from '../log.js';
import { MalformedRequest, toConnectError } from './errors.js';

/** A guarded method as a transport calls it. */
// biome-ignore lint/suspicious/noExplicitAny: methods of every service go through one lookup.
type GuardedMethod = (request: any, ctx: HandlerContext) => Promise<unknown>;

/** Options of {@link createHttpHandler}. */
export interface HttpHandlerOptions {
  /** Registers the guarded services on a router. */
  readonly routes: (router: ConnectRouter) => void;
  /** Returns the guarded method a universal handler serves, to answer undecodable requests. */
  readonly guardedMethod: (method: DescMethod) => GuardedMethod | undefined;
  /** Largest request message, in bytes. */
  readonly readMaxBytes: number;
  /** Aborts handlers when the server shuts down hard. */
  readonly shutdownSignal: AbortSignal;
  readonly logger: Logger;
  /** Answers paths that are not RPCs. */
  readonly fallback: (req: http.IncomingMessage, res: http.ServerResponse) => void;
}

/** The message prefix of connect's error for a binary body it cannot decode. */
const PARSE_BINARY_PREFIX = 'parse binary:';
/** The largest error body inspected for that error (connect's are a few hundred bytes). */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** Creates the HTTP listener's request handler. */
export function createHttpHandler(options: HttpHandlerOptions): http.RequestListener {
  const router = createConnectRouter({
    readMaxBytes: options.readMaxBytes,
    shutdownSignal: options.shutdownSignal,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  options.routes(router);
  const paths = new Map<string, UniversalHandler>();
  for (const handler of router.handlers) paths.set(handler.requestPath, handler);

  return function agenthooksHttpHandler(req, res) {
    const handler = paths.get((req.url ?? '').split('?', 1)[0] ?? '');
    if (handler === undefined) {
      options.fallback(req, res);
      return;
    }
    const uReq = universalRequestFromNodeRequest(req, res, undefined, undefined);
    handler(uReq)
      .then((uRes) => replaceParseError(uReq, uRes, handler, options))
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((e: unknown) => {
        // A client that hung up is not a failure of ours.
        if (req.destroyed || res.destroyed) return;
        options.logger.error('http request failed', {
          rpc: `${handler.service.typeName}/${handler.method.name}`,
          err: e,
        });
      });
  };
}

/**
 * Returns `uRes`, or the guard's answer when `uRes` is connect's INTERNAL
 * answer to a binary body it could not decode.
 */
async function replaceParseError(
  uReq: UniversalServerRequest,
  uRes: UniversalServerResponse,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
): Promise<UniversalServerResponse> {
  const contentType = uReq.header.get('content-type') ?? '';
  const grpcWeb = contentType.startsWith('application/grpc-web');
  if (!grpcWeb && uRes.status !== 500) return uRes;
  const chunks = await firstChunks(uRes);
  const parseError = grpcWeb ? isGrpcWebParseError(chunks.head) : isConnectParseError(chunks.head);
  if (!parseError) return { ...uRes, body: chunks.body };
  const err = await guardAnswer(uReq, handler, options);
  if (grpcWeb) {
    const trailer = new Headers();
    setTrailerStatus(trailer, err);
    const data = createTrailerSerialization().serialize(trailer);
    return { ...uRes, body: createAsyncIterable([encodeEnvelope(trailerFlag, data)]) };
  }
  const header = new Headers(uRes.header);
  const body = errorToJsonBytes(err, {});
  header.set('content-length', String(body.byteLength));
  return {
    status: codeToHttpStatus(err.code),
    header,
    body: createAsyncIterable([body]),
  };
}

/** Runs the guarded method on a {@link MalformedRequest} and returns the error it answers. */
async function guardAnswer(
  uReq: UniversalServerRequest,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
): Promise<ConnectError> {
  const method = handler.method;
  const fn = options.guardedMethod(method);
  const malformed = new MalformedRequest(method, undefined);
  if (fn === undefined) return toConnectError(malformed.error);
  const ctx = createHandlerContext({
    service: method.parent,
    method,
    protocolName: uReq.header.get('content-type')?.startsWith('application/grpc-web')
      ? 'grpc-web'
      : 'connect',
    requestMethod: uReq.method,
    url: uReq.url,
    requestHeader: uReq.header,
  });
  try {
    const result = fn(malformed, ctx);
    // A streaming method returns an iterable: its first step raises the error.
    if (Symbol.asyncIterator in Object(result)) {
      await (result as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]().next();
    } else {
      await result;
    }
    return toConnectError(malformed.error);
  } catch (e: unknown) {
    return toConnectError(e);
  } finally {
    ctx.abort();
  }
}

/** The first chunk of a response body (when small), and the body to send on. */
async function firstChunks(
  uRes: UniversalServerResponse,
): Promise<{ head: Uint8Array | undefined; body: UniversalServerResponse['body'] }> {
  const body = uRes.body;
  if (body === undefined || body instanceof Uint8Array || !(Symbol.asyncIterator in body)) {
    return { head: body instanceof Uint8Array ? body : undefined, body };
  }
  const it = (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) return { head: undefined, body: createAsyncIterable([]) };
  const head = first.value;
  async function* rest(): AsyncIterable<Uint8Array> {
    yield head;
    for (let next = await it.next(); next.done !== true; next = await it.next()) {
      yield next.value;
    }
  }
  return { head: head.byteLength <= ERROR_BODY_MAX_BYTES ? head : undefined, body: rest() };
}

/** True when a Connect unary error body is connect's own decoding failure. */
function isConnectParseError(head: Uint8Array | undefined): boolean {
  if (head === undefined) return false;
  try {
    const json = JSON.parse(new TextDecoder().decode(head)) as {
      code?: unknown;
      message?: unknown;
    };
    return (
      json.code === 'internal' &&
      typeof json.message === 'string' &&
      json.message.startsWith(PARSE_BINARY_PREFIX)
    );
  } catch {
    return false;
  }
}

/** True when a gRPC-Web body starts with a trailer frame holding connect's decoding failure. */
function isGrpcWebParseError(head: Uint8Array | undefined): boolean {
  // An uncompressed trailer frame: flag byte, 4-byte length, then HTTP/1-style header lines.
  if (head === undefined || head.byteLength < 5 || head[0] !== trailerFlag) return false;
  const text = new TextDecoder().decode(head.subarray(5));
  const status = /^grpc-status:\s*(\d+)\s*$/im.exec(text)?.[1];
  const message = /^grpc-message:\s*(.*?)\s*$/im.exec(text)?.[1] ?? '';
  let decoded = message;
  try {
    decoded = decodeURIComponent(message);
  } catch {
    // Keep the raw text; it then does not match the prefix.
  }
  return status === '13' && decoded.startsWith(PARSE_BINARY_PREFIX);
}
