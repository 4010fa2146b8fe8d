/**
 * @module The embedded user directory: migration 002's `users` table and the
 * store's user access, on real files in a temporary folder.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate001 } from '../../src/store/migrations/001-initial.js';
import { SCHEMA_VERSION } from '../../src/store/migrations/index.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { useTempStore, webhookHook } from './helpers.js';

describe('users table (migration 002)', () => {
  const temp = useTempStore();

  it('creates users(id TEXT NOT NULL PRIMARY KEY, email TEXT, updated_at INTEGER NOT NULL) STRICT', () => {
    temp.open();
    const columns = temp
      .raw()
      .prepare('SELECT name, type, "notnull", pk FROM pragma_table_info(\'users\') ORDER BY cid')
      .all();
    expect(columns).toEqual([
      { name: 'id', type: 'TEXT', notnull: 1, pk: 1 },
      { name: 'email', type: 'TEXT', notnull: 0, pk: 0 },
      { name: 'updated_at', type: 'INTEGER', notnull: 1, pk: 0 },
    ]);
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(2);
  });

  it('upgrades a version 1 database in place, keeping its hooks', async () => {
    const raw = new Database(temp.path());
    raw.transaction(() => {
      migrate001(raw);
      raw.pragma('user_version = 1');
    })();
    raw
      .prepare('INSERT INTO operations (id, parent_id, created_at, updated_at) VALUES (?, ?, ?, ?)')
      .run('op-1', null, 1, 1);
    raw.close();

    const store = temp.open();
    expect(temp.raw().pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(await store.appendHooks('op-1', undefined, [webhookHook('a')])).toBe(1);
    expect(await store.upsertUsers([{ id: 'u1', email: 'ada@example.com' }])).toBe(1);
    expect(await store.lookupUserEmail('u1')).toBe('ada@example.com');
  });

  it('upserts users in one transaction, the last record of an id winning', async () => {
    const store = temp.open();
    await store.upsertUsers([
      { id: 'u1', email: 'old@example.com' },
      { id: 'u2', email: null },
    ]);
    expect(
      await store.upsertUsers([
        { id: 'u1', email: 'new@example.com' },
        { id: 'u3', email: 'c@example.com' },
        { id: 'u3', email: 'c2@example.com' },
      ]),
    ).toBe(3);
    expect(await store.lookupUserEmail('u1')).toBe('new@example.com');
    expect(await store.lookupUserEmail('u2')).toBeNull();
    expect(await store.lookupUserEmail('u3')).toBe('c2@example.com');
    expect(await store.lookupUserEmail('unknown')).toBeNull();
    const rows = temp.raw().prepare('SELECT id, updated_at FROM users ORDER BY id').all() as {
      id: string;
      updated_at: number;
    }[];
    expect(rows.map((r) => r.id)).toEqual(['u1', 'u2', 'u3']);
    for (const row of rows) expect(Number.isInteger(row.updated_at)).toBe(true);
  });

  it('keeps a numeric-looking id as text (STRICT)', async () => {
    const store = temp.open();
    await store.upsertUsers([{ id: '007', email: 'bond@example.com' }]);
    expect(await store.lookupUserEmail('007')).toBe('bond@example.com');
    expect(await store.lookupUserEmail('7')).toBeNull();
  });

  it('writes nothing when a record of the batch fails', async () => {
    const store = temp.open();
    await expect(
      store.upsertUsers([
        { id: 'u1', email: 'a@example.com' },
        // A value STRICT refuses: the whole batch rolls back.
        { id: 'u2', email: Buffer.from('not text') as unknown as string },
      ]),
    ).rejects.toMatchObject({ reason: 'STORE_INTERNAL' });
    expect(await store.lookupUserEmail('u1')).toBeNull();
  });

  it('refuses user access after close with STORE_CLOSED', async () => {
    const store = openSqliteStore(temp.path());
    await store.close();
    await expect(store.lookupUserEmail('u1')).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
    await expect(store.upsertUsers([])).rejects.toMatchObject({ reason: 'STORE_CLOSED' });
  });
});
