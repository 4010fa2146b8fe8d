import { chmodSync, chownSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import type * as http from 'node:http';
import { dirname, join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolResultRequestSchema,
  DecideToolResultResponseSchema,
  ParkToolCallRequestSchema,
  PublishDeferredResultRequestSchema,
  PublishDeferredResultResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  errorInfoOf,
  fromLoaderObject,
  healthClient,
  hookClient,
  type LoaderObject,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, startSidecar, tempDbPath } from '../support/sidecar.js';

/** A small seeded PRNG (mulberry32), so a failing crash round can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CONTEXT = {
  assistantMessageId: 'msg',
  identifier: 'fs',
  apiName: 'writeFile',
  args: { path: '/tmp/out' },
  executor: Executor.SERVER,
};

function control(id: string, url: string) {
  return {
    id,
    type: 'HOOK_TYPE_AFTER_TOOL_CALL',
    webhook: { url, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
  };
}

async function park(client: AnyClient, toolCallId: string, operationId: string, kind: string) {
  const req = create(ParkToolCallRequestSchema, {
    context: { ...CONTEXT, toolCallId, operationId },
  });
  const obj = toLoaderObject(ParkToolCallRequestSchema, req);
  return unary<LoaderObject>(client, 'ParkToolCall', { ...obj, kind });
}

async function publish(
  client: AnyClient,
  toolCallId: string,
  result: { content: string; success: boolean },
) {
  const req = create(PublishDeferredResultRequestSchema, { toolCallId, result });
  const res = await unary(
    client,
    'PublishDeferredResult',
    toLoaderObject(PublishDeferredResultRequestSchema, req),
  );
  return fromLoaderObject(PublishDeferredResultResponseSchema, res);
}

describe('durability under SIGKILL', () => {
  it('keeps every acknowledged registration in order, and every unacknowledged batch whole or absent (5 rounds)', async () => {
    const random = prng(20261130);
    const db = tempDbPath();
    const acked = new Map<string, string[][]>(); // operation -> acknowledged batches, in order
    const unacked: string[][] = [];
    for (let round = 0; round < 5; round++) {
      const sidecar = await startSidecar({ db, http: false });
      const client = hookClient(sidecar.grpc);
      let inFlight = 0;
      let killed = false;
      const writers = Array.from({ length: 32 }, (_, w) => {
        const op = `op-crash-${w}`;
        return (async () => {
          for (let b = 0; !killed; b++) {
            const size = 1 + Math.floor(random() * 5);
            const ids = Array.from({ length: size }, (_, h) => `r${round}-w${w}-b${b}-h${h}`);
            inFlight += 1;
            try {
              await unary(client, 'RegisterHooks', {
                operationId: op,
                hooks: ids.map((id) => ({
                  id,
                  type: 'HOOK_TYPE_AFTER_STEP',
                  webhook: { url: '/hook' },
                })),
              });
              acked.set(op, [...(acked.get(op) ?? []), ids]);
            } catch {
              unacked.push(ids);
              return;
            } finally {
              inFlight -= 1;
            }
          }
        })();
      });
      // Kill once at least 20 calls are in flight, counted here at the client.
      await new Promise<void>((resolve) => {
        const check = () => (inFlight >= 20 ? resolve() : setImmediate(check));
        check();
      });
      expect(inFlight).toBeGreaterThanOrEqual(20);
      killed = true;
      sidecar.kill('SIGKILL');
      await sidecar.exited;
      await Promise.all(writers);
      client.close();
    }

    // The raw file: an unacknowledged batch is whole or absent.
    const raw = new Database(db, { readonly: true });
    const count = raw.prepare('SELECT count(*) AS n FROM hooks WHERE hook_id = ?');
    for (const batch of unacked) {
      const present = batch.filter((id) => (count.get(id) as { n: number }).n === 1).length;
      expect([0, batch.length]).toContain(present);
    }
    raw.close();

    const sidecar = await startSidecar({ db, http: false });
    const client = hookClient(sidecar.grpc);
    try {
      for (const [op, batches] of acked) {
        const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: op });
        const ids: string[] = (listed.hooks ?? []).map((h: { id: string }) => h.id);
        // Acknowledged batches appear in order; an unacknowledged one may sit between them, whole.
        const ackedIds = batches.flat();
        expect(ids.filter((id) => ackedIds.includes(id))).toEqual(ackedIds);
      }
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  }, 120_000);
});

describe('approval recovery', () => {
  it('after a park, SIGKILL and a changed env file, runs the parked operation, the continuation and the current environment control, in that order', async () => {
    const receiver = await startReceiver();
    receiver.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"decision":"allow"}');
    });
    const db = tempDbPath();
    const envFile = join(dirname(db), 'hooks.env');
    writeFileSync(
      envFile,
      `AGENT_HOOK_WEBHOOK_URL=${receiver.url}/old-env\nAGENT_HOOK_WEBHOOK_TOKEN=t\nAGENT_HOOK_WEBHOOK_EVENTS=afterToolCall\nAGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall\n`,
    );
    let sidecar = await startSidecar({ db, args: ['--hooks-env-file', envFile] });
    let client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-approval',
        hooks: [control('caller', `${receiver.url}/caller`)],
      });
      const parked = await park(client, 'call-approval', 'op-approval', 'PARK_KIND_HUMAN_APPROVAL');
      expect(parked.created).toBe(true);
      client.close();
      sidecar.kill('SIGKILL');
      await sidecar.exited;

      const tmp = `${envFile}.tmp`;
      writeFileSync(
        tmp,
        `AGENT_HOOK_WEBHOOK_URL=${receiver.url}/new-env\nAGENT_HOOK_WEBHOOK_TOKEN=t\nAGENT_HOOK_WEBHOOK_EVENTS=afterToolCall\nAGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall\n`,
      );
      renameSync(tmp, envFile);
      sidecar = await startSidecar({ db, args: ['--hooks-env-file', envFile] });
      client = hookClient(sidecar.grpc);
      await unary(client, 'RegisterHooks', {
        operationId: 'op-continued',
        hooks: [control('continuation', `${receiver.url}/continuation`)],
      });
      const start = receiver.requests.length;
      const req = create(DecideToolResultRequestSchema, {
        event: {
          context: { ...CONTEXT, toolCallId: 'call-approval', operationId: 'op-continued' },
          result: { content: 'written', success: true },
        },
      });
      const res = fromLoaderObject(
        DecideToolResultResponseSchema,
        await unary(client, 'DecideToolResult', toLoaderObject(DecideToolResultRequestSchema, req)),
      );
      expect(res.decision?.outcome.case).toBe('allow');
      expect(receiver.requests.slice(start).map((r) => r.path)).toEqual([
        '/caller',
        '/continuation',
        '/new-env',
      ]);
      expect(res.outcomes.map((o) => [o.operationId, o.hookId])).toEqual([
        ['op-approval', 'caller'],
        ['op-continued', 'continuation'],
        ['', 'server-env-webhook:afterToolCall'],
      ]);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

describe('deferred results', () => {
  /** A control receiver that holds its answers until released; it counts calls and notifications. */
  async function slowControl(decision: object) {
    const receiver: Receiver = await startReceiver();
    const held: http.ServerResponse[] = [];
    let release = false;
    receiver.respond((req, res) => {
      if (req.path !== '/control') {
        res.writeHead(204);
        res.end();
        return;
      }
      if (release) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(decision));
      } else held.push(res);
    });
    return {
      receiver,
      held,
      releaseAll() {
        release = true;
        for (const res of held.splice(0)) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(decision));
        }
      },
      count: (path: string) => receiver.requests.filter((r) => r.path === path).length,
    };
  }

  async function registerDeferred(client: AnyClient, url: string, op: string) {
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [
        control('slow-control', `${url}/control`),
        { id: 'notify', type: 'HOOK_TYPE_AFTER_TOOL_CALL', webhook: { url: `${url}/notify` } },
      ],
    });
  }

  it('publishes once under 50 concurrent callbacks: one control call, one notification, one publisher, 50 equal answers', async () => {
    const slow = await slowControl({ decision: 'allow' });
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      await registerDeferred(client, slow.receiver.url, 'op-deferred');
      await park(client, 'call-deferred', 'op-deferred', 'PARK_KIND_DEFERRED');
      const calls = Array.from({ length: 50 }, (_, i) =>
        publish(client, 'call-deferred', { content: `result from callback ${i}`, success: true }),
      );
      await slow.receiver.waitForRequests(1);
      slow.releaseAll();
      const answers = await Promise.all(calls);
      expect(answers.filter((a) => a.published)).toHaveLength(1);
      const first = answers.find((a) => a.published)?.finalResult?.content;
      expect(new Set(answers.map((a) => a.finalResult?.content))).toEqual(new Set([first]));
      expect(slow.count('/control')).toBe(1);
      await slow.receiver.waitForRequests(2);
      expect(slow.count('/notify')).toBe(1);
      // A later duplicate gets the same first result.
      const late = await publish(client, 'call-deferred', { content: 'late', success: true });
      expect([late.published, late.finalResult?.content]).toEqual([false, first]);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await slow.receiver.close();
    }
  });

  it('publishes nothing when killed while the control runs, and a later callback publishes once', async () => {
    const slow = await slowControl({ decision: 'allow' });
    let sidecar = await startSidecar();
    let client = hookClient(sidecar.grpc);
    try {
      await registerDeferred(client, slow.receiver.url, 'op-killed');
      await park(client, 'call-killed', 'op-killed', 'PARK_KIND_DEFERRED');
      const inFlight = Array.from({ length: 50 }, () =>
        publish(client, 'call-killed', { content: 'lost', success: true }).catch(
          (e: grpc.ServiceError) => e.code,
        ),
      );
      await slow.receiver.waitForRequests(1);
      sidecar.kill('SIGKILL');
      await sidecar.exited;
      expect(new Set(await Promise.all(inFlight))).toEqual(new Set([14]));
      client.close();

      sidecar = await startSidecar({ db: sidecar.db });
      client = hookClient(sidecar.grpc);
      slow.releaseAll();
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          publish(client, 'call-killed', { content: 'kept', success: true }),
        ),
      );
      expect(answers.filter((a) => a.published)).toHaveLength(1);
      expect(new Set(answers.map((a) => a.finalResult?.content))).toEqual(new Set(['kept']));
    } finally {
      client.close();
      await killSidecar(sidecar);
      await slow.receiver.close();
    }
  });

  it('keeps a denial as the answer after the control is removed', async () => {
    const slow = await slowControl({ decision: 'deny', reason: 'contains secrets' });
    slow.releaseAll();
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      await registerDeferred(client, slow.receiver.url, 'op-denied');
      await park(client, 'call-denied', 'op-denied', 'PARK_KIND_DEFERRED');
      const first = await publish(client, 'call-denied', {
        content: 'AWS_SECRET=...',
        success: true,
      });
      expect(first.published).toBe(true);
      expect(first.finalResult?.content).toBe('contains secrets');
      expect(first.finalResult?.state).toEqual({
        type: 'blocked',
        phase: 'afterToolCall',
        reason: 'contains secrets',
      });
      await unary(client, 'UnregisterHooks', { operationId: 'op-denied', purge: true });
      const again = await publish(client, 'call-denied', {
        content: 'AWS_SECRET=...',
        success: true,
      });
      expect([again.published, again.finalResult?.content]).toEqual([false, 'contains secrets']);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await slow.receiver.close();
    }
  });

  it('fails closed without the call context when a result control applies', async () => {
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-no-context',
        hooks: [control('c', 'http://127.0.0.1:9/never')],
      });
      const req = create(PublishDeferredResultRequestSchema, {
        toolCallId: 'never-parked',
        result: { content: 'x', success: true },
        operationChain: ['op-no-context'],
      });
      const err = (await unary(
        client,
        'PublishDeferredResult',
        toLoaderObject(PublishDeferredResultRequestSchema, req),
      ).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code).toBe(9);
      expect(err.details).toBe('Cannot evaluate afterToolCall: tool call context is unavailable');
      expect(errorInfoOf(err)?.reason).toBe('TOOL_CALL_CONTEXT_UNAVAILABLE');
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});

describe('storage faults fail closed and recover', () => {
  it('answers UNAVAILABLE (STORE_LOCKED) and NOT_SERVING while the database is locked, and recovers', async () => {
    const sidecar = await startSidecar({
      args: ['--db-busy-timeout', '0.2', '--store-check-interval', '0.2'],
    });
    const client = hookClient(sidecar.grpc);
    const lock = new Database(sidecar.db);
    try {
      lock.exec('BEGIN IMMEDIATE');
      const err = (await unary(client, 'RegisterHooks', {
        operationId: 'op-locked',
        hooks: [{ id: 'h', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
      }).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code).toBe(14);
      expect(errorInfoOf(err)?.reason).toBe('STORE_LOCKED');
      const parkErr = (await park(client, 'call-locked', 'op-locked', 'PARK_KIND_DEFERRED').catch(
        (e: unknown) => e,
      )) as grpc.ServiceError;
      expect(parkErr.code).toBe(14);
      await waitForHealth(sidecar.grpc, 'NOT_SERVING');
      lock.exec('COMMIT');
      await waitForHealth(sidecar.grpc, 'SERVING');
      const ok = await unary<LoaderObject>(client, 'RegisterHooks', {
        operationId: 'op-locked',
        hooks: [{ id: 'h', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
      });
      expect(ok.hookCount).toBe(1);
    } finally {
      lock.close();
      client.close();
      await killSidecar(sidecar);
    }
  });

  it('answers UNAVAILABLE (STORE_FULL) and NOT_SERVING when the database is full, and recovers after a purge', async () => {
    const sidecar = await startSidecar({
      args: ['--db-max-size', '262144', '--store-check-interval', '0.2'],
    });
    const client = hookClient(sidecar.grpc);
    const big = 'x'.repeat(3000);
    try {
      let err: grpc.ServiceError | undefined;
      for (let i = 0; i < 500 && err === undefined; i++) {
        err = (await unary(client, 'RegisterHooks', {
          operationId: `op-full-${i % 5}`,
          hooks: [{ id: `h${i}`, type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: `/x?pad=${big}` } }],
        }).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        )) as grpc.ServiceError | undefined;
      }
      expect(err?.code).toBe(14);
      expect(errorInfoOf(err as grpc.ServiceError)?.reason).toBe('STORE_FULL');
      await waitForHealth(sidecar.grpc, 'NOT_SERVING');
      for (let i = 0; i < 5; i++) {
        await unary(client, 'UnregisterHooks', { operationId: `op-full-${i}`, purge: true });
      }
      await waitForHealth(sidecar.grpc, 'SERVING');
      const ok = await unary<LoaderObject>(client, 'RegisterHooks', {
        operationId: 'op-after-full',
        hooks: [{ id: 'h', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
      });
      expect(ok.hookCount).toBe(1);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});

describe('retention', () => {
  it('expires completed operations, keeps one with a waiting parked call, and fails decisions on expired ones closed', async () => {
    const db = tempDbPath();
    const sidecar = await startSidecar({ db, args: ['--retention', '1s'] });
    const client = hookClient(sidecar.grpc);
    try {
      for (const op of ['op-old', 'op-waiting']) {
        await unary(client, 'RegisterHooks', {
          operationId: op,
          hooks: [control('c', 'http://127.0.0.1:9/never')],
        });
      }
      await park(client, 'call-waiting', 'op-waiting', 'PARK_KIND_DEFERRED');
      for (const op of ['op-old', 'op-waiting']) {
        await unary(client, 'CompleteOperation', { event: { operationId: op, reason: 'done' } });
      }
      await sidecar.waitForLog(
        (l) => l.msg === 'operations expired' && (l.operations as number) >= 1,
      );
      const decide = (op: string) => {
        const req = create(DecideToolResultRequestSchema, {
          event: {
            context: { ...CONTEXT, toolCallId: `t-${op}`, operationId: op },
            result: { content: 'r', success: true },
          },
        });
        return unary(
          client,
          'DecideToolResult',
          toLoaderObject(DecideToolResultRequestSchema, req),
        ).then(
          () => 'answered',
          (e: grpc.ServiceError) => errorInfoOf(e)?.reason,
        );
      };
      expect(await decide('op-old')).toBe('OPERATION_EXPIRED');
      const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: 'op-waiting' });
      expect(listed.hooks.map((h: { id: string }) => h.id)).toEqual(['c']);
      const raw = new Database(db, { readonly: true });
      const hooks = raw
        .prepare("SELECT count(*) AS n FROM hooks WHERE operation_id = 'op-old'")
        .get() as { n: number };
      raw.close();
      expect(hooks.n).toBe(0);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});

describe('a read-only database', () => {
  it('answers UNAVAILABLE (STORE_READ_ONLY) and NOT_SERVING for an unprivileged sidecar, and recovers once the file is writable', async () => {
    const db = tempDbPath();
    const seed = await startSidecar({ db, http: false });
    const seedClient = hookClient(seed.grpc);
    await unary(seedClient, 'RegisterHooks', {
      operationId: 'op-ro',
      hooks: [{ id: 'kept', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
    });
    seedClient.close();
    seed.kill('SIGTERM');
    expect(await seed.exited).toBe(0);
    readOnlyForNobody(db);

    const sidecar = await startSidecar({
      db,
      http: false,
      uid: 65534, // nobody
      args: ['--store-check-interval', '0.2'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      await waitForHealth(sidecar.grpc, 'NOT_SERVING');
      const err = (await unary(client, 'RegisterHooks', {
        operationId: 'op-ro',
        hooks: [{ id: 'refused', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
      }).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code).toBe(14);
      expect(errorInfoOf(err)?.reason).toBe('STORE_READ_ONLY');
      // Reads still work: the stored hook is there.
      const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: 'op-ro' });
      expect(listed.hooks.map((h: { id: string }) => h.id)).toEqual(['kept']);

      chownSync(db, 65534, 65534);
      await waitForHealth(sidecar.grpc, 'SERVING');
      const ok = await unary<LoaderObject>(client, 'RegisterHooks', {
        operationId: 'op-ro',
        hooks: [{ id: 'accepted', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/x' } }],
      });
      expect(ok.hookCount).toBe(2);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});

describe('readiness at start', () => {
  it('is NOT_SERVING from the first answer on a database the sidecar may not write', async () => {
    const db = tempDbPath();
    const seed = await startSidecar({ db, http: false });
    seed.kill('SIGTERM');
    expect(await seed.exited).toBe(0);
    readOnlyForNobody(db);
    // The default interval: no check of the interval's runs before the first answer below.
    const sidecar = await startSidecar({ db, http: false, uid: 65534 });
    const health = healthClient(sidecar.grpc);
    try {
      const answer = await new Promise<{ status: string }>((resolve, reject) =>
        health.Check({ service: '' }, (e: Error | null, res: { status: string }) =>
          e === null ? resolve(res) : reject(e),
        ),
      );
      expect(answer.status).toBe('NOT_SERVING');
    } finally {
      health.close();
      await killSidecar(sidecar);
    }
  });
});

/**
 * Gives the database's folder and its other files to the unprivileged user
 * (uid 65534), the database file staying root's (0644): that user may read it
 * and not write it.
 */
function readOnlyForNobody(db: string): void {
  const dir = dirname(db);
  chownSync(dir, 65534, 65534);
  // Readable by others, as a file made before the sidecar created its files 0600 is.
  chmodSync(db, 0o644);
  for (const f of readdirSync(dir))
    if (f !== 'agenthooks.db') chownSync(join(dir, f), 65534, 65534);
}

/** Resolves when a Health Watch stream reports `status` (no polling). */
function waitForHealth(address: string, status: string): Promise<void> {
  const health = healthClient(address);
  const watch = health.Watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>;
  return new Promise<void>((resolve) => {
    watch.on('data', (d: { status: string }) => {
      if (d.status === status) {
        watch.cancel();
        health.close();
        resolve();
      }
    });
    watch.on('error', () => {});
  });
}
