/**
 * @module The binary encoding of a `DecisionRecord` for the store sink,
 * written by hand: the reflective `toBinary` of protobuf-es costs several
 * times the rest of the record's path, and the store sink writes one per
 * decision. The output is what `toBinary(DecisionRecordSchema, r)` writes
 * (fields in number order, proto3 defaults omitted), which a test checks.
 */
import type { Duration, Timestamp } from '@bufbuild/protobuf/wkt';
import type { DecisionRecord } from '../../gen/agenthooks/v1/audit_pb.js';
import type { HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';

/** Wire types. */
const VARINT = 0;
const LEN = 2;

/** Bytes of `n` as a varint; a negative int32 takes ten, as protobuf writes it. */
function varintSize(n: number): number {
  if (n < 0) return 10;
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

/** Bytes of a 64-bit varint given as a bigint. */
function varint64Size(n: bigint): number {
  let v = BigInt.asUintN(64, n);
  let size = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    size += 1;
  }
  return size;
}

/** A growing buffer of one encoding; sizes are computed first, so it never grows. */
class Writer {
  readonly bytes: Buffer;
  at = 0;

  constructor(size: number) {
    this.bytes = Buffer.allocUnsafe(size);
  }

  varint(n: number): void {
    if (n < 0) {
      this.varint64(BigInt(n));
      return;
    }
    while (n >= 0x80) {
      this.bytes[this.at++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    this.bytes[this.at++] = n;
  }

  varint64(n: bigint): void {
    let v = BigInt.asUintN(64, n);
    while (v >= 0x80n) {
      this.bytes[this.at++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.bytes[this.at++] = Number(v);
  }

  tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  string(field: number, value: string, bytes: number): void {
    this.tag(field, LEN);
    this.varint(bytes);
    this.at += this.bytes.write(value, this.at, 'utf8');
  }
}

/** Bytes of a string field (tag, length, text); 0 when it is omitted. */
function stringSize(field: number, value: string, always = false): number {
  if (value === '' && !always) return 0;
  const bytes = Buffer.byteLength(value, 'utf8');
  return varintSize(field * 8) + varintSize(bytes) + bytes;
}

function varintFieldSize(field: number, value: number): number {
  return value === 0 ? 0 : varintSize(field * 8) + varintSize(value);
}

function writeString(w: Writer, field: number, value: string, always = false): void {
  if (value === '' && !always) return;
  w.string(field, value, Buffer.byteLength(value, 'utf8'));
}

function writeVarint(w: Writer, field: number, value: number): void {
  if (value === 0) return;
  w.tag(field, VARINT);
  w.varint(value);
}

/** Body bytes of a Timestamp or Duration (seconds, nanos). */
function secondsNanosSize(t: Timestamp | Duration): number {
  return (t.seconds === 0n ? 0 : 1 + varint64Size(t.seconds)) + varintFieldSize(2, t.nanos);
}

function writeSecondsNanos(w: Writer, field: number, t: Timestamp | Duration): void {
  w.tag(field, LEN);
  w.varint(secondsNanosSize(t));
  if (t.seconds !== 0n) {
    w.tag(1, VARINT);
    w.varint64(t.seconds);
  }
  writeVarint(w, 2, t.nanos);
}

function messageFieldSize(field: number, body: number): number {
  return varintSize(field * 8) + varintSize(body) + body;
}

function outcomeSize(o: HookOutcome): number {
  return (
    stringSize(1, o.hookId) +
    varintFieldSize(2, o.hookType) +
    stringSize(3, o.operationId) +
    varintFieldSize(4, o.source) +
    varintFieldSize(5, o.status) +
    stringSize(6, o.errorCode) +
    stringSize(7, o.message) +
    varintFieldSize(8, o.httpStatus) +
    (o.duration === undefined ? 0 : messageFieldSize(9, secondsNanosSize(o.duration))) +
    (o.critical ? 2 : 0) +
    varintFieldSize(11, o.point) +
    stringSize(12, o.plugin)
  );
}

function writeOutcome(w: Writer, o: HookOutcome, size: number): void {
  w.tag(14, LEN);
  w.varint(size);
  writeString(w, 1, o.hookId);
  writeVarint(w, 2, o.hookType);
  writeString(w, 3, o.operationId);
  writeVarint(w, 4, o.source);
  writeVarint(w, 5, o.status);
  writeString(w, 6, o.errorCode);
  writeString(w, 7, o.message);
  writeVarint(w, 8, o.httpStatus);
  if (o.duration !== undefined) writeSecondsNanos(w, 9, o.duration);
  if (o.critical) {
    w.tag(10, VARINT);
    w.varint(1);
  }
  writeVarint(w, 11, o.point);
  writeString(w, 12, o.plugin);
}

/**
 * Encodes `r` as binary protobuf, byte for byte what protobuf-es's
 * `toBinary` writes for it (unknown fields aside: a record built here has none).
 */
export function encodeDecisionRecord(r: DecisionRecord): Uint8Array {
  const outcomeSizes = r.outcomes.map(outcomeSize);
  let size =
    stringSize(1, r.decisionId) +
    (r.time === undefined ? 0 : messageFieldSize(2, secondsNanosSize(r.time))) +
    varintFieldSize(3, r.kind) +
    stringSize(4, r.operationId) +
    stringSize(6, r.toolCallId) +
    stringSize(7, r.identifier) +
    stringSize(8, r.apiName) +
    varintFieldSize(9, r.point) +
    varintFieldSize(10, r.outcome) +
    stringSize(11, r.reason) +
    varintFieldSize(12, r.classification) +
    stringSize(13, r.hookId) +
    (r.duration === undefined ? 0 : messageFieldSize(15, secondsNanosSize(r.duration))) +
    stringSize(16, r.payloadJson);
  for (const id of r.operationChain) size += stringSize(5, id, true);
  for (const s of outcomeSizes) size += messageFieldSize(14, s);
  const w = new Writer(size);
  writeString(w, 1, r.decisionId);
  if (r.time !== undefined) writeSecondsNanos(w, 2, r.time);
  writeVarint(w, 3, r.kind);
  writeString(w, 4, r.operationId);
  for (const id of r.operationChain) writeString(w, 5, id, true);
  writeString(w, 6, r.toolCallId);
  writeString(w, 7, r.identifier);
  writeString(w, 8, r.apiName);
  writeVarint(w, 9, r.point);
  writeVarint(w, 10, r.outcome);
  writeString(w, 11, r.reason);
  writeVarint(w, 12, r.classification);
  writeString(w, 13, r.hookId);
  for (const [i, o] of r.outcomes.entries()) writeOutcome(w, o, outcomeSizes[i] as number);
  if (r.duration !== undefined) writeSecondsNanos(w, 15, r.duration);
  writeString(w, 16, r.payloadJson);
  if (w.at !== size) {
    throw new Error(`DecisionRecord encoding wrote ${w.at} bytes of ${size}`);
  }
  return w.bytes;
}
