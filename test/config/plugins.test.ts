/** @module Tests of the operator plugins file: its shape, the registration rules, reloads and watching. */
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ModifyPoint, OnError } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  INVALID_PLUGINS,
  MAX_PLUGINS_FILE_BYTES,
  OperatorPlugins,
  type OperatorPluginsOptions,
} from '../../src/config/plugins.js';
import { DestinationPolicy } from '../../src/delivery/destination.js';
import { errorOf, recordingLogger, writeAtomically } from '../support/recording-logger.js';

const REDACT = {
  id: 'redact',
  point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
  webhook: { url: 'https://redactor.example/redact', onError: 'ON_ERROR_BLOCK' },
};
const LIMIT = {
  id: 'limit',
  point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
  matcher: '^search$',
  webhook: { url: 'https://policy.example/limit' },
};
const AUDIT = {
  id: 'audit',
  point: 'MODIFY_POINT_AFTER_PROVIDER_RESPONSE',
  webhook: { url: 'https://audit.example/seen', delivery: 'DELIVERY_QSTASH' },
};

/** A valid file: two plugins, three hooks. */
const VALID = {
  plugins: [
    { name: 'privacy', hooks: [REDACT, LIMIT] },
    { name: 'audit', hooks: [AUDIT] },
  ],
};

let dir: string;
let file: string;
const opened: OperatorPlugins[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agenthooks-plugins-'));
  file = join(dir, 'plugins.json');
});

afterEach(() => {
  for (const p of opened.splice(0)) p.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(text: string | undefined, options: Partial<OperatorPluginsOptions> = {}) {
  if (text !== undefined) writeFileSync(file, text);
  const log = recordingLogger('plugins reloaded');
  const plugins = new OperatorPlugins({
    pluginsFile: file,
    logger: log.logger,
    maxHooks: 1_000,
    watch: false,
    ...options,
  });
  opened.push(plugins);
  return { plugins, log };
}

/** The error of a file holding `json`, read once. */
function invalid(json: unknown, options: Partial<OperatorPluginsOptions> = {}) {
  const { plugins } = open(typeof json === 'string' ? json : JSON.stringify(json), options);
  return errorOf(() => plugins.hooksOrThrow());
}

describe('the operator plugins file', () => {
  it('gives no hooks and logs nothing without a file', () => {
    const log = recordingLogger('plugins reloaded');
    const plugins = new OperatorPlugins({ logger: log.logger, maxHooks: 10 });
    opened.push(plugins);
    expect(plugins.hooksOrThrow()).toEqual([]);
    expect(plugins.current().generation).toBe(1);
    expect(log.lines).toEqual([]);
  });

  it('reads every plugin in file order, each hook carrying its plugin name', () => {
    const { plugins, log } = open(JSON.stringify(VALID));
    const hooks = plugins.hooksOrThrow();
    expect(hooks.map((h) => [h.id, h.point, h.plugin])).toEqual([
      ['redact', ModifyPoint.TRANSFORM_CONTEXT, 'privacy'],
      ['limit', ModifyPoint.BEFORE_TOOL_CALL, 'privacy'],
      ['audit', ModifyPoint.AFTER_PROVIDER_RESPONSE, 'audit'],
    ]);
    expect(hooks[0]?.webhook?.onError).toBe(OnError.BLOCK);
    expect(hooks[1]?.matcher).toBe('^search$');
    expect(log.lines).toMatchObject([
      {
        msg: 'plugins reloaded',
        fields: { generation: 1, cause: 'start', valid: true, plugins: 2, hooks: 3 },
      },
    ]);
  });

  it('accepts a hook that names its own plugin, and an empty list', () => {
    const same = { plugins: [{ name: 'privacy', hooks: [{ ...REDACT, plugin: 'privacy' }] }] };
    expect(open(JSON.stringify(same)).plugins.hooksOrThrow()).toHaveLength(1);
    expect(open(JSON.stringify({ plugins: [] })).plugins.hooksOrThrow()).toEqual([]);
  });

  it.each([
    ['not JSON', '{"plugins": [', undefined, /is not JSON/],
    ['not an object', '[]', undefined, /must hold a JSON object/],
    [
      'an unknown top-level member',
      { plugins: [], plugin: [] },
      'plugin',
      /unknown member "plugin"/,
    ],
    ['plugins that are not an array', { plugins: {} }, 'plugins', /plugins must be an array/],
    ['a plugin that is not an object', { plugins: ['privacy'] }, 'plugins[0]', /an object/],
    [
      'a plugin without a name',
      { plugins: [{ hooks: [REDACT] }] },
      'plugins[0].name',
      /non-empty name/,
    ],
    [
      'a plugin listed twice',
      {
        plugins: [
          { name: 'p', hooks: [] },
          { name: 'p', hooks: [] },
        ],
      },
      'plugins[1].name',
      /listed twice/,
    ],
    [
      'an unknown plugin member',
      { plugins: [{ name: 'p', hooks: [], order: 1 }] },
      'plugins[0].order',
      /unknown member "order"/,
    ],
    [
      'hooks that are not an array',
      { plugins: [{ name: 'p', hooks: REDACT }] },
      'plugins[0].hooks',
      /hooks must be an array/,
    ],
    [
      'a lifecycle hook',
      {
        plugins: [
          {
            name: 'p',
            hooks: [{ id: 'x', type: 'HOOK_TYPE_AFTER_STEP', webhook: REDACT.webhook }],
          },
        ],
      },
      'plugins[0].hooks[0].type',
      /environment hooks/,
    ],
    [
      'a hook without a point',
      { plugins: [{ name: 'p', hooks: [{ id: 'x', webhook: REDACT.webhook }] }] },
      'plugins[0].hooks[0].point',
      /a point is required/,
    ],
    [
      'a handler hook',
      { plugins: [{ name: 'p', hooks: [{ ...REDACT, handler: true }] }] },
      'plugins[0].hooks[0].handler',
      /is a webhook/,
    ],
    [
      'a hook naming another plugin',
      { plugins: [{ name: 'p', hooks: [{ ...REDACT, plugin: 'q' }] }] },
      'plugins[0].hooks[0].plugin',
      /cannot name another plugin/,
    ],
    [
      'a hook with an unknown member',
      { plugins: [{ name: 'p', hooks: [{ ...REDACT, points: 'x' }] }] },
      'plugins[0].hooks[0]',
      /points/,
    ],
    [
      'a misspelled point',
      { plugins: [{ name: 'p', hooks: [{ ...REDACT, point: 'MODIFY_POINT_TRANSFORM' }] }] },
      'plugins[0].hooks[0]',
      /cannot decode enum agenthooks\.v1\.ModifyPoint from JSON: a value it does not define/,
    ],
  ])('refuses %s, naming the field', (_what, json, field, message) => {
    const e = invalid(json);
    expect(e.reason).toBe(INVALID_PLUGINS);
    expect(e.kind).toBe('failed_precondition');
    expect(e.message).toMatch(message);
    expect(e.message).toContain(`plugins file ${file} `);
    expect(e.metadata.pluginsFile).toBe(file);
    if (field === undefined) expect(e.metadata.field).toBeUndefined();
    else expect(e.metadata.field).toBe(field);
    expect(e.metadata.rule).toBeUndefined();
  });

  it.each([
    [
      'an invalid webhook URL',
      { ...REDACT, webhook: { url: 'ftp://x' } },
      'plugins[0].hooks[1].webhook.url',
      'INVALID_WEBHOOK_URL',
    ],
    [
      'QStash on a point that returns a result',
      { ...REDACT, webhook: { url: 'https://x.example/', delivery: 'DELIVERY_QSTASH' } },
      'plugins[0].hooks[1].webhook.delivery',
      'MODIFY_DELIVERY_NOT_ALLOWED',
    ],
    [
      'a matcher off the tool points',
      { ...REDACT, matcher: '^x$' },
      'plugins[0].hooks[1].matcher',
      'MATCHER_NOT_ALLOWED',
    ],
    [
      'a reserved hook id',
      { ...REDACT, id: 'server-env-webhook:x' },
      'plugins[0].hooks[1].id',
      'HOOK_ID_RESERVED',
    ],
    [
      'onError block on afterProviderResponse',
      { ...AUDIT, webhook: { url: 'https://x.example/', onError: 'ON_ERROR_BLOCK' } },
      'plugins[0].hooks[1].webhook.onError',
      'BLOCK_REQUIRES_RESULT',
    ],
  ])('refuses a hook that breaks a registration rule: %s', (_what, hook, field, rule) => {
    const e = invalid({ plugins: [{ name: 'p', hooks: [LIMIT, hook] }] });
    expect(e.reason).toBe(INVALID_PLUGINS);
    expect(e.metadata).toMatchObject({ pluginsFile: file, field, rule });
    expect(e.message).toContain(`at ${field}: `);
  });

  it('never quotes a value of the file in its error or its log line', () => {
    const secret = 'Bearer synthetic-plugin-token-91f2';
    const hook = { ...REDACT, webhook: { url: 'https://x.example/', headers: secret } };
    const { plugins, log } = open(JSON.stringify({ plugins: [{ name: 'p', hooks: [hook] }] }));
    const e = errorOf(() => plugins.hooksOrThrow());
    expect(e.message).toMatch(/Webhook\.headers from JSON: expected object$/);
    expect(e.message).not.toContain('synthetic-plugin-token');
    expect(JSON.stringify(log.lines)).not.toContain('synthetic-plugin-token');
  });

  it('refuses a webhook whose address the destination policy denies', () => {
    const destinations = new DestinationPolicy({ allow: [], deny: ['203.0.113.0/24'] });
    const hook = { ...REDACT, webhook: { url: 'http://203.0.113.7/redact' } };
    const e = invalid(
      { plugins: [{ name: 'p', hooks: [hook] }] },
      { validation: { destinations } },
    );
    expect(e.metadata).toMatchObject({ field: 'plugins[0].hooks[0].webhook.url' });
    expect(e.metadata.rule).toMatch(/DESTINATION/);
  });

  it('holds a named signing secret to the registration rule', () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const env = {
      AGENTHOOKS_SIGNING_SECRET_REDACTOR: secret,
      AGENTHOOKS_SIGNING_ORIGINS_REDACTOR: 'https://redactor.example',
    };
    const signed = (url: string, name: string) => ({
      plugins: [{ name: 'p', hooks: [{ ...REDACT, webhook: { url, signingSecret: name } }] }],
    });
    const { plugins } = open(JSON.stringify(signed('https://redactor.example/r', 'REDACTOR')), {
      validation: { signingEnv: () => env },
    });
    expect(plugins.hooksOrThrow()[0]?.webhook?.signingSecret).toBe('REDACTOR');
    for (const [url, name, rule] of [
      ['https://other.example/r', 'REDACTOR', 'SIGNING_SECRET_NOT_BOUND'],
      ['https://redactor.example/r', 'NOPE', 'UNDECLARED_SIGNING_SECRET'],
    ] as const) {
      const e = invalid(signed(url, name), { validation: { signingEnv: () => env } });
      expect(e.metadata).toMatchObject({
        field: 'plugins[0].hooks[0].webhook.signingSecret',
        rule,
      });
    }
    // A malformed declaration makes the file invalid, never quoting the secret.
    const e = invalid(signed('https://redactor.example/r', 'REDACTOR'), {
      validation: { signingEnv: () => ({ AGENTHOOKS_SIGNING_SECRET_REDACTOR: secret }) },
    });
    expect(e.metadata.rule).toBe('INVALID_ENVIRONMENT');
    expect(e.message).not.toContain(secret.slice(6));
  });

  it('lets header templates name any variable, as environment hooks may', () => {
    const hook = {
      ...REDACT,
      webhook: {
        url: 'https://redactor.example/redact',
        headers: { authorization: 'Bearer {{env.REDACTOR_TOKEN}}' },
        allowedEnvVars: ['REDACTOR_TOKEN'],
      },
    };
    const { plugins } = open(JSON.stringify({ plugins: [{ name: 'p', hooks: [hook] }] }));
    expect(plugins.hooksOrThrow()[0]?.webhook?.allowedEnvVars).toEqual(['REDACTOR_TOKEN']);
  });

  it('refuses more hooks than the per-operation limit, all plugins together', () => {
    const e = invalid(VALID, { maxHooks: 2 });
    expect(e.metadata).toMatchObject({ field: 'plugins', rule: 'TOO_MANY_HOOKS' });
    expect(e.message).toMatch(/at most 2 hooks together \(the file has 3\)/);
  });

  it('refuses a file over 1 MiB, and a missing or unreadable one', () => {
    const big = JSON.stringify({ plugins: [], pad: 'x'.repeat(MAX_PLUGINS_FILE_BYTES) });
    expect(invalid(big).message).toMatch(/is larger than 1048576 bytes/);
    const { plugins } = open(undefined, { pluginsFile: join(dir, 'absent', 'plugins.json') });
    expect(errorOf(() => plugins.hooksOrThrow()).message).toMatch(/does not exist/);
    const asDir = open(undefined, { pluginsFile: dir });
    expect(errorOf(() => asDir.plugins.hooksOrThrow()).message).toMatch(
      /cannot be read \(EISDIR\)/,
    );
  });

  it('replaces its plugins on reload, and never keeps a valid set in place of an invalid file', () => {
    const { plugins, log } = open(JSON.stringify(VALID));
    writeAtomically(
      file,
      JSON.stringify({ plugins: [{ name: 'p', hooks: [{ ...REDACT, id: '' }] }] }),
    );
    expect(plugins.reload('signal').generation).toBe(2);
    const e = errorOf(() => plugins.hooksOrThrow());
    expect(e.metadata).toMatchObject({ field: 'plugins[0].hooks[0].id', rule: 'HOOK_ID_REQUIRED' });
    expect(log.lines[1]).toMatchObject({
      msg: 'plugins reloaded',
      fields: { generation: 2, cause: 'signal', valid: false, reason: INVALID_PLUGINS },
    });
    writeAtomically(file, JSON.stringify({ plugins: [{ name: 'audit', hooks: [AUDIT] }] }));
    plugins.reload('manual');
    expect(plugins.hooksOrThrow().map((h) => h.id)).toEqual(['audit']);
  });

  it('reloads by itself when the file changes, and when it is removed', async () => {
    const reloads: number[] = [];
    const { plugins, log } = open(JSON.stringify(VALID), {
      watch: true,
      onReload: (s) => reloads.push(s.generation),
    });
    writeAtomically(file, JSON.stringify({ plugins: [{ name: 'audit', hooks: [AUDIT] }] }));
    await log.reloaded(2);
    expect(plugins.hooksOrThrow().map((h) => h.id)).toEqual(['audit']);
    expect(log.lines[1]?.fields.cause).toBe('file');
    unlinkSync(file);
    await log.reloaded(3);
    expect(errorOf(() => plugins.hooksOrThrow()).message).toMatch(/does not exist/);
    expect(reloads).toEqual([1, 2, 3]);
  });
});
