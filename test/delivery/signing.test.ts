/**
 * @module Signed webhooks: the declaration parser, the signer (checked with
 * the `standardwebhooks` npm package, the receivers' library), the binding
 * rule at registration and at delivery, and signed fetch, QStash and
 * fallback requests against real receivers on 127.0.0.1.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { inspect } from 'node:util';
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  HookSchema,
  ResponseHandling,
  type Webhook,
  WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  checkSigningRegistration,
  checkSigningSecret,
  SigningKey,
  signature,
  signatureHeaders,
  signingSecrets,
} from '../../src/delivery/signing.js';
import { WebhookSender } from '../../src/delivery/webhook.js';
import { AgentHooksError, InvalidArgumentError } from '../../src/errors.js';
import { environmentHooks } from '../../src/hooks/environment-hooks.js';
import { HookRegistry } from '../../src/hooks/registry.js';
import { validateHooks, validateStoredHook } from '../../src/hooks/validate.js';
import { useTempStore } from '../store/helpers.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { type FakeQStash, startFakeQStash } from './qstash-server.js';

/** A fresh `whsec_` secret of `bytes` random bytes. */
function secret(bytes = 32): string {
  return `whsec_${randomBytes(bytes).toString('base64')}`;
}

const OLD = secret();
const NEW = secret();
const OTHER = secret();
const PAYLOAD: JsonObject = { hookId: 'h1', hookType: 'afterStep', stepIndex: 0 };

function headersOf(req: { headers: Record<string, string | string[] | undefined> }) {
  return {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  };
}

describe('signingSecrets', () => {
  it('reads each name with its secrets and origins, origins normalised', () => {
    const parsed = signingSecrets({
      AGENTHOOKS_SIGNING_SECRET_BILLING: ` ${OLD}  ${NEW} `,
      AGENTHOOKS_SIGNING_ORIGINS_BILLING: 'https://billing.example:443, http://127.0.0.1:8080/',
      AGENTHOOKS_SIGNING_SECRET_DEFAULT: OTHER,
      AGENTHOOKS_SIGNING_ORIGINS_DEFAULT: 'http://localhost:3000',
    });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const billing = parsed.secrets.get('BILLING');
    expect(billing?.keys).toHaveLength(2);
    expect([...(billing?.origins ?? [])]).toEqual([
      'https://billing.example',
      'http://127.0.0.1:8080',
    ]);
    expect([...parsed.secrets.keys()]).toEqual(['BILLING', 'DEFAULT']);
  });

  it('is empty when nothing is declared', () => {
    const parsed = signingSecrets({ PATH: '/bin' });
    expect(parsed.ok && parsed.secrets.size).toBe(0);
  });

  const malformed: [string, Record<string, string>][] = [
    ['a secret without origins', { AGENTHOOKS_SIGNING_SECRET_A: OLD }],
    ['origins without a secret', { AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example' }],
    [
      'an empty secret',
      { AGENTHOOKS_SIGNING_SECRET_A: ' ', AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example' },
    ],
    [
      'no whsec_ prefix',
      {
        AGENTHOOKS_SIGNING_SECRET_A: OLD.slice(6),
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'bad base64',
      { AGENTHOOKS_SIGNING_SECRET_A: `${OLD}!`, AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example' },
    ],
    [
      'a secret of 16 bytes',
      {
        AGENTHOOKS_SIGNING_SECRET_A: secret(16),
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'a secret of 65 bytes',
      {
        AGENTHOOKS_SIGNING_SECRET_A: secret(65),
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'three secrets',
      {
        AGENTHOOKS_SIGNING_SECRET_A: `${OLD} ${NEW} ${OTHER}`,
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'one secret twice',
      {
        AGENTHOOKS_SIGNING_SECRET_A: `${OLD} ${OLD}`,
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'non-canonical base64 (unused bits set)',
      {
        // 24 bytes of 0x41 end in "QUFB"; 25 end in "QQ==": "QR==" decodes the same.
        AGENTHOOKS_SIGNING_SECRET_A: `whsec_${Buffer.alloc(25, 0x41).toString('base64').replace(/QQ==$/, 'QR==')}`,
        AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
      },
    ],
    [
      'an origin with a path',
      { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example/in' },
    ],
    [
      'an origin with credentials',
      { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: 'https://u:p@a.example' },
    ],
    [
      'an ftp origin',
      { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: 'ftp://a.example' },
    ],
    [
      'a host without a scheme',
      { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: 'a.example' },
    ],
    ['no origin', { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: ' , ' }],
    [
      'a name with a dash',
      {
        'AGENTHOOKS_SIGNING_SECRET_A-B': OLD,
        'AGENTHOOKS_SIGNING_ORIGINS_A-B': 'https://a.example',
      },
    ],
  ];
  it.each(malformed)('refuses %s as INVALID_ENVIRONMENT, never quoting a secret', (_, env) => {
    const parsed = signingSecrets(env);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error.reason).toBe('INVALID_ENVIRONMENT');
    expect(parsed.error.metadata.variables).toMatch(/^AGENTHOOKS_SIGNING_/);
    const said = inspect(parsed.error, { depth: 5 });
    for (const s of [OLD, NEW, OTHER, OLD.slice(6)]) expect(said).not.toContain(s);
  });

  it('refuses one key under two names, naming both variables', () => {
    const parsed = signingSecrets({
      AGENTHOOKS_SIGNING_SECRET_BILLING: OLD,
      AGENTHOOKS_SIGNING_ORIGINS_BILLING: 'https://billing.example',
      AGENTHOOKS_SIGNING_SECRET_DEFAULT: `${NEW} ${OLD}`,
      AGENTHOOKS_SIGNING_ORIGINS_DEFAULT: 'https://audit.example',
    });
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error.message).toContain(
      'secret 2 of AGENTHOOKS_SIGNING_SECRET_DEFAULT is also declared in AGENTHOOKS_SIGNING_SECRET_BILLING',
    );
    expect(parsed.error.metadata.variables).toBe(
      'AGENTHOOKS_SIGNING_SECRET_BILLING,AGENTHOOKS_SIGNING_SECRET_DEFAULT',
    );
  });

  it('makes the environment hooks invalid, so every resolution fails closed', () => {
    const hooks = environmentHooks({ AGENTHOOKS_SIGNING_SECRET_A: 'whsec_short' });
    expect(hooks.ok).toBe(false);
    if (!hooks.ok) expect(hooks.error.reason).toBe('INVALID_ENVIRONMENT');
  });

  it('never prints a key', () => {
    const key = new SigningKey(Buffer.from(OLD.slice(6), 'base64'));
    const said = [inspect({ key }), JSON.stringify({ key }), String(key)].join(' ');
    expect(said).not.toContain(OLD.slice(6));
    expect(said).toContain('[signing key]');
  });
});

describe('signature', () => {
  it('is what standardwebhooks computes and verifies, one per key', () => {
    const parsed = signingSecrets({
      AGENTHOOKS_SIGNING_SECRET_A: `${OLD} ${NEW}`,
      AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
    });
    if (!parsed.ok) throw parsed.error;
    const keys = parsed.secrets.get('A')?.keys ?? [];
    const body = '{"hookId":"h1","text":"héllo"}';
    const now = Date.now();
    const headers = signatureHeaders(keys, 'msg_1', body, now);
    expect(headers['webhook-id']).toBe('msg_1');
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(now / 1000)));
    const timestamp = Number(headers['webhook-timestamp']);
    expect(headers['webhook-signature']).toBe(
      `${new StandardWebhook(OLD).sign('msg_1', new Date(timestamp * 1000), body)} ${new StandardWebhook(NEW).sign('msg_1', new Date(timestamp * 1000), body)}`,
    );
    // During rotation each secret alone verifies.
    for (const s of [OLD, NEW])
      expect(new StandardWebhook(s).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new StandardWebhook(OTHER).verify(body, headers)).toThrow();
    expect(() => new StandardWebhook(OLD).verify(`${body} `, headers)).toThrow();
    const old = signatureHeaders(keys, 'msg_1', body, now - 10 * 60 * 1000);
    expect(() => new StandardWebhook(OLD).verify(body, old)).toThrow(/timestamp/i);
    expect(signature(keys, 'msg_1', timestamp, body)).toBe(headers['webhook-signature']);
  });
});

describe('checkSigningSecret', () => {
  const env = {
    AGENTHOOKS_SIGNING_SECRET_A: OLD,
    AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
    AGENTHOOKS_SIGNING_SECRET_DEFAULT: NEW,
    AGENTHOOKS_SIGNING_ORIGINS_DEFAULT: 'https://d.example',
  };
  const secrets = signingSecrets(env);

  it('signs with the named secret on its origin only', () => {
    expect(checkSigningSecret({ signingSecret: 'A' }, 'https://a.example', secrets)).toMatchObject({
      sign: true,
      name: 'A',
    });
    expect(checkSigningSecret({ signingSecret: 'A' }, 'https://d.example', secrets)).toMatchObject({
      reason: 'SIGNING_SECRET_NOT_BOUND',
      field: 'signingSecret',
    });
    expect(checkSigningSecret({ signingSecret: 'B' }, 'https://a.example', secrets)).toMatchObject({
      reason: 'UNDECLARED_SIGNING_SECRET',
    });
  });

  it('signs a hook naming none with DEFAULT on its origins, else not at all', () => {
    expect(checkSigningSecret({ signingSecret: '' }, 'https://d.example', secrets)).toMatchObject({
      sign: true,
      name: 'DEFAULT',
    });
    expect(checkSigningSecret({ signingSecret: '' }, 'https://a.example', secrets)).toEqual({
      sign: false,
    });
  });

  it('throws the environment error while the declaration is invalid', () => {
    const invalid = signingSecrets({ AGENTHOOKS_SIGNING_SECRET_A: OLD });
    expect(() => checkSigningSecret({ signingSecret: '' }, 'https://a.example', invalid)).toThrow(
      AgentHooksError,
    );
  });

  it('binds a relative URL through each base it may resolve against', () => {
    const check = (extra: Record<string, string>) =>
      checkSigningRegistration({ signingSecret: 'A', url: '/in' }, { ...env, ...extra })?.reason;
    expect(check({})).toBe('SIGNING_SECRET_NOT_BOUND');
    expect(check({ APP_URL: 'https://a.example/app' })).toBeUndefined();
    expect(check({ APP_URL: 'https://a.example', INTERNAL_APP_URL: 'http://svc:80' })).toBe(
      'SIGNING_SECRET_NOT_BOUND',
    );
  });
});

describe('registration', () => {
  const temp = useTempStore();
  const env = Object.freeze({
    AGENTHOOKS_SIGNING_SECRET_A: OLD,
    AGENTHOOKS_SIGNING_ORIGINS_A: 'https://a.example',
  });
  function hook(init: MessageInitShape<typeof WebhookSchema>) {
    return create(HookSchema, { id: 'h', type: HookType.AFTER_STEP, webhook: init });
  }
  function refusal(
    webhook: MessageInitShape<typeof WebhookSchema>,
    signingEnv: () => Readonly<Record<string, string | undefined>> = () => env,
  ) {
    try {
      validateHooks([hook(webhook)], 'hooks', { signingEnv });
    } catch (e: unknown) {
      if (e instanceof InvalidArgumentError) return { field: e.field, reason: e.reason };
      throw e;
    }
    return undefined;
  }

  it('accepts a declared secret bound to the origin', () => {
    expect(refusal({ url: 'https://a.example/in', signingSecret: 'A' })).toBeUndefined();
  });

  it('refuses an undeclared secret, naming the field', () => {
    expect(refusal({ url: 'https://a.example/in', signingSecret: 'B' })).toEqual({
      field: 'hooks[0].webhook.signingSecret',
      reason: 'UNDECLARED_SIGNING_SECRET',
    });
  });

  it("refuses a declared secret for another receiver's origin", () => {
    expect(refusal({ url: 'https://evil.example/in', signingSecret: 'A' })).toEqual({
      field: 'hooks[0].webhook.signingSecret',
      reason: 'SIGNING_SECRET_NOT_BOUND',
    });
    expect(refusal({ url: 'https://a.example:8443/in', signingSecret: 'A' })?.reason).toBe(
      'SIGNING_SECRET_NOT_BOUND',
    );
  });

  it('refuses any named secret where nothing is declared', () => {
    expect(refusal({ url: 'https://a.example/in', signingSecret: 'A' }, () => ({}))?.reason).toBe(
      'UNDECLARED_SIGNING_SECRET',
    );
  });

  it('refuses a named secret on a registry given no declaration', async () => {
    const registry = new HookRegistry(temp.open());
    await expect(
      registry.register('op', undefined, [
        hook({ url: 'https://a.example/in', signingSecret: 'A' }),
      ]),
    ).rejects.toMatchObject({ reason: 'UNDECLARED_SIGNING_SECRET' });
  });

  it('leaves the rule to delivery for a stored hook', () => {
    expect(() =>
      validateStoredHook(hook({ url: 'https://a.example/in', signingSecret: 'A' })),
    ).not.toThrow();
  });

  it('holds an environment hook to the same rule', () => {
    const base = {
      AGENT_HOOK_WEBHOOK_URL: 'https://b.example/in',
      AGENT_HOOK_WEBHOOK_TOKEN: 't',
      AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
      AGENT_HOOK_WEBHOOK_SIGNING_SECRET: 'A',
    };
    const refused = environmentHooks({ ...env, ...base });
    expect(refused.ok).toBe(false);
    if (!refused.ok)
      expect(refused.error.metadata.variables).toBe('AGENT_HOOK_WEBHOOK_SIGNING_SECRET');
    const bound = environmentHooks({
      ...env,
      ...base,
      AGENT_HOOK_WEBHOOK_URL: 'https://a.example/in',
    });
    expect(bound.ok && bound.hooks[0]?.webhook?.signingSecret).toBe('A');
  });
});

describe('signed delivery', () => {
  let receivers: Receiver[] = [];
  let senders: WebhookSender[] = [];
  let qstash: FakeQStash | undefined;

  afterEach(async () => {
    await Promise.all(senders.map((s) => s.close()));
    await Promise.all(receivers.map((r) => r.close()));
    await qstash?.close();
    senders = [];
    receivers = [];
    qstash = undefined;
    vi.restoreAllMocks();
  });

  async function setup(answer = {}) {
    const r = await startReceiver({ answer });
    receivers.push(r);
    const env: Record<string, string> = {
      AGENTHOOKS_SIGNING_SECRET_A: `${OLD} ${NEW}`,
      AGENTHOOKS_SIGNING_ORIGINS_A: r.url,
    };
    const s = new WebhookSender({ env: () => env, qstashUrl: qstash?.url });
    senders.push(s);
    return { r, s, env };
  }

  function webhook(url: string, init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
    return create(WebhookSchema, { signingSecret: 'A', ...init, url });
  }

  it('signs a notification over the exact body sent', async () => {
    const { r, s } = await setup();
    const result = await s.notify(webhook(`${r.url}/in`), PAYLOAD);
    expect(result.ok).toBe(true);
    const [req] = await r.waitForRequests(1);
    if (req === undefined) throw new Error('no request');
    expect(req.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
    for (const k of [OLD, NEW])
      expect(new StandardWebhook(k).verify(req.body, headersOf(req))).toEqual(PAYLOAD);
  });

  it('signs a request that waited for a connection when it goes out, not when it was made', async () => {
    const held: ServerResponse[] = [];
    const r = await startReceiver({ answer: (_req, res) => void held.push(res) });
    receivers.push(r);
    const env = { AGENTHOOKS_SIGNING_SECRET_A: OLD, AGENTHOOKS_SIGNING_ORIGINS_A: r.url };
    const s = new WebhookSender({ env: () => env, connectionsPerOrigin: 1 });
    senders.push(s);
    const start = Date.parse('2026-01-01T00:00:00Z');
    vi.useFakeTimers({ toFake: ['Date'], now: start });
    try {
      const first = s.notify(webhook(`${r.url}/first`), PAYLOAD);
      await r.waitForRequests(1);
      const second = s.notify(webhook(`${r.url}/second`), PAYLOAD);
      // One turn: the second call runs as far as it can while the one connection is busy.
      await new Promise((resolve) => setImmediate(resolve));
      // Ten minutes with the connection held (a slow control), past the receivers' 5.
      vi.setSystemTime(start + 600_000);
      const answer = (res: ServerResponse | undefined) => res?.writeHead(204).end();
      answer(held.shift());
      expect((await first).ok).toBe(true);
      const [, req] = await r.waitForRequests(2);
      answer(held.shift());
      expect((await second).ok).toBe(true);
      if (req === undefined) throw new Error('no second request');
      expect(req.headers['webhook-timestamp']).toBe(String((start + 600_000) / 1000));
      expect(new StandardWebhook(OLD).verify(req.body, headersOf(req))).toEqual(PAYLOAD);
    } finally {
      vi.useRealTimers();
    }
  });

  it('signs a control request read with post()', async () => {
    const { r, s } = await setup({ json: { decision: 'allow' } });
    const response = await s.post(
      webhook(`${r.url}/c`, { responseHandling: ResponseHandling.TOOL_CALL }),
      PAYLOAD,
    );
    expect(response.ok).toBe(true);
    if (response.ok) await response.body.dump();
    const [req] = await r.waitForRequests(1);
    if (req === undefined) throw new Error('no request');
    expect(new StandardWebhook(OLD).verify(req.body, headersOf(req))).toEqual(PAYLOAD);
  });

  it('fails a hook whose secret is gone or no longer bound, sending nothing', async () => {
    const { r, s, env } = await setup();
    env.AGENTHOOKS_SIGNING_ORIGINS_A = 'https://elsewhere.example';
    const unbound = await s.notify(webhook(`${r.url}/in`), PAYLOAD);
    expect(unbound).toMatchObject({
      ok: false,
      code: 'configuration',
      rule: 'SIGNING_SECRET_NOT_BOUND',
    });
    delete env.AGENTHOOKS_SIGNING_SECRET_A;
    delete env.AGENTHOOKS_SIGNING_ORIGINS_A;
    const gone = await s.notify(webhook(`${r.url}/in`), PAYLOAD);
    expect(gone).toMatchObject({
      ok: false,
      code: 'configuration',
      rule: 'UNDECLARED_SIGNING_SECRET',
    });
    env.AGENTHOOKS_SIGNING_SECRET_A = OLD;
    const invalid = await s.notify(webhook(`${r.url}/in`), PAYLOAD);
    expect(invalid).toMatchObject({ ok: false, code: 'configuration' });
    expect(inspect([unbound, gone, invalid])).not.toContain(OLD);
    expect(r.count()).toBe(0);
  });

  it('fails a hook that must not be sent at once, even while its origin has no free connection', async () => {
    const held: ServerResponse[] = [];
    const r = await startReceiver({ answer: (_req, res) => void held.push(res) });
    receivers.push(r);
    const env: Record<string, string> = {
      AGENTHOOKS_SIGNING_SECRET_A: OLD,
      AGENTHOOKS_SIGNING_ORIGINS_A: r.url,
    };
    const s = new WebhookSender({ env: () => env, connectionsPerOrigin: 1 });
    senders.push(s);
    const busy = s.notify(webhook(`${r.url}/busy`), PAYLOAD);
    await r.waitForRequests(1);
    // The one connection is held; the hook's timeout (5 s) is what a wait would end with.
    const undeclared = await s.notify(
      webhook(`${r.url}/x`, { signingSecret: 'MISSING', timeout: 5 }),
      PAYLOAD,
    );
    expect(undeclared).toMatchObject({
      ok: false,
      code: 'configuration',
      rule: 'UNDECLARED_SIGNING_SECRET',
    });
    held.shift()?.writeHead(204).end();
    expect((await busy).ok).toBe(true);
    expect(r.count()).toBe(1);
  });

  /** A sender with one connection per origin, and a receiver that holds each request until answered. */
  async function oneConnection() {
    const held: ServerResponse[] = [];
    const r = await startReceiver({ answer: (_req, res) => void held.push(res) });
    receivers.push(r);
    // Replaced, never changed in place, as each reload of the environment makes a new one.
    let env: Readonly<Record<string, string>> = Object.freeze({
      AGENTHOOKS_SIGNING_SECRET_A: OLD,
      AGENTHOOKS_SIGNING_ORIGINS_A: r.url,
    });
    const reload = (patch: Record<string, string>) => {
      env = Object.freeze({ ...env, ...patch });
    };
    const s = new WebhookSender({ env: () => env, connectionsPerOrigin: 1 });
    senders.push(s);
    const answerNext = () => held.shift()?.writeHead(204).end();
    return { r, s, reload, answerNext };
  }

  it('decides again for a request that waited for a connection: an origin unbound meanwhile gets nothing', async () => {
    const { r, s, reload, answerNext } = await oneConnection();
    const first = s.notify(webhook(`${r.url}/first`), PAYLOAD);
    await r.waitForRequests(1);
    // Waits for the one connection, its rule already checked.
    const second = s.notify(webhook(`${r.url}/second`), PAYLOAD);
    reload({ AGENTHOOKS_SIGNING_ORIGINS_A: 'https://elsewhere.example' });
    answerNext();
    expect((await first).ok).toBe(true);
    expect(await second).toMatchObject({
      ok: false,
      code: 'configuration',
      rule: 'SIGNING_SECRET_NOT_BOUND',
    });
    expect(r.requests.map((req) => req.path)).toEqual(['/first']);
  });

  it('signs a request that waited for a connection with the keys declared when it goes out', async () => {
    const { r, s, reload, answerNext } = await oneConnection();
    const first = s.notify(webhook(`${r.url}/first`), PAYLOAD);
    await r.waitForRequests(1);
    const second = s.notify(webhook(`${r.url}/second`), PAYLOAD);
    // Rotated while it waited: OLD removed.
    reload({ AGENTHOOKS_SIGNING_SECRET_A: NEW });
    answerNext();
    expect((await first).ok).toBe(true);
    const [, req] = await r.waitForRequests(2);
    answerNext();
    expect((await second).ok).toBe(true);
    if (req === undefined) throw new Error('no second request');
    expect(new StandardWebhook(NEW).verify(req.body, headersOf(req))).toEqual(PAYLOAD);
    expect(() => new StandardWebhook(OLD).verify(req.body, headersOf(req))).toThrow();
  });

  /** A QStash hook with a fetch fallback, through a sender with one connection per origin. */
  async function queuedPublish() {
    qstash = await startFakeQStash('qtoken');
    const r = await startReceiver({ answer: {} });
    receivers.push(r);
    let env: Readonly<Record<string, string>> = Object.freeze({
      QSTASH_TOKEN: 'qtoken',
      AGENTHOOKS_SIGNING_SECRET_A: OLD,
      AGENTHOOKS_SIGNING_ORIGINS_A: r.url,
    });
    const reload = (patch: Record<string, string>) => {
      env = Object.freeze({ ...env, ...patch });
    };
    const s = new WebhookSender({ env: () => env, qstashUrl: qstash.url, connectionsPerOrigin: 1 });
    senders.push(s);
    const hook = webhook(`${r.url}/q`, { delivery: Delivery.QSTASH, fallback: Fallback.FETCH });
    const fake = qstash;
    // The first publish holds the one connection to QStash until released.
    fake.behaviour = { kind: 'hold' };
    const first = s.notify(hook, PAYLOAD);
    await fake.received(1);
    const second = s.notify(hook, PAYLOAD);
    // One turn: the second publish, signed, waits in the queue for the one connection.
    await new Promise((resolve) => setImmediate(resolve));
    const release = async () => {
      fake.behaviour = { kind: 'accept' };
      expect(fake.release()).toBe(1);
      expect(await first).toMatchObject({ ok: true, route: 'qstash' });
    };
    return { r, reload, fake, second, release };
  }

  it('drops a queued publish whose origin was unbound meanwhile; its fallback sends nothing', async () => {
    const { r, reload, fake, second, release } = await queuedPublish();
    reload({ AGENTHOOKS_SIGNING_ORIGINS_A: 'https://elsewhere.example' });
    await release();
    expect(await second).toMatchObject({
      ok: false,
      code: 'configuration',
      rule: 'SIGNING_SECRET_NOT_BOUND',
    });
    expect(fake.publishes).toHaveLength(1);
    // Only the first message, which the fake QStash forwarded.
    await r.waitForRequests(1);
    expect(r.count()).toBe(1);
  });

  it('sends a queued publish on through QStash when a key was only added meanwhile (a rotation begins)', async () => {
    const { r, reload, fake, second, release } = await queuedPublish();
    reload({ AGENTHOOKS_SIGNING_SECRET_A: `${OLD} ${NEW}` });
    await release();
    expect(await second).toMatchObject({ ok: true, route: 'qstash' });
    expect(fake.publishes).toHaveLength(2);
    const [, forwarded] = await r.waitForRequests(2);
    if (forwarded === undefined) throw new Error('missing request');
    expect(new StandardWebhook(OLD).verify(forwarded.body, headersOf(forwarded))).toEqual(PAYLOAD);
  });

  it('drops a queued publish signed with a key removed meanwhile; its fallback signs with the new one', async () => {
    const { r, reload, fake, second, release } = await queuedPublish();
    reload({ AGENTHOOKS_SIGNING_SECRET_A: NEW });
    await release();
    expect(await second).toMatchObject({ ok: true, route: 'fallback' });
    expect(fake.publishes).toHaveLength(1);
    const [forwarded, fallback] = await r.waitForRequests(2);
    if (forwarded === undefined || fallback === undefined) throw new Error('missing requests');
    expect(new StandardWebhook(OLD).verify(forwarded.body, headersOf(forwarded))).toEqual(PAYLOAD);
    expect(new StandardWebhook(NEW).verify(fallback.body, headersOf(fallback))).toEqual(PAYLOAD);
    expect(() => new StandardWebhook(OLD).verify(fallback.body, headersOf(fallback))).toThrow();
  });

  it('sends a hook naming no secret unsigned unless DEFAULT is bound to its origin', async () => {
    const { r, s, env } = await setup();
    await s.notify(webhook(`${r.url}/in`, { signingSecret: '' }), PAYLOAD);
    env.AGENTHOOKS_SIGNING_SECRET_DEFAULT = OTHER;
    env.AGENTHOOKS_SIGNING_ORIGINS_DEFAULT = r.url;
    await s.notify(webhook(`${r.url}/in`, { signingSecret: '' }), PAYLOAD);
    const [plain, signed] = await r.waitForRequests(2);
    expect(plain?.headers['webhook-signature']).toBeUndefined();
    if (signed === undefined) throw new Error('no request');
    expect(new StandardWebhook(OTHER).verify(signed.body, headersOf(signed))).toEqual(PAYLOAD);
  });

  it('forwards the signature through QStash, and a fallback keeps the message id', async () => {
    qstash = await startFakeQStash('qtoken');
    const { r, s, env } = await setup();
    env.QSTASH_TOKEN = 'qtoken';
    const hook = webhook(`${r.url}/q`, { delivery: Delivery.QSTASH, fallback: Fallback.FETCH });
    expect(await s.notify(hook, PAYLOAD)).toMatchObject({ ok: true, route: 'qstash' });
    expect(qstash.violations).toEqual([]);
    expect(qstash.publishes[0]?.forwarded['webhook-signature']).toMatch(/^v1,/);
    qstash.behaviour = { kind: 'status', status: 500 };
    expect(await s.notify(hook, PAYLOAD)).toMatchObject({ ok: true, route: 'fallback' });
    const [viaQStash, fallback] = await r.waitForRequests(2);
    if (viaQStash === undefined || fallback === undefined) throw new Error('missing requests');
    for (const req of [viaQStash, fallback]) {
      expect(new StandardWebhook(NEW).verify(req.body, headersOf(req))).toEqual(PAYLOAD);
    }
    // The failed publish and its fallback are one message.
    expect(qstash.publishes[1]?.forwarded['webhook-id']).toBe(fallback.headers['webhook-id']);
    expect(fallback.headers['webhook-id']).not.toBe(viaQStash.headers['webhook-id']);
  });
});
