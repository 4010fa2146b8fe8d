/**
 * @module "Safe by default", end to end against the sidecar process: caller
 * hooks cannot read the sidecar's secrets, reach forbidden hosts or stall it.
 * Every receiver, and the DNS responder that rebinds a name, is on
 * 127.0.0.1; denied addresses are refused before any connection is made.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  type DecideToolCallResponse,
  DecideToolCallResponseSchema,
  DispatchRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { type DnsResponder, startDnsResponder } from '../support/dns-responder.js';
import {
  type AnyClient,
  errorInfoOf,
  fromLoaderObject,
  hookClient,
  type LoaderObject,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const METADATA_IP = '169.254.169.254';

/** gRPC status codes used here. */
const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;

/** Registers hooks and returns the error the sidecar answers. */
async function registerRefusal(
  client: AnyClient,
  operationId: string,
  hooks: LoaderObject[],
): Promise<grpc.ServiceError> {
  try {
    await unary(client, 'RegisterHooks', { operationId, hooks });
  } catch (e: unknown) {
    return e as grpc.ServiceError;
  }
  throw new Error('expected RegisterHooks to fail');
}

/** Dispatches an afterStep event for an operation. */
async function dispatchAfterStep(client: AnyClient, operationId: string): Promise<LoaderObject> {
  const request = create(DispatchRequestSchema, {
    event: {
      event: {
        case: 'afterStep',
        value: { operationId, agentId: 'agent', userId: 'user', stepIndex: 0 },
      },
    },
  });
  return unary<LoaderObject>(client, 'Dispatch', toLoaderObject(DispatchRequestSchema, request));
}

/** Asks DecideToolCall about a tool call of `operationId`. */
async function decide(
  client: AnyClient,
  operationId: string,
  identifier = 'fs',
  apiName = 'read',
): Promise<DecideToolCallResponse> {
  const request = create(DecideToolCallRequestSchema, {
    event: {
      context: {
        operationId,
        toolCallId: `call-${operationId}`,
        assistantMessageId: 'msg',
        identifier,
        apiName,
        executor: Executor.SERVER,
      },
    },
  });
  const res = await unary(
    client,
    'DecideToolCall',
    toLoaderObject(DecideToolCallRequestSchema, request),
  );
  return fromLoaderObject(DecideToolCallResponseSchema, res);
}

function notification(id: string, url: string, extra: LoaderObject = {}): LoaderObject {
  return { id, type: 'HOOK_TYPE_AFTER_STEP', webhook: { url, ...extra } };
}

function control(id: string, url: string, extra: LoaderObject = {}): LoaderObject {
  return {
    id,
    type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
    webhook: { url, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL', ...extra },
  };
}

describe('caller secrets', () => {
  it('refuses allowedEnvVars outside --caller-env-allowlist, which is empty by default', async () => {
    const strict = await startSidecar({ http: false });
    const allowing = await startSidecar({
      http: false,
      args: ['--caller-env-allowlist', 'HOOK_SECRET'],
    });
    const clients = [hookClient(strict.grpc), hookClient(allowing.grpc)];
    try {
      const hook = (names: string[]) =>
        notification('h', 'https://hooks.test/x', {
          headers: { Authorization: 'Bearer ${HOOK_SECRET}' },
          allowedEnvVars: names,
        });
      const refused = await registerRefusal(clients[0] as AnyClient, 'op', [hook(['HOOK_SECRET'])]);
      expect(refused.code).toBe(INVALID_ARGUMENT);
      expect(errorInfoOf(refused)).toMatchObject({
        reason: 'ENV_VAR_NOT_ALLOWED',
        metadata: { field: 'hooks[0].webhook.allowedEnvVars[0]' },
      });
      const other = await registerRefusal(clients[1] as AnyClient, 'op', [
        hook(['HOOK_SECRET', 'AWS_SECRET_ACCESS_KEY']),
      ]);
      expect(errorInfoOf(other)).toMatchObject({
        reason: 'ENV_VAR_NOT_ALLOWED',
        metadata: { field: 'hooks[0].webhook.allowedEnvVars[1]' },
      });
      await unary(clients[1] as AnyClient, 'RegisterHooks', {
        operationId: 'op',
        hooks: [hook(['HOOK_SECRET'])],
      });
    } finally {
      for (const c of clients) c.close();
      await killSidecar(strict);
      await killSidecar(allowing);
    }
  });

  it('uses a secret in headers without it ever reaching the database file or the debug logs', async () => {
    const secret = `caller-${randomBytes(16).toString('hex')}`;
    const envToken = `env-${randomBytes(16).toString('hex')}`;
    const receiver = await startReceiver();
    receiver.respond((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.path === '/control' ? '{"decision":"allow"}' : '');
    });
    const sidecar = await startSidecar({
      args: ['--caller-env-allowlist', 'HOOK_SECRET', '--log-level', 'debug'],
      env: {
        HOOK_SECRET: secret,
        // Environment hooks are the operator's: not limited by the allowlist.
        AGENT_HOOK_WEBHOOK_URL: `${receiver.url}/env`,
        AGENT_HOOK_WEBHOOK_TOKEN: envToken,
        AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
      },
    });
    const client = hookClient(sidecar.grpc);
    try {
      const withSecret = {
        headers: { Authorization: 'Bearer ${HOOK_SECRET}' },
        allowedEnvVars: ['HOOK_SECRET'],
      };
      await unary(client, 'RegisterHooks', {
        operationId: 'op-secret',
        hooks: [
          notification('notify', `${receiver.url}/notify`, withSecret),
          control('gate', `${receiver.url}/control`, withSecret),
          // A failing delivery with the secret in its headers, so failures get logged too.
          control('down', 'http://127.0.0.1:1/closed', withSecret),
        ],
      });
      const dispatched = await dispatchAfterStep(client, 'op-secret');
      expect(dispatched.outcomes.map((o: LoaderObject) => [o.hookId, o.status])).toEqual([
        ['notify', 'HOOK_OUTCOME_STATUS_DELIVERED'],
        ['server-env-webhook:afterStep', 'HOOK_OUTCOME_STATUS_DELIVERED'],
      ]);
      const decided = await decide(client, 'op-secret');
      expect(decided.decision?.outcome.case).toBe('allow');
      expect(decided.outcomes.map((o) => o.errorCode)).toEqual(['', 'network_error']);
      // The secrets were really used.
      const auth = receiver.requests.map((r) => [r.path, r.headers.authorization]);
      expect(auth).toEqual(
        expect.arrayContaining([
          ['/notify', `Bearer ${secret}`],
          ['/control', `Bearer ${secret}`],
          ['/env', `Bearer ${envToken}`],
        ]),
      );
      sidecar.kill('SIGTERM');
      expect(await sidecar.exited).toBe(0);
      const files = [sidecar.db, `${sidecar.db}-wal`, `${sidecar.db}-shm`].filter(existsSync);
      expect(files.length).toBeGreaterThan(0);
      for (const file of files) {
        const bytes = readFileSync(file);
        expect(bytes.includes(secret), file).toBe(false);
        expect(bytes.includes(envToken), file).toBe(false);
      }
      // The template is what was stored.
      expect(readFileSync(sidecar.db).includes('${HOOK_SECRET}')).toBe(true);
      const logs = sidecar.logs.map((l) => JSON.stringify(l)).join('\n');
      expect(logs).toContain('control failed');
      expect(logs).not.toContain(secret);
      expect(logs).not.toContain(envToken);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

describe('webhook destinations', () => {
  let sidecar: SidecarProcess;
  let client: AnyClient;
  let dns: DnsResponder;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    dns = await startDnsResponder();
    // The first lookup of rebind.test gets loopback, every later one the metadata address.
    dns.answer('rebind.test', ['127.0.0.1', METADATA_IP]);
    sidecar = await startSidecar({ http: false, args: ['--dns-server', dns.server] });
    client = hookClient(sidecar.grpc);
    for (let i = 0; i < 2; i++) receivers.push(await startReceiver());
  });

  afterAll(async () => {
    client.close();
    await killSidecar(sidecar);
    await Promise.all(receivers.map((r) => r.close()));
    await dns.close();
  });

  it.each([
    `http://${METADATA_IP}/latest/meta-data/iam/security-credentials/`,
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://[::ffff:169.254.169.254]/',
    'http://169.254.1.1:8080/',
    'http://metadata.google.internal/computeMetadata/v1/',
  ])('refuses %s at registration with WEBHOOK_DESTINATION_DENIED', async (url) => {
    const e = await registerRefusal(client, 'op-literal', [notification('meta', url)]);
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(errorInfoOf(e)).toMatchObject({
      reason: 'WEBHOOK_DESTINATION_DENIED',
      metadata: { field: 'hooks[0].webhook.url' },
    });
  });

  it('delivers to a name while it resolves to loopback, and refuses it at connect time once it resolves to 169.254.169.254', async () => {
    const [first, second] = receivers as [Receiver, Receiver];
    const portOf = (r: Receiver) => new URL(r.url).port;
    // Each hook has its own origin (port), so the second needs a new connection and a new lookup.
    await unary(client, 'RegisterHooks', {
      operationId: 'op-rebind-1',
      hooks: [notification('before', `http://rebind.test:${portOf(first)}/hook`)],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-rebind-2',
      hooks: [notification('after', `http://rebind.test:${portOf(second)}/hook`)],
    });
    const delivered = await dispatchAfterStep(client, 'op-rebind-1');
    expect(delivered.outcomes[0]).toMatchObject({
      hookId: 'before',
      status: 'HOOK_OUTCOME_STATUS_DELIVERED',
    });
    expect(first.requests).toHaveLength(1);

    const refused = await dispatchAfterStep(client, 'op-rebind-2');
    expect(refused.outcomes[0]).toMatchObject({
      hookId: 'after',
      status: 'HOOK_OUTCOME_STATUS_FAILED',
      errorCode: 'destination_denied',
    });
    expect(refused.outcomes[0].message).toContain(METADATA_IP);
    expect(second.requests).toHaveLength(0);
    expect(second.connections()).toBe(0);
    const answered = dns.queries.filter(
      (q) => q.name === 'rebind.test' && q.answered !== undefined,
    );
    expect(answered.map((q) => q.answered)).toEqual(['127.0.0.1', METADATA_IP]);
  });

  it('fails a control refused at connect time by its onError: block denies', async () => {
    // The origin whose lookup was refused above: no pooled connection to reuse.
    const target = receivers[1] as Receiver;
    const port = new URL(target.url).port;
    await unary(client, 'RegisterHooks', {
      operationId: 'op-rebind-control',
      hooks: [control('gate', `http://rebind.test:${port}/gate`, { onError: 'ON_ERROR_BLOCK' })],
    });

    const res = await decide(client, 'op-rebind-control');
    const outcome = res.decision?.outcome;
    expect(outcome?.case).toBe('deny');
    expect(outcome?.case === 'deny' && outcome.value.reason).toBe('hook_control_error');
    expect(res.outcomes.map((o) => o.errorCode)).toEqual(['destination_denied']);
    expect(target.requests).toHaveLength(0);
  });
});

describe('limits', () => {
  let sidecar: SidecarProcess;
  let client: AnyClient;

  beforeAll(async () => {
    sidecar = await startSidecar({
      args: ['--max-message-bytes', '65536', '--max-hooks-per-operation', '3'],
    });
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client.close();
    await killSidecar(sidecar);
  });

  it('refuses a message over --max-message-bytes on both transports', async () => {
    const big = notification('x'.repeat(70_000), '/hook');
    const e = await registerRefusal(client, 'op-big', [big]);
    expect(e.code).toBe(RESOURCE_EXHAUSTED);
    const res = await fetch(`http://${sidecar.http}/agenthooks.v1.HookService/RegisterHooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operationId: 'op-big', hooks: [big] }),
    });
    expect(res.ok).toBe(false);
    expect(((await res.json()) as { code: string }).code).toBe('resource_exhausted');
  });

  it('refuses hooks past --max-hooks-per-operation, counting the hooks already there', async () => {
    const batch = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => notification(`${prefix}${i}`, '/hook'));
    await unary(client, 'RegisterHooks', { operationId: 'op-many', hooks: batch('a', 2) });
    const e = await registerRefusal(client, 'op-many', batch('b', 2));
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(errorInfoOf(e)).toMatchObject({
      reason: 'TOO_MANY_HOOKS',
      metadata: { field: 'hooks' },
    });
    const res = await unary<LoaderObject>(client, 'RegisterHooks', {
      operationId: 'op-many',
      hooks: batch('c', 1),
    });
    expect(res.hookCount).toBe(3);
  });

  it.each([
    [
      'a matcher over 1,024 characters',
      { id: 'm', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true, matcher: 'a'.repeat(1_025) },
      'hooks[0].matcher',
      'MATCHER_TOO_LONG',
    ],
    [
      'more than 64 headers',
      notification('h', '/hook', {
        headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`x-h${i}`, 'v'])),
      }),
      'hooks[0].webhook.headers',
      'TOO_MANY_HEADERS',
    ],
    [
      'a header over 8 KiB',
      notification('h', '/hook', { headers: { 'x-big': 'v'.repeat(8_192) } }),
      'hooks[0].webhook.headers["x-big"]',
      'HEADER_TOO_LARGE',
    ],
    [
      'a backreference',
      { id: 'm', type: 'HOOK_TYPE_AFTER_TOOL_CALL', handler: true, matcher: '(a)\\1' },
      'hooks[0].matcher',
      'MATCHER_NOT_LINEAR',
    ],
    [
      'a lookaround',
      { id: 'm', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true, matcher: '(?=a)' },
      'hooks[0].matcher',
      'MATCHER_NOT_LINEAR',
    ],
  ])('refuses %s', async (_, hook, field, reason) => {
    const e = await registerRefusal(client, 'op-limits', [hook as LoaderObject]);
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(errorInfoOf(e)).toMatchObject({ reason, metadata: { field } });
  });
});

describe('linear-time matchers', () => {
  it('registers (a+)+$ and answers the longest tool name allowed while ListHooks keeps being served', async () => {
    const receiver = await startReceiver();
    const sidecar = await startSidecar({ http: false });
    const client = hookClient(sidecar.grpc);
    try {
      // Many controls with the bomb, so each decision runs it many times.
      const bombs = Array.from({ length: 100 }, (_, i) => ({
        ...control(`bomb-${i}`, `${receiver.url}/never`),
        matcher: '(a+)+$',
      }));
      await unary(client, 'RegisterHooks', { operationId: 'op-bomb', hooks: bombs });
      // 256 bytes is the longest identifier a decision accepts (IDENTIFIER_TOO_LONG past it).
      const identifier = 'a'.repeat(256);
      const started = performance.now();
      const decisions = Array.from({ length: 5 }, () => decide(client, 'op-bomb', identifier, 'x'));
      let done = false;
      const settled = Promise.all(decisions).finally(() => {
        done = true;
      });
      // ListHooks, one after another, for as long as the decisions run (and at least once).
      const latencies: number[] = [];
      do {
        const t = performance.now();
        const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: 'op-bomb' });
        latencies.push(performance.now() - t);
        expect(listed.hooks).toHaveLength(100);
      } while (!done);
      const answers = await settled;
      for (const res of answers) {
        expect(res.decision?.outcome.case).toBe('allow');
        // `${identifier}/x` does not end in a's: no control matched, none was called.
        expect(res.outcomes).toHaveLength(0);
      }
      expect(receiver.requests).toHaveLength(0);
      // Generous bounds: a backtracking engine would never answer at all.
      expect(performance.now() - started).toBeLessThan(20_000);
      expect(Math.max(...latencies)).toBeLessThan(5_000);
      // The same matcher matches a long name ending in a's, also in linear time.
      await unary(client, 'RegisterHooks', {
        operationId: 'op-bomb-match',
        hooks: [{ ...control('bomb', `${receiver.url}/match`), matcher: '(a+)+$' }],
      });
      const matched = await decide(client, 'op-bomb-match', 'x', 'a'.repeat(256));
      expect(matched.outcomes.map((o) => o.hookId)).toEqual(['bomb']);
      expect(receiver.requests.map((r) => r.path)).toEqual(['/match']);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});
