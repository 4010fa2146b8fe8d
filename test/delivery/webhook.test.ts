/**
 * @module Webhook delivery contract tests (upstream contract §4.1) against
 * real `node:http` receivers on 127.0.0.1.
 */
import { getEventListeners } from 'node:events';
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { type Webhook, WebhookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DEFAULT_TIMEOUT_SECONDS,
  DeliveryError,
  resolveHeaders,
  resolveWebhookUrl,
  WebhookSender,
  type WebhookSenderOptions,
} from '../../src/delivery/webhook.js';
import {
  type Answer,
  type Receiver,
  type Reply,
  refusedUrl,
  startReceiver,
} from '../support/receiver.js';

const PAYLOAD: JsonObject = { hookId: 'h1', hookType: 'afterStep', stepIndex: 0, ok: false };

/** Answers 200 with a short text body. */
const OK: Reply = { headers: { 'content-type': 'text/plain' }, body: 'ok' };

/** Never answers; the socket stays open until the client gives up. */
const NEVER: Reply = { hang: true };

const TOKEN_TEMPLATE = '${HOOK_TOKEN}';
const BEARER_TEMPLATE = 'Bearer ${HOOK_TOKEN}';
const BEARER_OTHER_TEMPLATE = 'Bearer ${OTHER}';

/** A secret resolved into a header; it must never appear in a result. */
const SECRET = 's3cret-token';

let receivers: Receiver[] = [];
let senders: WebhookSender[] = [];

afterEach(async () => {
  await Promise.all(senders.map((s) => s.close()));
  await Promise.all(receivers.map((r) => r.close()));
  senders = [];
  receivers = [];
});

async function receiver(answer: Answer = OK): Promise<Receiver> {
  const r = await startReceiver({ answer });
  receivers.push(r);
  return r;
}

function sender(options?: WebhookSenderOptions): WebhookSender {
  const s = new WebhookSender(options);
  senders.push(s);
  return s;
}

function webhook(url: string, init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
  return create(WebhookSchema, { ...init, url });
}

describe('WebhookSender.notify', () => {
  it('POSTs the payload as JSON and reports a 2xx as delivered', async () => {
    const r = await receiver();
    const result = await sender().notify(webhook(`${r.url}/hooks/in?x=1`), PAYLOAD);
    expect(result).toMatchObject({ ok: true, route: 'fetch', status: 200 });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(r.requests).toHaveLength(1);
    const [request] = r.requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe('/hooks/in?x=1');
    expect(request?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(request?.body ?? '')).toEqual(PAYLOAD);
  });

  it("sends the default headers of the reference system's fetch, which a hook's own headers override", async () => {
    const r = await receiver();
    await sender().notify(webhook(`${r.url}/plain`), PAYLOAD);
    await sender().notify(
      webhook(`${r.url}/own`, { headers: { 'User-Agent': 'acme-hooks/1', Accept: 'text/plain' } }),
      PAYLOAD,
    );
    const [plain, own] = r.requests;
    // What Node's fetch sends (less accept-encoding: an answer is never decompressed).
    expect(plain?.headers).toMatchObject({
      'content-type': 'application/json',
      accept: '*/*',
      'accept-language': '*',
      'sec-fetch-mode': 'cors',
      'user-agent': 'node',
    });
    expect(plain?.headers['accept-encoding']).toBeUndefined();
    expect(own?.headers).toMatchObject({ 'user-agent': 'acme-hooks/1', accept: 'text/plain' });
  });

  it('reports a 204 as delivered', async () => {
    const r = await receiver({ status: 204 });
    expect(await sender().notify(webhook(r.url), PAYLOAD)).toMatchObject({
      ok: true,
      status: 204,
    });
  });

  it('reports a 500 as http_error with its status and without the response text', async () => {
    const r = await receiver({ status: 500, body: 'internal secret detail' });
    const result = await sender().notify(webhook(r.url), PAYLOAD);
    expect(result).toEqual({
      ok: false,
      code: 'http_error',
      status: 500,
      message: 'Hook HTTP request failed: http_error: HTTP 500',
      durationMs: expect.any(Number),
    });
  });

  it('does not follow a redirect: a 302 is http_error and its target gets no request', async () => {
    const target = await receiver();
    const r = await receiver((_req, res) =>
      res.writeHead(302, { location: `${target.url}/elsewhere` }).end(),
    );
    const result = await sender().notify(webhook(r.url), PAYLOAD);
    expect(result).toMatchObject({ ok: false, code: 'http_error', status: 302 });
    expect(r.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
    expect(target.connections()).toBe(0);
  });

  it('times out after webhook.timeout seconds and closes the socket', async () => {
    const r = await receiver(NEVER);
    const result = await sender().notify(webhook(r.url, { timeout: 0.2 }), PAYLOAD);
    expect(result).toMatchObject({
      ok: false,
      code: 'timeout',
      message: 'Hook HTTP request failed: timeout: after 200 ms',
    });
    expect(result.durationMs).toBeGreaterThanOrEqual(190);
    await r.requests[0]?.socketClosed;
  });

  it('reports a refused connection as network_error', async () => {
    const result = await sender().notify(webhook(await refusedUrl()), PAYLOAD);
    expect(result).toMatchObject({
      ok: false,
      code: 'network_error',
      message: 'Hook HTTP request failed: network_error: ECONNREFUSED',
    });
  });

  it('reports a caller abort as cancelled and closes the socket', async () => {
    const r = await receiver(NEVER);
    const controller = new AbortController();
    const pending = sender().notify(webhook(r.url), PAYLOAD, controller.signal);
    await r.waitForRequests(1);
    controller.abort();
    expect(await pending).toMatchObject({
      ok: false,
      code: 'cancelled',
      message: 'Hook HTTP request failed: cancelled',
    });
    await r.requests[0]?.socketClosed;
  });

  it('sends nothing for a signal that is already aborted', async () => {
    const r = await receiver();
    const s = sender();
    const result = await s.notify(webhook(r.url), PAYLOAD, AbortSignal.abort());
    expect(result).toMatchObject({ ok: false, code: 'cancelled' });
    await s.notify(webhook(`${r.url}/after`), PAYLOAD);
    expect(r.requests.map((q) => q.path)).toEqual(['/after']);
  });

  it('resolves on the status without waiting for a never-ending body', async () => {
    let writer: NodeJS.Timeout | undefined;
    const r = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first chunk');
      writer = setInterval(() => res.write('more'), 10);
      res.on('close', () => clearInterval(writer));
    });
    const s = sender();
    expect(await s.notify(webhook(r.url), PAYLOAD)).toMatchObject({ ok: true, status: 200 });
    // The body is still being discarded: close() drops it rather than wait for it.
    await s.close();
    await r.requests[0]?.socketClosed;
  });

  it('resolves a templated header from an allowed variable of the injected env', async () => {
    const r = await receiver();
    const hook = webhook(r.url, {
      headers: { Authorization: BEARER_TEMPLATE, 'X-Static': 'plain $ value' },
      allowedEnvVars: ['HOOK_TOKEN'],
    });
    const result = await sender({ env: () => ({ HOOK_TOKEN: SECRET }) }).notify(hook, PAYLOAD);
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(r.requests[0]?.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(r.requests[0]?.headers['x-static']).toBe('plain $ value');
  });

  it("never resolves a template of the sidecar's own AGENTHOOKS_* variables, even one a stored hook lists", async () => {
    const r = await receiver();
    const hook = webhook(r.url, {
      headers: { 'X-Leak': '${AGENTHOOKS_AUTH_TOKEN}' },
      allowedEnvVars: ['AGENTHOOKS_AUTH_TOKEN'],
    });
    const result = await sender({
      env: () => ({ AGENTHOOKS_AUTH_TOKEN: SECRET }),
    }).notify(hook, PAYLOAD);
    expect(result).toMatchObject({ ok: false, code: 'configuration' });
    expect(JSON.stringify(result)).not.toContain(SECRET);
    expect(r.requests).toEqual([]);
  });

  it('reads the env at each send, so a rotated secret applies at once', async () => {
    const r = await receiver();
    const env: Record<string, string> = { HOOK_TOKEN: 'one' };
    const hook = webhook(r.url, {
      headers: { authorization: TOKEN_TEMPLATE },
      allowedEnvVars: ['HOOK_TOKEN'],
    });
    const s = sender({ env: () => env });
    await s.notify(hook, PAYLOAD);
    env.HOOK_TOKEN = 'two';
    await s.notify(hook, PAYLOAD);
    expect(r.requests.map((q) => q.headers.authorization)).toEqual(['one', 'two']);
  });

  it('refuses a template of a variable that is not allowed and sends nothing', async () => {
    const r = await receiver();
    const s = sender({ env: () => ({ HOOK_TOKEN: SECRET, OTHER: SECRET }) });
    const result = await s.notify(
      webhook(r.url, {
        headers: { Authorization: BEARER_OTHER_TEMPLATE },
        allowedEnvVars: ['HOOK_TOKEN'],
      }),
      PAYLOAD,
    );
    expect(result).toMatchObject({
      ok: false,
      code: 'configuration',
      message:
        'Hook HTTP request failed: configuration: header authorization has an unresolved template',
    });
    await s.notify(webhook(`${r.url}/after`), PAYLOAD);
    expect(r.requests.map((q) => q.path)).toEqual(['/after']);
  });

  it('refuses a resolved header value with CR/LF and never puts the value in the message', async () => {
    const r = await receiver();
    const s = sender({ env: () => ({ HOOK_TOKEN: `${SECRET}\r\nx-injected: 1` }) });
    const result = await s.notify(
      webhook(r.url, {
        headers: { 'x-token': TOKEN_TEMPLATE },
        allowedEnvVars: ['HOOK_TOKEN'],
      }),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'configuration' });
    expect(JSON.stringify(result)).not.toContain(SECRET);
    await s.notify(webhook(`${r.url}/after`), PAYLOAD);
    expect(r.requests.map((q) => q.path)).toEqual(['/after']);
  });

  it('resolves a relative URL against INTERNAL_APP_URL before APP_URL', async () => {
    const internal = await receiver();
    const app = await receiver();
    const env: Record<string, string> = {
      INTERNAL_APP_URL: internal.url,
      APP_URL: app.url,
    };
    const s = sender({ env: () => env });
    expect(await s.notify(webhook('/api/hooks?a=1'), PAYLOAD)).toMatchObject({ ok: true });
    env.INTERNAL_APP_URL = '';
    expect(await s.notify(webhook('/api/hooks?a=2'), PAYLOAD)).toMatchObject({ ok: true });
    expect(internal.requests.map((q) => q.path)).toEqual(['/api/hooks?a=1']);
    expect(app.requests.map((q) => q.path)).toEqual(['/api/hooks?a=2']);
  });

  it('refuses a relative URL without a base, and URLs that are not HTTP(S) or hold credentials', async () => {
    const r = await receiver();
    const s = sender({ env: () => ({}) });
    const port = new URL(r.url).port;
    for (const url of [
      '/api/hooks',
      '//127.0.0.1/x',
      `ftp://127.0.0.1:${port}/`,
      `http://user:pw@127.0.0.1:${port}/`,
      'not a url',
    ]) {
      expect(await s.notify(webhook(url), PAYLOAD), url).toMatchObject({
        ok: false,
        code: 'configuration',
      });
    }
    expect(r.requests).toHaveLength(0);
    expect(r.connections()).toBe(0);
  });

  it('reuses pooled keep-alive connections across 1,000 sequential notifications', async () => {
    const r = await receiver();
    const s = sender();
    const hook = webhook(r.url);
    for (let i = 0; i < 1_000; i++) {
      expect((await s.notify(hook, { ...PAYLOAD, i })).ok).toBe(true);
    }
    expect(r.requests).toHaveLength(1_000);
    expect(r.connections()).toBeLessThanOrEqual(4);
  });
});

describe('WebhookSender.post', () => {
  it('returns a 2xx response with its body unread, for a control to read', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"allow"}');
    });
    const response = await sender().post(webhook(r.url), PAYLOAD);
    if (!response.ok) throw new Error(response.message);
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toBe('application/json');
    expect(await response.body.text()).toBe('{"decision":"allow"}');
  });

  it('maps a body read cut by the timeout to timeout', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200).write('{"decision":');
    });
    const response = await sender().post(webhook(r.url, { timeout: 0.2 }), PAYLOAD);
    if (!response.ok) throw new Error(response.message);
    const failure = await response.body.text().then(
      () => undefined,
      (e: unknown) => response.failure(e),
    );
    expect(failure).toMatchObject({ ok: false, code: 'timeout' });
  });
});

describe('resolveHeaders', () => {
  it('lower-cases names and leaves values without templates as they are', () => {
    expect(
      resolveHeaders({ headers: { 'X-Tenant': 'acme', Accept: '*/*' }, allowedEnvVars: [] }, {}),
    ).toEqual({ 'x-tenant': 'acme', accept: '*/*' });
  });

  it('refuses forbidden header names in any case', () => {
    for (const name of [
      'Host',
      'content-length',
      'Connection',
      'transfer-encoding',
      'Trailer',
      'upgrade',
      'Proxy-Authorization',
      'sec-fetch-mode',
      'Upstash-Forward-X',
    ]) {
      expect(
        () => resolveHeaders({ headers: { [name]: 'v' }, allowedEnvVars: [] }, {}),
        name,
      ).toThrow(DeliveryError);
    }
  });

  it('refuses an allowed variable that is not defined', () => {
    expect(() =>
      resolveHeaders({ headers: { a: TOKEN_TEMPLATE }, allowedEnvVars: ['HOOK_TOKEN'] }, {}),
    ).toThrow('Hook HTTP request failed: configuration: header a has an unresolved template');
  });

  it('refuses NUL, CR and LF in a configured value', () => {
    for (const value of ['a\0b', 'a\rb', 'a\nb']) {
      expect(() => resolveHeaders({ headers: { a: value }, allowedEnvVars: [] }, {})).toThrow(
        expect.objectContaining({ code: 'configuration', reason: 'WEBHOOK_CONFIGURATION' }),
      );
    }
  });

  it('refuses two names that differ only in case', () => {
    expect(() =>
      resolveHeaders({ headers: { 'X-A': '1', 'x-a': '2' }, allowedEnvVars: [] }, {}),
    ).toThrow(DeliveryError);
  });
});

describe('resolveWebhookUrl', () => {
  it('keeps an absolute URL and resolves a relative one against the base', () => {
    expect(resolveWebhookUrl('https://hooks.example/a?b=1', undefined).href).toBe(
      'https://hooks.example/a?b=1',
    );
    expect(resolveWebhookUrl('/api/x', 'http://app.internal:3000/base/').href).toBe(
      'http://app.internal:3000/api/x',
    );
  });

  it('refuses a backslash', () => {
    expect(() => resolveWebhookUrl('https://hooks.example\\@evil/', undefined)).toThrow(
      DeliveryError,
    );
  });
});

describe('DEFAULT_TIMEOUT_SECONDS', () => {
  it('is the upstream default of 30 seconds', () => {
    expect(DEFAULT_TIMEOUT_SECONDS).toBe(30);
  });
});

describe('WebhookSender connection pool', () => {
  it('carries concurrent requests to one origin on at most connectionsPerOrigin sockets', async () => {
    const r = await receiver();
    const s = sender({ connectionsPerOrigin: 2 });
    // Dispatched in one tick, before any socket connects: without the cap each would open its own.
    const settled = await Promise.all(
      Array.from({ length: 6 }, () => s.notify(webhook(`${r.url}/hook`), PAYLOAD)),
    );
    expect(settled.every((x) => x.ok)).toBe(true);
    expect(r.requests).toHaveLength(6);
    expect(r.connections()).toBe(2);
  });

  it('fails a request queued for a connection with timeout at its own timeout, sending nothing', async () => {
    const r = await receiver(NEVER);
    const s = sender({ connectionsPerOrigin: 1 });
    const holder = new AbortController();
    let firstSettled = false;
    const first = s
      .notify(webhook(`${r.url}/slow`, { timeout: 60 }), PAYLOAD, holder.signal)
      .finally(() => {
        firstSettled = true;
      });
    await r.waitForRequests(1);
    const queued = await s.notify(webhook(`${r.url}/queued`, { timeout: 0.2 }), PAYLOAD);
    expect(queued).toMatchObject({ ok: false, code: 'timeout' });
    // The one socket is still held by the first request: the queued one timed out while waiting.
    expect(firstSettled).toBe(false);
    holder.abort();
    expect(await first).toMatchObject({ ok: false, code: 'cancelled' });
    // Closing waits for the queue to drain: the request that gave up never reached the receiver.
    await s.close();
    expect(r.requests.map((q) => q.path)).toEqual(['/slow']);
  });

  it('adds one abort listener to a caller signal however many requests wait on it', async () => {
    const r = await receiver(NEVER);
    const s = sender({ connectionsPerOrigin: 4 });
    const controller = new AbortController();
    const results = Array.from({ length: 20 }, () =>
      s.notify(webhook(`${r.url}/hook`, { timeout: 60 }), PAYLOAD, controller.signal),
    );
    await r.waitForRequests(4);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    const settled = await Promise.all(results);
    expect(settled.every((x) => !x.ok && x.code === 'cancelled')).toBe(true);
  });
});
