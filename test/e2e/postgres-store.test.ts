/**
 * @module Two real sidecar processes on one PostgreSQL database (a private
 * cluster, `../users/postgres-cluster.ts`), named by `AGENTHOOKS_DB` with no
 * `--db`: a registration on either is seen by a decision on the other at
 * once, in order; a call parked on one that is then SIGKILLed is published
 * on the other, exactly once; and a stopped server makes decisions fail
 * UNAVAILABLE and health NOT_SERVING until it is back, without a restart.
 */
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  type DecideToolCallResponse,
  DecideToolCallResponseSchema,
  ParkToolCallRequestSchema,
  PublishDeferredResultRequestSchema,
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
import {
  type PostgresCluster,
  SUPERUSER,
  startPostgresCluster,
} from '../users/postgres-cluster.js';

/**
 * A password in the URL: the cluster trusts local connections and never asks
 * for it, so it only shows whether a log line leaks it.
 */
const PASSWORD = 'pw-never-logged';
/** Seconds between store checks, so that health follows the server quickly. */
const CHECK_INTERVAL_S = '0.2';
/** How long health and decisions may take to follow the server, on a loaded CI machine. */
const RECOVERY_DEADLINE_MS = 20_000;
/** How often a recovering sidecar is polled. */
const POLL_MS = 100;

const OPERATION = 'op-shared';

const CONTEXT = {
  assistantMessageId: 'msg_1',
  identifier: 'fs',
  apiName: 'writeFile',
  args: { path: '/tmp/out' },
  executor: Executor.SERVER,
};

function control(id: string, receiver: Receiver) {
  return {
    id,
    type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
    webhook: { url: `${receiver.url}/${id}`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
  };
}

async function decide(client: AnyClient, toolCallId: string): Promise<DecideToolCallResponse> {
  const req = create(DecideToolCallRequestSchema, {
    event: { context: { ...CONTEXT, toolCallId, operationId: OPERATION } },
  });
  const res = await unary(
    client,
    'DecideToolCall',
    toLoaderObject(DecideToolCallRequestSchema, req),
  );
  return fromLoaderObject(DecideToolCallResponseSchema, res);
}

async function publish(client: AnyClient, toolCallId: string, content: string) {
  const req = create(PublishDeferredResultRequestSchema, {
    toolCallId,
    result: { content, success: true },
  });
  const res = await unary(
    client,
    'PublishDeferredResult',
    toLoaderObject(PublishDeferredResultRequestSchema, req),
  );
  return fromLoaderObject(PublishDeferredResultResponseSchema, res);
}

async function rejection(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await promise;
  } catch (e: unknown) {
    return e as grpc.ServiceError;
  }
  throw new Error('expected the call to fail');
}

async function healthz(sidecar: SidecarProcess): Promise<number> {
  return (await fetch(`http://${sidecar.http}/healthz`)).status;
}

/** Calls `probe` every {@link POLL_MS} until it resolves to true; fails after the deadline. */
async function eventually(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + RECOVERY_DEADLINE_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${RECOVERY_DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

describe('two sidecars on one PostgreSQL store', () => {
  let cluster: PostgresCluster;
  let receiver: Receiver;
  let a: SidecarProcess | undefined;
  let b: SidecarProcess | undefined;
  let clientA: AnyClient;
  let clientB: AnyClient;

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    const url = (await cluster.createDatabase()).replace(
      `//${SUPERUSER}@`,
      `//${SUPERUSER}:${PASSWORD}@`,
    );
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    const options = {
      db: false as const,
      env: { AGENTHOOKS_DB: url },
      args: ['--store-check-interval', CHECK_INTERVAL_S, '--audit-store'],
    };
    // Both start at once: the migration runs once, the other waits for it.
    [a, b] = await Promise.all([startSidecar(options), startSidecar(options)]);
    clientA = hookClient(a.grpc);
    clientB = hookClient(b.grpc);
  }, 60_000);

  afterAll(async () => {
    clientA?.close();
    clientB?.close();
    await killSidecar(a);
    await killSidecar(b);
    await receiver?.close();
    await cluster?.stop();
  });

  it('runs on B the hook registered on A, and on A right after the one registered on B, in order', async () => {
    // Each sidecar reads the operation before the other registers, so a
    // cached list would be stale: only a fresh read passes.
    expect((await decide(clientB, 'call-0')).decision?.outcome.case).toBe('allow');
    expect(receiver.requests).toEqual([]);
    await unary(clientA, 'RegisterHooks', {
      operationId: OPERATION,
      hooks: [control('first', receiver)],
    });
    const onB = await decide(clientB, 'call-1');
    expect(onB.decision?.outcome.case).toBe('allow');
    expect(receiver.requests.map((r) => r.path)).toEqual(['/first']);
    await decide(clientA, 'call-1a');
    expect(receiver.requests.map((r) => r.path)).toEqual(['/first', '/first']);

    await unary(clientB, 'RegisterHooks', {
      operationId: OPERATION,
      hooks: [control('second', receiver)],
    });
    const onA = await decide(clientA, 'call-2');
    expect(onA.decision?.outcome.case).toBe('allow');
    expect(receiver.requests.slice(2).map((r) => r.path)).toEqual(['/first', '/second']);
  });

  it('lists on either pod the audit entries of decisions made on both', async () => {
    const ids = [
      (await decide(clientA, 'audit-a')).decisionId,
      (await decide(clientB, 'audit-b')).decisionId,
    ];
    const listed = async (client: AnyClient) => {
      const res = await unary<{ decisions?: { decisionId: string }[] }>(client, 'ListDecisions', {
        operationId: OPERATION,
        pageSize: 1000,
      });
      return (res.decisions ?? []).map((d) => d.decisionId);
    };
    // Each pod commits its entries within 50 ms of the decision.
    const deadline = Date.now() + 10_000;
    let onA = await listed(clientA);
    while (!ids.every((id) => onA.includes(id)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      onA = await listed(clientA);
    }
    expect(onA).toEqual(expect.arrayContaining(ids));
    expect(await listed(clientB)).toEqual(onA);
  });

  it('publishes on B a call parked on A after A was SIGKILLed, exactly once', async () => {
    const parkReq = create(ParkToolCallRequestSchema, {
      context: { ...CONTEXT, toolCallId: 'call-parked', operationId: OPERATION },
    });
    const parked = await unary<LoaderObject>(clientA, 'ParkToolCall', {
      ...toLoaderObject(ParkToolCallRequestSchema, parkReq),
      kind: 'PARK_KIND_HUMAN_APPROVAL',
    });
    expect(parked.created).toBe(true);
    const killed = a as SidecarProcess;
    killed.kill('SIGKILL');
    expect(await killed.exited).toBe('SIGKILL');

    const first = await publish(clientB, 'call-parked', 'approved');
    expect(first.published).toBe(true);
    expect(first.finalResult?.content).toBe('approved');
    const duplicate = await publish(clientB, 'call-parked', 'approved again');
    expect(duplicate.published).toBe(false);
    expect(duplicate.finalResult?.content).toBe('approved');
  });

  it('fails decisions UNAVAILABLE and turns NOT_SERVING while the server is down, then recovers', async () => {
    const sidecar = b as SidecarProcess;
    expect(await healthz(sidecar)).toBe(200);
    await cluster.stopServer();
    try {
      const err = await rejection(decide(clientB, 'call-down'));
      expect(err.code).toBe(14); // UNAVAILABLE: never an allow without the hooks
      expect(errorInfoOf(err)?.reason).toBe('STORE_UNAVAILABLE');
      await eventually('health turned NOT_SERVING', async () => (await healthz(sidecar)) === 503);
    } finally {
      await cluster.startServer();
    }
    await eventually('health turned SERVING', async () => (await healthz(sidecar)) === 200);
    const before = receiver.requests.length;
    const after = await decide(clientB, 'call-back');
    expect(after.decision?.outcome.case).toBe('allow');
    expect(receiver.requests.slice(before).map((r) => r.path)).toEqual(['/first', '/second']);
  }, 60_000);

  it('keeps at most --db-pool-size connections to the database under concurrent calls', async () => {
    const url = await cluster.createDatabase();
    const name = new URL(url).pathname.slice(1);
    const small = await startSidecar({
      db: false,
      env: { AGENTHOOKS_DB: url },
      args: ['--db-pool-size', '2'],
    });
    const client = hookClient(small.grpc);
    try {
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          unary(client, 'RegisterHooks', {
            operationId: `op-pool-${i}`,
            hooks: [control('n', receiver)],
          }),
        ),
      );
      // The pool keeps its connections open while idle (30 s): all it ever opened are there.
      const { rows } = await cluster.sql(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [name],
      );
      expect(rows[0]?.n).toBeGreaterThanOrEqual(1);
      expect(rows[0]?.n).toBeLessThanOrEqual(2);
    } finally {
      client.close();
      await killSidecar(small);
    }
  }, 60_000);

  it('never logs the password of AGENTHOOKS_DB', () => {
    for (const sidecar of [a, b]) {
      const text = JSON.stringify(sidecar?.logs);
      expect(text).not.toContain(PASSWORD);
    }
  });
});
