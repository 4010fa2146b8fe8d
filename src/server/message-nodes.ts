/**
 * @module How many values a request message decodes into, counted before it
 * is decoded. A message's size does not bound its decoded heap: protobuf-es
 * makes an object for every message in it, and a `google.protobuf.Value` of
 * small elements costs 4 bytes an element on the wire and a few hundred in
 * the heap while it decodes (a million `null`s: 4 MB encoded, about 170 MB
 * of heap and a second of blocked event loop). So a request over the node
 * bound is refused as too complex, whatever its size.
 *
 * A node is what makes an object when decoded: each message in the request
 * (a `Value`, `Struct` or `ListValue` too), each map entry, each element of
 * a repeated field and each unknown field. JSON is counted by its text:
 * each member and element (`:` and `,` outside strings) one, each object
 * and array (`{`, `[`) two, for the `Value` that holds it. That is about the
 * same count for the same request, so the bound holds on every protocol.
 * A count stops as soon as it passes the bound, and bytes that do not parse
 * are left to the decoder to refuse.
 */
import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/** A map entry's value field (2), length-delimited. */
const ENTRY_VALUE_TAG = (2 << 3) | LEN;
/** Scalars whose list elements are each a field of their own (never packed). */
const LENGTH_DELIMITED: ReadonlySet<ScalarType | undefined> = new Set([
  ScalarType.STRING,
  ScalarType.BYTES,
]);

/** Bytes an element of a packed list of fixed-width scalars takes. */
const FIXED_WIDTH: ReadonlyMap<ScalarType, number> = new Map([
  [ScalarType.DOUBLE, 8],
  [ScalarType.FIXED64, 8],
  [ScalarType.SFIXED64, 8],
  [ScalarType.FLOAT, 4],
  [ScalarType.FIXED32, 4],
  [ScalarType.SFIXED32, 4],
]);

/** Deeper than protobuf-es decodes (100): the decoder refuses it first. */
const MAX_DEPTH = 101;

/**
 * Whether a binary message of `bytes` may decode into more than `limit`
 * nodes. A node takes at least one byte on the wire (an element of a packed
 * list; a message takes a tag and a length), so a shorter one needs no count.
 */
export function mayExceedNodes(bytes: number, limit: number): boolean {
  return bytes > limit;
}

/** The same for JSON text, where one byte (`{` or `[`) counts two nodes. */
export function mayExceedJsonNodes(bytes: number, limit: number): boolean {
  return 2 * bytes > limit;
}

/** Fields by number, per message type: built once per type. */
const fieldsByNumber = new WeakMap<DescMessage, Map<number, DescField>>();

function fieldsOf(schema: DescMessage): Map<number, DescField> {
  let fields = fieldsByNumber.get(schema);
  if (fields === undefined) {
    fields = new Map(schema.fields.map((f) => [f.number, f]));
    fieldsByNumber.set(schema, fields);
  }
  return fields;
}

/**
 * The nodes `bytes` decode into as a `schema` message, or the first count
 * past `limit`. Bytes that do not parse stop the count where they start.
 *
 * @example
 * countNodes(DispatchRequestSchema, bytes, 100_000) > 100_000; // too complex
 */
export function countNodes(schema: DescMessage, bytes: Uint8Array, limit: number): number {
  const counter = new NodeCounter(bytes, limit);
  counter.message(schema, 0, bytes.length, 0);
  return counter.count;
}

/** A read position and the count so far; a method returns false to stop the count. */
class NodeCounter {
  count = 0;
  #pos = 0;
  constructor(
    readonly bytes: Uint8Array,
    readonly limit: number,
  ) {}

  /** Counts the nodes of a `schema` message in `[start, end)`. */
  message(schema: DescMessage, start: number, end: number, depth: number): boolean {
    if (depth > MAX_DEPTH) return false;
    const fields = fieldsOf(schema);
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#varint(end);
      if (tag < 0) return false;
      const number = Math.floor(tag / 8);
      const wireType = tag % 8;
      const field = fields.get(number);
      // A field decoded as its declared type's node, or kept as an unknown one.
      if (field === undefined || field.fieldKind === 'list' || field.fieldKind === 'map') {
        this.count += 1;
      }
      if (wireType === LEN && field !== undefined) {
        const length = this.#varint(end);
        if (length < 0 || this.#pos + length > end) return false;
        const from = this.#pos;
        if (!this.#value(field, from, from + length, depth)) return false;
        this.#pos = from + length;
      } else if (!this.#skip(wireType, end)) {
        return false; // a group or an invalid wire type: the decoder decides
      }
      if (this.count > this.limit) return false;
    }
    return true;
  }

  /** Counts what a length-delimited value of `field` holds beyond itself. */
  #value(field: DescField, from: number, to: number, depth: number): boolean {
    switch (field.fieldKind) {
      case 'message':
        this.count += 1;
        return this.message(field.message, from, to, depth + 1);
      case 'list':
        if (field.listKind === 'message') return this.message(field.message, from, to, depth + 1);
        if (field.listKind === 'enum') this.count += this.#packedVarints(from, to) - 1;
        else if (!LENGTH_DELIMITED.has(field.scalar)) {
          const width = FIXED_WIDTH.get(field.scalar);
          const elements =
            width === undefined ? this.#packedVarints(from, to) : Math.ceil((to - from) / width);
          // A packed list: one node an element (the tag counted one already).
          this.count += elements - 1;
        }
        return true;
      case 'map':
        return field.mapKind === 'message'
          ? this.#mapEntry(field.message, from, to, depth + 1)
          : true;
      default:
        return true;
    }
  }

  /** A map entry whose value (field 2) is a `schema` message: one node more for it. */
  #mapEntry(schema: DescMessage, from: number, to: number, depth: number): boolean {
    this.#pos = from;
    while (this.#pos < to) {
      const tag = this.#varint(to);
      if (tag < 0) return false;
      if (tag === ENTRY_VALUE_TAG) {
        const length = this.#varint(to);
        if (length < 0 || this.#pos + length > to) return false;
        const start = this.#pos;
        this.count += 1;
        if (!this.message(schema, start, start + length, depth + 1)) return false;
        this.#pos = start + length;
      } else if (!this.#skip(tag % 8, to)) {
        return false;
      }
    }
    return true;
  }

  /** Moves past a value of `wireType` (not a group), or returns false. */
  #skip(wireType: number, end: number): boolean {
    if (wireType === VARINT) return this.#varint(end) >= 0;
    if (wireType === I64 || wireType === I32) {
      this.#pos += wireType === I64 ? 8 : 4;
      return this.#pos <= end;
    }
    if (wireType !== LEN) return false;
    const length = this.#varint(end);
    if (length < 0 || this.#pos + length > end) return false;
    this.#pos += length;
    return true;
  }

  /** The elements of a packed list of varints: each ends in a byte under 0x80. */
  #packedVarints(from: number, to: number): number {
    let n = 0;
    for (let i = from; i < to; i++) if ((this.bytes[i] as number) < 0x80) n += 1;
    return n;
  }

  /** A varint of at most 10 bytes ending before `end` (exact up to 2^53), or -1. */
  #varint(end: number): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10 && this.#pos < end; i++) {
      const byte = this.bytes[this.#pos++] as number;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    return -1;
  }
}

/** The characters of JSON text that start a counted node outside strings. */
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const COLON = 0x3a;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The nodes of a JSON message's UTF-8 text, or the first count past
 * `limit`: one for each `:` and `,` outside strings (a member or element
 * after the first) and two for each `{` and `[` (where the JSON is
 * arguments or results, a `Value` and its `Struct` or `ListValue`; their
 * first member or element is counted here too).
 */
export function countJsonNodes(text: Uint8Array, limit: number): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as number;
    if (c === QUOTE) {
      i = stringEnd(text, i + 1);
    } else if (c === COLON || c === COMMA) {
      count += 1;
      if (count > limit) return count;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      count += 2;
      if (count > limit) return count;
    }
  }
  return count;
}

/**
 * The index of the quote that ends a string whose text starts at `from`
 * (found natively: a long string costs little), or the text's length.
 */
function stringEnd(text: Uint8Array, from: number): number {
  for (let at = from; ; ) {
    const quote = text.indexOf(QUOTE, at);
    if (quote < 0) return text.length;
    let backslashes = 0;
    while (text[quote - 1 - backslashes] === BACKSLASH && quote - 1 - backslashes >= from) {
      backslashes += 1;
    }
    if (backslashes % 2 === 0) return quote;
    at = quote + 1;
  }
}
