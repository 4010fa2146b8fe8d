/**
 * @module The soak mode of `npm run bench -- --soak`: one sidecar (the
 * deployed node flags, a fresh database, the default retention) under a
 * steady stream of whole operations for a bounded time, sampling its memory,
 * to show whether memory settles. Each operation is what a runtime does in
 * one run: register five hooks (a control and four notifications), decide a
 * tool call (one webhook), dispatch an `afterStep` (one webhook) and
 * complete (one webhook). Operations start at a fixed rate whatever the
 * answers do, with a bound on those in flight.
 *
 * It reports RSS every sample (with RssAnon, and V8's heap and external
 * bytes as the sidecar's `/metrics` gives them: `null` in the file when it
 * did not answer in time), the least-squares slope of RSS over the last
 * {@link SLOPE_WINDOW_MIN} minutes (MiB per minute), the peak (VmHWM), and
 * the database file's size, and writes them to `bench/results/soak.json`.
 */
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import {
  CompleteOperationRequestSchema,
  HookService,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { REPO_ROOT } from '../../test/support/sidecar.js';
import { createClient, hookMethod, waitForReady } from './grpc-codec.js';
import { decideRequest, fixedId, memoryHooks, stepEvent, withToolCallId } from './messages.js';
import { memoryOf, startBenchSidecar } from './processes.js';
import { MS_PER_S } from './stats.js';

/** Minutes at the end of the run whose RSS samples give the slope. */
export const SLOPE_WINDOW_MIN = 10;
/** Target of the slope, MiB per minute. */
export const SLOPE_LIMIT_MIB_PER_MIN = 0.5;
/** Target of the peak RSS, MiB. */
export const PEAK_LIMIT_MIB = 150;
/** How long a sample waits for the sidecar's `/metrics`. */
const METRICS_TIMEOUT_MS = 2_000;
/** Seconds between two memory samples. */
const SAMPLE_EVERY_S = 10;
/** Operations in flight at most; past it a tick is skipped and counted. */
const MAX_IN_FLIGHT = 256;
/** How long a client may take to connect to the fresh sidecar. */
const CONNECT_TIMEOUT_MS = 10_000;
const S_PER_MIN = 60;
const BYTES_PER_MIB = 1024 * 1024;

/** Options of {@link runSoak}. */
export interface SoakOptions {
  readonly minutes: number;
  /** Operations started per second. */
  readonly rate: number;
  readonly receiverUrl: string;
  readonly sidecarFlags: readonly string[];
  readonly log: (line: string) => void;
}

/** One memory sample. */
interface Sample {
  /** Seconds since the load started. */
  readonly t: number;
  readonly rssMb: number;
  /** RssAnon: the JS heap, malloc'd memory (SQLite's cache, buffers) and stacks. */
  readonly anonMb: number;
  /** V8's heap as the sidecar's `/metrics` reports it: reserved and in use. */
  readonly heapTotalMb: number;
  readonly heapUsedMb: number;
  /** Bytes V8 counts outside its heap (ArrayBuffers, Buffers). */
  readonly externalMb: number;
  readonly dbMb: number;
  readonly operations: number;
}

/** The V8 heap gauges of the sidecar's `/metrics`, in MiB (NaN when it did not answer them). */
async function heapOf(httpAddress: string | undefined): Promise<{
  heapTotalMb: number;
  heapUsedMb: number;
  externalMb: number;
}> {
  const text =
    httpAddress === undefined
      ? ''
      : await fetch(`http://${httpAddress}/metrics`, {
          signal: AbortSignal.timeout(METRICS_TIMEOUT_MS),
        })
          .then((r) => (r.ok ? r.text() : ''))
          .catch(() => '');
  const gauge = (name: string) => {
    const match = new RegExp(`^agenthooks_${name} (\\S+)`, 'm').exec(text);
    return match === null ? Number.NaN : Number(match[1]) / BYTES_PER_MIB;
  };
  return {
    heapTotalMb: gauge('nodejs_heap_size_total_bytes'),
    heapUsedMb: gauge('nodejs_heap_size_used_bytes'),
    externalMb: gauge('nodejs_external_memory_bytes'),
  };
}

/** Least-squares slope of `y` over `x`. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

/** Size of the database and its WAL, in MiB. */
function dbMb(db: string): number {
  const size = (path: string) => {
    try {
      return statSync(path).size;
    } catch {
      return 0;
    }
  };
  return (size(db) + size(`${db}-wal`)) / BYTES_PER_MIB;
}

/** Runs the soak; resolves with whether both memory targets held. */
export async function runSoak(options: SoakOptions): Promise<boolean> {
  const { log } = options;
  const sidecar = await startBenchSidecar({ nodeFlags: options.sidecarFlags });
  const client = createClient(sidecar.grpc);
  const samples: Sample[] = [];
  let started = 0;
  let finished = 0;
  let failed = 0;
  let skipped = 0;
  let inFlight = 0;
  const errors = new Map<string, number>();
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
    const register = hookMethod(client, HookService.method.registerHooks);
    const decide = hookMethod(client, HookService.method.decideToolCall);
    const dispatch = hookMethod(client, HookService.method.dispatch);
    const complete = hookMethod(client, HookService.method.completeOperation);
    const hooks = memoryHooks(options.receiverUrl);
    const operation = async (n: number) => {
      const operationId = fixedId('op_soak_', n);
      await register(create(RegisterHooksRequestSchema, { operationId, hooks }));
      const decided = await decide(withToolCallId(decideRequest(operationId), n));
      if (decided.decision?.outcome.case !== 'allow') throw new Error('not allowed');
      await dispatch(stepEvent(operationId));
      await complete(
        create(CompleteOperationRequestSchema, {
          event: { operationId, agentId: 'agent_research', userId: 'user_42', reason: 'done' },
        }),
      );
    };

    const startedAt = Date.now();
    const endAt = startedAt + options.minutes * S_PER_MIN * MS_PER_S;
    // One sample at a time, in order: a tick that finds one waiting for
    // `/metrics` is skipped. Everything but the heap is read at the tick.
    let sampling: Promise<void> | undefined;
    let samplingError: unknown;
    const sample = async (): Promise<void> => {
      if (sampling !== undefined) return;
      const t = (Date.now() - startedAt) / MS_PER_S;
      const memory = memoryOf(sidecar.pid);
      const db = dbMb(sidecar.db);
      const operations = finished;
      const counts = `${finished} operations (${failed} failed, ${skipped} skipped)`;
      sampling = heapOf(sidecar.http).then((heap) => {
        const s: Sample = {
          t,
          rssMb: memory.rssMb,
          anonMb: memory.anonMb,
          ...heap,
          dbMb: db,
          operations,
        };
        samples.push(s);
        log(
          `soak ${t.toFixed(0)} s: RSS ${s.rssMb.toFixed(1)} MiB (anon ${s.anonMb.toFixed(1)}, heap ${s.heapUsedMb.toFixed(1)} of ${s.heapTotalMb.toFixed(1)}, external ${s.externalMb.toFixed(1)}), database ${s.dbMb.toFixed(1)} MiB, ${counts}`,
        );
      });
      try {
        await sampling;
      } finally {
        sampling = undefined;
      }
    };
    await sample();
    await new Promise<void>((resolve) => {
      // A tick per operation, on the wall clock: late ticks catch up, so the offered rate holds.
      const tick = setInterval(() => {
        const due = Math.floor(((Date.now() - startedAt) / MS_PER_S) * options.rate);
        while (started < due) {
          const n = started;
          started += 1;
          if (inFlight >= MAX_IN_FLIGHT) {
            skipped += 1;
            continue;
          }
          inFlight += 1;
          operation(n).then(
            () => {
              finished += 1;
              inFlight -= 1;
            },
            (e: unknown) => {
              failed += 1;
              inFlight -= 1;
              const key = e instanceof Error ? e.message : String(e);
              errors.set(key, (errors.get(key) ?? 0) + 1);
            },
          );
        }
        if (Date.now() >= endAt) {
          clearInterval(tick);
          clearInterval(sampler);
          resolve();
        }
      }, MS_PER_S / Math.max(1, options.rate));
      const sampler = setInterval(() => {
        sample().catch((e: unknown) => {
          samplingError ??= e;
        });
      }, SAMPLE_EVERY_S * MS_PER_S);
    });
    await sampling;
    if (samplingError !== undefined) throw samplingError;
    await sample();
    const peakMb = memoryOf(sidecar.pid).peakMb;
    const first = samples[0] as Sample;
    const end = samples.at(-1) as Sample;
    const last = samples.filter((s) => s.t >= end.t - SLOPE_WINDOW_MIN * S_PER_MIN);
    const rssSlope = slope(last.map((s) => ({ x: s.t / S_PER_MIN, y: s.rssMb })));
    const dbSlope = slope(last.map((s) => ({ x: s.t / S_PER_MIN, y: s.dbMb })));
    const ok =
      rssSlope < SLOPE_LIMIT_MIB_PER_MIN &&
      peakMb < PEAK_LIMIT_MIB &&
      failed === 0 &&
      skipped === 0;
    const result = {
      minutes: options.minutes,
      rate: options.rate,
      sidecarFlags: options.sidecarFlags,
      operations: finished,
      failed,
      skipped,
      errors: Object.fromEntries(errors),
      rssSlopeMibPerMin: rssSlope,
      dbSlopeMibPerMin: dbSlope,
      peakMb,
      bytesPerOperation: finished > 0 ? ((end.dbMb - first.dbMb) * BYTES_PER_MIB) / finished : 0,
      targets: { rssSlopeMibPerMin: SLOPE_LIMIT_MIB_PER_MIN, peakMb: PEAK_LIMIT_MIB },
      ok,
      samples,
    };
    const path = join(REPO_ROOT, 'bench', 'results', 'soak.json');
    writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
    log(
      `soak: ${finished} operations in ${options.minutes} min at ${options.rate}/s (${failed} failed, ${skipped} skipped); RSS slope over the last ${SLOPE_WINDOW_MIN} min ${rssSlope.toFixed(3)} MiB/min (target < ${SLOPE_LIMIT_MIB_PER_MIN}), peak ${peakMb.toFixed(1)} MiB (target < ${PEAK_LIMIT_MIB}), database ${dbSlope.toFixed(2)} MiB/min; wrote ${path}`,
    );
    return ok;
  } finally {
    client.close();
    await sidecar.stop();
  }
}
