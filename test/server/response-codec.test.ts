/**
 * The hand-written bytes of a plain `DispatchStream` ack are the bytes
 * protobuf-es's `toBinary` writes, for any event id; an ack that needs more
 * than its id is left to `toBinary`.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HookOutcomeSchema } from '../../gen/agenthooks/v1/decisions_pb.js';
import { DispatchStreamResponseSchema } from '../../gen/agenthooks/v1/service_pb.js';
import { encodePlainAck, plainAck } from '../../src/server/response-codec.js';

describe('plainAck', () => {
  it('is the message create() makes, keys and prototype included', () => {
    const outcome = create(HookOutcomeSchema, { hookId: 'audit' });
    for (const [eventId, outcomes] of [
      ['evt_1', []],
      ['', []],
      ['evt_2', [outcome]],
    ] as const) {
      const made = create(DispatchStreamResponseSchema, { eventId, outcomes: [...outcomes] });
      const plain = plainAck(eventId, [...outcomes]);
      expect(plain).toStrictEqual(made);
      expect(Object.keys(plain)).toEqual(Object.keys(made));
      expect(Object.getPrototypeOf(plain)).toBe(Object.getPrototypeOf(made));
      expect(toBinary(DispatchStreamResponseSchema, plain)).toEqual(
        toBinary(DispatchStreamResponseSchema, made),
      );
    }
  });
});

describe('encodePlainAck', () => {
  it('writes what toBinary writes for an ack with its event id alone', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          fc.string({ minLength: 100, maxLength: 200 }),
        ),
        (eventId) => {
          const ack = create(DispatchStreamResponseSchema, { eventId });
          const bytes = encodePlainAck(ack);
          const expected = toBinary(DispatchStreamResponseSchema, ack);
          if (bytes === undefined) {
            // Only an id whose UTF-8 length needs a second length byte is left to toBinary.
            expect(Buffer.byteLength(eventId, 'utf8')).toBeGreaterThan(127);
            return;
          }
          expect(Buffer.from(bytes)).toEqual(Buffer.from(expected));
          expect(fromBinary(DispatchStreamResponseSchema, bytes).eventId).toBe(eventId);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('covers the longest id one length byte holds, and leaves the next length to toBinary', () => {
    const longest = create(DispatchStreamResponseSchema, { eventId: `${'é'.repeat(63)}a` });
    expect(Buffer.from(encodePlainAck(longest) ?? [])).toEqual(
      Buffer.from(toBinary(DispatchStreamResponseSchema, longest)),
    );
    expect(encodePlainAck(create(DispatchStreamResponseSchema, { eventId: 'a'.repeat(128) }))).toBe(
      undefined,
    );
  });

  it('leaves an ack with outcomes, an error or unknown fields to toBinary', () => {
    const withOutcome = create(DispatchStreamResponseSchema, {
      eventId: 'e1',
      outcomes: [create(HookOutcomeSchema, { hookId: 'h' })],
    });
    const withError = create(DispatchStreamResponseSchema, {
      eventId: 'e1',
      error: { code: 3, reason: 'INVALID_EVENT', message: 'm' },
    });
    const withUnknown = fromBinary(
      DispatchStreamResponseSchema,
      new Uint8Array([0x0a, 0x02, 0x65, 0x31, 0xa0, 0x06, 0x01]),
    );
    expect(withUnknown.$unknown).toBeDefined();
    for (const ack of [withOutcome, withError, withUnknown])
      expect(encodePlainAck(ack)).toBe(undefined);
  });
});
