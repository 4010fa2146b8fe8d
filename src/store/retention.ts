/**
 * @module Retention: completed operations and published placeholders expire
 * after a configurable time (default 7 days); an expired operation leaves a
 * tombstone, which expires in turn after a further configurable time
 * (default 7 days), so that the store stops growing at a steady load. A
 * sweep removes them in small batches, each its own short transaction, and
 * yields to the event loop between batches, so that a backlog of thousands
 * of rows never stalls calls. Sweeps run on an unref'd interval that does
 * not keep the process alive.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ExpireResult, RetentionStore } from './store.js';

/** Default of {@link RetentionOptions.retentionMs}: 7 days, in milliseconds. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/**
 * Default of {@link RetentionOptions.tombstoneRetentionMs}: 7 days, in
 * milliseconds, as long again as the operation was kept. A tombstone costs
 * about an eighth of a typical operation (README, "Durability"), so this adds
 * an eighth to the store; 30 days would add half, past the 1 GiB data volume
 * of the shipped manifest at a steady operation per second.
 */
export const DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/** Default of {@link RetentionOptions.intervalMs}: one minute, in milliseconds. */
export const DEFAULT_RETENTION_INTERVAL_MS = 60 * 1000;
/** Default of {@link RetentionOptions.batchSize}: rows of each kind per transaction. */
export const DEFAULT_RETENTION_BATCH_SIZE = 100;

/** Options of {@link startRetention}. */
export interface RetentionOptions {
  /** The store to sweep. */
  readonly store: RetentionStore;
  /**
   * How long completed operations and published placeholders are kept, in
   * milliseconds; a non-negative safe integer. Default {@link DEFAULT_RETENTION_MS}.
   */
  readonly retentionMs?: number;
  /**
   * How long a tombstone is kept after its operation expired, in
   * milliseconds; a non-negative safe integer. Afterwards the operation is
   * unknown: a decision naming it no longer fails with `OPERATION_EXPIRED`.
   * Default {@link DEFAULT_TOMBSTONE_RETENTION_MS}.
   */
  readonly tombstoneRetentionMs?: number;
  /** Time between sweeps, in milliseconds; positive. Default {@link DEFAULT_RETENTION_INTERVAL_MS}. */
  readonly intervalMs?: number;
  /**
   * Rows of each kind removed per transaction; a positive integer. Default
   * {@link DEFAULT_RETENTION_BATCH_SIZE}.
   */
  readonly batchSize?: number;
  /** Current time in epoch milliseconds. Default `Date.now`. */
  readonly now?: () => number;
  /**
   * Called after each batch that removed something, with the operations that
   * became tombstones (drop them from caches), how many published parked
   * calls were deleted and how many tombstones were deleted. What it throws
   * goes to `onError`; the sweep goes on.
   */
  readonly onExpired?: (operations: string[], parkedCalls: number, tombstones: number) => void;
  /**
   * Called when a batch fails (the store is locked, read-only...); the sweep
   * stops and the next interval tries again. Without it, failures are dropped:
   * retention only keeps data longer, it never fails a call.
   */
  readonly onError?: (e: unknown) => void;
}

/** Totals of one {@link Retention.sweep}. */
export interface SweepResult {
  /** Operations that became tombstones. */
  readonly operations: number;
  /** Published parked calls deleted. */
  readonly parkedCalls: number;
  /** Tombstones deleted. */
  readonly tombstones: number;
  /** Decision audit entries deleted. */
  readonly decisions: number;
  /** Batches (transactions) run, the last one included. */
  readonly batches: number;
}

/** A running retention, as {@link startRetention} returns it. */
export interface Retention {
  /**
   * Sweeps now, batch after batch until a batch comes back short, with the
   * cutoffs taken once at its start; joins the sweep in progress when there
   * is one. Never rejects: failures go to `onError` and end the sweep.
   */
  sweep(): Promise<SweepResult>;
  /**
   * Stops the interval; a sweep in progress ends after its current batch.
   * Resolves when it has. Stopping twice is a no-op.
   */
  stop(): Promise<void>;
}

/**
 * Starts sweeping `store` every `intervalMs`; the first sweep runs after one
 * interval.
 *
 * @throws RangeError when an option is out of range.
 * @example
 * const retention = startRetention({ store, onExpired: (ops) => registry.forget(ops) });
 * // at shutdown, before closing the store:
 * await retention.stop();
 */
export function startRetention(options: RetentionOptions): Retention {
  const { store, now = Date.now, onExpired, onError } = options;
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  const tombstoneRetentionMs = options.tombstoneRetentionMs ?? DEFAULT_TOMBSTONE_RETENTION_MS;
  const intervalMs = options.intervalMs ?? DEFAULT_RETENTION_INTERVAL_MS;
  const batchSize = options.batchSize ?? DEFAULT_RETENTION_BATCH_SIZE;
  if (!Number.isSafeInteger(retentionMs) || retentionMs < 0) {
    throw new RangeError(`retentionMs must be a non-negative integer, got ${retentionMs}`);
  }
  if (!Number.isSafeInteger(tombstoneRetentionMs) || tombstoneRetentionMs < 0) {
    throw new RangeError(
      `tombstoneRetentionMs must be a non-negative integer, got ${tombstoneRetentionMs}`,
    );
  }
  if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
    throw new RangeError(`intervalMs must be a positive number, got ${intervalMs}`);
  }
  if (!Number.isSafeInteger(batchSize) || batchSize <= 0) {
    throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  }

  let stopped = false;
  let running: Promise<SweepResult> | undefined;

  const report = (e: unknown): void => {
    try {
      onError?.(e);
    } catch (_e: unknown) {
      // An error handler that fails has nowhere left to report to.
    }
  };

  const run = async function retentionSweep(): Promise<SweepResult> {
    // One pair of cutoffs per sweep, so that a sweep ends even while rows keep aging.
    const start = Math.trunc(now());
    const cutoff = start - retentionMs;
    const tombstoneCutoff = start - tombstoneRetentionMs;
    let operations = 0;
    let parkedCalls = 0;
    let tombstones = 0;
    let decisions = 0;
    let batches = 0;
    while (!stopped) {
      let expired: ExpireResult;
      try {
        expired = await store.expireBefore(cutoff, batchSize, tombstoneCutoff);
      } catch (e: unknown) {
        report(e);
        break;
      }
      batches += 1;
      operations += expired.operations.length;
      parkedCalls += expired.parkedCalls;
      tombstones += expired.tombstones;
      decisions += expired.decisions;
      if (expired.operations.length > 0 || expired.parkedCalls > 0 || expired.tombstones > 0) {
        try {
          onExpired?.(expired.operations, expired.parkedCalls, expired.tombstones);
        } catch (e: unknown) {
          report(e);
        }
      }
      if (
        expired.operations.length < batchSize &&
        expired.parkedCalls < batchSize &&
        expired.tombstones < batchSize &&
        expired.decisions < batchSize
      ) {
        break;
      }
      // Lets waiting I/O and calls run between two transactions.
      await yieldToEventLoop();
    }
    return { operations, parkedCalls, tombstones, decisions, batches };
  };

  const sweep = (): Promise<SweepResult> => {
    if (stopped) {
      return Promise.resolve({
        operations: 0,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 0,
      });
    }
    running ??= run()
      .catch((e: unknown): SweepResult => {
        // Only `now()` can throw here; the batches report their own failures.
        report(e);
        return { operations: 0, parkedCalls: 0, tombstones: 0, decisions: 0, batches: 0 };
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };

  const timer = setInterval(() => {
    void sweep();
  }, intervalMs);
  // Retention alone must not keep the sidecar alive.
  timer.unref();

  return {
    sweep,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
