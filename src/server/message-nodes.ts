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
 * a repeated field and each unknown field. JSON is counted with the same
 * schema and the same rules, so the same request gets the same answer on
 * every protocol. A count stops as soon as it passes the bound.
 */
import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';
import {
  END_GROUP,
  fieldsByNumber,
  LEN,
  LENGTH_DELIMITED,
  RECURSION_LIMIT,
  STOP,
  WireReader,
} from './wire-reader.js';

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

/** A message type's fields as the JSON count looks them up. */
interface Fields {
  /** By JSON and proto name. */
  readonly byName: Map<string, DescField>;
  /** The same names as UTF-8 bytes, by their length. */
  readonly byLength: Map<number, { readonly name: Uint8Array; readonly field: DescField }[]>;
}

/** Built once per message type. */
const fieldsByType = new WeakMap<DescMessage, Fields>();

function fieldsOf(schema: DescMessage): Fields {
  let fields = fieldsByType.get(schema);
  if (fields === undefined) {
    const byName = new Map<string, DescField>();
    for (const f of schema.fields) byName.set(f.name, f).set(f.jsonName, f);
    const byLength: Fields['byLength'] = new Map();
    for (const [name, field] of byName) {
      const bytes = new TextEncoder().encode(name);
      const same = byLength.get(bytes.length) ?? [];
      same.push({ name: bytes, field });
      byLength.set(bytes.length, same);
    }
    fields = { byName, byLength };
    fieldsByType.set(schema, fields);
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

/**
 * A read of `bytes` as protobuf-es's `BinaryReader` makes it, counting
 * nodes; {@link STOP} ends it where the decoder would fail, or once the
 * count passed the limit.
 */
class NodeCounter extends WireReader {
  count = 0;
  #depth = 0;
  readonly #limit: number;

  constructor(bytes: Uint8Array, limit: number) {
    super(bytes);
    this.#limit = limit;
  }

  /**
   * The fields of a `schema` message up to `end`, or up to the end-group tag
   * of field `groupField` when it is not 0 (protobuf-es's `readMessage`).
   */
  message(schema: DescMessage, end: number, groupField: number): void {
    if (++this.#depth > RECURSION_LIMIT) throw STOP;
    const fields = fieldsByNumber(schema);
    while (this.pos < end) {
      this.tag();
      if (groupField !== 0 && this.wireType === END_GROUP) break;
      const field = fields.get(this.fieldNo);
      if (field === undefined) {
        // Kept as an unknown field: one object, whatever it holds.
        this.skip(this.wireType, this.fieldNo, RECURSION_LIMIT - this.#depth);
        this.#add(1);
      } else {
        this.#field(field, this.wireType);
      }
    }
    if (groupField !== 0 && (this.wireType !== END_GROUP || this.fieldNo !== groupField)) {
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
        this.scalar(field.scalar);
        return;
      case 'enum':
        this.varint();
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
          this.scalar(scalar);
          return;
        }
        const end = this.varint() + this.pos;
        while (this.pos < end) {
          this.#add(1);
          this.scalar(scalar);
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
      this.message(schema, this.bytes.length, field.number);
    } else {
      const length = this.varint();
      this.message(schema, this.pos + length, 0);
    }
  }

  /**
   * A map entry (protobuf-es's `readMapEntry`): its value counts one more
   * when a message, also when the entry has none (protobuf-es makes an
   * empty one).
   */
  #mapEntry(field: DescField & { fieldKind: 'map' }): void {
    const end = this.varint() + this.pos;
    if (field.mapKind === 'message') this.#add(1);
    let valued = false;
    while (this.pos < end) {
      this.tag();
      if (this.fieldNo === 1) {
        this.scalar(field.mapKey);
      } else if (this.fieldNo === 2) {
        if (field.mapKind === 'scalar') this.scalar(field.scalar);
        else if (field.mapKind === 'enum') this.varint();
        else {
          if (valued) this.#add(1); // a second value in one entry is another message
          valued = true;
          this.#messageField(field.message, field);
        }
      }
      // Any other field number: protobuf-es reads on from the next byte.
    }
  }
}

/** The characters of JSON text that start a counted node outside strings. */
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The nodes of a JSON message's UTF-8 text counted by the text alone, or
 * the first count past `limit`: one for each `:` and `,` outside strings (a
 * member or element after the first) and two for each `{` and `[` (where
 * the JSON is arguments or results, a `Value` and its `Struct` or
 * `ListValue`; their first member or element is counted here too).
 */
export function countJsonNodes(text: Uint8Array, limit: number): number {
  return textCount(text, 0, limit, false).count;
}

/**
 * {@link countJsonNodes}'s count from `from`: to the end of the text, or,
 * when `oneValue`, to the bracket that closes the container there (`end`
 * just past it; `closed` false if the text ends first).
 */
function textCount(
  text: Uint8Array,
  from: number,
  limit: number,
  oneValue: boolean,
): { count: number; end: number; closed: boolean } {
  let count = 0;
  let open = 0;
  let i = from;
  for (; i < text.length; i++) {
    const c = text[i] as number;
    if (c === QUOTE) {
      i = stringEnd(text, i + 1);
      continue;
    }
    if (c === COLON || c === COMMA) {
      count += 1;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      count += 2;
      open += 1;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      open -= 1;
      if (oneValue && open === 0) return { count, end: i + 1, closed: true };
      continue;
    } else {
      continue;
    }
    if (count > limit) break;
  }
  return { count, end: i, closed: false };
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
 * The nodes a JSON `schema` message decodes into, counted as the binary
 * count counts them, or a count past `limit`: one pass over the text with
 * the schema, no parse. A typed message is one node however many fields
 * it sets; arguments, results and other `google.protobuf.Value`s count a
 * `Value` for each JSON value, with a `Struct` or `ListValue` and map
 * entries for objects and arrays. What the decoder refuses (an unknown
 * field, a value of the wrong kind) counts as a `Value` would, and text
 * that is not JSON stops the count where it goes wrong. A leading byte
 * order mark is skipped, as the UTF-8 decoder before the JSON drops it.
 */
export function countJsonMessageNodes(
  schema: DescMessage,
  text: Uint8Array,
  limit: number,
): number {
  const bom = text[0] === BOM[0] && text[1] === BOM[1] && text[2] === BOM[2];
  const counter = new JsonCounter(bom ? text.subarray(BOM.length) : text, limit);
  try {
    counter.messageValue(schema, 0, false);
  } catch (e: unknown) {
    if (e !== STOP) throw e;
  }
  return counter.count;
}

/**
 * Nesting past which JSON is counted by its text alone: the decoder takes
 * 50 levels, so no schema matters there, and the count goes on without
 * recursion however deep the text is.
 */
const MAX_JSON_DEPTH = 64;
const VALUE_TYPE = 'google.protobuf.Value';
const STRUCT_TYPE = 'google.protobuf.Struct';
const LIST_VALUE_TYPE = 'google.protobuf.ListValue';
const KEY_DECODER = new TextDecoder();
/** What a strict UTF-8 decoder drops at the start of a text, before JSON sees it. */
const BOM = [0xef, 0xbb, 0xbf] as const;

/** A read of JSON text with a message schema, counting nodes. */
class JsonCounter {
  count = 0;
  #pos = 0;
  readonly #text: Uint8Array;
  readonly #limit: number;

  constructor(text: Uint8Array, limit: number) {
    this.#text = text;
    this.#limit = limit;
  }

  #add(n: number): void {
    this.count += n;
    if (this.count > this.#limit) throw STOP;
  }

  /**
   * A value of a `schema` message field: one node (unless `root`), and what
   * it holds. The JSON types count as their binary form.
   */
  messageValue(schema: DescMessage, depth: number, counted: boolean): void {
    switch (schema.typeName) {
      case VALUE_TYPE:
        this.#value(depth);
        return;
      case STRUCT_TYPE:
        if (this.#peek() !== OPEN_BRACE) break;
        this.#add(1);
        this.#members(() => {
          this.#add(1); // the map entry
          this.#value(depth + 1);
        });
        return;
      case LIST_VALUE_TYPE:
        if (this.#peek() !== OPEN_BRACKET) break;
        this.#add(1);
        this.#elements(() => this.#value(depth + 1));
        return;
      default:
        if (this.#peek() !== OPEN_BRACE || depth > MAX_JSON_DEPTH) break;
        if (counted) this.#add(1);
        this.#members((field) => this.#field(field, depth + 1), fieldsOf(schema));
        return;
    }
    // Timestamps and durations are strings; anything else the decoder refuses.
    if (counted) this.#add(1);
    this.#value(depth);
  }

  /** A member's value: by its field's declared type, or as a `Value` when unknown. */
  #field(field: DescField | undefined, depth: number): void {
    if (field === undefined) {
      this.#value(depth);
      return;
    }
    if (this.#peek() === NULL_START) {
      // null leaves a field unset, but makes a Value of a Value field.
      if (field.fieldKind === 'message' && field.message.typeName === VALUE_TYPE) this.#add(1);
      this.#scalar();
      return;
    }
    switch (field.fieldKind) {
      case 'message':
        this.messageValue(field.message, depth, true);
        return;
      case 'list':
        if (this.#peek() !== OPEN_BRACKET) break;
        this.#elements(() => {
          if (field.listKind === 'message') this.messageValue(field.message, depth + 1, true);
          else this.#value(depth + 1);
        });
        return;
      case 'map':
        if (this.#peek() !== OPEN_BRACE) break;
        this.#members(() => {
          this.#add(1);
          if (field.mapKind === 'message') this.messageValue(field.message, depth + 1, true);
          else this.#skipValue(depth + 1);
        });
        return;
      default:
        this.#skipValue(depth);
        return;
    }
    this.#value(depth);
  }

  /** A JSON value as a `google.protobuf.Value`: one, and two more a container with its members. */
  #value(depth: number): void {
    const c = this.#peek();
    if (depth > MAX_JSON_DEPTH && (c === OPEN_BRACE || c === OPEN_BRACKET)) {
      this.#flat();
    } else if (c === OPEN_BRACE) {
      this.#add(2);
      this.#members(() => {
        this.#add(1);
        this.#value(depth + 1);
      });
    } else if (c === OPEN_BRACKET) {
      this.#add(2);
      this.#elements(() => this.#value(depth + 1));
    } else {
      this.#add(1);
      this.#scalar();
    }
  }

  /** A value the decoder reads as a scalar: nothing counted unless it is a container. */
  #skipValue(depth: number): void {
    const c = this.#peek();
    if (c === OPEN_BRACE || c === OPEN_BRACKET) this.#value(depth);
    else this.#scalar();
  }

  /** An object's members: `each` reads a member's value, given its key. */
  #members(each: (field: DescField | undefined) => void, fields?: Fields): void {
    this.#pos += 1; // {
    if (this.#peek() === CLOSE_BRACE) {
      this.#pos += 1;
      return;
    }
    for (;;) {
      if (this.#peek() !== QUOTE) throw STOP;
      const field = this.#key(fields);
      if (this.#peek() !== COLON) throw STOP;
      this.#pos += 1;
      this.#peek();
      each(field);
      const c = this.#peek();
      this.#pos += 1;
      if (c === CLOSE_BRACE) return;
      if (c !== COMMA) throw STOP;
    }
  }

  /** An array's elements: `each` reads one. */
  #elements(each: () => void): void {
    this.#pos += 1; // [
    if (this.#peek() === CLOSE_BRACKET) {
      this.#pos += 1;
      return;
    }
    for (;;) {
      each();
      const c = this.#peek();
      this.#pos += 1;
      if (c === CLOSE_BRACKET) return;
      if (c !== COMMA) throw STOP;
    }
  }

  /**
   * A member's key, moved past, and the field of `fields` it names: its
   * bytes compared with the names of that length, or, escaped, decoded by
   * JSON.parse (rare).
   */
  #key(fields: Fields | undefined): DescField | undefined {
    const text = this.#text;
    const start = this.#pos + 1;
    const end = stringEnd(text, start);
    if (end >= text.length) throw STOP;
    this.#pos = end + 1;
    if (fields === undefined) return undefined;
    if (text.subarray(start, end).includes(BACKSLASH)) {
      try {
        const key = JSON.parse(KEY_DECODER.decode(text.subarray(start - 1, end + 1))) as string;
        return fields.byName.get(key);
      } catch {
        throw STOP;
      }
    }
    for (const { name, field } of fields.byLength.get(end - start) ?? []) {
      let i = 0;
      while (i < name.length && name[i] === text[start + i]) i += 1;
      if (i === name.length) return field;
    }
    return undefined;
  }

  /** A string, number or literal, moved past. */
  #scalar(): void {
    const text = this.#text;
    if (text[this.#pos] === QUOTE) {
      const end = stringEnd(text, this.#pos + 1);
      if (end >= text.length) throw STOP;
      this.#pos = end + 1;
      return;
    }
    const start = this.#pos;
    while (this.#pos < text.length && !ENDS_SCALAR.has(text[this.#pos] as number)) this.#pos += 1;
    if (this.#pos === start) throw STOP;
  }

  /**
   * A container counted by its text alone ({@link countJsonNodes}'s rule),
   * without recursion: for nesting no decoder reads.
   */
  #flat(): void {
    const { count, end, closed } = textCount(this.#text, this.#pos, this.#limit - this.count, true);
    this.#add(count);
    if (!closed) throw STOP;
    this.#pos = end;
  }

  /** The next byte that is not white space (left unread); past the end, stops. */
  #peek(): number {
    const text = this.#text;
    for (;;) {
      const c = text[this.#pos];
      if (c === undefined) throw STOP;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c;
      this.#pos += 1;
    }
  }
}

const NULL_START = 0x6e; // n
/** Bytes that end a number or literal. */
const ENDS_SCALAR: ReadonlySet<number> = new Set([
  COMMA,
  CLOSE_BRACE,
  CLOSE_BRACKET,
  0x20,
  0x0a,
  0x0d,
  0x09,
]);
