/**
 * @module Prometheus metrics of the sidecar, served at `/metrics` on the HTTP
 * listener. One registry per sidecar; every metric name starts with
 * `agenthooks_`. The figure to alert on is
 * `agenthooks_control_errors_allowed_total`: control failures let through by
 * `onError: continue`, like Envoy's `failure_mode_allowed`.
 */
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from 'prom-client';

/** Latency buckets in seconds, from a fast decision to a slow webhook. */
const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
/** Store latency buckets in seconds: SQLite calls take microseconds. */
const STORE_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1];

/** A metric's label values and their names, as prom-client takes them. */
type Labels = Record<string, string>;

/**
 * The cells of a labelled metric, one per combination of label values,
 * found through a map per label: prom-client builds a labels object, checks
 * it and hashes it into a string on every `inc` and `observe`, several
 * microseconds of each decision, which counts four metrics. Up to three
 * labels; the label values come from small fixed sets (methods, codes,
 * outcomes), as prom-client's own would.
 */
class Cells<C> {
  readonly #root = new Map<string, Map<string, Map<string, C>>>();
  readonly #names: readonly string[];
  readonly #make: (labels: Labels) => C;
  /** Every cell, in the order made. */
  readonly all: C[] = [];

  constructor(names: readonly string[], make: (labels: Labels) => C) {
    this.#names = names;
    this.#make = make;
  }

  /** The cell of label values `a`, `b` and `c` (give only as many as the metric has labels). */
  get(a: string, b = '', c = ''): C {
    let byB = this.#root.get(a);
    if (byB === undefined) {
      byB = new Map();
      this.#root.set(a, byB);
    }
    let byC = byB.get(b);
    if (byC === undefined) {
      byC = new Map();
      byB.set(b, byC);
    }
    let cell = byC.get(c);
    if (cell === undefined) {
      const values = [a, b, c];
      const labels: Labels = {};
      for (const [i, name] of this.#names.entries()) labels[name] = values[i] as string;
      cell = this.#make(labels);
      byC.set(c, cell);
      this.all.push(cell);
    }
    return cell;
  }
}

/** Increments of one label set not yet handed to prom-client. */
interface CounterCell {
  readonly labels: Labels;
  pending: number;
}

/**
 * A prom-client counter whose increments are additions to its cells,
 * handed to the counter when it is collected (a scrape): the exposition is
 * prom-client's, the same at every scrape as if each had been counted then.
 */
export class CellCounter<N extends string> {
  readonly #cells: Cells<CounterCell>;

  constructor(options: {
    name: string;
    help: string;
    labelNames: readonly N[];
    registers: Registry[];
  }) {
    const cells = new Cells<CounterCell>(options.labelNames, (labels) => ({ labels, pending: 0 }));
    this.#cells = cells;
    const counter = new Counter<N>({
      name: options.name,
      help: options.help,
      labelNames: options.labelNames,
      registers: options.registers,
      collect() {
        for (const cell of cells.all) {
          if (cell.pending === 0) continue;
          this.inc(cell.labels as Partial<Record<N, string>>, cell.pending);
          cell.pending = 0;
        }
      },
    });
    // A reset (the registry's `resetMetrics`) forgets what is not collected yet too.
    const reset = counter.reset.bind(counter);
    counter.reset = () => {
      for (const cell of cells.all) cell.pending = 0;
      reset();
    };
  }

  /** Adds one to the count of label values `a`, `b`, `c`, in the order of `labelNames`. */
  inc(a: string, b?: string, c?: string): void {
    this.#cells.get(a, b, c).pending += 1;
  }

  /** Adds `n` (a count, zero or more) to the count of label value `a`. */
  add(n: number, a: string): void {
    if (!(n >= 0) || !Number.isFinite(n)) throw new RangeError(`a count must be >= 0, got ${n}`);
    this.#cells.get(a).pending += n;
  }
}

/** A metric as the registry renders it (what prom-client's own `get()` answers). */
interface RenderedMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly values: {
    readonly labels: Record<string, string | number>;
    readonly value: number;
    readonly metricName: string;
  }[];
  readonly aggregator: 'sum';
}

/** One label set of a histogram: its count per bucket (not cumulative), sum and count. */
interface HistogramCell {
  readonly labels: Labels;
  readonly buckets: number[];
  sum: number;
  count: number;
}

/**
 * A histogram kept in cells and rendered by the registry as prom-client
 * renders its own (`_bucket` with `le`, cumulative, then `+Inf`, `_sum`
 * and `_count`, per label set in the order first observed). The sidecar's
 * registry sets no default labels; with some, prom-client would place them
 * after `le` and this after the metric's own labels.
 */
export class CellHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  readonly #bounds: readonly number[];
  #cells: Cells<HistogramCell>;
  readonly #labelNames: readonly string[];

  constructor(options: {
    name: string;
    help: string;
    labelNames: readonly string[];
    buckets: readonly number[];
    registers: Registry[];
  }) {
    this.name = options.name;
    this.help = options.help;
    this.#bounds = [...options.buckets].sort((x, y) => x - y);
    this.#labelNames = options.labelNames;
    this.#cells = this.#newCells();
    for (const registry of options.registers) {
      registry.registerMetric(this as unknown as Metric);
    }
  }

  #newCells(): Cells<HistogramCell> {
    const size = this.#bounds.length;
    return new Cells<HistogramCell>(this.#labelNames, (labels) => ({
      labels,
      buckets: new Array<number>(size).fill(0),
      sum: 0,
      count: 0,
    }));
  }

  /** Observes `value` for label values `a`, `b` (in the order of `labelNames`). */
  observe(a: string, b: string, value: number): void {
    if (!Number.isFinite(value)) return;
    const cell = this.#cells.get(a, b);
    cell.sum += value;
    cell.count += 1;
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] as number)) {
        cell.buckets[i] = (cell.buckets[i] as number) + 1;
        return;
      }
    }
  }

  /** What the registry renders, as prom-client's histogram answers it. */
  async get(): Promise<RenderedMetric> {
    const values: RenderedMetric['values'] = [];
    const bucket = `${this.name}_bucket`;
    for (const cell of this.#cells.all) {
      let cumulative = 0;
      for (const [i, le] of this.#bounds.entries()) {
        cumulative += cell.buckets[i] as number;
        values.push({ labels: { le, ...cell.labels }, value: cumulative, metricName: bucket });
      }
      values.push({
        labels: { le: '+Inf', ...cell.labels },
        value: cell.count,
        metricName: bucket,
      });
      values.push({ labels: { ...cell.labels }, value: cell.sum, metricName: `${this.name}_sum` });
      values.push({
        labels: { ...cell.labels },
        value: cell.count,
        metricName: `${this.name}_count`,
      });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  /** Forgets every observation (the registry's `resetMetrics`). */
  reset(): void {
    this.#cells = this.#newCells();
  }
}

/** The metrics a sidecar records. */
export class Metrics {
  /** The registry `/metrics` renders. */
  readonly registry = new Registry();
  readonly #rpcCalls = new CellCounter({
    name: 'agenthooks_rpc_calls_total',
    help: 'RPCs answered, by method and gRPC status code name',
    labelNames: ['method', 'code'] as const,
    registers: [this.registry],
  });
  readonly #rpcLatency = new CellHistogram({
    name: 'agenthooks_rpc_duration_seconds',
    help: 'RPC latency, by method and gRPC status code name',
    labelNames: ['method', 'code'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly #hookOutcomes = new CellCounter({
    name: 'agenthooks_hook_outcomes_total',
    help: 'Hooks run (webhooks, handlers, controls, modifying hooks), by hook type (modify:<point> for a modifying hook), source and outcome',
    labelNames: ['hook_type', 'source', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly #webhookResults = new CellCounter({
    name: 'agenthooks_webhook_results_total',
    help: 'Webhook requests, by kind (notification, control or modify) and result code (ok, timeout, http_error, network_error, response_too_large, invalid_response, configuration, destination_denied, cancelled)',
    labelNames: ['kind', 'code'] as const,
    registers: [this.registry],
  });
  readonly #decisions = new CellCounter({
    name: 'agenthooks_decisions_total',
    help: 'Tool-call and tool-result decisions, by phase and outcome (allow, deny, mock)',
    labelNames: ['phase', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly #controlErrorsAllowed = new Counter({
    name: 'agenthooks_control_errors_allowed_total',
    help: 'Control failures let through because the hook has onError: continue, by hook type and code',
    labelNames: ['hook_type', 'code'] as const,
    registers: [this.registry],
  });
  /**
   * DispatchStream events in flight, changed twice per event: a plain count,
   * read into its gauge when scraped, costs a stream nothing of prom-client's.
   */
  #streamEventsInFlight = 0;
  readonly #streamEvents: Gauge = new Gauge({
    name: 'agenthooks_dispatch_stream_events_in_flight',
    help: 'DispatchStream events read and not yet acknowledged, over every stream',
    registers: [this.registry],
    collect: () => {
      this.#streamEvents.set(this.#streamEventsInFlight);
    },
  });
  readonly #streamBytes = new Gauge({
    name: 'agenthooks_dispatch_stream_bytes_in_flight',
    help: 'Encoded bytes of the large DispatchStream events (16 KiB or more) being delivered, over every stream; at most 1.25 times --stream-max-in-flight-bytes, or one larger event',
    registers: [this.registry],
  });
  readonly #storeServing = new Gauge({
    name: 'agenthooks_store_serving',
    help: '1 while the store health check passes (readiness follows it), else 0',
    registers: [this.registry],
  });
  #pendingHandlerCalls: () => number = () => 0;
  readonly #handlerCalls: Gauge = new Gauge({
    name: 'agenthooks_handler_calls_pending',
    help: 'Local handler calls sent to runtimes over Handle streams and not yet answered, timed out or withdrawn',
    registers: [this.registry],
    collect: () => {
      this.#handlerCalls.set(this.#pendingHandlerCalls());
    },
  });
  readonly #handlerStreams = new Gauge({
    name: 'agenthooks_handler_streams',
    help: 'Handle streams attached now',
    registers: [this.registry],
  });
  readonly #environmentReloads = new Counter({
    name: 'agenthooks_environment_reloads_total',
    help: 'Reloads of the effective environment, by validity',
    labelNames: ['valid'] as const,
    registers: [this.registry],
  });
  readonly #environmentValid = new Gauge({
    name: 'agenthooks_environment_valid',
    help: '1 while the effective environment (AGENT_HOOK_WEBHOOK_*, env file) is valid, else 0',
    registers: [this.registry],
  });
  readonly #environmentGeneration = new Gauge({
    name: 'agenthooks_environment_generation',
    help: 'Generation number of the effective environment',
    registers: [this.registry],
  });
  readonly #pluginsReloads = new Counter({
    name: 'agenthooks_plugins_reloads_total',
    help: 'Reloads of the operator plugins file (--plugins-file), by validity',
    labelNames: ['valid'] as const,
    registers: [this.registry],
  });
  readonly #pluginsValid = new Gauge({
    name: 'agenthooks_plugins_valid',
    help: '1 while the operator plugins (--plugins-file, if any) are valid, else 0; while 0 every Modify call fails',
    registers: [this.registry],
  });
  readonly #pluginsGeneration = new Gauge({
    name: 'agenthooks_plugins_generation',
    help: 'Generation number of the operator plugins',
    registers: [this.registry],
  });
  readonly #detachedDropped = new Counter({
    name: 'agenthooks_detached_deliveries_dropped_total',
    help: 'Detached deliveries (observer webhooks of an allowed call, the notification of a published result) not sent because too many were in flight, by reason (max_tasks, max_bytes)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly #detachedInFlight = new Gauge({
    name: 'agenthooks_detached_deliveries_in_flight',
    help: 'Detached deliveries started and not yet settled',
    registers: [this.registry],
  });
  readonly #detachedBytes = new Gauge({
    name: 'agenthooks_detached_delivery_bytes',
    help: 'Estimated payload bytes held by the detached deliveries in flight',
    registers: [this.registry],
  });
  readonly #storeLatency = new CellHistogram({
    name: 'agenthooks_store_operation_duration_seconds',
    help: 'Store call latency, by operation and result (ok or the error reason)',
    labelNames: ['operation', 'result'] as const,
    buckets: STORE_BUCKETS,
    registers: [this.registry],
  });
  readonly #auditWritten = new CellCounter({
    name: 'agenthooks_audit_entries_written_total',
    help: 'Decision audit entries written, by sink (store, stdout, http)',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  readonly #auditDropped = new CellCounter({
    name: 'agenthooks_audit_entries_dropped_total',
    help: "Decision audit entries dropped, by sink: oldest first past a sink's buffer (--audit-buffer), or refused for good by the HTTP endpoint",
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  readonly #auditFailures = new Counter({
    name: 'agenthooks_audit_write_failures_total',
    help: 'Failed decision audit writes (the entries stay buffered and are retried), by sink',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  /**
   * Entries each audit sink holds, set on every decision: read into its
   * gauge when scraped, so a decision costs a `Map` write, not prom-client's
   * labelled `set`.
   */
  readonly #auditBufferedBySink = new Map<string, number>();
  readonly #auditBuffered: Gauge = new Gauge({
    name: 'agenthooks_audit_buffered_entries',
    help: 'Decision audit entries buffered and not yet written, by sink',
    labelNames: ['sink'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [sink, entries] of this.#auditBufferedBySink) {
        this.#auditBuffered.set({ sink }, entries);
      }
    },
  });

  /** Creates the metrics, with Node's process metrics (memory, event loop lag, GC). */
  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'agenthooks_' });
  }

  /** Records an answered RPC. */
  rpc(method: string, code: string, seconds: number): void {
    this.#rpcCalls.inc(method, code);
    this.#rpcLatency.observe(method, code, seconds);
  }

  /** Records one hook that ran. */
  hookOutcome(hookType: string, source: string, outcome: string): void {
    this.#hookOutcomes.inc(hookType, source, outcome);
  }

  /** Records one webhook request's result. */
  webhookResult(kind: 'notification' | 'control' | 'modify', code: string): void {
    this.#webhookResults.inc(kind, code);
  }

  /** Records a decision. */
  decision(phase: string, outcome: string): void {
    this.#decisions.inc(phase, outcome);
  }

  /** Records a control failure that `onError: continue` let through. */
  controlErrorAllowed(hookType: string, code: string): void {
    this.#controlErrorsAllowed.inc({ hook_type: hookType, code });
  }

  /** Adds `delta` to the DispatchStream events in flight. */
  streamEvents(delta: number): void {
    this.#streamEventsInFlight += delta;
  }

  /** Adds `delta` to the bytes of large DispatchStream events being delivered. */
  streamBytes(delta: number): void {
    this.#streamBytes.inc(delta);
  }

  /** Records the store health check's verdict. */
  storeServing(serving: boolean): void {
    this.#storeServing.set(serving ? 1 : 0);
  }

  /** The Handle streams attached and the detached deliveries in flight now (for the admin console). */
  async streams(): Promise<{ handlerStreams: number; detachedInFlight: number }> {
    const [streams, detached] = await Promise.all([
      this.#handlerStreams.get(),
      this.#detachedInFlight.get(),
    ]);
    return {
      handlerStreams: streams.values[0]?.value ?? 0,
      detachedInFlight: detached.values[0]?.value ?? 0,
    };
  }

  /** Reads the pending handler calls from `source` at each scrape. */
  handlerCallsFrom(source: () => number): void {
    this.#pendingHandlerCalls = source;
  }

  /** Adds `delta` to the attached Handle streams. */
  handlerStreams(delta: number): void {
    this.#handlerStreams.inc(delta);
  }

  /** Records an environment reload. */
  environmentReloaded(generation: number, valid: boolean): void {
    this.#environmentReloads.inc({ valid: String(valid) });
    this.#environmentValid.set(valid ? 1 : 0);
    this.#environmentGeneration.set(generation);
  }

  /** Records a load of the operator plugins. */
  pluginsReloaded(generation: number, valid: boolean): void {
    this.#pluginsReloads.inc({ valid: String(valid) });
    this.#pluginsValid.set(valid ? 1 : 0);
    this.#pluginsGeneration.set(generation);
  }

  /** Records a detached delivery that was not started. */
  detachedDropped(reason: string): void {
    this.#detachedDropped.inc({ reason });
  }

  /** Sets the detached deliveries in flight and the bytes they hold. */
  detachedInFlight(tasks: number, bytes: number): void {
    this.#detachedInFlight.set(tasks);
    this.#detachedBytes.set(bytes);
  }

  /** Records a store call. */
  storeCall(operation: string, result: string, seconds: number): void {
    this.#storeLatency.observe(operation, result, seconds);
  }

  /** Records decision audit entries a sink wrote. */
  auditWritten(sink: string, entries: number): void {
    this.#auditWritten.add(entries, sink);
  }

  /** Records decision audit entries a sink dropped. */
  auditDropped(sink: string, entries: number): void {
    this.#auditDropped.add(entries, sink);
  }

  /** Records a failed decision audit write. */
  auditFailed(sink: string): void {
    this.#auditFailures.inc({ sink });
  }

  /** Sets the decision audit entries a sink holds. */
  auditBuffered(sink: string, entries: number): void {
    this.#auditBufferedBySink.set(sink, entries);
  }
}
