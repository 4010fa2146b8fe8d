/**
 * @module The targets `npm run bench -- --check` enforces, each computed from
 * medians across rounds of the same run: the sidecar against the floor the
 * baselines measured on the same machine at the same time.
 */

/** Reads the median of a scenario's metric (NaN when it was not measured). */
export type MedianOf = (scenario: string, metric: string) => number;

/** Extra milliseconds a one-webhook decision may cost over an echo plus an undici POST. */
export const WEBHOOK_OVERHEAD_MS = 0.15;
/** RSS limit with 10,000 operations x 5 hooks, in MiB. */
export const RSS_LIMIT_MB = 150;
/** Cold start limit, in milliseconds. */
export const COLD_START_LIMIT_MS = 1000;

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

const SPECS: readonly TargetSpec[] = [
  {
    id: 'nohook-p50',
    description: 'no-hook decision p50 <= 1.25x echo p50',
    scenario: 'decide-nohook',
    unit: 'ms',
    digits: 3,
    cmp: '<=',
    formula: '1.25 x echo-unary p50',
    compute: (m) => ({ value: m('decide-nohook', 'p50'), limit: 1.25 * m('echo-unary', 'p50') }),
  },
  {
    id: 'nohook-p99',
    description: 'no-hook decision p99 <= 1.5x echo p99',
    scenario: 'decide-nohook',
    unit: 'ms',
    digits: 3,
    cmp: '<=',
    formula: '1.5 x echo-unary p99',
    compute: (m) => ({ value: m('decide-nohook', 'p99'), limit: 1.5 * m('echo-unary', 'p99') }),
  },
  {
    id: 'nohook-c64',
    description: 'no-hook decision c=64 throughput >= 0.7x echo',
    scenario: 'decide-nohook',
    unit: 'calls/s',
    digits: 0,
    cmp: '>=',
    formula: '0.7 x echo-unary c=64',
    compute: (m) => ({ value: m('decide-nohook', 'c64'), limit: 0.7 * m('echo-unary', 'c64') }),
  },
  {
    id: 'webhook-p50',
    description: 'one-webhook decision p50 <= echo p50 + undici p50 + 0.15 ms',
    scenario: 'decide-1control',
    unit: 'ms',
    digits: 3,
    cmp: '<=',
    formula: 'echo-unary p50 + undici-post p50 + 0.15 ms',
    compute: (m) => ({
      value: m('decide-1control', 'p50'),
      limit: m('echo-unary', 'p50') + m('undici-post', 'p50') + WEBHOOK_OVERHEAD_MS,
    }),
  },
  {
    id: 'stream-nohook',
    description: 'DispatchStream with no hook >= 0.7x bidi echo',
    scenario: 'stream-nohook',
    unit: 'events/s',
    digits: 0,
    cmp: '>=',
    formula: '0.7 x echo-bidi',
    compute: (m) => ({ value: m('stream-nohook', 'eps'), limit: 0.7 * m('echo-bidi', 'eps') }),
  },
  {
    id: 'rss',
    description: 'RSS <= 150 MiB at 10,000 operations x 5 hooks',
    scenario: 'rss-10k',
    unit: 'MiB',
    digits: 1,
    cmp: '<=',
    formula: '150 MiB',
    compute: (m) => ({ value: m('rss-10k', 'rss'), limit: RSS_LIMIT_MB }),
  },
  {
    id: 'cold-start',
    description: 'cold start to SERVING <= 1 s',
    scenario: 'cold-start',
    unit: 'ms',
    digits: 0,
    cmp: '<=',
    formula: '1000 ms',
    compute: (m) => ({ value: m('cold-start', 'ms'), limit: COLD_START_LIMIT_MS }),
  },
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
