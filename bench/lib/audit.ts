/**
 * @module The audit rows of the bench: what the decision audit log costs a
 * decision. Sidecars on SQLite run side by side: `CPU_PAIRS` pairs of one
 * without audit sinks and one with the store sink (`--audit-store`), each
 * pair deciding on one control in chunks in ABBA order, so that a drift of
 * the machine falls on both; the row compares the server CPU per decision,
 * summed over the pairs, each sidecar's read over the whole measured part
 * (the store sink's timed group commits between its chunks count too; see
 * `pairedCpuMs`). Every sidecar first answers `STEADY_WARMUP`
 * decisions, for the reasons the tracing row gives (`tracing.ts`).
 *
 * One more sidecar's HTTP sink (`--audit-http`, a small buffer) posts to a
 * receiver of the bench while it answers as many c=16 calls, unmeasured,
 * after the CPU comparison. Then the receiver closes, so the sink goes down as the c=1 part
 * starts: its failed sends (a batch a second) and the first retries fall in
 * the measurement.
 * Its decision p99 at c=1, over at least 10 s of its own calls, is compared
 * with the first pair's sidecar without sinks, chunks in ABBA order.
 *
 * The equal warm-up and the ABBA order matter. Before, the sidecar whose
 * sink goes down sat idle while the others ran and went second in every c=1
 * pair: two sidecars without sinks in the places of "none" and "down" gave
 * a p99 ratio of 1.17-1.44 (p90 1.21-1.31); with both, 0.96-1.02 (under
 * the schedule before this one, where the sidecar whose sink goes down
 * answered a chunk after each pair of chunks of the CPU part).
 */
import { startReceiver } from '../../test/support/receiver.js';
import { tempDbPath } from '../../test/support/sidecar.js';
import { type Call, inAbbaOrder, measureThroughput } from './load.js';
import { controlHook, fixedId } from './messages.js';
import { metric } from './paired.js';
import type { RunContext, Scenario, ScenarioResult } from './scenarios.js';
import { NS_PER_MS, percentile } from './stats.js';
import {
  CPU_PAIRS,
  type CpuPair,
  decideOn,
  pairedCpuMs,
  registerNew,
  STEADY_WARMUP,
  type StoreSide,
  startOn,
  stopSide,
  warmInTurn,
} from './stores.js';

/** Calls in flight of the CPU comparison. */
const CONCURRENCY = 16;
/** Chunks of the CPU comparison, and fewest chunks of the c=1 one. */
const CHUNKS = 6;
/** Most chunks of the c=1 comparison, however fast its calls. */
const MAX_C1_CHUNKS = 200;
/** Buffer of the HTTP sink that is down: most of the decisions are dropped (and counted). */
const DOWN_BUFFER = 1000;
/** Shortest time the sidecar whose HTTP sink is down spends on measured calls. */
const DOWN_MS = 10_000;
/** Microseconds per millisecond. */
const US_PER_MS = 1000;

/** Decisions on one control, on a sidecar started with `args`. */
async function sideWith(args: readonly string[], ctx: RunContext): Promise<StoreSide> {
  const side = await startOn('sqlite', tempDbPath(), ctx, args);
  try {
    await registerNew(side.client, 'op_audit', [controlHook('policy', ctx.receiverUrl)])(0);
  } catch (e: unknown) {
    await stopSide(side);
    throw e;
  }
  return side;
}

/** The latency of `count` sequential calls, in milliseconds. */
async function latencies(call: Call, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = process.hrtime.bigint();
    await call(i);
    samples.push(Number(process.hrtime.bigint() - started) / NS_PER_MS);
  }
  return samples;
}

export const auditScenario: Scenario = {
  id: 'audit',
  title: `DecideToolCall (one control) with the decision audit log: the store sink on against off (c=${CONCURRENCY}), and an HTTP sink that is down (c=1)`,
  kind: 'sidecar',
  metrics: [
    metric('offCpu', 'no sink: server CPU per decision', 'µs', 'lower', 0),
    metric('storeCpu', '--audit-store: server CPU per decision', 'µs', 'lower', 0),
    metric('storeRatio', 'CPU per decision, store sink / none', 'x', 'lower', 2),
    metric('offP99', 'no sink: decision c=1 p99', 'ms', 'lower', 3),
    metric('downP99', 'HTTP sink down: decision c=1 p99', 'ms', 'lower', 3),
    metric('downP99Ratio', 'c=1 p99, HTTP sink down / none', 'x', 'lower', 2),
  ],
  run: async (ctx) => {
    const quick = ctx.params.latencyCalls < 1000;
    // Measured decisions per side of the CPU comparison, and each sidecar's warm-up.
    const calls = quick ? 600 : 3000;
    const warmup = quick ? 150 : STEADY_WARMUP;
    // Answers the sink's batches (204) until it closes; from then on the port refuses.
    const sink = await startReceiver({ record: false });
    let sinkOpen = true;
    // The sidecars without an HTTP sink; the one with it is kept apart (see `finally`).
    const sides: StoreSide[] = [];
    let http: StoreSide | undefined;
    try {
      const pairs: CpuPair<StoreSide>[] = [];
      for (let k = 0; k < CPU_PAIRS; k++) {
        const pairOff = await sideWith([], ctx);
        sides.push(pairOff);
        const pairStore = await sideWith(['--audit-store'], ctx);
        sides.push(pairStore);
        pairs.push({ a: pairOff, b: pairStore });
      }
      http = await sideWith(
        ['--audit-http', `${sink.url}/decisions`, '--audit-buffer', String(DOWN_BUFFER)],
        ctx,
      );
      const decide = (side: StoreSide) => decideOn(side.client, () => fixedId('op_audit', 0));
      await warmInTurn([...sides, http], decide, { warmup, concurrency: CONCURRENCY });
      // CPU per decision, while the sidecar whose sink goes down waits: answering
      // chunks in between, it moved the store-sink ratio to 1.08x and 1.09x, against
      // 0.99-1.03x without it (BENCHMARKS.md; why is an open question there).
      const {
        a: offMs,
        b: storeMs,
        calls: totalCalls,
        chunk,
      } = await pairedCpuMs(pairs, decide, { calls, chunks: CHUNKS, concurrency: CONCURRENCY });
      const [{ a: off }] = pairs as [CpuPair<StoreSide>];
      const [offCall, httpCall] = [decide(off), decide(http)];
      const c1Chunk = Math.ceil(calls / CHUNKS);
      // Then it catches up, unmeasured, on as many calls as the sidecar without
      // sinks it is compared with answered, and both answer two more chunks in
      // turn: they come to the c=1 part equally warm and equally recently busy.
      await measureThroughput(httpCall, CONCURRENCY, 0, CHUNKS * chunk);
      for (let c = 0; c < 2; c++) {
        await inAbbaOrder(
          c,
          async () => {
            await measureThroughput(offCall, CONCURRENCY, 0, chunk);
          },
          async () => {
            await measureThroughput(httpCall, CONCURRENCY, 0, chunk);
          },
        );
      }
      // The sink goes down; c=1 latency until the sidecar whose sink is down has spent
      // at least DOWN_MS on measured calls, chunks in ABBA order (an even number of them).
      await sink.close();
      sinkOpen = false;
      const offSamples: number[] = [];
      const downSamples: number[] = [];
      let downMs = 0;
      for (let c = 0; c < MAX_C1_CHUNKS && (c < CHUNKS || c % 2 === 1 || downMs < DOWN_MS); c++) {
        await inAbbaOrder(
          c,
          async () => {
            offSamples.push(...(await latencies(offCall, c1Chunk)));
          },
          async () => {
            const started = performance.now();
            downSamples.push(...(await latencies(httpCall, c1Chunk)));
            downMs += performance.now() - started;
          },
        );
      }
      const offP99 = percentile(
        offSamples.sort((a, b) => a - b),
        99,
      );
      const downP99 = percentile(
        downSamples.sort((a, b) => a - b),
        99,
      );
      return {
        metrics: {
          offCpu: (offMs * US_PER_MS) / totalCalls,
          storeCpu: (storeMs * US_PER_MS) / totalCalls,
          storeRatio: storeMs / offMs,
          offP99,
          downP99,
          downP99Ratio: downP99 / offP99,
        },
        // Warm-ups, measured calls, the catch-up and its two chunks, the c=1 part.
        ops:
          (sides.length + 1) * warmup +
          2 * totalCalls +
          CHUNKS * chunk +
          2 * 2 * chunk +
          offSamples.length +
          downSamples.length,
        notes: [
          `HTTP sink down for ${(downMs / 1000).toFixed(1)} s of its sidecar's measured calls (${downSamples.length} of them); p99 over every call`,
        ],
      } satisfies ScenarioResult;
    } finally {
      // The sidecar whose sink is down would spend its shutdown's 5 s trying to
      // flush to it; what it loses is not measured, so it is killed, first.
      if (http !== undefined) {
        http.client.close();
        await http.sidecar.destroy();
      }
      for (const side of sides) {
        await stopSide(side).catch((e: unknown) => {
          ctx.log(`audit: a sidecar did not stop: ${String(e)}`);
        });
      }
      if (sinkOpen) await sink.close();
    }
  },
};
