/**
 * @module The tracing row of the bench: the server CPU per decision (one
 * control webhook that allows, c=16, the bench's Node client) of sidecars
 * with tracing on, every span sampled (`parentbased_always_on`, and the
 * calls carry no `traceparent`, so every call is a sampled root) and
 * exported over OTLP/HTTP to a receiver the bench starts on 127.0.0.1,
 * against sidecars with tracing off. A round runs `CPU_PAIRS` pairs side
 * by side, each pair measured in chunks in ABBA order, and reads each
 * sidecar's CPU over the whole measured part, so that a batch exported
 * between a sidecar's chunks counts too (see `pairedCpuMs`).
 *
 * Each sidecar answers `STEADY_WARMUP` decisions before the measured ones,
 * the sidecars taking turns (`warmInTurn`): the row compares steady states.
 * A sidecar's first few thousand decisions cost more while V8 compiles its
 * code, and a traced one has more code to compile (the SDK, and the
 * exporter, which runs once per batch); the target is on steady-state CPU,
 * not on the warm-up paid once per start. Warmed in turns on a machine at
 * rest, the row measures 1.18-1.46 (BENCHMARKS.md, "Tracing misses on a
 * quiet machine"); the lower numbers of the warm-up sweep before it came
 * from sequential warm-ups and a busy machine.
 *
 * The batch processor keeps its defaults (batches of 512 spans) with room
 * for every span (a queue of 65,536): a dropped span would cost less than an
 * exported one. The receiver counts the spans it got, decoded with the
 * protobufjs code generated from the opentelemetry-proto definitions.
 */

import type * as grpc from '@grpc/grpc-js';
import otlp from '@opentelemetry/otlp-proto-exporter-base/build/src/generated/root.js';
import { startReceiver } from '../../test/support/receiver.js';
import { type SidecarProcess, startSidecar } from '../../test/support/sidecar.js';
import { createClient, waitForReady } from './grpc-codec.js';
import { controlHook, fixedId } from './messages.js';
import { metric } from './paired.js';
import type { RunContext, Scenario, ScenarioResult } from './scenarios.js';
import {
  CPU_PAIRS,
  type CpuPair,
  decideOn,
  pairedCpuMs,
  registerNew,
  STEADY_WARMUP,
  warmInTurn,
} from './stores.js';

/** Calls in flight. */
const CONCURRENCY = 16;
/** Chunks of each pair's measured calls, in ABBA order. */
const CHUNKS = 10;
/** How long a client may take to connect to a fresh sidecar. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Microseconds per millisecond. */
const US_PER_MS = 1000;
/** The operation every decision names. */
const OPERATION = 'op_trace';

/** The part of an OTLP export request the bench reads. */
interface ExportRequest {
  resourceSpans: { scopeSpans?: { spans?: unknown[] }[] }[];
}

const ExportTraceServiceRequest = (
  otlp as unknown as {
    opentelemetry: {
      proto: {
        collector: {
          trace: { v1: { ExportTraceServiceRequest: { decode(b: Uint8Array): ExportRequest } } };
        };
      };
    };
  }
).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** Spans in one OTLP protobuf body. */
function spanCount(body: Uint8Array): number {
  let n = 0;
  for (const rs of ExportTraceServiceRequest.decode(body).resourceSpans) {
    for (const ss of rs.scopeSpans ?? []) n += ss.spans?.length ?? 0;
  }
  return n;
}

/** One side of the row: a sidecar and a connected client. */
interface Side {
  readonly sidecar: SidecarProcess;
  readonly client: grpc.Client;
}

async function startSide(ctx: RunContext, env: Record<string, string>): Promise<Side> {
  const sidecar = await startSidecar({ nodeFlags: ctx.sidecarFlags, http: false, env });
  const client = createClient(sidecar.grpc);
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
  } catch (e: unknown) {
    client.close();
    await sidecar.stop();
    throw e;
  }
  return { sidecar, client };
}

function sizes(ctx: RunContext) {
  // A quick run (bench development) scales the loops down.
  return ctx.params.latencyCalls < 1000
    ? { warmup: 300, calls: 1200 }
    : { warmup: STEADY_WARMUP, calls: 4000 };
}

/** Decision CPU with tracing on (every span exported) against off, per round. */
export const tracingScenario: Scenario = {
  id: 'tracing',
  title: `DecideToolCall (one control), tracing on (every span sampled, exported over OTLP/HTTP to a local receiver) and off, c=${CONCURRENCY}`,
  kind: 'sidecar',
  metrics: [
    metric('offCpu', 'tracing off: server CPU per decision', 'µs', 'lower', 0),
    metric('onCpu', 'tracing on: server CPU per decision', 'µs', 'lower', 0),
    metric('cpuRatio', 'server CPU per decision, on / off', 'x', 'lower', 2),
    metric('spansPerCall', 'spans exported per decision (tracing on)', 'spans', 'higher', 2),
  ],
  run: async (ctx) => {
    const p = sizes(ctx);
    const collector = await startReceiver({
      answer: { status: 200, headers: { 'content-type': 'application/x-protobuf' }, body: '' },
    });
    const sides: Side[] = [];
    const traced = {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      // The batch processor's defaults (a batch of 512 spans, or every 5 s), with a queue
      // that never drops: the graceful stop below flushes the rest, and every span is counted.
      OTEL_BSP_MAX_QUEUE_SIZE: '65536',
    };
    try {
      const hooks = [controlHook('policy', ctx.receiverUrl)];
      const pairs: CpuPair<Side>[] = [];
      for (let k = 0; k < CPU_PAIRS; k++) {
        const off = await startSide(ctx, {});
        sides.push(off);
        const on = await startSide(ctx, traced);
        sides.push(on);
        pairs.push({ a: off, b: on });
      }
      const decideOf = (side: Side) => decideOn(side.client, () => fixedId(OPERATION, 0));
      for (const side of sides) await registerNew(side.client, OPERATION, hooks)(0);
      await warmInTurn(sides, decideOf, { warmup: p.warmup, concurrency: CONCURRENCY });
      // Calls per side, over its sidecars.
      const {
        a: offMs,
        b: onMs,
        calls,
      } = await pairedCpuMs(pairs, decideOf, {
        calls: p.calls,
        chunks: CHUNKS,
        concurrency: CONCURRENCY,
      });
      // A graceful stop flushes the spans still batched: then every span has been counted.
      for (const { b: on } of pairs) {
        on.client.close();
        await on.sidecar.stop();
      }
      let spans = 0;
      for (const req of collector.requests) spans += spanCount(req.raw);
      // Register, warm-up and measured calls: one server span each, one control span per decision.
      const decisions = CPU_PAIRS * p.warmup + calls;
      return {
        metrics: {
          offCpu: (offMs * US_PER_MS) / calls,
          onCpu: (onMs * US_PER_MS) / calls,
          cpuRatio: onMs / offMs,
          spansPerCall: (spans - CPU_PAIRS) / decisions,
        },
        ops: 2 * decisions,
        notes: [],
      } satisfies ScenarioResult;
    } finally {
      for (const side of sides) {
        side.client.close();
        await side.sidecar.stop();
      }
      await collector.close();
    }
  },
};
