/**
 * @module The checks of a request's messages that run before connect-node
 * decodes them, on the HTTP listener: the node bound of `message-nodes.ts`
 * and, for binary messages, the Value check of `value-kinds.ts`. The request
 * body is read through a wrapper that checks each message, and fails the
 * body when one fails a check. connect decodes a unary message once its body
 * ends, and a stream's message once its envelope is complete, so the wrapper
 * passes a unary body on as it comes and checks it at the end, and passes a
 * stream's envelopes on whole, each checked first; an envelope whose header
 * declares more than the size bound, and all after it, go on at once, as
 * connect refuses it from its header. A compressed message is checked
 * decompressed; one that does not decompress within the size bound is left
 * to connect, which refuses it.
 */
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { DescMethod } from '@bufbuild/protobuf';
import type { UniversalServerRequest } from '@connectrpc/connect/protocol';
import { extend } from '../extend.js';
import { type RefusedRequest, TooComplexRequest } from './errors.js';
import {
  countJsonMessageNodes,
  countNodes,
  mayExceedJsonNodes,
  mayExceedNodes,
} from './message-nodes.js';
import { holdsValues, valueProblem, valueRefusal } from './value-kinds.js';

/** How a body is read: its compression, and the bound decompressed. */
export interface Decoding {
  readonly encoding: string | null;
  readonly maxBytes: number;
}

/**
 * `data` as its encoding header says: as it is for none or `identity`,
 * decompressed for gzip or brotli (within `maxBytes`); undefined when that
 * fails or the encoding is another.
 */
export function decompress(data: Uint8Array, decoding: Decoding): Uint8Array | undefined {
  if (!isCompressed(decoding)) return data;
  const options = { maxOutputLength: decoding.maxBytes };
  try {
    if (decoding.encoding === 'gzip') return gunzipSync(data, options);
    if (decoding.encoding === 'br') return brotliDecompressSync(data, options);
  } catch {
    // Not what connect takes: it refuses it itself.
  }
  return undefined;
}

/** Whether an encoding header names a compression (not none, not `identity`). */
function isCompressed(decoding: Decoding): boolean {
  return decoding.encoding !== null && decoding.encoding !== 'identity';
}

/** What {@link checkMessages} needs to know of a request. */
export interface NodeBound {
  readonly method: DescMethod;
  /** Whether the messages are JSON (else binary protobuf). */
  readonly json: boolean;
  /** Whether the messages are enveloped (a Connect stream, gRPC-Web). */
  readonly enveloped: boolean;
  /** The compression its messages are sent with, and the size bound. */
  readonly decoding: Decoding;
  /** Most nodes a message may decode into. */
  readonly limit: number;
}

/** An envelope's flag bit for a compressed message. */
const COMPRESSED_FLAG = 0b1;
const ENVELOPE_HEADER_BYTES = 5;

/**
 * Returns the request with its body read through the checks, and the
 * refusal once the body failed one (the same error the body failed with).
 * A unary body that is neither compressed nor longer than the node bound
 * (`content-length`, which connect holds it to) is left as it is, unless it
 * is binary and its message type can hold a `google.protobuf.Value`.
 */
export function checkMessages(
  uReq: UniversalServerRequest,
  bound: NodeBound,
): { uReq: UniversalServerRequest; refused: () => RefusedRequest | undefined } {
  const source = uReq.body;
  if (typeof source !== 'object' || source === null || !(Symbol.asyncIterator in source)) {
    return { uReq, refused: () => undefined };
  }
  // JSON cannot write a Value without a kind, nor NaN; `http.ts` refuses an infinite number.
  const checksValues = !bound.json && holdsValues(bound.method.input);
  if (!bound.enveloped && !checksValues && isSmallPlain(uReq, bound)) {
    return { uReq, refused: () => undefined };
  }
  let refusal: RefusedRequest | undefined;
  const check = (data: Uint8Array, compressed: boolean): void => {
    const message = compressed ? decompress(data, bound.decoding) : data;
    if (message === undefined) return;
    refusal = refusalOf(message, bound, checksValues);
    if (refusal !== undefined) throw refusal.error;
  };
  const body = bound.enveloped
    ? envelopes(source as AsyncIterable<Uint8Array>, bound.decoding.maxBytes, check)
    : unary(source as AsyncIterable<Uint8Array>, bound, checksValues, check);
  return { uReq: extend(uReq, { body }), refused: () => refusal };
}

/** The refusal of one message, decompressed: too many nodes, or a Value JSON cannot write. */
function refusalOf(
  message: Uint8Array,
  bound: NodeBound,
  checksValues: boolean,
): RefusedRequest | undefined {
  if (mayExceed(message.byteLength, bound)) {
    const nodes = bound.json
      ? countJsonMessageNodes(bound.method.input, message, bound.limit)
      : countNodes(bound.method.input, message, bound.limit);
    if (nodes > bound.limit) return new TooComplexRequest(bound.method, bound.limit);
  }
  const bad = checksValues ? valueProblem(bound.method.input, message) : undefined;
  return bad === undefined ? undefined : valueRefusal(bound.method, bad);
}

/** Whether a unary body is uncompressed and declares a length within the node bound. */
function isSmallPlain(uReq: UniversalServerRequest, bound: NodeBound): boolean {
  if (isCompressed(bound.decoding)) return false;
  const length = uReq.header.get('content-length');
  return length !== null && /^\d{1,15}$/.test(length) && !mayExceed(Number(length), bound);
}

/** Whether a message of `bytes` may decode into more nodes than the bound. */
function mayExceed(bytes: number, bound: NodeBound): boolean {
  return bound.json ? mayExceedJsonNodes(bytes, bound.limit) : mayExceedNodes(bytes, bound.limit);
}

/** A unary body, passed on as it comes and checked once it ends. */
async function* unary(
  source: AsyncIterable<Uint8Array>,
  bound: NodeBound,
  checksValues: boolean,
  check: (data: Uint8Array, compressed: boolean) => void,
): AsyncGenerator<Uint8Array> {
  const { maxBytes } = bound.decoding;
  const compressed = isCompressed(bound.decoding);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of source) {
    size += chunk.byteLength;
    // connect refuses a body past the size bound before it would decode it.
    if (size <= maxBytes) chunks.push(chunk);
    yield chunk;
  }
  if (size > maxBytes || (!compressed && !checksValues && !mayExceed(size, bound))) return;
  check(chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks), compressed);
}

/** A stream's body, passed on an envelope at a time, each checked before it goes. */
async function* envelopes(
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
  check: (data: Uint8Array, compressed: boolean) => void,
): AsyncGenerator<Uint8Array> {
  const queue = new ByteQueue();
  const chunks = source[Symbol.asyncIterator]();
  let ended = false;
  try {
    for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) {
      queue.push(next.value);
      for (;;) {
        const header = queue.peek(ENVELOPE_HEADER_BYTES);
        if (header === undefined) break;
        const length = new DataView(header.buffer, header.byteOffset).getUint32(1);
        if (length > maxBytes) {
          // connect refuses it from its header: everything goes on as it comes, unheld.
          yield queue.take(queue.size) as Uint8Array;
          for (let rest = await chunks.next(); rest.done !== true; rest = await chunks.next()) {
            yield rest.value;
          }
          ended = true;
          return;
        }
        const envelope = queue.take(ENVELOPE_HEADER_BYTES + length);
        if (envelope === undefined) break;
        check(
          envelope.subarray(ENVELOPE_HEADER_BYTES),
          ((header[0] as number) & COMPRESSED_FLAG) !== 0,
        );
        yield envelope;
      }
    }
    ended = true;
  } finally {
    // Stopped early (connect stopped reading, or a check failed): the source is let go.
    if (!ended) await chunks.return?.();
  }
  // An envelope cut short: connect answers it.
  const rest = queue.take(queue.size);
  if (rest !== undefined && rest.byteLength > 0) yield rest;
}

/** Bytes received and not yet passed on, as the chunks they came in. */
class ByteQueue {
  #chunks: Uint8Array[] = [];
  size = 0;

  push(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    this.#chunks.push(chunk);
    this.size += chunk.byteLength;
  }

  /** The first `n` bytes, left in the queue; undefined while fewer have come. */
  peek(n: number): Uint8Array | undefined {
    if (this.size < n) return undefined;
    // Short chunks at the front are merged, once: a long one behind them is copied once.
    while ((this.#chunks[0] as Uint8Array).byteLength < n) {
      const [a, b] = this.#chunks as [Uint8Array, Uint8Array];
      this.#chunks.splice(0, 2, Buffer.concat([a, b]));
    }
    return (this.#chunks[0] as Uint8Array).subarray(0, n);
  }

  /** The first `n` bytes, taken out; undefined while fewer have come. */
  take(n: number): Uint8Array | undefined {
    if (this.size < n) return undefined;
    const first = this.#chunks[0];
    let taken: Uint8Array;
    if (first !== undefined && first.byteLength >= n) {
      taken = first.subarray(0, n);
      if (first.byteLength === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
    } else {
      const all = Buffer.concat(this.#chunks);
      taken = all.subarray(0, n);
      this.#chunks = n < all.byteLength ? [all.subarray(n)] : [];
    }
    this.size -= n;
    return taken;
  }
}
