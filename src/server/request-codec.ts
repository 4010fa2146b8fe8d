/**
 * @module Requests read by hand before protobuf-es decodes them. A tool
 * call's arguments can be large (a file the tool writes), and a decision
 * reads them only when a hook that runs needs them: a webhook's payload, a
 * local handler, an audit log that records payloads. Decoding them up front
 * makes a string of their size on the V8 heap for every call, which the
 * garbage collector then pays for even when no hook matches.
 *
 * So for `DecideToolCall` and `DecideToolResult`, large arguments are checked
 * on the wire (every tag, length and UTF-8 string, without allocating) and
 * left undecoded; the rest of the request is decoded as usual, and
 * `context.args` decodes them the first time it is read. A request the
 * check cannot vouch for goes to `fromBinary` whole, so it is answered
 * exactly as before: malformed or very deep arguments, a tag protobuf-es
 * refuses, a repeated field it would merge, a group, or, on the way to the
 * arguments, a field it knows sent with another wire type (protobuf-es reads
 * a known field by its declared type, so it would frame the bytes around it
 * differently). A Value without a kind, or with a number that is not
 * finite, never gets here: `value-kinds.ts` refuses the request first.
 */
import { isUtf8 } from 'node:buffer';
import { type DescMessage, fromBinary, type MessageShape, ScalarType } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';
import { ToolCallContextSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  type DecideToolCallRequest,
  DecideToolCallRequestSchema,
  DecideToolResultRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';

/** Arguments smaller than this are decoded with the request: deferring them would cost more. */
export const DEFER_ARGS_MIN_BYTES = 16 * 1024;

/**
 * Deepest Struct nesting the check vouches for, counted in messages below the
 * arguments' Struct. protobuf-es refuses a request nested more than 100
 * messages deep; the arguments start 4 deep, and a deferred decode would start
 * 2 deep, so a bound well under either keeps both answers the same.
 */
const MAX_NESTING = 60;

const { Varint: VARINT, Bit64: I64, LengthDelimited: LEN, Bit32: I32 } = WireType;

/** Field numbers on the path to the arguments, and in `google.protobuf` Struct types. */
const EVENT_FIELD = 1;
const CONTEXT_FIELD = 1;
const ARGS_FIELD = 5;
const ITEMS_FIELD = 1;
const ENTRY_KEY = 1;
const ENTRY_VALUE = 2;
const VALUE_NULL = 1;
const VALUE_NUMBER = 2;
const VALUE_STRING = 3;
const VALUE_BOOL = 4;
const VALUE_STRUCT = 5;
const VALUE_LIST = 6;

/**
 * A read position in a message's bytes. Every method answers -1 or `false`
 * where the bytes are not what the check vouches for, and the caller gives up.
 */
class Wire {
  pos = 0;
  constructor(readonly bytes: Uint8Array) {}

  /** A varint of at most 10 bytes ending before `end` (exact up to 2^53), or -1. */
  varint(end: number): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10 && this.pos < end; i++) {
      const byte = this.bytes[this.pos++] as number;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    return -1;
  }

  /** A field's tag (field number and wire type), or -1 for none protobuf-es reads as such. */
  tag(end: number): number {
    const start = this.pos;
    const tag = this.varint(end);
    // protobuf-es refuses a tag of more than 5 bytes, or one past 32 bits.
    return tag < 8 || tag > 0xffffffff || this.pos - start > 5 ? -1 : tag;
  }

  /** The end of a length-delimited payload that starts here, or -1 if it passes `end`. */
  payloadEnd(end: number): number {
    const length = this.varint(end);
    if (length < 0 || this.pos + length > end) return -1;
    return this.pos + length;
  }

  /** Skips the payload of a field of `wireType`; `false` for groups and unknown types. */
  skip(wireType: number, end: number): boolean {
    switch (wireType) {
      case VARINT:
        return this.varint(end) >= 0;
      case I64:
        this.pos += 8;
        return this.pos <= end;
      case I32:
        this.pos += 4;
        return this.pos <= end;
      case LEN: {
        const payloadEnd = this.payloadEnd(end);
        this.pos = payloadEnd;
        return payloadEnd >= 0;
      }
      default:
        return false;
    }
  }

  /** Whether bytes [start, end) are valid UTF-8, as protobuf-es requires of a string. */
  utf8(start: number, end: number): boolean {
    return isUtf8(this.bytes.subarray(start, end));
  }
}

/** The wire types protobuf-es reads each field of a message by, by field number. */
type WireTypes = ReadonlyMap<number, readonly number[]>;

/** The wire type of a scalar of type `scalar`. */
function scalarWireType(scalar: ScalarType): number {
  switch (scalar) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return I64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return I32;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return LEN;
    default:
      return VARINT;
  }
}

/**
 * The wire types a field of `desc` may arrive with and be read the same way
 * by protobuf-es: its declared one, and for a repeated number also packed.
 * A group-encoded field gets none, so it is always left to `fromBinary`.
 */
function wireTypesOf(desc: DescMessage): WireTypes {
  const types = new Map<number, readonly number[]>();
  for (const field of desc.fields) {
    switch (field.fieldKind) {
      case 'scalar':
        types.set(field.number, [scalarWireType(field.scalar)]);
        break;
      case 'enum':
        types.set(field.number, [VARINT]);
        break;
      case 'map':
        types.set(field.number, [LEN]);
        break;
      case 'message':
        types.set(field.number, field.delimitedEncoding ? [] : [LEN]);
        break;
      case 'list': {
        if (field.listKind === 'message') {
          types.set(field.number, field.delimitedEncoding ? [] : [LEN]);
          break;
        }
        const one = field.listKind === 'enum' ? VARINT : scalarWireType(field.scalar);
        types.set(field.number, one === LEN ? [LEN] : [one, LEN]);
        break;
      }
    }
  }
  return types;
}

/** The message type of field `number` of `desc`. */
function messageField(desc: DescMessage, number: number): DescMessage {
  const field = desc.fields.find((f) => f.number === number);
  if (field?.fieldKind !== 'message')
    throw new Error(`${desc.typeName} has no message field ${number}`);
  return field.message;
}

/** Where one length-delimited field sits: its tag, its length and its payload. */
interface Field {
  readonly tagStart: number;
  readonly lengthStart: number;
  readonly start: number;
  readonly end: number;
}

/**
 * The one occurrence of length-delimited field `number` in [start, end), or
 * `undefined` when it is absent, repeated (protobuf-es would merge), of
 * another wire type, or when any field around it is malformed.
 */
function findField(
  wire: Wire,
  start: number,
  end: number,
  number: number,
  known: WireTypes,
): Field | undefined {
  let found: Field | undefined;
  wire.pos = start;
  while (wire.pos < end) {
    const tagStart = wire.pos;
    const tag = wire.tag(end);
    if (tag < 0) return undefined;
    const expected = known.get(tag >>> 3);
    // protobuf-es reads a field it knows by its declared type, whatever the
    // tag's wire type: one sent with another type would be framed differently.
    if (expected !== undefined && !expected.includes(tag & 7)) return undefined;
    if (tag >>> 3 !== number) {
      if (!wire.skip(tag & 7, end)) return undefined;
      continue;
    }
    if ((tag & 7) !== LEN || found !== undefined) return undefined;
    const lengthStart = wire.pos;
    const payloadEnd = wire.payloadEnd(end);
    if (payloadEnd < 0) return undefined;
    found = { tagStart, lengthStart, start: wire.pos, end: payloadEnd };
    wire.pos = payloadEnd;
  }
  return found;
}

/** Checks one item of a repeated field: its bytes are [start, end), at `depth`. */
type ItemCheck = (wire: Wire, start: number, end: number, depth: number) => boolean;

/**
 * Whether [start, end), a message `depth` deep, holds well-formed fields and,
 * in field 1 (a Struct's entries, a ListValue's values), length-delimited
 * items that `item` accepts.
 */
function checkItems(
  wire: Wire,
  start: number,
  end: number,
  depth: number,
  item: ItemCheck,
): boolean {
  if (depth > MAX_NESTING) return false;
  wire.pos = start;
  while (wire.pos < end) {
    const tag = wire.tag(end);
    if (tag < 0) return false;
    if (tag >>> 3 !== ITEMS_FIELD) {
      if (!wire.skip(tag & 7, end)) return false;
      continue;
    }
    if ((tag & 7) !== LEN) return false;
    const itemEnd = wire.payloadEnd(end);
    if (itemEnd < 0 || !item(wire, wire.pos, itemEnd, depth + 1)) return false;
    wire.pos = itemEnd;
  }
  return true;
}

/** Whether [start, end) is a `google.protobuf.Struct` protobuf-es decodes. */
function checkStruct(wire: Wire, start: number, end: number, depth: number): boolean {
  return checkItems(wire, start, end, depth, checkEntry);
}

/** Whether [start, end) is a `google.protobuf.ListValue` protobuf-es decodes. */
function checkList(wire: Wire, start: number, end: number, depth: number): boolean {
  return checkItems(wire, start, end, depth, checkValue);
}

/**
 * Whether the map entry [start, end) is a key and a `Value` (`depth` deep:
 * protobuf-es reads an entry inline, so it is no level of its own). It reads
 * an entry's fields without their wire types and does not skip others, so
 * only fields 1 and 2, length-delimited, are vouched for.
 */
function checkEntry(wire: Wire, start: number, end: number, depth: number): boolean {
  wire.pos = start;
  while (wire.pos < end) {
    const tag = wire.tag(end);
    if (tag < 0 || (tag & 7) !== LEN) return false;
    const fieldEnd = wire.payloadEnd(end);
    if (fieldEnd < 0) return false;
    const number = tag >>> 3;
    if (number === ENTRY_KEY) {
      if (!wire.utf8(wire.pos, fieldEnd)) return false;
    } else if (number !== ENTRY_VALUE || !checkValue(wire, wire.pos, fieldEnd, depth)) {
      return false;
    }
    wire.pos = fieldEnd;
  }
  return true;
}

/** Whether [start, end) is a `google.protobuf.Value` protobuf-es decodes. */
function checkValue(wire: Wire, start: number, end: number, depth: number): boolean {
  wire.pos = start;
  while (wire.pos < end) {
    const tag = wire.tag(end);
    if (tag < 0) return false;
    const type = tag & 7;
    switch (tag >>> 3) {
      case VALUE_NULL:
      case VALUE_BOOL:
        if (type !== VARINT || wire.varint(end) < 0) return false;
        break;
      case VALUE_NUMBER:
        if (type !== I64 || !wire.skip(I64, end)) return false;
        break;
      case VALUE_STRING: {
        if (type !== LEN) return false;
        const stringEnd = wire.payloadEnd(end);
        if (stringEnd < 0 || !wire.utf8(wire.pos, stringEnd)) return false;
        wire.pos = stringEnd;
        break;
      }
      case VALUE_STRUCT:
      case VALUE_LIST: {
        if (type !== LEN) return false;
        const nestedEnd = wire.payloadEnd(end);
        if (nestedEnd < 0) return false;
        const ok =
          tag >>> 3 === VALUE_STRUCT
            ? checkStruct(wire, wire.pos, nestedEnd, depth + 1)
            : checkList(wire, wire.pos, nestedEnd, depth + 1);
        if (!ok) return false;
        wire.pos = nestedEnd;
        break;
      }
      default:
        if (!wire.skip(type, end)) return false;
    }
  }
  return true;
}

/** Bytes of `value` as a varint. */
function varintBytes(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/**
 * The request's bytes with the arguments field cut out of its context, and the
 * two enclosing lengths (event, context) rewritten to match.
 */
function withoutArgs(bytes: Uint8Array, event: Field, context: Field, args: Field): Uint8Array {
  const contextLength = context.end - context.start - (args.end - args.tagStart);
  const contextPrefix = varintBytes(contextLength);
  const eventLength =
    context.lengthStart -
    event.start +
    contextPrefix.length +
    contextLength +
    (event.end - context.end);
  const eventPrefix = varintBytes(eventLength);
  const out = new Uint8Array(
    event.lengthStart + eventPrefix.length + eventLength + (bytes.length - event.end),
  );
  let at = 0;
  const put = (part: ArrayLike<number>) => {
    out.set(part, at);
    at += part.length;
  };
  put(bytes.subarray(0, event.lengthStart));
  put(eventPrefix);
  put(bytes.subarray(event.start, context.lengthStart));
  put(contextPrefix);
  put(bytes.subarray(context.start, args.tagStart));
  put(bytes.subarray(args.end, context.end));
  put(bytes.subarray(context.end, bytes.length));
  return out;
}

/**
 * Gives `context` an `args` that decodes `field` (the arguments' tag, length
 * and payload, checked) when first read, and then holds the object. Writing
 * it replaces it, as for any field.
 */
function deferArgs(context: object, field: Uint8Array): void {
  const hold = (value: unknown) =>
    Object.defineProperty(context, 'args', {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  Object.defineProperty(context, 'args', {
    configurable: true,
    enumerable: true,
    get() {
      const args = fromBinary(ToolCallContextSchema, field).args;
      hold(args);
      return args;
    },
    set: hold,
  });
}

/**
 * Whether `context.args` of a message this module decoded is still undecoded
 * (for tests, which show that a decision without hooks never reads them).
 */
export function argsDeferred(context: object): boolean {
  return Object.getOwnPropertyDescriptor(context, 'args')?.get !== undefined;
}

/** The wire types of the three messages on the way to the arguments. */
interface ArgsPath {
  readonly request: WireTypes;
  readonly event: WireTypes;
  readonly context: WireTypes;
}

/**
 * Decodes a `DecideToolCall` or `DecideToolResult` request (both hold the
 * event in field 1 and its context in field 1), deferring large arguments.
 * Throws as `fromBinary` does on a malformed request.
 */
function decodeDeferringArgs<D extends DescMessage>(
  schema: D,
  path: ArgsPath,
  bytes: Uint8Array,
): MessageShape<D> {
  // Arguments this large cannot fit in a smaller request: most decisions stop here.
  if (bytes.length < DEFER_ARGS_MIN_BYTES) return fromBinary(schema, bytes);
  const wire = new Wire(bytes);
  const event = findField(wire, 0, bytes.length, EVENT_FIELD, path.request);
  const context = event && findField(wire, event.start, event.end, CONTEXT_FIELD, path.event);
  const args = context && findField(wire, context.start, context.end, ARGS_FIELD, path.context);
  if (
    event === undefined ||
    context === undefined ||
    args === undefined ||
    args.end - args.start < DEFER_ARGS_MIN_BYTES ||
    !checkStruct(wire, args.start, args.end, 0)
  ) {
    return fromBinary(schema, bytes);
  }
  const message = fromBinary(
    schema,
    withoutArgs(bytes, event, context, args),
  ) as unknown as DecideToolCallRequest;
  // Present: its field was in the bytes, so protobuf-es made the messages.
  deferArgs(message.event?.context as object, bytes.subarray(args.tagStart, args.end));
  return message as unknown as MessageShape<D>;
}

/**
 * The hand decoder of requests of `schema`, when there is one: the gRPC
 * adapter asks once per method.
 */
export function handDecoderOf<D extends DescMessage>(
  schema: D,
): ((bytes: Uint8Array) => MessageShape<D>) | undefined {
  if (
    schema.typeName !== DecideToolCallRequestSchema.typeName &&
    schema.typeName !== DecideToolResultRequestSchema.typeName
  ) {
    return undefined;
  }
  const eventDesc = messageField(schema, EVENT_FIELD);
  const path: ArgsPath = {
    request: wireTypesOf(schema),
    event: wireTypesOf(eventDesc),
    context: wireTypesOf(messageField(eventDesc, CONTEXT_FIELD)),
  };
  return (bytes) => decodeDeferringArgs(schema, path, bytes);
}
