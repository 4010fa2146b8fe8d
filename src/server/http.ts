/**
 * @module The HTTP/1.1 listener's request handler: the Connect protocol and
 * gRPC-Web for the guarded services (connect-node's universal handlers),
 * then a fallback for plain paths (`/metrics`, `/healthz`, `/livez`, `/readyz`).
 *
 * JSON is decoded strictly: an unknown field or enum name is an error, not
 * dropped (connect-node's default, `ignoreUnknownFields: true`, would store
 * a misspelt `"onError": "ON_ERROR_BLOKC"` as unset, that is fail-open), and
 * so are bytes that are not UTF-8 (connect's default decoder reads them as
 * U+FFFD).
 *
 * connect-node answers a binary request body it cannot decode with
 * INTERNAL (`parse binary: ...`), and JSON it cannot decode with
 * INVALID_ARGUMENT (`cannot decode ...`) but no `ErrorInfo`, in a Connect
 * unary error, a gRPC-Web trailer or a Connect stream's end-stream message.
 * Such an answer is replaced by the guard's own: the guarded method is called with a
 * {@link MalformedRequest}, so the call is admitted, counted and answered
 * INVALID_ARGUMENT (`MALFORMED_REQUEST`) as over grpc-js; for JSON the
 * message keeps protobuf-es's text, which names the field.
 */
import { constants } from 'node:buffer';
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
import {
  codeToHttpStatus,
  createEndStreamSerialization,
  endStreamFlag,
  errorToJsonBytes,
} from '@connectrpc/connect/protocol-connect';
import {
  createTrailerSerialization,
  parseContentType as parseGrpcWebContentType,
  setTrailerStatus,
  trailerFlag,
} from '@connectrpc/connect/protocol-grpc-web';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from '@connectrpc/connect-node';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import {
  COMPRESSED_WITHOUT_ENCODING,
  clipErrorText,
  EXTRA_MESSAGE,
  grpcListenerOnly,
  hasLoneSurrogate,
  invalidTimeout,
  MalformedRequest,
  NO_MESSAGE,
  NOT_DECOMPRESSIBLE,
  RefusedRequest,
  TooLargeRequest,
  toConnectError,
} from './errors.js';
import { checkMessages, type Decoding, decompress } from './http-nodes.js';
import { findJsonFieldProblem } from './json-field.js';
import { readsRequestStream } from './request-stream.js';
import { clampTimeoutHeaders } from './timeout-header.js';

/** A guarded method as a transport calls it. */
// biome-ignore lint/suspicious/noExplicitAny: methods of every service go through one lookup.
type GuardedMethod = (request: any, ctx: HandlerContext) => Promise<unknown>;

/** Options of {@link createHttpHandler}. */
export interface HttpHandlerOptions {
  /** Registers the guarded services on a router. */
  readonly routes: (router: ConnectRouter) => void;
  /** Returns the guarded method a universal handler serves, to answer undecodable requests. */
  readonly guardedMethod: (method: DescMethod) => GuardedMethod | undefined;
  /**
   * Whether a call carries the token its method needs: without it, the call
   * is answered UNAUTHENTICATED before connect reads its body, so a transport
   * error (a corrupt gzip, an unknown encoding, a body too large) tells an
   * unauthenticated caller nothing either.
   */
  readonly authorized: (method: DescMethod, header: Headers) => boolean;
  /** Largest request message, in bytes. */
  readonly readMaxBytes: number;
  /** Most nodes a request message may decode into (`message-nodes.ts`). */
  readonly maxMessageNodes: number;
  /** Aborts handlers when the server shuts down hard. */
  readonly shutdownSignal: AbortSignal;
  readonly logger: Logger;
  /** Answers paths that are not RPCs. */
  readonly fallback: (req: http.IncomingMessage, res: http.ServerResponse) => void;
}

/** The message prefix of connect's error for a binary body it cannot decode. */
const PARSE_BINARY_PREFIX = 'parse binary:';
/** The message prefix of protobuf-es's errors for JSON it cannot decode, which connect passes on. */
const PARSE_JSON_PREFIX = 'cannot decode ';
/**
 * JSON decoding: unknown fields and enum names are refused, not dropped.
 * protobuf-es counts one level per `google.protobuf.Value` in JSON but two
 * (the `Value` and its `Struct` or `ListValue`) in binary, where the limit
 * is 100: at half that, nothing a JSON client sends is too deep for the
 * binary the store keeps and every client reads back.
 */
const JSON_OPTIONS = {
  ignoreUnknownFields: false,
  recursionLimit: 50,
  textDecoder: { decode: decodeUtf8 },
} as const;
/** The problem a {@link MalformedRequest} names for a JSON body that is not UTF-8. */
const NOT_UTF8 = 'the JSON is not valid UTF-8';
/** The problem named for JSON whose escapes make a lone surrogate, which UTF-8 cannot carry. */
const LONE_SURROGATE = 'the JSON escapes a lone surrogate (\\uD800-\\uDFFF), which is not Unicode';
/**
 * The problem named for a JSON number too large for a double: it reads as
 * Infinity, which protobuf-es refuses in a number field but keeps in a
 * `google.protobuf.Value` (a result's error, arguments), and which no JSON
 * payload or answer can then write.
 */
const INFINITE_NUMBER = 'the JSON number is too large for a double (it reads as Infinity)';
/** How {@link decodeUtf8}'s errors start; protobuf-es's own start `cannot decode message`/`field`. */
const OWN_DECODE_ERROR_PREFIX = `${PARSE_JSON_PREFIX}the request: `;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });
/**
 * Text that may hold a lone surrogate escape: a high one not followed by a
 * low one, a low one not preceded by a high one, or an escaped backslash
 * before `uD8`-`uDF` (which can make either look paired). A pair, as
 * Python's `json.dumps` escapes an emoji, matches none of them.
 */
const LONE_ESCAPE_CANDIDATE =
  /\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]|\\\\u[dD][89a-fA-F]/;
/**
 * Text that may hold a number too large for a double: a number with an
 * exponent of three digits, or with 200 digits before its point (enough to
 * reach 1.8e308 with a smaller exponent). Each alternative starts only where
 * a number can (not after a letter, digit, point, sign or quote), so a run of digits
 * is tried once, not at each of its positions, and the scan stays linear.
 */
const INFINITE_NUMBER_CANDIDATE = /(?<![\w.+\-"])-?(?:\d+(?:\.\d+)?[eE]\+?\d{3}|\d{200})/;

/**
 * Decodes a JSON message's text for connect, refusing what is not Unicode:
 * bytes that are not UTF-8 (connect's own decoder turns each into U+FFFD)
 * and escapes of a lone surrogate. protobuf-es refuses those in a string
 * field but stores them as U+FFFD in a `Struct` (arguments, results), so
 * two different arguments would land on one. It refuses a number too large
 * for a double as well (see {@link INFINITE_NUMBER}). It runs on every
 * message connect parses, after its decompression, whatever the protocol,
 * the encoding headers or the envelope's flags; binary strings are checked
 * alike by protobuf-es, and binary Values by `value-kinds.ts`.
 */
function decodeUtf8(bytes?: Uint8Array): string {
  let text: string;
  try {
    text = STRICT_UTF8.decode(bytes);
  } catch {
    throw new Error(`${OWN_DECODE_ERROR_PREFIX}${NOT_UTF8}`);
  }
  if (text.includes('\\u') && LONE_ESCAPE_CANDIDATE.test(text)) {
    const field = jsonFieldWhere(text, isLoneSurrogateString, true);
    // Named well-formed: connect percent-encodes its message in a gRPC-Web trailer.
    if (field !== undefined) {
      throw new Error(`${OWN_DECODE_ERROR_PREFIX}${clipErrorText(field)}: ${LONE_SURROGATE}`);
    }
  }
  if (INFINITE_NUMBER_CANDIDATE.test(text)) {
    const field = jsonFieldWhere(text, isInfiniteNumber, false);
    if (field !== undefined) {
      throw new Error(`${OWN_DECODE_ERROR_PREFIX}${clipErrorText(field)}: ${INFINITE_NUMBER}`);
    }
  }
  return text;
}

function isLoneSurrogateString(value: unknown): boolean {
  return typeof value === 'string' && hasLoneSurrogate(value);
}

function isInfiniteNumber(value: unknown): boolean {
  return typeof value === 'number' && !Number.isFinite(value);
}

/**
 * The JSON path (`event.context.args.path`, `items[2]`) of the first value
 * of `text` that `bad` holds to (or key, when `checkKeys`); undefined when none,
 * or when `text` does not parse (protobuf-es then refuses it).
 */
function jsonFieldWhere(
  text: string,
  bad: (value: unknown) => boolean,
  checkKeys: boolean,
): string | undefined {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch {
    return undefined;
  }
  // Iterative: JSON.parse takes nesting deeper than a recursive walk would.
  const stack: [unknown, string][] = [[root, '']];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [value, path] = next;
    if (bad(value)) {
      return path === '' ? '(the request)' : path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i -= 1) stack.push([value[i], `${path}[${i}]`]);
    } else if (typeof value === 'object' && value !== null) {
      const keys = Object.keys(value);
      for (let i = keys.length - 1; i >= 0; i -= 1) {
        const key = keys[i] as string;
        const child = path === '' ? key : `${path}.${key}`;
        if (checkKeys && bad(key)) return child;
        stack.push([(value as Record<string, unknown>)[key], child]);
      }
    }
  }
  return undefined;
}

/**
 * The problem and field of a decoding error {@link decodeUtf8} threw, from
 * connect's message; undefined for any other error.
 */
function ownDecodeProblem(message: string): { problem: string; field?: string } | undefined {
  if (!message.startsWith(OWN_DECODE_ERROR_PREFIX)) return undefined;
  const rest = message.slice(OWN_DECODE_ERROR_PREFIX.length);
  if (rest === NOT_UTF8) return { problem: NOT_UTF8 };
  for (const named of [LONE_SURROGATE, INFINITE_NUMBER]) {
    const suffix = `: ${named}`;
    if (rest.endsWith(suffix)) return { problem: rest, field: rest.slice(0, -suffix.length) };
  }
  return undefined;
}

/**
 * The largest decoding error read back from its compressed form: it quotes
 * at most the request (at most `readMaxBytes`), escaped at most about three
 * bytes a byte (JSON in JSON, or percent-encoded in a gRPC-Web trailer).
 */
function errorMaxBytes(readMaxBytes: number): number {
  // zlib refuses a bound past the largest Buffer.
  return Math.min(8 * readMaxBytes + 64 * 1024, constants.MAX_LENGTH);
}

/** Creates the HTTP listener's request handler. */
export function createHttpHandler(options: HttpHandlerOptions): http.RequestListener {
  const router = createConnectRouter({
    // Connect and gRPC-Web only: native gRPC has its own HTTP/2 listener, and
    // over this one its decode errors would reach the client unguarded
    // (INTERNAL "parse binary: ..."). A gRPC request here answers 415.
    grpc: false,
    readMaxBytes: options.readMaxBytes,
    shutdownSignal: options.shutdownSignal,
    acceptCompression: [compressionGzip, compressionBrotli],
    jsonOptions: JSON_OPTIONS,
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
    clampTimeoutHeaders(req.headers);
    const nodeRequest = universalRequestFromNodeRequest(req, res, undefined, undefined);
    const json = JSON_CONTENT_TYPE.test(nodeRequest.header.get('content-type') ?? '');
    const captured = captureJson(nodeRequest, json, options.readMaxBytes);
    const framing = framingOf(captured.uReq);
    const { uReq, refused } = checkMessages(captured.uReq, {
      method: handler.method,
      json,
      enveloped: framing !== 'unary',
      decoding: {
        encoding: captured.uReq.header.get(ENCODING_HEADER[framing]),
        maxBytes: options.readMaxBytes,
      },
      limit: options.maxMessageNodes,
    });
    const rpc = isRpc(handler, uReq);
    const answer =
      !options.authorized(handler.method, uReq.header) && rpc
        ? refuseBeforeBody(uReq, handler, options, new MalformedRequest(handler.method, undefined))
        : // connect-node answers a bidi stream over HTTP/1.1 a bare 505, which clients read as UNKNOWN.
          rpc && handler.method.methodKind === 'bidi_streaming'
          ? refuseBeforeBody(
              uReq,
              handler,
              options,
              new RefusedRequest(grpcListenerOnly(handler.method)),
            )
          : handler(uReq).then((uRes) => {
              const refusal = refused();
              // A request stream's refusal reached the method through its requests.
              return refusal !== undefined && !readsRequestStream(handler.method)
                ? answerRefused(uReq, uRes, handler, options, refusal)
                : replaceParseError(uReq, uRes, handler, options, captured.body);
            });
    answer
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((e: unknown) =>
        answerFailure(res, e, options.logger, `${handler.service.typeName}/${handler.method.name}`),
      );
  };
}

/**
 * Ends a response whose handling failed: logged, then answered 500 or, once
 * its head is sent, the connection closed, so the client is never left
 * waiting. A client that hung up is not a failure of ours. (`req.destroyed`
 * says nothing here: a request is destroyed once its body is read.)
 */
export function answerFailure(
  res: http.ServerResponse,
  e: unknown,
  logger: Logger,
  rpc: string,
): void {
  // (`res.socket` is null for a pipelined response still queued behind
  // another: it is answered in its turn.)
  if (res.destroyed || res.writableEnded) return;
  logger.error('http request failed', { rpc, err: e });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(500, { 'content-type': 'text/plain', connection: 'close' });
  res.end('internal error\n');
}

/**
 * Whether connect would serve the request as a call: a method it allows
 * (POST) and a content type one of its protocols reads. Anything else it
 * answers 405 or 415, with or without a token, which tells a caller nothing;
 * and a refusal framed for a protocol connect does not speak (gRPC-Web text)
 * would not reach the client as one.
 */
function isRpc(handler: UniversalHandler, uReq: UniversalServerRequest): boolean {
  const contentType = uReq.header.get('content-type') ?? '';
  return (
    handler.allowedMethods.includes(uReq.method) &&
    handler.supportedContentType(contentType) &&
    // connect's gRPC-Web matcher takes gRPC-Web text, which its handler then answers 415.
    parseGrpcWebContentType(contentType)?.text !== true
  );
}

/** How a request's messages are framed, by its content type. */
type Framing = 'unary' | 'connect-stream' | 'grpc-web';

function framingOf(uReq: UniversalServerRequest): Framing {
  const contentType = (uReq.header.get('content-type') ?? '').toLowerCase();
  if (contentType.startsWith('application/grpc-web')) return 'grpc-web';
  if (contentType.startsWith('application/connect+')) return 'connect-stream';
  return 'unary';
}

/** The header naming the compression of a request's messages, by framing. */
const ENCODING_HEADER: Readonly<Record<Framing, string>> = {
  unary: 'content-encoding',
  'connect-stream': 'connect-content-encoding',
  'grpc-web': 'grpc-encoding',
};

/**
 * Returns `uRes`, or the guard's answer when `uRes` is connect's answer to
 * a body it could not decode (binary or JSON): a Connect unary error, a
 * gRPC-Web trailer, or a Connect stream's end-stream message that comes
 * before any other.
 */
async function replaceParseError(
  uReq: UniversalServerRequest,
  uRes: UniversalServerResponse,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  requestBody: () => Uint8Array | undefined,
): Promise<UniversalServerResponse> {
  const framing = framingOf(uReq);
  if (framing === 'unary' && uRes.status !== 500 && uRes.status !== 400 && uRes.status !== 429) {
    return uRes;
  }
  if (framing === 'connect-stream' && uRes.status !== 200) return uRes;
  const chunks = await firstChunks(uRes);
  // connect compresses an error of 1 KiB or more when the client accepts it.
  const decode = {
    encoding: uRes.header?.get(ENCODING_HEADER[framing]) ?? null,
    maxBytes: errorMaxBytes(options.readMaxBytes),
  };
  const parseError =
    framing === 'grpc-web'
      ? grpcWebParseError(chunks.head, decode)
      : framing === 'connect-stream'
        ? connectEndStreamParseError(chunks.head, decode)
        : connectParseError(chunks.head, decode);
  if (parseError === undefined) return extend(uRes, { body: chunks.body });
  if (parseError.kind !== 'decode') {
    // connect's own read failed (too large, not decompressible, framed
    // wrong, a bad timeout): the guard answers it with a reason, and counts
    // it, as it does a decode error.
    const refused = refusalOf(parseError, handler.method, options.readMaxBytes);
    const err = await guardAnswer(uReq, handler, options, refused);
    return errorResponse(framing, err, uRes.status, uRes.header ?? new Headers());
  }
  const own = parseError.problem === undefined ? undefined : ownDecodeProblem(parseError.problem);
  const found =
    parseError.problem === undefined || own !== undefined
      ? undefined
      : jsonFieldProblem(handler, requestBody(), framing !== 'unary', {
          encoding: uReq.header.get(ENCODING_HEADER[framing]),
          maxBytes: options.readMaxBytes,
        });
  const problem =
    own?.problem ?? (found === undefined ? parseError.problem : `${found.field}: ${found.problem}`);
  const malformed = new MalformedRequest(
    handler.method,
    undefined,
    problem,
    own?.field ?? found?.field,
  );
  const err = await guardAnswer(uReq, handler, options, malformed);
  return errorResponse(framing, err, uRes.status, uRes.header ?? new Headers());
}

/**
 * Answers a call whose body failed on the node bound (a unary or
 * server-streaming method: connect answered the failed read itself) with
 * the guard's answer to it, so it is counted and logged as over gRPC.
 */
async function answerRefused(
  uReq: UniversalServerRequest,
  uRes: UniversalServerResponse,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  refused: RefusedRequest,
): Promise<UniversalServerResponse> {
  const framing = framingOf(uReq);
  const err = await guardAnswer(uReq, handler, options, refused);
  const header = new Headers(uRes.header ?? undefined);
  header.delete(ENCODING_HEADER[framing]);
  return errorResponse(framing, err, 200, header);
}

/**
 * Answers a call before connect reads its body, with the guard's answer to
 * `refused`: admitted first, so a call without the token its method needs
 * is UNAUTHENTICATED (and one without a body that could decode is answered
 * so), counted as any call.
 */
async function refuseBeforeBody(
  uReq: UniversalServerRequest,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  refused: RefusedRequest,
): Promise<UniversalServerResponse> {
  const framing = framingOf(uReq);
  const err = await guardAnswer(uReq, handler, options, refused);
  const header = new Headers({
    'content-type':
      framing === 'unary' ? 'application/json' : (uReq.header.get('content-type') ?? ''),
  });
  return errorResponse(framing, err, 200, header);
}

/**
 * `err` as `framing` carries it: a gRPC-Web trailer frame or a Connect
 * end-stream frame (with `status`, which is 200), or a Connect unary error
 * body with its own status. `header` is kept but for the body's encoding.
 */
function errorResponse(
  framing: Framing,
  err: ConnectError,
  status: number,
  header: Headers,
): UniversalServerResponse {
  if (framing === 'grpc-web') {
    const trailer = new Headers();
    setTrailerStatus(trailer, err);
    const data = createTrailerSerialization().serialize(trailer);
    return { status, header, body: createAsyncIterable([encodeEnvelope(trailerFlag, data)]) };
  }
  if (framing === 'connect-stream') {
    const data = createEndStreamSerialization({}).serialize({
      metadata: new Headers(),
      error: err,
    });
    return { status, header, body: createAsyncIterable([encodeEnvelope(endStreamFlag, data)]) };
  }
  const unaryHeader = new Headers(header);
  const body = errorToJsonBytes(err, {});
  unaryHeader.delete('content-encoding');
  unaryHeader.set('content-length', String(body.byteLength));
  return {
    status: codeToHttpStatus(err.code),
    header: unaryHeader,
    body: createAsyncIterable([body]),
  };
}

/** Content types whose body is JSON (Connect unary and streaming, gRPC-Web). */
const JSON_CONTENT_TYPE = /^application\/(?:json|connect\+json|grpc-web\+json)\b/i;

/**
 * Returns the request with its body recorded as connect reads it, for a
 * JSON request: when decoding fails, the body tells which field is at
 * fault. At most `maxBytes` are kept (connect refuses more anyway).
 */
function captureJson(
  uReq: UniversalServerRequest,
  json: boolean,
  maxBytes: number,
): { uReq: UniversalServerRequest; body: () => Uint8Array | undefined } {
  const source = uReq.body;
  if (!json || typeof source !== 'object' || source === null || !(Symbol.asyncIterator in source)) {
    return { uReq, body: () => undefined };
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  let complete = true;
  async function* recorded(): AsyncIterable<Uint8Array> {
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size <= maxBytes) chunks.push(chunk);
      else complete = false;
      yield chunk;
    }
  }
  return {
    uReq: extend(uReq, { body: recorded() }),
    body: () => (complete ? Buffer.concat(chunks) : undefined),
  };
}

/** The unknown field or enum name of a JSON body connect could not decode, if that is its fault. */
function jsonFieldProblem(
  handler: UniversalHandler,
  body: Uint8Array | undefined,
  enveloped: boolean,
  compression: Decoding,
): { field: string; problem: string } | undefined {
  if (body === undefined) return undefined;
  // Decompressed as connect did, within the same bound, to find the field it could not read.
  const data = enveloped
    ? envelopeData(body, MESSAGE_FLAG, compression)
    : decompress(body, compression);
  const json = parseJson(data);
  return json === undefined ? undefined : findJsonFieldProblem(handler.method.input, json);
}

/** Runs the guarded method on a refused request and returns the error it answers. */
async function guardAnswer(
  uReq: UniversalServerRequest,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  refused: RefusedRequest,
): Promise<ConnectError> {
  const method = handler.method;
  const fn = options.guardedMethod(method);
  if (fn === undefined) return toConnectError(refused.error);
  const ctx = createHandlerContext({
    service: method.parent,
    method,
    protocolName: framingOf(uReq) === 'grpc-web' ? 'grpc-web' : 'connect',
    requestMethod: uReq.method,
    url: uReq.url,
    requestHeader: uReq.header,
  });
  try {
    const result = fn(refused, ctx);
    // A streaming method returns an iterable: its first step raises the error.
    if (Symbol.asyncIterator in Object(result)) {
      await (result as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]().next();
    } else {
      await result;
    }
    return toConnectError(refused.error);
  } catch (e: unknown) {
    return toConnectError(e);
  } finally {
    ctx.abort();
  }
}

/** The first chunk of a response body, and the body to send on. */
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
  return { head: first.value, body: prepend(first.value, it) };
}

/**
 * Returns `it` with `head` put back in front. `return` and `throw` reach
 * `it` at once, as they would without the wrapper: connect-node calls them
 * when the client hangs up or a write fails, so that a stream (a Health
 * watch, say) ends its handler.
 */
export function prepend<T>(head: T, it: AsyncIterator<T>): AsyncIterableIterator<T> {
  let sent = false;
  const prepended: AsyncIterableIterator<T> = {
    next() {
      if (sent) return it.next();
      sent = true;
      return Promise.resolve({ done: false, value: head });
    },
    return(value?: unknown) {
      sent = true;
      return it.return?.(value) ?? Promise.resolve({ done: true, value: undefined });
    },
    throw(e?: unknown) {
      sent = true;
      return it.throw?.(e) ?? Promise.reject(e);
    },
    [Symbol.asyncIterator]() {
      return prepended;
    },
  };
  return prepended;
}

/** `data` parsed as JSON, or undefined. */
function parseJson(data: Uint8Array | undefined): unknown {
  if (data === undefined) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}

/**
 * The message of the envelope at the start of `head` when its flags are
 * `flag` (with or without the compressed bit), decompressed.
 */
function envelopeData(
  head: Uint8Array | undefined,
  flag: number,
  decoding: Decoding,
): Uint8Array | undefined {
  if (head === undefined || head.byteLength < 5) return undefined;
  const flags = head[0] as number;
  if ((flags & ~COMPRESSED_FLAG) !== flag) return undefined;
  const data = head.subarray(5, 5 + new DataView(head.buffer, head.byteOffset).getUint32(1));
  return (flags & COMPRESSED_FLAG) === 0 ? data : decompress(data, decoding);
}

/** An envelope's flag bit for a compressed message. */
const COMPRESSED_FLAG = 0b1;
/** The flags of a request message's envelope, but for {@link COMPRESSED_FLAG}. */
const MESSAGE_FLAG = 0;

/**
 * A failure of connect's reading of a request: a decoding failure (`problem`:
 * for JSON, protobuf-es's message, which names the field), a message over
 * `readMaxBytes`, or a body that does not decompress.
 */
interface ParseError {
  readonly kind: 'decode' | 'too_large' | 'decompress' | 'framing' | 'timeout';
  /**
   * `decode`: what is wrong, if connect said. `framing`: what is wrong with
   * the request's messages. `timeout`: the header's value.
   */
  readonly problem: string | undefined;
  /** `timeout`: the header that is not a timeout. */
  readonly header?: string;
}

/**
 * connect's refusals of how a request carries its messages (each a client's
 * mistake, though connect answers some INTERNAL or UNIMPLEMENTED), with what
 * the guard says of it: the words grpc-js's refusals get too (`grpc-refusals.ts`).
 */
const FRAMING_PROBLEMS: readonly (readonly [RegExp, string])[] = [
  [
    /^protocol error: (?:incomplete envelope|promised \d+ bytes, received \d+)$/,
    'the message envelope is incomplete',
  ],
  [
    /^received compressed envelope, but do not know how to decompress$/,
    COMPRESSED_WITHOUT_ENCODING,
  ],
  [/^protocol error: missing input message for \w+ method$/, NO_MESSAGE],
  [/^protocol error: received extra input message for \w+ method$/, EXTRA_MESSAGE],
];

/** connect's refusal of a timeout header, and the header it names. */
const TIMEOUT_PATTERN = /^protocol error: invalid (grpc|connect) timeout value: (.*)$/s;

/** The start of connect's message for a request message over `readMaxBytes`. */
const TOO_LARGE_PATTERN =
  /^message (?:size (?:\d+ )?)?is larger than configured readMaxBytes \d+(?: after decompression)?$/;
/** connect-node's message for a request body that does not decompress. */
const DECOMPRESSION_FAILED_PREFIX = 'decompression failed';

/**
 * Returns connect's decoding failure when `code` and `message` are one: a
 * binary one is INTERNAL, a JSON one INVALID_ARGUMENT. An error with details
 * came from the guard, never from connect's decoding.
 */
function parseErrorOf(
  code: unknown,
  message: unknown,
  hasDetails: boolean,
): ParseError | undefined {
  if (hasDetails || typeof message !== 'string') return undefined;
  if (code === 'internal' && message.startsWith(PARSE_BINARY_PREFIX)) {
    return { kind: 'decode', problem: undefined };
  }
  if (code === 'invalid_argument' && message.startsWith(PARSE_JSON_PREFIX)) {
    return { kind: 'decode', problem: message };
  }
  if (code === 'resource_exhausted' && TOO_LARGE_PATTERN.test(message)) {
    return { kind: 'too_large', problem: undefined };
  }
  // INVALID_ARGUMENT for bad data, INTERNAL for any other zlib failure: the body's fault either way.
  if (
    (code === 'invalid_argument' || code === 'internal') &&
    message.startsWith(DECOMPRESSION_FAILED_PREFIX)
  ) {
    return { kind: 'decompress', problem: undefined };
  }
  if (code === 'invalid_argument' || code === 'internal' || code === 'unimplemented') {
    for (const [pattern, problem] of FRAMING_PROBLEMS) {
      if (pattern.test(message)) return { kind: 'framing', problem };
    }
    const timeout = TIMEOUT_PATTERN.exec(message);
    if (timeout !== null) {
      return {
        kind: 'timeout',
        problem: timeout[2],
        header: timeout[1] === 'grpc' ? 'grpc-timeout' : 'connect-timeout-ms',
      };
    }
  }
  return undefined;
}

/** The request the guard refuses for connect's failure to read one (anything but a decode error). */
function refusalOf(
  parseError: ParseError,
  method: DescMethod,
  readMaxBytes: number,
): RefusedRequest {
  switch (parseError.kind) {
    case 'too_large':
      return new TooLargeRequest(readMaxBytes);
    case 'timeout':
      return new RefusedRequest(
        invalidTimeout(parseError.header ?? 'connect-timeout-ms', parseError.problem ?? ''),
      );
    case 'framing':
      return new MalformedRequest(method, undefined, parseError.problem);
    default:
      return new MalformedRequest(method, undefined, NOT_DECOMPRESSIBLE);
  }
}

/** Returns connect's decoding failure when a Connect unary error body is one. */
function connectParseError(
  head: Uint8Array | undefined,
  decoding: Decoding,
): ParseError | undefined {
  const json = parseJson(head === undefined ? undefined : decompress(head, decoding)) as
    | { code?: unknown; message?: unknown; details?: unknown }
    | undefined;
  if (typeof json !== 'object' || json === null) return undefined;
  return parseErrorOf(json.code, json.message, json.details !== undefined);
}

/**
 * Returns connect's decoding failure when a Connect stream's first chunk is
 * an end-stream message holding one.
 */
function connectEndStreamParseError(
  head: Uint8Array | undefined,
  decoding: Decoding,
): ParseError | undefined {
  const json = parseJson(envelopeData(head, endStreamFlag, decoding)) as
    | { error?: { code?: unknown; message?: unknown; details?: unknown } }
    | undefined;
  const error = typeof json === 'object' && json !== null ? json.error : undefined;
  if (typeof error !== 'object' || error === null) return undefined;
  return parseErrorOf(error.code, error.message, error.details !== undefined);
}

/** gRPC status codes connect's decoding failures have, by their Connect name. */
const GRPC_CODE_NAMES: Readonly<Record<string, string>> = {
  '3': 'invalid_argument',
  '8': 'resource_exhausted',
  '12': 'unimplemented',
  '13': 'internal',
};

/** Returns connect's decoding failure when a gRPC-Web body starts with a trailer frame holding one. */
function grpcWebParseError(
  head: Uint8Array | undefined,
  decoding: Decoding,
): ParseError | undefined {
  // A trailer frame: flag byte, 4-byte length, then HTTP/1-style header lines.
  const data = envelopeData(head, trailerFlag, decoding);
  if (data === undefined) return undefined;
  const text = new TextDecoder().decode(data);
  const status = /^grpc-status:\s*(\d+)\s*$/im.exec(text)?.[1];
  const message = /^grpc-message:\s*(.*?)\s*$/im.exec(text)?.[1] ?? '';
  const hasDetails = /^grpc-status-details-bin:/im.test(text);
  let decoded = message;
  try {
    decoded = decodeURIComponent(message);
  } catch {
    // Keep the raw text; it then does not match a prefix.
  }
  return parseErrorOf(GRPC_CODE_NAMES[status ?? ''], decoded, hasDetails);
}
