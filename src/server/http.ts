/**
 * @module The HTTP/1.1 listener's request handler: the Connect protocol and
 * gRPC-Web for the guarded services (connect-node's universal handlers),
 * then a fallback for plain paths (`/metrics`, `/healthz`, `/livez`, `/readyz`).
 *
 * JSON is decoded strictly: an unknown field or enum name is an error, not
 * dropped (connect-node's default, `ignoreUnknownFields: true`, would store
 * a misspelt `"onError": "ON_ERROR_BLOKC"` as unset, that is fail-open).
 *
 * connect-node answers a binary request body it cannot decode with
 * INTERNAL (`parse binary: ...`), and JSON it cannot decode with
 * INVALID_ARGUMENT (`cannot decode ...`) but no `ErrorInfo`. Such an answer
 * is replaced by the guard's own: the guarded method is called with a
 * {@link MalformedRequest}, so the call is admitted, counted and answered
 * INVALID_ARGUMENT (`MALFORMED_REQUEST`) as over grpc-js; for JSON the
 * message keeps protobuf-es's text, which names the field.
 */
import { isUtf8 } from 'node:buffer';
import type * as http from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { DescMethod } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
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
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import { MalformedRequest, toConnectError } from './errors.js';
import { findJsonFieldProblem } from './json-field.js';
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
/** The message prefix of protobuf-es's errors for JSON it cannot decode, which connect passes on. */
const PARSE_JSON_PREFIX = 'cannot decode ';
/**
 * JSON decoding: unknown fields and enum names are refused, not dropped.
 * protobuf-es counts one level per `google.protobuf.Value` in JSON but two
 * (the `Value` and its `Struct` or `ListValue`) in binary, where the limit
 * is 100: at half that, nothing a JSON client sends is too deep for the
 * binary the store keeps and every client reads back.
 */
const JSON_OPTIONS = { ignoreUnknownFields: false, recursionLimit: 50 } as const;
/** The largest error body inspected for that error (connect's are a few hundred bytes). */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

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
    const captured = captureJson(
      universalRequestFromNodeRequest(req, res, undefined, undefined),
      options.readMaxBytes,
      handler.method,
    );
    const uReq = captured.uReq;
    handler(uReq)
      .then((uRes) => replaceParseError(uReq, uRes, handler, options, captured))
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
 * Returns `uRes`, or the guard's answer when `uRes` is connect's answer to
 * a body it could not decode (binary or JSON).
 */
async function replaceParseError(
  uReq: UniversalServerRequest,
  uRes: UniversalServerResponse,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  captured: CapturedJson,
): Promise<UniversalServerResponse> {
  const contentType = uReq.header.get('content-type') ?? '';
  const grpcWeb = contentType.startsWith('application/grpc-web');
  if (!grpcWeb && uRes.status !== 500 && uRes.status !== 400) return uRes;
  const chunks = await firstChunks(uRes);
  const parseError = grpcWeb ? grpcWebParseError(chunks.head) : connectParseError(chunks.head);
  if (parseError === undefined) return extend(uRes, { body: chunks.body });
  const notUtf8 = captured.notUtf8();
  const found =
    parseError.problem === undefined || notUtf8
      ? undefined
      : jsonFieldProblem(handler, captured.body(), grpcWeb, {
          encoding: uReq.header.get(grpcWeb ? 'grpc-encoding' : 'content-encoding'),
          maxBytes: options.readMaxBytes,
        });
  const problem = notUtf8
    ? NOT_UTF8
    : found === undefined
      ? parseError.problem
      : `${found.field}: ${found.problem}`;
  const err = await guardAnswer(uReq, handler, options, problem, found?.field);
  if (grpcWeb) {
    const trailer = new Headers();
    setTrailerStatus(trailer, err);
    const data = createTrailerSerialization().serialize(trailer);
    return extend(uRes, { body: createAsyncIterable([encodeEnvelope(trailerFlag, data)]) });
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

/** Content types whose body is JSON (Connect unary and streaming, gRPC-Web). */
const JSON_CONTENT_TYPE = /^application\/(?:json|connect\+json|grpc-web\+json)\b/i;
/** Content types whose body is a series of enveloped messages (Connect streaming, gRPC-Web). */
const ENVELOPED_CONTENT_TYPE = /^application\/(?:connect|grpc-web)\+/i;
/** The problem a {@link MalformedRequest} names for a JSON body that is not UTF-8. */
const NOT_UTF8 = 'the JSON is not valid UTF-8';

/** A JSON request body as connect read it. */
interface CapturedJson {
  /** The request whose body is recorded (and checked, see {@link captureJson}). */
  readonly uReq: UniversalServerRequest;
  /** The body's bytes, or `undefined` past `maxBytes` or for a body that is not JSON. */
  readonly body: () => Uint8Array | undefined;
  /** Whether the body was refused for bytes that are not UTF-8. */
  readonly notUtf8: () => boolean;
}

/**
 * Returns the request with its body recorded as connect reads it, for a
 * JSON request: when decoding fails, the body tells which field is at
 * fault. At most `maxBytes` are kept (connect refuses more anyway).
 *
 * connect decodes JSON text leniently, each invalid byte becoming U+FFFD:
 * two different ids would land on one. Binary strings are refused when
 * they are not UTF-8, and so is JSON here, unless it is compressed (then
 * connect's own decompression comes first): a unary body once it has all
 * arrived (connect reads all of it before decoding), each message of an
 * enveloped body as its last byte arrives, before connect sees that byte.
 * A unary method's refusal reads as connect's own JSON decoding error, so
 * {@link replaceParseError} has the guard answer it (credentials first);
 * a stream's is the {@link MalformedRequest} itself: the guard, which a
 * stream's handler runs before reading, has admitted the call already.
 */
function captureJson(
  uReq: UniversalServerRequest,
  maxBytes: number,
  method: DescMethod,
): CapturedJson {
  const source = uReq.body;
  const contentType = uReq.header.get('content-type') ?? '';
  if (
    !JSON_CONTENT_TYPE.test(contentType) ||
    typeof source !== 'object' ||
    source === null ||
    !(Symbol.asyncIterator in source)
  ) {
    return { uReq, body: () => undefined, notUtf8: () => false };
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  let complete = true;
  let refused = false;
  const grpcWeb = contentType.toLowerCase().startsWith('application/grpc-web');
  const identity = (name: string) => {
    const value = uReq.header.get(name);
    return value === null || value === '' || value === 'identity';
  };
  const checkUtf8 =
    identity('content-encoding') &&
    identity(grpcWeb ? 'grpc-encoding' : 'connect-content-encoding');
  const envelopes = ENVELOPED_CONTENT_TYPE.test(contentType) ? new EnvelopeText() : undefined;
  const refuse = (): never => {
    refused = true;
    throw method.methodKind === 'unary'
      ? new ConnectError(
          `${PARSE_JSON_PREFIX}${method.input.typeName} from JSON: ${NOT_UTF8}`,
          Code.InvalidArgument,
        )
      : toConnectError(new MalformedRequest(method, undefined, NOT_UTF8).error);
  };
  async function* recorded(): AsyncIterable<Uint8Array> {
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size <= maxBytes) chunks.push(chunk);
      else complete = false;
      if (checkUtf8 && envelopes !== undefined && !envelopes.push(chunk)) refuse();
      yield chunk;
    }
    if (checkUtf8 && envelopes === undefined && complete && !isUtf8(Buffer.concat(chunks))) {
      refuse();
    }
  }
  return {
    uReq: extend(uReq, { body: recorded() }),
    body: () => (complete ? Buffer.concat(chunks) : undefined),
    notUtf8: () => refused,
  };
}

/**
 * Checks the messages of an enveloped body (each a flag byte, a 4-byte
 * length and the message) as their bytes arrive: an uncompressed message
 * must be UTF-8. Holds the bytes of one unfinished message at most.
 */
export class EnvelopeText {
  #chunks: Buffer[] = [];
  #length = 0;
  /** Flag byte and total length (header included) of the message being read. */
  #flags = 0;
  #need: number | undefined;

  /** Takes the next bytes; returns false when a message they complete is not UTF-8. */
  push(chunk: Uint8Array): boolean {
    this.#chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#length += chunk.byteLength;
    for (;;) {
      if (this.#need === undefined) {
        if (this.#length < 5) return true;
        if (this.#chunks.length > 1) this.#chunks = [Buffer.concat(this.#chunks, this.#length)];
        const head = this.#chunks[0] as Buffer;
        this.#flags = head[0] as number;
        this.#need = 5 + head.readUInt32BE(1);
      }
      if (this.#length < this.#need) return true;
      const all =
        this.#chunks.length === 1
          ? (this.#chunks[0] as Buffer)
          : Buffer.concat(this.#chunks, this.#length);
      // Bit 0: compressed (decompressed by connect first); bit 1: end of stream.
      if ((this.#flags & 0b11) === 0 && !isUtf8(all.subarray(5, this.#need))) return false;
      const rest = all.subarray(this.#need);
      this.#chunks = rest.length === 0 ? [] : [rest];
      this.#length = rest.length;
      this.#need = undefined;
    }
  }
}

/** The unknown field or enum name of a JSON body connect could not decode, if that is its fault. */
function jsonFieldProblem(
  handler: UniversalHandler,
  body: Uint8Array | undefined,
  grpcWeb: boolean,
  compression: { readonly encoding: string | null; readonly maxBytes: number },
): { field: string; problem: string } | undefined {
  if (body === undefined) return undefined;
  let data = body;
  let compressed = !grpcWeb && compression.encoding !== null && compression.encoding !== 'identity';
  if (grpcWeb) {
    // One message frame: flag byte (bit 0: compressed), 4-byte length, then the JSON.
    if (body.byteLength < 5 || (body[0] as number) > 1) return undefined;
    compressed = body[0] === 1;
    data = body.subarray(5, 5 + new DataView(body.buffer, body.byteOffset).getUint32(1));
  }
  let json: unknown;
  try {
    // Decompressed as connect did, within the same bound, to find the field it could not read.
    const options = { maxOutputLength: compression.maxBytes };
    if (compressed && compression.encoding === 'gzip') data = gunzipSync(data, options);
    else if (compressed && compression.encoding === 'br')
      data = brotliDecompressSync(data, options);
    else if (compressed) return undefined;
    json = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
  return findJsonFieldProblem(handler.method.input, json);
}

/** Runs the guarded method on a {@link MalformedRequest} and returns the error it answers. */
async function guardAnswer(
  uReq: UniversalServerRequest,
  handler: UniversalHandler,
  options: HttpHandlerOptions,
  problem: string | undefined,
  field: string | undefined,
): Promise<ConnectError> {
  const method = handler.method;
  const fn = options.guardedMethod(method);
  const malformed = new MalformedRequest(method, undefined, problem, field);
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

/** A decoding failure of connect's: for JSON, protobuf-es's message, which names the field. */
interface ParseError {
  readonly problem: string | undefined;
}

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
    return { problem: undefined };
  }
  if (code === 'invalid_argument' && message.startsWith(PARSE_JSON_PREFIX)) {
    return { problem: message };
  }
  return undefined;
}

/** Returns connect's decoding failure when a Connect unary error body is one. */
function connectParseError(head: Uint8Array | undefined): ParseError | undefined {
  if (head === undefined) return undefined;
  try {
    const json = JSON.parse(new TextDecoder().decode(head)) as {
      code?: unknown;
      message?: unknown;
      details?: unknown;
    };
    return parseErrorOf(json.code, json.message, json.details !== undefined);
  } catch {
    return undefined;
  }
}

/** gRPC status codes connect's decoding failures have, by their Connect name. */
const GRPC_CODE_NAMES: Readonly<Record<string, string>> = {
  '3': 'invalid_argument',
  '13': 'internal',
};

/** Returns connect's decoding failure when a gRPC-Web body starts with a trailer frame holding one. */
function grpcWebParseError(head: Uint8Array | undefined): ParseError | undefined {
  // An uncompressed trailer frame: flag byte, 4-byte length, then HTTP/1-style header lines.
  if (head === undefined || head.byteLength < 5 || head[0] !== trailerFlag) return undefined;
  const text = new TextDecoder().decode(head.subarray(5));
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
