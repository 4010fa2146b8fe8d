/**
 * @module Control webhook contract tests (upstream contract §3): the pure
 * response parser, then `executeControl` against raw-socket receivers on
 * 127.0.0.1 whose HTTP/1.1 bytes, framing, resets and timing the test chooses.
 */

import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import {
  Delivery,
  ResponseHandling,
  type Webhook,
  WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  type ControlResult,
  type ControlSender,
  executeControl,
  type ParsedControlResponse,
  parseControlResponse,
  RESPONSE_MAX_BYTES,
} from '../../src/delivery/control.js';
import {
  deliveryFailure,
  type WebhookResponse,
  WebhookSender,
} from '../../src/delivery/webhook.js';
import { WEBHOOK_RULE_REASON } from '../../src/delivery/webhook-rules.js';
import { type RawBehaviour, type RawReceiver, startRawReceiver } from '../support/raw-receiver.js';
import { refusedUrl } from '../support/receiver.js';

const PAYLOAD: JsonObject = { hookId: 'policy', hookType: 'beforeToolCall', toolCallId: 'c1' };

/** A secret resolved into a header; it must never appear in a result. */
const SECRET = 's3cret-token';

/** Text in response bodies that must never appear in a result. */
const BODY_MARKER = 'body-marker-7f3a';

/** Timeout in seconds of the stalled-body case. */
const SHORT_TIMEOUT_SECONDS = 0.3;

/** Timeout in seconds of cases that must finish well before it. */
const LONG_TIMEOUT_SECONDS = 10;

/** Size of each chunk of an endless chunked body. */
const ENDLESS_CHUNK_BYTES = 16_384;

/** Size of each chunk of a finite chunked body. */
const CHUNK_BYTES = 10_000;

const ALLOW = '{"decision":"allow"}';

const DURATION = expect.any(Number) as unknown as number;

// Raw answers ----------------------------------------------------------------

/** Bytes of a response head: status line, headers and the blank line. */
function head(status: string, headers: readonly string[] = []): Buffer {
  return Buffer.from(`HTTP/1.1 ${status}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`);
}

/** Bytes of one chunk of a chunked body. */
function chunk(data: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
}

/** Answers with a Content-Length framed body. */
function withLength(status: string, body: string | Buffer = ''): RawBehaviour {
  const bytes = Buffer.from(body);
  return (socket) =>
    socket.write(
      Buffer.concat([
        head(status, ['Content-Type: application/json', `Content-Length: ${bytes.length}`]),
        bytes,
      ]),
    );
}

/** Answers 200 with `body` sent as `coding` says (Content-Length framed). */
function encoded(coding: string, body: Buffer): RawBehaviour {
  return (socket) =>
    socket.write(
      Buffer.concat([
        head('200 OK', [
          'Content-Type: application/json',
          `Content-Encoding: ${coding}`,
          `Content-Length: ${body.length}`,
        ]),
        body,
      ]),
    );
}

/** Answers 200 with a chunked body cut into {@link CHUNK_BYTES} chunks. */
function chunked(body: string | Buffer): RawBehaviour {
  const bytes = Buffer.from(body);
  const parts: Buffer[] = [head('200 OK', ['Transfer-Encoding: chunked'])];
  for (let at = 0; at < bytes.length; at += CHUNK_BYTES) {
    parts.push(chunk(bytes.subarray(at, at + CHUNK_BYTES)));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return (socket) => socket.write(Buffer.concat(parts));
}

/** Answers 200 with a chunked body that never ends, written as fast as the client reads. */
const endless: RawBehaviour = (socket) => {
  socket.write(head('200 OK', ['Transfer-Encoding: chunked']));
  const data = chunk(Buffer.concat([Buffer.from(ALLOW), Buffer.alloc(ENDLESS_CHUNK_BYTES, ' ')]));
  const pump = (): void => {
    while (!socket.destroyed) {
      if (!socket.write(data)) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  pump();
};

/** Sends the head and part of a 100-byte body, then nothing: the body stalls. */
const stallBody: RawBehaviour = (socket) => {
  socket.write(
    Buffer.concat([head('200 OK', ['Content-Length: 100']), Buffer.from('{"decision"')]),
  );
};

/** Sends the head and part of a 100-byte body, then closes the socket. */
const resetMidBody: RawBehaviour = (socket) => {
  socket.write(
    Buffer.concat([head('200 OK', ['Content-Length: 100']), Buffer.from('{"decision"')]),
    () => socket.destroy(),
  );
};

/** Never answers; the socket stays open until the client gives up. */
const neverRespond: RawBehaviour = () => undefined;

/** `text` padded with trailing spaces to exactly `bytes` bytes. */
function padded(text: string, bytes: number): string {
  return text + ' '.repeat(bytes - Buffer.byteLength(text));
}

// Fixtures -------------------------------------------------------------------

let receivers: RawReceiver[] = [];
let senders: WebhookSender[] = [];

afterEach(async () => {
  await Promise.all(senders.map((s) => s.close()));
  await Promise.all(receivers.map((r) => r.close()));
  senders = [];
  receivers = [];
});

async function receiver(respond: RawBehaviour): Promise<RawReceiver> {
  const r = await startRawReceiver(respond);
  receivers.push(r);
  return r;
}

function sender(): WebhookSender {
  const s = new WebhookSender({ env: () => ({ HOOK_TOKEN: SECRET }) });
  senders.push(s);
  return s;
}

/** A control webhook whose authorization header holds {@link SECRET}. */
function control(url: string, init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
  return create(WebhookSchema, {
    responseHandling: ResponseHandling.TOOL_CALL,
    headers: { Authorization: 'Bearer ${HOOK_TOKEN}' },
    allowedEnvVars: ['HOOK_TOKEN'],
    ...init,
    url,
  });
}

/** Checks what every result must hold: a duration, and no secret or response text. */
function expectClean(result: ControlResult): void {
  expect(result.durationMs).toBeGreaterThanOrEqual(0);
  const serialized = JSON.stringify(result);
  expect(serialized).not.toContain(SECRET);
  expect(serialized).not.toContain(BODY_MARKER);
}

function success(decision: object, httpStatus = 200): ControlResult {
  return { status: 'success', decision, httpStatus, durationMs: DURATION } as ControlResult;
}

function ignored(httpStatus = 200): ControlResult {
  return { status: 'ignored', httpStatus, durationMs: DURATION };
}

function failed(code: string, diagnostic: string | undefined, httpStatus?: number): ControlResult {
  const message = `Hook HTTP request failed: ${code}${diagnostic === undefined ? '' : `: ${diagnostic}`}`;
  return {
    status: 'error',
    code,
    message,
    ...(httpStatus === undefined ? {} : { httpStatus }),
    durationMs: DURATION,
  } as ControlResult;
}

// Parser ---------------------------------------------------------------------

describe('parseControlResponse', () => {
  const IGNORED: ParsedControlResponse = { status: 'ignored' };
  const INVALID: ParsedControlResponse = { status: 'error', code: 'invalid_response' };
  const TOO_LARGE: ParsedControlResponse = { status: 'error', code: 'response_too_large' };
  const allow: ParsedControlResponse = { status: 'success', decision: { decision: 'allow' } };
  const deny = (reason?: string): ParsedControlResponse => ({
    status: 'success',
    decision: reason === undefined ? { decision: 'deny' } : { decision: 'deny', reason },
  });

  const cases: readonly (readonly [string, string, ParsedControlResponse])[] = [
    ['allow', ALLOW, allow],
    ['deny with a reason', '{"decision":"deny","reason":"禁止执行该操作"}', deny('禁止执行该操作')],
    ['deny with an empty reason, kept empty', '{"decision":"deny","reason":""}', deny('')],
    ['deny without a reason', '{"decision":"deny"}', deny()],
    [
      'deny, dropping requestId, updatedInput, additionalContext and hookSpecificOutput',
      '{"decision":"deny","reason":"r","requestId":"q1","updatedInput":{"a":1},' +
        '"additionalContext":"c","hookSpecificOutput":{"permissionDecision":"allow"}}',
      deny('r'),
    ],
    ['allow, dropping its reason', '{"decision":"allow","reason":3}', allow],
    ['allow with surrounding whitespace', `\n ${ALLOW} \t`, allow],
    ['an empty body', '', IGNORED],
    ['a blank body', ' ', IGNORED],
    ['an unclosed object', '{', IGNORED],
    ['a truncated decision', '{"decision":', IGNORED],
    ['plain text', 'ok', IGNORED],
    ['null', 'null', IGNORED],
    ['an empty array', '[]', IGNORED],
    ['true', 'true', IGNORED],
    ['a number', '42', IGNORED],
    ['a string', '"x"', IGNORED],
    ['an array holding a decision', '[{"decision":"deny"}]', IGNORED],
    ['an empty object', '{}', IGNORED],
    ['a reason without a decision', '{"reason":"x"}', IGNORED],
    [
      'only the old nested hookSpecificOutput',
      '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"}}',
      IGNORED,
    ],
    ['a decision only under __proto__', '{"__proto__":{"decision":"deny"}}', IGNORED],
    ['a reason only under __proto__', '{"decision":"deny","__proto__":{"reason":"x"}}', deny()],
    ['decision block', '{"decision":"block"}', INVALID],
    ['decision ask', '{"decision":"ask"}', INVALID],
    ['decision defer', '{"decision":"defer"}', INVALID],
    ['decision null', '{"decision":null}', INVALID],
    ['decision 1', '{"decision":1}', INVALID],
    ['decision in upper case', '{"decision":"ALLOW"}', INVALID],
    ['a nested decision object', '{"decision":{"decision":"allow"}}', INVALID],
    ['a numeric reason', '{"decision":"deny","reason":3}', INVALID],
    ['a null reason', '{"decision":"deny","reason":null}', INVALID],
    ['exactly 65,536 bytes', padded(ALLOW, RESPONSE_MAX_BYTES), allow],
    ['65,537 bytes', padded(ALLOW, RESPONSE_MAX_BYTES + 1), TOO_LARGE],
    ['65,537 bytes of plain text', 'x'.repeat(RESPONSE_MAX_BYTES + 1), TOO_LARGE],
    [
      'fewer than 65,536 characters but more bytes',
      `{"decision":"deny","reason":"${'é'.repeat(RESPONSE_MAX_BYTES / 2)}"}`,
      TOO_LARGE,
    ],
  ];

  it.each(cases)('parses %s', (_name, text, expected) => {
    expect(parseControlResponse(text)).toStrictEqual(expected);
  });
});

// HTTP -----------------------------------------------------------------------

describe('executeControl against a raw HTTP/1.1 receiver', () => {
  interface Case {
    readonly name: string;
    readonly respond: RawBehaviour;
    readonly expected: ControlResult;
    /** Webhook timeout in seconds; default {@link LONG_TIMEOUT_SECONDS}. */
    readonly timeout?: number;
    /** The receiver must see the connection closed (the client stopped reading). */
    readonly closesSocket?: boolean;
  }

  const json = (text: string | Buffer): RawBehaviour => withLength('200 OK', text);
  const cases: readonly Case[] = [
    { name: 'allow', respond: json(ALLOW), expected: success({ decision: 'allow' }) },
    {
      name: 'allow with 201',
      respond: withLength('201 Created', ALLOW),
      expected: success({ decision: 'allow' }, 201),
    },
    {
      name: 'deny with a reason',
      respond: json('{"decision":"deny","reason":"禁止执行该操作"}'),
      expected: success({ decision: 'deny', reason: '禁止执行该操作' }),
    },
    {
      name: 'deny with an empty reason',
      respond: json('{"decision":"deny","reason":""}'),
      expected: success({ decision: 'deny', reason: '' }),
    },
    {
      name: 'deny without a reason',
      respond: json('{"decision":"deny"}'),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'deny with extra fields, discarded',
      respond: json(
        `{"decision":"deny","reason":"r","requestId":"${BODY_MARKER}","updatedInput":{"x":1},` +
          `"additionalContext":"${BODY_MARKER}","hookSpecificOutput":{"permissionDecision":"allow"}}`,
      ),
      expected: success({ decision: 'deny', reason: 'r' }),
    },
    {
      name: '204, as an empty body',
      respond: (socket) => socket.write(head('204 No Content')),
      expected: ignored(204),
    },
    { name: '200 with an empty body', respond: json(''), expected: ignored() },
    { name: 'invalid JSON', respond: json(`${BODY_MARKER} {`), expected: ignored() },
    { name: 'an array', respond: json('[{"decision":"deny"}]'), expected: ignored() },
    { name: 'null', respond: json('null'), expected: ignored() },
    {
      name: 'only hookSpecificOutput',
      respond: json('{"hookSpecificOutput":{"permissionDecision":"deny"}}'),
      expected: ignored(),
    },
    {
      name: 'an invalid decision value',
      respond: json(`{"decision":"block","reason":"${BODY_MARKER}"}`),
      expected: failed('invalid_response', 'invalid decision', 200),
    },
    {
      name: 'a numeric reason',
      respond: json('{"decision":"deny","reason":3}'),
      expected: failed('invalid_response', 'invalid decision', 200),
    },
    {
      name: '500, without reading its body',
      respond: withLength('500 Internal Server Error', `{"decision":"allow","x":"${BODY_MARKER}"}`),
      expected: failed('http_error', 'HTTP 500', 500),
    },
    {
      name: 'a body of exactly 65,536 bytes',
      respond: json(padded(ALLOW, RESPONSE_MAX_BYTES)),
      expected: success({ decision: 'allow' }),
    },
    {
      name: 'a chunked body of exactly 65,536 bytes',
      respond: chunked(padded(ALLOW, RESPONSE_MAX_BYTES)),
      expected: success({ decision: 'allow' }),
    },
    {
      name: 'a body of 65,537 bytes',
      respond: json(padded(ALLOW, RESPONSE_MAX_BYTES + 1)),
      expected: failed('response_too_large', `over ${RESPONSE_MAX_BYTES} bytes`, 200),
    },
    {
      name: 'a chunked body of 65,537 bytes',
      respond: chunked(padded(ALLOW, RESPONSE_MAX_BYTES + 1)),
      expected: failed('response_too_large', `over ${RESPONSE_MAX_BYTES} bytes`, 200),
    },
    {
      name: 'an endless chunked body, without reading it to its end',
      respond: endless,
      expected: failed('response_too_large', `over ${RESPONSE_MAX_BYTES} bytes`, 200),
      closesSocket: true,
    },
    {
      name: 'invalid UTF-8',
      respond: json(
        Buffer.concat([
          Buffer.from(`{"decision":"deny","reason":"${BODY_MARKER}`),
          Buffer.from([0xc3, 0x28, 0xff]),
          Buffer.from('"}'),
        ]),
      ),
      expected: failed('invalid_response', 'body is not valid UTF-8', 200),
    },
    {
      name: 'a gzip-encoded deny, decoded as fetch decodes it',
      respond: encoded('gzip', gzipSync('{"decision":"deny","reason":"zipped"}')),
      expected: success({ decision: 'deny', reason: 'zipped' }),
    },
    {
      name: 'an x-gzip-encoded deny',
      respond: encoded('x-gzip', gzipSync('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'a deflate-encoded deny',
      respond: encoded('deflate', deflateSync('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'a br-encoded deny',
      respond: encoded('br', brotliCompressSync('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'a deny encoded twice (deflate, then gzip)',
      respond: encoded('deflate, gzip', gzipSync(deflateSync('{"decision":"deny"}'))),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'an identity-encoded deny',
      respond: encoded('identity', Buffer.from('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'a raw-deflate deny (deflate without its zlib wrapper), as fetch reads it',
      respond: encoded('deflate', deflateRawSync('{"decision":"deny","reason":"raw"}')),
      expected: success({ decision: 'deny', reason: 'raw' }),
    },
    {
      name: 'five stacked codings, the most fetch takes',
      respond: encoded(
        'gzip, gzip, gzip, gzip, gzip',
        gzipSync(gzipSync(gzipSync(gzipSync(gzipSync('{"decision":"deny"}'))))),
      ),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'six stacked codings, which fetch refuses',
      respond: encoded(
        'gzip, gzip, gzip, gzip, gzip, gzip',
        gzipSync(gzipSync(gzipSync(gzipSync(gzipSync(gzipSync('{"decision":"deny"}')))))),
      ),
      expected: failed('invalid_response', 'more than 5 content-encodings', 200),
    },
    {
      name: 'codings with identity among them, which fetch reads as they came',
      respond: encoded('identity, gzip', Buffer.from('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'an empty br body, empty as fetch reads it',
      respond: encoded('br', Buffer.alloc(0)),
      expected: ignored(),
    },
    {
      name: 'a deny in a coding fetch does not know, read as it came',
      respond: encoded('zstd', Buffer.from('{"decision":"deny"}')),
      expected: success({ decision: 'deny' }),
    },
    {
      name: 'a gzip body of exactly 65,536 bytes decoded',
      respond: encoded('gzip', gzipSync(padded(ALLOW, RESPONSE_MAX_BYTES))),
      expected: success({ decision: 'allow' }),
    },
    {
      name: 'a gzip body of 65,537 bytes decoded, small on the wire',
      respond: encoded('gzip', gzipSync(padded(ALLOW, RESPONSE_MAX_BYTES + 1))),
      expected: failed('response_too_large', `over ${RESPONSE_MAX_BYTES} bytes`, 200),
    },
    {
      name: 'a gzip bomb (64 MiB from about 64 KiB), stopped at the cap',
      respond: encoded('gzip', gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20))),
      expected: failed('response_too_large', `over ${RESPONSE_MAX_BYTES} bytes`, 200),
    },
    {
      name: 'a body that does not decode as its gzip coding says',
      respond: encoded('gzip', Buffer.from('{"decision":"deny"}')),
      expected: failed(
        'invalid_response',
        'body does not decode as its content-encoding says',
        200,
      ),
    },
    {
      name: 'a body stalled past the timeout after timely headers',
      respond: stallBody,
      timeout: SHORT_TIMEOUT_SECONDS,
      expected: failed('timeout', `after ${SHORT_TIMEOUT_SECONDS * 1000} ms`, 200),
      closesSocket: true,
    },
    {
      name: 'a socket reset mid-body',
      respond: resetMidBody,
      expected: failed('network_error', 'UND_ERR_SOCKET', 200),
    },
  ];

  it.each(cases)('answers $name', async ({ respond, expected, timeout, closesSocket }) => {
    const r = await receiver(respond);
    const result = await executeControl(
      sender(),
      control(`${r.url}/policy`, { timeout: timeout ?? LONG_TIMEOUT_SECONDS }),
      PAYLOAD,
    );
    expect(result).toStrictEqual(expected);
    expectClean(result);
    expect(r.requests).toHaveLength(1);
    const [request] = r.requests;
    expect(request?.head).toMatch(/^POST \/policy HTTP\/1\.1\r\n/);
    expect(JSON.parse(request?.body.toString('utf8') ?? '')).toEqual(PAYLOAD);
    if (closesSocket === true) await request?.socketClosed;
  });

  it('does not follow a 302: http_error, and the Location target gets no request', async () => {
    const target = await receiver(withLength('200 OK', ALLOW));
    const r = await receiver(
      (socket) =>
        void socket.write(head('302 Found', [`Location: ${target.url}/x`, 'Content-Length: 0'])),
    );
    const result = await executeControl(sender(), control(r.url), PAYLOAD);
    expect(result).toStrictEqual(failed('http_error', 'HTTP 302', 302));
    expect(r.requests).toHaveLength(1);
    expect(target.connections()).toBe(0);
  });

  it('reports a closed port as network_error', async () => {
    const result = await executeControl(sender(), control(await refusedUrl()), PAYLOAD);
    expect(result).toStrictEqual(failed('network_error', 'ECONNREFUSED'));
  });

  it('is cancelled when the caller aborts while the receiver never answers, and closes the socket', async () => {
    const r = await receiver(neverRespond);
    const controller = new AbortController();
    const pending = executeControl(sender(), control(r.url), PAYLOAD, controller.signal);
    await r.waitForRequests(1);
    controller.abort();
    expect(await pending).toStrictEqual({ status: 'cancelled', durationMs: DURATION });
    await r.requests[0]?.socketClosed;
  });

  it('is cancelled when the caller aborts mid-body, and closes the socket', async () => {
    const controller = new AbortController();
    const r = await receiver((socket, request) => {
      stallBody(socket, request);
      controller.abort();
    });
    const result = await executeControl(sender(), control(r.url), PAYLOAD, controller.signal);
    expect(result).toStrictEqual({ status: 'cancelled', durationMs: DURATION });
    await r.requests[0]?.socketClosed;
  });

  it('is cancelled without a request when the signal is already aborted', async () => {
    const r = await receiver(withLength('200 OK', ALLOW));
    const result = await executeControl(sender(), control(r.url), PAYLOAD, AbortSignal.abort());
    expect(result).toStrictEqual({ status: 'cancelled', durationMs: DURATION });
    expect(r.connections()).toBe(0);
  });

  interface ConfigurationCase {
    readonly name: string;
    readonly init: MessageInitShape<typeof WebhookSchema>;
    readonly diagnostic: string;
    /** The webhook rule that refuses it, when one does. */
    readonly rule?: string;
  }

  it.each<ConfigurationCase>([
    {
      name: 'a forbidden header',
      init: { headers: { Host: 'x' } },
      diagnostic: 'forbidden header host',
      rule: WEBHOOK_RULE_REASON.FORBIDDEN_HEADER,
    },
    {
      name: 'an unresolved header template',
      init: { headers: { Authorization: 'Bearer ${OTHER}' } },
      diagnostic: 'header authorization has an unresolved template',
      rule: WEBHOOK_RULE_REASON.INVALID_HEADER_TEMPLATE,
    },
    {
      name: 'a notification webhook',
      init: { responseHandling: ResponseHandling.IGNORE },
      diagnostic: 'not a toolCall webhook',
    },
    {
      name: 'QStash delivery',
      init: { delivery: Delivery.QSTASH },
      diagnostic: 'control cannot use qstash',
      rule: WEBHOOK_RULE_REASON.CONTROL_REQUIRES_FETCH,
    },
  ])('fails with configuration and sends nothing for $name', async ({ init, diagnostic, rule }) => {
    const r = await receiver(withLength('200 OK', ALLOW));
    const result = await executeControl(sender(), control(r.url, init), PAYLOAD);
    expect(result).toStrictEqual({
      ...failed('configuration', diagnostic),
      ...(rule === undefined ? {} : { rule }),
    });
    expectClean(result);
    expect(r.connections()).toBe(0);
  });
});

describe('executeControl after an abort', () => {
  /** A sender whose `post` is given; the body needs only what `executeControl` reads. */
  function stub(post: ControlSender['post']): ControlSender {
    return { post };
  }

  it('discards an allow whose body finished arriving after the abort', async () => {
    const controller = new AbortController();
    const body = Readable.from([Buffer.from(ALLOW)]);
    body.once('end', () => controller.abort());
    const startedAt = performance.now();
    const response: WebhookResponse = {
      ok: true,
      status: 200,
      headers: {},
      body: body as unknown as WebhookResponse['body'],
      startedAt,
      failure: () => deliveryFailure('network_error', startedAt),
    };
    const result = await executeControl(
      stub(async () => response),
      control('http://127.0.0.1:1'),
      PAYLOAD,
      controller.signal,
    );
    expect(result).toStrictEqual({ status: 'cancelled', durationMs: DURATION });
  });

  it('reports an error that arrives after the abort as cancelled', async () => {
    const controller = new AbortController();
    const result = await executeControl(
      stub(async () => {
        controller.abort();
        return deliveryFailure('http_error', performance.now(), 'HTTP 500', 500);
      }),
      control('http://127.0.0.1:1'),
      PAYLOAD,
      controller.signal,
    );
    expect(result).toStrictEqual({ status: 'cancelled', durationMs: DURATION });
  });
});
