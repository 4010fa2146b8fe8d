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
 * A count stops as soon as it passes the bound.
 */
import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';

/** Scalars whose list elements are each a field of their own (never packed). */
const LENGTH_DELIMITED: ReadonlySet<ScalarType> = new Set([ScalarType.STRING, ScalarType.BYTES]);

/**
 * Whether a binary message of `bytes` may decode into more than `limit`
 * nodes. A node takes at least one byte on the wire (an element of a packed
 * list; a message takes a tag and a length), so a shorter one needs no count.
 */
export function mayExceedNodes(bytes: number, limit: number): boolean {
  return bytes > limit;
}

/**
 * The same for JSON text: its nodes (counted as {@link countJsonMessageNodes}
 * does) are at most 1.5 times its text count, which counts at most two a byte.
 */
export function mayExceedJsonNodes(bytes: number, limit: number): boolean {
  return 3 * bytes > limit;
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
 * past `limit`. The count reads the bytes as protobuf-es's `fromBinary`
 * does, field by field (a known field by its declared type, whatever its
 * wire type; lengths as 32-bit; unknown groups skipped; 100 levels at
 * most), and stops where that fails: what it counts is what the decoder
 * would build, also of a message it then refuses.
 *
 * @example
 * countNodes(DispatchRequestSchema, bytes, 100_000) > 100_000; // too complex
 */
export function countNodes(schema: DescMessage, bytes: Uint8Array, limit: number): number {
  const counter = new NodeCounter(bytes, limit);
  try {
    counter.message(schema, bytes.length, 0);
  } catch (e: unknown) {
    if (e !== STOP) throw e;
  }
  return counter.count;
}

/** Thrown to end a count: the decoder would fail here, or the count passed the limit. */
const STOP = Symbol('stop');

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const I32 = 5;
/** protobuf-es's default recursion limit, in messages (and groups skipped). */
const RECURSION_LIMIT = 100;

/** A read of `bytes` as protobuf-es's `BinaryReader` makes it, counting nodes. */
class NodeCounter {
  count = 0;
  #pos = 0;
  #depth = 0;
  /** The field number and wire type of the last tag read. */
  #fieldNo = 0;
  #wireType = 0;
  readonly #bytes: Uint8Array;
  readonly #limit: number;

  constructor(bytes: Uint8Array, limit: number) {
    this.#bytes = bytes;
    this.#limit = limit;
  }

  /**
   * The fields of a `schema` message up to `end`, or up to the end-group tag
   * of field `groupField` when it is not 0 (protobuf-es's `readMessage`).
   */
  message(schema: DescMessage, end: number, groupField: number): void {
    if (++this.#depth > RECURSION_LIMIT) throw STOP;
    const fields = fieldsOf(schema);
    while (this.#pos < end) {
      this.#tag();
      if (groupField !== 0 && this.#wireType === END_GROUP) break;
      const field = fields.get(this.#fieldNo);
      if (field === undefined) {
        // Kept as an unknown field: one object, whatever it holds.
        this.#skip(this.#wireType, this.#fieldNo, RECURSION_LIMIT - this.#depth);
        this.#add(1);
      } else {
        this.#field(field, this.#wireType);
      }
    }
    if (groupField !== 0 && (this.#wireType !== END_GROUP || this.#fieldNo !== groupField)) {
      throw STOP;
    }
    this.#depth -= 1;
  }

  #add(n: number): void {
    this.count += n;
    if (this.count > this.#limit) throw STOP;
  }

  /** A known field's value, read by its declared type (protobuf-es's `readField`). */
  #field(field: DescField, wireType: number): void {
    switch (field.fieldKind) {
      case 'scalar':
        this.#scalar(field.scalar);
        return;
      case 'enum':
        this.#varint();
        return;
      case 'message':
        this.#add(1);
        this.#messageField(field.message, field);
        return;
      case 'list': {
        if (field.listKind === 'message') {
          this.#add(1);
          this.#messageField(field.message, field);
          return;
        }
        const scalar = field.scalar ?? ScalarType.INT32;
        if (wireType !== LEN || LENGTH_DELIMITED.has(scalar)) {
          this.#add(1);
          this.#scalar(scalar);
          return;
        }
        const end = this.#varint() + this.#pos;
        while (this.#pos < end) {
          this.#add(1);
          this.#scalar(scalar);
        }
        return;
      }
      case 'map':
        this.#add(1);
        this.#mapEntry(field);
        return;
    }
  }

  /** A message field's value: length-delimited, or a group when so declared. */
  #messageField(schema: DescMessage, field: DescField): void {
    if ('delimitedEncoding' in field && field.delimitedEncoding === true) {
      this.message(schema, this.#bytes.length, field.number);
    } else {
      const length = this.#varint();
      this.message(schema, this.#pos + length, 0);
    }
  }

  /** A map entry (protobuf-es's `readMapEntry`): its value counts one more when a message. */
  #mapEntry(field: DescField & { fieldKind: 'map' }): void {
    const end = this.#varint() + this.#pos;
    while (this.#pos < end) {
      this.#tag();
      if (this.#fieldNo === 1) {
        this.#scalar(field.mapKey);
      } else if (this.#fieldNo === 2) {
        if (field.mapKind === 'scalar') this.#scalar(field.scalar);
        else if (field.mapKind === 'enum') this.#varint();
        else {
          this.#add(1);
          this.#messageField(field.message, field);
        }
      }
      // Any other field number: protobuf-es reads on from the next byte.
    }
  }

  /** A scalar of `type`, moved past. */
  #scalar(type: ScalarType): void {
    switch (type) {
      case ScalarType.STRING:
      case ScalarType.BYTES: {
        const length = this.#varint(); // read before the position it moves is
        this.#pos += length;
        break;
      }
      case ScalarType.DOUBLE:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64:
        this.#pos += 8;
        break;
      case ScalarType.FLOAT:
      case ScalarType.FIXED32:
      case ScalarType.SFIXED32:
        this.#pos += 4;
        break;
      default:
        this.#varint();
        return;
    }
    if (this.#pos > this.#bytes.length) throw STOP;
  }

  /** A tag, into {@link #fieldNo} and {@link #wireType}; protobuf-es refuses the same ones. */
  #tag(): void {
    const start = this.#pos;
    const tag = this.#varint();
    const read = this.#pos - start;
    if (read > 5 || (read === 5 && (this.#bytes[this.#pos - 1] as number) > 0x0f)) throw STOP;
    this.#fieldNo = tag >>> 3;
    this.#wireType = tag & 7;
    if (this.#fieldNo <= 0 || this.#wireType > I32) throw STOP;
  }

  /**
   * A varint of at most 10 bytes, as its low 32 bits unsigned (how
   * protobuf-es reads lengths and tags); past the bytes, or longer, stops.
   */
  #varint(): number {
    const bytes = this.#bytes;
    let value = 0;
    for (let i = 0; i < 10; i++) {
      const byte = bytes[this.#pos++];
      if (byte === undefined) throw STOP;
      if (i < 5) value |= (byte & 0x7f) << (7 * i);
      if (byte < 0x80) return value >>> 0;
    }
    throw STOP;
  }

  /** Moves past an unknown field's value (protobuf-es's `skip`), groups in them included. */
  #skip(wireType: number, fieldNo: number, recursionLimit: number): void {
    const bytes = this.#bytes;
    switch (wireType) {
      case VARINT:
        // Any number of bytes, as protobuf-es skips it.
        while (((bytes[this.#pos++] ?? 0) & 0x80) !== 0) {}
        break;
      case I64:
        this.#pos += 8;
        break;
      case I32:
        this.#pos += 4;
        break;
      case LEN: {
        const length = this.#varint();
        this.#pos += length;
        break;
      }
      case START_GROUP:
        if (recursionLimit <= 0) throw STOP;
        for (;;) {
          this.#tag();
          if (this.#wireType === END_GROUP) {
            if (this.#fieldNo !== fieldNo) throw STOP;
            break;
          }
          this.#skip(this.#wireType, this.#fieldNo, recursionLimit - 1);
        }
        break;
      default:
        throw STOP;
    }
    if (this.#pos > bytes.length) throw STOP;
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

/**
 * Text counts past this many times the limit are refused without parsing:
 * `JSON.parse` itself makes an object or more for each value.
 */
export const JSON_PARSE_FACTOR = 8;

/**
 * The nodes a JSON `schema` message decodes into, counted as the binary
 * count counts them (a typed message one, whatever its fields), or a count
 * past `limit`. Its text count first: at most `limit / 2` is under the
 * bound (the nodes are at most 1.5 times it), past `JSON_PARSE_FACTOR`
 * times the bound it is over; in between the text is parsed and walked
 * with its schema. Text that does not parse is left to the decoder.
 */
export function countJsonMessageNodes(
  schema: DescMessage,
  text: Uint8Array,
  limit: number,
): number {
  const rough = countJsonNodes(text, JSON_PARSE_FACTOR * limit);
  if (2 * rough <= limit || rough > JSON_PARSE_FACTOR * limit) return rough;
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(text));
  } catch {
    return 0;
  }
  return jsonMessageNodes(schema, json, 0);
}

/** Fields by JSON and proto name, per message type: built once per type. */
const fieldsByJsonName = new WeakMap<DescMessage, Map<string, DescField>>();

function jsonFieldsOf(schema: DescMessage): Map<string, DescField> {
  let fields = fieldsByJsonName.get(schema);
  if (fields === undefined) {
    fields = new Map();
    for (const f of schema.fields) fields.set(f.name, f).set(f.jsonName, f);
    fieldsByJsonName.set(schema, fields);
  }
  return fields;
}

/** Deeper than connect decodes JSON (50 levels): the decoder refuses it first. */
const MAX_JSON_DEPTH = 120;

/** The nodes below a JSON object read as a `schema` message. */
function jsonMessageNodes(schema: DescMessage, json: unknown, depth: number): number {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || depth > MAX_JSON_DEPTH) {
    return 0;
  }
  const fields = jsonFieldsOf(schema);
  let count = 0;
  for (const [key, value] of Object.entries(json)) {
    const field = fields.get(key);
    if (field === undefined || value === null) continue; // refused, or unset, by the decoder
    count += jsonFieldNodes(field, value, depth);
  }
  return count;
}

function jsonFieldNodes(field: DescField, value: unknown, depth: number): number {
  switch (field.fieldKind) {
    case 'message':
      return jsonMessageValueNodes(field.message, value, depth + 1);
    case 'list': {
      if (!Array.isArray(value)) return 0;
      if (field.listKind !== 'message') return value.length;
      let count = 0;
      for (const element of value)
        count += jsonMessageValueNodes(field.message, element, depth + 1);
      return count;
    }
    case 'map': {
      if (typeof value !== 'object' || Array.isArray(value)) return 0;
      let count = 0;
      for (const member of Object.values(value as object)) {
        count += 1;
        if (field.mapKind === 'message') {
          count += jsonMessageValueNodes(field.message, member, depth + 1);
        }
      }
      return count;
    }
    default:
      return 0;
  }
}

/** A message (one node) with what it holds: the JSON types as their binary form. */
function jsonMessageValueNodes(schema: DescMessage, value: unknown, depth: number): number {
  switch (schema.typeName) {
    case 'google.protobuf.Value':
      return valueNodes(value, depth);
    case 'google.protobuf.Struct':
      return 1 + membersNodes(value, depth);
    case 'google.protobuf.ListValue':
      return 1 + elementsNodes(value, depth);
    default:
      if (schema.typeName.startsWith('google.protobuf.')) {
        // Timestamps, durations, wrappers, masks: one message, their JSON is a scalar.
        return typeof value === 'object' && value !== null ? 1 + Object.keys(value).length : 1;
      }
      return 1 + jsonMessageNodes(schema, value, depth);
  }
}

/** A `google.protobuf.Value` of `value`: itself, and its `Struct` or `ListValue`. */
function valueNodes(value: unknown, depth: number): number {
  if (typeof value !== 'object' || value === null || depth > MAX_JSON_DEPTH) return 1;
  return Array.isArray(value) ? 2 + elementsNodes(value, depth) : 2 + membersNodes(value, depth);
}

function membersNodes(value: unknown, depth: number): number {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 0;
  let count = 0;
  for (const member of Object.values(value)) count += 1 + valueNodes(member, depth + 1);
  return count;
}

function elementsNodes(value: unknown, depth: number): number {
  if (!Array.isArray(value)) return 0;
  let count = 0;
  for (const element of value) count += valueNodes(element, depth + 1);
  return count;
}
