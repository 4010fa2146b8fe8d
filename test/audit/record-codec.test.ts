import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DecisionRecordSchema } from '../../gen/agenthooks/v1/audit_pb.js';
import { encodeDecisionRecord } from '../../src/audit/record-codec.js';

const text = fc.oneof(fc.constant(''), fc.string(), fc.string({ unit: 'grapheme' }));
const enumValue = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }));
const int64 = fc.oneof(fc.constant(0n), fc.bigInt({ min: -(2n ** 40n), max: 2n ** 40n }));
const secondsNanos = fc.record({
  seconds: int64,
  nanos: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 999_999_999 })),
});

const outcome = fc.record({
  hookId: text,
  hookType: enumValue,
  operationId: text,
  source: enumValue,
  status: enumValue,
  errorCode: text,
  message: text,
  httpStatus: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 100, max: 599 }),
    fc.integer({ min: -5, max: -1 }),
  ),
  duration: fc.option(secondsNanos, { nil: undefined }),
  critical: fc.boolean(),
  point: enumValue,
  plugin: text,
});

const record = fc.record({
  decisionId: text,
  time: fc.option(secondsNanos, { nil: undefined }),
  kind: enumValue,
  operationId: text,
  operationChain: fc.array(text, { maxLength: 4 }),
  toolCallId: text,
  identifier: text,
  apiName: text,
  point: enumValue,
  outcome: enumValue,
  reason: text,
  classification: enumValue,
  hookId: text,
  outcomes: fc.array(outcome, { maxLength: 4 }),
  duration: fc.option(secondsNanos, { nil: undefined }),
  payloadJson: fc.oneof(text, fc.json()),
});

describe('encodeDecisionRecord', () => {
  it('writes exactly what protobuf-es toBinary writes, for any record', () => {
    fc.assert(
      fc.property(record, (init) => {
        const message = create(DecisionRecordSchema, init);
        expect(Buffer.from(encodeDecisionRecord(message))).toEqual(
          Buffer.from(toBinary(DecisionRecordSchema, message)),
        );
      }),
      { numRuns: 500 },
    );
  });

  it('writes a large payload whose length needs a multi-byte varint', () => {
    const message = create(DecisionRecordSchema, { payloadJson: 'é'.repeat(100_000) });
    expect(Buffer.from(encodeDecisionRecord(message))).toEqual(
      Buffer.from(toBinary(DecisionRecordSchema, message)),
    );
  });
});
