/**
 * @module Small statistics helpers of the bench: nearest-rank percentiles of
 * latency samples and the median/min/max summary of a metric across rounds.
 */

/** Nanoseconds per millisecond, to turn `process.hrtime.bigint()` deltas into ms. */
export const NS_PER_MS = 1_000_000;
/** Milliseconds per second. */
export const MS_PER_S = 1000;

/**
 * Returns the nearest-rank percentile `p` (0 < p <= 100) of `sorted`, which
 * must be sorted ascending and not empty.
 *
 * @example percentile([1, 2, 3, 4], 50) // 2
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new Error('percentile of no samples');
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

/** Returns the median of `values` (the mean of the two middle values for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** A metric across rounds: every round's value and their median, minimum and maximum. */
export interface Spread {
  readonly values: number[];
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/** Summarises the values of a metric across rounds. */
export function spread(values: readonly number[]): Spread {
  return {
    values: [...values],
    median: median(values),
    min: Math.min(...values),
    max: Math.max(...values),
  };
}

/** Latency percentiles of one measured loop, in milliseconds. */
export interface LatencySummary {
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly count: number;
}

/** Summarises latency samples given in nanoseconds. */
export function latencySummary(samplesNs: readonly bigint[]): LatencySummary {
  const ms = samplesNs.map((ns) => Number(ns) / NS_PER_MS).sort((a, b) => a - b);
  const total = ms.reduce((a, b) => a + b, 0);
  return {
    p50: percentile(ms, 50),
    p99: percentile(ms, 99),
    mean: total / ms.length,
    count: ms.length,
  };
}
