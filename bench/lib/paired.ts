/**
 * @module The paired scenarios of `npm run bench`: each run starts the real
 * sidecar and the floor (`bench/floor-server.ts`, the least server that does
 * the same work) side by side, drives both with the same load generator
 * command (ghz or vegeta, Go processes), and answers the sidecar's numbers,
 * the floor's and their ratio *of this run*. A round's ratio therefore
 * compares two servers measured a few seconds apart on the same machine, and
 * the report's spread is the spread of those per-round ratios, not a ratio
 * of medians taken at different times.
 *
 * Rows: 0/1/5/20 controls in a closed loop (c=64, and c=1 latency for 0 and
 * 1); open loop at 50% and 80% of the sidecar's own closed-loop maximum
 * measured in the same run; 1 KB/64 KB/1 MB arguments; Connect JSON
 * (vegeta) beside gRPC; DispatchStream against the stream floor.
 */
import { create, toBinary, toJson } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import {
  DecideToolCallRequestSchema,
  DispatchStreamRequestSchema,
  HookService,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import type { SidecarProcess } from '../../test/support/sidecar.js';
import { ghz, type LoadResult, requireClean, vegeta } from './generators.js';
import { createClient, hookMethod, waitForReady } from './grpc-codec.js';
import { inAbbaOrder } from './load.js';
import { controlHook, decideRequest, fixedId, modifyHook, streamRequest } from './messages.js';
import { type BenchChild, cpuMsOf, startBenchChild, startBenchSidecar } from './processes.js';
import type {
  MeasuredWindow,
  MetricDef,
  RunContext,
  Scenario,
  ScenarioResult,
} from './scenarios.js';
import { median, percentile } from './stats.js';

/** How a paired run sizes its loads; see {@link DEFAULT_PAIRED} and {@link QUICK_PAIRED}. */
export interface PairedParams {
  /** Calls of a closed-loop measurement with no or one control; more controls take fewer. */
  readonly closedCalls: number;
  /** Calls in flight in the closed loop. */
  readonly concurrency: number;
  /** Calls of the c=1 latency measurement. */
  readonly c1Calls: number;
  /** Seconds of each open-loop measurement. */
  readonly openSeconds: number;
  /**
   * Seconds of load at the same rate, unmeasured, before each open-loop
   * measurement: the steady state the target is about, not the transition
   * from the closed loop (or the other load) before it.
   */
  readonly openWarmSeconds: number;
  /** Seconds of each vegeta (Connect JSON) measurement. */
  readonly connectSeconds: number;
  /** Events of the stream measurement (over {@link STREAMS} streams). */
  readonly streamEvents: number;
  /**
   * Events streamed, unmeasured, before it, to each side. The stream row
   * measures the steady state of a long-running process: measured in chunks
   * of 10,000 events from a fresh start, the sidecar's CPU per event settles
   * after about 50,000 (the floor's, with less code to compile, after about
   * 30,000); BENCHMARKS.md has the curve.
   */
  readonly streamWarmupEvents: number;
}

export const DEFAULT_PAIRED: PairedParams = {
  closedCalls: 3000,
  concurrency: 64,
  c1Calls: 1200,
  openSeconds: 6,
  openWarmSeconds: 2,
  connectSeconds: 2,
  streamEvents: 40_000,
  streamWarmupEvents: 60_000,
};

export const QUICK_PAIRED: PairedParams = {
  closedCalls: 1000,
  concurrency: 64,
  c1Calls: 300,
  openSeconds: 2,
  openWarmSeconds: 0.5,
  connectSeconds: 1,
  streamEvents: 8000,
  streamWarmupEvents: 2000,
};

/** Fractions of the sidecar's closed-loop maximum the open loop offers. */
export const OPEN_LOOP_LOADS = [0.5, 0.8] as const;
/** Streams of the stream measurement, each over its own operations. */
const STREAMS = 2;
/** Distinct events each stream cycles through (16 operations). */
const STREAM_MESSAGES = 256;
const STREAM_OPERATIONS = 16;
/** Workers of an open-loop ghz run (each starts calls without waiting for answers). */
const OPEN_WORKERS = 16;
/** A warm-up is this fraction of the measured calls (JIT, connection pools, caches). */
const WARMUP_FRACTION = 0.25;
/** Calls in flight with large arguments. */
const ARGS_CONCURRENCY = 8;
/** Microseconds per millisecond. */
const US_PER_MS = 1000;
/** How long a client may take to connect to a fresh sidecar. */
const CONNECT_TIMEOUT_MS = 10_000;
/** The operation every paired decision names. */
const OPERATION = 'op_bench';
/** Bytes per KiB. */
const KIB = 1024;

/** The sidecar and the floor of one paired run. */
interface Pair {
  readonly sidecar: SidecarProcess;
  readonly floor: BenchChild;
}

/** One server of a pair, as a load generator and the CPU probe see it. */
interface Side {
  readonly label: 'sidecar' | 'floor';
  readonly pid: number;
  /** gRPC `host:port`. */
  readonly grpc: string;
  /** Connect JSON URL of DecideToolCall. */
  readonly connectUrl: string;
}

function sides(pair: Pair): [Side, Side] {
  const path = `/${HookService.typeName}/${HookService.method.decideToolCall.name}`;
  return [
    {
      label: 'floor',
      pid: pair.floor.pid,
      grpc: pair.floor.address,
      connectUrl: `http://127.0.0.1:${pair.floor.ports.httpPort}${path}`,
    },
    {
      label: 'sidecar',
      pid: pair.sidecar.pid,
      grpc: pair.sidecar.grpc,
      connectUrl: `http://${pair.sidecar.http}${path}`,
    },
  ];
}

/** Nanoseconds per microsecond. */
const NS_PER_US = 1000n;
const nowUs = () => Number(process.hrtime.bigint() / NS_PER_US);

/** Runs `load` while measuring the CPU time `pid` spends; answers both and the span. */
async function withCpu(
  pid: number,
  load: () => Promise<LoadResult>,
): Promise<{ result: LoadResult; cpuMs: number; window: Omit<MeasuredWindow, 'ops'> }> {
  const fromUs = nowUs();
  const before = cpuMsOf(pid);
  const result = await load();
  const cpuMs = cpuMsOf(pid) - before;
  return { result, cpuMs, window: { fromUs, toUs: nowUs() } };
}

/**
 * Starts the floor and a sidecar with the same hooks on {@link OPERATION}:
 * `controls` control hooks, or `{ modifying }` `transformContext` hooks;
 * runs `fn`, stops both.
 */
async function withPair(
  ctx: RunContext,
  hooks: number | { readonly modifying: number },
  fn: (pair: Pair) => Promise<Omit<ScenarioResult, 'notes'>>,
): Promise<ScenarioResult> {
  const modifying = typeof hooks === 'number' ? 0 : hooks.modifying;
  const controls = typeof hooks === 'number' ? hooks : 0;
  const floor = await startBenchChild(
    'floor-server.js',
    [
      '--receiver',
      ctx.receiverUrl,
      '--controls',
      String(controls),
      '--modify-hooks',
      String(modifying),
    ],
    ctx.baselineFlags,
  );
  let sidecar: SidecarProcess | undefined;
  try {
    sidecar = await startBenchSidecar({ nodeFlags: ctx.sidecarFlags });
    if (controls + modifying > 0) {
      const client: grpc.Client = createClient(sidecar.grpc);
      try {
        await waitForReady(client, CONNECT_TIMEOUT_MS);
        const register = hookMethod(client, HookService.method.registerHooks);
        const registered = [
          ...Array.from({ length: controls }, (_, i) =>
            controlHook(`policy-${i}`, ctx.receiverUrl),
          ),
          ...Array.from({ length: modifying }, (_, i) =>
            modifyHook(`modify-${i}`, ctx.receiverUrl),
          ),
        ];
        await register(
          create(RegisterHooksRequestSchema, { operationId: OPERATION, hooks: registered }),
        );
      } finally {
        client.close();
      }
    }
    const result = await fn({ sidecar, floor });
    const notes = sidecar.logs
      .filter((l) => l.level === 'warn' || l.level === 'error')
      .map((l) => `sidecar ${String(l.level)}: ${String(l.msg)}`);
    return { ...result, notes: [...new Set(notes)] };
  } finally {
    await sidecar?.stop();
    await floor.stop();
  }
}

/** The DecideToolCall request as ghz JSON, with a tool call id per call. */
function decideJson(args?: unknown): unknown {
  const request = decideRequest(OPERATION);
  const json = toJson(DecideToolCallRequestSchema, request) as {
    event: { context: Record<string, unknown> };
  };
  json.event.context.toolCallId = 'call_{{.RequestNumber}}';
  if (args !== undefined) json.event.context.args = args;
  return json;
}

/**
 * Arguments of about `bytes` bytes, as a file-writing tool sends them: a
 * path, a few options and the file's content (lines of source text).
 */
export function argsOfSize(bytes: number): Record<string, unknown> {
  const line = 'export const value = compute(42, "a line of source text");\n';
  const content = line.repeat(Math.max(1, Math.round(bytes / line.length)));
  return { path: '/workspace/src/generated.ts', encoding: 'utf8', overwrite: true, content };
}

/** The DecideToolCall request with `args`, serialized (ghz `--binary-file`). */
function decideBinary(args: Record<string, unknown>): Uint8Array {
  const request = decideRequest(OPERATION);
  const context = request.event?.context;
  if (context === undefined) throw new Error('no context');
  context.args = args as never;
  return toBinary(DecideToolCallRequestSchema, request);
}

/** Length-delimited DispatchStream requests for ghz (varint length, message). */
function streamBinary(): Uint8Array {
  const parts: Buffer[] = [];
  for (let i = 0; i < STREAM_MESSAGES; i++) {
    const bytes = toBinary(
      DispatchStreamRequestSchema,
      streamRequest(fixedId('op_stream_', i % STREAM_OPERATIONS), i),
    );
    let n = bytes.length;
    const prefix: number[] = [];
    // Varint: seven bits per byte, low bits first, high bit set while more follow.
    while (n >= 0x80) {
      prefix.push((n & 0x7f) | 0x80);
      n >>>= 7;
    }
    prefix.push(n);
    parts.push(Buffer.from(prefix), Buffer.from(bytes));
  }
  return Buffer.concat(parts);
}

/** A metric definition, in one line. */
export const metric = (
  key: string,
  label: string,
  unit: string,
  better: 'lower' | 'higher',
  digits: number,
): MetricDef => ({ key, label, unit, better, digits });

/** Metrics of a closed-loop comparison. */
const CLOSED_METRICS: readonly MetricDef[] = [
  metric('tput', 'sidecar c=64 throughput', 'calls/s', 'higher', 0),
  metric('floorTput', 'floor c=64 throughput', 'calls/s', 'higher', 0),
  metric('tputRatio', 'throughput / floor', 'x', 'higher', 2),
  metric('cpu', 'sidecar CPU per call', 'µs', 'lower', 0),
  metric('floorCpu', 'floor CPU per call', 'µs', 'lower', 0),
  metric('cpuRatio', 'CPU per call / floor', 'x', 'lower', 2),
];

const LATENCY_METRICS: readonly MetricDef[] = [
  metric('p50', 'sidecar c=1 p50', 'ms', 'lower', 3),
  metric('floorP50', 'floor c=1 p50', 'ms', 'lower', 3),
  metric('p50Over', 'c=1 p50 - floor p50', 'ms', 'lower', 3),
  metric('p99', 'sidecar c=1 p99', 'ms', 'lower', 3),
  metric('floorP99', 'floor c=1 p99', 'ms', 'lower', 3),
];

/** Closed-loop calls for `controls` controls: the same measured time, roughly. */
function closedCalls(ctx: RunContext, controls: number): number {
  const base = ctx.paired.closedCalls;
  return Math.max(200, Math.round(base / Math.max(1, controls / 2)));
}

/** Measures one side in a closed loop after a warm-up; answers its metrics. */
async function closedLoop(
  side: Side,
  calls: number,
  concurrency: number,
  data: { json?: unknown; binary?: Uint8Array; method?: string },
) {
  const load = (total: number) => () =>
    ghz({ address: side.grpc, method: 'DecideToolCall', total, concurrency, ...data }).then((r) =>
      requireClean(`${side.label} closed loop`, r),
    );
  await load(Math.max(1, Math.round(calls * WARMUP_FRACTION)))();
  const { result, cpuMs, window } = await withCpu(side.pid, load(calls));
  return {
    perSecond: result.perSecond,
    cpuUs: (cpuMs * US_PER_MS) / result.count,
    window: { ...window, ops: result.count },
  };
}

/** The closed-loop metrics of a pair: each side's throughput and CPU per call, and their ratios. */
function closedMetrics(
  s: { perSecond: number; cpuUs: number },
  f: { perSecond: number; cpuUs: number },
): Record<string, number> {
  return Object.assign(pairOf('tput', s.perSecond, f.perSecond), pairOf('cpu', s.cpuUs, f.cpuUs));
}

/** One measure of a pair as metrics: `<name>`, `floor<Name>` and `<name>Ratio` (sidecar / floor). */
function pairOf(name: string, sidecar: number, floor: number): Record<string, number> {
  const capitalised = `${name.charAt(0).toUpperCase()}${name.slice(1)}`;
  return { [name]: sidecar, [`floor${capitalised}`]: floor, [`${name}Ratio`]: sidecar / floor };
}

/** Latency at c=1 of one side: `DecideToolCall` unless another method and request are given. */
async function latencyC1(
  side: Side,
  calls: number,
  request: { method: string; json: unknown } = { method: 'DecideToolCall', json: decideJson() },
) {
  return requireClean(
    `${side.label} c=1`,
    await ghz({ address: side.grpc, total: calls, concurrency: 1, ...request }),
  );
}

/** Pairs of chunks of the two sides' c=1 calls. */
const C1_PAIRS = 6;

/**
 * The c=1 latency of both sides, measured in {@link C1_PAIRS} pairs of
 * chunks back to back, the side that goes first alternating (floor then
 * sidecar, then sidecar then floor: a steady drift of the machine falls on
 * both alike). Each side's p50 and p99 are over all its calls; the
 * sidecar's p50 over the floor's is the median of the pairs' differences,
 * so that one pair a burst of other work fell on does not decide the round.
 */
async function latencyPairC1(
  floor: Side,
  sidecar: Side,
  calls: number,
  request?: { method: string; json: unknown },
): Promise<Record<string, number>> {
  const chunk = Math.ceil(calls / C1_PAIRS);
  const floorMs: number[] = [];
  const sidecarMs: number[] = [];
  const differences: number[] = [];
  const chunkOf = async (side: Side) =>
    [...(await latencyC1(side, chunk, request)).latenciesMs].sort((a, b) => a - b);
  for (let c = 0; c < C1_PAIRS; c++) {
    let f: number[] = [];
    let s: number[] = [];
    await inAbbaOrder(
      c,
      async () => {
        f = await chunkOf(floor);
      },
      async () => {
        s = await chunkOf(sidecar);
      },
    );
    differences.push(percentile(s, 50) - percentile(f, 50));
    floorMs.push(...f);
    sidecarMs.push(...s);
  }
  floorMs.sort((a, b) => a - b);
  sidecarMs.sort((a, b) => a - b);
  return {
    p50: percentile(sidecarMs, 50),
    floorP50: percentile(floorMs, 50),
    p50Over: median(differences),
    p99: percentile(sidecarMs, 99),
    floorP99: percentile(floorMs, 99),
  };
}

function controlsScenario(controls: number): Scenario {
  const withLatency = controls <= 1;
  return {
    id: `controls-${controls}`,
    title: `DecideToolCall, ${controls} control${controls === 1 ? '' : 's'} that allow: sidecar against the floor (ghz)`,
    kind: 'sidecar',
    paired: true,
    metrics: withLatency ? [...CLOSED_METRICS, ...LATENCY_METRICS] : CLOSED_METRICS,
    run: (ctx) =>
      withPair(ctx, controls, async (pair) => {
        const [floor, sidecar] = sides(pair);
        const calls = closedCalls(ctx, controls);
        const json = decideJson();
        const f = await closedLoop(floor, calls, ctx.paired.concurrency, { json });
        const s = await closedLoop(sidecar, calls, ctx.paired.concurrency, { json });
        const metrics = closedMetrics(s, f);
        if (withLatency) {
          Object.assign(metrics, await latencyPairC1(floor, sidecar, ctx.paired.c1Calls));
        }
        return {
          metrics,
          ops: s.window.ops,
          windows: { 'c=64': s.window },
          baselineWindows: { 'c=64': f.window },
        };
      }),
  };
}

/** Open-loop metrics at one load, keyed by its percentage. */
function openMetrics(percent: number): MetricDef[] {
  return [
    metric(`rate${percent}`, `offered rate at ${percent}%`, 'calls/s', 'higher', 0),
    metric(`p50at${percent}`, `sidecar p50 at ${percent}%`, 'ms', 'lower', 2),
    metric(`p99at${percent}`, `sidecar p99 at ${percent}%`, 'ms', 'lower', 2),
    metric(`p999at${percent}`, `sidecar p99.9 at ${percent}%`, 'ms', 'lower', 2),
    metric(`floorP50at${percent}`, `floor p50 at ${percent}%`, 'ms', 'lower', 2),
    metric(`floorP99at${percent}`, `floor p99 at ${percent}%`, 'ms', 'lower', 2),
    metric(`floorP999at${percent}`, `floor p99.9 at ${percent}%`, 'ms', 'lower', 2),
    metric(`p99RatioAt${percent}`, `p99 / floor p99 at ${percent}%`, 'x', 'lower', 2),
  ];
}

/** One open-loop ghz run at `rps` for `seconds`. */
function openLoop(side: Side, rps: number, seconds: number, json: unknown) {
  return ghz({
    address: side.grpc,
    method: 'DecideToolCall',
    total: Math.round(rps * seconds),
    concurrency: OPEN_WORKERS,
    rps,
    json,
  }).then((r) => requireClean(`${side.label} open loop at ${rps}/s`, r));
}

function openScenario(controls: number): Scenario {
  return {
    id: `open-${controls}control${controls === 1 ? '' : 's'}`,
    title: `DecideToolCall, ${controls} control(s), open loop (ghz --async --rps) at ${OPEN_LOOP_LOADS.map((l) => `${l * 100}%`).join(' and ')} of the sidecar's closed-loop maximum, floor at the same rate`,
    kind: 'sidecar',
    paired: true,
    metrics: [
      metric('max', 'sidecar closed-loop maximum (c=64)', 'calls/s', 'higher', 0),
      ...OPEN_LOOP_LOADS.flatMap((l) => openMetrics(l * 100)),
    ],
    run: (ctx) =>
      withPair(ctx, controls, async (pair) => {
        const [floor, sidecar] = sides(pair);
        const json = decideJson();
        const calls = closedCalls(ctx, controls);
        // Warms the floor too, then measures the sidecar's own maximum.
        await closedLoop(floor, calls, ctx.paired.concurrency, { json });
        const max = (await closedLoop(sidecar, calls, ctx.paired.concurrency, { json })).perSecond;
        const metrics: Record<string, number> = { max };
        for (const load of OPEN_LOOP_LOADS) {
          const percent = load * 100;
          const rps = Math.max(1, Math.round(max * load));
          const { openSeconds, openWarmSeconds } = ctx.paired;
          await openLoop(floor, rps, openWarmSeconds, json);
          const f = await openLoop(floor, rps, openSeconds, json);
          await openLoop(sidecar, rps, openWarmSeconds, json);
          const s = await openLoop(sidecar, rps, openSeconds, json);
          Object.assign(metrics, {
            [`rate${percent}`]: rps,
            [`p50at${percent}`]: s.p50,
            [`p99at${percent}`]: s.p99,
            [`p999at${percent}`]: s.p999,
            [`floorP50at${percent}`]: f.p50,
            [`floorP99at${percent}`]: f.p99,
            [`floorP999at${percent}`]: f.p999,
            [`p99RatioAt${percent}`]: s.p99 / f.p99,
          });
        }
        return { metrics, ops: 0 };
      }),
  };
}

function argsScenario(kib: number): Scenario {
  const label = kib >= KIB ? `${kib / KIB}mb` : `${kib}kb`;
  return {
    id: `args-${label}`,
    title: `DecideToolCall with ${kib >= KIB ? `${kib / KIB} MB` : `${kib} KB`} of arguments (a file's content), no hook, c=${ARGS_CONCURRENCY}: sidecar against the floor`,
    kind: 'sidecar',
    paired: true,
    metrics: CLOSED_METRICS.map((m) => ({
      ...m,
      label: m.label.replace('c=64', `c=${ARGS_CONCURRENCY}`),
    })),
    run: (ctx) =>
      withPair(ctx, 0, async (pair) => {
        const [floor, sidecar] = sides(pair);
        const binary = decideBinary(argsOfSize(kib * KIB));
        // The same bytes for a while in each loop: about as many seconds per size.
        const calls = Math.max(100, Math.round(ctx.paired.closedCalls / Math.sqrt(kib)));
        const f = await closedLoop(floor, calls, ARGS_CONCURRENCY, { binary });
        const s = await closedLoop(sidecar, calls, ARGS_CONCURRENCY, { binary });
        return {
          metrics: closedMetrics(s, f),
          ops: s.window.ops,
          windows: { load: s.window },
          baselineWindows: { load: f.window },
        };
      }),
  };
}

const connectScenario: Scenario = {
  id: 'connect-1control',
  title:
    'DecideToolCall over Connect JSON (HTTP/1.1, vegeta), one control: closed loop of 64, then open loop at 50% of the sidecar maximum',
  kind: 'sidecar',
  paired: true,
  metrics: [
    ...CLOSED_METRICS.map((m) => ({ ...m, label: m.label.replace('c=64', '64 workers') })),
    metric('p99at50', 'sidecar p99 at 50%', 'ms', 'lower', 2),
    metric('floorP99at50', 'floor p99 at 50%', 'ms', 'lower', 2),
    metric('p99RatioAt50', 'p99 / floor p99 at 50%', 'x', 'lower', 2),
  ],
  run: (ctx) =>
    withPair(ctx, 1, async (pair) => {
      const [floor, sidecar] = sides(pair);
      const body = JSON.stringify(toJson(DecideToolCallRequestSchema, decideRequest(OPERATION)));
      const seconds = ctx.paired.connectSeconds;
      const closed = async (side: Side) => {
        const attack = (s: number) => () =>
          vegeta({ url: side.connectUrl, body, seconds: s, workers: ctx.paired.concurrency }).then(
            (r) => requireClean(`${side.label} Connect closed loop`, r),
          );
        await attack(Math.max(1, Math.round(seconds * WARMUP_FRACTION)))();
        const { result, cpuMs, window } = await withCpu(side.pid, attack(seconds));
        return { result, cpuUs: (cpuMs * US_PER_MS) / result.count, window };
      };
      const f = await closed(floor);
      const s = await closed(sidecar);
      const rate = Math.max(1, Math.round(s.result.perSecond / 2));
      const open = (side: Side) =>
        vegeta({ url: side.connectUrl, body, seconds, rate, workers: ctx.paired.concurrency }).then(
          (r) => requireClean(`${side.label} Connect open loop`, r),
        );
      const fo = await open(floor);
      const so = await open(sidecar);
      return {
        metrics: {
          ...closedMetrics(
            { perSecond: s.result.perSecond, cpuUs: s.cpuUs },
            {
              perSecond: f.result.perSecond,
              cpuUs: f.cpuUs,
            },
          ),
          p99at50: so.p99,
          floorP99at50: fo.p99,
          p99RatioAt50: so.p99 / fo.p99,
        },
        ops: s.result.count,
        windows: { 'c=64': { ...s.window, ops: s.result.count } },
        baselineWindows: { 'c=64': { ...f.window, ops: f.result.count } },
      };
    }),
};

const streamScenario: Scenario = {
  id: 'stream-nohook',
  title: `DispatchStream afterStep events, no hook, ${STREAMS} streams over ${STREAM_OPERATIONS} operations (ghz bidi): sidecar against the stream floor (decode, ack)`,
  kind: 'sidecar',
  paired: true,
  metrics: [
    metric('eps', 'sidecar throughput', 'events/s', 'higher', 0),
    metric('floorEps', 'floor throughput', 'events/s', 'higher', 0),
    metric('epsRatio', 'throughput / floor', 'x', 'higher', 2),
    metric('cpu', 'sidecar CPU per event', 'µs', 'lower', 1),
    metric('floorCpu', 'floor CPU per event', 'µs', 'lower', 1),
    metric('cpuRatio', 'CPU per event / floor', 'x', 'lower', 2),
  ],
  run: (ctx) =>
    withPair(ctx, 0, async (pair) => {
      const [floor, sidecar] = sides(pair);
      const binary = streamBinary();
      const events = ctx.paired.streamEvents;
      const measure = async (side: Side) => {
        const load = (count: number) => () =>
          ghz({
            address: side.grpc,
            method: 'DispatchStream',
            total: STREAMS,
            concurrency: STREAMS,
            streamCallCount: Math.round(count / STREAMS),
            binary,
          }).then((r) => requireClean(`${side.label} stream`, r));
        await load(ctx.paired.streamWarmupEvents)();
        const { result, cpuMs, window } = await withCpu(side.pid, load(events));
        return {
          eps: events / result.seconds,
          cpuUs: (cpuMs * US_PER_MS) / events,
          window: { ...window, ops: events },
        };
      };
      const f = await measure(floor);
      const s = await measure(sidecar);
      return {
        metrics: Object.assign(pairOf('eps', s.eps, f.eps), pairOf('cpu', s.cpuUs, f.cpuUs)),
        ops: events,
        windows: { stream: s.window },
        baselineWindows: { stream: f.window },
      };
    }),
};

/** A `transformContext` context whose one message holds about `bytes` bytes of text. */
function modifyContext(bytes: number): string {
  const content = 'a line of conversation history, as a runtime keeps it\n'.repeat(
    Math.ceil(bytes / 55),
  );
  return JSON.stringify({
    messages: [{ role: 'user', content: content.slice(0, bytes) }],
    iteration: 1,
  });
}

/**
 * `Modify` with `hooks` `transformContext` webhooks (answering `{}`) and a
 * history of `historyKiB`: c=64 CPU per call and throughput, and c=1 latency,
 * against the floor making the same POSTs.
 */
function modifyScenario(hooks: number, historyKiB: number): Scenario {
  const label = historyKiB > 0 ? `-${historyKiB}kb` : '';
  return {
    id: `modify-${hooks}hook${hooks === 1 ? '' : 's'}${label}`,
    title: `Modify (transformContext), ${hooks} webhook${hooks === 1 ? '' : 's'}${historyKiB > 0 ? `, ${historyKiB} KiB history` : ''}: sidecar against the floor making the same POST`,
    kind: 'sidecar',
    paired: true,
    metrics: [...CLOSED_METRICS, ...LATENCY_METRICS],
    run: (ctx) =>
      withPair(ctx, { modifying: hooks }, async (pair) => {
        const [floor, sidecar] = sides(pair);
        const json = {
          operationId: OPERATION,
          point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
          contextJson: modifyContext(historyKiB * KIB),
        };
        const data = { json, method: 'Modify' };
        // Fewer calls than a decision row, fewer still with a history: the default run's
        // budget is ten minutes, and the spread at these counts is within the margins.
        const share = historyKiB > 0 ? 5 : 2;
        const calls = Math.max(200, Math.round(ctx.paired.closedCalls / share));
        const c1Calls = Math.max(360, Math.round(ctx.paired.c1Calls / share));
        const f = await closedLoop(floor, calls, ctx.paired.concurrency, data);
        const s = await closedLoop(sidecar, calls, ctx.paired.concurrency, data);
        const latency = await latencyPairC1(floor, sidecar, c1Calls, data);
        return {
          metrics: Object.assign(closedMetrics(s, f), latency),
          ops: s.window.ops,
          windows: { load: s.window },
          baselineWindows: { load: f.window },
        };
      }),
  };
}

/** The paired scenarios of a default run, in round order. */
export const PAIRED_SCENARIOS: readonly Scenario[] = [
  controlsScenario(0),
  controlsScenario(1),
  controlsScenario(5),
  controlsScenario(20),
  openScenario(1),
  argsScenario(1),
  argsScenario(64),
  argsScenario(KIB),
  connectScenario,
  streamScenario,
  modifyScenario(0, 0),
  modifyScenario(1, 0),
  modifyScenario(1, 100),
];

/** Paired scenarios outside the default run (`--only`). */
export const EXTRA_PAIRED_SCENARIOS: readonly Scenario[] = [openScenario(0)];
