/**
 * @module QStash delivery contract tests (upstream contract §4.2): the real
 * `@upstash/qstash` SDK against a fake QStash API on 127.0.0.1 that checks
 * each request against the documented publish API, and real receivers for
 * what QStash forwards and for the fetch fallback.
 */
import { inspect } from 'node:util';
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { getGlobalDispatcher } from 'undici';
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import {
  Delivery,
  Fallback,
  type Webhook,
  WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DEFAULT_QSTASH_URL,
  EncodedJson,
  WebhookSender,
  type WebhookSenderOptions,
} from '../../src/delivery/webhook.js';
import { createLogger, type Logger } from '../../src/log.js';
import { type Receiver, refusedUrl, startReceiver } from '../support/receiver.js';
import { type FakeQStash, startFakeQStash } from './qstash-server.js';

const TOKEN = 'qstash-private-token';
const BYPASS_SECRET = 'private-bypass-secret';
const HEADER_SECRET = 'private-header-secret';
const RESPONSE_SECRET = 'private-response-text';

/** Strings that must never appear in a result, a log line or the SDK's console output. */
const SECRETS = [TOKEN, BYPASS_SECRET, HEADER_SECRET, RESPONSE_SECRET];

const PAYLOAD: JsonObject = { hookId: 'h1', hookType: 'afterStep', stepIndex: 0, userId: 'u1' };

let qstash: FakeQStash;
let receivers: Receiver[] = [];
let senders: WebhookSender[] = [];
let logLines: string[] = [];
let consoleError: MockInstance<typeof console.error>;
let consoleWarn: MockInstance<typeof console.warn>;

beforeEach(async () => {
  qstash = await startFakeQStash(TOKEN);
  logLines = [];
  // The SDK writes its own failure lines to the console; they are checked for secrets too.
  consoleError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
  consoleWarn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
});

afterEach(async () => {
  await Promise.all(senders.map((s) => s.close()));
  await Promise.all(receivers.map((r) => r.close()));
  await qstash.close();
  senders = [];
  receivers = [];
  vi.restoreAllMocks();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver({ answer: { body: 'ok' } });
  receivers.push(r);
  return r;
}

function logger(): Logger {
  return createLogger({ level: 'debug', write: (line) => logLines.push(line) });
}

function sender(
  env: Record<string, string | undefined>,
  options: WebhookSenderOptions = {},
): WebhookSender {
  const s = new WebhookSender({
    env: () => env,
    qstashUrl: qstash.url,
    logger: logger(),
    ...options,
  });
  senders.push(s);
  return s;
}

function webhook(url: string, init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
  return create(WebhookSchema, { delivery: Delivery.QSTASH, ...init, url });
}

/** Everything a test could leak a secret through. */
function everythingSaid(result: unknown): string {
  return [
    inspect(result, { depth: 10 }),
    ...logLines,
    inspect(consoleError.mock.calls, { depth: 10 }),
    inspect(consoleWarn.mock.calls, { depth: 10 }),
  ].join('\n');
}

function expectNoSecrets(result: unknown): void {
  const said = everythingSaid(result);
  for (const secret of SECRETS) expect(said).not.toContain(secret);
}

describe('QStash delivery', () => {
  it('publishes once per the documented API and QStash forwards the payload with the headers', async () => {
    const r = await receiver();
    const s = sender({ QSTASH_TOKEN: TOKEN, HOOK_SECRET: HEADER_SECRET });
    const hook = webhook(`${r.url}/hooks/in?x=1`, {
      headers: { 'X-Tenant': 'acme', Authorization: 'Bearer ${HOOK_SECRET}' },
      allowedEnvVars: ['HOOK_SECRET'],
      timeout: 2.5,
    });
    const result = await s.notify(hook, PAYLOAD);
    expect(result).toEqual({ ok: true, route: 'qstash', durationMs: expect.any(Number) });

    expect(qstash.violations).toEqual([]);
    expect(qstash.publishes).toHaveLength(1);
    const [published] = qstash.publishes;
    expect(published?.destination).toBe(`${r.url}/hooks/in?x=1`);
    expect(published?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(published?.method).toBe('POST');
    expect(published?.timeout).toBe('2.5s');
    expect(published?.contentType).toBe('application/json');
    expect(published?.forwarded).toEqual({
      'x-tenant': 'acme',
      authorization: `Bearer ${HEADER_SECRET}`,
    });
    expect(JSON.parse(published?.body ?? '')).toEqual(PAYLOAD);
    // enableTelemetry: false
    expect(Object.keys(published?.headers ?? {}).filter((h) => h.includes('telemetry'))).toEqual(
      [],
    );

    // What QStash delivered to the destination: the headers unprefixed and the JSON body.
    await r.waitForRequests(1);
    const [delivered] = r.requests;
    expect(delivered?.path).toBe('/hooks/in?x=1');
    expect(delivered?.headers['x-tenant']).toBe('acme');
    expect(delivered?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(delivered?.body ?? '')).toEqual(PAYLOAD);
  });

  it("forwards the hook's own Content-Type and content-type-* headers as fetch sends them", async () => {
    const r = await receiver();
    const s = sender({ QSTASH_TOKEN: TOKEN });
    const hook = webhook(`${r.url}/typed`, {
      headers: { 'Content-Type': 'text/plain', 'Content-Type-Hint': 'abc' },
    });
    expect(await s.notify(hook, PAYLOAD)).toMatchObject({ ok: true, route: 'qstash' });
    expect(qstash.violations).toEqual([]);
    const [published] = qstash.publishes;
    expect(published?.contentType).toBe('text/plain');
    expect(published?.forwarded).toEqual({ 'content-type-hint': 'abc' });
    await r.waitForRequests(1);
    const [delivered] = r.requests;
    expect(delivered?.headers['content-type']).toBe('text/plain');
    expect(delivered?.headers['content-type-hint']).toBe('abc');
  });

  it('publishes a payload already written as JSON text as it is, large integers included', async () => {
    const r = await receiver();
    const text = '{"model":"m","usageTokens":12345678901234567890,"hookId":"h"}';
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook(`${r.url}/observe`),
      new EncodedJson(text),
    );
    expect(result).toMatchObject({ ok: true, route: 'qstash' });
    expect(qstash.violations).toEqual([]);
    expect(qstash.publishes.map((p) => [p.contentType, p.body])).toEqual([
      ['application/json', text],
    ]);
    await r.waitForRequests(1);
    expect(r.requests[0]?.body).toBe(text);
  });

  it('sends Upstash-Timeout 30s when the hook sets no timeout', async () => {
    const r = await receiver();
    await sender({ QSTASH_TOKEN: TOKEN }).notify(webhook(r.url), PAYLOAD);
    expect(qstash.publishes.map((p) => p.timeout)).toEqual(['30s']);
    expect(qstash.violations).toEqual([]);
  });

  it('resolves a relative URL against APP_URL before INTERNAL_APP_URL, the reverse of fetch', async () => {
    const app = await receiver();
    const internal = await receiver();
    const env = { QSTASH_TOKEN: TOKEN, APP_URL: app.url, INTERNAL_APP_URL: internal.url };
    const s = sender(env);
    expect(await s.notify(webhook('/api/hook'), PAYLOAD)).toMatchObject({ route: 'qstash' });
    expect(qstash.publishes.map((p) => p.destination)).toEqual([`${app.url}/api/hook`]);

    // The fallback fetch resolves the same path with the fetch order.
    qstash.behaviour = { kind: 'status', status: 500 };
    expect(await s.notify(webhook('/api/hook'), PAYLOAD)).toMatchObject({
      ok: true,
      route: 'fallback',
    });
    await internal.waitForRequests(1);
    expect(internal.requests.map((q) => q.path)).toEqual(['/api/hook']);
  });

  it('adds x-vercel-protection-bypass only for the application origin', async () => {
    const app = await receiver();
    const other = await receiver();
    const s = sender({
      QSTASH_TOKEN: TOKEN,
      APP_URL: app.url,
      VERCEL_AUTOMATION_BYPASS_SECRET: BYPASS_SECRET,
    });
    await s.notify(webhook(`${other.url}/hook`), PAYLOAD);
    await s.notify(webhook('/hook'), PAYLOAD);
    await s.notify(webhook(`${app.url}/other`), PAYLOAD);
    expect(qstash.publishes.map((p) => p.forwarded['x-vercel-protection-bypass'])).toEqual([
      undefined,
      BYPASS_SECRET,
      BYPASS_SECRET,
    ]);
    expect(qstash.violations).toEqual([]);
  });

  it('falls back to exactly one fetch when QStash answers 500, without SDK retries', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'status', status: 500, body: RESPONSE_SECRET };
    const s = sender({ QSTASH_TOKEN: TOKEN });
    const result = await s.notify(webhook(`${r.url}/hook`), PAYLOAD);
    expect(result).toEqual({
      ok: true,
      route: 'fallback',
      status: 200,
      durationMs: expect.any(Number),
    });
    expect(qstash.publishes).toHaveLength(1);
    expect(r.requests).toHaveLength(1);
    expect(r.requests[0]?.path).toBe('/hook');
    expect(JSON.parse(r.requests[0]?.body ?? '')).toEqual(PAYLOAD);
    expect(logLines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'QStash delivery failed, falling back to fetch',
        code: 'http_error',
        httpStatus: 500,
        message: 'Hook HTTP request failed: http_error: QStash publish failed (HTTP 500)',
      }),
    ]);
    expectNoSecrets(result);
  });

  it('reports http_error with the status and makes no fetch when fallback is none', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'status', status: 503, body: RESPONSE_SECRET };
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook(`${r.url}/hook`, { fallback: Fallback.NONE }),
      PAYLOAD,
    );
    expect(result).toEqual({
      ok: false,
      route: 'qstash',
      code: 'http_error',
      status: 503,
      message: 'Hook HTTP request failed: http_error: QStash publish failed (HTTP 503)',
      durationMs: expect.any(Number),
    });
    expect(qstash.publishes).toHaveLength(1);
    expect(r.requests).toHaveLength(0);
    expect(r.connections()).toBe(0);
    expectNoSecrets(result);
  });

  it('maps a rate limit (429) to http_error 429', async () => {
    qstash.behaviour = { kind: 'status', status: 429, body: RESPONSE_SECRET };
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook('http://127.0.0.1:9/hook', { fallback: Fallback.NONE }),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'http_error', status: 429 });
    expectNoSecrets(result);
  });

  it('falls back once when the QStash connection is refused', async () => {
    const r = await receiver();
    const s = sender({ QSTASH_TOKEN: TOKEN }, { qstashUrl: await refusedUrl() });
    const result = await s.notify(webhook(`${r.url}/hook`), PAYLOAD);
    expect(result).toMatchObject({ ok: true, route: 'fallback', status: 200 });
    expect(r.requests).toHaveLength(1);
    expectNoSecrets(result);
  });

  it('reports network_error and sends nothing more when refused and fallback is none', async () => {
    const r = await receiver();
    const s = sender({ QSTASH_TOKEN: TOKEN }, { qstashUrl: await refusedUrl() });
    const result = await s.notify(webhook(`${r.url}/hook`, { fallback: Fallback.NONE }), PAYLOAD);
    expect(result).toEqual({
      ok: false,
      route: 'qstash',
      code: 'network_error',
      message: 'Hook HTTP request failed: network_error: QStash publish failed',
      durationMs: expect.any(Number),
    });
    expect(r.connections()).toBe(0);
    expectNoSecrets(result);
  });

  it('does not retry a reset connection: one connection, one request, one fallback', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'reset' };
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(webhook(`${r.url}/hook`), PAYLOAD);
    expect(result).toMatchObject({ ok: true, route: 'fallback' });
    expect(qstash.publishes).toHaveLength(1);
    expect(qstash.connections()).toBe(1);
    expect(r.requests).toHaveLength(1);
  });

  it('treats a missing token as configuration, then falls back to fetch', async () => {
    const r = await receiver();
    const result = await sender({}).notify(webhook(`${r.url}/hook`), PAYLOAD);
    expect(result).toMatchObject({ ok: true, route: 'fallback', status: 200 });
    expect(qstash.connections()).toBe(0);
    expect(r.requests).toHaveLength(1);
    expect(logLines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        msg: 'QStash delivery failed, falling back to fetch',
        code: 'configuration',
        message: 'Hook HTTP request failed: configuration: QSTASH_TOKEN not available',
      }),
    ]);
  });

  it('reports the missing token and sends nothing when fallback is none', async () => {
    const r = await receiver();
    const result = await sender({ QSTASH_TOKEN: '' }).notify(
      webhook(`${r.url}/hook`, { fallback: Fallback.NONE }),
      PAYLOAD,
    );
    expect(result).toEqual({
      ok: false,
      route: 'qstash',
      code: 'configuration',
      message: 'Hook HTTP request failed: configuration: QSTASH_TOKEN not available',
      durationMs: expect.any(Number),
    });
    expect(qstash.connections()).toBe(0);
    expect(r.connections()).toBe(0);
  });

  it('does not fall back for a header that cannot be resolved: nothing is sent', async () => {
    const r = await receiver();
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook(`${r.url}/hook`, { headers: { authorization: 'Bearer ${MISSING}' } }),
      PAYLOAD,
    );
    expect(result).toMatchObject({
      ok: false,
      route: 'qstash',
      code: 'configuration',
      message:
        'Hook HTTP request failed: configuration: header authorization has an unresolved template',
    });
    expect(qstash.connections()).toBe(0);
    expect(r.connections()).toBe(0);
  });

  it('reads the token at each send, so a rotated token applies at once', async () => {
    const r = await receiver();
    const env: Record<string, string> = { QSTASH_TOKEN: TOKEN };
    const s = sender(env);
    await s.notify(webhook(r.url), PAYLOAD);
    env.QSTASH_TOKEN = 'rotated-token';
    await s.notify(webhook(r.url, { fallback: Fallback.NONE }), PAYLOAD);
    expect(qstash.publishes.map((p) => p.authorization)).toEqual([
      `Bearer ${TOKEN}`,
      'Bearer rotated-token',
    ]);
  });

  it('aborts a publish unanswered at the timeout, ignores its late ack and sends no fallback', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'hold' };
    const s = sender({ QSTASH_TOKEN: TOKEN });
    // Fallback is on (the default): the outcome is unknown, so no fetch follows.
    const result = await s.notify(webhook(`${r.url}/hook`, { timeout: 0.2 }), PAYLOAD);
    expect(result).toEqual({
      ok: false,
      route: 'qstash',
      code: 'timeout',
      message: 'Hook HTTP request failed: timeout: QStash publish unanswered after 200 ms',
      durationMs: expect.any(Number),
    });
    // The client closed the publish: QStash's late acknowledgement has nowhere to go.
    await qstash.abandonedAt(1);
    expect(qstash.release()).toBe(0);
    // QStash had the message and delivered it: the receiver gets that one copy and no fallback.
    const [copy] = await r.waitForRequests(1);
    expect(copy?.headers['upstash-message-id']).toBe('msg_1');
    expect(r.requests).toHaveLength(1);
    expect(logLines.join('\n')).not.toContain('falling back');
    expect(qstash.publishes).toHaveLength(1);
  });

  it('reports an unanswered publish as a timeout with fallback none too, after aborting it', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'hang' };
    const result = await sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook(`${r.url}/hook`, { timeout: 0.2, fallback: Fallback.NONE }),
      PAYLOAD,
    );
    expect(result).toMatchObject({
      ok: false,
      route: 'qstash',
      code: 'timeout',
      message: 'Hook HTTP request failed: timeout: QStash publish unanswered after 200 ms',
    });
    await qstash.abandonedAt(1);
    expect(r.requests).toHaveLength(0);
  });

  it('falls back once when the timeout comes before the publish was written, and never sends it', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'hang' };
    // One connection to QStash: the second publish waits for it behind the first.
    const s = sender({ QSTASH_TOKEN: TOKEN }, { connectionsPerOrigin: 1 });
    const first = new AbortController();
    const blocking = s.notify(
      webhook(`${r.url}/first`, { fallback: Fallback.NONE }),
      PAYLOAD,
      first.signal,
    );
    await qstash.received(1);
    qstash.behaviour = { kind: 'accept' };
    const queued = await s.notify(webhook(`${r.url}/second`, { timeout: 0.2 }), PAYLOAD);
    expect(queued).toEqual({
      ok: true,
      route: 'fallback',
      status: 200,
      durationMs: expect.any(Number),
    });
    expect(logLines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        msg: 'QStash delivery failed, falling back to fetch',
        code: 'timeout',
        message: 'Hook HTTP request failed: timeout: QStash publish not sent after 200 ms',
      }),
    ]);
    first.abort();
    expect(await blocking).toMatchObject({ ok: false, code: 'cancelled' });
    // Closing waits for the queued publish: it gets a connection and is dropped unwritten.
    await s.close();
    expect(qstash.publishes.map((p) => new URL(p.destination).pathname)).toEqual(['/first']);
    expect(r.requests.map((q) => q.path)).toEqual(['/second']);
    expect(r.requests[0]?.headers['upstash-message-id']).toBeUndefined();
  });

  it('reports a caller abort as cancelled, aborts the publish and sends no fallback', async () => {
    const r = await receiver();
    qstash.behaviour = { kind: 'hold' };
    const controller = new AbortController();
    const pending = sender({ QSTASH_TOKEN: TOKEN }).notify(
      webhook(`${r.url}/hook`),
      PAYLOAD,
      controller.signal,
    );
    await qstash.received(1);
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, code: 'cancelled', route: 'qstash' });
    await qstash.abandonedAt(1);
    expect(qstash.release()).toBe(0);
    // The one copy is the one QStash delivers; the sender sent none.
    await r.waitForRequests(1);
    expect(r.requests.map((q) => q.headers['upstash-message-id'])).toEqual(['msg_1']);
  });

  it('pools QStash publishes on the sender Agent, also installed as the global dispatcher', async () => {
    const r = await receiver();
    const before = getGlobalDispatcher();
    const s = sender({ QSTASH_TOKEN: TOKEN }, { globalDispatcher: true });
    expect(getGlobalDispatcher()).not.toBe(before);
    const hook = webhook(`${r.url}/hook`);
    for (let i = 0; i < 200; i++) {
      expect(await s.notify(hook, { ...PAYLOAD, i })).toMatchObject({ ok: true, route: 'qstash' });
    }
    expect(qstash.publishes).toHaveLength(200);
    expect(qstash.connections()).toBeLessThanOrEqual(4);
    expect(qstash.violations).toEqual([]);
    await s.close();
    expect(getGlobalDispatcher()).toBe(before);
    // Closing the sender's Agent closed the pooled QStash connections.
    await qstash.allClosed();
  });

  it('defaults to the SDK endpoint when no QStash URL is configured', () => {
    expect(DEFAULT_QSTASH_URL).toBe('https://qstash.upstash.io');
  });
});
