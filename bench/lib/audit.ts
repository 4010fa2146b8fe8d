/**
 * @module The audit rows of the bench: what the decision audit log costs a
 * decision. Two sidecars on SQLite run side by side, one without audit
 * sinks and one with the store sink (`--audit-store`), and decide on one
 * control in chunks in ABBA order, so that a drift of the machine falls on
 * both; the row compares the server CPU per decision.
 *
 * A third sidecar's HTTP sink (`--audit-http`, a small buffer) posts to a
 * receiver of the bench while it answers the same c=16 chunks, unmeasured.
 * Then the receiver closes, so the sink goes down as the c=1 part starts:
 * its failed sends and the first, densest retries fall in the measurement.
 * Its decision p99 at c=1, over at least 10 s of its own calls, is compared
 * with the sidecar without sinks, chunks in ABBA order.
 *
 * The equal warm-up and the ABBA order matter. Before, the third sidecar
 * sat idle while the others ran and went second in every c=1 pair: two
 * sidecars without sinks in the places of "none" and "down" gave a p99
 * ratio of 1.17-1.44 (p90 1.21-1.31); with both, 0.96-1.02.
 */
import { startReceiver } from '../../test/support/receiver.js';
import { tempDbPath } from '../../test/support/sidecar.js';
import { type Call, inAbbaOrder, measureThroughput } from './load.js';
import { controlHook, fixedId } from './messages.js';
import { metric } from './paired.js';
import type { RunContext, Scenario, ScenarioResult } from './scenarios.js';
import { NS_PER_MS, percentile } from './stats.js';
import { cpuMsDuring, decideOn, registerNew, type StoreSide, startOn, stopSide } from './stores.js';

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
  await registerNew(side.client, 'op_audit', [controlHook('policy', ctx.receiverUrl)])(0);
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
    const calls = quick ? 600 : 3000;
    // Answers the sink's batches (204) until it closes; from then on the port refuses.
    const sink = await startReceiver({ record: false });
    let sinkOpen = true;
    const sides: StoreSide[] = [];
    try {
      const off = await sideWith([], ctx);
      sides.push(off);
      const store = await sideWith(['--audit-store'], ctx);
      sides.push(store);
      const http = await sideWith(
        ['--audit-http', `${sink.url}/decisions`, '--audit-buffer', String(DOWN_BUFFER)],
        ctx,
      );
      sides.push(http);
      const decide = (side: StoreSide) => decideOn(side.client, () => fixedId('op_audit', 0));
      const [offCall, storeCall, httpCall] = [decide(off), decide(store), decide(http)];
      for (const call of [offCall, storeCall, httpCall]) {
        await measureThroughput(call, CONCURRENCY, calls / 4, 0);
      }
      // CPU per decision, chunks in ABBA order. The sidecar whose sink is down
      // answers the same chunks (unmeasured), so that it comes to the c=1 part
      // as warm as the sidecar it is compared with.
      const chunk = Math.ceil(calls / CHUNKS);
      let offMs = 0;
      let storeMs = 0;
      for (let c = 0; c < CHUNKS; c++) {
        const offCpu = async () => {
          offMs += await cpuMsDuring(off.sidecar.pid, () =>
            measureThroughput(offCall, CONCURRENCY, 0, chunk),
          );
        };
        const storeCpu = async () => {
          storeMs += await cpuMsDuring(store.sidecar.pid, () =>
            measureThroughput(storeCall, CONCURRENCY, 0, chunk),
          );
        };
        await inAbbaOrder(c, offCpu, storeCpu);
        await measureThroughput(httpCall, CONCURRENCY, 0, chunk);
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
            offSamples.push(...(await latencies(offCall, chunk)));
          },
          async () => {
            const started = performance.now();
            downSamples.push(...(await latencies(httpCall, chunk)));
            downMs += performance.now() - started;
          },
        );
      }
      const totalCalls = CHUNKS * chunk;
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
        ops: 2 * totalCalls + offSamples.length + downSamples.length,
        notes: [
          `HTTP sink down for ${(downMs / 1000).toFixed(1)} s of its sidecar's measured calls (${downSamples.length} of them); p99 over every call`,
        ],
      } satisfies ScenarioResult;
    } finally {
      // The sidecar whose sink is down would spend its shutdown's 5 s trying to
      // flush to it; what it loses is not measured, so it is killed.
      const [off, store, http] = sides;
      for (const side of [off, store]) if (side !== undefined) await stopSide(side);
      if (http !== undefined) {
        http.client.close();
        await http.sidecar.destroy();
      }
      if (sinkOpen) await sink.close();
    }
  },
};
