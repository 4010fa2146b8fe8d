import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS, migrate, SCHEMA_VERSION } from '../../src/store/migrations/index.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { parkedCall, thrownBy, useTempStore, webhookHook } from './helpers.js';

describe('store migrations', () => {
  const temp = useTempStore();

  it('runs every migration on a fresh file and sets user_version', () => {
    temp.open();
    const raw = temp.raw();
    expect(SCHEMA_VERSION).toBe(MIGRATIONS.length);
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    const tables = raw
      .prepare(
        "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all();
    expect(tables).toEqual([
      { name: 'decisions', strict: 1 },
      { name: 'hooks', strict: 1 },
      { name: 'operations', strict: 1 },
      { name: 'parked_call_operations', strict: 1 },
      { name: 'parked_calls', strict: 1 },
      { name: 'probe', strict: 1 },
      { name: 'users', strict: 1 },
    ]);
    expect(raw.pragma('foreign_key_list(hooks)')).toMatchObject([
      { table: 'operations', from: 'operation_id', to: 'id', on_delete: 'CASCADE' },
    ]);
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('creates the parked-call tables, lifecycle columns and partial indexes of version 3', () => {
    temp.open();
    const raw = temp.raw();

    expect(
      raw
        .prepare(
          "SELECT name, type, dflt_value FROM pragma_table_info('operations') WHERE cid IN (4, 5)",
        )
        .all(),
    ).toEqual([
      { name: 'status', type: 'TEXT', dflt_value: "'active'" },
      { name: 'completed_at', type: 'INTEGER', dflt_value: null },
    ]);
    expect(raw.pragma('foreign_key_list(parked_calls)')).toMatchObject([
      { table: 'operations', from: 'operation_id', to: 'id' },
    ]);
    expect(
      (
        raw.pragma('foreign_key_list(parked_call_operations)') as {
          table: string;
          on_delete: string;
        }[]
      )
        .map((fk) => [fk.table, fk.on_delete])
        .sort(),
    ).toEqual([
      ['operations', 'NO ACTION'],
      ['parked_calls', 'CASCADE'],
    ]);
    expect(
      raw
        .prepare(
          "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql LIKE '%WHERE%' ORDER BY name",
        )
        .all(),
    ).toEqual([
      {
        name: 'operations_completed_at',
        sql: expect.stringContaining("WHERE status = 'completed'"),
      },
      {
        name: 'operations_expired_at',
        sql: expect.stringContaining("WHERE status = 'expired'"),
      },
      {
        name: 'parked_calls_published_at',
        sql: expect.stringContaining('WHERE published_at IS NOT NULL'),
      },
    ]);
    raw.prepare("INSERT INTO operations (id, created_at, updated_at) VALUES ('x', 0, 0)").run();
    expect(() => raw.prepare("UPDATE operations SET status = 'paused'").run()).toThrow(/CHECK/);
  });

  it('adds the tombstone expiry column and the indexes of version 4', () => {
    temp.open();
    const raw = temp.raw();

    expect(
      raw
        .prepare(
          "SELECT name, type, dflt_value FROM pragma_table_info('operations') WHERE cid >= 6",
        )
        .all(),
    ).toEqual([{ name: 'expired_at', type: 'INTEGER', dflt_value: null }]);
    expect(
      raw
        .prepare(
          "SELECT name FROM pragma_index_list('parked_calls') WHERE origin = 'c' ORDER BY name",
        )
        .all(),
    ).toEqual([{ name: 'parked_calls_operation_id' }, { name: 'parked_calls_published_at' }]);
    expect(raw.pragma('index_info(parked_calls_operation_id)')).toMatchObject([
      { name: 'operation_id' },
    ]);
  });

  it('adds the nullable publication lease columns of version 5, and keeps parked calls', async () => {
    const first = temp.open();
    await first.parkCall(parkedCall('call-1'));
    await first.close();
    const raw = temp.raw();
    // As version 4 left it: without the lease columns (and the later decisions table).
    raw.exec('DROP TABLE decisions');
    raw.exec('ALTER TABLE parked_calls DROP COLUMN lease_holder');
    raw.exec('ALTER TABLE parked_calls DROP COLUMN lease_expires_at');
    raw.pragma('user_version = 4');

    const store = temp.open();

    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(
      raw
        .prepare(
          "SELECT name, type, \"notnull\", dflt_value FROM pragma_table_info('parked_calls') WHERE name LIKE 'lease%' ORDER BY cid",
        )
        .all(),
    ).toEqual([
      { name: 'lease_holder', type: 'TEXT', notnull: 0, dflt_value: null },
      { name: 'lease_expires_at', type: 'INTEGER', notnull: 0, dflt_value: null },
    ]);
    expect((await store.claimPublication('call-1', 'pod/1', 1_000))?.state).toBe('claimed');
  });

  it('upgrades a version 3 database in place: a tombstone expires from the time it was stamped', async () => {
    const raw = new Database(temp.path());
    raw.transaction(() => {
      for (const migration of MIGRATIONS.slice(0, 3)) migration(raw);
      raw.pragma('user_version = 3');
    })();
    const insert = raw.prepare(
      'INSERT INTO operations (id, created_at, updated_at, status, completed_at) VALUES (?, 1, ?, ?, ?)',
    );
    insert.run('tombstone', 5_000, 'expired', 2_000);
    insert.run('done', 5_000, 'completed', 2_000);
    insert.run('active', 5_000, 'active', null);
    raw.close();

    const store = temp.open();

    expect(temp.raw().prepare('SELECT id, expired_at FROM operations ORDER BY id').all()).toEqual([
      { id: 'active', expired_at: null },
      { id: 'done', expired_at: null },
      { id: 'tombstone', expired_at: 5_000 },
    ]);
    expect(await store.expireBefore(0, 10, 5_000)).toMatchObject({ tombstones: 0 });
    expect(await store.expireBefore(0, 10, 5_001)).toMatchObject({ tombstones: 1 });
    expect([...(await store.operationState(['tombstone', 'done', 'active']))]).toEqual([
      ['tombstone', 'unknown'],
      ['done', 'completed'],
      ['active', 'active'],
    ]);
  });

  it('upgrades a version 2 database in place: operations become active, hooks stay', async () => {
    const raw = new Database(temp.path());
    raw.transaction(() => {
      MIGRATIONS[0]?.(raw);
      MIGRATIONS[1]?.(raw);
      raw.pragma('user_version = 2');
    })();
    raw
      .prepare('INSERT INTO operations (id, parent_id, created_at, updated_at) VALUES (?, ?, ?, ?)')
      .run('op-1', 'parent-1', 1, 1);
    raw
      .prepare(
        'INSERT INTO hooks (operation_id, seq, hook_id, hook_type, config) VALUES (?, 1, ?, ?, ?)',
      )
      .run('op-1', 'a', 0, '{"id":"a"}');
    raw.close();

    const store = temp.open();

    expect(temp.raw().pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect((await store.operationState(['op-1'])).get('op-1')).toBe('active');
    expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
    expect((await store.parkCall(parkedCall('call-1', ['op-1']))).created).toBe(true);
  });

  it('creates the parent directory of the database file', () => {
    const store = temp.open({}, 'nested/deeper/agenthooks.db');
    expect(store.path).toBe(temp.path('nested/deeper/agenthooks.db'));
    expect(temp.raw('nested/deeper/agenthooks.db').pragma('user_version', { simple: true })).toBe(
      SCHEMA_VERSION,
    );
  });

  it('keeps the data when a current database is reopened, without migrating again', async () => {
    const first = openSqliteStore(temp.path());
    await first.appendHooks('op-1', 'parent-1', [webhookHook('a'), webhookHook('b')]);
    await first.close();

    const second = temp.open();
    const listed = await second.listHooks('op-1');
    expect(listed.hooks.map((h) => h.id)).toEqual(['a', 'b']);
    expect(listed.parentOperationId).toBe('parent-1');
    expect(temp.raw().pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
  });

  it('does nothing when migrate() runs on a current database', () => {
    temp.open();
    const raw = temp.raw();
    // Running migration 1 again would fail with "table operations already exists".
    expect(() => migrate(raw)).not.toThrow();
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
  });

  it('refuses a database newer than the code with STORE_NEWER_THAN_CODE and leaves it untouched', () => {
    const raw = temp.raw();
    raw.pragma('user_version = 7');

    const error = thrownBy(() => openSqliteStore(temp.path()));

    expect(error).toMatchObject({
      name: 'StoreUnavailableError',
      kind: 'unavailable',
      reason: 'STORE_NEWER_THAN_CODE',
      message: `database schema version 7 is newer than this agenthooks supports (${SCHEMA_VERSION}); did you start an older agenthooks?`,
    });
    expect(raw.pragma('user_version', { simple: true })).toBe(7);
    expect(
      raw.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get(),
    ).toEqual({ n: 0 });
  });

  it('refuses a file that is not a database with STORE_CORRUPT', () => {
    writeFileSync(temp.path(), 'this is not an SQLite database, just text. '.repeat(200));

    const error = thrownBy(() => openSqliteStore(temp.path()));

    expect(error).toMatchObject({ kind: 'unavailable', reason: 'STORE_CORRUPT' });
    expect((error as Error).message).toContain('not an agenthooks database (not a database');
  });

  it('creates a new database whole under another name, and leaves nothing else behind', async () => {
    // What a creation killed before its migration committed left: ignored, then replaced.
    writeFileSync(`${temp.path()}.creating-${process.pid}`, '');

    const store = openSqliteStore(temp.path());
    await store.close();

    expect(readdirSync(dirname(temp.path())).sort()).toEqual([basename(temp.path())]);
    const db = new Database(temp.path(), { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
  });

  it('refuses an existing empty file (truncated, or left by a lost volume) and leaves it as it was', () => {
    writeFileSync(temp.path(), '');

    const error = thrownBy(() => openSqliteStore(temp.path()));

    expect(error).toMatchObject({ kind: 'unavailable', reason: 'STORE_CORRUPT' });
    expect((error as Error).message).toContain('schema version 0');
    expect(readFileSync(temp.path())).toHaveLength(0);
  });

  it("refuses another program's database instead of migrating agenthooks' tables into it", () => {
    const other = new Database(temp.path());
    other.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)');
    other.close();
    const before = readFileSync(temp.path());

    const error = thrownBy(() => openSqliteStore(temp.path()));

    expect(error).toMatchObject({ kind: 'unavailable', reason: 'STORE_CORRUPT' });
    expect(readFileSync(temp.path()).equals(before)).toBe(true);
  });

  it('throws STORE_UNAVAILABLE when the parent directory cannot be created', () => {
    writeFileSync(temp.path('a-file'), '');

    const error = thrownBy(() => openSqliteStore(temp.path('a-file/agenthooks.db')));

    expect(error).toMatchObject({ kind: 'unavailable', reason: 'STORE_UNAVAILABLE' });
    expect((error as Error).message).toContain('a-file/agenthooks.db');
  });

  it('rejects out-of-range options with a RangeError before touching the file', () => {
    expect(() => openSqliteStore(temp.path(), { busyTimeoutMs: -1 })).toThrow(RangeError);
    expect(() => openSqliteStore(temp.path(), { busyTimeoutMs: 1.5 })).toThrow(RangeError);
    expect(() => openSqliteStore(temp.path(), { maxSizeBytes: 0 })).toThrow(RangeError);
    expect(existsSync(temp.path())).toBe(false);
  });
});
