/**
 * @module A PostgreSQL restart under load: two real sidecars on one private
 * cluster (`../users/postgres-cluster.ts`) serve a bounded load of decisions
 * (one control webhook on a real receiver) and registrations from this test;
 * the server is stopped mid-load (`pg_ctl stop -m immediate`, as a crash
 * would) and started again. Every registration acknowledged is still there;
 * every decision in the gap failed UNAVAILABLE with a STORE_* reason, none
 * allowed without its webhook; both sidecars decide again within seconds,
 * the same processes; liveness stayed SERVING throughout while readiness went
 * NOT_SERVING and came back.
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
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';

/** Seconds between store checks, so that readiness follows the server quickly. */
const CHECK_INTERVAL_S = '0.2';
/** Deadline of each call of the load: none may hang. */
const CALL_TIMEOUT_MS = 10_000;
/** Most calls the load makes, whatever happens. */
const MAX_CALLS = 4_000;
/** How long each phase may take before the test fails. */
const PHASE_DEADLINE_MS = 20_000;
/** A sidecar must decide again within this long of the server's start. */
const RECOVERY_BOUND_MS = 5_000;
/** How often the probes are polled. */
const PROBE_POLL_MS = 50;
/** Decision workers and registration workers per sidecar. */
const DECISION_WORKERS = 2;
const REGISTRATION_WORKERS = 1;
/** The operation every decision names; its one control is registered first. */
const DECIDE_OPERATION = 'op-load';
/** The store reasons a call may fail with while the server is down or starting. */
const STORE_OUTAGE_REASONS = ['STORE_UNAVAILABLE'];

type HookClient = Client<typeof HookService>;
type HealthClient = Client<typeof Health>;

/** One call of the load and how it ended. */
interface CallRecord {
  readonly sidecar: string;
  readonly kind: 'decide' | 'register';
  /** The tool call id (decide) or the operation id (register). */
  readonly id: string;
  readonly start: number;
  readonly end: number;
  /** `allow`, `deny`, `mock`, `ok` (register), or `error`. */
  readonly outcome: string;
  readonly code?: string;
  readonly reason?: string;
}

/** One poll of one sidecar's probes. */
interface ProbeRecord {
  readonly sidecar: string;
  readonly at: number;
  readonly live: string;
  readonly ready: string;
}

function connect(address: string) {
  const transport = createGrpcTransport({ baseUrl: `http://${address}` });
  return { hooks: createClient(HookService, transport), health: createClient(Health, transport) };
}

/** How a failed call ended: its code name and ErrorInfo reason. */
function failure(e: unknown): { code: string; reason?: string } {
  const err = ConnectError.from(e);
  return { code: Code[err.code], reason: err.findDetails(ErrorInfoSchema)[0]?.reason };
}

async function status(client: HealthClient, service: string): Promise<string> {
  try {
    return ServingStatus[(await client.check({ service }, { timeoutMs: 2_000 })).status];
  } catch (e: unknown) {
    return `ERROR ${ConnectError.from(e).message}`;
  }
}

/** Waits until `done()` holds, checking every few milliseconds; fails after the deadline. */
async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + PHASE_DEADLINE_MS;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${PHASE_DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a PostgreSQL restart under load on two sidecars', () => {
  let cluster: PostgresCluster;
  let receiver: Receiver;
  const sidecars: SidecarProcess[] = [];

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
  }, 60_000);

  afterAll(async () => {
    for (const sidecar of sidecars) await killSidecar(sidecar);
    await receiver?.close();
    await cluster?.stop();
  });

  it('loses no acknowledged registration, allows nothing in the gap, and recovers without a restart', async () => {
    const url = await cluster.createDatabase();
    const options = {
      db: false as const,
      env: { AGENTHOOKS_DB: url },
      args: ['--health-listen', '127.0.0.1:0', '--store-check-interval', CHECK_INTERVAL_S],
    };
    sidecars.push(...(await Promise.all([startSidecar(options), startSidecar(options)])));
    const named = sidecars.map((process, i) => ({
      name: i === 0 ? 'A' : 'B',
      process,
      pid: process.pid,
      ...connect(process.grpc),
      probe: connect(process.health as string).health,
    }));
    const [a, b] = named as [(typeof named)[0], (typeof named)[0]];
    await a.hooks.registerHooks({
      operationId: DECIDE_OPERATION,
      hooks: [
        {
          id: 'gate',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${receiver.url}/gate`, responseHandling: ResponseHandling.TOOL_CALL },
        },
      ],
    });

    const calls: CallRecord[] = [];
    const probes: ProbeRecord[] = [];
    let stopped = false;
    let started = 0;
    const take = () => !stopped && started++ < MAX_CALLS;

    const decideWorker = async (name: string, client: HookClient, worker: number) => {
      for (let n = 0; take(); n++) {
        const id = `call-${name}-${worker}-${n}`;
        const start = performance.now();
        try {
          const res = await client.decideToolCall(
            {
              event: {
                context: {
                  operationId: DECIDE_OPERATION,
                  toolCallId: id,
                  assistantMessageId: 'msg_1',
                  identifier: 'fs',
                  apiName: 'writeFile',
                  executor: Executor.SERVER,
                },
              },
            },
            { timeoutMs: CALL_TIMEOUT_MS },
          );
          const outcome = res.decision?.outcome.case ?? 'none';
          calls.push({ sidecar: name, kind: 'decide', id, start, end: performance.now(), outcome });
        } catch (e: unknown) {
          const end = performance.now();
          calls.push({
            sidecar: name,
            kind: 'decide',
            id,
            start,
            end,
            outcome: 'error',
            ...failure(e),
          });
        }
      }
    };
    const registerWorker = async (name: string, client: HookClient, worker: number) => {
      for (let n = 0; take(); n++) {
        const id = `reg-${name}-${worker}-${n}`;
        const start = performance.now();
        try {
          await client.registerHooks(
            {
              operationId: id,
              hooks: [
                {
                  id: 'notify',
                  type: HookType.AFTER_STEP,
                  webhook: { url: `${receiver.url}/notify` },
                },
              ],
            },
            { timeoutMs: CALL_TIMEOUT_MS },
          );
          calls.push({
            sidecar: name,
            kind: 'register',
            id,
            start,
            end: performance.now(),
            outcome: 'ok',
          });
        } catch (e: unknown) {
          const end = performance.now();
          calls.push({
            sidecar: name,
            kind: 'register',
            id,
            start,
            end,
            outcome: 'error',
            ...failure(e),
          });
        }
      }
    };
    const probeLoop = async () => {
      while (!stopped) {
        for (const s of named) {
          const [live, ready] = await Promise.all([
            status(s.probe, 'liveness'),
            status(s.probe, 'readiness'),
          ]);
          probes.push({ sidecar: s.name, at: performance.now(), live, ready });
        }
        await new Promise((resolve) => setTimeout(resolve, PROBE_POLL_MS));
      }
    };
    const workers = named.flatMap((s) => [
      ...Array.from({ length: DECISION_WORKERS }, (_, i) => decideWorker(s.name, s.hooks, i)),
      ...Array.from({ length: REGISTRATION_WORKERS }, (_, i) => registerWorker(s.name, s.hooks, i)),
    ]);
    const prober = probeLoop();
    const count = (name: string, kind: string, outcome: string, after = 0) =>
      calls.filter(
        (c) => c.sidecar === name && c.kind === kind && c.outcome === outcome && c.start >= after,
      ).length;

    let stoppedAt = 0;
    let restartAt = 0;
    let startedAt = 0;
    try {
      // Warm: each sidecar decides and registers.
      await until('the load ran on both sidecars', () =>
        named.every(
          (s) => count(s.name, 'decide', 'allow') >= 10 && count(s.name, 'register', 'ok') >= 3,
        ),
      );

      await cluster.stopServer('immediate');
      stoppedAt = performance.now();
      await until('readiness turned NOT_SERVING and calls failed on both', () =>
        named.every(
          (s) =>
            probes.some(
              (p) => p.sidecar === s.name && p.at > stoppedAt && p.ready === 'NOT_SERVING',
            ) &&
            count(s.name, 'decide', 'error', stoppedAt) >= 5 &&
            count(s.name, 'register', 'error', stoppedAt) >= 2,
        ),
      );
      restartAt = performance.now();
    } finally {
      await cluster.startServer();
    }
    startedAt = performance.now();
    try {
      await until('both sidecars decided again and turned SERVING', () =>
        named.every(
          (s) =>
            count(s.name, 'decide', 'allow', startedAt) >= 10 &&
            probes.some((p) => p.sidecar === s.name && p.at > startedAt && p.ready === 'SERVING'),
        ),
      );
    } finally {
      stopped = true;
      await Promise.all([...workers, prober]);
    }

    // Every decision allowed ran its control: the receiver saw its tool call id.
    const seen = new Set(receiver.requests.filter((r) => r.path === '/gate').map((r) => r.body));
    const gateBodies = [...seen].join('\n');
    const decisions = calls.filter((c) => c.kind === 'decide');
    for (const c of decisions) {
      if (c.outcome === 'error') continue;
      expect(c.outcome, c.id).toBe('allow');
      expect(gateBodies.includes(`"${c.id}"`), `the control saw ${c.id}`).toBe(true);
    }
    // Every call that failed, failed closed: UNAVAILABLE with a store reason.
    for (const c of calls.filter((c) => c.outcome === 'error')) {
      expect(c.code, c.id).toBe('Unavailable');
      expect(STORE_OUTAGE_REASONS, c.id).toContain(c.reason);
    }
    // Every call wholly inside the gap failed.
    const inGap = calls.filter((c) => c.start >= stoppedAt && c.end <= restartAt);
    expect(inGap.length).toBeGreaterThan(0);
    expect(inGap.filter((c) => c.outcome !== 'error')).toEqual([]);

    // No acknowledged registration was lost: each is on the other sidecar too.
    const acknowledged = calls.filter((c) => c.kind === 'register' && c.outcome === 'ok');
    for (const c of acknowledged) {
      const other = c.sidecar === 'A' ? b : a;
      const listed = await other.hooks.listHooks({ operationId: c.id });
      expect(
        listed.hooks.map((h) => h.id),
        c.id,
      ).toEqual(['notify']);
    }

    // Recovery: each sidecar decided again within the bound, the same process.
    const recovery = named.map((s) => {
      const first = Math.min(
        ...decisions
          .filter((c) => c.sidecar === s.name && c.outcome === 'allow' && c.start >= startedAt)
          .map((c) => c.end),
      );
      return first - startedAt;
    });
    for (const ms of recovery) expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
    for (const s of named) {
      expect(s.process.pid).toBe(s.pid);
      expect(s.process.child.exitCode).toBeNull();
      expect(s.process.child.signalCode).toBeNull();
    }

    // Liveness held at every poll; readiness left and came back on each.
    expect(probes.filter((p) => p.live !== 'SERVING')).toEqual([]);
    for (const s of named) {
      const ready = probes.filter((p) => p.sidecar === s.name).map((p) => p.ready);
      const squeezed = ready.filter((r, i) => i === 0 || r !== ready[i - 1]);
      expect(squeezed, s.name).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
    }
  }, 90_000);
});
