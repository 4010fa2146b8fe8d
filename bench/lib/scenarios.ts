/**
 * @module The scenarios of `npm run bench`: the three baselines that measure
 * the floor (a bare grpc-js unary echo, a bare bidi echo, a direct undici
 * POST) and the scenarios against the real sidecar process. Each run starts
 * fresh processes (a fresh sidecar and temp database), warms up, measures
 * with bounded loops and answers its metrics.
 */

import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { create, type DescMessage, type DescMethod, type MessageShape } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { Agent } from 'undici';
import { HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DecideToolCallRequestSchema,
  type DecideToolCallResponse,
  DispatchStreamRequestSchema,
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
  HookService,
  ListHooksRequestSchema,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
} from '../../gen/grpc/health/v1/health_pb.js';
import type { SidecarProcess } from '../../test/support/sidecar.js';
import { auditScenario } from './audit.js';
import {
  bidiStream,
  createClient,
  ECHO_STREAM_PATH,
  ECHO_UNARY_PATH,
  serializer,
  type UnaryCall,
  unaryMethod,
  waitForReady,
} from './grpc-codec.js';
import { heapMarkdown, summariseHeap } from './heap.js';
import { type Call, measureLatency, measureStream, measureThroughput } from './load.js';
import {
  ALLOW_PATH,
  controlHook,
  decideRequest,
  fiveHooks,
  fixedId,
  memoryHooks,
  notificationHook,
  stepEvent,
  streamRequest,
  withToolCallId,
} from './messages.js';
import { EXTRA_PAIRED_SCENARIOS, PAIRED_SCENARIOS, type PairedParams } from './paired.js';
import {
  type BenchChild,
  cpuMsOf,
  memoryOf,
  startBenchChild,
  startBenchSidecar,
} from './processes.js';
import { runPythonClient } from './python.js';
import { median, NS_PER_MS } from './stats.js';
import { storedOperationsScenario, storesScenario } from './stores.js';
import { tracingScenario } from './tracing.js';

/** How many calls, events and processes each scenario uses; see {@link DEFAULT_PARAMS}. */
export interface Params {
  readonly latencyWarmup: number;
  readonly latencyCalls: number;
  /** Calls of the five-hook scenario (each waits for three controls). */
  readonly fiveHookCalls: number;
  readonly concurrency: number;
  readonly throughputWarmup: number;
  readonly throughputCalls: number;
  readonly streamWindow: number;
  /** Operations the stream events are spread over, round robin. */
  readonly streamOperations: number;
  readonly streamWarmup: number;
  readonly streamEvents: number;
  readonly streamWebhookEvents: number;
  readonly registerWarmup: number;
  readonly registerC1: number;
  readonly registerConcurrency: number;
  readonly registerConcurrent: number;
  readonly memoryOperations: number;
  readonly coldStarts: number;
  readonly pythonWarmup: number;
  readonly pythonCalls: number;
}

/** The full run: about a minute and a half per round on 2 cores. */
export const DEFAULT_PARAMS: Params = {
  latencyWarmup: 500,
  latencyCalls: 3000,
  fiveHookCalls: 1500,
  concurrency: 64,
  throughputWarmup: 2000,
  throughputCalls: 20_000,
  streamWindow: 128,
  streamOperations: 16,
  streamWarmup: 5000,
  streamEvents: 50_000,
  streamWebhookEvents: 15_000,
  registerWarmup: 100,
  registerC1: 1000,
  registerConcurrency: 16,
  registerConcurrent: 4000,
  memoryOperations: 10_000,
  coldStarts: 5,
  pythonWarmup: 500,
  pythonCalls: 3000,
};

/** A smoke run for developing the bench itself (numbers not comparable). */
export const QUICK_PARAMS: Params = {
  ...DEFAULT_PARAMS,
  latencyWarmup: 100,
  latencyCalls: 400,
  fiveHookCalls: 200,
  throughputWarmup: 300,
  throughputCalls: 2000,
  streamWarmup: 500,
  streamEvents: 4000,
  streamWebhookEvents: 1500,
  registerC1: 200,
  registerConcurrent: 400,
  memoryOperations: 1000,
  coldStarts: 2,
  pythonWarmup: 100,
  pythonCalls: 400,
};

/** What a scenario run needs from the runner. */
export interface RunContext {
  readonly params: Params;
  /** Base URL of the shared webhook receiver, such as `http://127.0.0.1:41234`. */
  readonly receiverUrl: string;
  /** The control payload the sidecar POSTs, learned before the rounds; the undici baseline posts it. */
  readonly controlPayload: string;
  /** Sizes of the paired (sidecar against floor) scenarios. */
  readonly paired: PairedParams;
  /** Why the Python client cannot run, when it cannot. */
  readonly pythonUnavailable?: string;
  /** Node flags of sidecar children (profiling). */
  readonly sidecarFlags: readonly string[];
  /** Node flags of baseline children (profiling). */
  readonly baselineFlags: readonly string[];
  /**
   * Set when profiling: the memory scenario then takes a heap snapshot of
   * the loaded sidecar (started with `--heapsnapshot-signal=SIGUSR2`).
   */
  readonly heapSnapshot?: boolean;
  readonly log: (line: string) => void;
}

/** The measured span of a run on the monotonic clock, and the operations served in it. */
export interface MeasuredWindow {
  /** `process.hrtime` (CLOCK_MONOTONIC) in microseconds, the clock of V8's profile timestamps. */
  readonly fromUs: number;
  readonly toUs: number;
  readonly ops: number;
}

/** The kinds of timed span: sequential calls, concurrent calls, a stream. */
export type WindowKind = 'c=1' | 'c=64' | 'stream' | 'load';

/** What one run of a scenario measured. */
export interface ScenarioResult {
  readonly metrics: Record<string, number>;
  /** Operations the measured server process served, warm-up included (for per-op profile figures). */
  readonly ops: number;
  /** The timed spans by load kind, which a profile summary keeps (start-up and warm-up left out). */
  readonly windows?: Partial<Record<WindowKind, MeasuredWindow>>;
  /** The same spans of the floor process, in a paired scenario. */
  readonly baselineWindows?: Partial<Record<WindowKind, MeasuredWindow>>;
  /** Anything worth a look, such as warnings the sidecar logged. */
  readonly notes: string[];
  /** Markdown a profile summary adds (the heap snapshot summary of the memory scenario). */
  readonly appendix?: string;
}

/** One metric of a scenario. */
export interface MetricDef {
  readonly key: string;
  readonly label: string;
  readonly unit: string;
  readonly better: 'lower' | 'higher';
  /** Decimals printed. */
  readonly digits: number;
}

/** A benchmark scenario. */
export interface Scenario {
  readonly id: string;
  readonly title: string;
  readonly kind: 'baseline' | 'sidecar';
  /** The baseline whose server process a profile of this scenario is set against. */
  readonly baselineId?: string;
  /**
   * Runs the sidecar and the floor in the same run (`paired.ts`): a profile
   * profiles both in one run, the floor as the baseline.
   */
  readonly paired?: boolean;
  /**
   * Runs in the first round only: a figure of the sidecar alone (no floor
   * to take a ratio to) whose rounds agree, and that costs more than a
   * round's share of the default run's ten minutes.
   */
  readonly firstRoundOnly?: boolean;
  readonly metrics: readonly MetricDef[];
  run(ctx: RunContext): Promise<ScenarioResult>;
}

const P50: MetricDef = { key: 'p50', label: 'c=1 p50', unit: 'ms', better: 'lower', digits: 3 };
const P99: MetricDef = { key: 'p99', label: 'c=1 p99', unit: 'ms', better: 'lower', digits: 3 };
const C64: MetricDef = {
  key: 'c64',
  label: 'c=64 throughput',
  unit: 'calls/s',
  better: 'higher',
  digits: 0,
};
const CPU_C64: MetricDef = {
  key: 'cpuC64',
  label: 'server CPU per call at c=64',
  unit: 'µs',
  better: 'lower',
  digits: 0,
};
const CPU_C1: MetricDef = {
  key: 'cpuC1',
  label: 'server CPU per call at c=1',
  unit: 'µs',
  better: 'lower',
  digits: 0,
};
const EPS: MetricDef = {
  key: 'eps',
  label: 'throughput',
  unit: 'events/s',
  better: 'higher',
  digits: 0,
};
const CPU_EVENT: MetricDef = {
  key: 'cpuEvent',
  label: 'server CPU per event',
  unit: 'µs',
  better: 'lower',
  digits: 1,
};

/** Microseconds per millisecond. */
const US_PER_MS = 1000;
/** How long a client may take to connect to a fresh server. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Requests of a loop are taken round robin from a pool this large, so a request in flight is never changed. */
const REQUEST_POOL = 256;
/** Health checks of a cold start before it counts as failed. */
const MAX_HEALTH_ATTEMPTS = 500;
/** Pause between health checks that are not SERVING yet. */
const HEALTH_RETRY_MS = 2;

/** Nanoseconds per microsecond. */
const NS_PER_US = 1000n;

/** Now on the monotonic clock, in microseconds. */
const nowUs = () => Number(process.hrtime.bigint() / NS_PER_US);

/** Measures the CPU time a process uses between `start()` and `stop()`, and when. */
function cpuProbe(pid: number) {
  let startMs = 0;
  let usedMs = 0;
  let fromUs = 0;
  let toUs = 0;
  return {
    start: () => {
      fromUs = nowUs();
      startMs = cpuMsOf(pid);
    },
    stop: () => {
      usedMs = cpuMsOf(pid) - startMs;
      toUs = nowUs();
    },
    /** CPU microseconds per operation over the probed span. */
    usPer: (ops: number) => (usedMs * US_PER_MS) / ops,
    /** The probed span, with the operations served in it. */
    window: (ops: number): MeasuredWindow => ({ fromUs, toUs, ops }),
  };
}

/** A HookService or Health method bound to a client, with protobuf-es codecs. */
function method<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  serviceName: string,
  m: DescMethod & { input: I; output: O },
): UnaryCall<MessageShape<I>, MessageShape<O>> {
  return unaryMethod(client, `/${serviceName}/${m.name}`, m.input, m.output);
}

/** Starts a fresh sidecar, connects a client, runs `fn`, and stops both; notes its warnings. */
async function withSidecar(
  ctx: RunContext,
  fn: (sidecar: SidecarProcess, client: grpc.Client) => Promise<Omit<ScenarioResult, 'notes'>>,
): Promise<ScenarioResult> {
  const sidecar = await startBenchSidecar({ nodeFlags: ctx.sidecarFlags });
  const client = createClient(sidecar.grpc);
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
    const result = await fn(sidecar, client);
    const notes = sidecar.logs
      .filter((l) => l.level === 'warn' || l.level === 'error')
      .map((l) => `sidecar ${String(l.level)}: ${String(l.msg)}`);
    return { ...result, notes: [...new Set(notes)] };
  } finally {
    client.close();
    await sidecar.stop();
  }
}

/** Starts the echo baseline server, connects a client, runs `fn`, stops both. */
async function withEcho(
  ctx: RunContext,
  fn: (echo: BenchChild, client: grpc.Client) => Promise<Omit<ScenarioResult, 'notes'>>,
): Promise<ScenarioResult> {
  const echo = await startBenchChild('echo-server.js', [], ctx.baselineFlags);
  const client = createClient(echo.address);
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
    return { ...(await fn(echo, client)), notes: [] };
  } finally {
    client.close();
    await echo.stop();
  }
}

/** Registers hooks on an operation and checks the count. */
async function register(client: grpc.Client, operationId: string, hooks: Hook[]): Promise<void> {
  const call = method(client, HookService.typeName, HookService.method.registerHooks);
  const response = await call(create(RegisterHooksRequestSchema, { operationId, hooks }));
  if (response.hookCount < hooks.length) {
    throw new Error(
      `registered ${hooks.length} hooks on ${operationId}, it has ${response.hookCount}`,
    );
  }
}

/** A DecideToolCall loop call on `operationId` that checks the answer is an allow. */
function decideCall(
  client: grpc.Client,
  operationId: string,
  expect: (response: DecideToolCallResponse) => boolean,
): Call {
  const decide = method(client, HookService.typeName, HookService.method.decideToolCall);
  const pool = Array.from({ length: REQUEST_POOL }, () => decideRequest(operationId));
  return async (i) => {
    const response = await decide(withToolCallId(pool[i % REQUEST_POOL] as never, i));
    if (!expect(response)) {
      throw new Error(`unexpected DecideToolCall answer: ${JSON.stringify(response.decision)}`);
    }
  };
}

const isAllow = (consulted: number) => (r: DecideToolCallResponse) =>
  r.decision?.outcome.case === 'allow' && r.decision.outcome.value.controlsConsulted === consulted;

/**
 * Latency at c=1, then throughput at c=64, of a unary call, with the
 * server's CPU per call in both.
 */
async function unaryLoad(ctx: RunContext, pid: number, call: Call) {
  const { params } = ctx;
  const { latency, cpuC1, windows } = await latencyWithCpu(ctx, pid, call, params.latencyCalls);
  const probe = cpuProbe(pid);
  const tp = await measureThroughput(
    call,
    params.concurrency,
    params.throughputWarmup,
    params.throughputCalls,
    probe,
  );
  return {
    metrics: {
      p50: latency.p50,
      p99: latency.p99,
      cpuC1,
      c64: tp.perSecond,
      cpuC64: probe.usPer(params.throughputCalls),
    },
    windows: { ...windows, 'c=64': probe.window(params.throughputCalls) },
    ops:
      params.latencyWarmup + params.latencyCalls + params.throughputWarmup + params.throughputCalls,
  };
}

/** Latency (c=1) of a sidecar call with the server's CPU per call. */
async function latencyWithCpu(ctx: RunContext, pid: number, call: Call, calls: number) {
  const probe = cpuProbe(pid);
  const latency = await measureLatency(call, ctx.params.latencyWarmup, calls, probe);
  return { latency, cpuC1: probe.usPer(calls), windows: { 'c=1': probe.window(calls) } };
}

/** A stream loop over `operations`, round robin, checking each ack. */
async function streamLoad(
  ctx: RunContext,
  client: grpc.Client,
  path: string,
  pid: number,
  count: number,
  check: (response: DispatchStreamResponse) => void,
  echo: boolean,
) {
  const ops = Array.from({ length: ctx.params.streamOperations }, (_, i) =>
    fixedId('op_stream_', i),
  );
  const probe = cpuProbe(pid);
  const throughput = await measureStream({
    open: () =>
      bidiStream(
        client,
        path,
        DispatchStreamRequestSchema,
        echo ? DispatchStreamRequestSchema : DispatchStreamResponseSchema,
      ) as unknown as grpc.ClientDuplexStream<unknown, unknown>,
    request: (i) => streamRequest(ops[i % ops.length] as string, i),
    check: (r) => check(r as DispatchStreamResponse),
    window: ctx.params.streamWindow,
    warmup: ctx.params.streamWarmup,
    count,
    probe,
  });
  return {
    metrics: { eps: throughput.perSecond, cpuEvent: probe.usPer(count) },
    windows: { stream: probe.window(count) },
  };
}

const echoUnary: Scenario = {
  id: 'echo-unary',
  title: 'baseline: grpc-js unary echo (protobuf-es codecs, DecideToolCall request)',
  kind: 'baseline',
  metrics: [P50, P99, CPU_C1, C64, CPU_C64],
  run: (ctx) =>
    withEcho(ctx, async (echo, client) => {
      const unary = unaryMethod(
        client,
        ECHO_UNARY_PATH,
        DecideToolCallRequestSchema,
        DecideToolCallRequestSchema,
      );
      const pool = Array.from({ length: REQUEST_POOL }, () => decideRequest('op_nohook'));
      const call: Call = (i) => unary(withToolCallId(pool[i % REQUEST_POOL] as never, i));
      return unaryLoad(ctx, echo.pid, call);
    }),
};

const decideNoHook: Scenario = {
  id: 'decide-nohook',
  title: 'DecideToolCall, no matching hook',
  kind: 'sidecar',
  baselineId: 'echo-unary',
  metrics: [P50, P99, CPU_C1, C64, CPU_C64],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      const call = decideCall(client, 'op_nohook', isAllow(0));
      return unaryLoad(ctx, sidecar.pid, call);
    }),
};

/** Wire bytes of the DecideToolCall request every unary scenario sends. */
export function decideRequestBytes(): Uint8Array {
  return serializer(DecideToolCallRequestSchema)(withToolCallId(decideRequest('op_nohook'), 0));
}

/** Wire bytes of one DispatchStream request of the stream scenarios. */
export function streamRequestBytes(): Uint8Array {
  return serializer(DispatchStreamRequestSchema)(streamRequest(fixedId('op_stream_', 0), 0));
}

const pythonEcho: Scenario = {
  id: 'python-echo',
  title: 'baseline: Python grpcio client -> grpc-js unary echo',
  kind: 'baseline',
  metrics: [P50, P99],
  run: async (ctx) => {
    if (ctx.pythonUnavailable !== undefined) return pythonSkipped(ctx.pythonUnavailable);
    return withEcho(ctx, async (echo) => {
      const run = await runPythonClient({
        target: echo.address,
        method: ECHO_UNARY_PATH,
        request: decideRequestBytes(),
        echo: true,
        warmup: ctx.params.pythonWarmup,
        calls: ctx.params.pythonCalls,
      });
      return {
        metrics: { p50: run.p50, p99: run.p99 },
        ops: ctx.params.pythonWarmup + ctx.params.pythonCalls,
      };
    });
  },
};

const pythonDecide: Scenario = {
  id: 'python-decide',
  title: 'DecideToolCall, no matching hook, from a Python grpcio client',
  kind: 'sidecar',
  baselineId: 'python-echo',
  metrics: [P50, P99],
  run: async (ctx) => {
    if (ctx.pythonUnavailable !== undefined) return pythonSkipped(ctx.pythonUnavailable);
    return withSidecar(ctx, async (sidecar) => {
      const run = await runPythonClient({
        target: sidecar.grpc,
        method: `/${HookService.typeName}/${HookService.method.decideToolCall.name}`,
        request: decideRequestBytes(),
        echo: false,
        warmup: ctx.params.pythonWarmup,
        calls: ctx.params.pythonCalls,
      });
      return {
        metrics: { p50: run.p50, p99: run.p99 },
        ops: ctx.params.pythonWarmup + ctx.params.pythonCalls,
      };
    });
  },
};

function pythonSkipped(reason: string): ScenarioResult {
  return {
    metrics: { p50: Number.NaN, p99: Number.NaN },
    ops: 0,
    notes: [`Python client unavailable: ${reason}`],
  };
}

const undiciPost: Scenario = {
  id: 'undici-post',
  title: "baseline: direct undici POST (one pooled Agent) of the sidecar's control payload",
  kind: 'baseline',
  metrics: [P50, P99],
  run: async (ctx) => {
    const agent = new Agent();
    const origin = ctx.receiverUrl;
    const body = ctx.controlPayload;
    const post: Call = async () => {
      const response = await agent.request({
        origin,
        path: ALLOW_PATH,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const text = await response.body.text();
      if (response.statusCode !== 200 || text.length === 0) {
        throw new Error(`receiver answered ${response.statusCode}`);
      }
    };
    try {
      const latency = await measureLatency(post, ctx.params.latencyWarmup, ctx.params.latencyCalls);
      return {
        metrics: { p50: latency.p50, p99: latency.p99 },
        ops: ctx.params.latencyWarmup + ctx.params.latencyCalls,
        notes: [],
      };
    } finally {
      await agent.close();
    }
  },
};

const decideOneControl: Scenario = {
  id: 'decide-1control',
  title: 'DecideToolCall, one control webhook that allows',
  kind: 'sidecar',
  baselineId: 'echo-unary',
  metrics: [P50, P99, CPU_C1],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      await register(client, 'op_control', [controlHook('policy', ctx.receiverUrl)]);
      const call = decideCall(
        client,
        'op_control',
        (r) => isAllow(1)(r) && r.outcomes[0]?.status === HookOutcomeStatus.ALLOWED,
      );
      const { latency, cpuC1, windows } = await latencyWithCpu(
        ctx,
        sidecar.pid,
        call,
        ctx.params.latencyCalls,
      );
      return {
        metrics: { p50: latency.p50, p99: latency.p99, cpuC1 },
        windows,
        ops: ctx.params.latencyWarmup + ctx.params.latencyCalls,
      };
    }),
};

const decideFiveHooks: Scenario = {
  id: 'decide-5hooks',
  title: 'DecideToolCall, five hooks (3 controls that allow, 2 notifications started)',
  kind: 'sidecar',
  baselineId: 'echo-unary',
  metrics: [P50, P99, CPU_C1],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      await register(client, 'op_five', fiveHooks(ctx.receiverUrl));
      const call = decideCall(
        client,
        'op_five',
        (r) =>
          isAllow(3)(r) &&
          r.outcomes.filter((o) => o.status === HookOutcomeStatus.ALLOWED).length === 3,
      );
      const { latency, cpuC1, windows } = await latencyWithCpu(
        ctx,
        sidecar.pid,
        call,
        ctx.params.fiveHookCalls,
      );
      return {
        metrics: { p50: latency.p50, p99: latency.p99, cpuC1 },
        windows,
        ops: ctx.params.latencyWarmup + ctx.params.fiveHookCalls,
      };
    }),
};

const dispatchOneWebhook: Scenario = {
  id: 'dispatch-1webhook',
  title: 'Dispatch afterStep, one notification webhook (awaited)',
  kind: 'sidecar',
  baselineId: 'echo-unary',
  metrics: [P50, P99, CPU_C1],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      await register(client, 'op_dispatch', [
        notificationHook('step', HookType.AFTER_STEP, ctx.receiverUrl),
      ]);
      const dispatch = method(client, HookService.typeName, HookService.method.dispatch);
      const request = stepEvent('op_dispatch');
      const call: Call = async () => {
        const response = await dispatch(request);
        if (response.outcomes[0]?.status !== HookOutcomeStatus.DELIVERED) {
          throw new Error(`unexpected Dispatch answer: ${JSON.stringify(response.outcomes)}`);
        }
      };
      const { latency, cpuC1, windows } = await latencyWithCpu(
        ctx,
        sidecar.pid,
        call,
        ctx.params.latencyCalls,
      );
      return {
        metrics: { p50: latency.p50, p99: latency.p99, cpuC1 },
        windows,
        ops: ctx.params.latencyWarmup + ctx.params.latencyCalls,
      };
    }),
};

const echoBidi: Scenario = {
  id: 'echo-bidi',
  title: 'baseline: grpc-js bidi echo stream (protobuf-es codecs, DispatchStream request)',
  kind: 'baseline',
  metrics: [EPS, CPU_EVENT],
  run: (ctx) =>
    withEcho(ctx, async (echo, client) => {
      const m = await streamLoad(
        ctx,
        client,
        ECHO_STREAM_PATH,
        echo.pid,
        ctx.params.streamEvents,
        () => {},
        true,
      );
      return { ...m, ops: ctx.params.streamWarmup + ctx.params.streamEvents };
    }),
};

const checkAck =
  (outcomes: number) =>
  (r: DispatchStreamResponse): void => {
    if (r.error !== undefined || r.outcomes.length !== outcomes) {
      throw new Error(`unexpected DispatchStream ack: ${JSON.stringify(r)}`);
    }
    if (r.outcomes.some((o) => o.status !== HookOutcomeStatus.DELIVERED)) {
      throw new Error(`undelivered DispatchStream ack: ${JSON.stringify(r.outcomes)}`);
    }
  };

const streamPath = `/${HookService.typeName}/${HookService.method.dispatchStream.name}`;

const streamNoHook: Scenario = {
  id: 'node-stream-nohook',
  title: 'DispatchStream afterStep events, no hook (16 operations), Node client',
  kind: 'sidecar',
  baselineId: 'echo-bidi',
  metrics: [EPS, CPU_EVENT],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      const m = await streamLoad(
        ctx,
        client,
        streamPath,
        sidecar.pid,
        ctx.params.streamEvents,
        checkAck(0),
        false,
      );
      return { ...m, ops: ctx.params.streamWarmup + ctx.params.streamEvents };
    }),
};

const streamOneWebhook: Scenario = {
  id: 'node-stream-1webhook',
  title: 'DispatchStream afterStep events, one webhook each (16 operations), Node client',
  kind: 'sidecar',
  baselineId: 'echo-bidi',
  metrics: [EPS, CPU_EVENT],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      for (let i = 0; i < ctx.params.streamOperations; i++) {
        await register(client, fixedId('op_stream_', i), [
          notificationHook('step', HookType.AFTER_STEP, ctx.receiverUrl),
        ]);
      }
      const m = await streamLoad(
        ctx,
        client,
        streamPath,
        sidecar.pid,
        ctx.params.streamWebhookEvents,
        checkAck(1),
        false,
      );
      return { ...m, ops: ctx.params.streamWarmup + ctx.params.streamWebhookEvents };
    }),
};

const registrations: Scenario = {
  id: 'register',
  title: 'durable RegisterHooks of one hook, each a new operation (committed before the answer)',
  kind: 'sidecar',
  metrics: [
    { key: 'c1', label: 'c=1', unit: 'regs/s', better: 'higher', digits: 0 },
    { key: 'c16', label: 'c=16', unit: 'regs/s', better: 'higher', digits: 0 },
  ],
  run: (ctx) =>
    withSidecar(ctx, async (_sidecar, client) => {
      const { params } = ctx;
      const call = method(client, HookService.typeName, HookService.method.registerHooks);
      const hooks = [notificationHook('step', HookType.AFTER_STEP, ctx.receiverUrl)];
      const registerOne: Call = async (i) => {
        const response = await call(
          create(RegisterHooksRequestSchema, { operationId: fixedId('op_reg_', i), hooks }),
        );
        if (response.hookCount !== 1) throw new Error(`hook count ${response.hookCount}`);
      };
      const c1 = await measureThroughput(registerOne, 1, params.registerWarmup, params.registerC1);
      const offset = params.registerWarmup + params.registerC1;
      const shifted: Call = (i) => registerOne(offset + i);
      const c16 = await measureThroughput(
        shifted,
        params.registerConcurrency,
        params.registerWarmup,
        params.registerConcurrent,
      );
      return {
        metrics: { c1: c1.perSecond, c16: c16.perSecond },
        ops: offset + params.registerWarmup + params.registerConcurrent,
      };
    }),
};

const memory: Scenario = {
  id: 'rss-10k',
  title:
    'sidecar RSS with 10,000 operations x 5 hooks registered and listed once (first round only)',
  kind: 'sidecar',
  // 24 s a round, its registration burst most of it; three rounds of one run spread 141-144 MiB.
  firstRoundOnly: true,
  metrics: [
    { key: 'idle', label: 'RSS at start', unit: 'MiB', better: 'lower', digits: 1 },
    { key: 'rss', label: 'RSS loaded', unit: 'MiB', better: 'lower', digits: 1 },
    { key: 'peak', label: 'peak RSS (VmHWM)', unit: 'MiB', better: 'lower', digits: 1 },
    { key: 'anon', label: 'RssAnon loaded', unit: 'MiB', better: 'lower', digits: 1 },
    { key: 'file', label: 'RssFile loaded', unit: 'MiB', better: 'lower', digits: 1 },
    {
      key: 'regs',
      label: '5-hook registrations at c=16',
      unit: 'regs/s',
      better: 'higher',
      digits: 0,
    },
  ],
  run: (ctx) =>
    withSidecar(ctx, async (sidecar, client) => {
      const { params } = ctx;
      const idle = memoryOf(sidecar.pid).rssMb;
      const registerCall = method(client, HookService.typeName, HookService.method.registerHooks);
      const listCall = method(client, HookService.typeName, HookService.method.listHooks);
      const hooks = memoryHooks(ctx.receiverUrl);
      const registerOne: Call = async (i) => {
        const response = await registerCall(
          create(RegisterHooksRequestSchema, { operationId: fixedId('op_mem_', i), hooks }),
        );
        if (response.hookCount !== hooks.length)
          throw new Error(`hook count ${response.hookCount}`);
      };
      const listOne: Call = async (i) => {
        const response = await listCall(
          create(ListHooksRequestSchema, { operationId: fixedId('op_mem_', i) }),
        );
        if (response.hooks.length !== hooks.length) {
          throw new Error(`listed ${response.hooks.length} hooks`);
        }
      };
      const loadStarted = nowUs();
      const regs = await measureThroughput(
        registerOne,
        params.registerConcurrency,
        0,
        params.memoryOperations,
      );
      await measureThroughput(listOne, params.registerConcurrency, 0, params.memoryOperations);
      const load: MeasuredWindow = {
        fromUs: loadStarted,
        toUs: nowUs(),
        ops: 2 * params.memoryOperations,
      };
      const loaded = memoryOf(sidecar.pid);
      const appendix = ctx.heapSnapshot
        ? await heapSnapshotOf(sidecar, client, params.memoryOperations * hooks.length)
        : undefined;
      return {
        metrics: {
          idle,
          rss: loaded.rssMb,
          peak: loaded.peakMb,
          anon: loaded.anonMb,
          file: loaded.fileMb,
          regs: regs.perSecond,
        },
        ops: 2 * params.memoryOperations,
        windows: { load },
        appendix,
      };
    }),
};

/** How often to look for the heap snapshot file. */
const HEAP_SNAPSHOT_POLL_MS = 100;
/** How long a heap snapshot may take to write. */
const HEAP_SNAPSHOT_TIMEOUT_MS = 120_000;

/**
 * Has the sidecar write a heap snapshot (SIGUSR2, with
 * `--heapsnapshot-signal=SIGUSR2`) into its folder, waits until it answers
 * calls again (writing blocks it), and answers the summary as Markdown.
 */
async function heapSnapshotOf(
  sidecar: SidecarProcess,
  client: grpc.Client,
  hooks: number,
): Promise<string> {
  const check = method(client, Health.typeName, Health.method.check);
  process.kill(sidecar.pid, 'SIGUSR2');
  const deadline = Date.now() + HEAP_SNAPSHOT_TIMEOUT_MS;
  for (;;) {
    const file = readdirSync(sidecar.dir).find((f) => f.endsWith('.heapsnapshot'));
    if (file !== undefined) {
      // The main thread writes the snapshot; an answered call means it is done.
      await check(create(HealthCheckRequestSchema, { service: '' }));
      const md = heapMarkdown(summariseHeap(readFileSync(join(sidecar.dir, file), 'utf8')), {
        label: 'hook',
        count: hooks,
      });
      rmSync(join(sidecar.dir, file), { force: true });
      return `## Heap snapshot of the loaded sidecar\n\n${md}`;
    }
    if (Date.now() > deadline) throw new Error('no heap snapshot was written');
    await new Promise((resolve) => setTimeout(resolve, HEAP_SNAPSHOT_POLL_MS));
  }
}

const coldStart: Scenario = {
  id: 'cold-start',
  title: 'cold start: spawn -> first SERVING health Check (median of the spawns of a round)',
  kind: 'sidecar',
  metrics: [{ key: 'ms', label: 'spawn to SERVING', unit: 'ms', better: 'lower', digits: 0 }],
  run: async (ctx) => {
    const samples: number[] = [];
    for (let n = 0; n < ctx.params.coldStarts; n++) {
      const sidecar = await startBenchSidecar({ nodeFlags: ctx.sidecarFlags });
      const client = createClient(sidecar.grpc);
      try {
        const check = method(client, Health.typeName, Health.method.check);
        for (let attempt = 0; ; attempt++) {
          const response = await check(create(HealthCheckRequestSchema, { service: '' })).catch(
            () => undefined,
          );
          if (response?.status === HealthCheckResponse_ServingStatus.SERVING) break;
          if (attempt >= MAX_HEALTH_ATTEMPTS) throw new Error('the sidecar never turned SERVING');
          await new Promise((resolve) => setTimeout(resolve, HEALTH_RETRY_MS));
        }
        samples.push(Number(process.hrtime.bigint() - sidecar.spawnedAt) / NS_PER_MS);
      } finally {
        client.close();
        await sidecar.stop();
      }
    }
    return { metrics: { ms: median(samples) }, ops: 1, notes: [] };
  },
};

/** The scenarios of a default run, in the order a round runs them. */
export const SCENARIOS: readonly Scenario[] = [
  ...PAIRED_SCENARIOS,
  storedOperationsScenario,
  auditScenario,
  tracingScenario,
  memory,
  coldStart,
];

/**
 * Scenarios a run takes only when named (`--only`): the open loop with no
 * hook, the Node-client rows against the echo servers of the first bench (a
 * Node client can be the bottleneck, so these do not carry targets), the
 * Python client's rows, and two rows without a target that cost a minute
 * and a half of the default run: registrations (`register`) and SQLite
 * against PostgreSQL (`stores`).
 */
export const EXTRA_SCENARIOS: readonly Scenario[] = [
  ...EXTRA_PAIRED_SCENARIOS,
  registrations,
  storesScenario,
  echoUnary,
  decideNoHook,
  pythonEcho,
  pythonDecide,
  undiciPost,
  decideOneControl,
  decideFiveHooks,
  dispatchOneWebhook,
  echoBidi,
  streamNoHook,
  streamOneWebhook,
];
