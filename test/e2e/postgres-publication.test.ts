/**
 * @module Exactly once across pods: two real sidecar processes on one
 * PostgreSQL database (a private cluster, `../users/postgres-cluster.ts`)
 * and a real receiver answering an `afterToolCall` control. Duplicate
 * `PublishDeferredResult` calls split across both publish once, answer one
 * final result and call the control once. A holder stalled (SIGSTOP) while
 * its control request is in flight is taken over by the other sidecar once
 * its lease lapses, and one SIGKILLed is taken over at once (its process is
 * gone from this host): one more control call, still one publication.
 * Concurrent registrations on both keep the hook limit and each batch whole.
 */
import type { ServerResponse } from 'node:http';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import {
  ParkToolCallRequestSchema,
  PublishDeferredResultRequestSchema,
  type PublishDeferredResultResponse,
  PublishDeferredResultResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
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
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';

/** The lease of both sidecars, in milliseconds: short, so that the takeover test waits little. */
const LEASE_MS = 2_000;
/** Concurrent duplicate publications, split evenly across the two sidecars. */
const DUPLICATES = 50;
/** `--max-hooks-per-operation` of both sidecars. */
const MAX_HOOKS = 10;
/** Hooks per batch in the registration test: three batches fit under {@link MAX_HOOKS}, not four. */
const BATCH = 3;
/** Concurrent batches per operation in the registration test, split evenly across the two sidecars. */
const BATCHES = 8;
/** Operations registered at once in the registration test. */
const OPERATIONS = 10;
/** How long a test waits for a condition before it fails, in milliseconds. */
const DEADLINE_MS = 20_000;

/** The control paths on the receiver, one per test, so each counts its own calls. */
const CONTROL = {
  duplicates: '/control-duplicates',
  stalled: '/control-stalled',
  takeover: '/control-takeover',
};

/** A receiver whose control requests wait until {@link release}; then every one is allowed. */
let receiver: Receiver;
let held: ServerResponse[] = [];
let releasedControls = false;

function allow(res: ServerResponse): void {
  if (res.destroyed) return;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ decision: 'allow' }));
}

/** Holds control requests from now on. */
function hold(): void {
  releasedControls = false;
}

/** Allows the held control requests, and every later one. */
function release(): void {
  releasedControls = true;
  for (const res of held.splice(0)) allow(res);
}

/** Requests that reached `path` so far. */
function calls(path: string): number {
  return receiver.requests.filter((r) => r.path === path).length;
}

/** Resolves once `probe` is true; fails after {@link DEADLINE_MS}. */
async function until(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Registers a result control posting to `path` on `operationId`, then parks `toolCallId` there. */
async function parkWithControl(
  client: AnyClient,
  operationId: string,
  toolCallId: string,
  path: string,
): Promise<void> {
  await unary(client, 'RegisterHooks', {
    operationId,
    hooks: [
      {
        id: 'guard',
        type: 'HOOK_TYPE_AFTER_TOOL_CALL',
        webhook: { url: `${receiver.url}${path}`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
      },
    ],
  });
  const request = create(ParkToolCallRequestSchema, {
    context: {
      toolCallId,
      operationId,
      assistantMessageId: 'msg_1',
      identifier: 'github',
      apiName: 'merge',
      executor: Executor.SERVER,
    },
  });
  const parked = await unary<LoaderObject>(client, 'ParkToolCall', {
    ...toLoaderObject(ParkToolCallRequestSchema, request),
    kind: 'PARK_KIND_HUMAN_APPROVAL',
  });
  expect(parked.created).toBe(true);
}

async function publish(
  client: AnyClient,
  toolCallId: string,
  content: string,
): Promise<PublishDeferredResultResponse> {
  const request = create(PublishDeferredResultRequestSchema, {
    toolCallId,
    result: { content, success: true },
  });
  const res = await unary(
    client,
    'PublishDeferredResult',
    toLoaderObject(PublishDeferredResultRequestSchema, request),
  );
  return fromLoaderObject(PublishDeferredResultResponseSchema, res);
}

describe('exactly-once publication across two sidecars on one PostgreSQL store', () => {
  let cluster: PostgresCluster;
  let url: string;
  let a: SidecarProcess | undefined;
  let b: SidecarProcess | undefined;
  let clientA: AnyClient;
  let clientB: AnyClient;

  /** Runs SQL on the sidecars' database. */
  async function sql(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await client.query(text, values);
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    url = await cluster.createDatabase();
    receiver = await startReceiver({
      answer: (_req, res) => {
        if (releasedControls) allow(res);
        else held.push(res);
      },
    });
    const options = {
      db: false as const,
      env: { AGENTHOOKS_DB: url },
      args: [
        '--publication-lease',
        `${LEASE_MS}ms`,
        '--max-hooks-per-operation',
        String(MAX_HOOKS),
      ],
    };
    [a, b] = await Promise.all([startSidecar(options), startSidecar(options)]);
    clientA = hookClient(a.grpc);
    clientB = hookClient(b.grpc);
  }, 60_000);

  afterAll(async () => {
    release();
    held = [];
    clientA?.close();
    clientB?.close();
    await killSidecar(a);
    await killSidecar(b);
    await receiver?.close();
    await cluster?.stop();
  });

  it('keeps the hook limit and each batch contiguous under concurrent registrations on A and B', async () => {
    const batches = Array.from({ length: BATCHES }, (_, i) =>
      Array.from({ length: BATCH }, (_, j) => ({
        id: `b${i}-h${j}`,
        type: 'HOOK_TYPE_AFTER_STEP',
        webhook: { url: `${receiver.url}/notify` },
      })),
    );
    const operations = Array.from({ length: OPERATIONS }, (_, k) => `op-registrations-${k}`);

    // Every batch of every operation at once: the two sidecars race on each operation.
    const outcomes = await Promise.all(
      operations.map((operationId) =>
        Promise.allSettled(
          batches.map((hooks, i) =>
            unary<{ hookCount: number }>(i % 2 === 0 ? clientA : clientB, 'RegisterHooks', {
              operationId,
              hooks,
            }),
          ),
        ),
      ),
    );

    for (const [k, operationId] of operations.entries()) {
      const settled = outcomes[k] ?? [];
      const accepted = settled.flatMap((o, i) =>
        o.status === 'fulfilled' ? [{ batch: i, count: o.value.hookCount }] : [],
      );
      const refused = settled.flatMap((o) =>
        o.status === 'rejected' ? [o.reason as grpc.ServiceError] : [],
      );
      // Each accepted append saw the ones before it whole: 3, 6, 9; a fourth would pass the limit.
      expect(accepted.map((x) => x.count).sort((x, y) => x - y)).toEqual([3, 6, 9]);
      expect(refused).toHaveLength(BATCHES - accepted.length);
      for (const err of refused) {
        expect([err.code, errorInfoOf(err)?.reason]).toEqual([3, 'TOO_MANY_HOOKS']);
      }
      // Accepted batches only, each whole, in the order of their acknowledged counts.
      const inAckOrder = [...accepted]
        .sort((x, y) => x.count - y.count)
        .flatMap((x) => batches[x.batch]?.map((h) => h.id) ?? []);
      for (const client of [clientA, clientB]) {
        const listed = await unary<{ hooks: { id: string }[] }>(client, 'ListHooks', {
          operationId,
        });
        expect(listed.hooks.map((h) => h.id)).toEqual(inAckOrder);
      }
    }
  });

  it(`publishes once for ${DUPLICATES} concurrent duplicates split across A and B, calling the control once`, async () => {
    await parkWithControl(clientA, 'op-duplicates', 'call-duplicates', CONTROL.duplicates);
    hold();

    const answers = Array.from({ length: DUPLICATES }, (_, i) =>
      publish(i % 2 === 0 ? clientA : clientB, 'call-duplicates', `approved-${i}`),
    );
    // The holder's control request waits until every duplicate was sent.
    await until('the control was called', () => calls(CONTROL.duplicates) === 1);
    release();
    const results = await Promise.all(answers);

    expect(results.filter((r) => r.published)).toHaveLength(1);
    const first = results.find((r) => r.published)?.finalResult?.content;
    expect(first).toMatch(/^approved-\d+$/);
    expect(results.map((r) => r.finalResult?.content)).toEqual(Array(DUPLICATES).fill(first));
    expect(calls(CONTROL.duplicates)).toBe(1);
    const { rows } = await sql(
      'SELECT lease_holder FROM agenthooks_parked_calls WHERE tool_call_id = $1',
      ['call-duplicates'],
    );
    expect(rows).toEqual([{ lease_holder: null }]);
  });

  it('takes the publication over on B once the lease of a stalled A lapses; A then gets the same answer', async () => {
    await parkWithControl(clientA, 'op-stalled', 'call-stalled', CONTROL.stalled);
    hold();
    const onA = publish(clientA, 'call-stalled', 'approved on A');
    await until('A called the control', () => calls(CONTROL.stalled) === 1);
    const stalled = a as SidecarProcess;

    // A stops renewing (SIGSTOP): alive, so only the lease's expiry lets B in.
    stalled.kill('SIGSTOP');
    const stoppedAt = Date.now();
    let resumed = false;
    try {
      const onB = Array.from({ length: 10 }, (_, i) =>
        publish(clientB, 'call-stalled', `approved on B ${i}`),
      );
      await until('B called the control', () => calls(CONTROL.stalled) === 2);
      // A renewed at most a third of the lease before it stopped.
      expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual((LEASE_MS * 2) / 3 - 50);
      release();
      const results = await Promise.all(onB);
      stalled.kill('SIGCONT');
      resumed = true;

      expect(results.filter((r) => r.published)).toHaveLength(1);
      const first = results.find((r) => r.published)?.finalResult?.content;
      expect(first).toMatch(/^approved on B \d$/);
      expect(results.map((r) => r.finalResult?.content)).toEqual(Array(10).fill(first));
      // A resumes, its control answers, and its write finds the placeholder filled.
      const fromA = await onA;
      expect([fromA.published, fromA.finalResult?.content]).toEqual([false, first]);
      expect(calls(CONTROL.stalled)).toBe(2);
    } finally {
      if (!resumed) stalled.kill('SIGCONT');
    }
  }, 60_000);

  it('takes the publication over on B at once after A, on the same host, is SIGKILLed mid-control', async () => {
    await parkWithControl(clientA, 'op-takeover', 'call-takeover', CONTROL.takeover);
    hold();
    const onA = publish(clientA, 'call-takeover', 'approved on A').then(
      () => 'answered',
      (e: grpc.ServiceError) => e.code,
    );
    await until('A called the control', () => calls(CONTROL.takeover) === 1);
    const { rows: leased } = await sql(
      'SELECT lease_holder FROM agenthooks_parked_calls WHERE tool_call_id = $1',
      ['call-takeover'],
    );
    const holder = String(leased[0]?.lease_holder);
    expect(holder).toMatch(new RegExp(`/${a?.pid}/`));

    const killed = a as SidecarProcess;
    killed.kill('SIGKILL');
    expect(await killed.exited).toBe('SIGKILL');
    expect(await onA).toBe(14); // UNAVAILABLE: the connection went away, no answer
    // A's process id is gone from this host: B takes the lease without waiting for it to lapse.
    const onB = Array.from({ length: 10 }, (_, i) =>
      publish(clientB, 'call-takeover', `approved on B ${i}`),
    );
    await until('B called the control', () => calls(CONTROL.takeover) === 2);
    release();
    const results = await Promise.all(onB);

    expect(results.filter((r) => r.published)).toHaveLength(1);
    const first = results.find((r) => r.published)?.finalResult?.content;
    expect(first).toMatch(/^approved on B \d$/);
    expect(results.map((r) => r.finalResult?.content)).toEqual(Array(10).fill(first));
    const later = await publish(clientB, 'call-takeover', 'late duplicate');
    expect([later.published, later.finalResult?.content]).toEqual([false, first]);
    expect(calls(CONTROL.takeover)).toBe(2);
    expect(
      b?.logs.find((l) => l.msg === 'took over the publication lease of a process that is gone'),
    ).toMatchObject({ toolCallId: 'call-takeover', holder });
    const { rows: published } = await sql(
      'SELECT lease_holder, published_at IS NOT NULL AS published FROM agenthooks_parked_calls WHERE tool_call_id = $1',
      ['call-takeover'],
    );
    expect(published).toEqual([{ lease_holder: null, published: true }]);
  }, 60_000);
});
