import { create, fromBinary, type JsonObject } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HookEvent, HookEventSchema, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  DispatchRequestSchema,
  HookService,
} from '../../gen/agenthooks/v1/service_pb.js';
import { routeOf } from '../../src/hooks/dispatch.js';
import { type EventFixture, loadEventFixtures } from '../support/fixtures.js';
import {
  type AnyClient,
  badRequestOf,
  errorInfoOf,
  healthClient,
  hookClient,
  type LoaderObject,
  reflectionClient,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** A hook in proto-loader's object form (enums as names). */
function webhookHook(id: string, type: string, url: string, extra: Record<string, unknown> = {}) {
  return { id, type, webhook: { url, ...extra } };
}

function typeName(type: HookType): string {
  return `HOOK_TYPE_${HookType[type]}`;
}

/** A DispatchRequest in proto-loader's object form, converted through the wire format. */
function dispatchRequest(event: HookEvent) {
  return toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event }));
}

describe('the sidecar process, over gRPC from a proto-loader client', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;

  beforeAll(async () => {
    receiver = await startReceiver();
    // TOKEN is the one variable these tests' hooks name in allowedEnvVars.
    sidecar = await startSidecar({ args: ['--caller-env-allowlist', 'TOKEN'] });
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('delivers each of the 16 event types to its hooks in registration order, as the fixtures say', async () => {
    const fixtures = loadEventFixtures().filter((f) => f.variant === 'full');
    expect(fixtures).toHaveLength(16);
    const start = receiver.requests.length;
    for (const f of fixtures) {
      const route = routeOf(f.event);
      const hooks = [1, 2].map((n) =>
        webhookHook(
          `${f.hookType}-${n}`,
          typeName(route.type),
          `${receiver.url}/${f.hookType}/${n}`,
        ),
      );
      const res = await unary(client, 'RegisterHooks', { operationId: route.operationId, hooks });
      expect(res.hookCount).toBeGreaterThanOrEqual(2);
    }
    for (const [i, f] of fixtures.entries()) {
      if (f.hookType === 'beforeToolCall') {
        // Only DecideToolCall runs beforeToolCall: its observers are started, not awaited.
        const res = await unary<{
          decision: { outcome: string };
          outcomes: { hookId: string; status: string }[];
        }>(
          client,
          'DecideToolCall',
          toLoaderObject(
            DecideToolCallRequestSchema,
            create(DecideToolCallRequestSchema, {
              event: f.event.event.case === 'beforeToolCall' ? f.event.event.value : undefined,
            }),
          ),
        );
        expect(res.decision.outcome).toBe('allow');
        expect(res.outcomes.map((o) => [o.hookId, o.status])).toEqual([
          ['beforeToolCall-1', 'HOOK_OUTCOME_STATUS_SKIPPED'],
          ['beforeToolCall-2', 'HOOK_OUTCOME_STATUS_SKIPPED'],
        ]);
      } else {
        const res = await unary<{ outcomes: { hookId: string; status: string }[] }>(
          client,
          'Dispatch',
          dispatchRequest(f.event),
        );
        expect(res.outcomes.map((o) => [o.hookId, o.status])).toEqual([
          [`${f.hookType}-1`, 'HOOK_OUTCOME_STATUS_DELIVERED'],
          [`${f.hookType}-2`, 'HOOK_OUTCOME_STATUS_DELIVERED'],
        ]);
      }
      await receiver.waitForRequests(start + 2 * (i + 1));
    }
    const got = (await receiver.waitForRequests(start + 32)).slice(start);
    const expected = fixtures.flatMap((f: EventFixture) =>
      [1, 2].map((n) => ({
        path: `/${f.hookType}/${n}`,
        json: { ...f.payload, hookId: `${f.hookType}-${n}` },
      })),
    );
    expect(got.map((r) => ({ path: r.path, json: r.json }))).toEqual(expected);
    for (const r of got) {
      expect(r.method).toBe('POST');
      expect(r.headers['content-type']).toBe('application/json');
    }
  });

  it('answers health SERVING for the server and for HookService', async () => {
    const health = healthClient(sidecar.grpc);
    try {
      for (const service of ['', 'agenthooks.v1.HookService']) {
        const res = await unary<{ status: string }>(health, 'Check', { service });
        expect(res.status).toBe('SERVING');
      }
      await expect(unary(health, 'Check', { service: 'nope.Service' })).rejects.toMatchObject({
        code: 5,
      });
    } finally {
      health.close();
    }
  });

  for (const version of ['v1', 'v1alpha'] as const) {
    it(`lists HookService and resolves its file over reflection ${version}`, async () => {
      const reflection = reflectionClient(sidecar.grpc, version);
      const call = reflection.ServerReflectionInfo() as grpc.ClientDuplexStream<
        object,
        LoaderObject
      >;
      const answers: LoaderObject[] = [];
      const done = new Promise<void>((resolve, reject) => {
        call.on('data', (d: LoaderObject) => answers.push(d));
        call.on('end', resolve);
        call.on('error', reject);
      });
      call.write({ listServices: '' });
      call.write({ fileContainingSymbol: 'agenthooks.v1.HookService' });
      call.write({ fileContainingSymbol: 'agenthooks.v1.HookService.DecideToolCall' });
      call.write({ fileByFilename: 'agenthooks/v1/events.proto' });
      call.write({ fileContainingSymbol: 'no.such.Symbol' });
      call.end();
      await done;
      reflection.close();
      expect(answers).toHaveLength(5);
      const names = answers[0]?.listServicesResponse.service.map((s: { name: string }) => s.name);
      expect(names).toContain('agenthooks.v1.HookService');
      expect(names).toContain('grpc.health.v1.Health');
      for (const answer of answers.slice(1, 3)) {
        const files = answer.fileDescriptorResponse.fileDescriptorProto.map((b: Buffer) =>
          fromBinary(FileDescriptorProtoSchema, b),
        );
        expect(files[0]?.name).toBe('agenthooks/v1/service.proto');
        expect(files[0]?.service[0]?.method.map((m: { name: string }) => m.name)).toContain(
          'DecideToolCall',
        );
        // Dependencies come along, so a client can build every message type.
        expect(files.map((f: { name: string }) => f.name)).toEqual(
          expect.arrayContaining(['agenthooks/v1/events.proto', 'google/protobuf/struct.proto']),
        );
      }
      const events = fromBinary(
        FileDescriptorProtoSchema,
        answers[3]?.fileDescriptorResponse.fileDescriptorProto[0],
      );
      expect(events.messageType.map((m) => m.name)).toContain('AfterToolCallEvent');
      expect(answers[4]?.errorResponse.errorCode).toBe(5);
    });
  }

  it('refuses an invalid hook after two valid ones, naming the field, and stores nothing', async () => {
    const ok = (n: number) => webhookHook(`ok-${n}`, 'HOOK_TYPE_AFTER_STEP', `${receiver.url}/ok`);
    const cases: {
      hook: Record<string, unknown>;
      field: string;
      reason: string;
      message: string;
    }[] = [
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', 'ftp://example.com/x'),
        field: 'hooks[2].webhook.url',
        reason: 'INVALID_WEBHOOK_URL',
        message: 'Webhook URL must be HTTP(S) or an application-relative path without credentials',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', 'http://user:pw@example.com/x'),
        field: 'hooks[2].webhook.url',
        reason: 'INVALID_WEBHOOK_URL',
        message: 'Webhook URL must be HTTP(S) or an application-relative path without credentials',
      },
      {
        hook: { ...webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', '/hook'), matcher: '*' },
        field: 'hooks[2].matcher',
        reason: 'MATCHER_NOT_ALLOWED',
        message: 'Matchers are only supported for tool events',
      },
      {
        hook: { ...webhookHook('bad', 'HOOK_TYPE_AFTER_TOOL_CALL', '/hook'), matcher: '(' },
        field: 'hooks[2].matcher',
        reason: 'INVALID_MATCHER',
        message: 'Invalid hook matcher regular expression',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_BEFORE_TOOL_CALL', '/hook', {
          responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          delivery: 'DELIVERY_QSTASH',
        }),
        field: 'hooks[2].webhook.delivery',
        reason: 'CONTROL_REQUIRES_FETCH',
        message: 'toolCall response handling requires fetch delivery',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_TOOL_CALL', '/hook', {
          responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          eventFields: { names: [] },
        }),
        field: 'hooks[2].webhook.eventFields',
        reason: 'CONTROL_PAYLOAD_OVERRIDE',
        message: 'Control hooks cannot filter or override the event payload',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', '/hook', {
          responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
        }),
        field: 'hooks[2].type',
        reason: 'CONTROL_TYPE_NOT_ALLOWED',
        message: 'toolCall response handling requires beforeToolCall or afterToolCall',
      },
      {
        hook: {
          ...webhookHook('bad', 'HOOK_TYPE_BEFORE_TOOL_CALL', '/hook', {
            responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          }),
          handler: true,
        },
        field: 'hooks[2].handler',
        reason: 'CONTROL_HANDLER_NOT_ALLOWED',
        message: 'Control hooks cannot have a handler',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_TOOL_CALL', '/hook', {
          onError: 'ON_ERROR_BLOCK',
        }),
        field: 'hooks[2].webhook.onError',
        reason: 'BLOCK_REQUIRES_CONTROL',
        message: 'onError:block requires toolCall response handling',
      },
      {
        hook: { id: 'bad', type: 'HOOK_TYPE_AFTER_STEP' },
        field: 'hooks[2]',
        reason: 'HOOK_TARGET_REQUIRED',
        message: 'A hook requires a handler or webhook',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', '/hook', { headers: { Host: 'x' } }),
        field: 'hooks[2].webhook.headers["Host"]',
        reason: 'FORBIDDEN_HEADER',
        message: 'Webhook header Host is not allowed',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', '/hook', {
          allowedEnvVars: ['OK', '1BAD'],
        }),
        field: 'hooks[2].webhook.allowedEnvVars[1]',
        reason: 'INVALID_ENV_VAR_NAME',
        message: 'Invalid allowedEnvVars entry',
      },
      {
        hook: webhookHook('bad', 'HOOK_TYPE_AFTER_STEP', '/hook', { timeout: 0 }),
        field: 'hooks[2].webhook.timeout',
        reason: 'INVALID_WEBHOOK_TIMEOUT',
        message: 'Webhook timeout must be a positive number of seconds up to 2147483.647',
      },
      {
        hook: webhookHook('', 'HOOK_TYPE_AFTER_STEP', '/hook'),
        field: 'hooks[2].id',
        reason: 'HOOK_ID_REQUIRED',
        message: 'Hook id is required',
      },
    ];
    const failures: unknown[] = [];
    for (const [i, c] of cases.entries()) {
      const operationId = `op-invalid-${i}`;
      const err = (await unary(client, 'RegisterHooks', {
        operationId,
        hooks: [ok(1), ok(2), c.hook],
      }).then(
        () => undefined,
        (e: unknown) => e,
      )) as grpc.ServiceError | undefined;
      const info = err && errorInfoOf(err);
      const got = {
        code: err?.code,
        details: err?.details,
        reason: info?.reason,
        field: info?.metadata.field,
        description: err && badRequestOf(err)?.fieldViolations[0]?.description,
      };
      // The status message leads with the field; BadRequest keeps the upstream text exactly.
      const want = {
        code: 3,
        details: `${c.field}: ${c.message}`,
        reason: c.reason,
        field: c.field,
        description: c.message,
      };
      if (JSON.stringify(got) !== JSON.stringify(want)) failures.push({ got, want });
      expect(info?.domain).toBe('agenthooks');
    }
    expect(failures).toEqual([]);
    const db = new Database(sidecar.db, { readonly: true });
    try {
      const rows = db
        .prepare("SELECT count(*) AS n FROM hooks WHERE operation_id LIKE 'op-invalid-%'")
        .get() as { n: number };
      expect(rows.n).toBe(0);
    } finally {
      db.close();
    }
  });

  it('strips hooks with an environment hook id from a batch, validates the rest at their indexes, and registers them', async () => {
    const hook = (id: string, url = `${receiver.url}/ok`) =>
      webhookHook(id, 'HOOK_TYPE_AFTER_STEP', url);
    // The contract's register(): reserved ids are stripped before validation, so a
    // reserved copy that breaks a rule is not an error either.
    const res = (await unary(client, 'RegisterHooks', {
      operationId: 'op-reserved',
      hooks: [
        hook('first'),
        hook('server-env-webhook:afterStep'),
        hook('server-env-webhook:onComplete', 'ftp://example.com/x'),
        hook('second'),
      ],
    })) as { hookCount: number };
    expect(res.hookCount).toBe(2);
    const listed = (await unary(client, 'ListHooks', { operationId: 'op-reserved' })) as {
      hooks: { id: string }[];
    };
    expect(listed.hooks.map((h) => h.id)).toEqual(['first', 'second']);
    // A batch of reserved ids alone appends nothing.
    const again = (await unary(client, 'RegisterHooks', {
      operationId: 'op-reserved',
      hooks: [hook('server-env-webhook:afterStep')],
    })) as { hookCount: number };
    expect(again.hookCount).toBe(2);
    // A kept hook's error names its index in the request, not in the kept list.
    const err = (await unary(client, 'RegisterHooks', {
      operationId: 'op-reserved',
      hooks: [hook('server-env-webhook:afterStep'), hook('bad', 'ftp://example.com/x')],
    }).then(
      () => undefined,
      (e: unknown) => e,
    )) as grpc.ServiceError | undefined;
    expect(err?.code).toBe(3);
    expect(errorInfoOf(err as grpc.ServiceError)?.metadata.field).toBe('hooks[1].webhook.url');
  });

  it('lists hooks as registered and purges them on request', async () => {
    await unary(client, 'RegisterHooks', {
      operationId: 'op-list',
      parentOperationId: 'op-parent',
      hooks: [
        {
          ...webhookHook('a', 'HOOK_TYPE_AFTER_TOOL_CALL', '/x', {
            headers: { Authorization: 'Bearer ${TOKEN}' },
            allowedEnvVars: ['TOKEN'],
          }),
          matcher: '^fs/',
        },
        { id: 'b', type: 'HOOK_TYPE_BEFORE_STEP', handler: true },
      ],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-list',
      hooks: [webhookHook('c', 'HOOK_TYPE_ON_COMPLETE', '/y')],
    });
    const listed = await unary<LoaderObject>(client, 'ListHooks', {
      operationId: 'op-list',
    });
    expect(listed.hooks.map((h: { id: string }) => h.id)).toEqual(['a', 'b', 'c']);
    expect(listed.parentOperationId).toBe('op-parent');
    // Templates are stored as given, never resolved.
    expect(listed.hooks[0].webhook.headers).toEqual({ Authorization: 'Bearer ${TOKEN}' });
    const purged = await unary<LoaderObject>(client, 'UnregisterHooks', {
      operationId: 'op-list',
      purge: true,
    });
    expect(purged.hooksPurged).toBe(3);
    const after = await unary<LoaderObject>(client, 'ListHooks', { operationId: 'op-list' });
    expect(after.hooks ?? []).toEqual([]);
  });

  it('completes an operation: onComplete, then onError when the reason is error', async () => {
    const op = 'op-complete';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [
        webhookHook('err', 'HOOK_TYPE_ON_ERROR', `${receiver.url}/onError`),
        webhookHook('done', 'HOOK_TYPE_ON_COMPLETE', `${receiver.url}/onComplete`),
      ],
    });
    const start = receiver.requests.length;
    const res = await unary<LoaderObject>(client, 'CompleteOperation', {
      event: { operationId: op, reason: 'error', errorMessage: 'boom', agentId: 'a', userId: 'u' },
    });
    expect(res.outcomes.map((o: { hookId: string }) => o.hookId)).toEqual(['done', 'err']);
    const got = (await receiver.waitForRequests(start + 2)).slice(start);
    expect(got.map((r) => r.path)).toEqual(['/onComplete', '/onError']);
    expect(got[1]?.json).toMatchObject({
      hookType: 'onError',
      errorMessage: 'boom',
      reason: 'error',
    });
    const parked = await unary<LoaderObject>(client, 'CompleteOperation', {
      event: { operationId: op, reason: 'waiting_for_async_tool' },
    });
    expect(parked.outcomes ?? []).toEqual([]);
    expect(receiver.requests.length).toBe(start + 2);
  });

  it('dispatches an event from a Connect client over HTTP/1.1 JSON', async () => {
    const op = 'op-connect';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [webhookHook('connect-hook', 'HOOK_TYPE_BEFORE_COMPACT', `${receiver.url}/connect`)],
    });
    const transport = createConnectTransport({
      baseUrl: `http://${sidecar.http}`,
      httpVersion: '1.1',
      useBinaryFormat: false,
    });
    const connect = createClient(HookService, transport);
    const start = receiver.requests.length;
    const res = await connect.dispatch({
      event: {
        event: {
          case: 'beforeCompact',
          value: { operationId: op, messageCount: 3, tokenCount: 900 },
        },
      },
    });
    expect(res.outcomes[0]?.hookId).toBe('connect-hook');
    const [got] = (await receiver.waitForRequests(start + 1)).slice(start);
    expect(got?.json).toEqual({
      messageCount: 3,
      operationId: op,
      stepIndex: 0,
      tokenCount: 900,
      hookId: 'connect-hook',
      hookType: 'beforeCompact',
    } satisfies JsonObject);
    const healthz = await fetch(`http://${sidecar.http}/healthz`);
    expect(healthz.status).toBe(200);
  });
});

describe('the sidecar on a unix socket', () => {
  it('serves a call over unix:/path', async () => {
    const dir = (await import('node:fs')).mkdtempSync(
      `${(await import('node:os')).tmpdir()}/agenthooks-sock-`,
    );
    const socket = `${dir}/agenthooks.sock`;
    const sidecar = await startSidecar({ args: ['--grpc-listen', `unix:${socket}`], http: false });
    const client = hookClient(`unix:${socket}`);
    try {
      expect(sidecar.grpcAll).toContain(`unix:${socket}`);
      await unary(client, 'RegisterHooks', {
        operationId: 'op-unix',
        hooks: [webhookHook('u', 'HOOK_TYPE_AFTER_STEP', '/relative')],
      });
      const listed = await unary<LoaderObject>(client, 'ListHooks', {
        operationId: 'op-unix',
      });
      expect(listed.hooks.map((h: { id: string }) => h.id)).toEqual(['u']);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});

describe('durability across a hard kill', () => {
  it('keeps hooks of three operations in order after SIGKILL and a restart on the same file', async () => {
    const receiver = await startReceiver();
    let sidecar = await startSidecar();
    const db = sidecar.db;
    let client = hookClient(sidecar.grpc);
    const ops = ['op-k1', 'op-k2', 'op-k3'];
    try {
      for (const op of ops) {
        for (let batch = 0; batch < 2; batch++) {
          await unary(client, 'RegisterHooks', {
            operationId: op,
            hooks: [0, 1, 2].map((n) =>
              webhookHook(
                `${op}-${batch}-${n}`,
                'HOOK_TYPE_AFTER_STEP',
                `${receiver.url}/${op}/${batch}/${n}`,
              ),
            ),
          });
        }
      }
      client.close();
      sidecar.kill('SIGKILL');
      expect(await sidecar.exited).toBe('SIGKILL');

      sidecar = await startSidecar({ db });
      client = hookClient(sidecar.grpc);
      for (const op of ops) {
        const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: op });
        expect(listed.hooks.map((h: { id: string }) => h.id)).toEqual(
          [0, 1].flatMap((b) => [0, 1, 2].map((n) => `${op}-${b}-${n}`)),
        );
      }
      const event = create(HookEventSchema, {
        event: { case: 'afterStep', value: { operationId: 'op-k2', userId: 'u', stepIndex: 1 } },
      });
      const res = await unary<LoaderObject>(client, 'Dispatch', dispatchRequest(event));
      expect(res.outcomes).toHaveLength(6);
      const got = await receiver.waitForRequests(6);
      expect(got.map((r) => r.path)).toEqual(
        [0, 1].flatMap((b) => [0, 1, 2].map((n) => `/op-k2/${b}/${n}`)),
      );
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('answers 20 dispatches in flight, turns health NOT_SERVING first, refuses new calls and exits 0', async () => {
    const receiver = await startReceiver();
    const held: import('node:http').ServerResponse[] = [];
    receiver.respond((_req, res) => held.push(res));
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    const health = healthClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-drain',
        hooks: [webhookHook('slow', 'HOOK_TYPE_AFTER_STEP', `${receiver.url}/slow`)],
      });
      const statuses: string[] = [];
      const watch = health.Watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>;
      const sawNotServing = new Promise<void>((resolve) => {
        watch.on('data', (d: { status: string }) => {
          statuses.push(d.status);
          if (d.status === 'NOT_SERVING') resolve();
        });
      });
      const watchEnded = new Promise<void>((resolve) => {
        watch.on('end', resolve);
        watch.on('error', () => resolve());
      });
      const event = create(HookEventSchema, {
        event: { case: 'afterStep', value: { operationId: 'op-drain', userId: 'u' } },
      });
      const calls = Array.from({ length: 20 }, () =>
        unary<LoaderObject>(client, 'Dispatch', dispatchRequest(event)),
      );
      await receiver.waitForRequests(20);

      sidecar.kill('SIGTERM');
      await sawNotServing;
      await sidecar.waitForLog((l) => l.msg === 'draining');
      const refused = await unary(
        client,
        'ListHooks',
        { operationId: 'op-drain' },
        {
          deadline: Date.now() + 5000,
        },
      ).then(
        () => undefined,
        (e: grpc.ServiceError) => e.code,
      );
      expect(refused).toBe(14);

      for (const res of held) {
        res.writeHead(204);
        res.end();
      }
      const answers = await Promise.all(calls);
      expect(answers.map((a) => a.outcomes[0].status)).toEqual(
        Array(20).fill('HOOK_OUTCOME_STATUS_DELIVERED'),
      );
      expect(await sidecar.exited).toBe(0);
      await watchEnded;
      expect(statuses).toEqual(['SERVING', 'NOT_SERVING']);
    } finally {
      client.close();
      health.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});
