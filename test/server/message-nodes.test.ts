/**
 * The node count of a request, before it is decoded: each message, map
 * entry, list element and unknown field counts one on the wire, and JSON
 * counts about the same for the same request.
 */
import {
  create,
  type DescMessage,
  fromBinary,
  fromJson,
  fromJsonString,
  type JsonObject,
  type JsonValue,
  toBinary,
  toJsonString,
} from '@bufbuild/protobuf';
import {
  EmptySchema,
  SourceCodeInfo_LocationSchema,
  StructSchema,
  ValueSchema,
} from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { ToolCallContextSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  DispatchRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  countJsonMessageNodes,
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

  it('counts what protobuf-es builds before it fails, and stops past 100 levels of nesting', () => {
    const bytes = toBinary(DispatchRequestSchema, dispatchOf(Array(50).fill(null)));
    // Cut short, every message's length runs past the end: protobuf-es decodes what is
    // there and then fails, and so many nodes were built.
    const cut = bytes.subarray(0, bytes.length - 7);
    expect(() => fromBinary(DispatchRequestSchema, cut)).toThrow();
    expect(countNodes(DispatchRequestSchema, cut, UNBOUNDED)).toBe(5 + 48);
    let value = create(ValueSchema, { kind: { case: 'nullValue', value: 0 } });
    for (let i = 0; i < 150; i++) {
      value = create(ValueSchema, { kind: { case: 'listValue', value: { values: [value] } } });
    }
    const nested = toBinary(ValueSchema, value);
    // protobuf-es makes the 100th message below the root, then fails to read it.
    expect(countNodes(ValueSchema, nested, UNBOUNDED)).toBe(100);
  });

  describe('reads the bytes as protobuf-es does, so no encoding hides nodes from it', () => {
    const N = 5000;
    const list = toBinary(DispatchRequestSchema, dispatchOf(Array(N).fill(null)));
    /** Bytes of a field `number` with wire type `type`, then the rest. */
    const tag = (number: number, type: number) => varint(number * 8 + type);
    const variants: Record<string, Uint8Array | [DescMessage, Uint8Array]> = {
      'an empty unknown group first': concat([tag(15, 3), tag(15, 4)], list),
      // The event's length plus 2^32: read as 32 bits, it is the same length.
      'a length past 32 bits': withEventLength(list, (n) => varint(n + 2 ** 32)),
      'a message field sent as a varint': withEventTag(list, tag(1, 0)),
      'a message field sent as a group': withEventTag(list, tag(1, 3)),
      // The entry's value (field 2) tagged as a varint, after its key "list".
      'a Struct member sent as a varint field': [
        DecideToolCallRequestSchema,
        toBinary(DecideToolCallRequestSchema, decideOf({ list: Array(N).fill(null) })).map(
          (b, i, all) => (b === 0x12 && all[i - 1] === 0x74 ? 0x10 : b),
        ),
      ],
      // protobuf-es makes an empty Value for an entry with a key alone.
      'Struct entries with no value': [
        StructSchema,
        Buffer.concat(
          Array.from({ length: N }, (_, i) => {
            const key = Buffer.from(`k${i}`);
            return Buffer.from([0x0a, key.length + 2, 0x0a, key.length, ...key]);
          }),
        ),
      ],
      'a list after a Struct nested 40 levels': (() => {
        let deep: JsonValue = 'x';
        for (let i = 0; i < 40; i++) deep = { a: deep };
        return toBinary(DispatchRequestSchema, dispatchOf([deep, ...Array(N).fill(null)]));
      })(),
    };
    for (const [name, variant] of Object.entries(variants)) {
      it(name, () => {
        const [schema, bytes] = Array.isArray(variant) ? variant : [DispatchRequestSchema, variant];
        const decoded = nodesOf(safeDecode(schema, bytes) ?? {});
        expect(decoded).toBeGreaterThan(N);
        expect(countNodes(schema, bytes, UNBOUNDED)).toBeGreaterThanOrEqual(decoded);
      });
    }

    it('counts at least what protobuf-es decodes, for 3000 mutations of a request', () => {
      const base = toBinary(
        DecideToolCallRequestSchema,
        decideOf({ a: [null, 1, 'x', { b: [true, [2]] }], c: { d: 'e' } }),
      );
      const random = seeded(20261203);
      let decodedOnes = 0;
      for (let i = 0; i < 3000; i++) {
        const bytes = mutate(base, random);
        const message = safeDecode(DecideToolCallRequestSchema, bytes);
        if (message === undefined) continue;
        decodedOnes += 1;
        const counted = countNodes(DecideToolCallRequestSchema, bytes, UNBOUNDED);
        expect(counted, Buffer.from(bytes).toString('hex')).toBeGreaterThanOrEqual(
          nodesOf(message),
        );
      }
      expect(decodedOnes).toBeGreaterThan(300);
    });
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
    expect(mayExceedJsonNodes(333, 1000)).toBe(false);
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
      expect(Math.abs(json - binary) / binary).toBeLessThan(0.25);
    }
  });
});

describe('countJsonMessageNodes', () => {
  const attachments = (n: number) =>
    fromJson(DispatchRequestSchema, {
      event: {
        beforeStep: {
          operationId: 'op',
          userId: 'u',
          attachments: Array.from({ length: n }, (_, i) => ({
            type: 'ATTACHMENT_TYPE_IMAGE',
            data: 'aGk=',
            fetchUrl: `https://example.com/${i}.png`,
            mimeType: 'image/png',
            name: `${i}.png`,
          })),
        },
      },
    });
  const cases = {
    'a list of nulls': [DispatchRequestSchema, dispatchOf(Array(3000).fill(null))],
    'lists of objects': [DispatchRequestSchema, dispatchOf(Array(300).fill({ a: [1, 2], b: 'x' }))],
    'arguments of 1000 members': [
      DecideToolCallRequestSchema,
      decideOf(Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, [i, { i }]]))),
    ],
    // Each attachment is one node, however many fields its JSON has (five: 12 in its text).
    '2000 attachments': [DispatchRequestSchema, attachments(2000)],
  } as const;
  for (const [name, [schema, message]] of Object.entries(cases)) {
    it(`refuses ${name} over JSON exactly where the binary count passes the bound`, () => {
      const binary = binaryCount(schema, message as never);
      const text = Buffer.from(toJsonString(schema, message as never));
      expect(countJsonMessageNodes(schema, text, binary)).toBeLessThanOrEqual(binary);
      expect(countJsonMessageNodes(schema, text, binary - 1)).toBeGreaterThan(binary - 1);
      expect(mayExceedJsonNodes(text.length, binary - 1)).toBe(true);
    });
  }

  it('counts at least what protobuf-es decodes, for 3000 mutations of a JSON request', () => {
    const base = toJsonString(
      DecideToolCallRequestSchema,
      decideOf({ a: [null, 1, 'x', { b: [true, [2]] }], c: { d: 'e' } }),
    );
    const alphabet = '{}[]:,"0n ';
    const random = seeded(20261204);
    let decodedOnes = 0;
    for (let i = 0; i < 3000; i++) {
      const at = Math.floor(random() * base.length);
      const char = alphabet[Math.floor(random() * alphabet.length)] as string;
      const text =
        random() < 0.5
          ? `${base.slice(0, at)}${char}${base.slice(at)}`
          : `${base.slice(0, at)}${base.slice(at + 1)}`;
      let message: object;
      try {
        message = fromJsonString(DecideToolCallRequestSchema, text, { ignoreUnknownFields: false });
      } catch {
        continue;
      }
      decodedOnes += 1;
      const counted = countJsonMessageNodes(
        DecideToolCallRequestSchema,
        Buffer.from(text),
        UNBOUNDED,
      );
      expect(counted, text).toBeGreaterThanOrEqual(nodesOf(message));
    }
    expect(decodedOnes).toBeGreaterThan(300);
  });

  it('counts nesting no decoder reads by its text alone, and stops where the text is not JSON', () => {
    const deep = Buffer.from(`{"args": {"a": ${'['.repeat(500_000)}${']'.repeat(500_000)}}}`);
    expect(countJsonMessageNodes(ToolCallContextSchema, deep, UNBOUNDED)).toBeGreaterThan(
      1_000_000,
    );
    const broken = Buffer.from(`{"a": [${'0,'.repeat(1500)}`);
    expect(countJsonMessageNodes(StructSchema, broken, UNBOUNDED)).toBe(1 + 1 + 2 + 1500);
  });

  it('skips a leading byte order mark, as the decoder before the JSON does', () => {
    const text = Buffer.from(
      toJsonString(DispatchRequestSchema, dispatchOf(Array(500).fill(null))),
    );
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), text]);
    const count = countJsonMessageNodes(DispatchRequestSchema, text, UNBOUNDED);
    expect(count).toBeGreaterThan(500);
    expect(countJsonMessageNodes(DispatchRequestSchema, withBom, UNBOUNDED)).toBe(count);
  });

  it('counts a typed message by its field names, escaped or not, and a key no field has as unknown', () => {
    const count = (json: string) =>
      countJsonMessageNodes(DispatchRequestSchema, Buffer.from(json), UNBOUNDED);
    const list = '[null, null, null]';
    // The event, afterStep, the Value, its ListValue, three elements.
    expect(count(`{"event": {"afterStep": {"toolsResult": ${list}}}}`)).toBe(7);
    expect(count(`{"event": {"\\u0061fterStep": {"tools_result": ${list}}}}`)).toBe(7);
    // Unknown (refused by the decoder): its value counts as a Value would.
    expect(count(`{"event": {"afterStep": {"toolsResulté": ${list}}}}`)).toBe(7);
  });

  it('counts null as a Value in a Value field and as nothing elsewhere', () => {
    const text = (json: string) => Buffer.from(json);
    const afterStep = (toolsResult: string) =>
      text(`{"event": {"afterStep": {"operationId": null, "toolsResult": ${toolsResult}}}}`);
    // The event, its afterStep, then the Value.
    expect(countJsonMessageNodes(DispatchRequestSchema, afterStep('null'), UNBOUNDED)).toBe(3);
    expect(countJsonMessageNodes(DispatchRequestSchema, afterStep('[null]'), UNBOUNDED)).toBe(5);
  });
});

/**
 * The objects a decoded message holds below itself: each message, list
 * element, map entry and unknown field.
 */
function nodesOf(root: unknown): number {
  let count = -1; // the root message
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const next = stack.pop();
    if (typeof next !== 'object' || next === null || next instanceof Uint8Array) continue;
    if (Array.isArray(next)) {
      // An element that is a message counts as one below.
      for (const element of next) if (!isMessage(element)) count += 1;
      stack.push(...next);
      continue;
    }
    const message = '$typeName' in next;
    // A oneof's `{ case, value }` is the field it holds, not a node of its own.
    const holder = message || 'case' in next;
    if (message) count += 1;
    for (const [key, member] of Object.entries(next)) {
      if (key === '$typeName') continue;
      if (key === '$unknown') count += (member as unknown[]).length;
      else {
        if (!holder) count += 1;
        stack.push(member);
      }
    }
  }
  return count;
}

function isMessage(value: unknown): boolean {
  return typeof value === 'object' && value !== null && '$typeName' in value;
}

function safeDecode(schema: DescMessage, bytes: Uint8Array): object | undefined {
  try {
    return fromBinary(schema, bytes);
  } catch {
    return undefined;
  }
}

function varint(value: number): Uint8Array {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Uint8Array.from(out);
}

function concat(parts: Uint8Array[], rest: Uint8Array): Uint8Array {
  return Buffer.concat([...parts, rest]);
}

/** `bytes` (a message whose first field is a message) with that field's tag replaced. */
function withEventTag(bytes: Uint8Array, tag: Uint8Array): Uint8Array {
  return concat([tag], bytes.subarray(1));
}

/** `bytes` with its first field's length rewritten by `length`. */
function withEventLength(bytes: Uint8Array, length: (n: number) => Uint8Array): Uint8Array {
  let at = 1;
  let n = 0;
  for (let scale = 1; ; scale *= 0x80) {
    const byte = bytes[at++] as number;
    n += (byte & 0x7f) * scale;
    if (byte < 0x80) break;
  }
  return concat([bytes.subarray(0, 1), length(n)], bytes.subarray(at));
}

/** A small deterministic generator of numbers in [0, 1). */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** `bytes` with one random change: a byte changed, inserted or removed, or a span repeated. */
function mutate(bytes: Uint8Array, random: () => number): Uint8Array {
  const at = Math.floor(random() * bytes.length);
  const byte = Math.floor(random() * 256);
  const copy = Buffer.from(bytes);
  switch (Math.floor(random() * 4)) {
    case 0:
      copy[at] = byte;
      return copy;
    case 1:
      return Buffer.concat([copy.subarray(0, at), Buffer.from([byte]), copy.subarray(at)]);
    case 2:
      return Buffer.concat([copy.subarray(0, at), copy.subarray(at + 1)]);
    default: {
      const end = Math.min(bytes.length, at + 1 + Math.floor(random() * 12));
      return Buffer.concat([copy.subarray(0, end), copy.subarray(at, end), copy.subarray(end)]);
    }
  }
}
