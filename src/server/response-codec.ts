/**
 * @module The bytes of the one response a stream sends per event, written by
 * hand. `DispatchStream` acknowledges every event with a
 * `DispatchStreamResponse`; an event no hook failed on is acked with its id
 * alone, and protobuf-es's reflective `toBinary` spends more on that one
 * string field (a reflection object, the field walk, a writer) than the rest
 * of the encoding. Any other response, or an ack with outcomes, an error or
 * unknown fields, goes through `toBinary`; `test/server/response-codec.test.ts`
 * checks the bytes against it.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';

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
  if (ack.outcomes.length !== 0 || ack.error !== undefined || ack.$unknown !== undefined) {
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

/** Writes a message's bytes by hand, or answers `undefined` to leave it to `toBinary`. */
export type HandEncoder<D extends DescMessage> = (message: MessageShape<D>) => Buffer | undefined;

/**
 * The hand encoder of responses of `schema`, when there is one: the gRPC
 * adapter asks once per method, and stays free of any message type.
 */
export function handEncoderOf<D extends DescMessage>(schema: D): HandEncoder<D> | undefined {
  return schema.typeName === DispatchStreamResponseSchema.typeName
    ? (encodePlainAck as unknown as HandEncoder<D>)
    : undefined;
}
