/**
 * @module Bounded load loops of the bench: sequential calls for latency
 * (c=1), a fixed number of calls at a fixed concurrency for throughput, and
 * a bidi stream with a bounded window of unacknowledged events. Every loop
 * runs a warm-up first and times with `process.hrtime.bigint()`.
 */
import type * as grpc from '@grpc/grpc-js';
import { type LatencySummary, latencySummary, MS_PER_S, NS_PER_MS } from './stats.js';

/** One call of a loop; `i` counts calls across warm-up and measurement. */
export type Call = (i: number) => Promise<unknown>;

/** Called when the clock starts and stops, to measure something over the same span (CPU time). */
export interface Probe {
  start(): void;
  stop(): void;
}

const noProbe: Probe = { start: () => {}, stop: () => {} };

/** Runs `warmup` calls, then `count` timed sequential calls; answers their latency. */
export async function measureLatency(
  call: Call,
  warmup: number,
  count: number,
  probe: Probe = noProbe,
): Promise<LatencySummary> {
  let i = 0;
  for (let w = 0; w < warmup; w++) await call(i++);
  const samples: bigint[] = new Array(count);
  probe.start();
  for (let n = 0; n < count; n++) {
    const started = process.hrtime.bigint();
    await call(i++);
    samples[n] = process.hrtime.bigint() - started;
  }
  probe.stop();
  return latencySummary(samples);
}

/** Throughput of a loop. */
export interface Throughput {
  /** Operations per second. */
  readonly perSecond: number;
  readonly count: number;
  readonly seconds: number;
}

/** Runs `count` calls with `concurrency` in flight; the calls are numbered from `first`. */
async function runConcurrent(
  call: Call,
  concurrency: number,
  count: number,
  first: number,
): Promise<void> {
  let issued = 0;
  const worker = async () => {
    while (issued < count) {
      const i = first + issued;
      issued += 1;
      await call(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/**
 * Runs `warmup` calls, then `count` timed calls, `concurrency` in flight at
 * any time; answers calls per second over the timed part.
 */
export async function measureThroughput(
  call: Call,
  concurrency: number,
  warmup: number,
  count: number,
  probe: Probe = noProbe,
): Promise<Throughput> {
  await runConcurrent(call, concurrency, warmup, 0);
  probe.start();
  const started = process.hrtime.bigint();
  await runConcurrent(call, concurrency, count, warmup);
  const seconds = Number(process.hrtime.bigint() - started) / NS_PER_MS / MS_PER_S;
  probe.stop();
  return { perSecond: count / seconds, count, seconds };
}

/** Options of {@link measureStream}. */
export interface StreamLoad<Req, Res> {
  /** Opens the bidi stream. */
  readonly open: () => grpc.ClientDuplexStream<Req, Res>;
  /** Builds the `i`-th request. */
  readonly request: (i: number) => Req;
  /** Throws when a response is not what the scenario expects. */
  readonly check?: (response: Res) => void;
  /** Most requests written and not yet answered. */
  readonly window: number;
  /** Responses before the clock starts. */
  readonly warmup: number;
  /** Responses timed after the warm-up. */
  readonly count: number;
  readonly probe?: Probe;
}

/**
 * Streams `warmup + count` requests over one bidi stream, keeping at most
 * `window` unanswered and honouring the transport's backpressure; answers
 * responses per second between the warm-up's last response and the last one.
 */
export function measureStream<Req, Res>(load: StreamLoad<Req, Res>): Promise<Throughput> {
  if (load.warmup < 1) throw new Error('a stream load needs a warm-up of at least one response');
  const total = load.warmup + load.count;
  return new Promise((resolve, reject) => {
    const stream = load.open();
    let written = 0;
    let answered = 0;
    let blocked = false;
    let started = 0n;
    let failed = false;
    let ended = false;
    const fail = (e: unknown) => {
      if (failed) return;
      failed = true;
      stream.cancel();
      reject(e);
    };
    const pump = () => {
      while (!blocked && written < total && written - answered < load.window) {
        const ok = stream.write(load.request(written));
        written += 1;
        if (!ok) blocked = true;
      }
      if (written === total && !ended) {
        ended = true;
        stream.end();
      }
    };
    stream.on('drain', () => {
      blocked = false;
      pump();
    });
    stream.on('data', (response: Res) => {
      try {
        load.check?.(response);
      } catch (e: unknown) {
        fail(e);
        return;
      }
      answered += 1;
      if (answered === load.warmup) {
        load.probe?.start();
        started = process.hrtime.bigint();
      }
      if (answered === total) {
        const seconds = Number(process.hrtime.bigint() - started) / NS_PER_MS / MS_PER_S;
        load.probe?.stop();
        resolve({ perSecond: load.count / seconds, count: load.count, seconds });
        return;
      }
      pump();
    });
    stream.on('error', (e: Error) => {
      if (answered < total) fail(e);
    });
    stream.on('end', () => {
      if (answered < total) fail(new Error(`stream ended after ${answered} of ${total} responses`));
    });
    pump();
  });
}

/**
 * Runs chunk `c` of a comparison of two sides: `a` then `b` in even chunks,
 * `b` then `a` in odd ones (ABBA), so that neither side always goes second
 * and a steady drift of the machine falls on both alike.
 */
export async function inAbbaOrder(
  c: number,
  a: () => Promise<void>,
  b: () => Promise<void>,
): Promise<void> {
  if (c % 2 === 0) {
    await a();
    await b();
  } else {
    await b();
    await a();
  }
}
