/**
 * @module Liveness and readiness of a real sidecar on a real PostgreSQL
 * cluster (`../users/postgres-cluster.ts`): while the server is stopped,
 * readiness (gRPC `readiness`, the server's '' and `/readyz`, `/healthz`)
 * turns NOT_SERVING and liveness (gRPC `liveness`, `/livez`) stays SERVING,
 * on the health-only listener, the API listener and the metrics listener
 * alike; both come back without a restart; shutdown turns both NOT_SERVING.
 * A sidecar started while the server is down listens anyway (liveness
 * SERVING, readiness NOT_SERVING, calls UNAVAILABLE) and serves once the
 * server is up, or exits 1 past `--db-start-timeout`.
 */
import { type Client, Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from '../../gen/grpc/health/v1/health_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar, withTimeout } from '../support/sidecar.js';
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';

/** Seconds between store checks, so that readiness follows the server quickly. */
const CHECK_INTERVAL_S = '0.2';
/** How long readiness may take to follow the server, on a loaded CI machine. */
const DEADLINE_MS = 20_000;
/** How often the probes are polled. */
const POLL_MS = 50;

type HealthClient = Client<typeof Health>;

function healthAt(address: string): HealthClient {
  return createClient(Health, createGrpcTransport({ baseUrl: `http://${address}` }));
}

/** The status of `service`, as a name such as `SERVING`. */
async function check(client: HealthClient, service: string): Promise<string> {
  return ServingStatus[(await client.check({ service })).status];
}

async function httpStatus(address: string, path: string): Promise<number> {
  return (await fetch(`http://${address}${path}`)).status;
}

/** Every probe of the sidecar, as kubelet and Prometheus would read them. */
async function probes(
  sidecar: SidecarProcess,
  grpcHealth: HealthClient,
  apiHealth: HealthClient,
): Promise<Record<string, string | number>> {
  const metrics = sidecar.metrics as string;
  const http = sidecar.http as string;
  const [live, ready, server, apiLive, apiReady, livez, readyz, healthz, apiLivez, apiReadyz] =
    await Promise.all([
      check(grpcHealth, 'liveness'),
      check(grpcHealth, 'readiness'),
      check(grpcHealth, ''),
      check(apiHealth, 'liveness'),
      check(apiHealth, 'readiness'),
      httpStatus(metrics, '/livez'),
      httpStatus(metrics, '/readyz'),
      httpStatus(metrics, '/healthz'),
      httpStatus(http, '/livez'),
      httpStatus(http, '/readyz'),
    ]);
  return { live, ready, server, apiLive, apiReady, livez, readyz, healthz, apiLivez, apiReadyz };
}

const ALL_SERVING = {
  live: 'SERVING',
  ready: 'SERVING',
  server: 'SERVING',
  apiLive: 'SERVING',
  apiReady: 'SERVING',
  livez: 200,
  readyz: 200,
  healthz: 200,
  apiLivez: 200,
  apiReadyz: 200,
};

const OUT_OF_SERVICE = {
  live: 'SERVING',
  ready: 'NOT_SERVING',
  server: 'NOT_SERVING',
  apiLive: 'SERVING',
  apiReady: 'NOT_SERVING',
  livez: 200,
  readyz: 503,
  healthz: 503,
  apiLivez: 200,
  apiReadyz: 503,
};

/**
 * Polls every probe until readiness reads `ready`; liveness must read
 * SERVING at every poll on the way. Resolves with the number of polls.
 */
async function pollUntil(
  what: string,
  read: () => Promise<Record<string, string | number>>,
  want: Record<string, string | number>,
): Promise<number> {
  const deadline = Date.now() + DEADLINE_MS;
  for (let polls = 1; ; polls++) {
    const got = await read();
    // Liveness never wavers, whatever readiness does meanwhile.
    expect([got.live, got.apiLive, got.livez, got.apiLivez], `poll ${polls}`).toEqual([
      'SERVING',
      'SERVING',
      200,
      200,
    ]);
    if (JSON.stringify(got) === JSON.stringify(want)) return polls;
    if (Date.now() > deadline) {
      throw new Error(`${what} within ${DEADLINE_MS} ms: last ${JSON.stringify(got)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** The code and ErrorInfo reason a call fails with; fails the test when it succeeds. */
async function failure(call: Promise<unknown>): Promise<{ code: string; reason?: string }> {
  try {
    await call;
  } catch (e: unknown) {
    const err = ConnectError.from(e);
    return { code: Code[err.code], reason: err.findDetails(ErrorInfoSchema)[0]?.reason };
  }
  throw new Error('expected the call to fail');
}

/** Polls until `probe` resolves to true; fails after {@link DEADLINE_MS}. */
async function eventually(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** A decision on `operationId` for the tool call `toolCallId`. */
function decision(operationId: string, toolCallId: string) {
  return {
    event: {
      context: {
        operationId,
        toolCallId,
        assistantMessageId: 'msg_1',
        identifier: 'fs',
        apiName: 'writeFile',
        executor: Executor.SERVER,
      },
    },
  };
}

/** Collects a Watch stream's statuses until it ends or fails. */
function watch(client: HealthClient, service: string) {
  const seen: string[] = [];
  const done = (async () => {
    try {
      for await (const res of client.watch({ service })) seen.push(ServingStatus[res.status]);
    } catch {
      // The stream ends with the process; what it saw is the result.
    }
  })();
  return { seen, done };
}

describe('liveness and readiness on PostgreSQL', () => {
  let cluster: PostgresCluster;
  let receiver: Receiver;
  let sidecar: SidecarProcess | undefined;

  /**
   * Replaces the sidecar with one started with `args` on a new database
   * while the server is stopped, runs `during` on it, and starts the server
   * again whatever `during` did.
   */
  async function whileDown(
    args: string[],
    during: (down: SidecarProcess) => Promise<void>,
  ): Promise<void> {
    await killSidecar(sidecar);
    const url = await cluster.createDatabase();
    await cluster.stopServer();
    try {
      sidecar = await startSidecar({
        db: false,
        env: { AGENTHOOKS_DB: url },
        args: [...args, '--store-check-interval', CHECK_INTERVAL_S],
      });
      await during(sidecar);
    } finally {
      await cluster.startServer();
    }
  }

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
  }, 60_000);

  afterAll(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
    await cluster?.stop();
  });

  it('keeps liveness SERVING through a database outage while readiness leaves and comes back, then drains both', async () => {
    const url = await cluster.createDatabase();
    sidecar = await startSidecar({
      db: false,
      env: { AGENTHOOKS_DB: url },
      args: [
        '--health-listen',
        '127.0.0.1:0',
        '--metrics-listen',
        '127.0.0.1:0',
        '--store-check-interval',
        CHECK_INTERVAL_S,
      ],
    });
    const running = sidecar;
    const grpcHealth = healthAt(running.health as string);
    const apiHealth = healthAt(running.grpc);
    const read = () =>
      probes(running, grpcHealth, apiHealth).catch((e: unknown) => {
        // A probe that cannot connect: say whether the process is gone, and why.
        const exit = running.child.exitCode ?? running.child.signalCode;
        throw new Error(`probe failed (exit ${exit}): ${JSON.stringify(running.logs.slice(-20))}`, {
          cause: e,
        });
      });
    expect(await read()).toEqual(ALL_SERVING);
    const liveness = watch(grpcHealth, 'liveness');
    const readiness = watch(grpcHealth, 'readiness');

    await cluster.stopServer();
    try {
      await pollUntil('readiness turned NOT_SERVING', read, OUT_OF_SERVICE);
      // Out of service for several store checks: liveness still holds at every read.
      for (let i = 0; i < 10; i++) expect(await read()).toEqual(OUT_OF_SERVICE);
    } finally {
      await cluster.startServer();
    }
    await pollUntil('readiness turned SERVING again', read, ALL_SERVING);
    // The same process throughout: nothing restarted it.
    expect(running.child.exitCode).toBeNull();

    running.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    await Promise.all([liveness.done, readiness.done]);
    expect(liveness.seen).toEqual(['SERVING', 'NOT_SERVING']);
    expect(readiness.seen).toEqual(['SERVING', 'NOT_SERVING', 'SERVING', 'NOT_SERVING']);
  }, 60_000);

  it('starts while its database is down, failing calls UNAVAILABLE, and serves once it is up', async () => {
    await whileDown(['--health-listen', '127.0.0.1:0'], async (down) => {
      const health = healthAt(down.health as string);
      expect(await check(health, 'liveness')).toBe('SERVING');
      expect(await check(health, 'readiness')).toBe('NOT_SERVING');
      expect(await check(health, '')).toBe('NOT_SERVING');
      const hooks = createClient(
        HookService,
        createGrpcTransport({ baseUrl: `http://${down.grpc}` }),
      );
      const unavailable = { code: 'Unavailable', reason: 'STORE_UNAVAILABLE' };
      expect(await failure(hooks.listHooks({ operationId: 'op-early' }))).toEqual(unavailable);
      expect(await failure(hooks.decideToolCall(decision('op-early', 'call-early')))).toEqual(
        unavailable,
      );
      expect(down.logs.map((l) => l.msg)).toContain(
        'the PostgreSQL store cannot be opened yet; listening NOT_SERVING and retrying',
      );
    });
    const running = sidecar as SidecarProcess;
    const health = healthAt(running.health as string);
    await eventually(
      'readiness turned SERVING',
      async () => (await check(health, 'readiness')) === 'SERVING',
    );
    const hooks = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${running.grpc}` }),
    );
    await hooks.registerHooks({
      operationId: 'op-late',
      hooks: [
        {
          id: 'gate',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${receiver.url}/gate`, responseHandling: ResponseHandling.TOOL_CALL },
        },
      ],
    });
    const res = await hooks.decideToolCall(decision('op-late', 'call-late'));
    expect(res.decision?.outcome.case).toBe('allow');
    expect(receiver.requests.map((r) => r.path)).toEqual(['/gate']);
    // The same process: it never exited.
    expect(running.child.exitCode).toBeNull();
    expect(await check(health, 'liveness')).toBe('SERVING');
  }, 60_000);

  it('starts while its database is read-only (a standby mid-failover), and serves once it is writable', async () => {
    await killSidecar(sidecar);
    const url = await cluster.createDatabase();
    const name = new URL(url).pathname.slice(1);
    await cluster.sql(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`);
    sidecar = await startSidecar({
      db: false,
      env: { AGENTHOOKS_DB: url },
      args: ['--health-listen', '127.0.0.1:0', '--store-check-interval', CHECK_INTERVAL_S],
    });
    const running = sidecar;
    const health = healthAt(running.health as string);
    expect(await check(health, 'liveness')).toBe('SERVING');
    expect(await check(health, 'readiness')).toBe('NOT_SERVING');
    expect(running.logs).toContainEqual(
      expect.objectContaining({
        msg: 'the PostgreSQL store cannot be opened yet; listening NOT_SERVING and retrying',
      }),
    );
    await cluster.sql(`ALTER DATABASE "${name}" SET default_transaction_read_only = off`);
    await eventually(
      'readiness turned SERVING',
      async () => (await check(health, 'readiness')) === 'SERVING',
    );
    expect(running.child.exitCode).toBeNull();
  }, 60_000);

  it('exits 1 when its database stays down past --db-start-timeout', async () => {
    await whileDown(['--db-start-timeout', '1s'], async (down) => {
      const exit = await withTimeout(down.exited, DEADLINE_MS, 'the sidecar did not exit');
      expect(exit).toBe(1);
      expect(down.logs).toContainEqual(
        expect.objectContaining({
          level: 'error',
          msg: 'giving up opening the PostgreSQL store',
          reason: 'STORE_UNAVAILABLE',
        }),
      );
    });
  }, 60_000);
});
