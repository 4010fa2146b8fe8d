/**
 * @module Tests of the webhook rules (`webhook-rules.ts`): registration
 * (`validateHooks`) and delivery (the sender, by fetch, by QStash and as a
 * control) refuse the same webhooks with the same reason, because both call
 * the one rule module. Delivery requests go to an undici `MockAgent` that
 * allows no connection and records every call, so "refused" also means
 * "nothing sent".
 */
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  HookSchema,
  ResponseHandling,
  type Webhook,
  WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { executeControl } from '../../src/delivery/control.js';
import { DestinationPolicy } from '../../src/delivery/destination.js';
import { WebhookSender, type WebhookSenderOptions } from '../../src/delivery/webhook.js';
import {
  checkWebhookHeaders,
  checkWebhookUrl,
  isEnvVarName,
  isForbiddenHeaderName,
  resolveHeaderTemplate,
  WEBHOOK_RULE_REASON,
  type WebhookRuleReason,
  webhookRuleError,
} from '../../src/delivery/webhook-rules.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { type ValidationOptions, validateHooks } from '../../src/hooks/validate.js';

type WebhookInit = MessageInitShape<typeof WebhookSchema>;

const PAYLOAD: JsonObject = { hookId: 'h', hookType: 'afterStep', stepIndex: 0 };

const HOOK_URL = 'https://hooks.example.test/in';

/** The one variable the webhooks below may read; the operator allows it too. */
const TOKEN_VAR = 'HOOK_TOKEN';

/** The effective environment of delivery: every variable set, so only the webhook is at fault. */
const ENV: Readonly<Record<string, string>> = {
  [TOKEN_VAR]: 'hook-secret',
  OTHER: 'other-secret',
  QSTASH_TOKEN: 'qstash-token',
  APP_URL: 'http://app.example.test',
  INTERNAL_APP_URL: 'http://app.example.test',
};

/** The operator's policy at registration, as the registry applies it. */
const REGISTRATION: ValidationOptions = {
  callerEnvAllowlist: new Set([TOKEN_VAR]),
  destinations: new DestinationPolicy(),
};

/** Literal `${VAR}` templates; not JavaScript template strings. */
const ALLOWED_TEMPLATE = 'Bearer ${HOOK_TOKEN}';
const OTHER_TEMPLATE = 'Bearer ${OTHER}';
const BAD_NAME_TEMPLATE = '${1TOKEN}';
const OPEN_TEMPLATE = 'Bearer ${HOOK_TOKEN';

/** How a delivery reaches its receiver. */
type Route = 'fetch' | 'qstash' | 'control';

interface RefusedCase {
  readonly name: string;
  readonly webhook: WebhookInit;
  /** Path of the refused field under the webhook. */
  readonly field: string;
  readonly reason: WebhookRuleReason;
  /** The delivery routes that refuse it: fetch and QStash unless said otherwise. */
  readonly routes?: readonly Route[];
  /** Type of the hook at registration. Default `afterStep`; a control needs a tool event. */
  readonly type?: HookType;
  /**
   * Delivered through the sender's own `Agent`, whose connector checks the
   * destination before connecting, rather than through a MockAgent.
   */
  readonly guarded?: boolean;
}

const headerCase = (
  name: string,
  headers: Record<string, string>,
  field: string,
  reason: WebhookRuleReason,
): RefusedCase => ({
  name,
  webhook: { url: HOOK_URL, headers, allowedEnvVars: [TOKEN_VAR] },
  field: `headers[${JSON.stringify(field)}]`,
  reason,
});

const urlCase = (name: string, url: string): RefusedCase => ({
  name,
  webhook: { url },
  field: 'url',
  reason: WEBHOOK_RULE_REASON.INVALID_WEBHOOK_URL,
});

const timeoutCase = (timeout: number): RefusedCase => ({
  name: `timeout ${timeout}`,
  webhook: { url: HOOK_URL, timeout },
  field: 'timeout',
  reason: WEBHOOK_RULE_REASON.INVALID_WEBHOOK_TIMEOUT,
});

const REFUSED: readonly RefusedCase[] = [
  headerCase('a header name with a space', { 'Bad Name': 'v' }, 'Bad Name', 'INVALID_HEADER_NAME'),
  headerCase('a header name with a colon', { 'X:Y': 'v' }, 'X:Y', 'INVALID_HEADER_NAME'),
  headerCase('the Host header', { Host: 'evil.test' }, 'Host', 'FORBIDDEN_HEADER'),
  headerCase(
    'a Proxy- header',
    { 'Proxy-Authorization': 'x' },
    'Proxy-Authorization',
    'FORBIDDEN_HEADER',
  ),
  headerCase(
    'an Upstash- header',
    { 'Upstash-Retries': '3' },
    'Upstash-Retries',
    'FORBIDDEN_HEADER',
  ),
  // undici fails every request that carries them: refused up front, not at each delivery.
  headerCase(
    'a Keep-Alive header',
    { 'Keep-Alive': 'timeout=5' },
    'Keep-Alive',
    'FORBIDDEN_HEADER',
  ),
  headerCase('an Expect header', { Expect: '100-continue' }, 'Expect', 'FORBIDDEN_HEADER'),
  headerCase(
    'two names that differ only in case',
    { 'X-Tenant': 'a', 'x-tenant': 'b' },
    'x-tenant',
    'DUPLICATE_HEADER',
  ),
  headerCase('a value with CR LF', { 'X-A': 'a\r\nX-Injected: 1' }, 'X-A', 'INVALID_HEADER_VALUE'),
  headerCase('a value with NUL', { 'X-A': 'a\0b' }, 'X-A', 'INVALID_HEADER_VALUE'),
  headerCase(
    'a value with a control character',
    { 'X-A': 'a\x01b' },
    'X-A',
    'INVALID_HEADER_VALUE',
  ),
  headerCase('a value outside Latin-1', { 'X-A': '\u20ac' }, 'X-A', 'INVALID_HEADER_VALUE'),
  headerCase(
    'a template of a variable not in allowedEnvVars',
    { Authorization: OTHER_TEMPLATE },
    'Authorization',
    'INVALID_HEADER_TEMPLATE',
  ),
  headerCase(
    'a template whose name is not a variable name',
    { 'X-A': BAD_NAME_TEMPLATE },
    'X-A',
    'INVALID_HEADER_TEMPLATE',
  ),
  headerCase(
    'an unterminated template',
    { 'X-A': OPEN_TEMPLATE },
    'X-A',
    'INVALID_HEADER_TEMPLATE',
  ),
  urlCase('a non-HTTP(S) URL', 'ftp://hooks.example.test/in'),
  urlCase('a URL with credentials', 'https://user:pw@hooks.example.test/in'),
  urlCase('a URL with a username only', 'https://user@hooks.example.test/in'),
  urlCase('a protocol-relative URL', '//hooks.example.test/in'),
  urlCase('a URL with a backslash', 'https://hooks.example.test\\@evil.test/'),
  urlCase('a relative URL whose tab the parser drops, leaving //host', '/\t/evil.test/in'),
  urlCase('a relative URL whose newline the parser drops', '/\n/evil.test/in'),
  urlCase('an absolute URL with a carriage return', 'https://hooks.example.test/\rin'),
  urlCase('an empty URL', ''),
  urlCase('a URL that does not parse', 'not a url'),
  ...[0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2_147_483.648].map(timeoutCase),
  {
    name: 'a control with QStash delivery',
    webhook: {
      url: HOOK_URL,
      responseHandling: ResponseHandling.TOOL_CALL,
      delivery: Delivery.QSTASH,
    },
    field: 'delivery',
    reason: WEBHOOK_RULE_REASON.CONTROL_REQUIRES_FETCH,
    routes: ['control'],
    type: HookType.BEFORE_TOOL_CALL,
  },
  {
    name: 'a cloud metadata address',
    webhook: { url: 'http://169.254.169.254/latest/meta-data' },
    field: 'url',
    reason: WEBHOOK_RULE_REASON.WEBHOOK_DESTINATION_DENIED,
    // QStash connects to QStash, not to the URL: only a direct fetch is checked here.
    routes: ['fetch'],
    guarded: true,
  },
];

let closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(closers.map((close) => close()));
  closers = [];
});

/** A MockAgent that connects nowhere and records every request. */
function mockAgent(): MockAgent {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  closers.push(async () => {
    agent.assertNoPendingInterceptors();
    await agent.close();
  });
  return agent;
}

function sender(options: WebhookSenderOptions): WebhookSender {
  const s = new WebhookSender({ env: () => ENV, ...options });
  closers.push(() => s.close());
  return s;
}

function requestsOf(agent: MockAgent): number {
  return agent.getCallHistory()?.calls().length ?? 0;
}

/** The InvalidArgumentError registration throws for one hook with `webhook`, or undefined. */
function registrationError(
  webhook: WebhookInit,
  type: HookType = HookType.AFTER_STEP,
  options: ValidationOptions = REGISTRATION,
): InvalidArgumentError | undefined {
  const hook = create(HookSchema, { id: 'h', type, webhook });
  try {
    validateHooks([hook], 'hooks', options);
  } catch (e: unknown) {
    if (e instanceof InvalidArgumentError) return e;
    throw e;
  }
  return undefined;
}

/** What a delivery ended with: the failure's code and rule, and the requests it made. */
interface Delivered {
  readonly code: string | undefined;
  readonly rule: string | undefined;
  readonly requests: number;
}

/** Delivers `init` by `route` and returns how it ended. */
async function deliver(c: RefusedCase, route: Route): Promise<Delivered> {
  const webhook: Webhook = create(WebhookSchema, c.webhook);
  if (route === 'qstash') {
    webhook.delivery = Delivery.QSTASH;
    // No fallback: the QStash failure is the result, not a second try by fetch.
    webhook.fallback = Fallback.NONE;
  }
  if (c.guarded === true) {
    // The connector refuses before connecting; no socket is opened.
    const result = await sender({}).notify(webhook, PAYLOAD);
    return result.ok
      ? { code: undefined, rule: undefined, requests: 1 }
      : { code: result.code, rule: result.rule, requests: 0 };
  }
  const agent = mockAgent();
  const s = sender({ dispatcher: agent });
  if (route === 'control') {
    const result = await executeControl(s, webhook, PAYLOAD);
    return result.status === 'error'
      ? { code: result.code, rule: result.rule, requests: requestsOf(agent) }
      : { code: undefined, rule: undefined, requests: requestsOf(agent) };
  }
  const result = await s.notify(webhook, PAYLOAD);
  return result.ok
    ? { code: undefined, rule: undefined, requests: requestsOf(agent) }
    : { code: result.code, rule: result.rule, requests: requestsOf(agent) };
}

describe('registration and delivery', () => {
  const rows = REFUSED.flatMap((c) =>
    (c.routes ?? ['fetch', 'qstash']).map((route) => ({ ...c, route })),
  );

  it.each(rows)('refuse $name with the same reason ($route)', async (c) => {
    const refused = registrationError(c.webhook, c.type);
    expect(refused).toBeInstanceOf(InvalidArgumentError);
    expect(refused).toMatchObject({ reason: c.reason, field: `hooks[0].webhook.${c.field}` });

    const delivered = await deliver(c, c.route);
    expect(delivered).toEqual({
      code: c.reason === 'WEBHOOK_DESTINATION_DENIED' ? 'destination_denied' : 'configuration',
      rule: c.reason,
      requests: 0,
    });
  });

  it('accept and send a webhook that follows every rule', async () => {
    const webhook: WebhookInit = {
      url: HOOK_URL,
      timeout: 2_147_483.647,
      // A Latin-1 value with a literal `$` next to a template of an allowed variable.
      headers: { Authorization: ALLOWED_TEMPLATE, 'X-Price': '$5 \u00e9 ${HOOK_TOKEN}' },
      allowedEnvVars: [TOKEN_VAR],
    };
    expect(registrationError(webhook)).toBeUndefined();
    const agent = mockAgent();
    agent
      .get('https://hooks.example.test')
      .intercept({
        path: '/in',
        method: 'POST',
        headers: { authorization: 'Bearer hook-secret', 'x-price': '$5 \u00e9 hook-secret' },
      })
      .reply(204);
    const result = await sender({ dispatcher: agent }).notify(
      create(WebhookSchema, webhook),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: true, status: 204 });
  });
});

interface EnvironmentCase {
  readonly name: string;
  readonly webhook: WebhookInit;
  readonly env: Readonly<Record<string, string>>;
  readonly reason: WebhookRuleReason;
}

describe('a registered webhook', () => {
  it.each<EnvironmentCase>([
    {
      name: 'its allowed variable is unset',
      webhook: {
        url: HOOK_URL,
        headers: { Authorization: ALLOWED_TEMPLATE },
        allowedEnvVars: [TOKEN_VAR],
      },
      env: {},
      reason: 'INVALID_HEADER_TEMPLATE',
    },
    {
      name: 'its variable holds CR LF',
      webhook: {
        url: HOOK_URL,
        headers: { Authorization: ALLOWED_TEMPLATE },
        allowedEnvVars: [TOKEN_VAR],
      },
      env: { [TOKEN_VAR]: 'x\r\nX-Injected: 1' },
      reason: 'INVALID_HEADER_VALUE',
    },
    {
      name: 'its variable holds a template opener',
      webhook: {
        url: HOOK_URL,
        headers: { Authorization: ALLOWED_TEMPLATE },
        allowedEnvVars: [TOKEN_VAR],
      },
      env: { [TOKEN_VAR]: '${OTHER}' },
      reason: 'INVALID_HEADER_TEMPLATE',
    },
    {
      name: 'its relative URL has no base',
      webhook: { url: '/api/hooks' },
      env: {},
      reason: 'INVALID_WEBHOOK_URL',
    },
    {
      name: 'its relative URL resolves against a base with credentials',
      webhook: { url: '/api/hooks' },
      env: { INTERNAL_APP_URL: 'http://user:pw@app.example.test' },
      reason: 'INVALID_WEBHOOK_URL',
    },
  ])('fails only at send time when $name, by the same rule', async ({ webhook, env, reason }) => {
    expect(registrationError(webhook)).toBeUndefined();
    const agent = mockAgent();
    const result = await sender({ dispatcher: agent, env: () => env }).notify(
      create(WebhookSchema, webhook),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'configuration', rule: reason });
    expect(requestsOf(agent)).toBe(0);
  });
});

describe('registration and fetch delivery, for any webhook', () => {
  const text = fc.oneof(
    fc.string({ maxLength: 8 }),
    fc.constantFrom(
      '',
      'Host',
      'X-A',
      'x-a',
      'sec-x',
      ALLOWED_TEMPLATE,
      OTHER_TEMPLATE,
      OPEN_TEMPLATE,
      BAD_NAME_TEMPLATE,
      '$${HOOK_TOKEN}{',
      '${',
      '\r\n',
      '\x01',
      '\u00e9',
      '\u20ac',
      '\ud800',
    ),
  );
  const webhook = fc.record(
    {
      url: fc.oneof(
        fc.webUrl({ withQueryParameters: true }),
        fc.constantFrom('/api/hooks', '//h.test/x', 'ftp://h.test/', 'http://u:p@h.test/', ''),
        text,
      ),
      headers: fc.dictionary(text, text, { maxKeys: 4 }),
      allowedEnvVars: fc.subarray([TOKEN_VAR]),
      timeout: fc.oneof(fc.double(), fc.constantFrom(0.001, 30, 2_147_483.647, 2_147_483.648)),
    },
    { requiredKeys: ['url'] },
  );

  it('refuse the same webhooks with the same reason, and send the others', async () => {
    await fc.assert(
      fc.asyncProperty(webhook, async (init) => {
        // No destination policy: the MockAgent has no connector to check destinations.
        const refused = registrationError(init, HookType.AFTER_STEP, {
          callerEnvAllowlist: REGISTRATION.callerEnvAllowlist,
        });
        const agent = mockAgent();
        const result = await sender({ dispatcher: agent }).post(
          create(WebhookSchema, init),
          PAYLOAD,
        );
        if (refused === undefined) {
          // The MockAgent connects nowhere: a webhook that passed every rule
          // went to the dispatcher and failed there (MockAgent does not record
          // every such request: it refuses a `//` path before its call history).
          expect(result).toMatchObject({ ok: false, code: 'network_error' });
          expect(!result.ok && result.rule).toBeUndefined();
        } else {
          expect(result).toMatchObject({ ok: false, code: 'configuration', rule: refused.reason });
          expect(requestsOf(agent)).toBe(0);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('the webhook rules', () => {
  it('treat header names as forbidden by whole name or prefix, in any case', () => {
    expect(isForbiddenHeaderName('HOST')).toBe(true);
    expect(isForbiddenHeaderName('proxy-')).toBe(true);
    expect(isForbiddenHeaderName('X-Host')).toBe(false);
    expect(isForbiddenHeaderName('Hostname')).toBe(false);
    expect(isForbiddenHeaderName('Secret')).toBe(false);
    expect(isForbiddenHeaderName('Authorization')).toBe(false);
  });

  it('take the upstream variable names', () => {
    for (const name of ['HOOK_TOKEN', '_PRIVATE', 'lower_case', 'A1']) {
      expect(isEnvVarName(name), name).toBe(true);
    }
    for (const name of ['', '1TOKEN', 'HOOK-TOKEN', '${TOKEN}', 'TOKEN\u00e9']) {
      expect(isEnvVarName(name), name).toBe(false);
    }
  });

  it('resolve only templates of allowed, set variables', () => {
    const allowed = new Set([TOKEN_VAR]);
    expect(resolveHeaderTemplate(ALLOWED_TEMPLATE, allowed, ENV)).toBe('Bearer hook-secret');
    expect(resolveHeaderTemplate(OTHER_TEMPLATE, allowed, ENV)).toBe(OTHER_TEMPLATE);
    expect(resolveHeaderTemplate(ALLOWED_TEMPLATE, allowed, {})).toBe(ALLOWED_TEMPLATE);
  });

  it('accept a literal $ or { next to an allowed template', () => {
    const webhook = { headers: { 'X-A': '$${HOOK_TOKEN}{' }, allowedEnvVars: [TOKEN_VAR] };
    expect(checkWebhookHeaders(webhook)).toBeUndefined();
  });

  it('give a diagnostic for each way a URL breaks the rule, never the URL', () => {
    const diagnostics = [
      '',
      'https://h.test\\x',
      '//h.test/x',
      'ftp://h.test/',
      'https://u:secret@h.test/',
      'not a url',
    ].map((url) => checkWebhookUrl(url)?.diagnostic);
    expect(diagnostics).toEqual([
      'URL is invalid',
      'URL contains a backslash',
      'URL is protocol-relative',
      'URL is not HTTP(S)',
      'URL has credentials',
      'URL is invalid',
    ]);
    expect(checkWebhookUrl('/api/hooks')).toBeUndefined();
    expect(checkWebhookUrl('http://127.0.0.1:8080/hook?x=1')).toBeUndefined();
  });

  it('name the registration field under the webhook path, with the upstream message', () => {
    const violation = checkWebhookUrl('ftp://h.test/');
    expect(violation && webhookRuleError(violation, 'hooks[2].webhook')).toMatchObject({
      field: 'hooks[2].webhook.url',
      reason: 'INVALID_WEBHOOK_URL',
      message: 'Webhook URL must be HTTP(S) or an application-relative path without credentials',
    });
  });
});
