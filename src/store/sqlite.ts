/**
 * @module The embedded {@link HookStore}: one SQLite file through
 * better-sqlite3, in WAL mode with `STRICT` tables and numbered migrations
 * (see `./migrations/`). Every SQLite specific stays in `src/store/`.
 *
 * better-sqlite3 is synchronous, so each method does its work in one
 * synchronous transaction and the `Promise` only carries the result; calls
 * are serialised on the event loop and never interleave inside a transaction.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import Database from 'better-sqlite3';
import { type Hook, HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { migrate } from './migrations/index.js';
import { storeErrorFromSqlite } from './sqlite-error.js';
import type { HookStore, OperationHooks, UserRecord, UserStore } from './store.js';

/** Default of {@link SqliteStoreOptions.busyTimeoutMs}, in milliseconds. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/** Options of {@link openSqliteStore}. */
export interface SqliteStoreOptions {
  /**
   * How long a call waits for another connection's lock before it fails with
   * `STORE_LOCKED`, in milliseconds (`PRAGMA busy_timeout`). A non-negative
   * integer; default {@link DEFAULT_BUSY_TIMEOUT_MS}.
   */
  readonly busyTimeoutMs?: number;
  /**
   * Largest size the database file may grow to, in bytes, rounded down to
   * whole pages (`PRAGMA max_page_count`); a write past it fails with
   * `STORE_FULL`. A positive integer; default none (SQLite's own limit). It
   * cannot shrink a file that is already larger.
   */
  readonly maxSizeBytes?: number;
}

/** A {@link HookStore} and {@link UserStore} backed by one SQLite file. */
export interface SqliteStore extends HookStore, UserStore {
  /** Path of the database file, as given to {@link openSqliteStore}. */
  readonly path: string;
}

/**
 * Opens (creating it and its parent directory when missing) the SQLite
 * database at `path`, configures the connection and runs the migrations it
 * needs.
 *
 * @throws StoreUnavailableError when the file cannot be opened or migrated,
 *   with reason `STORE_NEWER_THAN_CODE` when a newer agenthooks wrote it.
 * @throws RangeError when an option is out of range.
 * @example
 * const store = openSqliteStore('/var/lib/agenthooks/agenthooks.db', { busyTimeoutMs: 2000 });
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteStore {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError(`busyTimeoutMs must be a non-negative integer, got ${busyTimeoutMs}`);
  }
  const { maxSizeBytes } = options;
  if (maxSizeBytes !== undefined && (!Number.isSafeInteger(maxSizeBytes) || maxSizeBytes <= 0)) {
    throw new RangeError(`maxSizeBytes must be a positive integer, got ${maxSizeBytes}`);
  }
  let db: Database.Database | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true });
    db = new Database(path);
    configure(db, busyTimeoutMs, maxSizeBytes);
    migrate(db);
    return new SqliteHookStore(path, db);
  } catch (e: unknown) {
    const error = storeErrorFromSqlite(e, `open the store at ${path}`);
    db?.close();
    throw error;
  }
}

/** Sets up a fresh connection; order matters, see each comment. */
function configure(
  db: Database.Database,
  busyTimeoutMs: number,
  maxSizeBytes: number | undefined,
): void {
  // Waits this long for another connection's lock instead of failing at once
  // with SQLITE_BUSY. Set first, so that the pragmas below wait as well.
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  // Write-ahead log: readers and the writer do not block each other, and a
  // commit is one append to the -wal file (better-sqlite3 docs/performance.md).
  // The mode is stored in the file, so this only switches a new database.
  db.pragma('journal_mode = WAL');
  // In WAL mode, NORMAL syncs at checkpoints rather than at every commit: a
  // commit survives a crash of this process (SIGKILL included); only an OS
  // crash or power loss can undo the last commits (https://sqlite.org/pragma.html#pragma_synchronous).
  db.pragma('synchronous = NORMAL');
  // SQLite leaves foreign keys off unless each connection asks; the cascade
  // from operations to hooks needs them.
  db.pragma('foreign_keys = ON');
  if (maxSizeBytes !== undefined) {
    // A per-connection limit, not stored in the file; a write that would grow
    // the file past it fails with SQLITE_FULL.
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    db.pragma(`max_page_count = ${Math.max(1, Math.floor(maxSizeBytes / pageSize))}`);
  }
}

/** A hook ready to insert: its canonical proto3 JSON and the two columns copied from it. */
interface HookRow {
  readonly hookId: string;
  readonly hookType: number;
  readonly config: string;
}

/** A `hooks` row as read back. */
interface StoredHookRow {
  readonly seq: number;
  readonly hook_id: string;
  readonly hook_type: number;
  readonly config: string;
}

/** What one read transaction of {@link SqliteHookStore.listHooks} sees. */
interface StoredOperation {
  readonly parentId: string | null;
  readonly rows: StoredHookRow[];
}

class SqliteHookStore implements SqliteStore {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #append: Database.Transaction<
    (operationId: string, parentId: string | null, rows: readonly HookRow[], now: number) => number
  >;
  readonly #list: Database.Transaction<(operationId: string) => StoredOperation>;
  readonly #delete: Database.Transaction<(operationId: string, now: number) => number>;
  readonly #probe: Database.Statement<[]>;
  readonly #selectEmail: Database.Statement<[string], { email: string | null }>;
  readonly #upsertUsers: Database.Transaction<
    (users: readonly UserRecord[], now: number) => number
  >;

  constructor(path: string, db: Database.Database) {
    this.path = path;
    this.#db = db;

    // Every statement is prepared once, here, for the life of the connection.
    // The first non-empty parent wins: an existing parent_id is never replaced.
    const upsertOperation = db.prepare<[string, string | null, number, number]>(
      `INSERT INTO operations (id, parent_id, created_at, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET
         parent_id = coalesce(operations.parent_id, excluded.parent_id),
         updated_at = excluded.updated_at`,
    );
    const countHooks = db.prepare<[string], { count: number; last: number }>(
      'SELECT count(*) AS count, coalesce(max(seq), 0) AS last FROM hooks WHERE operation_id = ?',
    );
    const insertHook = db.prepare<[string, number, string, number, string]>(
      'INSERT INTO hooks (operation_id, seq, hook_id, hook_type, config) VALUES (?, ?, ?, ?, ?)',
    );
    const selectParent = db.prepare<[string], { parent_id: string | null }>(
      'SELECT parent_id FROM operations WHERE id = ?',
    );
    const selectHooks = db.prepare<[string], StoredHookRow>(
      'SELECT seq, hook_id, hook_type, config FROM hooks WHERE operation_id = ? ORDER BY seq',
    );
    const deleteHooks = db.prepare<[string]>('DELETE FROM hooks WHERE operation_id = ?');
    const touchOperation = db.prepare<[number, string]>(
      'UPDATE operations SET updated_at = ? WHERE id = ?',
    );
    // A write statement that changes nothing: it still reads the schema and
    // takes the write lock, so it fails on a locked, read-only or damaged file.
    this.#probe = db.prepare<[]>('UPDATE operations SET updated_at = updated_at WHERE 0');
    this.#selectEmail = db.prepare<[string], { email: string | null }>(
      'SELECT email FROM users WHERE id = ?',
    );
    const upsertUser = db.prepare<[string, string | null, number]>(
      `INSERT INTO users (id, email, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET email = excluded.email, updated_at = excluded.updated_at`,
    );

    // Transactions stay synchronous (better-sqlite3 runs them as one
    // BEGIN..COMMIT and rolls back when the function throws).
    this.#append = db.transaction(
      (operationId: string, parentId: string | null, rows: readonly HookRow[], now: number) => {
        upsertOperation.run(operationId, parentId, now, now);
        const existing = countHooks.get(operationId) ?? { count: 0, last: 0 };
        let seq = existing.last;
        for (const row of rows) {
          seq += 1;
          insertHook.run(operationId, seq, row.hookId, row.hookType, row.config);
        }
        return existing.count + rows.length;
      },
    );
    // One read transaction, so that the parent and the hooks come from the
    // same snapshot.
    this.#list = db.transaction((operationId: string): StoredOperation => {
      const parentId = selectParent.get(operationId)?.parent_id ?? null;
      return { parentId, rows: selectHooks.all(operationId) };
    });
    // One transaction for a whole import: all users or none.
    this.#upsertUsers = db.transaction((users: readonly UserRecord[], now: number) => {
      for (const user of users) upsertUser.run(user.id, user.email, now);
      return users.length;
    });
    // The operation row stays (with its parent): only the hooks are purged.
    this.#delete = db.transaction((operationId: string, now: number) => {
      const { changes } = deleteHooks.run(operationId);
      if (changes > 0) {
        touchOperation.run(now, operationId);
      }
      return changes;
    });
  }

  async lookupUserEmail(userId: string): Promise<string | null> {
    return this.#run('look up a user', () => this.#selectEmail.get(userId)?.email ?? null);
  }

  async upsertUsers(users: readonly UserRecord[]): Promise<number> {
    // IMMEDIATE for the same reason as appendHooks: busy_timeout applies up front.
    return this.#run('import users', () => this.#upsertUsers.immediate(users, Date.now()));
  }

  async appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
  ): Promise<number> {
    return this.#run('append hooks', () => {
      const rows = hooks.map(toHookRow);
      const parentId =
        parentOperationId === undefined || parentOperationId === '' ? null : parentOperationId;
      // IMMEDIATE takes the write lock up front, where busy_timeout applies.
      // A deferred transaction that has already read does not wait at its
      // first write (SQLite skips the busy handler there, and in WAL mode
      // fails with SQLITE_BUSY_SNAPSHOT if another commit came in between).
      return this.#append.immediate(operationId, parentId, rows, Date.now());
    });
  }

  async listHooks(operationId: string): Promise<OperationHooks> {
    const { parentId, rows } = this.#run('list hooks', () => this.#list.deferred(operationId));
    const hooks = rows.map((row) => fromHookRow(operationId, row));
    return parentId === null ? { hooks } : { hooks, parentOperationId: parentId };
  }

  async deleteHooks(operationId: string): Promise<number> {
    return this.#run('delete hooks', () => this.#delete.immediate(operationId, Date.now()));
  }

  async ping(): Promise<void> {
    this.#run('check the store', () => this.#probe.run());
  }

  async close(): Promise<void> {
    if (!this.#db.open) {
      return;
    }
    try {
      // Lets SQLite refresh the planner statistics this connection found
      // missing; recommended before closing (https://sqlite.org/lang_analyze.html).
      this.#db.pragma('optimize');
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, 'optimize the store before closing', this.#db);
    } finally {
      this.#db.close();
    }
  }

  /** Runs `fn` and turns whatever it throws into a domain error. */
  #run<T>(action: string, fn: () => T): T {
    try {
      return fn();
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, action, this.#db);
    }
  }
}

/** Serialises one hook to its row, templates as given (`toJsonString` resolves nothing). */
function toHookRow(hook: Hook, index: number): HookRow {
  let config: string;
  try {
    config = toJsonString(HookSchema, hook);
  } catch (e: unknown) {
    // Binary protobuf can carry what JSON cannot, such as a NaN in a `body` Struct.
    throw new InvalidArgumentError(
      `hooks[${index}]`,
      'HOOK_NOT_SERIALIZABLE',
      `hook ${index} cannot be stored as JSON: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
  return { hookId: hook.id, hookType: hook.type, config };
}

/**
 * Parses one stored row. A row that does not parse, or whose JSON disagrees
 * with its `hook_id`/`hook_type` columns, fails the whole read: skipping it
 * would silently drop a hook, which could be a control.
 */
function fromHookRow(operationId: string, row: StoredHookRow): Hook {
  let hook: Hook;
  try {
    hook = fromJsonString(HookSchema, row.config);
  } catch (e: unknown) {
    throw corruptHook(operationId, row.seq, e);
  }
  if (hook.id !== row.hook_id || hook.type !== row.hook_type) {
    throw corruptHook(
      operationId,
      row.seq,
      new Error(
        `config has id ${JSON.stringify(hook.id)} and type ${hook.type}, the row has id ${JSON.stringify(row.hook_id)} and type ${row.hook_type}`,
      ),
    );
  }
  return hook;
}

function corruptHook(operationId: string, seq: number, cause: unknown): AgentHooksError {
  return new AgentHooksError(
    'failed_precondition',
    'STORED_HOOK_CORRUPT',
    `stored hook ${seq} of operation ${operationId} is corrupt`,
    { cause },
  );
}
