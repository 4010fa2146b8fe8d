/**
 * @module Storage faults on the real database file, made so that CI's root
 * user cannot bypass them: a lock is another connection's open
 * `BEGIN IMMEDIATE`, a full disk is `maxSizeBytes` (`PRAGMA max_page_count`),
 * a read-only file is a file that an unprivileged child process (`runuser -u
 * nobody`) may not write. Each fault makes the store fail closed with a
 * stable reason, and the store recovers once the fault is gone, without a
 * restart.
 */

import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ToolCallContextSchema, ToolResultSchema } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import type { SqliteStore } from '../../src/store/sqlite.js';
import type { NewParkedCall } from '../../src/store/store.js';
import {
  assertFreshBuild,
  canRunAsNobody,
  NOBODY_GID,
  NOBODY_UID,
  useStoreChildren,
} from './child.js';
import { parkedCall, toolResult, useTempStore, webhookHook } from './helpers.js';

/** Busy timeout of the lock tests: long enough to be a real wait, short enough for a test. */
const LOCK_WAIT_MS = 25;
/** Size limit of the full-store tests. */
const MAX_SIZE_BYTES = 256 * 1024;
/** Upper bound on fill writes, so that a store that never fills fails the test instead of hanging. */
const MAX_FILL_WRITES = 10_000;

/** Sets or clears the immutable attribute of `file` (`chattr`), which stops root from writing it. */
function setImmutable(file: string, on: boolean): void {
  const result = spawnSync('chattr', [on ? '+i' : '-i', file], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`chattr failed: ${result.stderr || result.error}`);
}

/** True when this process can make a file immutable here (root with CAP_LINUX_IMMUTABLE, ext4/xfs/btrfs). */
function canMakeImmutable(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-chattr-'));
  const file = join(dir, 'probe');
  try {
    writeFileSync(file, '');
    setImmutable(file, true);
    setImmutable(file, false);
    return true;
  } catch (_e: unknown) {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A webhook hook carrying `bytes` of padding in its body. */
function paddedHook(id: string, bytes: number): Hook {
  const hook = webhookHook(id);
  if (hook.webhook === undefined) throw new Error('webhookHook() builds a webhook');
  hook.webhook.body = { padding: 'x'.repeat(bytes) };
  return hook;
}

/** A record whose context carries `bytes` of arguments. */
function bigParkedCall(toolCallId: string, bytes: number): NewParkedCall {
  const record = parkedCall(toolCallId, ['op-park']);
  record.context.args = { padding: 'y'.repeat(bytes) };
  return record;
}

/**
 * Writes hooks to `operationId`, ever smaller, until even a small write fails
 * with STORE_FULL; returns how many writes succeeded.
 */
async function fill(store: SqliteStore, operationId: string): Promise<number> {
  let written = 0;
  for (const bytes of [16_384, 2_048, 256, 16]) {
    for (;;) {
      if (written > MAX_FILL_WRITES) throw new Error('the store never filled up');
      const error = await store
        .appendHooks(operationId, undefined, [paddedHook(`fill-${written}`, bytes)])
        .then(
          () => undefined,
          (e: unknown) => e as { reason?: string },
        );
      if (error === undefined) {
        written += 1;
        continue;
      }
      expect(error.reason).toBe('STORE_FULL');
      break;
    }
  }
  return written;
}

/**
 * Gives each test of the calling block a folder owned by `nobody` (inside a
 * 0755 temporary folder, since mkdtemp makes 0700 ones that nobody could not
 * enter), removed afterwards.
 */
function useNobodyFolder(): { path(): string } {
  let root: string | undefined;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'agenthooks-ro-'));
    chmodSync(root, 0o755);
    mkdirSync(join(root, 'data'));
    chownSync(join(root, 'data'), NOBODY_UID, NOBODY_GID);
  });
  afterEach(() => {
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
    root = undefined;
  });
  return {
    path() {
      if (root === undefined) throw new Error('useNobodyFolder() is only available inside a test');
      return join(root, 'data', 'agenthooks.db');
    },
  };
}

/** Makes files immutable for a test; the flag is cleared afterwards, so the folder can be removed. */
function useImmutableFiles(): { set(file: string): void; clear(file: string): void } {
  const marked = new Set<string>();
  afterEach(() => {
    for (const file of marked) setImmutable(file, false);
    marked.clear();
  });
  return {
    set(file) {
      setImmutable(file, true);
      marked.add(file);
    },
    clear(file) {
      setImmutable(file, false);
      marked.delete(file);
    },
  };
}

describe('store faults', () => {
  const temp = useTempStore();

  describe('locked: another connection holds BEGIN IMMEDIATE', () => {
    it('fails ping, park, publish, completion and retention with STORE_LOCKED, serves reads, and works after the commit', async () => {
      const store = temp.open({ busyTimeoutMs: LOCK_WAIT_MS });
      await store.parkCall(parkedCall('call-1'));
      const other = temp.raw();
      other.exec('BEGIN IMMEDIATE');
      other.prepare("INSERT INTO users (id, email, updated_at) VALUES ('u1', NULL, 0)").run();
      const locked = { kind: 'unavailable', reason: 'STORE_LOCKED' };

      await expect(store.ping()).rejects.toMatchObject(locked);
      await expect(store.parkCall(parkedCall('call-2'))).rejects.toMatchObject(locked);
      await expect(store.publishResult('call-1', toolResult('r'), 2_000)).rejects.toMatchObject(
        locked,
      );
      await expect(store.markOperationCompleted('op-1', 2_000)).rejects.toMatchObject(locked);
      await expect(store.expireBefore(10_000, 10)).rejects.toMatchObject(locked);
      await expect(store.appendHooks('op-1', undefined, [webhookHook('a')])).rejects.toMatchObject(
        locked,
      );
      // WAL: readers are not blocked by the writer, and see the last commit.
      expect(await store.getParkedCall('call-1')).toMatchObject({ toolCallId: 'call-1' });
      expect((await store.getParkedCall('call-1'))?.finalResult).toBeUndefined();
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('active');

      other.exec('COMMIT');

      await expect(store.ping()).resolves.toBeUndefined();
      expect((await store.parkCall(parkedCall('call-2'))).created).toBe(true);
      expect(await store.publishResult('call-1', toolResult('r'), 2_000)).toMatchObject({
        published: true,
      });
      await store.markOperationCompleted('op-1', 2_000);
      expect((await store.operationState(['op-1'])).get('op-1')).toBe('completed');
    });

    it('answers a claim on a published call from a read while another connection holds the write lock', async () => {
      const store = temp.open({ busyTimeoutMs: LOCK_WAIT_MS });
      await store.parkCall(parkedCall('call-1'));
      await store.publishResult('call-1', toolResult('first'), 2_000);
      await store.parkCall(parkedCall('call-2'));
      const other = temp.raw();
      other.exec('BEGIN IMMEDIATE');

      // A duplicate of a published result needs no write: it gets the result.
      expect(await store.claimPublication('call-1', 'holder/1', 60_000)).toMatchObject({
        state: 'published',
        finalResult: { content: 'first' },
      });
      // Taking a free lease is a write, and waits for the lock like any other.
      await expect(store.claimPublication('call-2', 'holder/1', 60_000)).rejects.toMatchObject({
        reason: 'STORE_LOCKED',
      });
      other.exec('ROLLBACK');
    });

    it('passes the quick check while another connection holds the write lock: it takes no lock', async () => {
      const store = temp.open({ busyTimeoutMs: LOCK_WAIT_MS });
      const other = temp.raw();
      other.exec('BEGIN IMMEDIATE');

      await expect(store.quickCheck()).resolves.toBeUndefined();
      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_LOCKED' });
      other.exec('ROLLBACK');
    });

    it('leaves no trace of the probe: ping writes nothing', async () => {
      const store = temp.open();

      await store.ping();
      await store.ping();

      const raw = temp.raw();
      expect(raw.prepare('SELECT count(*) AS n FROM probe').get()).toEqual({ n: 0 });
      expect(raw.pragma('freelist_count', { simple: true })).toBe(0);
    });
  });

  describe('full: the file reached maxSizeBytes', () => {
    it('fails ping, park, publish and registration with STORE_FULL, and recovers once data is deleted', async () => {
      const store = temp.open({ maxSizeBytes: MAX_SIZE_BYTES });
      await store.parkCall(parkedCall('call-1'));
      expect(await fill(store, 'op-fill')).toBeGreaterThan(0);
      const full = { kind: 'unavailable', reason: 'STORE_FULL' };

      await expect(store.ping()).rejects.toMatchObject(full);
      await expect(store.parkCall(bigParkedCall('call-2', 8_192))).rejects.toMatchObject(full);
      await expect(
        store.publishResult('call-1', toolResult('z'.repeat(8_192)), 2_000),
      ).rejects.toMatchObject(full);
      await expect(
        store.appendHooks('op-2', undefined, [paddedHook('big', 8_192)]),
      ).rejects.toMatchObject(full);
      // Nothing of the failed writes is stored; reads still work.
      expect(await store.getParkedCall('call-2')).toBeUndefined();
      expect((await store.getParkedCall('call-1'))?.finalResult).toBeUndefined();

      // Deleting data puts pages on the free list; no VACUUM is needed.
      expect(await store.deleteHooks('op-fill')).toBeGreaterThan(0);
      expect(temp.raw().pragma('freelist_count', { simple: true })).toBeGreaterThan(0);

      await expect(store.ping()).resolves.toBeUndefined();
      expect((await store.parkCall(bigParkedCall('call-2', 8_192))).created).toBe(true);
      const published = await store.publishResult('call-1', toolResult('z'.repeat(8_192)), 2_000);
      expect(published.published).toBe(true);
      expect(await store.appendHooks('op-2', undefined, [paddedHook('big', 8_192)])).toBe(1);
    });

    it('remembers the failed write: the quick check reports STORE_FULL without a lock until a ping commits its probe', async () => {
      const store = temp.open({ maxSizeBytes: MAX_SIZE_BYTES, busyTimeoutMs: LOCK_WAIT_MS });
      await expect(store.quickCheck()).resolves.toBeUndefined();
      await fill(store, 'op-fill');
      const full = { kind: 'unavailable', reason: 'STORE_FULL' };

      // No transaction: the answer comes while another connection holds the write lock.
      const other = temp.raw();
      other.exec('BEGIN IMMEDIATE');
      await expect(store.quickCheck()).rejects.toMatchObject(full);
      other.exec('ROLLBACK');
      await expect(store.ping()).rejects.toMatchObject(full);

      // Space freed: the failure is still the last word until a probe commits.
      expect(await store.deleteHooks('op-fill')).toBeGreaterThan(0);
      await expect(store.quickCheck()).rejects.toMatchObject(full);
      await expect(store.ping()).resolves.toBeUndefined();
      await expect(store.quickCheck()).resolves.toBeUndefined();
      // The committed probe deleted its row again.
      expect(other.prepare('SELECT count(*) AS n FROM probe').get()).toEqual({ n: 0 });
    });

    it('limits only the connection that asked: another connection to the file may grow it', async () => {
      const store = temp.open({ maxSizeBytes: MAX_SIZE_BYTES });
      await fill(store, 'op-fill');
      const unlimited = temp.open();

      await expect(unlimited.ping()).resolves.toBeUndefined();
      expect(await unlimited.appendHooks('op-2', undefined, [paddedHook('big', 65_536)])).toBe(1);
      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_FULL' });
    });
  });

  describe('closed', () => {
    it('does not reopen after close', async () => {
      const store = temp.open();
      await store.close();

      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
      await expect(store.getParkedCall('call-1')).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
      await expect(store.expireBefore(1, 1)).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
    });
  });

  // Root writes any file whatever its mode, but not an immutable one
  // (`chattr +i`, where the file system and the capability allow it): SQLite
  // then opens the file read-only, in this process. Skipped where chattr
  // cannot set the flag; the `nobody` test below covers the same ground.
  describe.skipIf(!canMakeImmutable())('reopened by ping: a connection stuck read-only', () => {
    const immutable = useImmutableFiles();

    it('fails writes with STORE_READ_ONLY until ping reopens, never creates an empty file, and keeps maxSizeBytes', async () => {
      const first = temp.open();
      await first.appendHooks('op-1', undefined, [webhookHook('a')]);
      await first.parkCall(parkedCall('call-1'));
      await first.close();
      immutable.set(temp.path());

      const store = temp.open({ maxSizeBytes: MAX_SIZE_BYTES });
      const readOnly = { kind: 'unavailable', reason: 'STORE_READ_ONLY' };
      await expect(store.parkCall(parkedCall('call-2'))).rejects.toMatchObject(readOnly);
      await expect(store.ping()).rejects.toMatchObject(readOnly);
      expect(await store.getParkedCall('call-1')).toMatchObject({ toolCallId: 'call-1' });

      // The file is writable again: the stuck connection keeps failing writes
      // until ping reopens it. (A file that left its path while open is
      // lost-file.test.ts's.)
      immutable.clear(temp.path());
      await expect(store.parkCall(parkedCall('call-2'))).rejects.toMatchObject(readOnly);
      await expect(store.ping()).resolves.toBeUndefined();

      expect((await store.parkCall(parkedCall('call-2'))).created).toBe(true);
      expect((await store.publishResult('call-1', toolResult('r'), 2_000)).published).toBe(true);
      // maxSizeBytes holds on the reopened connection as well.
      expect(await fill(store, 'op-fill')).toBeGreaterThan(0);
      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_FULL' });
    });
  });

  // Root writes any file whatever its mode, so the read-only store runs in a
  // child process as `nobody`, on the built code. Skipped where the tests do
  // not run as root (there, `runuser` cannot switch users).
  describe.skipIf(!canRunAsNobody())(
    'read-only: the sidecar runs as nobody and may not write the file',
    () => {
      const children = useStoreChildren();
      const folder = useNobodyFolder();

      it('fails writes and ping with STORE_READ_ONLY, serves reads, and recovers through ping once the file is writable again', async () => {
        assertFreshBuild();
        const path = folder.path();
        const sidecar = await children.spawn({ user: 'nobody' });
        expect(sidecar.uid).toBe(NOBODY_UID);
        const record = (id: string) => {
          const r = parkedCall(id);
          return { ...r, context: toJson(ToolCallContextSchema, r.context) };
        };
        const result = (content: string) => toJson(ToolResultSchema, toolResult(content));

        // The sidecar creates and fills the database while it may write it.
        await sidecar.call('open', { path, options: { busyTimeoutMs: LOCK_WAIT_MS } });
        await sidecar.call('park', { record: record('call-1') });
        await sidecar.call('ping');
        await sidecar.call('close');

        // The file becomes root's, 0644: nobody may read it but not write it.
        // (A connection already open would keep its writable descriptor, so
        // the sidecar opens the file again, as after a restart.)
        chownSync(path, 0, 0);
        chmodSync(path, 0o644);
        await sidecar.call('open', { path, options: { busyTimeoutMs: LOCK_WAIT_MS } });

        const readOnly = { kind: 'unavailable', reason: 'STORE_READ_ONLY' };
        expect(await sidecar.failure('ping')).toMatchObject(readOnly);
        expect(await sidecar.failure('park', { record: record('call-2') })).toMatchObject(readOnly);
        expect(
          await sidecar.failure('publish', {
            toolCallId: 'call-1',
            result: result('r'),
            publishedAt: 2_000,
          }),
        ).toMatchObject(readOnly);
        expect(await sidecar.failure('complete', { operationId: 'op-1', at: 2_000 })).toMatchObject(
          readOnly,
        );
        // Reads still work, and report the stored state, not an empty one.
        expect(await sidecar.call('get', { toolCallId: 'call-1' })).toMatchObject({
          toolCallId: 'call-1',
        });
        expect(await sidecar.call('state', { operationIds: ['op-1'] })).toEqual({
          'op-1': 'active',
        });
        // Reopening while the file is still read-only fails the same way.
        expect(await sidecar.failure('ping')).toMatchObject(readOnly);

        // The operator gives the file back; writes keep failing until a ping
        // reopens the connection (only ping reopens), then succeed.
        chownSync(path, NOBODY_UID, NOBODY_GID);
        expect(await sidecar.failure('park', { record: record('call-2') })).toMatchObject(readOnly);
        await sidecar.call('ping');

        expect(await sidecar.call('park', { record: record('call-2') })).toMatchObject({
          created: true,
        });
        expect(
          await sidecar.call('publish', {
            toolCallId: 'call-1',
            result: result('r'),
            publishedAt: 2_000,
          }),
        ).toMatchObject({ published: true });
        await sidecar.call('complete', { operationId: 'op-1', at: 2_000 });
        expect(await sidecar.call('state', { operationIds: ['op-1'] })).toEqual({
          'op-1': 'completed',
        });
      });
    },
  );
});
