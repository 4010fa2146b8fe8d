/**
 * @module The store rows of the bench: the same decision and registration
 * loads against a sidecar on its embedded SQLite file and against one on
 * PostgreSQL, in the same round, and the cost of a decision once 100,000
 * operations are stored. PostgreSQL is a private cluster started for the
 * round (`test/users/postgres-cluster.ts`) with its default durability:
 * `fsync` and `synchronous_commit` on, so a registration waits for its WAL
 * flush, where SQLite's WAL with `synchronous=NORMAL` does not (both survive
 * a crash of the sidecar; SQLite may lose its last commits to a power cut).
 *
 * A decision has one control webhook that allows, at c=16 from the bench's
 * Node client: the server's CPU per call is what these rows compare, so the
 * client need not be the fastest. The 100k rows store 100,000 operations of
 * one control each through the store itself (registering them through the
 * sidecar would take minutes), then decide round robin over 1,000 of them
 * and over all 100,000: the second pays for every operation that the hook
 * cache (`--hook-cache-size`) does not hold, or on PostgreSQL for a larger
 * index.
 */
import { copyFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  type DecideToolCallResponse,
  DecideToolCallResponseSchema,
  HookService,
  RegisterHooksRequestSchema,
  RegisterHooksResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { HookStore } from '../../src/store/store.js';
import { type SidecarProcess, startSidecar, tempDbPath } from '../../test/support/sidecar.js';
import { type PostgresCluster, startPostgresCluster } from '../../test/users/postgres-cluster.js';
import { createClient, unaryMethod, waitForReady } from './grpc-codec.js';
import { type Call, inAbbaOrder, measureLatency, measureThroughput } from './load.js';
import { controlHook, decideRequest, fixedId, ID_DIGITS, withToolCallId } from './messages.js';
import { metric } from './paired.js';
import { cpuMsOf } from './processes.js';
import type { RunContext, Scenario, ScenarioResult } from './scenarios.js';

/** The two stores, in the order a round runs them. */
const STORES = ['sqlite', 'postgres'] as const;
type StoreKind = (typeof STORES)[number];

/** Calls in flight of the decision and registration loops. */
const CONCURRENCY = 16;
/** Operations stored by the 100k rows. */
const STORED_OPERATIONS = 100_000;
/** Prefix of the stored operations' ids. */
const STORED_PREFIX = 'op_stored_';
/** Operations a decision names in the small working set. */
const SMALL_SET = 1000;
/** Alternating chunks of the two working sets in the 100k rows. */
const CHUNKS = 4;
/** How long a client may take to connect to a fresh sidecar. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Microseconds per millisecond. */
const US_PER_MS = 1000;
/** Milliseconds per second. */
const MS_PER_S = 1000;

/** Sizes of one round of the store rows. */
interface StoreParams {
  readonly latencyWarmup: number;
  readonly latencyCalls: number;
  readonly decideWarmup: number;
  readonly decideCalls: number;
  readonly registerWarmup: number;
  readonly registerCalls: number;
  readonly stored: number;
}

function storeParams(ctx: RunContext): StoreParams {
  // A quick run (bench development) scales every loop down, the stored operations too.
  const quick = ctx.params.latencyCalls < 1000;
  return quick
    ? {
        latencyWarmup: 50,
        latencyCalls: 200,
        decideWarmup: 200,
        decideCalls: 1000,
        registerWarmup: 50,
        registerCalls: 300,
        stored: 10_000,
      }
    : {
        latencyWarmup: 200,
        latencyCalls: 600,
        decideWarmup: 600,
        decideCalls: 3000,
        registerWarmup: 100,
        registerCalls: 800,
        stored: STORED_OPERATIONS,
      };
}

/** A sidecar of a round on one store, and a client of it. */
export interface StoreSide {
  readonly kind: StoreKind;
  readonly sidecar: SidecarProcess;
  readonly client: grpc.Client;
}

/** The database a round's sidecar of `kind` uses: a new SQLite file, or a new PostgreSQL database. */
async function newDatabase(kind: StoreKind, cluster: PostgresCluster): Promise<string> {
  return kind === 'sqlite' ? tempDbPath() : cluster.createDatabase();
}

/** Opens the store of `db` in this process, to fill it before its sidecar starts. */
async function openStore(db: string): Promise<HookStore & { close(): unknown }> {
  return db.startsWith('postgres://') ? openPostgresStore(db) : openSqliteStore(db);
}

/** Starts a sidecar on `db`, with `args` added, and connects a client. */
export async function startOn(
  kind: StoreKind,
  db: string,
  ctx: RunContext,
  args: readonly string[] = [],
): Promise<StoreSide> {
  const sidecar = await startSidecar({
    db: kind === 'sqlite' ? db : false,
    nodeFlags: ctx.sidecarFlags,
    // No password in the URL: the private cluster trusts local connections.
    args: kind === 'postgres' ? ['--db', db, ...args] : args,
    http: false,
  });
  const client = createClient(sidecar.grpc);
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
  } catch (e: unknown) {
    client.close();
    await sidecar.stop();
    throw e;
  }
  return { kind, sidecar, client };
}

export async function stopSide(side: StoreSide): Promise<void> {
  side.client.close();
  await side.sidecar.stop();
}

/** CPU milliseconds the sidecar spends while `loop` runs. */
export async function cpuMsDuring(pid: number, loop: () => Promise<unknown>): Promise<number> {
  const before = cpuMsOf(pid);
  await loop();
  return cpuMsOf(pid) - before;
}

/**
 * Decisions a sidecar answers before the CPU rows that compare two settings of
 * it measure it (tracing, audit): its CPU per decision keeps falling for its
 * first few thousand while V8 compiles, and more so for the side with more code
 * (BENCHMARKS.md, "Tracing: the row measured V8's warm-up").
 */
export const STEADY_WARMUP = 4000;

/** Turns of {@link warmInTurn}: each sidecar answers its warm-up in this many chunks. */
const WARM_TURNS = 8;

/**
 * Warms `sides` in turns: each answers `warmup` calls (`call(side)`, c=`concurrency`; each
 * chunk numbers its calls from 0, so ids repeat across chunks) in
 * {@link WARM_TURNS} chunks, the sides taking turns, in reverse order every other turn.
 * So they finish their warm-ups together, and none sits idle for long before the measured
 * part. Warmed one after another, the first ones warmed measured slower for the first few
 * thousand calls that followed: four sidecars of one build differed by 1.13-1.36x (highest
 * to lowest CPU per decision) warmed in sequence, 1.04-1.12x warmed in turns, the slow ones
 * always those warmed first: idle past the keep-alive, their webhook connections closed, and
 * the code that made new ones deoptimized (BENCHMARKS.md, "Warm-ups in turns").
 */
export async function warmInTurn<S>(
  sides: readonly S[],
  call: (side: S) => Call,
  options: { readonly warmup: number; readonly concurrency: number },
): Promise<void> {
  for (let turn = 0; turn < WARM_TURNS; turn++) {
    // Exactly `warmup` calls a side over the turns.
    const chunk =
      Math.floor(((turn + 1) * options.warmup) / WARM_TURNS) -
      Math.floor((turn * options.warmup) / WARM_TURNS);
    for (const side of turn % 2 === 0 ? sides : [...sides].reverse()) {
      await measureThroughput(call(side), options.concurrency, chunk, 0);
    }
  }
}

/**
 * Pairs of sidecars a round of {@link pairedCpuMs} compares: two warm sidecars
 * of one build differ by up to a third in CPU per decision from start to start
 * (243-353 µs in ten starts, one at a time); with one per side that difference
 * alone moved a round's ratio from 0.90 to 1.35.
 */
export const CPU_PAIRS = 2;

/** Two sidecars compared in {@link pairedCpuMs}: `a` is the baseline, `b` the one with the feature. */
export interface CpuPair<S> {
  readonly a: S;
  readonly b: S;
}

/** How long the last chunk's deferred work (see {@link pairedCpuMs}) has to land in the window. */
const SETTLE_MS = 200;

/**
 * The CPU milliseconds each side spends on `calls` calls (`call(side)`, c=`concurrency`),
 * summed over `pairs`: each pair's sidecars answer `chunks` chunks in ABBA order (see
 * `inAbbaOrder`), pair after pair, so that a drift of the machine falls on both sides.
 *
 * Every sidecar's CPU is read at the same two moments: before the first chunk, and
 * {@link SETTLE_MS} after the last. So what a sidecar does between its own chunks counts
 * too (a sink's timed group commit, a batch of spans exported, V8's background work),
 * work that falls mostly on the side with the feature; counted over its chunks alone,
 * it would be left out. Answers the sums, the calls per side and the chunk size.
 */
export async function pairedCpuMs<S extends { readonly sidecar: { readonly pid: number } }>(
  pairs: readonly CpuPair<S>[],
  call: (side: S) => Call,
  options: { readonly calls: number; readonly chunks: number; readonly concurrency: number },
): Promise<{ a: number; b: number; calls: number; chunk: number }> {
  const chunk = Math.ceil(options.calls / (options.chunks * pairs.length));
  const run = async (side: S) => {
    await measureThroughput(call(side), options.concurrency, 0, chunk);
  };
  const cpuOf = (side: S) => cpuMsOf(side.sidecar.pid);
  const before = pairs.map((pair) => ({ a: cpuOf(pair.a), b: cpuOf(pair.b) }));
  for (let c = 0; c < options.chunks; c++) {
    for (const pair of pairs) {
      await inAbbaOrder(
        c,
        () => run(pair.a),
        () => run(pair.b),
      );
    }
  }
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  let a = 0;
  let b = 0;
  for (const [i, pair] of pairs.entries()) {
    const start = before[i] as { a: number; b: number };
    a += cpuOf(pair.a) - start.a;
    b += cpuOf(pair.b) - start.b;
  }
  return { a, b, calls: options.chunks * pairs.length * chunk, chunk };
}

/** CPU per call of the sidecar over a timed loop, in microseconds. */
async function cpuPerCall<T>(pid: number, calls: number, loop: () => Promise<T>) {
  const before = cpuMsOf(pid);
  const result = await loop();
  return { usPer: ((cpuMsOf(pid) - before) * US_PER_MS) / calls, result };
}

/** A DecideToolCall on operation `operationOf(i)`, which must allow after one control. */
export function decideOn(client: grpc.Client, operationOf: (i: number) => string): Call {
  const decide = unaryMethod(
    client,
    `/${HookService.typeName}/${HookService.method.decideToolCall.name}`,
    HookService.method.decideToolCall.input,
    DecideToolCallResponseSchema,
  );
  return async (i) => {
    const response: DecideToolCallResponse = await decide(
      withToolCallId(decideRequest(operationOf(i)), i),
    );
    const outcome = response.decision?.outcome;
    if (outcome?.case !== 'allow' || outcome.value.controlsConsulted !== 1) {
      throw new Error(`unexpected DecideToolCall answer: ${JSON.stringify(response.decision)}`);
    }
  };
}

/** A RegisterHooks of `hooks` on a new operation per call. */
export function registerNew(client: grpc.Client, prefix: string, hooks: Hook[]): Call {
  const register = unaryMethod(
    client,
    `/${HookService.typeName}/${HookService.method.registerHooks.name}`,
    RegisterHooksRequestSchema,
    RegisterHooksResponseSchema,
  );
  return async (i) => {
    const response = await register(
      create(RegisterHooksRequestSchema, { operationId: fixedId(prefix, i), hooks }),
    );
    if (response.hookCount !== hooks.length) throw new Error(`hook count ${response.hookCount}`);
  };
}

/**
 * What the store rows share across the rounds of one bench run: one private
 * cluster, and the 100k rows' filled databases (an SQLite file that each
 * round copies, a PostgreSQL database that each round's database copies as
 * its template), filled once because filling takes longer than measuring.
 */
interface StoreFixtures {
  readonly cluster: PostgresCluster;
  filled?: Promise<{ readonly sqlite: string; readonly postgres: string }>;
}

let fixtures: Promise<StoreFixtures> | undefined;

function storeFixtures(): Promise<StoreFixtures> {
  fixtures ??= startPostgresCluster({ durable: true }).then((cluster) => ({ cluster }));
  return fixtures;
}

/** Stops the store rows' cluster and removes their files; the runner calls it once at the end. */
export async function stopStoreFixtures(): Promise<void> {
  const started = fixtures;
  fixtures = undefined;
  if (started === undefined) return;
  const { cluster, filled } = await started;
  const files = await filled?.catch(() => undefined);
  if (files !== undefined) rmSync(dirname(files.sqlite), { recursive: true, force: true });
  await cluster.stop();
}

/**
 * The filled databases of the 100k rows, made on first use: `count`
 * operations of one control each. SQLite gets every operation through the
 * store (0.16 ms an append). PostgreSQL gets the first through the store, so
 * its rows are what the store writes, and the others as copies of those rows
 * in two statements: appending 100,000 operations one transaction at a time
 * took minutes here.
 */
function filledDatabases(f: StoreFixtures, count: number, hooks: Hook[], ctx: RunContext) {
  f.filled ??= (async () => {
    const started = performance.now();
    const sqlite = tempDbPath();
    await fillStore(sqlite, count, hooks);
    const postgres = await f.cluster.createDatabase();
    await fillStore(postgres, 1, hooks);
    const db = new pg.Client({ connectionString: postgres });
    await db.connect();
    try {
      const first = fixedId(STORED_PREFIX, 0);
      const idOf = `'${STORED_PREFIX}' || lpad(n::text, ${ID_DIGITS}, '0')`;
      await db.query(
        `INSERT INTO agenthooks_operations (id, status, created_at, updated_at)
         SELECT ${idOf}, o.status, o.created_at, o.updated_at
         FROM agenthooks_operations o, generate_series(1, $2::integer - 1) AS n WHERE o.id = $1`,
        [first, count],
      );
      await db.query(
        `INSERT INTO agenthooks_hooks (operation_id, seq, hook_id, hook_type, plugin, config)
         SELECT ${idOf}, h.seq, h.hook_id, h.hook_type, h.plugin, h.config
         FROM agenthooks_hooks h, generate_series(1, $2::integer - 1) AS n WHERE h.operation_id = $1`,
        [first, count],
      );
      await db.query('ANALYZE');
    } finally {
      await db.end();
    }
    const seconds = ((performance.now() - started) / MS_PER_S).toFixed(1);
    ctx.log(`stored ${count} operations in SQLite and PostgreSQL in ${seconds} s`);
    return { sqlite, postgres };
  })();
  return f.filled;
}

/** A copy of a filled database for one round's sidecar. */
async function copyOf(kind: StoreKind, filled: string, cluster: PostgresCluster): Promise<string> {
  if (kind === 'sqlite') {
    // The filling store was closed, which checkpoints its WAL into the file.
    const copy = tempDbPath();
    copyFileSync(filled, copy);
    return copy;
  }
  copies += 1;
  const name = `round_${copies}`;
  await cluster.sql(`CREATE DATABASE ${name} TEMPLATE ${new URL(filled).pathname.slice(1)}`);
  return `${cluster.url.slice(0, cluster.url.lastIndexOf('/'))}/${name}`;
}

/** Databases copied so far, for their names. */
let copies = 0;

/** Decisions and registrations on each store, with the PostgreSQL/SQLite ratios. */
export const storesScenario: Scenario = {
  id: 'stores',
  title: `DecideToolCall (one control) and RegisterHooks on SQLite and on PostgreSQL, c=${CONCURRENCY}`,
  kind: 'sidecar',
  metrics: [
    ...STORES.flatMap((s) => [
      metric(`${s}P50`, `${s}: decision c=1 p50`, 'ms', 'lower', 3),
      metric(`${s}Cpu`, `${s}: server CPU per decision at c=${CONCURRENCY}`, 'µs', 'lower', 0),
      metric(`${s}Decisions`, `${s}: decisions at c=${CONCURRENCY}`, 'calls/s', 'higher', 0),
      metric(`${s}Regs`, `${s}: registrations at c=${CONCURRENCY}`, 'regs/s', 'higher', 0),
      metric(`${s}RegCpu`, `${s}: server CPU per registration`, 'µs', 'lower', 0),
    ]),
    metric('cpuRatio', 'decision CPU, PostgreSQL / SQLite', 'x', 'lower', 2),
    metric('regsRatio', 'registrations/s, PostgreSQL / SQLite', 'x', 'higher', 2),
  ],
  run: async (ctx) => {
    const { cluster } = await storeFixtures();
    const p = storeParams(ctx);
    const metrics: Record<string, number> = {};
    let ops = 0;
    for (const kind of STORES) {
      const side = await startOn(kind, await newDatabase(kind, cluster), ctx);
      try {
        const operationId = 'op_store_decide';
        await registerNew(side.client, operationId, [controlHook('policy', ctx.receiverUrl)])(0);
        const decide = decideOn(side.client, () => fixedId(operationId, 0));
        const latency = await measureLatency(decide, p.latencyWarmup, p.latencyCalls);
        await measureThroughput(decide, CONCURRENCY, p.decideWarmup, 0);
        const decisions = await cpuPerCall(side.sidecar.pid, p.decideCalls, () =>
          measureThroughput(decide, CONCURRENCY, 0, p.decideCalls),
        );
        const register = registerNew(side.client, 'op_store_reg_', [
          controlHook('policy', ctx.receiverUrl),
        ]);
        await measureThroughput(register, CONCURRENCY, p.registerWarmup, 0);
        const shifted: Call = (i) => register(p.registerWarmup + i);
        const regs = await cpuPerCall(side.sidecar.pid, p.registerCalls, () =>
          measureThroughput(shifted, CONCURRENCY, 0, p.registerCalls),
        );
        Object.assign(metrics, {
          [`${kind}P50`]: latency.p50,
          [`${kind}Cpu`]: decisions.usPer,
          [`${kind}Decisions`]: decisions.result.perSecond,
          [`${kind}Regs`]: regs.result.perSecond,
          [`${kind}RegCpu`]: regs.usPer,
        });
        ops += p.latencyWarmup + p.latencyCalls + p.decideWarmup + p.decideCalls + p.registerCalls;
      } finally {
        await stopSide(side);
      }
    }
    metrics.cpuRatio = (metrics.postgresCpu ?? Number.NaN) / (metrics.sqliteCpu ?? Number.NaN);
    metrics.regsRatio = (metrics.postgresRegs ?? Number.NaN) / (metrics.sqliteRegs ?? Number.NaN);
    return { metrics, ops, notes: [] } satisfies ScenarioResult;
  },
};

/** Stores `count` operations of one control each, through the store, before a sidecar opens it. */
async function fillStore(db: string, count: number, hooks: Hook[]): Promise<void> {
  const store = await openStore(db);
  try {
    for (let i = 0; i < count; i++) {
      await store.appendHooks(fixedId(STORED_PREFIX, i), undefined, hooks);
    }
  } finally {
    await store.close();
  }
}

/** The cost of a decision with 100,000 operations stored, against 1,000 decided on. */
export const storedOperationsScenario: Scenario = {
  id: 'stores-100k',
  title: `DecideToolCall (one control) with ${STORED_OPERATIONS.toLocaleString('en-US')} operations stored, round robin over ${SMALL_SET.toLocaleString('en-US')} of them and over all, on SQLite and on PostgreSQL, c=${CONCURRENCY}`,
  kind: 'sidecar',
  metrics: [
    ...STORES.flatMap((s) => [
      metric(`${s}Small`, `${s}: CPU per decision over 1k operations`, 'µs', 'lower', 0),
      metric(`${s}All`, `${s}: CPU per decision over all operations`, 'µs', 'lower', 0),
      metric(`${s}Ratio`, `${s}: CPU per decision, all / 1k`, 'x', 'lower', 2),
    ]),
  ],
  run: async (ctx) => {
    const f = await storeFixtures();
    const p = storeParams(ctx);
    const metrics: Record<string, number> = {};
    const filled = await filledDatabases(
      f,
      p.stored,
      [controlHook('policy', ctx.receiverUrl)],
      ctx,
    );
    let ops = 0;
    for (const kind of STORES) {
      const db = await copyOf(kind, filled[kind], f.cluster);
      const side = await startOn(kind, db, ctx);
      try {
        const over = (set: number) => decideOn(side.client, (i) => fixedId(STORED_PREFIX, i % set));
        const small = over(SMALL_SET);
        const all = over(p.stored);
        await measureThroughput(small, CONCURRENCY, p.decideWarmup, 0);
        await measureThroughput(all, CONCURRENCY, p.decideWarmup, 0);
        // Alternating chunks, so that a drift of the machine falls on both.
        const chunk = Math.ceil(p.decideCalls / CHUNKS);
        let smallMs = 0;
        let allMs = 0;
        for (let c = 0; c < CHUNKS; c++) {
          const first = p.decideWarmup + c * chunk;
          smallMs += await cpuMsDuring(side.sidecar.pid, () =>
            measureThroughput((i) => small(first + i), CONCURRENCY, 0, chunk),
          );
          allMs += await cpuMsDuring(side.sidecar.pid, () =>
            measureThroughput((i) => all(first + i), CONCURRENCY, 0, chunk),
          );
        }
        const calls = CHUNKS * chunk;
        Object.assign(metrics, {
          [`${kind}Small`]: (smallMs * US_PER_MS) / calls,
          [`${kind}All`]: (allMs * US_PER_MS) / calls,
          [`${kind}Ratio`]: allMs / smallMs,
        });
        ops += 2 * (p.decideWarmup + p.decideCalls);
      } finally {
        await stopSide(side);
      }
    }
    return { metrics, ops, notes: [] } satisfies ScenarioResult;
  },
};
