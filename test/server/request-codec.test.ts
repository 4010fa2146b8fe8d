/**
 * A decision request decoded with its large arguments deferred reads exactly
 * as `fromBinary` reads it, once the arguments are read; a request whose
 * arguments are malformed throws as `fromBinary` throws; and nothing reads
 * the arguments before something asks for them.
 */
import {
  create,
  type DescMessage,
  equals,
  fromBinary,
  type JsonObject,
  type JsonValue,
  type MessageShape,
  toBinary,
} from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Executor, ToolCallContextSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  type DecideToolCallRequest,
  DecideToolCallRequestSchema,
  type DecideToolResultRequest,
  DecideToolResultRequestSchema,
  DispatchRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  argsDeferred,
  DEFER_ARGS_MIN_BYTES,
  handDecoderOf,
} from '../../src/server/request-codec.js';

const decodeCall = handDecoderOf(DecideToolCallRequestSchema) as (
  bytes: Uint8Array,
) => DecideToolCallRequest;
const decodeResult = handDecoderOf(DecideToolResultRequestSchema) as (
  bytes: Uint8Array,
) => DecideToolResultRequest;

const CONTEXT = {
  toolCallId: 'call-1',
  assistantMessageId: 'msg-1',
  identifier: 'fs',
  apiName: 'write',
  callIndex: 2,
  stepIndex: 3,
  operationId: 'op-1',
  executor: Executor.SERVER,
  sessionId: 'session-1',
};

/** A file's content of `size` characters, with escapes and non-ASCII text. */
function content(size: number): string {
  const line = 'const ü = "x\\ty"; // ☃ line\n';
  return line.repeat(Math.ceil(size / line.length)).slice(0, size);
}

function callBytes(args: JsonObject, chain: string[] = ['op-0', 'op-1']): Uint8Array {
  return toBinary(
    DecideToolCallRequestSchema,
    create(DecideToolCallRequestSchema, {
      event: { context: { ...CONTEXT, args } },
      operationChain: chain,
    }),
  );
}

/** Decodes with both decoders: each one's message, or the error it threw. */
function both<D extends DescMessage>(
  schema: D,
  decode: (bytes: Uint8Array) => unknown,
  bytes: Uint8Array,
): { reference: MessageShape<D> | Error; ours: MessageShape<D> | Error } {
  const attempt = <T>(f: () => T): T | Error => {
    try {
      return f();
    } catch (e: unknown) {
      return e as Error;
    }
  };
  return {
    reference: attempt(() => fromBinary(schema, bytes)),
    ours: attempt(() => decode(bytes) as MessageShape<D>),
  };
}

function expectSame<D extends DescMessage>(
  schema: D,
  decode: (bytes: Uint8Array) => unknown,
  bytes: Uint8Array,
): void {
  const { reference, ours } = both(schema, decode, bytes);
  if (reference instanceof Error) {
    expect(ours).toBeInstanceOf(Error);
    return;
  }
  expect(ours).not.toBeInstanceOf(Error);
  expect(equals(schema, reference, ours as MessageShape<D>)).toBe(true);
  // Buffer.equals: a diff of two long buffers would take the test's whole time.
  const same = Buffer.from(toBinary(schema, ours as MessageShape<D>)).equals(
    Buffer.from(toBinary(schema, reference)),
  );
  expect(same).toBe(true);
}

/** Field numbers of ToolCallContext the hand-made framings use. */
const ARGS = 5;
const CALL_INDEX = 6;

function varint(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** A length-delimited field. */
function field(number: number, payload: ArrayLike<number>): number[] {
  return [...varint((number << 3) | 2), ...varint(payload.length), ...Array.from(payload)];
}

/** The bytes of a google.protobuf.Struct holding `args`. */
function structOf(args: JsonObject): number[] {
  const bytes = toBinary(ToolCallContextSchema, create(ToolCallContextSchema, { args }));
  // The context holds only field 5: its tag (one byte), its length, then the Struct.
  let at = 1;
  while ((bytes[at] as number) & 0x80) at++;
  return Array.from(bytes.subarray(at + 1));
}

/** A DecideToolCall request whose context is CONTEXT's fields followed by `extra`. */
function request(extra: number[]): Uint8Array {
  const context = [
    ...toBinary(ToolCallContextSchema, create(ToolCallContextSchema, CONTEXT)),
    ...extra,
  ];
  return Uint8Array.from(field(1, field(1, context)));
}

const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true }),
    fc.string({ unit: 'grapheme' }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string(), tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('handDecoderOf', () => {
  it('decodes only the two decision requests by hand', () => {
    expect(handDecoderOf(DecideToolCallRequestSchema)).toBeTypeOf('function');
    expect(handDecoderOf(DecideToolResultRequestSchema)).toBeTypeOf('function');
    expect(handDecoderOf(DispatchRequestSchema)).toBe(undefined);
  });

  it('defers large arguments and reads them as fromBinary does', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), json, { maxKeys: 6 }),
        fc.integer({ min: DEFER_ARGS_MIN_BYTES, max: 3 * DEFER_ARGS_MIN_BYTES }),
        (extra, size) => {
          const args: JsonObject = { path: '/tmp/a.ts', content: content(size), extra };
          const bytes = callBytes(args);
          const decoded = decodeCall(bytes);
          const context = decoded.event?.context as object;
          expect(argsDeferred(context)).toBe(true);
          // Everything but the arguments reads without them.
          expect(decoded.operationChain).toEqual(['op-0', 'op-1']);
          expect(decoded.event?.context?.toolCallId).toBe('call-1');
          expect(decoded.event?.context?.sessionId).toBe('session-1');
          expect(argsDeferred(context)).toBe(true);
          expect(
            equals(
              DecideToolCallRequestSchema,
              decoded,
              fromBinary(DecideToolCallRequestSchema, bytes),
            ),
          ).toBe(true);
          expect(argsDeferred(context)).toBe(false);
          expect(decoded.event?.context?.args).toEqual(
            fromBinary(DecideToolCallRequestSchema, bytes).event?.context?.args,
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('decodes small arguments with the request', () => {
    const decoded = decodeCall(callBytes({ content: content(DEFER_ARGS_MIN_BYTES / 2) }));
    expect(argsDeferred(decoded.event?.context as object)).toBe(false);
  });

  it('defers the arguments of a tool result decision too, and keeps its result', () => {
    const request = create(DecideToolResultRequestSchema, {
      event: {
        context: { ...CONTEXT, args: { content: content(2 * DEFER_ARGS_MIN_BYTES) } },
        result: { content: 'written', success: true },
      },
    });
    const bytes = toBinary(DecideToolResultRequestSchema, request);
    const decoded = decodeResult(bytes);
    expect(argsDeferred(decoded.event?.context as object)).toBe(true);
    expect(decoded.event?.result?.content).toBe('written');
    expect(equals(DecideToolResultRequestSchema, decoded, request)).toBe(true);
  });

  it('keeps a value written over deferred arguments', () => {
    const decoded = decodeCall(callBytes({ content: content(2 * DEFER_ARGS_MIN_BYTES) }));
    const context = decoded.event?.context;
    if (context === undefined) throw new Error('no context');
    context.args = { replaced: true };
    expect(argsDeferred(context)).toBe(false);
    expect(context.args).toEqual({ replaced: true });
    expect({ ...context }.args).toEqual({ replaced: true });
  });

  it('answers a malformed request as fromBinary does, wherever the bytes are changed', () => {
    const args: JsonObject = {
      content: content(DEFER_ARGS_MIN_BYTES + 10),
      nested: { list: [1, 'two', null, true, { deep: [[]] }] },
      number: 1.5,
    };
    const bytes = callBytes(args);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(bytes.length - 1), fc.nat(255)), { minLength: 1, maxLength: 3 }),
        fc.nat(16),
        (edits, cut) => {
          const changed = Uint8Array.from(bytes.subarray(0, bytes.length - cut));
          for (const [at, value] of edits) if (at < changed.length) changed[at] = value;
          expectSame(DecideToolCallRequestSchema, decodeCall, changed);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('changes only the structure bytes, where a mistake would read as other fields', () => {
    const bytes = callBytes({ content: content(DEFER_ARGS_MIN_BYTES + 10), a: { b: [1, 'x'] } });
    // Every byte outside the long string: tags and lengths of every level.
    const text = Buffer.from(bytes).indexOf('const');
    const structure = [...Array(bytes.length).keys()].filter(
      (i) => i < text || i >= text + DEFER_ARGS_MIN_BYTES,
    );
    for (const at of structure) {
      for (const value of [0x00, 0x01, 0x08, 0x0a, 0x12, 0x2a, 0x7f, 0x80, 0xff]) {
        const changed = Uint8Array.from(bytes);
        changed[at] = value;
        expectSame(DecideToolCallRequestSchema, decodeCall, changed);
      }
    }
  });

  it('refuses invalid UTF-8 in a deferred string, as fromBinary does', () => {
    const bytes = callBytes({ content: content(DEFER_ARGS_MIN_BYTES + 10) });
    const at = Buffer.from(bytes).indexOf('const') + 100;
    const changed = Uint8Array.from(bytes);
    changed[at] = 0xc3;
    changed[at + 1] = 0x28;
    expect(() => fromBinary(DecideToolCallRequestSchema, changed)).toThrow();
    expect(() => decodeCall(changed)).toThrow();
  });

  it('answers hand-made framings as fromBinary does: long tags, known fields of another wire type, groups', () => {
    const big = content(DEFER_ARGS_MIN_BYTES + 100);
    // A tag of six bytes (field 2, varint) inside the arguments: protobuf-es refuses it.
    const longTag = [0x90, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01];
    expectSame(
      DecideToolCallRequestSchema,
      decodeCall,
      request(field(ARGS, [...structOf({ k: big }), ...longTag])),
    );
    // call_index (an int32) sent length-delimited, holding a second arguments field:
    // protobuf-es reads call_index as a varint and then the hidden arguments, and merges them.
    const hidden = field(ARGS, structOf({ path: '/etc/passwd' }));
    expectSame(
      DecideToolCallRequestSchema,
      decodeCall,
      request([...field(ARGS, structOf({ k: big })), ...field(CALL_INDEX, hidden)]),
    );
    // call_index length-delimited over the start of the arguments: protobuf-es reads a
    // tool call id out of the arguments' bytes, which are not UTF-8, and refuses it.
    expectSame(
      DecideToolCallRequestSchema,
      decodeCall,
      request([0x32, 0x02, 0x0a, 0x05, ...field(ARGS, structOf({ k: big }))]),
    );
    // A group (field 3) inside the arguments: protobuf-es skips it as an unknown field.
    const group = [0x1b, 0x08, 0x01, 0x1c];
    expectSame(
      DecideToolCallRequestSchema,
      decodeCall,
      request(field(ARGS, [...structOf({ k: big }), ...group])),
    );
  });

  it('leaves repeated fields and deep nesting to fromBinary', () => {
    const big = content(DEFER_ARGS_MIN_BYTES + 10);
    const once = callBytes({ content: big });
    // The event twice: protobuf-es merges the two.
    const twice = Buffer.concat([once, callBytes({ other: big }, [])]);
    const decoded = decodeCall(twice);
    expect(argsDeferred(decoded.event?.context as object)).toBe(false);
    expectSame(DecideToolCallRequestSchema, decodeCall, twice);
    // Nesting deeper than protobuf-es's recursion limit still throws.
    let deep: JsonValue = big;
    for (let i = 0; i < 60; i++) deep = { d: deep };
    expectSame(DecideToolCallRequestSchema, decodeCall, callBytes({ deep } as JsonObject));
    let deeper: JsonValue = big;
    for (let i = 0; i < 30; i++) deeper = [deeper];
    expectSame(DecideToolCallRequestSchema, decodeCall, callBytes({ deeper } as JsonObject));
  });
});
