/**
 * @module Every `google.protobuf.Value` in a binary request sets a kind, and
 * a `number_value` is a finite number: what proto3 JSON can write. protobuf-es
 * decodes a Value with no kind (an empty message, a map entry of a `Struct`
 * with no value, an empty item of a `ListValue`) and a NaN or infinite number
 * without complaint, and then cannot write them as JSON (`toJson` throws
 * "google.protobuf.Value must have a value"), which a webhook's payload, an
 * audit record and a Connect answer need; in a `Struct` (arguments, a
 * result's state) it reads an empty Value as `null`, so two different
 * requests would land on one. So such a request is refused before it is
 * decoded, naming the Value by its JSON path (`event.result.error`,
 * `event.context.args.items[2]`), on every binary transport; JSON cannot say
 * either but for a number too large for a double, which the JSON decoder
 * refuses (`http.ts`).
 *
 * The check reads the bytes field by field as protobuf-es does
 * (`wire-reader.ts`), so it frames them as the decoder will; a request of a
 * type that cannot hold a Value (`Modify`, `ListHooks`, ...) is not read at
 * all, and the read allocates nothing unless it finds a bad Value. Each
 * Value on the wire is held to it, also one that protobuf-es would merge
 * with another occurrence of its field (which a well-formed encoder writes
 * once).
 */
import { type DescField, type DescMessage, type DescMethod, ScalarType } from '@bufbuild/protobuf';
import { MalformedRequest } from './errors.js';
import {
  fieldsByNumber,
  LEN,
  LENGTH_DELIMITED,
  RECURSION_LIMIT,
  START_GROUP,
  STOP,
  WireReader,
} from './wire-reader.js';

const VALUE_TYPE = 'google.protobuf.Value';
const STRUCT_TYPE = 'google.protobuf.Struct';
const LIST_VALUE_TYPE = 'google.protobuf.ListValue';

/** Field numbers of `google.protobuf.Value`'s kinds, and of a map entry's key and value. */
const NULL_VALUE = 1;
const NUMBER_VALUE = 2;
const STRING_VALUE = 3;
const BOOL_VALUE = 4;
const STRUCT_VALUE = 5;
const LIST_VALUE = 6;
const ENTRY_KEY = 1;
const ENTRY_VALUE = 2;

/** The problem named for a Value with no kind. */
export const VALUE_WITHOUT_KIND =
  'a google.protobuf.Value must set a kind (null_value, number_value, string_value, bool_value, struct_value or list_value)';
/** The problem named for a NaN or infinite `number_value`. */
export const VALUE_NOT_FINITE = 'a google.protobuf.Value number cannot be NaN or Infinity';

/** A Value a request must not hold: where it is, and why. */
export interface ValueProblem {
  /** JSON path of the Value, such as `event.result.error`. */
  readonly field: string;
  /** {@link VALUE_WITHOUT_KIND} or {@link VALUE_NOT_FINITE}. */
  readonly problem: string;
}

/** Whether a message type can hold a Value, by type: built once per type. */
const holdsByType = new WeakMap<DescMessage, boolean>();

/**
 * Whether a message of type `schema` can hold a `google.protobuf.Value`
 * (a `Struct` and a `ListValue` hold them).
 *
 * @example holdsValues(ModifyRequestSchema) // false: its context is a JSON string
 */
export function holdsValues(schema: DescMessage): boolean {
  return holdsByType.get(schema) ?? holds(schema, new Set());
}

function holds(schema: DescMessage, seen: Set<DescMessage>): boolean {
  const known = holdsByType.get(schema);
  if (known !== undefined) return known;
  if (
    schema.typeName === VALUE_TYPE ||
    schema.typeName === STRUCT_TYPE ||
    schema.typeName === LIST_VALUE_TYPE
  ) {
    holdsByType.set(schema, true);
    return true;
  }
  // A type on the way to itself holds a Value only through another field.
  if (seen.has(schema)) return false;
  seen.add(schema);
  let found = false;
  for (const field of schema.fields) {
    const message = messageOf(field);
    if (message !== undefined && holds(message, seen)) {
      found = true;
      break;
    }
  }
  seen.delete(schema);
  // Only a settled answer is kept: one found false inside a cycle may still be true.
  if (found || seen.size === 0) holdsByType.set(schema, found);
  return found;
}

/** The message type of a message, message list or message map field. */
function messageOf(field: DescField): DescMessage | undefined {
  switch (field.fieldKind) {
    case 'message':
      return field.message;
    case 'list':
      return field.listKind === 'message' ? field.message : undefined;
    case 'map':
      return field.mapKind === 'message' ? field.message : undefined;
    default:
      return undefined;
  }
}

/**
 * Returns the first Value of a binary `schema` message without a kind or
 * with a number that is not finite, or `undefined` when it has none (or when
 * its bytes do not decode: `fromBinary` refuses them then).
 *
 * @example
 * valueProblem(DecideToolResultRequestSchema, bytes);
 * // { field: 'event.result.error', problem: VALUE_WITHOUT_KIND }
 */
export function valueProblem(schema: DescMessage, bytes: Uint8Array): ValueProblem | undefined {
  if (!holdsValues(schema)) return undefined;
  // One reader for every call (the check is synchronous): a request without a Value allocates nothing.
  const reader = READER;
  reader.reset(bytes);
  try {
    if (reader.message(schema, bytes.length, 0)) return undefined;
    return { field: reader.path(), problem: reader.problem };
  } catch (e: unknown) {
    if (e !== STOP) throw e;
    return undefined;
  } finally {
    reader.reset(EMPTY);
  }
}

const EMPTY = new Uint8Array(0);

/**
 * The refusal of a request of `method` holding `bad`: INVALID_ARGUMENT,
 * `MALFORMED_REQUEST`, the Value's path in the message and the `BadRequest`.
 *
 * @example
 * const bad = valueProblem(method.input, bytes);
 * if (bad !== undefined) return valueRefusal(method, bad);
 */
export function valueRefusal(method: DescMethod, bad: ValueProblem): MalformedRequest {
  return new MalformedRequest(method, undefined, `${bad.field}: ${bad.problem}`, bad.field);
}

/**
 * The walk of {@link valueProblem}: every field read as protobuf-es reads
 * it. Each step answers `false` once it found a bad Value, after adding its
 * part of the Value's path (innermost first); a Value is no part of it, as
 * in JSON, nor are a Struct's `fields` and a ListValue's `values`.
 */
class ValueReader extends WireReader {
  /** Parts of the bad Value's path, innermost first (`.path`, `[2]`, `.error`). */
  #parts: string[] = [];
  problem = '';

  reset(bytes: Uint8Array): void {
    this.bytes = bytes;
    this.pos = 0;
    if (this.#parts.length > 0) this.#parts = [];
    this.problem = '';
  }

  /** The bad Value's JSON path. */
  path(): string {
    return this.#parts.reverse().join('').replace(/^\./, '');
  }

  #fail(problem: string): false {
    this.problem = problem;
    return false;
  }

  /** The fields of a `schema` message up to `end`, `depth` messages deep (protobuf-es's `readMessage`). */
  message(schema: DescMessage, end: number, depth: number): boolean {
    if (depth >= RECURSION_LIMIT) throw STOP;
    const fields = fieldsByNumber(schema);
    const start = this.pos;
    while (this.pos < end) {
      const tagStart = this.pos;
      this.tag();
      const field = fields.get(this.fieldNo);
      if (field === undefined) {
        this.skip(this.wireType, this.fieldNo, RECURSION_LIMIT - depth - 1);
      } else if (!this.#field(field, this.wireType, depth)) {
        if (field.fieldKind === 'list') {
          this.#parts.push(`[${this.#occurrences(schema, start, tagStart, field.number, depth)}]`);
        }
        if (schema.typeName !== STRUCT_TYPE && schema.typeName !== LIST_VALUE_TYPE) {
          this.#parts.push(`.${field.jsonName}`);
        }
        return false;
      }
    }
    return true;
  }

  /** A known field, read by its declared type (protobuf-es's `readField`). */
  #field(field: DescField, wireType: number, depth: number): boolean {
    switch (field.fieldKind) {
      case 'scalar':
        this.scalar(field.scalar);
        return true;
      case 'enum':
        this.varint();
        return true;
      case 'message':
        return this.#messageField(field.message, field, depth);
      case 'list': {
        if (field.listKind === 'message') return this.#messageField(field.message, field, depth);
        const scalar = field.listKind === 'scalar' ? field.scalar : ScalarType.INT32;
        if (wireType !== LEN || LENGTH_DELIMITED.has(scalar)) {
          this.scalar(scalar);
          return true;
        }
        const end = this.varint() + this.pos; // packed, read to its end as protobuf-es does
        while (this.pos < end) this.scalar(scalar);
        return true;
      }
      case 'map':
        return this.#mapEntry(field, depth);
    }
  }

  /** A message field's value: length-delimited, or a group when so declared. */
  #messageField(schema: DescMessage, field: DescField, depth: number): boolean {
    if ('delimitedEncoding' in field && field.delimitedEncoding === true) {
      // No Value type is written as a group: what it holds is passed over.
      this.skip(START_GROUP, field.number, RECURSION_LIMIT - depth - 1);
      return true;
    }
    const end = this.varint() + this.pos;
    return schema.typeName === VALUE_TYPE
      ? this.#value(schema, end, depth + 1)
      : this.message(schema, end, depth + 1);
  }

  /**
   * A map entry (protobuf-es's `readMapEntry`: a tag of another field
   * number is passed over alone, and an entry without a value gets an empty
   * one, which for a Value has no kind). Its path part is the key.
   */
  #mapEntry(field: DescField & { fieldKind: 'map' }, depth: number): boolean {
    const end = this.varint() + this.pos;
    const entryStart = this.pos;
    let valued = false;
    while (this.pos < end) {
      this.tag();
      if (this.fieldNo === ENTRY_KEY) {
        this.scalar(field.mapKey);
      } else if (this.fieldNo === ENTRY_VALUE) {
        if (field.mapKind === 'scalar') this.scalar(field.scalar);
        else if (field.mapKind === 'enum') this.varint();
        else {
          valued = true;
          if (!this.#messageField(field.message, field, depth)) {
            this.#parts.push(this.#key(entryStart, end));
            return false;
          }
        }
      }
    }
    if (!valued && field.mapKind === 'message' && field.message.typeName === VALUE_TYPE) {
      this.#parts.push(this.#key(entryStart, end));
      return this.#fail(VALUE_WITHOUT_KIND);
    }
    return true;
  }

  /** A map entry's path part, `.key`: the last key in the entry [start, end), read again. */
  #key(start: number, end: number): string {
    let key = '';
    this.pos = start;
    try {
      while (this.pos < end) {
        this.tag();
        if (this.fieldNo === ENTRY_KEY && this.wireType === LEN) {
          const keyEnd = this.payloadEnd();
          key = Buffer.from(this.bytes.subarray(this.pos, keyEnd)).toString('utf8');
          this.pos = keyEnd;
        } else {
          this.skip(this.wireType, this.fieldNo, 0);
        }
      }
    } catch (e: unknown) {
      if (e !== STOP) throw e;
    }
    return `.${key}`;
  }

  /** A `google.protobuf.Value` up to `end`: its last kind decides, as when it is decoded. */
  #value(schema: DescMessage, end: number, depth: number): boolean {
    if (depth >= RECURSION_LIMIT) throw STOP;
    let kind = 0;
    let finite = true;
    while (this.pos < end) {
      this.tag();
      const field = this.fieldNo;
      switch (field) {
        case NULL_VALUE:
        case BOOL_VALUE:
          this.varint();
          break;
        case NUMBER_VALUE:
          finite = this.#finiteDouble();
          break;
        case STRING_VALUE:
          this.scalar(ScalarType.STRING);
          break;
        case STRUCT_VALUE:
        case LIST_VALUE: {
          const nested = fieldsByNumber(schema).get(field) as DescField & { fieldKind: 'message' };
          if (!this.#messageField(nested.message, nested, depth)) return false;
          break;
        }
        default:
          this.skip(this.wireType, field, RECURSION_LIMIT - depth - 1);
          continue;
      }
      kind = field;
    }
    if (kind === 0) return this.#fail(VALUE_WITHOUT_KIND);
    if (kind === NUMBER_VALUE && !finite) return this.#fail(VALUE_NOT_FINITE);
    return true;
  }

  /** Whether the little-endian double here is finite (its exponent is not all ones); moved past. */
  #finiteDouble(): boolean {
    const at = this.pos;
    this.pos += 8;
    if (this.pos > this.bytes.length) throw STOP;
    const high = this.bytes[at + 7] as number;
    const next = this.bytes[at + 6] as number;
    return (high & 0x7f) !== 0x7f || (next & 0xf0) !== 0xf0;
  }

  /** How many times field `fieldNo` comes in [start, before) of a `schema` message: a list index. */
  #occurrences(
    schema: DescMessage,
    start: number,
    before: number,
    fieldNo: number,
    depth: number,
  ): number {
    const fields = fieldsByNumber(schema);
    const parts = this.#parts;
    this.#parts = [];
    let count = 0;
    this.pos = start;
    while (this.pos < before) {
      this.tag();
      if (this.fieldNo === fieldNo) count += 1;
      const field = fields.get(this.fieldNo);
      // The fields before the bad Value passed: read again, they pass again.
      if (field === undefined) this.skip(this.wireType, this.fieldNo, RECURSION_LIMIT - depth - 1);
      else this.#field(field, this.wireType, depth);
    }
    this.#parts = parts;
    return count;
  }
}

const READER = new ValueReader(EMPTY);
