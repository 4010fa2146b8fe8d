/**
 * @module The binary encoding of a `DecisionRecord` for the store sink,
 * written by hand: the reflective `toBinary` of protobuf-es costs several
 * times the rest of the record's path, and the store sink writes one per
 * decision. The output is what `toBinary(DecisionRecordSchema, r)` writes
 * (fields in number order, proto3 defaults omitted), which a test checks.
 * The wire primitives are `src/proto-wire.ts`'s.
 */
import type { DecisionRecord } from '../../gen/agenthooks/v1/audit_pb.js';
import {
  messageFieldSize,
  outcomeSize,
  secondsNanosSize,
  stringSize,
  varintFieldSize,
  WireWriter,
  writeOutcome,
  writeSecondsNanos,
  writeString,
  writeVarint,
} from '../proto-wire.js';

/** Field number of `DecisionRecord.outcomes`. */
const OUTCOMES_FIELD = 14;

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
  for (const s of outcomeSizes) size += messageFieldSize(OUTCOMES_FIELD, s);
  const w = new WireWriter(size);
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
  for (const [i, o] of r.outcomes.entries()) {
    writeOutcome(w, OUTCOMES_FIELD, o, outcomeSizes[i] as number);
  }
  if (r.duration !== undefined) writeSecondsNanos(w, 15, r.duration);
  writeString(w, 16, r.payloadJson);
  return w.done('DecisionRecord');
}
