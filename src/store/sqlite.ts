/**
 * @module The embedded store: one SQLite file through better-sqlite3, in WAL
 * mode with `STRICT` tables and numbered migrations (see `./migrations/`). It
 * implements every store interface of `./store.ts`; every SQLite specific
 * stays in `src/store/`.
 *
 * better-sqlite3 is synchronous, so each method does its work in one
 * synchronous statement or transaction and the `Promise` only carries the
 * result; calls are serialised on the event loop and never interleave inside
 * a transaction. A lock held by another connection blocks the event loop for
 * up to `busyTimeoutMs` before the call fails with `STORE_LOCKED`, so keep
 * that timeout short.
 *
 * Recovery without a restart: a write that fails because the store is
 * locked or full fails closed, and the next write succeeds once the lock is
 * released or space is freed. A connection can also get stuck: SQLite opens a
 * file it may not write read-only and keeps it so after the permissions are
 * fixed, and a damaged or replaced file keeps failing on the old handle. For
 * those (`STORE_READ_ONLY`, `STORE_CORRUPT`, `STORE_UNAVAILABLE`), `ping()`,
 * and only `ping()`, opens a new connection to the existing file (same
 * settings, migrations only if the schema is behind), checks that it can
 * write, and swaps it in; until then the old connection keeps serving reads.
 * The health check pings periodically, so the store recovers when the
 * operator fixes the fault, while ordinary calls fail fast.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import type { ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import {
  assertEpochMs,
  decodeResult,
  encodeResult,
  fromParkedCallRow,
  toParkedCallRow,
} from './parked-codec.js';
import {
  type ConnectionSettings,
  type HookRow,
  openConnection,
  type SqliteConnection,
  type StoredHookRow,
} from './sqlite-connection.js';
import { storeErrorFromSqlite } from './sqlite-error.js';
import {
  type ExpireResult,
  type HookStore,
  type NewParkedCall,
  type OperationHooks,
  type OperationState,
  operationExpiredError,
  type ParkedCallRecord,
  type ParkOutcome,
  type ParkStore,
  type PublishOutcome,
  parkedCallNotFoundError,
  type RetentionStore,
  type StoreErrorReason,
  type UserRecord,
  type UserStore,
} from './store.js';

/**
 * Database file of `agenthooks serve` and `agenthooks users import` when
 * neither `--db` nor its variable names one; relative to the working directory.
 */
export const DEFAULT_DB_PATH = './data/agenthooks.db';

/** Default of {@link SqliteStoreOptions.busyTimeoutMs}, in milliseconds. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/**
 * Failures that a new connection can cure once the cause is gone: a file
 * opened read-only stays read-only on its connection, and a replaced or
 * damaged file keeps failing on the old handle. A lock or a full file is
 * cured in place, without reopening.
 */
const REOPEN_REASONS: ReadonlySet<string> = new Set<StoreErrorReason>([
  'STORE_READ_ONLY',
  'STORE_CORRUPT',
  'STORE_UNAVAILABLE',
]);

/** Options of {@link openSqliteStore}. */
export interface SqliteStoreOptions {
  /**
   * How long a call waits for another connection's lock before it fails with
   * `STORE_LOCKED`, in milliseconds (`PRAGMA busy_timeout`). The wait blocks
   * the event loop. A non-negative integer; default {@link DEFAULT_BUSY_TIMEOUT_MS}.
   */
  readonly busyTimeoutMs?: number;
  /**
   * Largest size the database file may grow to, in bytes, rounded down to
   * whole pages (`PRAGMA max_page_count`); a write past it fails with
   * `STORE_FULL`. The limit belongs to the connection, not the file, so it
   * is set again on every reopened connection, and another process opening
   * the same file has its own. A positive integer; default none (SQLite's
   * own limit). It cannot shrink a file that is already larger.
   */
  readonly maxSizeBytes?: number;
  /**
   * Told about every store call: its operation (the method name, such as
   * `appendHooks`), its result (`ok` or the error's reason) and its duration
   * in seconds. Used for metrics; default none.
   */
  readonly observe?: StoreObserver;
}

/** Receives each store call's operation, result and duration in seconds. */
export type StoreObserver = (operation: string, result: string, seconds: number) => void;

/** Every store interface, backed by one SQLite file. */
export interface SqliteStore extends HookStore, UserStore, ParkStore, RetentionStore {
  /** Path of the database file, as given to {@link openSqliteStore}. */
  readonly path: string;
}

/**
 * Opens (creating it and its parent directory when missing) the SQLite
 * database at `path`, configures the connection and runs the migrations it
 * needs. A file the process may read but not write opens read-only: reads
 * work, writes and `ping()` fail with `STORE_READ_ONLY` until the permissions
 * are fixed and `ping()` reopens it.
 *
 * @throws StoreUnavailableError when the file cannot be opened or migrated,
 *   with reason `STORE_NEWER_THAN_CODE` when a newer agenthooks wrote it.
 * @throws RangeError when an option is out of range.
 * @example
 * const store = openSqliteStore('/var/lib/agenthooks/agenthooks.db', { busyTimeoutMs: 200 });
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
  const settings: ConnectionSettings = {
    busyTimeoutMs,
    ...(maxSizeBytes === undefined ? {} : { maxSizeBytes }),
    create: true,
  };
  try {
    mkdirSync(dirname(path), { recursive: true });
    return new SqliteStoreImpl(path, settings, openConnection(path, settings), options.observe);
  } catch (e: unknown) {
    throw storeErrorFromSqlite(e, `open the store at ${path}`);
  }
}

class SqliteStoreImpl implements SqliteStore {
  readonly path: string;
  readonly #settings: ConnectionSettings;
  #connection: SqliteConnection;
  #closed = false;
  readonly #observe: StoreObserver | undefined;

  constructor(
    path: string,
    settings: ConnectionSettings,
    connection: SqliteConnection,
    observe: StoreObserver | undefined,
  ) {
    this.path = path;
    this.#observe = observe;
    // A reopened connection must find the file: never create an empty one.
    this.#settings = { ...settings, create: false };
    this.#connection = connection;
  }

  async lookupUserEmail(userId: string): Promise<string | null> {
    return this.#run('lookupUserEmail', 'look up a user', (c) => c.lookupUserEmail(userId));
  }

  async upsertUsers(users: readonly UserRecord[]): Promise<number> {
    return this.#run('upsertUsers', 'import users', (c) => c.upsertUsers(users, Date.now()));
  }

  async appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
  ): Promise<number> {
    const rows = hooks.map(toHookRow);
    const parentId =
      parentOperationId === undefined || parentOperationId === '' ? null : parentOperationId;
    return this.#run('appendHooks', 'append hooks', (c) =>
      c.appendHooks(operationId, parentId, rows, Date.now()),
    );
  }

  async listHooks(operationId: string): Promise<OperationHooks> {
    const { status, parentId, rows } = this.#run('listHooks', 'list hooks', (c) =>
      c.listHooks(operationId),
    );
    if (status === 'expired') {
      throw operationExpiredError(operationId);
    }
    const hooks = rows.map((row) => fromHookRow(operationId, row));
    return parentId === null ? { hooks } : { hooks, parentOperationId: parentId };
  }

  async deleteHooks(operationId: string): Promise<number> {
    return this.#run('deleteHooks', 'delete hooks', (c) => c.deleteHooks(operationId, Date.now()));
  }

  async parkCall(record: NewParkedCall): Promise<ParkOutcome> {
    const row = toParkedCallRow(record);
    // The call's own operation first, then the chain; each once.
    const operationIds = [...new Set([record.operationId, ...record.chain])];
    const existing = this.#run('parkCall', 'park a tool call', (c) =>
      c.parkCall(row, operationIds),
    );
    if (existing !== undefined) {
      return { record: fromParkedCallRow(existing), created: false };
    }
    const { toolCallId, operationId, chain, kind, context, parkedAt } = record;
    return {
      record: { toolCallId, operationId, chain: [...chain], kind, context, parkedAt },
      created: true,
    };
  }

  async getParkedCall(toolCallId: string): Promise<ParkedCallRecord | undefined> {
    const row = this.#run('getParkedCall', 'read a parked call', (c) =>
      c.getParkedCall(toolCallId),
    );
    return row === undefined ? undefined : fromParkedCallRow(row);
  }

  async publishResult(
    toolCallId: string,
    result: ToolResult,
    publishedAt: number,
  ): Promise<PublishOutcome> {
    assertEpochMs('publishedAt', publishedAt);
    const bytes = encodeResult(result);
    const outcome = this.#run('publishResult', 'publish a deferred result', (c) =>
      c.publish(toolCallId, bytes, publishedAt),
    );
    if (outcome === undefined) {
      throw parkedCallNotFoundError(toolCallId);
    }
    if (outcome.published) {
      return { published: true, finalResult: result };
    }
    return { published: false, finalResult: decodeResult(toolCallId, outcome.stored) };
  }

  async operationState(operationIds: readonly string[]): Promise<Map<string, OperationState>> {
    const statuses =
      operationIds.length === 0
        ? new Map<string, OperationState>()
        : this.#run('operationState', 'read operation states', (c) =>
            c.operationStatuses(operationIds),
          );
    return new Map(operationIds.map((id) => [id, statuses.get(id) ?? 'unknown']));
  }

  async markOperationCompleted(operationId: string, at: number): Promise<void> {
    assertEpochMs('at', at);
    this.#run('markOperationCompleted', 'complete an operation', (c) =>
      c.markCompleted(operationId, at),
    );
  }

  async expireBefore(cutoff: number, batchSize: number): Promise<ExpireResult> {
    assertEpochMs('cutoff', cutoff);
    if (!Number.isSafeInteger(batchSize) || batchSize <= 0) {
      throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    }
    return this.#run('expireBefore', 'expire old records', (c) =>
      c.expire(cutoff, batchSize, Date.now()),
    );
  }

  async ping(): Promise<void> {
    let failure: AgentHooksError;
    try {
      this.#connection.probe();
      return;
    } catch (e: unknown) {
      failure = this.#error(e, 'check the store');
    }
    if (this.#closed || !REOPEN_REASONS.has(failure.reason)) {
      throw failure;
    }
    this.#reopen();
  }

  async close(): Promise<void> {
    if (this.#closed) {
      return;
    }
    this.#closed = true;
    try {
      this.#connection.close();
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, 'optimize the store before closing');
    }
  }

  /**
   * Opens a new connection to the file and swaps it in if it can write; the
   * old one is closed then. When the new one cannot write either, it is
   * closed and the old one stays, still serving reads.
   */
  #reopen(): void {
    let fresh: SqliteConnection | undefined;
    try {
      fresh = openConnection(this.path, this.#settings);
      fresh.probe();
    } catch (e: unknown) {
      const error = storeErrorFromSqlite(e, 'reopen the store');
      closeQuietly(fresh);
      throw error;
    }
    const stale = this.#connection;
    this.#connection = fresh;
    closeQuietly(stale);
  }

  /**
   * Runs `fn` on the current connection, turns whatever it throws into a
   * domain error, and reports the call to the `observe` option.
   */
  #run<T>(operation: string, action: string, fn: (connection: SqliteConnection) => T): T {
    const observe = this.#observe;
    const started = observe === undefined ? 0 : performance.now();
    try {
      const result = fn(this.#connection);
      observe?.(operation, 'ok', (performance.now() - started) / 1000);
      return result;
    } catch (e: unknown) {
      const err = this.#error(e, action);
      observe?.(operation, err.reason, (performance.now() - started) / 1000);
      throw err;
    }
  }

  #error(e: unknown, action: string): AgentHooksError {
    return storeErrorFromSqlite(e, action, this.#connection.db);
  }
}

/** Closes a connection that is being replaced; its failure changes nothing for the caller. */
function closeQuietly(connection: SqliteConnection | undefined): void {
  if (connection === undefined || !connection.db.open) {
    return;
  }
  try {
    connection.close();
  } catch (_e: unknown) {
    // close() closed the handle even though `PRAGMA optimize` failed.
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
