/**
 * @module Protobuf's binary wire format, written by hand for the few
 * messages a hot path encodes once per call (an audit record, a decision's
 * response): protobuf-es's reflective `toBinary` walks every field through
 * a reflection object and a forked writer per sub-message, several times
 * the cost of the bytes themselves. Each encoder sizes its message first and
 * writes into one buffer of that size, in field-number order with proto3's
 * defaults omitted: what `toBinary` writes, which each encoder's tests check.
 */
import type { Duration, Timestamp } from '@bufbuild/protobuf/wkt';
import type { HookOutcome } from '../gen/agenthooks/v1/decisions_pb.js';

/** Wire type of a varint field. */
export const VARINT = 0;
/** Wire type of a length-delimited field. */
export const LEN = 2;

/** Bytes of `n` as a varint; a negative int32 takes ten, as protobuf writes it. */
export function varintSize(n: number): number {
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

/** One encoding's buffer; sizes are computed first, so it never grows. */
export class WireWriter {
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

  /** Checks the encoding filled its buffer exactly, and answers it. */
  done(what: string): Buffer {
    if (this.at !== this.bytes.length) {
      throw new Error(`${what} encoding wrote ${this.at} bytes of ${this.bytes.length}`);
    }
    return this.bytes;
  }
}

/** Bytes of a string field (tag, length, text); 0 when it is omitted. */
export function stringSize(field: number, value: string, always = false): number {
  if (value === '' && !always) return 0;
  const bytes = Buffer.byteLength(value, 'utf8');
  return varintSize(field * 8) + varintSize(bytes) + bytes;
}

/** Bytes of a varint field (an int32, an enum); 0 when it is omitted. */
export function varintFieldSize(field: number, value: number): number {
  return value === 0 ? 0 : varintSize(field * 8) + varintSize(value);
}

/** Bytes of a message field whose body takes `body` bytes. */
export function messageFieldSize(field: number, body: number): number {
  return varintSize(field * 8) + varintSize(body) + body;
}

export function writeString(w: WireWriter, field: number, value: string, always = false): void {
  if (value === '' && !always) return;
  w.string(field, value, Buffer.byteLength(value, 'utf8'));
}

export function writeVarint(w: WireWriter, field: number, value: number): void {
  if (value === 0) return;
  w.tag(field, VARINT);
  w.varint(value);
}

/** Body bytes of a Timestamp or Duration (seconds, nanos). */
export function secondsNanosSize(t: Timestamp | Duration): number {
  return (t.seconds === 0n ? 0 : 1 + varint64Size(t.seconds)) + varintFieldSize(2, t.nanos);
}

/** Writes a Timestamp or Duration as message field `field`. */
export function writeSecondsNanos(w: WireWriter, field: number, t: Timestamp | Duration): void {
  w.tag(field, LEN);
  w.varint(secondsNanosSize(t));
  if (t.seconds !== 0n) {
    w.tag(1, VARINT);
    w.varint64(t.seconds);
  }
  writeVarint(w, 2, t.nanos);
}

/** Body bytes of a HookOutcome. */
export function outcomeSize(o: HookOutcome): number {
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

/** Writes a HookOutcome of body size `size` as message field `field`. */
export function writeOutcome(w: WireWriter, field: number, o: HookOutcome, size: number): void {
  w.tag(field, LEN);
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
