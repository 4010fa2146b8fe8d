/**
 * @module What health reports for the store of the real sidecar process when
 * its database file is removed or replaced while it runs, and when writes
 * fail at the disk: NOT_SERVING (`/healthz` 503) within a few check
 * intervals, calls that fail closed with a stable reason and are never
 * acknowledged, and SERVING again once the condition clears, with the data
 * written before.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, readFileSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  type AnyClient,
  errorInfoOf,
  healthClient,
  hookClient,
  type LoaderObject,
  unary,
} from '../support/grpc-client.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** Seconds between store checks in these tests. */
const CHECK_INTERVAL_S = 0.2;
/** How long health may take to follow the store: many check intervals, for a loaded CI machine. */
const HEALTH_DEADLINE_MS = 10_000;
/** How often health is polled. */
const POLL_MS = 50;

/** Sets the soft limit of the size of any file `pid` writes (RLIMIT_FSIZE), in bytes or `unlimited`. */
function limitFileSize(pid: number, bytes: number | 'unlimited'): void {
  const result = spawnSync('prlimit', ['--pid', String(pid), `--fsize=${bytes}:`], {
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`prlimit failed: ${result.stderr || result.error}`);
}

async function healthz(sidecar: SidecarProcess): Promise<number> {
  return (await fetch(`http://${sidecar.http}/healthz`)).status;
}

/** Polls `/healthz` until it answers `status`; fails after {@link HEALTH_DEADLINE_MS}. */
async function waitForHealthz(sidecar: SidecarProcess, status: 200 | 503): Promise<void> {
  const deadline = Date.now() + HEALTH_DEADLINE_MS;
  let last = await healthz(sidecar);
  while (last !== status) {
    if (Date.now() > deadline) {
      throw new Error(`/healthz answered ${last}, not ${status}, for ${HEALTH_DEADLINE_MS} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    last = await healthz(sidecar);
  }
}

/** Resolves as `promise` does; fails after {@link HEALTH_DEADLINE_MS}. */
async function withDeadline<T>(promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), HEALTH_DEADLINE_MS);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The gRPC health status of the server (''), as a name. */
async function grpcHealth(sidecar: SidecarProcess): Promise<string> {
  const client = healthClient(sidecar.grpc);
  try {
    return (await unary<{ status: string }>(client, 'Check', { service: '' })).status;
  } finally {
    client.close();
  }
}

function register(client: AnyClient, operationId: string, ids: readonly string[]) {
  return unary<LoaderObject>(client, 'RegisterHooks', {
    operationId,
    hooks: ids.map((id) => ({ id, type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: `/${id}` } })),
  });
}

async function failure(call: Promise<unknown>): Promise<grpc.ServiceError> {
  return call.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e as grpc.ServiceError,
  );
}

async function listed(client: AnyClient, operationId: string): Promise<string[]> {
  const res = await unary<LoaderObject>(client, 'ListHooks', { operationId });
  return ((res.hooks ?? []) as { id: string }[]).map((h) => h.id);
}

describe('store health of the sidecar process', () => {
  it('turns NOT_SERVING when the database file is removed, acknowledges nothing, creates no file, and recovers when it is linked back', async () => {
    const sidecar = await startSidecar({
      args: ['--store-check-interval', String(CHECK_INTERVAL_S)],
    });
    const client = hookClient(sidecar.grpc);
    const kept = join(dirname(sidecar.db), 'kept.db');
    try {
      await register(client, 'op-kept', ['a', 'b']);
      // Read once, so that the hook cache holds the operation when the file goes.
      expect(await listed(client, 'op-kept')).toEqual(['a', 'b']);
      expect(await healthz(sidecar)).toBe(200);
      linkSync(sidecar.db, kept);
      unlinkSync(sidecar.db);

      await waitForHealthz(sidecar, 503);
      expect(await grpcHealth(sidecar)).toBe('NOT_SERVING');
      const err = await failure(register(client, 'op-lost', ['x']));
      expect(err.code).toBe(14);
      expect(errorInfoOf(err)?.reason).toBe('STORE_FILE_MISSING');
      // Reads fail closed as well, cached ones included: nothing is answered
      // from a file that is gone.
      const read = await failure(listed(client, 'op-kept'));
      expect(errorInfoOf(read)?.reason).toBe('STORE_FILE_MISSING');
      // For ten check intervals, the recovery checks create nothing at the path.
      for (let i = 0; i < 10; i++) {
        expect(existsSync(sidecar.db)).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, CHECK_INTERVAL_S * 1000));
      }
      expect(await healthz(sidecar)).toBe(503);

      linkSync(kept, sidecar.db);
      await waitForHealthz(sidecar, 200);
      expect(await grpcHealth(sidecar)).toBe('SERVING');
      expect(await listed(client, 'op-kept')).toEqual(['a', 'b']);
      // The refused registration was never stored.
      expect(await listed(client, 'op-lost')).toEqual([]);
      expect((await register(client, 'op-kept', ['c'])).hookCount).toBe(3);
    } finally {
      client.close();
      // A kill, not killSidecar: the restart below needs the database folder.
      sidecar.kill('SIGKILL');
      await sidecar.exited;
    }
    // After a restart, everything acknowledged is in the file.
    const restarted = await startSidecar({ db: sidecar.db });
    const again = hookClient(restarted.grpc);
    try {
      expect(await listed(again, 'op-kept')).toEqual(['a', 'b', 'c']);
    } finally {
      again.close();
      await killSidecar(restarted);
    }
  });

  it('turns NOT_SERVING when another database replaces the file, leaves that file untouched, and recovers when the original is back', async () => {
    const sidecar = await startSidecar({
      args: ['--store-check-interval', String(CHECK_INTERVAL_S)],
    });
    const client = hookClient(sidecar.grpc);
    const dir = dirname(sidecar.db);
    const kept = join(dir, 'kept.db');
    const foreign = join(dir, 'foreign.db');
    try {
      await register(client, 'op-kept', ['a']);
      linkSync(sidecar.db, kept);
      const other = new Database(foreign);
      other.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')");
      other.close();
      const before = readFileSync(foreign);
      renameSync(foreign, sidecar.db);

      await waitForHealthz(sidecar, 503);
      const err = await failure(register(client, 'op-kept', ['x']));
      expect(err.code).toBe(14);
      expect(errorInfoOf(err)?.reason).toBe('STORE_FILE_REPLACED');
      // Recovery checks run on every interval while unhealthy; wait for a few of them.
      const logged = await withDeadline(
        sidecar.waitForLog((l) => l.msg === 'store still cannot be written'),
      );
      expect(JSON.stringify(logged)).toContain('not an agenthooks database');
      // Never migrated or written: the other program's file is byte for byte the same.
      expect(readFileSync(sidecar.db).equals(before)).toBe(true);

      renameSync(kept, sidecar.db);
      await waitForHealthz(sidecar, 200);
      expect(await listed(client, 'op-kept')).toEqual(['a']);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });

  it('answers from a backup restored at the path, not from what it read before: hooks purged since the backup are back', async () => {
    const sidecar = await startSidecar({
      args: ['--store-check-interval', String(CHECK_INTERVAL_S)],
    });
    const client = hookClient(sidecar.grpc);
    const dir = dirname(sidecar.db);
    const backup = join(dir, 'backup.db');
    try {
      await register(client, 'op-restored', ['a']);
      // An online backup beside the running sidecar, as the README allows.
      const reader = new Database(sidecar.db, { readonly: true });
      await reader.backup(backup);
      reader.close();
      await unary(client, 'UnregisterHooks', { operationId: 'op-restored', purge: true });
      // Read after the purge: the hook cache holds "no hooks" for the operation.
      expect(await listed(client, 'op-restored')).toEqual([]);

      // The README's restore: the -wal file goes first, then the copy is renamed into place.
      const recovered = sidecar.waitForLog((l) => l.msg === 'store recovered; health SERVING');
      unlinkSync(`${sidecar.db}-wal`);
      renameSync(backup, sidecar.db);
      await withDeadline(recovered);
      // The restored file holds the hook, and the sidecar answers from it.
      expect(await listed(client, 'op-restored')).toEqual(['a']);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });

  // A full disk refuses the write of the -wal file at a commit; a file-size
  // limit (RLIMIT_FSIZE, set on the running sidecar with prlimit) refuses it
  // the same way, unprivileged and reversibly. SQLite reports EFBIG as an I/O
  // error (STORE_UNAVAILABLE) where ENOSPC is SQLITE_FULL (STORE_FULL); the
  // health path is the same. The rolled-back probe never reaches the disk, so
  // it cannot see either.
  // util-linux `prlimit` is part of Debian's base system (and of CI's machine).
  it('turns NOT_SERVING when writes fail at the disk, serves reads meanwhile, and recovers when they succeed again', async () => {
    const sidecar = await startSidecar({
      args: ['--store-check-interval', String(CHECK_INTERVAL_S)],
    });
    const client = hookClient(sidecar.grpc);
    const pid = sidecar.child.pid as number;
    try {
      await register(client, 'op-1', ['a']);
      // Checks pass before: the periodic check is the quick one, and it passes.
      expect(await healthz(sidecar)).toBe(200);
      // Nothing may grow the -wal file past its size now.
      limitFileSize(pid, statSync(`${sidecar.db}-wal`).size);

      const err = await failure(register(client, 'op-1', ['refused']));
      expect(err.code).toBe(14);
      expect(errorInfoOf(err)?.reason).toBe('STORE_UNAVAILABLE');
      await waitForHealthz(sidecar, 503);
      expect(await grpcHealth(sidecar)).toBe('NOT_SERVING');
      expect(await listed(client, 'op-1')).toEqual(['a']);

      limitFileSize(pid, 'unlimited');
      await waitForHealthz(sidecar, 200);
      expect((await register(client, 'op-1', ['b'])).hookCount).toBe(2);
      expect(await listed(client, 'op-1')).toEqual(['a', 'b']);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});
