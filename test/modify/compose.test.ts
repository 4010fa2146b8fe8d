/**
 * The composition rules of the modifying points (`hookbus-hooks.md`, and
 * the modifying-hooks issue): chaining, no-change results, the chain
 * enders, sticky `terminate`, key-by-key patches, concatenated messages,
 * observe-only, and results of the wrong shape applied not at all.
 */
import { describe, expect, it } from 'vitest';
import {
  Composition,
  ContextShapeError,
  MODIFY_POINTS,
  MODIFY_RESULT_MAX_BYTES,
  type ModifyPoint,
  POINT_RULES,
  ResultShapeError,
  ResultTooLargeError,
} from '../../src/modify/compose.js';

/** Runs `results` through a composition in order, as far as the chain goes; returns what each hook saw. */
function run(point: ModifyPoint, context: unknown, results: (unknown | undefined)[]) {
  const c = new Composition(point, JSON.stringify(context));
  const seen: unknown[] = [];
  for (const r of results) {
    if (c.ended) break;
    seen.push(JSON.parse(c.context()));
    c.apply(r === undefined ? undefined : typeof r === 'string' ? r : JSON.stringify(r));
  }
  return { seen, result: JSON.parse(c.result()) as Record<string, unknown>, ended: c.ended };
}

const msg = (text: string) => ({ role: 'user', content: text });

/** An afterToolCall context with `changes` merged in. */
const ctxOf = (changes: Record<string, unknown>) =>
  JSON.stringify({
    toolCall: { id: 'c1', name: 'search' },
    args: {},
    result: 'r',
    isError: false,
    iteration: 0,
    ...changes,
  });

describe('Composition', () => {
  it('has a rule for each of the twelve points', () => {
    expect(MODIFY_POINTS).toHaveLength(12);
    expect(Object.keys(POINT_RULES).sort()).toEqual([...MODIFY_POINTS].sort());
  });

  it('chains replacing values: each hook sees what the hooks before it left, the last wins', () => {
    const { seen, result } = run(
      'beforeAgentStart',
      { prompt: 'p', systemPrompt: 's0', messages: [] },
      [{ systemPrompt: 's1' }, { messages: [msg('a')] }, { systemPrompt: 's3' }],
    );
    expect(seen).toEqual([
      { prompt: 'p', systemPrompt: 's0', messages: [] },
      { prompt: 'p', systemPrompt: 's1', messages: [] },
      { prompt: 'p', systemPrompt: 's1', messages: [msg('a')] },
    ]);
    expect(result).toEqual({ messages: [msg('a')], systemPrompt: 's3' });
  });

  it('reads {}, no result and JSON whitespace as no change, and ignores unknown and null members', () => {
    const { seen, result } = run('transformContext', { messages: [msg('x')], iteration: 2 }, [
      {},
      undefined,
      ' \r\n\t',
      { messages: null, extra: 1 },
    ]);
    for (const s of seen) expect(s).toEqual({ messages: [msg('x')], iteration: 2 });
    expect(result).toEqual({});
  });

  it('ends beforeToolCall at content or isError: true, but not at isError: false alone', () => {
    const ctx = { toolCall: { name: 'search' }, args: { q: 'a' }, iteration: 0 };
    const rewrite = run('beforeToolCall', ctx, [{ args: { q: 'b' } }, { isError: false }, {}]);
    expect(rewrite.ended).toBe(false);
    expect(rewrite.seen).toHaveLength(3);
    expect(rewrite.seen[1]).toEqual({ ...ctx, args: { q: 'b' } });
    expect(rewrite.result).toEqual({ args: { q: 'b' }, isError: false });

    const content = run('beforeToolCall', ctx, [{ content: 'cached' }, { args: { q: 'never' } }]);
    expect(content).toMatchObject({ ended: true, result: { content: 'cached' } });
    expect(content.seen).toHaveLength(1);

    const error = run('beforeToolCall', ctx, [{ isError: true }, { content: 'never' }]);
    expect(error).toMatchObject({ ended: true, result: { isError: true } });
  });

  it("chains afterToolCall content into the next hook's result, and keeps terminate: true", () => {
    const { seen, result } = run(
      'afterToolCall',
      { toolCall: { name: 't' }, args: {}, result: 'raw', isError: false, iteration: 1 },
      [{ terminate: true }, { content: 'redacted', isError: true, terminate: false }, {}],
    );
    expect(seen[2]).toMatchObject({ result: 'redacted', isError: true });
    expect(result).toEqual({ content: 'redacted', isError: true, terminate: true });
  });

  it('ends shouldStopAfterTurn at stop: true and beforeCompact at cancel: true or a summary', () => {
    const turn = { messages: [], iteration: 1, hadToolCalls: false };
    expect(run('shouldStopAfterTurn', turn, [{ stop: false }, { stop: true }, {}])).toMatchObject({
      ended: true,
      result: { stop: true },
    });
    const compact = { messages: [], tokensBefore: 100, reason: 'auto' };
    expect(run('beforeCompact', compact, [{ cancel: false }, {}])).toMatchObject({
      ended: false,
      result: { cancel: false },
    });
    expect(run('beforeCompact', compact, [{ cancel: true }, {}]).ended).toBe(true);
    expect(run('beforeCompact', compact, [{ summary: 'short' }, { cancel: true }])).toMatchObject({
      ended: true,
      result: { summary: 'short' },
    });
  });

  it('merges beforeProviderRequest headers and metadata key by key, keeping a null for the runtime to remove', () => {
    const ctx = { model: 'm', sessionId: 's', iteration: 0, streamOptions: {} };
    const { seen, result } = run('beforeProviderRequest', ctx, [
      { headers: { 'x-a': '1', 'x-b': '2' }, metadata: { tier: 'gold', n: 1 }, timeoutMs: 100 },
      { headers: { 'x-a': null, 'x-c': '3' }, metadata: { n: null }, timeoutMs: 250 },
      { maxRetries: 2, cacheRetention: 'long', transport: 'sse' },
    ]);
    for (const s of seen) expect(s).toEqual(ctx);
    expect(result).toEqual({
      headers: { 'x-a': null, 'x-b': '2', 'x-c': '3' },
      timeoutMs: 250,
      maxRetries: 2,
      cacheRetention: 'long',
      metadata: { tier: 'gold', n: null },
      transport: 'sse',
    });
  });

  it('gives every steering hook the same input and concatenates their messages in order', () => {
    for (const point of ['getSteeringMessages', 'getFollowUpMessages'] as const) {
      const ctx = { messages: [msg('history')], iteration: 3 };
      const { seen, result } = run(point, ctx, [
        { messages: [msg('a'), msg('b')] },
        {},
        { messages: [msg('c')] },
      ]);
      for (const s of seen) expect(s).toEqual(ctx);
      expect(result).toEqual({ messages: [msg('a'), msg('b'), msg('c')] });
      expect(run(point, ctx, [{}, undefined]).result).toEqual({});
    }
  });

  it('concatenates an answer of 300,000 steering messages without overflowing the stack', () => {
    // push(...elements) passed each element as an argument: ~150,000 overflowed the stack.
    const many = `{"messages":[${Array.from({ length: 300_000 }, (_, i) => i).join(',')}]}`;
    const c = new Composition('getSteeringMessages', '{"messages":[]}');
    c.apply(many);
    c.apply('{"messages":["last"]}');
    const { messages } = JSON.parse(c.result()) as { messages: unknown[] };
    expect(messages).toHaveLength(300_001);
    expect([messages[0], messages[299_999], messages[300_000]]).toEqual([0, 299_999, 'last']);
  });

  it('bounds the composed result to the byte, applying nothing of the result that passes it', () => {
    const cases: [ModifyPoint, unknown, unknown[]][] = [
      [
        'getSteeringMessages',
        { messages: [] },
        [{ messages: [msg('é'), 1] }, {}, { messages: [msg('ü€'), null] }],
      ],
      [
        'beforeProviderRequest',
        { model: 'm' },
        [
          { headers: { 'x-a': 'é', 'x-b': 'b' }, metadata: { n: 1 }, timeoutMs: 5 },
          { headers: { 'x-a': '€€', 'x-c': null }, metadata: { m: [1, 2] }, transport: 'sse' },
        ],
      ],
      [
        'beforeAgentStart',
        { messages: [], systemPrompt: '' },
        [{ messages: [] }, { systemPrompt: 'ü'.repeat(10) }, { messages: [msg('a')] }],
      ],
      [
        'afterToolCall',
        { toolCall: { name: 't' }, args: {}, result: 'r', isError: false },
        [
          { terminate: true, content: 'x' },
          { terminate: false, content: 'yé' },
        ],
      ],
    ];
    // Each case's result grows with each hook: its last size is its largest.
    for (const [point, context, results] of cases) {
      const texts = results.map((r) => JSON.stringify(r));
      const unbounded = new Composition(point, JSON.stringify(context));
      for (const t of texts) unbounded.apply(t);
      const bytes = Buffer.byteLength(unbounded.result());
      const exact = new Composition(point, JSON.stringify(context), bytes);
      for (const t of texts) exact.apply(t);
      expect(exact.result(), point).toBe(unbounded.result());
      const under = new Composition(point, JSON.stringify(context), bytes - 1);
      for (const t of texts.slice(0, -1)) under.apply(t);
      const before = under.result();
      expect(() => under.apply(texts.at(-1)), point).toThrow(ResultTooLargeError);
      expect(under.result(), point).toBe(before);
    }
    expect(MODIFY_RESULT_MAX_BYTES).toBe(16 * 1024 * 1024);
  });

  it('reads nothing of afterProviderResponse results', () => {
    const ctx = { model: 'm', content: 'hi', toolCallCount: 0, stopReason: 'stop', iteration: 0 };
    const { seen, result } = run('afterProviderResponse', ctx, [{ content: 'x' }, 'not json']);
    expect(seen).toEqual([ctx, ctx]);
    expect(result).toEqual({});
  });

  it('carries large integers and the exact text of opaque values through', () => {
    const c = new Composition('beforeProviderPayload', '{"model":"m","payload":{"seed":1}}');
    c.apply('{"payload":{"seed":12345678901234567890,"max_tokens":1e3}}');
    expect(c.context()).toBe(
      '{"model":"m","payload":{"seed":12345678901234567890,"max_tokens":1e3}}',
    );
    expect(c.result()).toBe('{"payload":{"seed":12345678901234567890,"max_tokens":1e3}}');
  });

  it('applies a result of the wrong shape not at all, naming the member', () => {
    const cases: [ModifyPoint, string, string, string][] = [
      [
        'transformContext',
        '{"messages":"x"}',
        'messages',
        'messages must be an array, got a string',
      ],
      [
        'beforeToolCall',
        '{"args":[1],"content":"c"}',
        'args',
        'args must be an object, got an array',
      ],
      ['afterToolCall', '{"terminate":"yes"}', 'terminate', 'terminate must be a boolean'],
      [
        'beforeProviderRequest',
        '{"timeoutMs":-1}',
        'timeoutMs',
        'timeoutMs must be a non-negative number, got -1',
      ],
      [
        'beforeProviderRequest',
        '{"maxRetries":1.5}',
        'maxRetries',
        'maxRetries must be a non-negative integer, got 1.5',
      ],
      [
        'beforeProviderRequest',
        '{"headers":{"x":1}}',
        'headers.x',
        'headers.x must be a string or null, got 1',
      ],
      [
        'getSteeringMessages',
        '{"messages":{}}',
        'messages',
        'messages must be an array, got an object',
      ],
      ['beforeCompact', '[]', '', 'the result is not a JSON object (expected a JSON object)'],
      [
        'beforeCompact',
        '{"summary":"s"',
        '',
        'the result is not a JSON object (invalid JSON at the end',
      ],
    ];
    for (const [point, result, member, message] of cases) {
      const c = new Composition(
        point,
        '{"messages":[],"args":{},"toolCall":{"name":"t"},"result":"r","isError":false}',
      );
      const before = { context: c.context(), result: c.result() };
      let error: unknown;
      try {
        c.apply(result);
      } catch (e: unknown) {
        error = e;
      }
      expect(error, result).toBeInstanceOf(ResultShapeError);
      expect((error as ResultShapeError).member).toBe(member);
      expect((error as ResultShapeError).message).toContain(message);
      expect({ context: c.context(), result: c.result() }).toEqual(before);
      expect(c.ended).toBe(false);
    }
  });

  it('keeps what the hooks before a wrong-shaped result composed', () => {
    const c = new Composition('beforeProviderRequest', '{"model":"m"}');
    c.apply('{"headers":{"x-a":"1"},"timeoutMs":5}');
    expect(() => c.apply('{"headers":{"x-b":"2"},"timeoutMs":"soon"}')).toThrow(ResultShapeError);
    expect(JSON.parse(c.result())).toEqual({ headers: { 'x-a': '1' }, timeoutMs: 5 });
  });

  it("writes a webhook's body as the context with the extra members after it, however the context arrived", () => {
    const extra = { operationId: '"op-1"', hookId: '"h1"' };
    const members = (text: string) => Object.entries(JSON.parse(text) as object);
    for (const text of [
      '{"messages":[{"role":"user","content":"a\\nb"}],"iteration":1}',
      ' \n{ "messages" : [ ] ,\t"iteration" : 12345678901234567890 }\r\n',
      // A repeated name: its last value, once.
      '{"messages":[],"iteration":1,"messages":[{"role":"user","content":"x"}]}',
      // A context member named as an extra one: the extra one replaces it, after the rest.
      '{"hookId":"mine","messages":[],"iteration":1}',
    ]) {
      const c = new Composition('transformContext', text);
      const body = c.contextWith(extra);
      const expected = new Map(members(text));
      for (const [name, value] of Object.entries(extra)) {
        expected.delete(name);
        expected.set(name, JSON.parse(value));
      }
      expect(JSON.parse(body), text).toEqual(Object.fromEntries(expected));
      expect(Object.keys(JSON.parse(body)).slice(-2), text).toEqual(Object.keys(extra));
      // Large integers stay as they arrived.
      if (text.includes('12345678901234567890')) expect(body).toContain('12345678901234567890');
    }
    // Once a hook changed the context, the body is written from the changed members.
    const c = new Composition('transformContext', '{"messages":[],"iteration":1}');
    c.apply('{"messages":[{"role":"user","content":"changed"}]}');
    expect(JSON.parse(c.contextWith(extra))).toEqual({
      messages: [{ role: 'user', content: 'changed' }],
      iteration: 1,
      operationId: 'op-1',
      hookId: 'h1',
    });
  });

  it('refuses a context that is not a JSON object or lacks what its point reads', () => {
    const cases: [ModifyPoint, string, string, string][] = [
      ['transformContext', '[]', '', 'the context is not a JSON object (expected a JSON object)'],
      ['transformContext', '{"messages":[]', '', 'the context is not a JSON object'],
      ['transformContext', '{"iteration":1}', 'messages', 'transformContext needs messages'],
      ['getSteeringMessages', '{"messages":{}}', 'messages', 'messages must be an array'],
      ['beforeToolCall', '{"args":{}}', 'toolCall', 'beforeToolCall needs toolCall'],
      ['beforeToolCall', '{"toolCall":{"name":"t"},"args":[]}', 'args', 'args must be an object'],
      ['afterToolCall', ctxOf({ toolCall: { id: 'c1' } }), 'toolCall.name', 'must be a string'],
      ['afterToolCall', ctxOf({ result: 5 }), 'result', 'result must be a string, got 5'],
      ['beforeProviderPayload', '{"model":"m"}', 'payload', 'needs payload'],
    ];
    for (const [point, context, member, message] of cases) {
      let error: unknown;
      try {
        new Composition(point, context);
      } catch (e: unknown) {
        error = e;
      }
      expect(error, context).toBeInstanceOf(ContextShapeError);
      expect((error as ContextShapeError).member).toBe(member);
      expect((error as ContextShapeError).message).toContain(message);
    }
    expect(new Composition('afterToolCall', ctxOf({})).toolName).toBe('search');
  });

  it('refuses a result after the chain ended', () => {
    const c = new Composition('shouldStopAfterTurn', '{"messages":[]}');
    c.apply('{"stop":true}');
    expect(() => c.apply('{}')).toThrow('already ended');
  });

  it('reads a body of whitespace JSON does not know as a result of the wrong shape', () => {
    const c = new Composition('transformContext', '{"messages":[]}');
    expect(() => c.apply('\u00a0')).toThrow(ResultShapeError);
  });
});
