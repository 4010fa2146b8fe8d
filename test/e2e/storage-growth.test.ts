/**
 * @module Storage that stops growing at a steady load: the built sidecar, with
 * retentions of a second or less, takes identical waves of typical operations
 * (five hooks, three decisions, completion: `bench/lib/typical-operation.ts`,
 * the load the README's bytes per operation were measured with). After each
 * wave, retention expires every operation and then removes its tombstone.
 * The database file, checkpointed, reaches a plateau in the first wave and
 * stays on it, because SQLite reuses the pages the deleted rows freed.
 *
 * Each wave stores all of its operations before completing any, so that
 * every wave's peak is the same rows whatever the machine's speed: a later
 * wave that needs more pages than the first can only be holding rows that
 * should be gone (tombstones, hooks, links).
 */
import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, waitForReady } from '../../bench/lib/grpc-codec.js';
import { typicalOperation } from '../../bench/lib/typical-operation.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** Waves of operations: the first reaches the plateau, the others must stay on it. */
const WAVES = 5;
/** Operations per wave, all stored at once at the wave's peak. */
const OPERATIONS_PER_WAVE = 60;
/** Hooks each typical operation registers. */
const HOOKS_PER_OPERATION = 5;
/** Calls in flight while a wave runs a phase. */
const CONCURRENCY = 8;
/**
 * `--retention`: completed operations become tombstones half a second after
 * completion. Shorter than a wave on purpose: nothing expires before it is
 * completed, so a wave's peak does not depend on it.
 */
const RETENTION = '500ms';
/** `--tombstone-retention`: tombstones go a quarter second later (the sweep runs every 100 ms). */
const TOMBSTONE_RETENTION = '250ms';
/** How long retention may take to empty the store after a wave's last completion. */
const DRAIN_TIMEOUT_MS = 5_000;
/** How long the sidecar's log may take to arrive, and the checkpoint to find the log unused. */
const SETTLE_TIMEOUT_MS = 2_000;
/** How often the store and the log are read while waiting. */
const POLL_MS = 25;
/** `busy_timeout` of the test's own connection, which checkpoints between waves. */
const BUSY_TIMEOUT_MS = 1_000;
/** Pages a later wave may add over the plateau: room for free-list bookkeeping, not for rows. */
const MARGIN_PAGES = 2;
/** Tables that hold something of an operation. */
const OPERATION_TABLES = ['operations', 'hooks', 'parked_calls', 'parked_call_operations'];

/** Rows of each of {@link OPERATION_TABLES}. */
function rowCounts(db: Database.Database): Record<string, number> {
  return Object.fromEntries(
    OPERATION_TABLES.map((table) => [
      table,
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n,
    ]),
  );
}

/** Polls `condition` every {@link POLL_MS} until it holds; fails after `timeoutMs`. */
async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Calls `fn` for every item, {@link CONCURRENCY} at a time; rejects with the first failure. */
async function runAll<T>(items: readonly T[], fn: (item: T, i: number) => Promise<void>) {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next;
      next += 1;
      await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** Sum of `key` over the sidecar's log lines whose message is `msg`. */
function logTotal(sidecar: SidecarProcess, msg: string, key: string): number {
  return sidecar.logs
    .filter((line) => line.msg === msg)
    .reduce((sum, line) => sum + Number(line[key] ?? 0), 0);
}

describe('storage at a steady load', () => {
  let receiver: Receiver | undefined;
  let sidecar: SidecarProcess | undefined;
  let db: Database.Database | undefined;

  afterEach(async () => {
    db?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it(`keeps the checkpointed database file on its first-wave plateau through ${WAVES} waves of ${OPERATIONS_PER_WAVE} operations`, async () => {
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } }, record: false });
    const running = await startSidecar({
      http: false,
      args: ['--retention', RETENTION, '--tombstone-retention', TOMBSTONE_RETENTION],
    });
    sidecar = running;
    const client = createClient(running.grpc);
    const raw = new Database(running.db, { fileMustExist: true });
    db = raw;
    raw.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const pageSize = raw.pragma('page_size', { simple: true }) as number;
    /** Copies the whole log into the file and empties it; answers the bytes of both files. */
    const checkpointedSize = async (): Promise<number> => {
      await waitFor(
        () => (raw.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[])[0]?.busy === 0,
        SETTLE_TIMEOUT_MS,
        'a checkpoint of the whole log',
      );
      return statSync(running.db).size + statSync(`${running.db}-wal`).size;
    };

    try {
      await waitForReady(client, SETTLE_TIMEOUT_MS);
      const operation = typicalOperation(client, receiver.url);
      const initial = await checkpointedSize();
      const sizes: number[] = [];
      const peaks: Record<string, number>[] = [];
      const configBytes: number[] = [];
      for (let wave = 0; wave < WAVES; wave += 1) {
        const ids = Array.from(
          { length: OPERATIONS_PER_WAVE },
          (_, i) => `op_w${wave}_${String(i).padStart(4, '0')}`,
        );
        await runAll(ids, (id) => operation.register(id));
        await runAll(ids, (id, i) => operation.decide(id, wave * OPERATIONS_PER_WAVE + i));
        // Nothing expires before completion: this is the wave's peak.
        peaks.push(rowCounts(raw));
        configBytes.push(
          (
            raw.prepare('SELECT sum(length(CAST(config AS BLOB))) AS n FROM hooks').get() as {
              n: number;
            }
          ).n,
        );
        await runAll(ids, (id) => operation.complete(id));
        await waitFor(
          () => rowCounts(raw).operations === 0,
          DRAIN_TIMEOUT_MS,
          `wave ${wave}: retention emptying the store`,
        );
        sizes.push(await checkpointedSize());
      }

      const [plateau = 0, ...later] = sizes;
      expect(peaks).toEqual(
        Array.from({ length: WAVES }, () => ({
          operations: OPERATIONS_PER_WAVE,
          hooks: OPERATIONS_PER_WAVE * HOOKS_PER_OPERATION,
          parked_calls: 0,
          parked_call_operations: 0,
        })),
      );
      // The plateau holds a wave's hooks: at least their configuration's bytes.
      expect(plateau - initial).toBeGreaterThan(Math.max(...configBytes));
      expect(
        Math.max(...later),
        `checkpointed bytes after each wave: ${sizes.join(', ')} (before: ${initial})`,
      ).toBeLessThanOrEqual(plateau + MARGIN_PAGES * pageSize);
      // Every operation went through a tombstone, and every tombstone went.
      const total = WAVES * OPERATIONS_PER_WAVE;
      await waitFor(
        () =>
          logTotal(running, 'operations expired', 'operations') >= total &&
          logTotal(running, 'tombstones removed', 'tombstones') >= total,
        SETTLE_TIMEOUT_MS,
        'the retention log lines',
      );
      expect(logTotal(running, 'operations expired', 'operations')).toBe(total);
      expect(logTotal(running, 'tombstones removed', 'tombstones')).toBe(total);
      expect(rowCounts(raw)).toEqual({
        operations: 0,
        hooks: 0,
        parked_calls: 0,
        parked_call_operations: 0,
      });
    } finally {
      client.close();
    }
  }, 90_000);
});
