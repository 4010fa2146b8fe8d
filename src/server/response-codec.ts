/**
 * @module The bytes of the responses sent once per event or decision, written
 * by hand: protobuf-es's reflective `toBinary` spends more on a small message
 * (a reflection object, the field walk, a writer per sub-message) than the
 * rest of its encoding, 6-9 µs for a decision's 80 bytes.
 *
 * - `DispatchStream` acknowledges every event with a `DispatchStreamResponse`;
 *   an event no hook failed on is acked with its id alone.
 * - `DecideToolCall` and `DecideToolResult` answer an allow or a deny, the
 *   hooks' outcomes, the unknown operations and the decision id.
 *
 * Anything else (a mock, a deny with a blocked result, unknown fields, a
 * value that is not the messages a handler builds) goes through `toBinary`;
 * `test/server/response-codec.test.ts` checks the bytes against it.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { Allow, Decision, Deny, HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  DecideToolCallResponseSchema,
  DecideToolResultResponseSchema,
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  LEN,
  messageFieldSize,
  outcomeSize,
  stringSize,
  varintFieldSize,
  WireWriter,
  writeOutcome,
  writeString,
  writeVarint,
} from '../proto-wire.js';

/**
 * The ack of an event no hook failed on, as `create(DispatchStreamResponseSchema,
 * { eventId, outcomes })` makes it, without its reflective walk of the fields.
 */
export function plainAck(eventId: string, outcomes: HookOutcome[] = []): DispatchStreamResponse {
  return { $typeName: 'agenthooks.v1.DispatchStreamResponse', eventId, outcomes };
}

/** Tag of `event_id` (field 1, length-delimited). */
const EVENT_ID_TAG = 0x0a;
/** Longest id whose length fits one varint byte. */
const ONE_BYTE_LENGTH = 0x7f;

/**
 * The wire bytes of an ack that carries only its event id, or `undefined`
 * when the ack needs the general encoder.
 */
export function encodePlainAck(ack: DispatchStreamResponse): Buffer | undefined {
  // An init object (no type name) is left to `create` and `toBinary`.
  if (
    !isPlainMessage(ack, DispatchStreamResponseSchema.typeName) ||
    ack.outcomes.length !== 0 ||
    ack.error !== undefined
  ) {
    return undefined;
  }
  const id = ack.eventId;
  // proto3 leaves an empty string out.
  if (id === '') return Buffer.alloc(0);
  const length = Buffer.byteLength(id, 'utf8');
  if (length > ONE_BYTE_LENGTH) return undefined;
  const bytes = Buffer.allocUnsafe(2 + length);
  bytes[0] = EVENT_ID_TAG;
  bytes[1] = length;
  bytes.write(id, 2, length, 'utf8');
  return bytes;
}

/**
 * Writes a response's bytes by hand, or answers `undefined` to leave it to
 * `create` and `toBinary`. It is given the value the handler returned, a
 * message or an init object, and checks what it reads.
 */
export type HandEncoder<D extends DescMessage> = (
  value: MessageShape<D> | object,
) => Buffer | undefined;

/**
 * The hand encoder of responses of `schema`, when there is one: the gRPC
 * adapter asks once per method, and stays free of any message type.
 */
export function handEncoderOf<D extends DescMessage>(schema: D): HandEncoder<D> | undefined {
  switch (schema.typeName) {
    case DispatchStreamResponseSchema.typeName:
      return encodePlainAck as unknown as HandEncoder<D>;
    case DecideToolCallResponseSchema.typeName:
    case DecideToolResultResponseSchema.typeName:
      return encodeDecisionResponse as unknown as HandEncoder<D>;
    default:
      return undefined;
  }
}

/**
 * The fields of a `DecideToolCallResponse` or `DecideToolResultResponse`
 * (the same numbers and types), as a handler returns them: an init object
 * or the message.
 */
interface DecisionResponseFields {
  readonly $unknown?: unknown;
  readonly decision?: unknown;
  readonly outcomes?: unknown;
  readonly unknownOperations?: unknown;
  readonly decisionId?: unknown;
}

/** Field numbers of a decision response. */
const DECISION_FIELD = 1;
const OUTCOMES_FIELD = 2;
const UNKNOWN_OPERATIONS_FIELD = 3;
const DECISION_ID_FIELD = 4;

/** Whether `value` is a message of `typeName` (made by `create` or decoded) with no unknown fields. */
function isPlainMessage(value: unknown, typeName: string): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { $typeName?: unknown }).$typeName === typeName &&
    (value as { $unknown?: unknown }).$unknown === undefined
  );
}

/** The int32 range: `toBinary` refuses a number outside it, or one with a fraction. */
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
/** The int64 range of a Duration's seconds. */
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Whether `n` is what `toBinary` writes as an int32 (an enum too): a whole number in range. */
function isInt32(n: unknown): boolean {
  return typeof n === 'number' && Number.isInteger(n) && n >= INT32_MIN && n <= INT32_MAX;
}

/** Whether `v` is a string (`toBinary` would convert anything else, or throw). */
function isString(v: unknown): boolean {
  return typeof v === 'string';
}

/** A Decision's field number of its `allow` and `deny` outcomes. */
const ALLOW_FIELD = 1;
const DENY_FIELD = 2;

/**
 * Body bytes of a Decision's outcome message (its Allow or Deny; 0 with no
 * outcome), or -1 when this encoder leaves the Decision to `toBinary`.
 */
function outcomeBodySize(decision: Decision): number {
  const outcome = decision.outcome;
  switch (outcome.case) {
    case undefined:
      return 0;
    case 'allow': {
      const allow = outcome.value;
      if (!isPlainMessage(allow, 'agenthooks.v1.Allow') || !isInt32(allow.controlsConsulted)) {
        return -1;
      }
      return varintFieldSize(1, allow.controlsConsulted);
    }
    case 'deny': {
      const deny = outcome.value;
      if (
        !isPlainMessage(deny, 'agenthooks.v1.Deny') ||
        deny.blockedResult !== undefined ||
        !isString(deny.reason) ||
        !isString(deny.hookId) ||
        !isString(deny.operationId) ||
        !isInt32(deny.classification)
      ) {
        return -1;
      }
      return denySize(deny);
    }
    default:
      return -1;
  }
}

function denySize(deny: Deny): number {
  return (
    stringSize(1, deny.reason) +
    varintFieldSize(2, deny.classification) +
    stringSize(3, deny.hookId) +
    stringSize(4, deny.operationId)
  );
}

/** Writes the Decision field: `size` bytes of body, its outcome's body `outcomeBody` of them. */
function writeDecision(w: WireWriter, decision: Decision, size: number, outcomeBody: number): void {
  w.tag(DECISION_FIELD, LEN);
  w.varint(size);
  const outcome = decision.outcome;
  if (outcome.case === 'allow') {
    const allow: Allow = outcome.value;
    w.tag(ALLOW_FIELD, LEN);
    w.varint(outcomeBody);
    writeVarint(w, 1, allow.controlsConsulted);
  } else if (outcome.case === 'deny') {
    const deny = outcome.value;
    w.tag(DENY_FIELD, LEN);
    w.varint(outcomeBody);
    writeString(w, 1, deny.reason);
    writeVarint(w, 2, deny.classification);
    writeString(w, 3, deny.hookId);
    writeString(w, 4, deny.operationId);
  }
}

/**
 * Whether every item is a HookOutcome message whose fields hold values of
 * their types (as `create` and decoding make them; a field set by hand to
 * anything else is left to `toBinary`), and whose duration, if any, is a
 * Duration message of the same kind.
 */
function arePlainOutcomes(outcomes: readonly unknown[]): outcomes is HookOutcome[] {
  for (const item of outcomes) {
    if (!isPlainMessage(item, 'agenthooks.v1.HookOutcome')) return false;
    const o = item as HookOutcome;
    if (
      !isString(o.hookId) ||
      !isString(o.operationId) ||
      !isString(o.errorCode) ||
      !isString(o.message) ||
      !isString(o.plugin) ||
      !isInt32(o.hookType) ||
      !isInt32(o.source) ||
      !isInt32(o.status) ||
      !isInt32(o.httpStatus) ||
      !isInt32(o.point) ||
      typeof o.critical !== 'boolean'
    ) {
      return false;
    }
    const duration = o.duration;
    if (
      duration !== undefined &&
      (!isPlainMessage(duration, 'google.protobuf.Duration') ||
        typeof duration.seconds !== 'bigint' ||
        duration.seconds < INT64_MIN ||
        duration.seconds > INT64_MAX ||
        !isInt32(duration.nanos))
    ) {
      return false;
    }
  }
  return true;
}

/**
 * The wire bytes of a decision response (`DecideToolCallResponse` or
 * `DecideToolResultResponse`, given as the handler returned it), or
 * `undefined` when it needs the general encoder: a mock, a deny with a
 * blocked result, unknown fields, or any part that is not a message of its
 * type (an init object inside, a value of another type).
 */
export function encodeDecisionResponse(value: unknown): Buffer | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as DecisionResponseFields & { readonly $typeName?: unknown };
  if (r.$unknown !== undefined) return undefined;
  // A message (not an init object) has every field; `toBinary` refuses one without.
  if (
    r.$typeName !== undefined &&
    (r.outcomes === undefined || r.unknownOperations === undefined || r.decisionId === undefined)
  ) {
    return undefined;
  }
  const { decision, outcomes = [], unknownOperations = [], decisionId = '' } = r;
  if (
    !Array.isArray(outcomes) ||
    !Array.isArray(unknownOperations) ||
    typeof decisionId !== 'string'
  ) {
    return undefined;
  }
  let size = 0;
  let decisionBody = 0;
  let outcomeBody = 0;
  if (decision !== undefined) {
    if (!isPlainMessage(decision, 'agenthooks.v1.Decision')) return undefined;
    const d = decision as Decision;
    outcomeBody = outcomeBodySize(d);
    if (outcomeBody < 0) return undefined;
    if (d.outcome.case !== undefined) {
      decisionBody = messageFieldSize(
        d.outcome.case === 'allow' ? ALLOW_FIELD : DENY_FIELD,
        outcomeBody,
      );
    }
    size += messageFieldSize(DECISION_FIELD, decisionBody);
  }
  if (!arePlainOutcomes(outcomes)) return undefined;
  const outcomeSizes = outcomes.map(outcomeSize);
  for (const s of outcomeSizes) size += messageFieldSize(OUTCOMES_FIELD, s);
  for (const id of unknownOperations) {
    if (typeof id !== 'string') return undefined;
    size += stringSize(UNKNOWN_OPERATIONS_FIELD, id, true);
  }
  size += stringSize(DECISION_ID_FIELD, decisionId);
  const w = new WireWriter(size);
  if (decision !== undefined) writeDecision(w, decision as Decision, decisionBody, outcomeBody);
  for (let i = 0; i < outcomes.length; i++) {
    writeOutcome(w, OUTCOMES_FIELD, outcomes[i] as HookOutcome, outcomeSizes[i] as number);
  }
  for (const id of unknownOperations as string[]) {
    writeString(w, UNKNOWN_OPERATIONS_FIELD, id, true);
  }
  writeString(w, DECISION_ID_FIELD, decisionId);
  return w.done('decision response');
}
