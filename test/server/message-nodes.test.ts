/**
 * The node count of a request, before it is decoded: each message, map
 * entry, list element and unknown field counts one on the wire, and JSON
 * counts about the same for the same request.
 */
import {
  create,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  toBinary,
  toJsonString,
} from '@bufbuild/protobuf';
import { EmptySchema, SourceCodeInfo_LocationSchema, StructSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import {
  DecideToolCallRequestSchema,
  DispatchRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  countJsonNodes,
  countNodes,
  mayExceedJsonNodes,
  mayExceedNodes,
} from '../../src/server/message-nodes.js';

const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** A Dispatch of an afterStep whose tools result is `value`. */
function dispatchOf(value: JsonValue) {
  return fromJson(DispatchRequestSchema, {
    event: { afterStep: { operationId: 'op', userId: 'u', toolsResult: value } },
  });
}

/** A DecideToolCall whose arguments are `args`. */
function decideOf(args: JsonObject) {
  return fromJson(DecideToolCallRequestSchema, {
    event: {
      context: { toolCallId: 'c', identifier: 'fs', apiName: 'write', operationId: 'op', args },
    },
  });
}

function binaryCount(schema: DescMessage, message: never, limit = UNBOUNDED): number {
  return countNodes(schema, toBinary(schema, message), limit);
}

function jsonCount(schema: DescMessage, message: never, limit = UNBOUNDED): number {
  return countJsonNodes(Buffer.from(toJsonString(schema, message)), limit);
}

describe('countNodes', () => {
  it('counts each element of a list Value, and the messages around it', () => {
    const small = binaryCount(DispatchRequestSchema, dispatchOf([null]) as never);
    const large = binaryCount(DispatchRequestSchema, dispatchOf(Array(1000).fill(null)) as never);
    expect(large - small).toBe(999);
    // The event, its afterStep, the Value, its ListValue, the one element.
    expect(small).toBe(5);
  });

  it('counts a Struct member twice (its map entry and its Value), and nested members too', () => {
    const flat = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));
    const base = binaryCount(DecideToolCallRequestSchema, decideOf({}) as never);
    expect(binaryCount(DecideToolCallRequestSchema, decideOf(flat) as never) - base).toBe(200);
    const nested = { a: { b: { c: [1, 'x', true] } } };
    // a: entry + Value + Struct; b: the same; c: entry + Value + ListValue + 3 Values.
    expect(binaryCount(DecideToolCallRequestSchema, decideOf(nested) as never) - base).toBe(12);
  });

  it('counts each element of a packed list and each unknown field', () => {
    const location = create(SourceCodeInfo_LocationSchema, {
      path: [1, 2, 300, 4],
      span: [5, 6, 7],
      leadingDetachedComments: ['a', 'b'],
    });
    expect(binaryCount(SourceCodeInfo_LocationSchema, location as never)).toBe(9);
    // The same bytes read as a message that knows none of the fields: one per field.
    const bytes = toBinary(SourceCodeInfo_LocationSchema, location);
    expect(countNodes(EmptySchema, bytes, UNBOUNDED)).toBe(4);
  });

  it('stops once past the limit', () => {
    const message = dispatchOf(Array(10_000).fill(null));
    expect(binaryCount(DispatchRequestSchema, message as never, 100)).toBe(101);
  });

  it('stops without throwing at bytes that do not parse, and past 100 levels of nesting', () => {
    const bytes = toBinary(DispatchRequestSchema, dispatchOf(Array(50).fill(null)));
    expect(countNodes(DispatchRequestSchema, bytes.subarray(0, bytes.length - 7), UNBOUNDED)).toBe(
      // The cut-off lengths of the outer messages stop the count at the first of them.
      0,
    );
    const nested = new Uint8Array(400);
    // 200 levels of ListValue.values (field 1), each one byte shorter than the last.
    for (let i = 0; i < 200; i++) {
      nested[2 * i] = 0x0a;
      nested[2 * i + 1] = 400 - 2 * i - 2;
    }
    expect(countNodes(StructSchema, nested, UNBOUNDED)).toBeLessThan(110);
  });

  it('is bounded by the byte count, so a short message needs no count', () => {
    for (const message of [dispatchOf(Array(500).fill(null)), dispatchOf(Array(200).fill([]))]) {
      const bytes = toBinary(DispatchRequestSchema, message);
      const count = countNodes(DispatchRequestSchema, bytes, UNBOUNDED);
      expect(mayExceedNodes(bytes.length, count - 1)).toBe(true);
    }
    expect(mayExceedNodes(1000, 1000)).toBe(false);
    const json = Buffer.from('[[[[[[[[[[]]]]]]]]]]');
    expect(mayExceedJsonNodes(json.length, countJsonNodes(json, UNBOUNDED) - 1)).toBe(true);
    expect(mayExceedJsonNodes(500, 1000)).toBe(false);
  });
});

describe('countJsonNodes', () => {
  it('counts members and elements outside strings, and objects and arrays twice', () => {
    expect(countJsonNodes(Buffer.from('[1,2,{"a":[]}]'), UNBOUNDED)).toBe(9);
    expect(countJsonNodes(Buffer.from('{"a,b":"{[:]}"}'), UNBOUNDED)).toBe(3);
    expect(countJsonNodes(Buffer.from('{"a":"x\\"}",}'), UNBOUNDED)).toBe(4);
    expect(countJsonNodes(Buffer.from('["\\\\",1]'), UNBOUNDED)).toBe(3);
    expect(countJsonNodes(Buffer.from('"unterminated, [string'), UNBOUNDED)).toBe(0);
    expect(countJsonNodes(Buffer.from(',,,,,,,,,,'), 5)).toBe(6);
  });

  it('counts about what the binary count does for the same request', () => {
    const cases = [
      [DispatchRequestSchema, dispatchOf(Array(1000).fill(null))],
      [DispatchRequestSchema, dispatchOf(Array(300).fill({ a: [1, 2], b: 'x' }))],
      [
        DecideToolCallRequestSchema,
        decideOf(Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, [i]]))),
      ],
    ] as const;
    for (const [schema, message] of cases) {
      const binary = binaryCount(schema, message as never);
      const json = jsonCount(schema, message as never);
      expect(Math.abs(json - binary) / binary).toBeLessThan(0.02);
    }
  });
});
