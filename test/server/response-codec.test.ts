/**
 * The hand-written bytes of a plain `DispatchStream` ack are the bytes
 * protobuf-es's `toBinary` writes, for any event id; an ack that needs more
 * than its id is left to `toBinary`.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { DurationSchema } from '@bufbuild/protobuf/wkt';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AllowSchema,
  DecisionSchema,
  DenySchema,
  type HookOutcome,
  HookOutcomeSchema,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import { ToolResultSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallResponseSchema,
  DecideToolResultResponseSchema,
  DispatchStreamResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  encodeDecisionResponse,
  encodePlainAck,
  handEncoderOf,
  plainAck,
} from '../../src/server/response-codec.js';

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

/** Any int32, the small values a response holds most, and negatives (ten bytes on the wire). */
const int32 = fc.oneof(
  fc.integer({ min: -2, max: 300 }),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
);
const text = fc.oneof(fc.constant(''), fc.string(), fc.string({ unit: 'binary', maxLength: 40 }));

const outcome = fc
  .record({
    hookId: text,
    hookType: int32,
    operationId: text,
    source: int32,
    status: int32,
    errorCode: text,
    message: fc.oneof(text, fc.string({ minLength: 130, maxLength: 300 })),
    httpStatus: int32,
    duration: fc.option(
      fc.record({
        seconds: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        nanos: int32,
      }),
      { nil: undefined },
    ),
    critical: fc.boolean(),
    point: int32,
    plugin: text,
  })
  .map(({ duration, ...fields }) =>
    create(HookOutcomeSchema, {
      ...fields,
      duration: duration === undefined ? undefined : create(DurationSchema, duration),
    }),
  );

const decision = fc.oneof(
  fc.constant(create(DecisionSchema, {})),
  int32.map((controlsConsulted) =>
    create(DecisionSchema, { outcome: { case: 'allow', value: { controlsConsulted } } }),
  ),
  fc
    .record({ reason: text, classification: int32, hookId: text, operationId: text })
    .map((value) => create(DecisionSchema, { outcome: { case: 'deny', value } })),
);

/** A decision response as a handler returns it: an init object of messages, fields optional. */
const response = fc.record(
  {
    decision,
    outcomes: fc.array(outcome, { maxLength: 4 }),
    unknownOperations: fc.array(text, { maxLength: 3 }),
    decisionId: text,
  },
  { requiredKeys: [] },
);

describe('encodeDecisionResponse', () => {
  it('writes what create and toBinary write, for both decision responses', () => {
    fc.assert(
      fc.property(response, fc.boolean(), (init, asMessage) => {
        for (const schema of [DecideToolCallResponseSchema, DecideToolResultResponseSchema]) {
          const value = asMessage ? create(schema, init) : init;
          const bytes = encodeDecisionResponse(value);
          const expected = toBinary(schema, create(schema, init));
          expect(bytes).toBeDefined();
          expect(Buffer.from(bytes ?? [])).toEqual(Buffer.from(expected));
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('is the encoder of both decision responses, and of no other message', () => {
    expect(handEncoderOf(DecideToolCallResponseSchema)).toBe(encodeDecisionResponse);
    expect(handEncoderOf(DecideToolResultResponseSchema)).toBe(encodeDecisionResponse);
    expect(handEncoderOf(HookOutcomeSchema)).toBe(undefined);
  });

  it('leaves a mock, a blocked result, unknown fields and init objects inside to toBinary', () => {
    const result = create(ToolResultSchema, {});
    const withUnknown = fromBinary(
      DecideToolCallResponseSchema,
      new Uint8Array([0x22, 0x01, 0x64, 0xa0, 0x06, 0x01]),
    );
    expect(withUnknown.$unknown).toBeDefined();
    const outcomeWithUnknown = fromBinary(HookOutcomeSchema, new Uint8Array([0xa0, 0x06, 0x01]));
    const leftAlone: unknown[] = [
      { decision: create(DecisionSchema, { outcome: { case: 'mock', value: { result } } }) },
      {
        decision: create(DecisionSchema, {
          outcome: { case: 'deny', value: { reason: 'r', blockedResult: result } },
        }),
      },
      withUnknown,
      { outcomes: [outcomeWithUnknown] },
      // Init objects where a message is expected: create() would fill them in.
      { decision: { outcome: { case: 'allow', value: { controlsConsulted: 1 } } } },
      { outcomes: [{ hookId: 'h' }] },
      {
        outcomes: [
          { ...create(HookOutcomeSchema, { hookId: 'h' }), duration: { seconds: 1n, nanos: 0 } },
        ],
      },
      // Values of another type.
      { decisionId: 7 },
      { unknownOperations: ['op', 1] },
      { outcomes: 'none' },
      null,
    ];
    for (const value of leftAlone) expect(encodeDecisionResponse(value)).toBe(undefined);
  });

  it('writes a typical allow of one control in its 80-odd bytes', () => {
    const delivered: HookOutcome = create(HookOutcomeSchema, {
      hookId: 'policy-0',
      hookType: 2,
      operationId: 'op_bench',
      source: 1,
      status: 1,
      httpStatus: 200,
      duration: create(DurationSchema, { nanos: 1_234_567 }),
      critical: true,
    });
    const init = {
      decision: create(DecisionSchema, {
        outcome: { case: 'allow', value: { controlsConsulted: 1 } },
      }),
      outcomes: [delivered],
      unknownOperations: [],
      decisionId: 'dec_01JXYZABCDEFGHJKMNPQRSTVWX',
    };
    const bytes = encodeDecisionResponse(init);
    expect(Buffer.from(bytes ?? [])).toEqual(
      Buffer.from(
        toBinary(DecideToolCallResponseSchema, create(DecideToolCallResponseSchema, init)),
      ),
    );
    expect(fromBinary(DecideToolCallResponseSchema, bytes ?? new Uint8Array()).outcomes[0]).toEqual(
      delivered,
    );
  });

  it('writes nothing toBinary would not, and never throws, whatever the fields hold', () => {
    // Real messages whose fields were set by hand to anything: a valid value,
    // a number out of the int32 range or with a fraction, a value of another type.
    const anyInt32 = fc.oneof(
      int32,
      fc.double(),
      fc.constantFrom(Number.NaN, 2 ** 32 + 1, -(2 ** 31) - 1, 1.5),
      fc.string({ maxLength: 3 }),
      fc.boolean(),
    );
    const anyString = fc.oneof(text, fc.integer(), fc.constant(null), fc.boolean());
    const anyBool = fc.oneof(fc.boolean(), fc.constantFrom(0, 1, '', 'yes', null));
    const anySeconds = fc.oneof(
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.constantFrom(2n ** 63n, 2n ** 64n, -(2n ** 63n) - 1n),
      fc.integer(),
    );
    const anyOutcome = fc
      .record({
        hookId: anyString,
        hookType: anyInt32,
        operationId: anyString,
        source: anyInt32,
        status: anyInt32,
        errorCode: anyString,
        message: anyString,
        httpStatus: anyInt32,
        duration: fc.option(fc.record({ seconds: anySeconds, nanos: anyInt32 }), {
          nil: undefined,
        }),
        critical: anyBool,
        point: anyInt32,
        plugin: anyString,
      })
      .map(({ duration, ...fields }) =>
        Object.assign(create(HookOutcomeSchema), fields, {
          duration:
            duration === undefined ? undefined : Object.assign(create(DurationSchema), duration),
        }),
      );
    const anyDecision = fc.oneof(
      anyInt32.map((controlsConsulted) =>
        create(DecisionSchema, {
          outcome: {
            case: 'allow',
            value: Object.assign(create(AllowSchema), { controlsConsulted }),
          },
        }),
      ),
      fc
        .record({
          reason: anyString,
          classification: anyInt32,
          hookId: anyString,
          operationId: anyString,
        })
        .map((fields) =>
          create(DecisionSchema, {
            outcome: { case: 'deny', value: Object.assign(create(DenySchema), fields) },
          }),
        ),
    );
    const anyResponse = fc.record(
      {
        decision: anyDecision,
        outcomes: fc.array(anyOutcome, { maxLength: 3 }),
        unknownOperations: fc.array(anyString, { maxLength: 2 }),
        decisionId: anyString,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(anyResponse, fc.boolean(), (init, typed) => {
        for (const schema of [DecideToolCallResponseSchema, DecideToolResultResponseSchema]) {
          // As a message: the type name on the init object itself.
          const value = typed ? Object.assign({ $typeName: schema.typeName }, init) : init;
          let expected: Uint8Array | undefined;
          try {
            expected = toBinary(schema, create(schema, value as never));
          } catch {
            expected = undefined;
          }
          let bytes: Buffer | undefined;
          expect(() => {
            bytes = encodeDecisionResponse(value);
          }).not.toThrow();
          if (bytes === undefined) continue;
          expect(expected).toBeDefined();
          expect(Buffer.from(bytes)).toEqual(Buffer.from(expected ?? []));
        }
      }),
      { numRuns: 3000 },
    );
  });
});
