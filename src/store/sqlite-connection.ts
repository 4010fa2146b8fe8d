/**
 * @module One configured better-sqlite3 connection of the SQLite store, with
 * its prepared statements and synchronous transactions. `./sqlite.ts` holds
 * one connection at a time and replaces it when `ping()` finds it stuck
 * (read-only, corrupt, unavailable) or the file restored after it was lost.
 * Methods throw what better-sqlite3 throws; `./sqlite.ts` maps it to domain
 * errors.
 */
import Database from 'better-sqlite3';
import type { HookRow, StoredHookRow } from './hook-codec.js';
import { migrate, SCHEMA_VERSION } from './migrations/index.js';
import type { ParkedCallRow } from './parked-codec.js';
import {
  type AppendHooksOptions,
  type DecisionQuery,
  type DecisionRow,
  hookConfigTooLargeError,
  operationExpiredError,
  tooManyHooksError,
  type UserRecord,
} from './store.js';

/** How a connection is configured; the same for every (re)opened connection. */
export interface ConnectionSettings {
  /** `PRAGMA busy_timeout`, in milliseconds. */
  readonly busyTimeoutMs: number;
  /** Size limit of the file in bytes (`PRAGMA max_page_count`), if any. */
  readonly maxSizeBytes?: number;
  /**
   * True to create the file when it is missing (the first open); false when
   * reopening, so that a file that vanished is an error rather than a new,
   * empty database that would answer "no hooks".
   */
  readonly create: boolean;
}

/** The value of `operations.status`. */
export type OperationStatus = 'active' | 'completed' | 'expired';

/** What one read transaction of {@link SqliteConnection.listHooks} sees. */
export interface StoredOperation {
  /** The operation's status; undefined for an unknown operation. */
  readonly status: OperationStatus | undefined;
  readonly parentId: string | null;
  readonly rows: StoredHookRow[];
}

/** What {@link SqliteConnection.publish} found. */
export type PublishRowOutcome =
  | { readonly published: true }
  | { readonly published: false; readonly stored: Uint8Array; readonly publishedAt: number }
  | undefined;

/** What {@link SqliteConnection.claim} found; undefined when no record exists. */
export type ClaimRowOutcome =
  | { readonly state: 'claimed' | 'published'; readonly row: ParkedCallRow }
  | { readonly state: 'held'; readonly holder: string; readonly expiresAt: number }
  | undefined;

/** A parked call's placeholder and lease columns. */
interface LeaseRow {
  readonly published: number;
  readonly lease_holder: string | null;
  readonly lease_expires_at: number | null;
}

/**
 * The `held` answer for a lease that runs at `now` and is not `replacing`'s;
 * undefined when it may be claimed.
 */
function runningLease(
  lease: LeaseRow | undefined,
  now: number,
  replacing: string | undefined,
): ClaimRowOutcome {
  const holder = lease?.lease_holder ?? null;
  const expiresAt = lease?.lease_expires_at ?? null;
  if (holder === null || expiresAt === null || expiresAt <= now || holder === replacing) {
    return undefined;
  }
  return { state: 'held', holder, expiresAt };
}

/** What one {@link SqliteConnection.expire} batch removed. */
export interface ExpiredRows {
  readonly operations: string[];
  readonly parkedCalls: number;
  readonly tombstones: number;
  readonly decisions: number;
}

/**
 * Deletes one batch of audit entries older than `@cutoff`, oldest first, at
 * most `@limit`, through the index `decisions_time`.
 */
export const DELETE_DECISIONS_SQL = `DELETE FROM decisions WHERE decision_id IN (
  SELECT decision_id FROM decisions WHERE time < @cutoff ORDER BY time LIMIT @limit)`;

/** A `decisions` row as stored. */
interface DecisionTableRow {
  readonly decision_id: string;
  readonly time: number;
  readonly operation_id: string;
  readonly outcome: number;
  readonly record: Uint8Array;
}

/**
 * Opens and configures a connection, and runs the migrations the file needs
 * (none when it is current, so a current file opens without a write).
 *
 * @throws whatever better-sqlite3 or the migrations throw; the half-opened
 *   connection is closed first.
 */
export function openConnection(path: string, settings: ConnectionSettings): SqliteConnection {
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { fileMustExist: !settings.create });
    const pageSize = configure(db, settings);
    migrate(db);
    return new SqliteConnection(
      db,
      pageSize,
      commitProbePages(pageSize, settings),
      settings.busyTimeoutMs,
    );
  } catch (e: unknown) {
    db?.close();
    throw e;
  }
}

/** Most pages the committed probe writes (64 KiB at the default page size of 4 KiB). */
const COMMIT_PROBE_MAX_PAGES = 16;

/**
 * Pages of the committed probe: enough that a write of a few hooks fits, at
 * most a sixteenth of the size limit, so that a small `maxSizeBytes` can
 * still pass it, and at least one.
 */
function commitProbePages(pageSize: number, settings: ConnectionSettings): number {
  if (settings.maxSizeBytes === undefined) return COMMIT_PROBE_MAX_PAGES;
  const limitPages = Math.floor(settings.maxSizeBytes / pageSize);
  return Math.max(1, Math.min(COMMIT_PROBE_MAX_PAGES, Math.floor(limitPages / 16)));
}

/**
 * Tells, without writing to it, why the file at `path` is not an agenthooks
 * database that may be reopened: undefined when it is one (written by any
 * schema version from 1 on, and holding the `hooks` table), else the reason
 * in words. A file of schema version 0 (empty, or another program's) is
 * refused: migrating it would create an empty store that answers "no hooks".
 * Opens it read-only, so a file still being copied into place is not
 * initialised or changed.
 *
 * @throws what better-sqlite3 throws when the file cannot be opened or read,
 *   except that a file that is not a database is a reason, not an error.
 */
export function whyNotAgentHooksDatabase(path: string, busyTimeoutMs: number): string | undefined {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version < 1) {
      return 'schema version 0: empty, or not written by agenthooks';
    }
    if (version > SCHEMA_VERSION) {
      // openConnection() refuses it with STORE_NEWER_THAN_CODE.
      return undefined;
    }
    const hooks = db
      .prepare<[], { name: string }>(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'hooks'",
      )
      .get();
    return hooks === undefined ? `schema version ${version} without a hooks table` : undefined;
  } catch (e: unknown) {
    if (
      e instanceof Database.SqliteError &&
      (e.code === 'SQLITE_NOTADB' || e.code === 'SQLITE_CORRUPT')
    ) {
      return `not a database: ${e.message}`;
    }
    throw e;
  } finally {
    db.close();
  }
}

/**
 * The page cache of a connection, in KiB (`PRAGMA cache_size` as a negative
 * number). The soak (`npm run bench -- --soak`, 60 operations/s) held 15 MiB
 * more RSS with better-sqlite3's 16 MB than with this; the decision CPU
 * rows, 100,000 stored operations included, stayed within their spread
 * (BENCHMARKS.md, "The soak's 8 MiB were not a regression"). SQLite sizes
 * its in-memory sorts from it too: a larger sort spills to a temp file.
 */
export const SQLITE_CACHE_KIB = 4096;

/** Sets up a fresh connection and returns its page size; order matters, see each comment. */
function configure(db: Database.Database, settings: ConnectionSettings): number {
  // Waits this long for another connection's lock instead of failing at once
  // with SQLITE_BUSY. Set first, so that the pragmas below wait as well.
  db.pragma(`busy_timeout = ${settings.busyTimeoutMs}`);
  // Write-ahead log: readers and the writer do not block each other, and a
  // commit is one append to the -wal file (better-sqlite3 docs/performance.md).
  // The mode is stored in the file, so this only switches a new database.
  db.pragma('journal_mode = WAL');
  // In WAL mode, NORMAL syncs at checkpoints rather than at every commit: a
  // commit survives a crash of this process (SIGKILL included); only an OS
  // crash or power loss can undo the last commits (https://sqlite.org/pragma.html#pragma_synchronous).
  db.pragma('synchronous = NORMAL');
  // SQLite leaves foreign keys off unless each connection asks; the cascades
  // from operations to hooks and from parked calls to their links need them.
  db.pragma('foreign_keys = ON');
  // better-sqlite3 builds SQLite with a 16 MB page cache per connection
  // (SQLITE_DEFAULT_CACHE_SIZE=-16000); it fills as the file grows and is
  // never given back, a sixth of the sidecar's memory at steady state (see
  // SQLITE_CACHE_KIB). The hook cache answers decisions, so the pages SQLite
  // needs are the indexes' hot edges; others come from the OS's page cache.
  db.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  if (settings.maxSizeBytes !== undefined) {
    // A per-connection limit, not stored in the file, so every reopened
    // connection sets it again; a write that would grow the file past it
    // fails with SQLITE_FULL.
    db.pragma(`max_page_count = ${Math.max(1, Math.floor(settings.maxSizeBytes / pageSize))}`);
  }
  return pageSize;
}

/** Columns of `parked_calls`, in the order the statements below name them. */
const PARKED_CALL_COLUMNS =
  'tool_call_id, operation_id, chain, kind, context, parked_at, final_result, published_at';

/** Parameters of the retention statements. */
interface RetentionBatch {
  readonly cutoff: number;
  readonly limit: number;
}

/**
 * Selects one batch of operations to expire: completed before `@cutoff`, no
 * waiting parked call linked to them, oldest first, at most `@limit`. It
 * walks the partial index `operations_completed_at` in order and stops at the
 * limit; the NOT EXISTS looks the links up by their primary key (operation
 * id first) and each linked call by its primary key. Exported for the
 * query-plan test.
 */
export const SELECT_EXPIRABLE_SQL = `SELECT o.id FROM operations AS o
  WHERE o.status = 'completed' AND o.completed_at < @cutoff
    AND NOT EXISTS (
      SELECT 1 FROM parked_call_operations AS l
      JOIN parked_calls AS p ON p.tool_call_id = l.tool_call_id
      WHERE l.operation_id = o.id AND p.final_result IS NULL)
  ORDER BY o.completed_at
  LIMIT @limit`;

/**
 * Deletes one batch of parked calls published before `@cutoff`, oldest
 * first, at most `@limit`, found through the partial index
 * `parked_calls_published_at`; their links go with them (ON DELETE CASCADE).
 * Exported for the query-plan test.
 */
export const DELETE_PUBLISHED_SQL = `DELETE FROM parked_calls WHERE tool_call_id IN (
  SELECT tool_call_id FROM parked_calls
  WHERE published_at IS NOT NULL AND published_at < @cutoff
  ORDER BY published_at
  LIMIT @limit)`;

/**
 * Deletes one batch of tombstones that expired before `@cutoff`, oldest
 * first, at most `@limit`, found through the partial index
 * `operations_expired_at`. A tombstone that a remaining parked call names (a
 * call published after its operations completed outlives them) stays until
 * retention deletes that call: deleting it would break the foreign keys of
 * `parked_call_operations` and `parked_calls` and fail the whole batch, so
 * the two NOT EXISTS skip it, each through an index whose key starts with
 * `operation_id`. The tombstone's hooks went when it expired; the cascade
 * would take any left. Exported for the query-plan test.
 */
export const DELETE_TOMBSTONES_SQL = `DELETE FROM operations WHERE id IN (
  SELECT o.id FROM operations AS o
  WHERE o.status = 'expired' AND o.expired_at < @cutoff
    AND NOT EXISTS (SELECT 1 FROM parked_call_operations AS l WHERE l.operation_id = o.id)
    AND NOT EXISTS (SELECT 1 FROM parked_calls AS p WHERE p.operation_id = o.id)
  ORDER BY o.expired_at
  LIMIT @limit)`;

/**
 * One open connection and everything prepared on it. Every method is one
 * synchronous statement or transaction; better-sqlite3 rolls a transaction
 * back when its function throws.
 */
export class SqliteConnection {
  /** The better-sqlite3 connection; error mapping asks it whether it is still `open`. */
  readonly db: Database.Database;
  readonly #pageSize: number;
  readonly #append: Database.Transaction<
    (
      operationId: string,
      parentId: string | null,
      rows: readonly HookRow[],
      now: number,
      limits: AppendHooksOptions,
    ) => number
  >;
  readonly #list: Database.Transaction<(operationId: string) => StoredOperation>;
  readonly #delete: Database.Transaction<
    (operationId: string, now: number, plugin: string | undefined) => number
  >;
  readonly #begin: Database.Statement<[]>;
  readonly #insertProbe: Database.Statement<[number]>;
  readonly #rollback: Database.Statement<[]>;
  readonly #commitProbePages: number;
  readonly #writeProbe: Database.Transaction<(bytes: number) => void>;
  readonly #clearProbe: Database.Transaction<() => void>;
  readonly #selectEmail: Database.Statement<[string], { email: string | null }>;
  readonly #upsertUsers: Database.Transaction<
    (users: readonly UserRecord[], now: number) => number
  >;
  readonly #park: Database.Transaction<
    (row: ParkedCallRow, operationIds: readonly string[]) => ParkedCallRow | undefined
  >;
  readonly #selectParked: Database.Statement<[string], ParkedCallRow>;
  readonly #countParked: Database.Statement<[], { n: number }>;
  readonly #dataVersion: Database.Statement<[], number>;
  readonly #listParked: Database.Statement<[string, number], ParkedCallRow>;
  readonly #publish: Database.Transaction<
    (toolCallId: string, result: Uint8Array, at: number) => PublishRowOutcome
  >;
  readonly #selectLease: Database.Statement<[string], LeaseRow>;
  readonly #claim: Database.Transaction<
    (
      toolCallId: string,
      holder: string,
      now: number,
      leaseMs: number,
      replacing: string | undefined,
    ) => ClaimRowOutcome
  >;
  readonly #renewLease: Database.Statement<[number, string, string]>;
  readonly #releaseLease: Database.Statement<[string, string]>;
  readonly #complete: Database.Statement<[{ id: string; at: number }]>;
  readonly #states: Database.Statement<[string], { id: string; status: OperationStatus }>;
  readonly #appendDecisions: Database.Transaction<(rows: readonly DecisionRow[]) => void>;
  /** `listDecisions` statements, one per combination of filters, prepared on first use. */
  readonly #busyTimeoutMs: number;
  readonly #listDecisions = new Map<string, Database.Statement<[object], DecisionTableRow>>();
  readonly #expire: Database.Transaction<
    (batch: RetentionBatch, tombstones: RetentionBatch | undefined, now: number) => ExpiredRows
  >;

  /**
   * @param commitProbePages Pages that {@link SqliteConnection.commitProbe} writes.
   * @param busyTimeoutMs The connection's `busy_timeout`, which
   *   {@link SqliteConnection.appendDecisions} sets aside while it writes.
   */
  constructor(
    db: Database.Database,
    pageSize: number,
    commitProbePages: number,
    busyTimeoutMs: number,
  ) {
    this.db = db;
    this.#pageSize = pageSize;
    this.#commitProbePages = commitProbePages;
    this.#busyTimeoutMs = busyTimeoutMs;

    // Every statement is prepared once, here, for the life of the connection.
    const selectStatus = db.prepare<[string], { status: OperationStatus }>(
      'SELECT status FROM operations WHERE id = ?',
    );
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
    const storedMatchers = db.prepare<[string], { matcher: string }>(
      `SELECT DISTINCT json_extract(config, '$.matcher') AS matcher FROM hooks
       WHERE operation_id = ? AND json_extract(config, '$.matcher') IS NOT NULL`,
    );
    // Bytes, not characters: a TEXT value's length() counts characters.
    const configBytes = db.prepare<[string], { bytes: number }>(
      'SELECT coalesce(sum(length(CAST(config AS BLOB))), 0) AS bytes FROM hooks WHERE operation_id = ?',
    );
    const insertHook = db.prepare<[string, number, string, number, string]>(
      'INSERT INTO hooks (operation_id, seq, hook_id, hook_type, config) VALUES (?, ?, ?, ?, ?)',
    );
    const selectOperation = db.prepare<
      [string],
      { parent_id: string | null; status: OperationStatus }
    >('SELECT parent_id, status FROM operations WHERE id = ?');
    const selectHooks = db.prepare<[string], StoredHookRow>(
      'SELECT seq, hook_id, hook_type, config FROM hooks WHERE operation_id = ? ORDER BY seq',
    );
    const deleteHooks = db.prepare<[string]>('DELETE FROM hooks WHERE operation_id = ?');
    // A hook's plugin is in its JSON config (`toJsonString` omits an empty one).
    const deletePluginHooks = db.prepare<[string, string]>(
      "DELETE FROM hooks WHERE operation_id = ? AND coalesce(json_extract(config, '$.plugin'), '') = ?",
    );
    const touchOperation = db.prepare<[number, string]>(
      'UPDATE operations SET updated_at = ? WHERE id = ?',
    );
    // The write probe of ping(): takes the write lock (BEGIN IMMEDIATE), then
    // inserts a blob of one page, which needs at least one page that is not
    // in use (an overflow page), then rolls back. It therefore fails exactly
    // when a write that adds a page would: locked, read-only, full, damaged.
    this.#begin = db.prepare<[]>('BEGIN IMMEDIATE');
    this.#insertProbe = db.prepare<[number]>('INSERT INTO probe (data) VALUES (zeroblob(?))');
    this.#rollback = db.prepare<[]>('ROLLBACK');
    // The committed probe: a blob written and committed, then deleted in a
    // second transaction. Deleted in the same transaction, it would leave
    // little to write at the commit (SQLite need not write a freed page).
    const deleteProbe = db.prepare<[]>('DELETE FROM probe');
    this.#writeProbe = db.transaction((bytes: number) => {
      // A row left by a probe whose second transaction failed goes first.
      deleteProbe.run();
      this.#insertProbe.run(bytes);
    });
    this.#clearProbe = db.transaction(() => {
      deleteProbe.run();
    });
    this.#selectEmail = db.prepare<[string], { email: string | null }>(
      'SELECT email FROM users WHERE id = ?',
    );
    const upsertUser = db.prepare<[string, string | null, number]>(
      `INSERT INTO users (id, email, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET email = excluded.email, updated_at = excluded.updated_at`,
    );
    const insertOperationIfMissing = db.prepare<[string, number, number]>(
      `INSERT INTO operations (id, parent_id, created_at, updated_at) VALUES (?, NULL, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
    );
    this.#selectParked = db.prepare<[string], ParkedCallRow>(
      `SELECT ${PARKED_CALL_COLUMNS} FROM parked_calls WHERE tool_call_id = ?`,
    );
    this.#countParked = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM parked_calls');
    this.#dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    // No index on operation_id: the console's reads are rare and bounded by the limit.
    this.#listParked = db.prepare<[string, number], ParkedCallRow>(
      `SELECT ${PARKED_CALL_COLUMNS} FROM parked_calls WHERE operation_id = ?
       ORDER BY parked_at DESC, tool_call_id LIMIT ?`,
    );
    const insertParked = db.prepare<[ParkedCallRow]>(
      `INSERT INTO parked_calls (${PARKED_CALL_COLUMNS}) VALUES
       (@tool_call_id, @operation_id, @chain, @kind, @context, @parked_at, @final_result, @published_at)`,
    );
    const insertLink = db.prepare<[string, string]>(
      'INSERT INTO parked_call_operations (operation_id, tool_call_id) VALUES (?, ?)',
    );
    // One conditional write is the whole arbitration: of any number of
    // publications, across connections and processes, exactly one finds the
    // placeholder empty (the write lock serialises them).
    // Publishing ends the lease too: nobody runs the controls of a published call.
    const fillPlaceholder = db.prepare<[Uint8Array, number, string]>(
      `UPDATE parked_calls SET final_result = ?, published_at = ?,
         lease_holder = NULL, lease_expires_at = NULL
       WHERE tool_call_id = ? AND final_result IS NULL`,
    );
    this.#selectLease = db.prepare<[string], LeaseRow>(
      `SELECT final_result IS NOT NULL AS published, lease_holder, lease_expires_at
       FROM parked_calls WHERE tool_call_id = ?`,
    );
    const takeLease = db.prepare<[string, number, string]>(
      'UPDATE parked_calls SET lease_holder = ?, lease_expires_at = ? WHERE tool_call_id = ?',
    );
    this.#renewLease = db.prepare<[number, string, string]>(
      `UPDATE parked_calls SET lease_expires_at = ?
       WHERE tool_call_id = ? AND lease_holder = ? AND final_result IS NULL`,
    );
    this.#releaseLease = db.prepare<[string, string]>(
      `UPDATE parked_calls SET lease_holder = NULL, lease_expires_at = NULL
       WHERE tool_call_id = ? AND lease_holder = ?`,
    );
    const selectFinal = db.prepare<
      [string],
      { final_result: Uint8Array | null; published_at: number | null }
    >('SELECT final_result, published_at FROM parked_calls WHERE tool_call_id = ?');
    // Retention counts from the last completion; a tombstone stays a tombstone.
    this.#complete = db.prepare<[{ id: string; at: number }]>(
      `INSERT INTO operations (id, parent_id, created_at, updated_at, status, completed_at)
       VALUES (@id, NULL, @at, @at, 'completed', @at)
       ON CONFLICT (id) DO UPDATE SET
         status = 'completed',
         completed_at = max(coalesce(operations.completed_at, excluded.completed_at), excluded.completed_at),
         updated_at = excluded.updated_at
       WHERE operations.status <> 'expired'`,
    );
    // One bound parameter (a JSON array) whatever the number of ids.
    this.#states = db.prepare<[string], { id: string; status: OperationStatus }>(
      'SELECT id, status FROM operations WHERE id IN (SELECT value FROM json_each(?))',
    );
    const selectExpirable = db.prepare<[RetentionBatch], { id: string }>(SELECT_EXPIRABLE_SQL);
    const markExpired = db.prepare<[{ id: string; now: number }]>(
      "UPDATE operations SET status = 'expired', updated_at = @now, expired_at = @now WHERE id = @id",
    );
    const deletePublished = db.prepare<[RetentionBatch]>(DELETE_PUBLISHED_SQL);
    const deleteTombstones = db.prepare<[RetentionBatch]>(DELETE_TOMBSTONES_SQL);
    const deleteDecisions = db.prepare<[RetentionBatch]>(DELETE_DECISIONS_SQL);
    const insertDecision = db.prepare<[DecisionTableRow]>(
      `INSERT INTO decisions (decision_id, time, operation_id, outcome, record)
       VALUES (@decision_id, @time, @operation_id, @outcome, @record)
       ON CONFLICT (decision_id) DO NOTHING`,
    );
    this.#appendDecisions = db.transaction((rows: readonly DecisionRow[]) => {
      for (const row of rows) {
        insertDecision.run({
          decision_id: row.decisionId,
          time: row.time,
          operation_id: row.operationId,
          outcome: row.outcome,
          record: row.record,
        });
      }
    });

    this.#append = db.transaction(
      (
        operationId: string,
        parentId: string | null,
        rows: readonly HookRow[],
        now: number,
        limits: AppendHooksOptions,
      ) => {
        const { maxConfigBytes, maxHooks, checkMatchers } = limits;
        if (selectStatus.get(operationId)?.status === 'expired') {
          throw operationExpiredError(operationId);
        }
        if (maxConfigBytes !== undefined) {
          // In the write transaction, so concurrent appends (from any process) cannot both fit.
          const adding = rows.reduce((sum, row) => sum + Buffer.byteLength(row.config, 'utf8'), 0);
          const stored = configBytes.get(operationId)?.bytes ?? 0;
          if (stored + adding > maxConfigBytes) {
            throw hookConfigTooLargeError(maxConfigBytes, stored, adding);
          }
        }
        upsertOperation.run(operationId, parentId, now, now);
        const existing = countHooks.get(operationId) ?? { count: 0, last: 0 };
        // In the write transaction, so concurrent appends (from any process) cannot both fit.
        if (maxHooks !== undefined && existing.count + rows.length > maxHooks) {
          throw tooManyHooksError(maxHooks, existing.count, rows.length);
        }
        checkMatchers?.(storedMatchers.all(operationId).map((r) => r.matcher));
        let seq = existing.last;
        for (const row of rows) {
          seq += 1;
          insertHook.run(operationId, seq, row.hookId, row.hookType, row.config);
        }
        return existing.count + rows.length;
      },
    );
    // One read transaction, so that the status, the parent and the hooks come
    // from the same snapshot.
    this.#list = db.transaction((operationId: string): StoredOperation => {
      const operation = selectOperation.get(operationId);
      return {
        status: operation?.status,
        parentId: operation?.parent_id ?? null,
        rows: selectHooks.all(operationId),
      };
    });
    // The operation row stays (with its parent): only the hooks are purged.
    this.#delete = db.transaction(
      (operationId: string, now: number, plugin: string | undefined) => {
        const { changes } =
          plugin === undefined
            ? deleteHooks.run(operationId)
            : deletePluginHooks.run(operationId, plugin);
        if (changes > 0) {
          touchOperation.run(now, operationId);
        }
        return changes;
      },
    );
    // One transaction for a whole import: all users or none.
    this.#upsertUsers = db.transaction((users: readonly UserRecord[], now: number) => {
      for (const user of users) upsertUser.run(user.id, user.email, now);
      return users.length;
    });
    // Returns the existing row, or undefined when this call inserted one.
    this.#park = db.transaction((row: ParkedCallRow, operationIds: readonly string[]) => {
      const existing = this.#selectParked.get(row.tool_call_id);
      if (existing !== undefined) {
        return existing;
      }
      for (const operationId of operationIds) {
        if (selectStatus.get(operationId)?.status === 'expired') {
          throw operationExpiredError(operationId);
        }
      }
      for (const operationId of operationIds) {
        insertOperationIfMissing.run(operationId, row.parked_at, row.parked_at);
      }
      insertParked.run(row);
      for (const operationId of operationIds) {
        insertLink.run(operationId, row.tool_call_id);
      }
      return undefined;
    });
    this.#publish = db.transaction(
      (toolCallId: string, result: Uint8Array, at: number): PublishRowOutcome => {
        if (fillPlaceholder.run(result, at, toolCallId).changes === 1) {
          return { published: true };
        }
        const stored = selectFinal.get(toolCallId);
        if (stored === undefined) {
          return undefined;
        }
        if (stored.final_result === null) {
          // Unreachable: the UPDATE above fills an empty placeholder.
          throw new Error(`the placeholder of ${toolCallId} is empty after a conditional write`);
        }
        return {
          published: false,
          stored: stored.final_result,
          publishedAt: stored.published_at ?? 0,
        };
      },
    );
    // Under the write lock, so that of concurrent claims (from any process)
    // exactly one finds the lease free or lapsed.
    this.#claim = db.transaction(
      (
        toolCallId: string,
        holder: string,
        now: number,
        leaseMs: number,
        replacing: string | undefined,
      ): ClaimRowOutcome => {
        const row = this.#selectParked.get(toolCallId);
        if (row === undefined) return undefined;
        if (row.final_result !== null) return { state: 'published', row };
        const held = runningLease(this.#selectLease.get(toolCallId), now, replacing);
        if (held !== undefined) return held;
        takeLease.run(holder, now + leaseMs, toolCallId);
        return { state: 'claimed', row };
      },
    );
    // Published calls go first, so that their links no longer hold back the
    // operations and tombstones they named.
    this.#expire = db.transaction(
      (batch: RetentionBatch, tombstoneBatch: RetentionBatch | undefined, now: number) => {
        const parkedCalls = deletePublished.run(batch).changes;
        const operations = selectExpirable.all(batch).map((row) => row.id);
        for (const id of operations) {
          deleteHooks.run(id);
          markExpired.run({ id, now });
        }
        const tombstones =
          tombstoneBatch === undefined ? 0 : deleteTombstones.run(tombstoneBatch).changes;
        const decisions = deleteDecisions.run(batch).changes;
        return { operations, parkedCalls, tombstones, decisions };
      },
    );
  }

  /** Appends hooks in one write transaction; see `HookStore.appendHooks`. */
  appendHooks(
    operationId: string,
    parentId: string | null,
    rows: readonly HookRow[],
    now: number,
    limits: AppendHooksOptions = {},
  ): number {
    // IMMEDIATE takes the write lock up front, where busy_timeout applies.
    // A deferred transaction that has already read does not wait at its
    // first write (SQLite skips the busy handler there, and in WAL mode
    // fails with SQLITE_BUSY_SNAPSHOT if another commit came in between).
    return this.#append.immediate(operationId, parentId, rows, now, limits);
  }

  /** Reads an operation's status, parent and hooks in one snapshot. */
  listHooks(operationId: string): StoredOperation {
    return this.#list.deferred(operationId);
  }

  /** Deletes an operation's hooks (only `plugin`'s, when given); returns how many. */
  deleteHooks(operationId: string, now: number, plugin?: string): number {
    return this.#delete.immediate(operationId, now, plugin);
  }

  /** Proves that a write can take the lock and allocate a page, leaving no trace. */
  probe(): void {
    this.#begin.run();
    try {
      this.#insertProbe.run(this.#pageSize);
    } finally {
      // SQLite may already have rolled back (SQLITE_FULL can end the transaction).
      if (this.db.inTransaction) {
        this.#rollback.run();
      }
    }
  }

  /**
   * Proves that a write needing fresh pages reaches the disk: commits a blob
   * of a few pages (see `commitProbePages`), then deletes it in a second
   * transaction. {@link SqliteConnection.probe} rolls back in memory, so it
   * cannot see a failure that only the write of the `-wal` file at the commit
   * meets: a full disk (`SQLITE_FULL`), a file-size limit or a failing device
   * (`SQLITE_IOERR`). Leaves the pages on the free list; when the second
   * transaction fails, the row stays until the next probe deletes it.
   */
  commitProbe(): void {
    this.#writeProbe.immediate(this.#commitProbePages * this.#pageSize);
    this.#clearProbe.immediate();
  }

  /**
   * Copies the whole log into the database file and empties the `-wal` file
   * (`PRAGMA wal_checkpoint(TRUNCATE)`); true when it did, false when
   * another connection's read kept part of the log.
   */
  drainLog(): boolean {
    const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return result?.busy === 0;
  }

  /** The user's stored email, or null. */
  lookupUserEmail(userId: string): string | null {
    return this.#selectEmail.get(userId)?.email ?? null;
  }

  /** Inserts or replaces users in one write transaction. */
  upsertUsers(users: readonly UserRecord[], now: number): number {
    return this.#upsertUsers.immediate(users, now);
  }

  /**
   * Inserts a parked call, its missing operations and its links in one write
   * transaction, unless one exists; returns the existing row, else undefined.
   */
  parkCall(row: ParkedCallRow, operationIds: readonly string[]): ParkedCallRow | undefined {
    return this.#park.immediate(row, operationIds);
  }

  /** The stored row of a parked call, or undefined. */
  getParkedCall(toolCallId: string): ParkedCallRow | undefined {
    return this.#selectParked.get(toolCallId);
  }

  /** The operation's parked calls, the most recently parked first, at most `limit`. */
  listParkedCalls(operationId: string, limit: number): ParkedCallRow[] {
    return this.#listParked.all(operationId, limit);
  }

  /** How many parked calls (waiting or published) the file holds. */
  countParkedCalls(): number {
    return this.#countParked.get()?.n ?? 0;
  }

  /**
   * SQLite's `data_version` of this connection: it changes when another
   * connection (another process's, or another store's) commits to the file,
   * and not for this connection's own commits.
   */
  dataVersion(): number {
    return this.#dataVersion.get() ?? 0;
  }

  /** Fills an empty placeholder; see {@link PublishRowOutcome}. */
  publish(toolCallId: string, result: Uint8Array, at: number): PublishRowOutcome {
    return this.#publish.immediate(toolCallId, result, at);
  }

  /**
   * Takes the publication lease for `leaseMs` from `now` when it is free or
   * lapsed. A lease that a read shows running (or a published result) is
   * answered without the write lock, so that waiting duplicates polling it
   * do not queue behind writers.
   */
  claim(
    toolCallId: string,
    holder: string,
    now: number,
    leaseMs: number,
    replacing?: string,
  ): ClaimRowOutcome {
    const lease = this.#selectLease.get(toolCallId);
    if (lease === undefined) return undefined;
    if (lease.published !== 0) {
      // A final result never changes: a plain read answers it.
      const row = this.#selectParked.get(toolCallId);
      return row === undefined ? undefined : { state: 'published', row };
    }
    const held = runningLease(lease, now, replacing);
    if (held !== undefined) return held;
    return this.#claim.immediate(toolCallId, holder, now, leaseMs, replacing);
  }

  /** Extends `holder`'s lease to `expiresAt`; false when it holds none. */
  renewLease(toolCallId: string, holder: string, expiresAt: number): boolean {
    return this.#renewLease.run(expiresAt, toolCallId, holder).changes === 1;
  }

  /** Clears `holder`'s lease, if it holds it. */
  releaseLease(toolCallId: string, holder: string): void {
    this.#releaseLease.run(toolCallId, holder);
  }

  /** Marks an operation completed (creating it when missing). */
  markCompleted(operationId: string, at: number): void {
    this.#complete.run({ id: operationId, at });
  }

  /** The stored status of each known operation among `operationIds`. */
  operationStatuses(operationIds: readonly string[]): Map<string, OperationStatus> {
    const rows = this.#states.all(JSON.stringify(operationIds));
    return new Map(rows.map((row) => [row.id, row.status]));
  }

  /**
   * Removes one retention batch in one write transaction: published calls
   * and completed operations before `cutoff`, and, when `tombstoneCutoff` is
   * given, tombstones that expired before it; at most `limit` of each kind.
   */
  expire(cutoff: number, limit: number, now: number, tombstoneCutoff?: number): ExpiredRows {
    const tombstones =
      tombstoneCutoff === undefined ? undefined : { cutoff: tombstoneCutoff, limit };
    return this.#expire.immediate({ cutoff, limit }, tombstones, now);
  }

  /**
   * Inserts audit entries in one write transaction, skipping ids already
   * stored. It does not wait for another connection's write lock: the wait
   * would hold the event loop, and every decision with it, for up to the
   * busy timeout per try, where the audit sink can keep its entries and try
   * again later. A held lock fails at once with `STORE_LOCKED`.
   */
  appendDecisions(rows: readonly DecisionRow[]): void {
    this.db.pragma('busy_timeout = 0');
    try {
      this.#appendDecisions.immediate(rows);
    } finally {
      this.db.pragma(`busy_timeout = ${this.#busyTimeoutMs}`);
    }
  }

  /** Audit entries matching `query`, newest first. */
  listDecisions(query: DecisionQuery): DecisionRow[] {
    const where: string[] = [];
    if (query.operationId !== undefined) where.push('operation_id = @operationId');
    if (query.from !== undefined) where.push('time >= @from');
    if (query.to !== undefined) where.push('time < @to');
    if (query.outcome !== undefined) where.push('outcome = @outcome');
    if (query.before !== undefined) where.push('(time, decision_id) < (@beforeTime, @beforeId)');
    const sql = `SELECT decision_id, time, operation_id, outcome, record FROM decisions
      ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
      ORDER BY time DESC, decision_id DESC LIMIT @limit`;
    let statement = this.#listDecisions.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare<[object], DecisionTableRow>(sql);
      this.#listDecisions.set(sql, statement);
    }
    const params: Record<string, string | number> = { limit: query.limit };
    if (query.operationId !== undefined) params.operationId = query.operationId;
    if (query.from !== undefined) params.from = query.from;
    if (query.to !== undefined) params.to = query.to;
    if (query.outcome !== undefined) params.outcome = query.outcome;
    if (query.before !== undefined) {
      params.beforeTime = query.before.time;
      params.beforeId = query.before.decisionId;
    }
    const rows: DecisionRow[] = [];
    // Row by row, so that rows past the byte bound are never read.
    let bytesBeforeLast = 0;
    let lastBytes = 0;
    for (const row of statement.iterate(params)) {
      if (query.maxBytes !== undefined && bytesBeforeLast > query.maxBytes) break;
      rows.push({
        decisionId: row.decision_id,
        time: row.time,
        operationId: row.operation_id,
        outcome: row.outcome,
        record: row.record,
      });
      bytesBeforeLast += lastBytes;
      lastBytes = row.record.byteLength;
    }
    return rows;
  }

  /**
   * Closes the connection after `PRAGMA optimize`, which refreshes the
   * planner statistics this connection found missing (recommended before
   * closing, https://sqlite.org/lang_analyze.html). Closes even when the
   * pragma fails, then rethrows.
   */
  close(): void {
    try {
      this.db.pragma('optimize');
    } finally {
      this.db.close();
    }
  }
}
