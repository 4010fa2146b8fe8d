import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import { create, equals, toJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { MIN_DB_MAX_SIZE_BYTES } from '../../src/config/config.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { openConnection, SQLITE_CACHE_KIB } from '../../src/store/sqlite-connection.js';
import { controlHook, TEMPLATED_HEADER, useTempStore, webhookHook } from './helpers.js';

describe('SqliteStore', () => {
  const temp = useTempStore();

  it("creates its folders, database, log and lock files readable by the sidecar's user only", async () => {
    const previous = process.umask(0o022);
    try {
      const path = temp.path('data/nested/agenthooks.db');
      const store = openSqliteStore(path, { lockWaitMs: 0 });
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      const mode = (file: string) => statSync(file).mode & 0o777;
      expect({
        folder: mode(dirname(path)),
        parent: mode(dirname(dirname(path))),
        db: mode(path),
        wal: mode(`${path}-wal`),
        shm: mode(`${path}-shm`),
        lock: mode(`${path}.lock`),
      }).toEqual({ folder: 0o700, parent: 0o700, db: 0o600, wal: 0o600, shm: 0o600, lock: 0o600 });
      await store.close();
    } finally {
      process.umask(previous);
    }
  });

  describe('appendHooks and listHooks', () => {
    it('keeps registration order across several calls and resolves to the running count', async () => {
      const store = temp.open();

      expect(await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')])).toBe(
        2,
      );
      expect(await store.appendHooks('op-1', undefined, [controlHook('c')])).toBe(3);
      expect(await store.appendHooks('op-2', undefined, [webhookHook('x')])).toBe(1);
      expect(await store.appendHooks('op-1', undefined, [webhookHook('d'), webhookHook('a')])).toBe(
        5,
      );

      const { hooks } = await store.listHooks('op-1');
      expect(hooks.map((h) => h.id)).toEqual(['a', 'b', 'c', 'd', 'a']);
      expect((await store.listHooks('op-2')).hooks.map((h) => h.id)).toEqual(['x']);
    });

    it('returns the hooks exactly as registered, every field included', async () => {
      const store = temp.open();
      const given = [webhookHook('notify', HookType.ON_COMPLETE), controlHook('guard')];
      await store.appendHooks('op-1', undefined, given);

      const { hooks } = await store.listHooks('op-1');

      expect(hooks.map((h, i) => equals(HookSchema, h, given[i] ?? create(HookSchema)))).toEqual([
        true,
        true,
      ]);
    });

    it('stores each hook as canonical proto3 JSON with header templates unresolved', async () => {
      const store = temp.open();
      const hook = webhookHook('a', HookType.BEFORE_STEP);
      await store.appendHooks('op-1', undefined, [hook]);

      const row = temp
        .raw()
        .prepare('SELECT seq, hook_id, hook_type, config FROM hooks WHERE operation_id = ?')
        .get('op-1');

      expect(row).toEqual({
        seq: 1,
        hook_id: 'a',
        hook_type: HookType.BEFORE_STEP,
        config: toJsonString(HookSchema, hook),
      });
      expect(JSON.parse((row as { config: string }).config).webhook.headers).toEqual({
        authorization: TEMPLATED_HEADER,
      });
    });

    it('lists no hooks and no parent for an unknown operation', async () => {
      const store = temp.open();

      expect(await store.listHooks('never-registered')).toEqual({ hooks: [], known: false });
    });

    it('creates the operation row, with timestamps, even for an empty batch', async () => {
      const store = temp.open();
      const before = Date.now();

      expect(await store.appendHooks('op-1', 'parent-1', [])).toBe(0);

      const row = temp.raw().prepare('SELECT * FROM operations').get() as Record<string, unknown>;
      expect(row).toMatchObject({ id: 'op-1', parent_id: 'parent-1' });
      expect(row.created_at).toBeGreaterThanOrEqual(before);
      expect(row.updated_at).toBe(row.created_at);
      expect(await store.listHooks('op-1')).toEqual({
        hooks: [],
        known: true,
        parentOperationId: 'parent-1',
      });
    });

    it('keeps the parent from the first registration that names one', async () => {
      const store = temp.open();

      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      expect((await store.listHooks('op-1')).parentOperationId).toBeUndefined();
      await store.appendHooks('op-1', '', [webhookHook('b')]);
      expect((await store.listHooks('op-1')).parentOperationId).toBeUndefined();
      await store.appendHooks('op-1', 'parent-1', [webhookHook('c')]);
      await store.appendHooks('op-1', 'parent-2', [webhookHook('d')]);
      await store.appendHooks('op-1', undefined, [webhookHook('e')]);

      expect(await store.listHooks('op-1')).toMatchObject({ parentOperationId: 'parent-1' });
    });

    it('rejects a hook that cannot be written as JSON and stores nothing of its batch', async () => {
      const store = temp.open();
      const nan = create(HookSchema, {
        id: 'nan',
        type: HookType.AFTER_STEP,
        webhook: {
          url: '/x',
          body: { fields: { score: { kind: { case: 'numberValue', value: Number.NaN } } } },
        },
      });

      await expect(
        store.appendHooks('op-1', 'parent-1', [webhookHook('a'), nan]),
      ).rejects.toMatchObject({
        kind: 'invalid_argument',
        reason: 'HOOK_NOT_SERIALIZABLE',
        field: 'hooks[1]',
      });
      expect(await store.listHooks('op-1')).toEqual({ hooks: [], known: false });
    });
  });

  describe('all or nothing', () => {
    it('leaves no row of a new operation when an insert fails midway', async () => {
      const store = temp.open();
      const raw = temp.raw();
      raw.exec(`CREATE TRIGGER fail_second_hook BEFORE INSERT ON hooks WHEN NEW.seq = 2
                BEGIN SELECT RAISE(ABORT, 'forced failure'); END`);

      await expect(
        store.appendHooks('op-1', 'parent-1', [
          webhookHook('a'),
          webhookHook('b'),
          webhookHook('c'),
        ]),
      ).rejects.toMatchObject({
        reason: 'STORE_INTERNAL',
        cause: { code: 'SQLITE_CONSTRAINT_TRIGGER' },
      });

      raw.exec('DROP TRIGGER fail_second_hook');
      expect(raw.prepare('SELECT count(*) AS n FROM operations').get()).toEqual({ n: 0 });
      expect(raw.prepare('SELECT count(*) AS n FROM hooks').get()).toEqual({ n: 0 });
      expect(await store.listHooks('op-1')).toEqual({ hooks: [], known: false });
    });

    it('keeps an existing operation as it was when a later batch fails midway', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      const raw = temp.raw();
      raw.exec(`CREATE TRIGGER fail_third_hook BEFORE INSERT ON hooks WHEN NEW.seq = 3
                BEGIN SELECT RAISE(ABORT, 'forced failure'); END`);

      await expect(
        store.appendHooks('op-1', 'parent-1', [webhookHook('b'), webhookHook('c')]),
      ).rejects.toMatchObject({ kind: 'internal' });

      raw.exec('DROP TRIGGER fail_third_hook');
      expect(await store.listHooks('op-1')).toEqual({ hooks: [webhookHook('a')], known: true });
      expect(await store.appendHooks('op-1', undefined, [webhookHook('d')])).toBe(2);
    });

    it('fails with STORE_LOCKED and writes nothing while another connection holds the write lock', async () => {
      const store = temp.open({ busyTimeoutMs: 20 });
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      const raw = temp.raw();
      raw.exec('BEGIN IMMEDIATE');

      await expect(store.appendHooks('op-1', 'parent-1', [webhookHook('b')])).rejects.toMatchObject(
        { kind: 'unavailable', reason: 'STORE_LOCKED' },
      );
      await expect(store.deleteHooks('op-1')).rejects.toMatchObject({ reason: 'STORE_LOCKED' });
      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_LOCKED' });
      // WAL: readers are not blocked by the writer.
      expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);

      raw.exec('ROLLBACK');
      expect(await store.listHooks('op-1')).toEqual({ hooks: [webhookHook('a')], known: true });
      expect(await store.appendHooks('op-1', undefined, [webhookHook('b')])).toBe(2);
    });

    it('fails with STORE_FULL and writes nothing when the file reaches its size limit', async () => {
      // The smallest limit the configuration allows; the big hook alone is larger.
      const store = temp.open({ maxSizeBytes: MIN_DB_MAX_SIZE_BYTES });
      await store.appendHooks('op-1', undefined, [webhookHook('small')]);
      const big = webhookHook('big');
      if (big.webhook === undefined) throw new Error('webhookHook() builds a webhook');
      big.webhook.body = {
        $typeName: 'google.protobuf.Struct',
        fields: {
          padding: {
            $typeName: 'google.protobuf.Value',
            kind: { case: 'stringValue', value: 'x'.repeat(128 * 1024) },
          },
        },
      };

      await expect(
        store.appendHooks('op-1', 'parent-1', [webhookHook('before-big'), big]),
      ).rejects.toMatchObject({ kind: 'unavailable', reason: 'STORE_FULL' });

      expect(await store.listHooks('op-1')).toEqual({ hooks: [webhookHook('small')], known: true });
    });
  });

  describe('corrupt rows', () => {
    it('rejects listHooks with STORED_HOOK_CORRUPT when a config is not JSON', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')]);
      temp
        .raw()
        .prepare('UPDATE hooks SET config = ? WHERE operation_id = ? AND seq = ?')
        .run('{"id": "b", garbage', 'op-1', 2);

      const rejection = store.listHooks('op-1');

      await expect(rejection).rejects.toMatchObject({
        kind: 'failed_precondition',
        reason: 'STORED_HOOK_CORRUPT',
        message: 'stored hook 2 of operation op-1 is corrupt',
      });
      await expect(rejection).rejects.toHaveProperty('cause');
    });

    it('rejects listHooks with STORED_HOOK_CORRUPT when a config is JSON of another shape', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      temp.raw().prepare('UPDATE hooks SET config = ?').run('{"id": "a", "colour": "blue"}');

      await expect(store.listHooks('op-1')).rejects.toMatchObject({
        reason: 'STORED_HOOK_CORRUPT',
        message: 'stored hook 1 of operation op-1 is corrupt',
      });
    });

    it('rejects listHooks with STORED_HOOK_CORRUPT when a config disagrees with its row', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);
      temp.raw().prepare('UPDATE hooks SET hook_id = ?').run('someone-else');

      await expect(store.listHooks('op-1')).rejects.toMatchObject({
        reason: 'STORED_HOOK_CORRUPT',
      });
    });
  });

  describe('deleteHooks', () => {
    it('resolves to the number deleted, after which the operation lists none', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', 'parent-1', [webhookHook('a'), webhookHook('b')]);
      await store.appendHooks('op-2', undefined, [webhookHook('x')]);

      expect(await store.deleteHooks('op-1')).toBe(2);

      expect(await store.listHooks('op-1')).toEqual({
        hooks: [],
        known: true,
        parentOperationId: 'parent-1',
      });
      expect((await store.listHooks('op-2')).hooks.map((h) => h.id)).toEqual(['x']);
      expect(await store.deleteHooks('op-1')).toBe(0);
      expect(await store.deleteHooks('never-registered')).toBe(0);
    });

    it('numbers hooks from 1 again after a purge', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')]);
      await store.deleteHooks('op-1');

      expect(await store.appendHooks('op-1', undefined, [webhookHook('c')])).toBe(1);
      expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['c']);
    });
  });

  describe('ping and close', () => {
    it('pings a healthy store', async () => {
      const store = temp.open();

      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('rejects every call with STORE_CLOSED after close, and closes twice quietly', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);

      await store.close();
      await expect(store.close()).resolves.toBeUndefined();

      const closed = { kind: 'unavailable', reason: 'STORE_CLOSED' };
      await expect(store.appendHooks('op-1', undefined, [webhookHook('b')])).rejects.toMatchObject(
        closed,
      );
      await expect(store.listHooks('op-1')).rejects.toMatchObject(closed);
      await expect(store.deleteHooks('op-1')).rejects.toMatchObject(closed);
      await expect(store.ping()).rejects.toMatchObject(closed);
    });

    it('commits before appendHooks resolves, so another connection sees the hooks', async () => {
      const store = temp.open();
      await store.appendHooks('op-1', undefined, [webhookHook('a')]);

      const row = temp.raw().prepare('SELECT hook_id FROM hooks').get();
      expect(row).toEqual({ hook_id: 'a' });
    });
  });
});

describe('opening the store', () => {
  const temp = useTempStore();

  it("bounds SQLite's page cache of a connection, on a new file and an existing one", () => {
    // better-sqlite3's build default is 16 MB, held for good once the file is that large.
    for (const create of [true, false]) {
      const connection = openConnection(temp.path(), { busyTimeoutMs: 0, create });
      try {
        expect(connection.db.pragma('cache_size', { simple: true })).toBe(-SQLITE_CACHE_KIB);
      } finally {
        connection.close();
      }
    }
    expect(SQLITE_CACHE_KIB).toBeLessThan(16_000);
  });

  it('fails at once, naming the folder, when the database folder cannot be made (/proc)', () => {
    // Node's recursive mkdir spins forever here; the store makes one level at a time.
    expect(() => openSqliteStore('/proc/agenthooks/x.db')).toThrow(
      expect.objectContaining({
        reason: 'STORE_UNAVAILABLE',
        message: expect.stringContaining("mkdir '/proc/agenthooks'"),
      }),
    );
  });
});
