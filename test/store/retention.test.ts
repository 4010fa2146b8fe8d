/**
 * @module Retention: the operation lifecycle, `expireBefore` batches and the
 * `startRetention` sweeper, on real files in a temporary folder.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startRetention } from '../../src/store/retention.js';
import {
  DELETE_PUBLISHED_SQL,
  DELETE_TOMBSTONES_SQL,
  SELECT_EXPIRABLE_SQL,
} from '../../src/store/sqlite-connection.js';
import type { ExpireResult, RetentionStore } from '../../src/store/store.js';
import { parkedCall, toolResult, useTempStore, webhookHook } from './helpers.js';

/** Cutoff of the single-batch tests: rows stamped before it are old. */
const CUTOFF = 10_000;
/** An instant before {@link CUTOFF}. */
const OLD = 1_000;
/**
 * Tables that hold something of an operation; a deleted tombstone leaves a
 * row in none of them.
 */
const OPERATION_TABLES = ['operations', 'hooks', 'parked_calls', 'parked_call_operations'];

/** Rows of each of {@link OPERATION_TABLES}, read on a raw connection. */
function rowCounts(raw: Database.Database): Record<string, number> {
  return Object.fromEntries(
    OPERATION_TABLES.map((table) => [
      table,
      (raw.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n,
    ]),
  );
}

/** Time (epoch ms) at which retention turned `operationId` into a tombstone, read back raw. */
function expiredAt(raw: Database.Database, operationId: string): number {
  const row = raw.prepare('SELECT expired_at FROM operations WHERE id = ?').get(operationId) as
    | { expired_at: number | null }
    | undefined;
  if (typeof row?.expired_at !== 'number') throw new Error(`${operationId} is not a tombstone`);
  return row.expired_at;
}

describe('operation lifecycle and retention (SQLite)', () => {
  const temp = useTempStore();

  describe('markOperationCompleted and operationState', () => {
    it('creates a completed row for an unknown operation, keeps parents, and moves completed_at forward', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', 'parent-1', [webhookHook('a')]);

      await store.markOperationCompleted('op-1', 5_000);
      await store.markOperationCompleted('op-1', 4_000);
      await store.markOperationCompleted('op-2', 3_000);
      await store.markOperationCompleted('op-2', 6_000);

      expect(
        temp
          .raw()
          .prepare('SELECT id, parent_id, status, completed_at FROM operations ORDER BY id')
          .all(),
      ).toEqual([
        { id: 'op-1', parent_id: 'parent-1', status: 'completed', completed_at: 5_000 },
        { id: 'op-2', parent_id: null, status: 'completed', completed_at: 6_000 },
      ]);
      expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
    });

    it('rejects a completion time that is not an integer', async () => {
      const store = temp.open();

      await expect(store.markOperationCompleted('op-1', Number.NaN)).rejects.toThrow(RangeError);
    });
  });

  describe('expireBefore', () => {
    it('turns a completed operation older than the cutoff into a tombstone without hooks', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', 'parent-1', [webhookHook('a'), webhookHook('b')]);
      await store.appendHooks('op-2', undefined, [webhookHook('c')]);
      await store.markOperationCompleted('op-1', OLD);

      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: ['op-1'],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });

      const raw = temp.raw();
      expect(raw.prepare('SELECT operation_id, hook_id FROM hooks').all()).toEqual([
        { operation_id: 'op-2', hook_id: 'c' },
      ]);
      expect(
        raw
          .prepare("SELECT id, parent_id, status, completed_at FROM operations WHERE id = 'op-1'")
          .get(),
      ).toEqual({ id: 'op-1', parent_id: 'parent-1', status: 'expired', completed_at: OLD });
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('expired');
      // Nothing left to do: a second batch finds nothing.
      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: [],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });
    });

    it('fails closed on a tombstone: listing, registering and parking reject with OPERATION_EXPIRED', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      await store.markOperationCompleted('op-1', OLD);
      await store.expireBefore(CUTOFF, 10);
      const expired = {
        kind: 'failed_precondition',
        reason: 'OPERATION_EXPIRED',
        metadata: { operationId: 'op-1' },
      };

      await expect(store.listHooks('op-1')).rejects.toMatchObject(expired);
      await expect(store.appendHooks('op-1', undefined, [webhookHook('b')])).rejects.toMatchObject(
        expired,
      );
      await expect(store.parkCall(parkedCall('call-1', ['op-0', 'op-1']))).rejects.toMatchObject(
        expired,
      );
      await store.markOperationCompleted('op-1', CUTOFF + 5);

      const raw = temp.raw();
      expect(raw.prepare('SELECT count(*) AS n FROM hooks').get()).toEqual({ n: 0 });
      expect(raw.prepare('SELECT count(*) AS n FROM parked_calls').get()).toEqual({ n: 0 });
      // The failed park created none of its operations.
      expect(raw.prepare("SELECT count(*) AS n FROM operations WHERE id = 'op-0'").get()).toEqual({
        n: 0,
      });
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('expired');
    });

    it('keeps active operations and operations completed at or after the cutoff', async () => {
      const store = temp.open();
      await store.appendHooks('active', undefined, [webhookHook('a')]);
      await store.markOperationCompleted('at-cutoff', CUTOFF);
      await store.markOperationCompleted('recent', CUTOFF + 1);

      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: [],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });
    });

    it('does not expire an operation while a parked call on its chain still waits', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      await store.appendHooks('op-2', undefined, [webhookHook('b')]);
      await store.parkCall(parkedCall('call-1', ['op-1', 'op-2']));
      await store.markOperationCompleted('op-1', OLD);
      await store.markOperationCompleted('op-2', OLD);
      await store.markOperationCompleted('op-3', OLD);

      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: ['op-3'],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });
      expect((await store.listHooks('op-2')).hooks.map((h) => h.id)).toEqual(['b']);

      // Published after the cutoff: the chain is free, the record is kept.
      await store.publishResult('call-1', toolResult('done'), CUTOFF + 1);
      const { operations, parkedCalls } = await store.expireBefore(CUTOFF, 10);
      expect(operations.sort()).toEqual(['op-1', 'op-2']);
      expect(parkedCalls).toBe(0);
      expect(await store.getParkedCall('call-1')).toMatchObject({ publishedAt: CUTOFF + 1 });
    });

    it('deletes parked calls published before the cutoff, with their links, and keeps waiting ones', async () => {
      const store = temp.open();
      await store.parkCall(parkedCall('old-published', ['op-1']));
      await store.parkCall(parkedCall('new-published', ['op-1']));
      await store.parkCall(parkedCall('waiting', ['op-2'], OLD));
      await store.publishResult('old-published', toolResult('a'), OLD);
      await store.publishResult('new-published', toolResult('b'), CUTOFF);

      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: [],
        parkedCalls: 1,
        tombstones: 0,
        decisions: 0,
      });

      expect(await store.getParkedCall('old-published')).toBeUndefined();
      expect(await store.getParkedCall('new-published')).toBeDefined();
      expect(await store.getParkedCall('waiting')).toBeDefined();
      expect(
        temp.raw().prepare('SELECT tool_call_id FROM parked_call_operations ORDER BY 1').all(),
      ).toEqual([{ tool_call_id: 'new-published' }, { tool_call_id: 'waiting' }]);
    });

    it('removes at most batchSize rows of each kind per call, oldest first', async () => {
      const store = temp.open();
      for (let i = 0; i < 5; i += 1) {
        await store.markOperationCompleted(`op-${i}`, OLD + 10 * (5 - i));
        await store.parkCall(parkedCall(`call-${i}`, [`op-call-${i}`]));
        await store.publishResult(`call-${i}`, toolResult(`r${i}`), OLD + i);
      }

      const batches: ExpireResult[] = [];
      for (let i = 0; i < 4; i += 1) batches.push(await store.expireBefore(CUTOFF, 2));

      expect(batches).toEqual([
        { operations: ['op-4', 'op-3'], parkedCalls: 2, tombstones: 0, decisions: 0 },
        { operations: ['op-2', 'op-1'], parkedCalls: 2, tombstones: 0, decisions: 0 },
        { operations: ['op-0'], parkedCalls: 1, tombstones: 0, decisions: 0 },
        { operations: [], parkedCalls: 0, tombstones: 0, decisions: 0 },
      ]);
      expect(await store.getParkedCall('call-0')).toBeUndefined();
    });

    it('stamps each tombstone with the time it expired, and keeps tombstones without a tombstone cutoff', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      await store.markOperationCompleted('op-1', OLD);
      const before = Date.now();

      await store.expireBefore(CUTOFF, 10);
      const after = Date.now();

      const raw = temp.raw();
      const at = expiredAt(raw, 'op-1');
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(after);
      expect(await store.expireBefore(CUTOFF, 10)).toEqual({
        operations: [],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('expired');
    });

    it('deletes a tombstone that expired before the tombstone cutoff, leaving nothing of the operation', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', 'parent-1', [webhookHook('a'), webhookHook('b')]);
      await store.appendHooks('op-2', undefined, [webhookHook('c')]);
      await store.markOperationCompleted('op-1', OLD);
      await store.expireBefore(CUTOFF, 10);
      const raw = temp.raw();
      const at = expiredAt(raw, 'op-1');

      // A tombstone stamped at the cutoff is not older than it.
      expect(await store.expireBefore(CUTOFF, 10, at)).toMatchObject({
        tombstones: 0,
        decisions: 0,
      });
      expect(await store.expireBefore(CUTOFF, 10, at + 1)).toEqual({
        operations: [],
        parkedCalls: 0,
        tombstones: 1,
        decisions: 0,
      });

      expect(raw.prepare("SELECT count(*) AS n FROM operations WHERE id = 'op-1'").get()).toEqual({
        n: 0,
      });
      expect(
        raw.prepare("SELECT count(*) AS n FROM hooks WHERE operation_id = 'op-1'").get(),
      ).toEqual({ n: 0 });
      // The operation is unknown now: no OPERATION_EXPIRED, no hooks, reported as unknown.
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('unknown');
      expect(await store.listHooks('op-1')).toEqual({ hooks: [], known: false });
      // Operations that were not tombstones are untouched.
      expect((await store.listHooks('op-2')).hooks.map((h) => h.id)).toEqual(['c']);
    });

    it('keeps a tombstone while a published parked call names it, then deletes both in one batch', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      await store.appendHooks('op-2', undefined, [webhookHook('b')]);
      // call-1 belongs to op-1, and op-2 continues it: both are linked to the call.
      await store.parkCall(parkedCall('call-1', ['op-1', 'op-2']));
      await store.markOperationCompleted('op-1', OLD);
      await store.markOperationCompleted('op-2', OLD);
      await store.publishResult('call-1', toolResult('done'), CUTOFF + 1);
      const expired = await store.expireBefore(CUTOFF, 10);
      expect(expired.operations.sort()).toEqual(['op-1', 'op-2']);
      const raw = temp.raw();
      const tombstoneCutoff = Math.max(expiredAt(raw, 'op-1'), expiredAt(raw, 'op-2')) + 1;

      // The published call is younger than the cutoff: its record, and the tombstones it names, stay.
      expect(await store.expireBefore(CUTOFF, 10, tombstoneCutoff)).toEqual({
        operations: [],
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
      });
      expect(await store.getParkedCall('call-1')).toMatchObject({ publishedAt: CUTOFF + 1 });

      // Once the call goes, so do both tombstones, in the same transaction.
      expect(await store.expireBefore(CUTOFF + 2, 10, tombstoneCutoff)).toEqual({
        operations: [],
        parkedCalls: 1,
        tombstones: 2,
        decisions: 0,
      });
      expect(rowCounts(raw)).toEqual({
        operations: 0,
        hooks: 0,
        parked_calls: 0,
        parked_call_operations: 0,
      });
    });

    it('removes at most batchSize tombstones per call, oldest first', async () => {
      const store = temp.open();
      const raw = temp.raw();
      const insert = raw.prepare(
        "INSERT INTO operations (id, created_at, updated_at, status, completed_at, expired_at) VALUES (?, 0, 0, 'expired', 0, ?)",
      );
      for (let i = 0; i < 5; i += 1) insert.run(`op-${i}`, OLD + 10 * (5 - i));

      const batches: ExpireResult[] = [];
      const left: string[][] = [];
      for (let i = 0; i < 4; i += 1) {
        batches.push(await store.expireBefore(CUTOFF, 2, CUTOFF));
        left.push(
          (raw.prepare('SELECT id FROM operations ORDER BY id').all() as { id: string }[]).map(
            (row) => row.id,
          ),
        );
      }

      expect(batches.map((b) => b.tombstones)).toEqual([2, 2, 1, 0]);
      expect(left).toEqual([['op-0', 'op-1', 'op-2'], ['op-0'], [], []]);
    });

    it('finds its rows through the partial indexes, without scanning a table', () => {
      temp.open();
      const raw = temp.raw();
      const plan = (sql: string): string =>
        (
          raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ cutoff: 1, limit: 1 }) as {
            detail: string;
          }[]
        )
          .map((row) => row.detail)
          .join('\n');

      const expirable = plan(SELECT_EXPIRABLE_SQL);
      const published = plan(DELETE_PUBLISHED_SQL);
      const tombstones = plan(DELETE_TOMBSTONES_SQL);

      expect(expirable).toContain('USING INDEX operations_completed_at (completed_at<?)');
      expect(expirable).toContain('USING PRIMARY KEY (operation_id=?)');
      expect(published).toMatch(/USING INDEX parked_calls_published_at \(.*published_at<\?\)/);
      expect(tombstones).toContain('SEARCH o USING INDEX operations_expired_at (expired_at<?)');
      expect(tombstones).toContain('SEARCH l USING PRIMARY KEY (operation_id=?)');
      // The plan lists the foreign-key checks of the delete too: parked_calls
      // is searched through its operation_id index, not scanned per tombstone.
      expect(tombstones).toContain(
        'SEARCH parked_calls USING COVERING INDEX parked_calls_operation_id (operation_id=?)',
      );
      expect(`${expirable}\n${published}\n${tombstones}`).not.toMatch(
        /^SCAN (o|l|p|operations|hooks|parked_calls|parked_call_operations)\b/m,
      );
    });

    it('rejects a batch size that is not a positive integer, and a tombstone cutoff that is not an integer', async () => {
      const store = temp.open();

      await expect(store.expireBefore(CUTOFF, 0)).rejects.toThrow(RangeError);
      await expect(store.expireBefore(CUTOFF, 2.5)).rejects.toThrow(RangeError);
      await expect(store.expireBefore(CUTOFF, 1, 1.5)).rejects.toThrow(RangeError);
    });
  });

  describe('startRetention', () => {
    /** Operations of the drain test, and the batch size it drains them with. */
    const BACKLOG = 2_500;
    const BATCH = 100;

    it(`drains ${BACKLOG} expired operations in batches of ${BATCH} on its interval, yielding between batches`, async () => {
      const store = temp.open();
      const raw = temp.raw();
      const insert = raw.prepare(
        "INSERT INTO operations (id, created_at, updated_at, status, completed_at) VALUES (?, 0, 0, 'completed', ?)",
      );
      raw.transaction(() => {
        for (let i = 0; i < BACKLOG; i += 1) insert.run(`op-${i}`, OLD + i);
      })();
      for (let i = 0; i < 3; i += 1) {
        await store.parkCall(parkedCall(`call-${i}`, [`op-call-${i}`]));
        await store.publishResult(`call-${i}`, toolResult('r'), OLD);
      }
      // Counts event-loop turns, to show that other work runs between batches.
      let turns = 0;
      let ticking = true;
      const tick = (): void => {
        turns += 1;
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      const batches: Array<{ size: number; turns: number }> = [];
      const expired = new Set<string>();
      let parked = 0;
      const drained = new Promise<void>((resolve) => {
        const retention = startRetention({
          store,
          retentionMs: 1_000,
          intervalMs: 1,
          batchSize: BATCH,
          now: () => CUTOFF + 1_000,
          onExpired: (operations, parkedCalls) => {
            batches.push({ size: operations.length, turns });
            for (const id of operations) expired.add(id);
            parked += parkedCalls;
            if (expired.size === BACKLOG) void retention.stop().then(resolve);
          },
        });
      });

      await drained;
      ticking = false;

      expect(expired.size).toBe(BACKLOG);
      expect(parked).toBe(3);
      expect(batches).toHaveLength(BACKLOG / BATCH);
      expect(batches.every((b) => b.size === BATCH)).toBe(true);
      for (let i = 1; i < batches.length; i += 1) {
        expect(batches[i]?.turns).toBeGreaterThan(
          batches[i - 1]?.turns ?? Number.POSITIVE_INFINITY,
        );
      }
      expect(
        raw.prepare("SELECT count(*) AS n FROM operations WHERE status = 'expired'").get(),
      ).toEqual({ n: BACKLOG });
    });

    it('sweeps on demand until a batch comes back short, joining a sweep in progress', async () => {
      const store = temp.open();
      for (let i = 0; i < 5; i += 1) await store.markOperationCompleted(`op-${i}`, OLD);
      const retention = startRetention({ store, batchSize: 2, now: () => CUTOFF, retentionMs: 0 });

      const [first, joined] = await Promise.all([retention.sweep(), retention.sweep()]);

      expect(first).toEqual({
        operations: 5,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 3,
      });
      expect(joined).toBe(first);
      expect(await retention.sweep()).toEqual({
        operations: 0,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 1,
      });
      await retention.stop();
      await retention.stop();
      expect(await retention.sweep()).toEqual({
        operations: 0,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 0,
      });
    });

    it('deletes tombstones once tombstoneRetentionMs has passed since they expired, batch after batch', async () => {
      const store = temp.open();
      for (let i = 0; i < 5; i += 1) await store.markOperationCompleted(`op-${i}`, OLD);
      const tombstoneRetentionMs = 60_000;
      let clock = CUTOFF;
      const removed: number[] = [];
      const retention = startRetention({
        store,
        batchSize: 2,
        retentionMs: 0,
        tombstoneRetentionMs,
        now: () => clock,
        onExpired: (_operations, _parkedCalls, tombstones) => removed.push(tombstones),
      });
      expect(await retention.sweep()).toEqual({
        operations: 5,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 3,
      });
      // The store stamps tombstones with the wall clock; pin the stamps to
      // one millisecond apart, so that the sweep's own clock can be set around them.
      const raw = temp.raw();
      const stamp = raw.prepare('UPDATE operations SET expired_at = ? WHERE id = ?');
      for (let i = 0; i < 5; i += 1) stamp.run(CUTOFF + i, `op-${i}`);
      const ids = (): string[] =>
        (raw.prepare('SELECT id FROM operations ORDER BY id').all() as { id: string }[]).map(
          (row) => row.id,
        );

      clock = CUTOFF + 2 + tombstoneRetentionMs;
      const first = await retention.sweep();
      const leftAfterFirst = ids();
      clock = CUTOFF + 5 + tombstoneRetentionMs;
      const second = await retention.sweep();
      await retention.stop();

      expect(first).toEqual({
        operations: 0,
        parkedCalls: 0,
        tombstones: 2,
        decisions: 0,
        batches: 2,
      });
      expect(leftAfterFirst).toEqual(['op-2', 'op-3', 'op-4']);
      expect(second).toEqual({
        operations: 0,
        parkedCalls: 0,
        tombstones: 3,
        decisions: 0,
        batches: 2,
      });
      expect(ids()).toEqual([]);
      // One call per batch that removed something: three of operations, then three of tombstones.
      expect(removed).toEqual([0, 0, 0, 2, 2, 1]);
    });

    it('stops a sweep after its current batch', async () => {
      const store = temp.open();
      for (let i = 0; i < 10; i += 1) await store.markOperationCompleted(`op-${i}`, OLD);
      let stopping: Promise<void> | undefined;
      const retention = startRetention({
        store,
        batchSize: 2,
        now: () => CUTOFF,
        retentionMs: 0,
        onExpired: () => {
          stopping ??= retention.stop();
        },
      });

      const result = await retention.sweep();
      await stopping;

      expect(result).toEqual({
        operations: 2,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 1,
      });
    });

    it('reports a failing batch to onError and ends the sweep without rejecting', async () => {
      const failure = new Error('store is locked');
      const calls: Array<[number, number | undefined]> = [];
      const store: RetentionStore = {
        async expireBefore(cutoff, _batchSize, tombstoneCutoff) {
          calls.push([cutoff, tombstoneCutoff]);
          if (calls.length === 2) throw failure;
          return { operations: ['a', 'b'], parkedCalls: 0, tombstones: 0, decisions: 0 };
        },
      };
      const errors: unknown[] = [];
      const retention = startRetention({
        store,
        batchSize: 2,
        retentionMs: 500,
        tombstoneRetentionMs: 700,
        now: () => 2_000,
        onError: (e) => errors.push(e),
        onExpired: () => {
          throw new Error('cache drop failed');
        },
      });

      const result = await retention.sweep();
      await retention.stop();

      expect(result).toEqual({
        operations: 2,
        parkedCalls: 0,
        tombstones: 0,
        decisions: 0,
        batches: 1,
      });
      // Both cutoffs are taken once, at the start of the sweep.
      expect(calls).toEqual([
        [1_500, 1_300],
        [1_500, 1_300],
      ]);
      expect(errors).toEqual([new Error('cache drop failed'), failure]);
    });

    it('keeps the process free to exit and rejects out-of-range options', async () => {
      const store: RetentionStore = {
        expireBefore: async () => ({ operations: [], parkedCalls: 0, tombstones: 0, decisions: 0 }),
      };

      expect(() => startRetention({ store, retentionMs: -1 })).toThrow(RangeError);
      expect(() => startRetention({ store, tombstoneRetentionMs: -1 })).toThrow(RangeError);
      expect(() => startRetention({ store, tombstoneRetentionMs: 0.5 })).toThrow(RangeError);
      expect(() => startRetention({ store, intervalMs: 0 })).toThrow(RangeError);
      expect(() => startRetention({ store, batchSize: 1.5 })).toThrow(RangeError);
      const timers = (): number =>
        process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length;
      const before = timers();

      const retention = startRetention({ store });

      // An unref'd timer does not keep the event loop alive, so it is not listed.
      expect(timers()).toBe(before);
      await yieldToEventLoop();
      await retention.stop();
    });
  });
});
