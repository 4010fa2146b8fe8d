/**
 * @module The targets `npm run bench -- --check` enforces: medians across
 * rounds of per-round ratios (the sidecar against the floor measured in the
 * same run, on the same machine, seconds apart), and a few absolute limits.
 */

/** Reads the median of a scenario's metric (NaN when it was not measured). */
export type MedianOf = (scenario: string, metric: string) => number;

/** Extra milliseconds a one-webhook decision's c=1 p50 may take over the floor's. */
export const WEBHOOK_OVERHEAD_MS = 0.1;
/** Modify: CPU per call over the floor's, at most. */
export const MODIFY_CPU_RATIO = 1.5;
/** Modify: extra milliseconds its c=1 p50 may take over the floor's. */
export const MODIFY_OVERHEAD_MS = 0.15;
/** RSS limit with 10,000 operations x 5 hooks, in MiB. */
export const RSS_LIMIT_MB = 150;
/** A decision with 100,000 operations stored: CPU per call over the 1,000-operation case, at most. */
export const STORED_OPERATIONS_CPU_RATIO = 1.15;
/** CPU per decision with the audit store sink on, against off. */
export const AUDIT_STORE_CPU_RATIO = 1.1;
/** Decision p99 with the audit HTTP sink down, against no sink. */
export const AUDIT_DOWN_P99_RATIO = 1.2;
/** Tracing on (every span sampled and exported): CPU per decision over tracing off, at most. */
export const TRACING_CPU_RATIO = 1.15;
/** Cold start limit, in milliseconds. */
export const COLD_START_LIMIT_MS = 1000;
/** Open loop: the sidecar's p99 over the floor's at the same offered rate. */
export const OPEN_P99_RATIO = 3;
/** Closed loop c=64, one control: throughput over the floor's, at least. */
export const C64_TPUT_RATIO = 0.8;
/** Closed loop c=64, one control: CPU per call over the floor's, at most. */
export const C64_CPU_RATIO = 1.5;
/** DispatchStream, no hook: events/s over the stream floor's, at least. */
export const STREAM_EPS_RATIO = 0.9;
/** DispatchStream, no hook: CPU per event over the stream floor's, at most. */
export const STREAM_CPU_RATIO = 1.3;
/** 1 MB arguments, no hook: CPU per call over the floor's, at most. */
export const ARGS_CPU_RATIO = 1.3;

/** A target: a measured value, its limit, and which way it must lie. */
export interface Target {
  readonly id: string;
  readonly description: string;
  /** Scenario whose sidecar a `--profile` run profiles when this target is missed. */
  readonly scenario: string;
  readonly unit: string;
  /** Decimals printed. */
  readonly digits: number;
  readonly value: number;
  readonly limit: number;
  readonly cmp: '<=' | '>=';
  /** How the limit is computed from the baselines. */
  readonly formula: string;
  readonly pass: boolean;
}

type TargetSpec = Omit<Target, 'value' | 'limit' | 'pass'> & {
  readonly compute: (m: MedianOf) => { value: number; limit: number };
};

/** A target on one metric of one scenario against a fixed limit (ratios are per round already). */
function fixed(
  id: string,
  description: string,
  scenario: string,
  metric: string,
  unit: string,
  digits: number,
  cmp: '<=' | '>=',
  limit: number,
  formula: string,
): TargetSpec {
  return {
    id,
    description,
    scenario,
    unit,
    digits,
    cmp,
    formula,
    compute: (m) => ({ value: m(scenario, metric), limit }),
  };
}

/**
 * The targets. Every ratio is the median over rounds of that round's ratio
 * (sidecar and floor measured in the same run), so a slow machine or a busy
 * round moves both sides of it.
 */
const SPECS: readonly TargetSpec[] = [
  ...[50, 80].map((percent) =>
    fixed(
      `open-p99-${percent}`,
      `open loop, one control, at ${percent}% of the sidecar's maximum: p99 <= ${OPEN_P99_RATIO}x the floor's p99 at the same rate`,
      'open-1control',
      `p99RatioAt${percent}`,
      'x',
      2,
      '<=',
      OPEN_P99_RATIO,
      `${OPEN_P99_RATIO} (per-round ratio)`,
    ),
  ),
  fixed(
    'c64-throughput',
    `c=64, one control: throughput >= ${C64_TPUT_RATIO}x the floor`,
    'controls-1',
    'tputRatio',
    'x',
    2,
    '>=',
    C64_TPUT_RATIO,
    `${C64_TPUT_RATIO} (per-round ratio)`,
  ),
  fixed(
    'c64-cpu',
    `c=64, one control: server CPU per call <= ${C64_CPU_RATIO}x the floor`,
    'controls-1',
    'cpuRatio',
    'x',
    2,
    '<=',
    C64_CPU_RATIO,
    `${C64_CPU_RATIO} (per-round ratio)`,
  ),
  fixed(
    'webhook-p50',
    `one webhook at c=1: p50 <= floor p50 + ${WEBHOOK_OVERHEAD_MS} ms`,
    'controls-1',
    'p50Over',
    'ms',
    3,
    '<=',
    WEBHOOK_OVERHEAD_MS,
    `${WEBHOOK_OVERHEAD_MS} ms (per-round difference)`,
  ),
  fixed(
    'stream-throughput',
    `DispatchStream, no hook: events/s >= ${STREAM_EPS_RATIO}x the stream floor`,
    'stream-nohook',
    'epsRatio',
    'x',
    2,
    '>=',
    STREAM_EPS_RATIO,
    `${STREAM_EPS_RATIO} (per-round ratio)`,
  ),
  fixed(
    'stream-cpu',
    `DispatchStream, no hook: CPU per event <= ${STREAM_CPU_RATIO}x the stream floor`,
    'stream-nohook',
    'cpuRatio',
    'x',
    2,
    '<=',
    STREAM_CPU_RATIO,
    `${STREAM_CPU_RATIO} (per-round ratio)`,
  ),
  fixed(
    'args-1mb-cpu',
    `1 MB arguments, no hook: server CPU per call <= ${ARGS_CPU_RATIO}x the floor`,
    'args-1mb',
    'cpuRatio',
    'x',
    2,
    '<=',
    ARGS_CPU_RATIO,
    `${ARGS_CPU_RATIO} (per-round ratio)`,
  ),
  ...(
    [
      ['modify-0hooks', 'no hook'],
      ['modify-1hook', 'one webhook'],
      ['modify-1hook-100kb', 'one webhook, 100 KiB history'],
    ] as const
  ).flatMap(([scenario, what]) => [
    fixed(
      `${scenario}-cpu`,
      `Modify, ${what}: server CPU per call <= ${MODIFY_CPU_RATIO}x the floor`,
      scenario,
      'cpuRatio',
      'x',
      2,
      '<=',
      MODIFY_CPU_RATIO,
      `${MODIFY_CPU_RATIO} (per-round ratio)`,
    ),
    fixed(
      `${scenario}-p50`,
      `Modify, ${what}: c=1 p50 <= floor p50 + ${MODIFY_OVERHEAD_MS} ms`,
      scenario,
      'p50Over',
      'ms',
      3,
      '<=',
      MODIFY_OVERHEAD_MS,
      `${MODIFY_OVERHEAD_MS} ms (per-round difference)`,
    ),
  ]),
  fixed(
    'rss',
    `RSS <= ${RSS_LIMIT_MB} MiB at 10,000 operations x 5 hooks`,
    'rss-10k',
    'rss',
    'MiB',
    1,
    '<=',
    RSS_LIMIT_MB,
    `${RSS_LIMIT_MB} MiB`,
  ),
  ...(['sqlite', 'postgres'] as const).map((store) =>
    fixed(
      `stores-100k-${store}`,
      `${store === 'sqlite' ? 'SQLite' : 'PostgreSQL'}: decision CPU with 100,000 operations stored <= ${STORED_OPERATIONS_CPU_RATIO}x the 1,000 case`,
      'stores-100k',
      `${store}Ratio`,
      'x',
      2,
      '<=',
      STORED_OPERATIONS_CPU_RATIO,
      `${STORED_OPERATIONS_CPU_RATIO} (per-round ratio)`,
    ),
  ),
  fixed(
    'audit-store-cpu',
    `decision CPU with the audit store sink <= ${AUDIT_STORE_CPU_RATIO}x without`,
    'audit',
    'storeRatio',
    'x',
    2,
    '<=',
    AUDIT_STORE_CPU_RATIO,
    `${AUDIT_STORE_CPU_RATIO} (same run, chunks in ABBA order)`,
  ),
  fixed(
    'audit-http-down-p99',
    `decision p99 while the audit HTTP sink is down <= ${AUDIT_DOWN_P99_RATIO}x without a sink`,
    'audit',
    'downP99Ratio',
    'x',
    2,
    '<=',
    AUDIT_DOWN_P99_RATIO,
    `${AUDIT_DOWN_P99_RATIO} (same run, chunks in ABBA order)`,
  ),
  fixed(
    'tracing-cpu',
    `tracing on (every span sampled, exported over OTLP): decision CPU <= ${TRACING_CPU_RATIO}x tracing off`,
    'tracing',
    'cpuRatio',
    'x',
    2,
    '<=',
    TRACING_CPU_RATIO,
    `${TRACING_CPU_RATIO} (per-round ratio)`,
  ),
  fixed(
    'cold-start',
    `cold start to SERVING <= ${COLD_START_LIMIT_MS / 1000} s`,
    'cold-start',
    'ms',
    'ms',
    0,
    '<=',
    COLD_START_LIMIT_MS,
    `${COLD_START_LIMIT_MS} ms`,
  ),
];

/**
 * Evaluates every target whose inputs were measured in this run; a target
 * with a missing input (a scenario left out with `--only`) is left out.
 */
export function evaluateTargets(medianOf: MedianOf): Target[] {
  const out: Target[] = [];
  for (const { compute, ...spec } of SPECS) {
    const { value, limit } = compute(medianOf);
    if (Number.isNaN(value) || Number.isNaN(limit)) continue;
    const pass = spec.cmp === '<=' ? value <= limit : value >= limit;
    out.push({ ...spec, value, limit, pass });
  }
  return out;
}
