/**
 * @module The operator's policy on caller hooks, beyond the reference rules:
 * the `allowedEnvVars` allowlist, denied webhook destinations, size limits,
 * linear-time matchers, and the hook limit per operation (with a real
 * SQLite store in a temporary folder).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, type MessageInitShape, toJsonString } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { DestinationPolicy } from '../../src/delivery/destination.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { HookRegistry, MAX_OPERATION_CONFIG_BYTES } from '../../src/hooks/registry.js';
import {
  DEFAULT_HOOK_LIMITS,
  MAX_HOOK_ID_BYTES,
  MAX_OPERATION_ID_BYTES,
  REASON,
  type ValidationOptions,
  validateHooks,
} from '../../src/hooks/validate.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { HOOK_CONFIG_TOO_LARGE } from '../../src/store/store.js';

type HookInit = MessageInitShape<typeof HookSchema>;

function hook(init: HookInit): Hook {
  return create(HookSchema, init);
}

function webhookHook(id: string, webhook: NonNullable<HookInit['webhook']>): Hook {
  return hook({ id, type: HookType.AFTER_STEP, webhook });
}

/** Returns the InvalidArgumentError `fn` throws (or the rejection of its promise). */
async function refusal(fn: () => unknown): Promise<InvalidArgumentError> {
  try {
    await fn();
  } catch (e: unknown) {
    if (e instanceof InvalidArgumentError) return e;
    throw e;
  }
  throw new Error('expected an InvalidArgumentError, nothing was thrown');
}

const STRICT: ValidationOptions = {
  callerEnvAllowlist: new Set(['HOOK_TOKEN']),
  destinations: new DestinationPolicy(),
};

describe('allowedEnvVars allowlist', () => {
  it('accepts names on the allowlist and refuses others, naming the entry', async () => {
    expect(() =>
      validateHooks(
        [webhookHook('a', { url: 'https://h.test/x', allowedEnvVars: ['HOOK_TOKEN'] })],
        'hooks',
        STRICT,
      ),
    ).not.toThrow();
    const e = await refusal(() =>
      validateHooks(
        [
          webhookHook('a', { url: 'https://h.test/x' }),
          webhookHook('b', {
            url: 'https://h.test/x',
            allowedEnvVars: ['HOOK_TOKEN', 'AWS_SECRET'],
          }),
        ],
        'hooks',
        STRICT,
      ),
    );
    expect(e).toMatchObject({
      field: 'hooks[1].webhook.allowedEnvVars[1]',
      reason: REASON.ENV_VAR_NOT_ALLOWED,
    });
  });

  it('reports a malformed name before a name off the allowlist', async () => {
    const e = await refusal(() =>
      validateHooks(
        [webhookHook('a', { url: 'https://h.test/x', allowedEnvVars: ['OTHER', '1BAD'] })],
        'hooks',
        STRICT,
      ),
    );
    expect(e).toMatchObject({
      field: 'hooks[0].webhook.allowedEnvVars[1]',
      reason: REASON.INVALID_ENV_VAR_NAME,
    });
  });

  it('refuses every name in a registry built without options', async () => {
    const registry = new HookRegistry(openTempStore());
    const e = await refusal(() =>
      registry.register('op', undefined, [
        webhookHook('a', { url: 'https://h.test/x', allowedEnvVars: ['HOME'] }),
      ]),
    );
    expect(e.reason).toBe(REASON.ENV_VAR_NOT_ALLOWED);
  });
});

describe('webhook destinations at registration', () => {
  it.each([
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://169.254.169.254.:80/',
    'http://0xA9FEA9FE/',
    'http://[fd00:ec2::254]/',
    'http://[::ffff:169.254.169.254]/',
    'http://[fe80::1]:8080/',
    'https://metadata.google.internal/computeMetadata/v1/',
  ])('refuses %s with WEBHOOK_DESTINATION_DENIED', async (url) => {
    const e = await refusal(() => validateHooks([webhookHook('a', { url })], 'hooks', STRICT));
    expect(e).toMatchObject({
      field: 'hooks[0].webhook.url',
      reason: REASON.WEBHOOK_DESTINATION_DENIED,
    });
  });

  it('accepts loopback, names and relative URLs (checked on connect), and allowed addresses', () => {
    const urls = ['http://127.0.0.1:9000/h', 'http://[::1]/h', 'https://hooks.test/h', '/api/hook'];
    expect(() =>
      validateHooks(
        urls.map((url, i) => webhookHook(`h${i}`, { url })),
        'hooks',
        STRICT,
      ),
    ).not.toThrow();
    const allow = { destinations: new DestinationPolicy({ allow: ['169.254.170.2'] }) };
    expect(() =>
      validateHooks(
        [webhookHook('a', { url: 'http://169.254.170.2/v2/credentials' })],
        'hooks',
        allow,
      ),
    ).not.toThrow();
  });
});

describe('size limits', () => {
  it('refuses a matcher over 1,024 characters with MATCHER_TOO_LONG', async () => {
    // Character classes keep a long matcher within the program-size limit (one instruction each).
    const ok = '[ab]'.repeat(DEFAULT_HOOK_LIMITS.maxMatcherLength / 4);
    expect(ok).toHaveLength(DEFAULT_HOOK_LIMITS.maxMatcherLength);
    const long = `${ok}b`;
    const toolHook = (matcher: string) =>
      hook({ id: 'm', type: HookType.BEFORE_TOOL_CALL, matcher, handler: true });
    expect(() => validateHooks([toolHook(ok)])).not.toThrow();
    expect(await refusal(() => validateHooks([toolHook(long)]))).toMatchObject({
      field: 'hooks[0].matcher',
      reason: REASON.MATCHER_TOO_LONG,
    });
  });

  it('refuses more than 64 headers with TOO_MANY_HEADERS', async () => {
    const headers = (n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v']));
    expect(() =>
      validateHooks([webhookHook('a', { url: '/h', headers: headers(64) })]),
    ).not.toThrow();
    expect(
      await refusal(() => validateHooks([webhookHook('a', { url: '/h', headers: headers(65) })])),
    ).toMatchObject({ field: 'hooks[0].webhook.headers', reason: REASON.TOO_MANY_HEADERS });
  });

  it('refuses a header whose name and value exceed 8 KiB with HEADER_TOO_LARGE', async () => {
    const name = 'x-big';
    const fits = 'v'.repeat(DEFAULT_HOOK_LIMITS.maxHeaderBytes - name.length);
    expect(() =>
      validateHooks([webhookHook('a', { url: '/h', headers: { [name]: fits } })]),
    ).not.toThrow();
    // Bytes, not characters: one é is two UTF-8 bytes.
    const over = `${fits.slice(1)}é`;
    expect(
      await refusal(() =>
        validateHooks([webhookHook('a', { url: '/h', headers: { [name]: over } })]),
      ),
    ).toMatchObject({
      field: 'hooks[0].webhook.headers["x-big"]',
      reason: REASON.HEADER_TOO_LARGE,
    });
  });

  it('takes other limits from the options', async () => {
    const limits = { limits: { maxHeaders: 1 } };
    const e = await refusal(() =>
      validateHooks(
        [webhookHook('a', { url: '/h', headers: { a: '1', b: '2' } })],
        'hooks',
        limits,
      ),
    );
    expect(e.reason).toBe(REASON.TOO_MANY_HEADERS);
  });
});

describe('identifier and URL sizes', () => {
  /** A string of exactly `bytes` UTF-8 bytes that ends in a two-byte character. */
  const ofBytes = (bytes: number) => `${'a'.repeat(bytes - 2)}é`;

  it('accepts a hook id of 256 bytes and refuses 257 with HOOK_ID_TOO_LONG', async () => {
    const at = ofBytes(MAX_HOOK_ID_BYTES);
    expect(() => validateHooks([webhookHook(at, { url: '/h' })])).not.toThrow();
    const e = await refusal(() => validateHooks([webhookHook(`${at}a`, { url: '/h' })]));
    expect(e).toMatchObject({ field: 'hooks[0].id', reason: REASON.HOOK_ID_TOO_LONG });
    expect(e.message).toContain('256 bytes');
  });

  it('counts a hook id in UTF-8 bytes, not characters', async () => {
    // 129 two-byte characters: 129 characters, 258 bytes.
    const e = await refusal(() => validateHooks([webhookHook('é'.repeat(129), { url: '/h' })]));
    expect(e.reason).toBe(REASON.HOOK_ID_TOO_LONG);
  });

  it('accepts a webhook URL of 8 KiB and refuses one byte more with WEBHOOK_URL_TOO_LONG', async () => {
    const prefix = 'https://h.test/';
    const at = `${prefix}${ofBytes(DEFAULT_HOOK_LIMITS.maxUrlBytes - prefix.length)}`;
    expect(Buffer.byteLength(at)).toBe(8_192);
    expect(() => validateHooks([webhookHook('a', { url: at })])).not.toThrow();
    const e = await refusal(() => validateHooks([webhookHook('a', { url: `${at}a` })]));
    expect(e).toMatchObject({ field: 'hooks[0].webhook.url', reason: REASON.WEBHOOK_URL_TOO_LONG });
    expect(e.message).toContain('8192 bytes');
  });

  it('limits the operation id and the parent operation id of a registration to 256 bytes', async () => {
    const registry = new HookRegistry(openTempStore());
    const at = ofBytes(MAX_OPERATION_ID_BYTES);
    const hooks = [webhookHook('a', { url: '/h' })];
    expect(await registry.register(at, at, hooks)).toBe(1);
    expect(await refusal(() => registry.register(`${at}a`, undefined, hooks))).toMatchObject({
      field: 'operationId',
      reason: REASON.OPERATION_ID_TOO_LONG,
    });
    expect(await refusal(() => registry.register('op', `${at}a`, hooks))).toMatchObject({
      field: 'parentOperationId',
      reason: REASON.OPERATION_ID_TOO_LONG,
    });
    expect((await registry.hooksOf('op')).hooks).toEqual([]);
  });
});

describe('stored configuration per operation', () => {
  /** A hook whose stored JSON is exactly `bytes` bytes, padded in its webhook body. */
  function hookOfSize(id: string, bytes: number): Hook {
    const padded = (n: number) => webhookHook(id, { url: '/h', body: { pad: 'x'.repeat(n) } });
    const base = Buffer.byteLength(toJsonString(HookSchema, padded(0)));
    const out = padded(bytes - base);
    expect(Buffer.byteLength(toJsonString(HookSchema, out))).toBe(bytes);
    return out;
  }

  it('accepts up to 1 MiB of stored hooks per operation and refuses one byte more, storing nothing', async () => {
    const registry = new HookRegistry(openTempStore());
    const half = MAX_OPERATION_CONFIG_BYTES / 2;
    expect(await registry.register('op', undefined, [hookOfSize('a', half)])).toBe(1);
    const e = await refusal(() => registry.register('op', undefined, [hookOfSize('b', half + 1)]));
    expect(e).toMatchObject({ field: 'hooks', reason: HOOK_CONFIG_TOO_LARGE });
    expect(e.message).toContain('1048576 bytes');
    expect((await registry.hooksOf('op')).hooks.map((h) => h.id)).toEqual(['a']);
    expect(await registry.register('op', undefined, [hookOfSize('c', half)])).toBe(2);
  });

  it('counts each operation on its own', async () => {
    const registry = new HookRegistry(openTempStore());
    const full = hookOfSize('a', MAX_OPERATION_CONFIG_BYTES);
    expect(await registry.register('op1', undefined, [full])).toBe(1);
    expect(await registry.register('op2', undefined, [full])).toBe(1);
  });

  it('keeps hooks stored over the limit readable, and refuses only additions', async () => {
    const store = openTempStore();
    // Written as an older sidecar would have: through the store, with no limit.
    await store.appendHooks('op', undefined, [hookOfSize('big', MAX_OPERATION_CONFIG_BYTES + 10)]);
    const registry = new HookRegistry(store);
    expect((await registry.hooksOf('op')).hooks.map((h) => h.id)).toEqual(['big']);
    const e = await refusal(() =>
      registry.register('op', undefined, [webhookHook('b', { url: '/h' })]),
    );
    expect(e.reason).toBe(HOOK_CONFIG_TOO_LARGE);
    expect((await registry.hooksOf('op')).hooks).toHaveLength(1);
  });
});

describe('linear-time matchers', () => {
  const toolHook = (matcher: string) =>
    hook({ id: 'm', type: HookType.AFTER_TOOL_CALL, matcher, handler: true });

  it.each([
    ['a backreference', '(a)\\1'],
    ['a named backreference', '(?<x>a)\\k<x>'],
    ['a lookahead', '(?=a)'],
    ['a negative lookahead', '^(?!fs/)'],
    ['a lookbehind', '(?<=fs)/read'],
    ['a negative lookbehind', '(?<!x)y'],
  ])('refuses %s with MATCHER_NOT_LINEAR', async (_, matcher) => {
    expect(await refusal(() => validateHooks([toolHook(matcher)]))).toMatchObject({
      field: 'hooks[0].matcher',
      reason: REASON.MATCHER_NOT_LINEAR,
    });
  });

  it('accepts a backtracking bomb, which runs in linear time', () => {
    expect(() => validateHooks([toolHook('(a+)+$')])).not.toThrow();
  });

  it('still refuses a pattern that is not JavaScript with INVALID_MATCHER', async () => {
    expect((await refusal(() => validateHooks([toolHook('fs/(read')]))).reason).toBe(
      REASON.INVALID_MATCHER,
    );
  });
});

describe('hooks per operation', () => {
  it('refuses a registration that would take the operation past the limit, storing nothing', async () => {
    const registry = new HookRegistry(openTempStore(), { maxHooksPerOperation: 3 });
    const batch = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => webhookHook(`${prefix}${i}`, { url: '/h' }));
    expect(await registry.register('op', undefined, batch('a', 2))).toBe(2);
    const e = await refusal(() => registry.register('op', undefined, batch('b', 2)));
    expect(e).toMatchObject({ field: 'hooks', reason: REASON.TOO_MANY_HOOKS });
    expect((await registry.hooksOf('op')).hooks.map((h) => h.id)).toEqual(['a0', 'a1']);
    expect(await registry.register('op', undefined, batch('c', 1))).toBe(3);
    expect((await refusal(() => registry.register('op2', undefined, batch('d', 4)))).reason).toBe(
      REASON.TOO_MANY_HOOKS,
    );
  });

  it('holds the limit for concurrent registrations of one operation', async () => {
    const registry = new HookRegistry(openTempStore(), { maxHooksPerOperation: 3 });
    const results = await Promise.allSettled(
      ['x', 'y', 'z'].map((p) =>
        registry.register('op', undefined, [
          webhookHook(`${p}0`, { url: '/h' }),
          webhookHook(`${p}1`, { url: '/h' }),
        ]),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await registry.hooksOf('op')).hooks).toHaveLength(2);
  });
});

let dirs: string[] = [];
let closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers) await close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs = [];
  closers = [];
});

function openTempStore() {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-policy-'));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, 'agenthooks.db'));
  closers.push(() => store.close());
  return store;
}
