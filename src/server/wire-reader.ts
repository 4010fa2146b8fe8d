/**
 * @module A read of protobuf binary as protobuf-es's `BinaryReader` and
 * `fromBinary` make it, for the checks that run on a request's bytes before
 * it is decoded (`message-nodes.ts`, `value-kinds.ts`): a known field is read
 * by its declared type whatever its tag's wire type, lengths and tags as
 * protobuf-es takes them, unknown fields (groups in them included) skipped.
 * Where protobuf-es would fail, the read throws {@link STOP}, and the check
 * leaves the bytes to `fromBinary`, which refuses them.
 */
import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';

/** Thrown to end a read: the decoder would fail here (or a check is done). */
export const STOP = Symbol('stop');

export const {
  Varint: VARINT,
  Bit64: I64,
  LengthDelimited: LEN,
  StartGroup: START_GROUP,
  EndGroup: END_GROUP,
  Bit32: I32,
} = WireType;

/** protobuf-es's default recursion limit, in messages (and groups skipped). */
export const RECURSION_LIMIT = 100;

/** Scalars whose list elements are each a field of their own (never packed). */
export const LENGTH_DELIMITED: ReadonlySet<ScalarType> = new Set([
  ScalarType.STRING,
  ScalarType.BYTES,
]);

const fieldsByType = new WeakMap<DescMessage, ReadonlyMap<number, DescField>>();

/** The fields of a message type by number, built once per type. */
export function fieldsByNumber(schema: DescMessage): ReadonlyMap<number, DescField> {
  let fields = fieldsByType.get(schema);
  if (fields === undefined) {
    fields = new Map(schema.fields.map((f) => [f.number, f]));
    fieldsByType.set(schema, fields);
  }
  return fields;
}

/** A read position in a message's bytes, moved as protobuf-es moves its own. */
export class WireReader {
  pos = 0;
  /** The field number and wire type of the last tag read. */
  fieldNo = 0;
  wireType = 0;
  bytes: Uint8Array;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  /** A tag, into {@link fieldNo} and {@link wireType}; protobuf-es refuses the same ones. */
  tag(): void {
    const start = this.pos;
    const tag = this.varint();
    const read = this.pos - start;
    if (read > 5 || (read === 5 && (this.bytes[this.pos - 1] as number) > 0x0f)) throw STOP;
    this.fieldNo = tag >>> 3;
    this.wireType = tag & 7;
    if (this.fieldNo <= 0 || this.wireType > I32) throw STOP;
  }

  /**
   * A varint of at most 10 bytes, as its low 32 bits unsigned (how
   * protobuf-es reads lengths and tags); past the bytes, or longer, stops.
   */
  varint(): number {
    const bytes = this.bytes;
    let value = 0;
    for (let i = 0; i < 10; i++) {
      const byte = bytes[this.pos++];
      if (byte === undefined) throw STOP;
      if (i < 5) value |= (byte & 0x7f) << (7 * i);
      if (byte < 0x80) return value >>> 0;
    }
    throw STOP;
  }

  /** A length-delimited payload's length, read here; returns where the payload ends. */
  payloadEnd(): number {
    const length = this.varint(); // read before the position it moves is
    const end = this.pos + length;
    if (end > this.bytes.length) throw STOP;
    return end;
  }

  /** A scalar of `type`, moved past. */
  scalar(type: ScalarType): void {
    switch (type) {
      case ScalarType.STRING:
      case ScalarType.BYTES: {
        const length = this.varint(); // read before the position it moves is
        this.pos += length;
        break;
      }
      case ScalarType.DOUBLE:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64:
        this.pos += 8;
        break;
      case ScalarType.FLOAT:
      case ScalarType.FIXED32:
      case ScalarType.SFIXED32:
        this.pos += 4;
        break;
      default:
        this.varint();
        return;
    }
    if (this.pos > this.bytes.length) throw STOP;
  }

  /** Moves past an unknown field's value (protobuf-es's `skip`), groups in them included. */
  skip(wireType: number, fieldNo: number, recursionLimit: number): void {
    const bytes = this.bytes;
    switch (wireType) {
      case VARINT:
        // Any number of bytes, as protobuf-es skips it.
        while (((bytes[this.pos++] ?? 0) & 0x80) !== 0) {}
        break;
      case I64:
        this.pos += 8;
        break;
      case I32:
        this.pos += 4;
        break;
      case LEN: {
        const length = this.varint();
        this.pos += length;
        break;
      }
      case START_GROUP:
        if (recursionLimit <= 0) throw STOP;
        for (;;) {
          this.tag();
          if (this.wireType === END_GROUP) {
            if (this.fieldNo !== fieldNo) throw STOP;
            break;
          }
          this.skip(this.wireType, this.fieldNo, recursionLimit - 1);
        }
        break;
      default:
        throw STOP;
    }
    if (this.pos > bytes.length) throw STOP;
  }
}
