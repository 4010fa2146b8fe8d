/**
 * @module A database file that leaves its path while the store has it open:
 * removed, replaced by another file, or its `-wal` log removed. The store
 * must stop writing into a file that no restart finds, fail every call with a
 * stable reason, never create or migrate an empty database at the path, never
 * apply the lost file's log to another file, and reopen a restored file.
 */
import {
  copyFileSync,
  existsSync,
  linkSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { SqliteStore } from '../../src/store/sqlite.js';
import { STORE_FILE_MISSING, STORE_FILE_REPLACED } from '../../src/store/store.js';
import { parkedCall, toolResult, useTempStore, webhookHook } from './helpers.js';

/** Expects every kind of store call, reads included, to fail with `reason`. */
async function expectEveryCallToFail(store: SqliteStore, reason: string): Promise<void> {
  const failed = { kind: 'unavailable', reason };
  await expect(store.appendHooks('op-1', undefined, [webhookHook('x')])).rejects.toMatchObject(
    failed,
  );
  await expect(store.listHooks('op-1')).rejects.toMatchObject(failed);
  await expect(store.deleteHooks('op-1')).rejects.toMatchObject(failed);
  await expect(store.parkCall(parkedCall('call-x'))).rejects.toMatchObject(failed);
  await expect(store.getParkedCall('call-1')).rejects.toMatchObject(failed);
  await expect(store.publishResult('call-1', toolResult('r'), 2_000)).rejects.toMatchObject(failed);
  await expect(store.operationState(['op-1'])).rejects.toMatchObject(failed);
  await expect(store.markOperationCompleted('op-1', 2_000)).rejects.toMatchObject(failed);
  await expect(store.expireBefore(10_000, 10)).rejects.toMatchObject(failed);
  await expect(store.lookupUserEmail('u1')).rejects.toMatchObject(failed);
  await expect(store.upsertUsers([{ id: 'u1', email: null }])).rejects.toMatchObject(failed);
  await expect(store.quickCheck()).rejects.toMatchObject(failed);
}

async function hookIds(store: SqliteStore, operationId: string): Promise<string[]> {
  return (await store.listHooks(operationId)).hooks.map((h) => h.id);
}

/** Hook ids of `operationId` in the file at `path`, read by a connection of its own. */
function hookIdsInFile(path: string, operationId: string): string[] {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare<[string], { hook_id: string }>(
        'SELECT hook_id FROM hooks WHERE operation_id = ? ORDER BY seq',
      )
      .all(operationId)
      .map((row) => row.hook_id);
  } finally {
    db.close();
  }
}

/** Writes a database that is not agenthooks': one table of notes, schema version 0. */
function writeForeignDatabase(path: string): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')");
  db.close();
}

describe('a database file that leaves its path while open', () => {
  const temp = useTempStore();

  it('fails every call with STORE_FILE_MISSING once the file is removed, creates nothing there, and reopens it when linked back', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    await store.parkCall(parkedCall('call-1'));
    await expect(store.quickCheck()).resolves.toBeUndefined();
    // The operator keeps a hard link, then removes the file.
    linkSync(temp.path(), temp.path('kept.db'));
    unlinkSync(temp.path());
    // Until a check looks, a write still goes to the open, unlinked file.
    expect(await store.appendHooks('op-1', undefined, [webhookHook('b')])).toBe(2);

    await expect(store.quickCheck()).rejects.toMatchObject({
      kind: 'unavailable',
      reason: STORE_FILE_MISSING,
    });
    await expectEveryCallToFail(store, STORE_FILE_MISSING);
    await expect(store.ping()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });
    await expect(store.ping()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });
    expect(existsSync(temp.path())).toBe(false);
    // The log went into the file before the connection closed: the kept link has both hooks.
    expect(hookIdsInFile(temp.path('kept.db'), 'op-1')).toEqual(['a', 'b']);

    linkSync(temp.path('kept.db'), temp.path());
    await expect(store.ping()).resolves.toBeUndefined();
    await expect(store.quickCheck()).resolves.toBeUndefined();

    expect(await hookIds(store, 'op-1')).toEqual(['a', 'b']);
    expect(await store.appendHooks('op-1', undefined, [webhookHook('c')])).toBe(3);
    expect(await store.getParkedCall('call-1')).toMatchObject({ toolCallId: 'call-1' });
    expect(hookIdsInFile(temp.path(), 'op-1')).toEqual(['a', 'b', 'c']);
  });

  it('fails closed with STORE_FILE_REPLACED when another database takes the path, never writes to it, and reopens the original put back', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    linkSync(temp.path(), temp.path('kept.db'));
    writeForeignDatabase(temp.path('foreign.db'));
    renameSync(temp.path('foreign.db'), temp.path());
    const foreign = readFileSync(temp.path());

    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_REPLACED });
    await expectEveryCallToFail(store, STORE_FILE_REPLACED);
    await expect(store.ping()).rejects.toMatchObject({
      reason: STORE_FILE_REPLACED,
      message: expect.stringContaining('not an agenthooks database (schema version 0'),
    });
    await expect(store.ping()).rejects.toMatchObject({ reason: STORE_FILE_REPLACED });
    // The other program's file is byte for byte what it was: not migrated, not written.
    expect(readFileSync(temp.path()).equals(foreign)).toBe(true);

    renameSync(temp.path('kept.db'), temp.path());
    await expect(store.ping()).resolves.toBeUndefined();
    expect(await hookIds(store, 'op-1')).toEqual(['a']);
    expect(await store.appendHooks('op-1', undefined, [webhookHook('b')])).toBe(2);
  });

  it('refuses an empty file put at the path and leaves it empty', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    unlinkSync(temp.path());
    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });
    writeFileSync(temp.path(), '');

    await expect(store.ping()).rejects.toMatchObject({
      reason: STORE_FILE_REPLACED,
      message: expect.stringContaining('schema version 0'),
    });
    await expect(store.listHooks('op-1')).rejects.toMatchObject({ reason: STORE_FILE_REPLACED });
    expect(statSync(temp.path()).size).toBe(0);
  });

  it('reopens a restored backup without applying the lost file log to it', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    const source = new Database(temp.path(), { fileMustExist: true });
    source.exec(`VACUUM INTO '${temp.path('backup.db')}'`);
    source.close();
    // Committed after the backup, so only in the lost file and its log.
    await store.appendHooks('op-1', undefined, [webhookHook('after-backup')]);
    await store.appendHooks('op-2', undefined, [webhookHook('z')]);
    unlinkSync(temp.path());
    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });
    // The lost file's log was emptied: nothing in it can be paired with the next file.
    expect(statSync(`${temp.path()}-wal`).size).toBe(0);

    // Restored the safe way: copied next to it, then renamed into place.
    copyFileSync(temp.path('backup.db'), temp.path('restoring.db'));
    renameSync(temp.path('restoring.db'), temp.path());
    await expect(store.ping()).resolves.toBeUndefined();

    expect(await hookIds(store, 'op-1')).toEqual(['a']);
    expect(await hookIds(store, 'op-2')).toEqual([]);
    const check = temp.raw();
    expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(await store.appendHooks('op-1', undefined, [webhookHook('b')])).toBe(2);
  });

  it('reopens a database restored together with its -wal file, with what that log holds', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')]);
    // A copy of the pair while nothing writes; the hooks are still in the log.
    expect(statSync(`${temp.path()}-wal`).size).toBeGreaterThan(0);
    copyFileSync(`${temp.path()}-wal`, temp.path('copy.db-wal'));
    copyFileSync(temp.path(), temp.path('copy.db'));
    for (const suffix of ['', '-wal', '-shm']) unlinkSync(`${temp.path()}${suffix}`);
    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });

    // The log first, then the database, each renamed into place.
    renameSync(temp.path('copy.db-wal'), `${temp.path()}-wal`);
    renameSync(temp.path('copy.db'), temp.path());
    await expect(store.ping()).resolves.toBeUndefined();

    expect(await hookIds(store, 'op-1')).toEqual(['a', 'b']);
  });

  it('rescues the log into the file when the -wal file is removed, then reopens', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    unlinkSync(`${temp.path()}-wal`);
    // Lands in the unlinked log, which only the open connection still reaches.
    expect(await store.appendHooks('op-1', undefined, [webhookHook('b')])).toBe(2);

    await expect(store.quickCheck()).rejects.toMatchObject({
      reason: STORE_FILE_MISSING,
      message: expect.stringContaining('-wal'),
    });
    await expect(store.appendHooks('op-1', undefined, [webhookHook('c')])).rejects.toMatchObject({
      reason: STORE_FILE_MISSING,
    });
    await expect(store.ping()).resolves.toBeUndefined();
    await expect(store.quickCheck()).resolves.toBeUndefined();

    expect(await hookIds(store, 'op-1')).toEqual(['a', 'b']);
    await store.close();
    expect(hookIdsInFile(temp.path(), 'op-1')).toEqual(['a', 'b']);
  });

  it('fails closed with STORE_FILE_REPLACED when another file takes the -wal path', async () => {
    const store = temp.open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    writeFileSync(temp.path('other-wal'), '');
    renameSync(temp.path('other-wal'), `${temp.path()}-wal`);

    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_REPLACED });
    await expect(store.listHooks('op-1')).rejects.toMatchObject({ reason: STORE_FILE_REPLACED });
  });

  it('reports STORE_CLOSED, not the lost file, after close', async () => {
    const store = temp.open();
    unlinkSync(temp.path());
    await expect(store.quickCheck()).rejects.toMatchObject({ reason: STORE_FILE_MISSING });
    await store.close();

    await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
    await expect(store.quickCheck()).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
    await expect(store.listHooks('op-1')).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
  });
});
