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
 * The health check pings while the store is unhealthy, so the store recovers
 * when the operator fixes the fault, while ordinary calls fail fast.
 *
 * A file removed or replaced while open: the connection would keep writing
 * into the old inode, which no restart finds again, and a new connection
 * would pair the file now at the path with the old file's `-wal` log.
 * `quickCheck()` (and `ping()`) compare the device and inode at the path, and
 * at the `-wal` path, with those recorded at open. On a difference the store
 * copies the old log into the old file, empties the `-wal` file, closes the
 * connection and fails every call with `STORE_FILE_MISSING` or
 * `STORE_FILE_REPLACED`; `ping()` reopens once an agenthooks database is at
 * the path again (checked read-only first: an empty or foreign file is never
 * migrated into an empty store).
 *
 * A commit can fail where the rolled-back probe of `ping()` succeeds: SQLite
 * writes the `-wal` file only at the commit, so a full disk (`STORE_FULL`) or
 * a failing device (`STORE_UNAVAILABLE`) never shows in a probe that rolls
 * back in memory. A write that failed so is remembered: `quickCheck()` fails
 * with it, and `ping()` commits its probe until one commits.
 */
import {
  type BigIntStats,
  existsSync,
  linkSync,
  mkdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname } from 'node:path';
import type { ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { type AgentHooksError, StoreUnavailableError } from '../errors.js';
import { extend } from '../extend.js';
import { type FileIdentity, sameFile, statPath } from './file-identity.js';
import { fromHookRow, toHookRow } from './hook-codec.js';
import {
  assertEpochMs,
  assertLease,
  claimAnswer,
  decodeResult,
  encodeResult,
  fromParkedCallRow,
  toParkedCallRow,
} from './parked-codec.js';
import {
  type ConnectionSettings,
  openConnection,
  type SqliteConnection,
  whyNotAgentHooksDatabase,
} from './sqlite-connection.js';
import { storeErrorFromSqlite } from './sqlite-error.js';
import { holdStoreLock, type StoreLock } from './sqlite-lock.js';
import {
  type AppendHooksOptions,
  type DecisionQuery,
  type DecisionRow,
  type DecisionStore,
  type ExpireResult,
  type HookStore,
  type NewParkedCall,
  type OperationHooks,
  type OperationState,
  operationExpiredError,
  type ParkedCallRecord,
  type ParkOutcome,
  type ParkStore,
  type PublicationClaim,
  type PublishOutcome,
  parkedCallNotFoundError,
  type RetentionStore,
  STORE_FILE_MISSING,
  STORE_FILE_REPLACED,
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

/**
 * Failures of a write that the rolled-back probe cannot see, because they
 * happen when the commit writes the `-wal` file: a full disk or size limit,
 * and I/O errors. After one, `ping()` commits its probe.
 */
const COMMIT_FAILURE_REASONS: ReadonlySet<string> = new Set<StoreErrorReason>([
  'STORE_FULL',
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
   * When set, the store holds `<path>.lock` while it is open, waiting up to
   * this many milliseconds for another holder (a sidecar shutting down) to
   * let go, so that two sidecars never serve one file (`sqlite-lock.ts`);
   * another holder fails the open with `STORE_LOCKED`. `agenthooks serve`
   * sets it; tools that work beside a running sidecar do not. Default: no lock.
   */
  readonly lockWaitMs?: number;
  /**
   * Called when this open made the database file (none was at `path`): a
   * start that then fails may remove it, and only then. Default none.
   */
  readonly onCreated?: () => void;
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
export interface SqliteStore
  extends HookStore,
    UserStore,
    ParkStore,
    RetentionStore,
    DecisionStore {
  /** Path of the database file, as given to {@link openSqliteStore}. */
  readonly path: string;
  /**
   * Whether the store holds its lock file: false when it was asked to
   * ({@link SqliteStoreOptions.lockWaitMs}) but the file could not be written.
   */
  readonly locked: boolean;
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
  const { lockWaitMs } = options;
  if (lockWaitMs !== undefined && (!Number.isSafeInteger(lockWaitMs) || lockWaitMs < 0)) {
    throw new RangeError(`lockWaitMs must be a non-negative integer, got ${lockWaitMs}`);
  }
  let connection: SqliteConnection | undefined;
  let lock: StoreLock | undefined;
  let why: string | undefined;
  try {
    makeParents(dirname(path));
    // Before anything is created or read: the holder may be migrating it.
    if (lockWaitMs !== undefined) lock = holdStoreLock(path, lockWaitMs);
    // A new database is made whole under another name and linked into place,
    // so the path never holds a file a start left half-made (one killed
    // before its migration committed).
    if (!existsSync(path) && createDatabase(path, settings)) options.onCreated?.();
    // A file already there must be an agenthooks database: migrating an empty
    // one (truncated, or left by a lost volume) or another program's would
    // start an empty store that answers "no hooks", and allow.
    why = whyNotAgentHooksDatabase(path, busyTimeoutMs);
  } catch (e: unknown) {
    lock?.release();
    if (e instanceof StoreUnavailableError) throw e;
    throw storeErrorFromSqlite(e, `open the store at ${path}`);
  }
  if (why !== undefined) {
    lock?.release();
    throw new StoreUnavailableError(
      'STORE_CORRUPT',
      `cannot open the store at ${path}: it is not an agenthooks database (${why}); move it away to start an empty store`,
    );
  }
  try {
    connection = openConnection(path, settings);
    return new SqliteStoreImpl(
      path,
      settings,
      connection,
      recordFiles(path),
      options.observe,
      lock,
    );
  } catch (e: unknown) {
    closeQuietly(connection);
    lock?.release();
    throw storeErrorFromSqlite(e, `open the store at ${path}`);
  }
}

/**
 * Makes a new, migrated database at `path`: under a name of this process's
 * (`<path>.creating-<pid>`), closed (its log checkpointed into it), then
 * hard-linked to `path`, which fails if another process got there first (its
 * database is then the one used) and never replaces a file. A creation cut
 * short leaves only the temporary file, which the next creation by the same
 * PID replaces. Answers whether this call put the file at `path`.
 */
function createDatabase(path: string, settings: ConnectionSettings): boolean {
  const temporary = `${path}.creating-${process.pid}`;
  for (const suffix of ['', '-wal', '-shm']) rmSync(temporary + suffix, { force: true });
  // Readable by the sidecar's user only: the file holds header values and,
  // with --audit-payloads, tool arguments. SQLite gives its -wal and -shm
  // files the mode of the database file.
  writeFileSync(temporary, '', { mode: PRIVATE_FILE_MODE, flag: 'wx' });
  const fresh = openConnection(temporary, settings);
  fresh.close();
  try {
    linkSync(temporary, path);
    return true;
  } catch (e: unknown) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    // A file system without hard links: a rename, which does not check for a rival.
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS') throw e;
    if (existsSync(path)) return false;
    renameSync(temporary, path);
    return true;
  } finally {
    for (const suffix of ['', '-wal', '-shm']) rmSync(temporary + suffix, { force: true });
  }
}

/**
 * Creates `dir` and its missing ancestors, one level at a time from the top.
 * Node's recursive `mkdirSync` spins forever under `/proc` and reports a
 * read-only filesystem as ENOENT; one level at a time fails at once with the
 * error of the level that cannot be made (EROFS, EACCES, ENOENT, ...).
 */
function makeParents(dir: string): void {
  const missing: string[] = [];
  for (let at = dir; !existsSync(at); at = dirname(at)) {
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const level of missing.reverse()) mkdirSync(level, { mode: PRIVATE_DIR_MODE });
}

/** Mode of the files the store creates (before the umask): the sidecar's user only. */
const PRIVATE_FILE_MODE = 0o600;
/** Mode of the folders the store creates (before the umask). */
const PRIVATE_DIR_MODE = 0o700;

/** The files of an open connection, as found at their paths right after it opened. */
interface OpenedFiles {
  readonly db: FileIdentity;
  /** Undefined when there was no `-wal` file yet; recorded when one appears. */
  readonly wal: FileIdentity | undefined;
}

/** The state of a store whose file left its path: every call fails until `ping()` reopens one. */
interface LostFile {
  reason: typeof STORE_FILE_MISSING | typeof STORE_FILE_REPLACED;
  /** What happened, in words, for the messages. */
  detail: string;
  /** The files of the connection that was closed. */
  readonly files: OpenedFiles;
  /**
   * Device, inode, size and modification time of the last file at the path found not
   * to be an agenthooks database, so that an unchanged file is not opened again.
   */
  refused?: string;
}

/** Path of the write-ahead log of the database at `path`. */
function walPathOf(path: string): string {
  return `${path}-wal`;
}

/**
 * Records the files of a connection just opened at `path`. better-sqlite3
 * gives no access to its file descriptors, so the paths are stat'ed; a file
 * swapped in between the open and this call is not told apart.
 */
function recordFiles(path: string): OpenedFiles {
  const db = statPath(path);
  if (db === undefined) {
    throw new StoreUnavailableError(
      STORE_FILE_MISSING,
      `${path} was removed while the store opened it`,
    );
  }
  const wal = statPath(walPathOf(path));
  return {
    db: { dev: db.dev, ino: db.ino },
    wal: wal === undefined ? undefined : { dev: wal.dev, ino: wal.ino },
  };
}

class SqliteStoreImpl implements SqliteStore {
  readonly path: string;
  readonly locked: boolean;
  readonly #settings: ConnectionSettings;
  /** The connection calls use; undefined while the file is lost. */
  #connection: SqliteConnection | undefined;
  /** The files of `#connection`. */
  #files: OpenedFiles;
  /** Set while the file opened is gone from its path. */
  #lost: LostFile | undefined;
  /** The last write's failure that only a commit can clear (see `COMMIT_FAILURE_REASONS`). */
  #writeFailure: AgentHooksError | undefined;
  #closed = false;
  readonly #observe: StoreObserver | undefined;
  /**
   * Held until {@link close} (see {@link SqliteStoreOptions.lockWaitMs});
   * taken again by a reopen when its file was replaced and nobody holds the new one.
   */
  #lock: StoreLock | undefined;
  /**
   * At least the number of parked calls in the file, so that a decision on a
   * file with none skips the read: counted once per opened file, raised by
   * every park of this process and lowered by exactly the rows retention
   * deletes (another deletion only leaves it high, which costs a read).
   * Undefined until counted; a reopened file is counted again, and so is a
   * file another connection committed to since the count (another process
   * sharing it may have parked a call: see {@link #parkedVersion}).
   */
  #parkedRows: number | undefined;
  /** The connection's `data_version` when {@link #parkedRows} was counted. */
  #parkedVersion = 0;
  /** Counts the reopenings of the file: see {@link HookStore.cacheGeneration}. */
  #generation = 0;

  constructor(
    path: string,
    settings: ConnectionSettings,
    connection: SqliteConnection,
    files: OpenedFiles,
    observe: StoreObserver | undefined,
    lock: StoreLock | undefined,
  ) {
    this.path = path;
    this.#observe = observe;
    this.#lock = lock;
    this.locked = lock !== undefined;
    // A reopened connection must find the file: never create an empty one.
    this.#settings = extend(settings, { create: false });
    this.#connection = connection;
    this.#files = files;
  }

  async lookupUserEmail(userId: string): Promise<string | null> {
    return this.#run('lookupUserEmail', 'look up a user', 'read', (c) => c.lookupUserEmail(userId));
  }

  async upsertUsers(users: readonly UserRecord[]): Promise<number> {
    return this.#run('upsertUsers', 'import users', 'write', (c) =>
      c.upsertUsers(users, Date.now()),
    );
  }

  async appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
    options: AppendHooksOptions = {},
  ): Promise<number> {
    const rows = hooks.map(toHookRow);
    const parentId =
      parentOperationId === undefined || parentOperationId === '' ? null : parentOperationId;
    return this.#run('appendHooks', 'append hooks', 'write', (c) =>
      c.appendHooks(operationId, parentId, rows, Date.now(), options),
    );
  }

  async listHooks(operationId: string): Promise<OperationHooks> {
    const { status, parentId, rows } = this.#run('listHooks', 'list hooks', 'read', (c) =>
      c.listHooks(operationId),
    );
    if (status === 'expired') {
      throw operationExpiredError(operationId);
    }
    const hooks = rows.map((row) => fromHookRow(operationId, row));
    const known = status !== undefined;
    return parentId === null ? { hooks, known } : { hooks, known, parentOperationId: parentId };
  }

  async deleteHooks(operationId: string, plugin?: string): Promise<number> {
    return this.#run('deleteHooks', 'delete hooks', 'write', (c) =>
      c.deleteHooks(operationId, Date.now(), plugin),
    );
  }

  async parkCall(record: NewParkedCall): Promise<ParkOutcome> {
    const row = toParkedCallRow(record);
    // The call's own operation first, then the chain; each once.
    const operationIds = [...new Set([record.operationId, ...record.chain])];
    const existing = this.#run('parkCall', 'park a tool call', 'write', (c) =>
      c.parkCall(row, operationIds),
    );
    if (existing !== undefined) {
      return { record: fromParkedCallRow(existing), created: false };
    }
    if (this.#parkedRows !== undefined) this.#parkedRows += 1;
    const { toolCallId, operationId, chain, kind, context, parkedAt } = record;
    return {
      record: { toolCallId, operationId, chain: [...chain], kind, context, parkedAt },
      created: true,
    };
  }

  async getParkedCall(toolCallId: string): Promise<ParkedCallRecord | undefined> {
    // Every decision asks; most files hold no parked call at all.
    if (this.#parkedRows === 0) {
      // Zero holds only while no other connection committed since the count.
      const version = this.#run('getParkedCall', 'read a parked call', 'read', (c) =>
        c.dataVersion(),
      );
      if (version !== this.#parkedVersion) this.#parkedRows = undefined;
    }
    if (this.#parkedRows === undefined) {
      // The version first: a commit between the two reads is then seen as new.
      const [version, rows] = this.#run('countParkedCalls', 'count parked calls', 'read', (c) => [
        c.dataVersion(),
        c.countParkedCalls(),
      ]);
      this.#parkedRows = rows;
      this.#parkedVersion = version;
    }
    if (this.#parkedRows === 0) return undefined;
    const row = this.#run('getParkedCall', 'read a parked call', 'read', (c) =>
      c.getParkedCall(toolCallId),
    );
    return row === undefined ? undefined : fromParkedCallRow(row);
  }

  async listParkedCalls(operationId: string, limit: number): Promise<ParkedCallRecord[]> {
    const rows = this.#run('listParkedCalls', 'list parked calls', 'read', (c) =>
      c.listParkedCalls(operationId, limit),
    );
    return rows.map(fromParkedCallRow);
  }

  async publishResult(
    toolCallId: string,
    result: ToolResult,
    publishedAt: number,
  ): Promise<PublishOutcome> {
    assertEpochMs('publishedAt', publishedAt);
    const bytes = encodeResult(result);
    const outcome = this.#run('publishResult', 'publish a deferred result', 'write', (c) =>
      c.publish(toolCallId, bytes, publishedAt),
    );
    if (outcome === undefined) {
      throw parkedCallNotFoundError(toolCallId);
    }
    if (outcome.published) {
      return { published: true, finalResult: result, publishedAt };
    }
    return {
      published: false,
      finalResult: decodeResult(toolCallId, outcome.stored),
      publishedAt: outcome.publishedAt,
    };
  }

  async claimPublication(
    toolCallId: string,
    holder: string,
    leaseMs: number,
    replacing?: string,
  ): Promise<PublicationClaim | undefined> {
    assertLease(holder, leaseMs);
    const outcome = this.#run('claimPublication', 'claim a publication', 'write', (c) =>
      c.claim(toolCallId, holder, Date.now(), leaseMs, replacing),
    );
    if (outcome === undefined) return undefined;
    if (outcome.state === 'held') {
      const expiresInMs = Math.max(0, outcome.expiresAt - Date.now());
      return { state: 'held', holder: outcome.holder, expiresInMs };
    }
    return claimAnswer(outcome.state, outcome.row, () =>
      this.releasePublication(toolCallId, holder),
    );
  }

  async renewPublication(toolCallId: string, holder: string, leaseMs: number): Promise<boolean> {
    assertLease(holder, leaseMs);
    return this.#run('renewPublication', 'renew a publication lease', 'write', (c) =>
      c.renewLease(toolCallId, holder, Date.now() + leaseMs),
    );
  }

  async releasePublication(toolCallId: string, holder: string): Promise<void> {
    this.#run('releasePublication', 'release a publication lease', 'write', (c) =>
      c.releaseLease(toolCallId, holder),
    );
  }

  async operationState(operationIds: readonly string[]): Promise<Map<string, OperationState>> {
    const statuses =
      operationIds.length === 0
        ? new Map<string, OperationState>()
        : this.#run('operationState', 'read operation states', 'read', (c) =>
            c.operationStatuses(operationIds),
          );
    return new Map(operationIds.map((id) => [id, statuses.get(id) ?? 'unknown']));
  }

  async markOperationCompleted(operationId: string, at: number): Promise<void> {
    assertEpochMs('at', at);
    this.#run('markOperationCompleted', 'complete an operation', 'write', (c) =>
      c.markCompleted(operationId, at),
    );
  }

  async expireBefore(
    cutoff: number,
    batchSize: number,
    tombstoneCutoff?: number,
  ): Promise<ExpireResult> {
    assertEpochMs('cutoff', cutoff);
    if (tombstoneCutoff !== undefined) assertEpochMs('tombstoneCutoff', tombstoneCutoff);
    if (!Number.isSafeInteger(batchSize) || batchSize <= 0) {
      throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    }
    const expired = this.#run('expireBefore', 'expire old records', 'write', (c) =>
      c.expire(cutoff, batchSize, Date.now(), tombstoneCutoff),
    );
    if (this.#parkedRows !== undefined) {
      this.#parkedRows = Math.max(0, this.#parkedRows - expired.parkedCalls);
    }
    return expired;
  }

  async appendDecisions(rows: readonly DecisionRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.#run('appendDecisions', 'write decision audit entries', 'write', (c) =>
      c.appendDecisions(rows),
    );
  }

  async listDecisions(query: DecisionQuery): Promise<DecisionRow[]> {
    return this.#run('listDecisions', 'list decision audit entries', 'read', (c) =>
      c.listDecisions(query),
    );
  }

  async quickCheck(): Promise<void> {
    const action = 'check the store files';
    const connection = this.#current(action);
    try {
      this.#verifyFiles(connection);
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, action);
    }
    const failed = this.#writeFailure;
    if (failed !== undefined) {
      throw new StoreUnavailableError(failed.reason, `the last write failed: ${failed.message}`, {
        cause: failed,
      });
    }
  }

  cacheGeneration(): number {
    this.#current('read the store');
    return this.#generation;
  }

  async ping(): Promise<void> {
    const action = 'check the store';
    if (this.#lost !== undefined && !this.#closed) {
      this.#recover(this.#lost);
      return;
    }
    const connection = this.#current(action);
    try {
      this.#verifyFiles(connection);
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, action);
    }
    const commit = this.#writeFailure !== undefined;
    let failure: AgentHooksError;
    try {
      probe(connection, commit);
      this.#writeFailure = undefined;
      return;
    } catch (e: unknown) {
      failure = this.#error(e, action);
    }
    if (COMMIT_FAILURE_REASONS.has(failure.reason)) {
      this.#writeFailure = failure;
    }
    if (!REOPEN_REASONS.has(failure.reason)) {
      throw failure;
    }
    this.#reopen(connection, commit);
    this.#writeFailure = undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) {
      return;
    }
    this.#closed = true;
    const connection = this.#connection;
    try {
      // Undefined when the file was lost: its connection is closed already.
      connection?.close();
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, 'optimize the store before closing');
    } finally {
      // Last: another sidecar may start on the file once it is let go.
      this.#lock?.release();
    }
  }

  /**
   * The connection for a call, or the call's error: `STORE_CLOSED`, or the
   * lost file's reason.
   */
  #current(action: string): SqliteConnection {
    if (this.#closed) {
      throw new StoreUnavailableError('STORE_CLOSED', `cannot ${action}: the store is closed`);
    }
    const lost = this.#lost;
    if (lost !== undefined || this.#connection === undefined) {
      throw new StoreUnavailableError(
        lost?.reason ?? STORE_FILE_MISSING,
        `cannot ${action}: ${lost?.detail ?? 'the database file is lost'}`,
      );
    }
    return this.#connection;
  }

  /**
   * Compares the files at the database and `-wal` paths with those of the
   * connection (two `stat` calls); on a difference, loses the file.
   *
   * @throws StoreUnavailableError `STORE_FILE_MISSING` or `STORE_FILE_REPLACED`.
   * @throws the file-system error when a path cannot be stat'ed.
   */
  #verifyFiles(connection: SqliteConnection): void {
    const lock = this.#lock;
    if (lock !== undefined && !lock.stillHeld()) {
      this.#lose(
        connection,
        STORE_FILE_REPLACED,
        `${lock.path} was removed or replaced while the store was open, so another sidecar could serve ${this.path}`,
      );
    }
    const db = statPath(this.path);
    if (db === undefined) {
      this.#lose(connection, STORE_FILE_MISSING, `${this.path} was removed while open`);
    }
    if (!sameFile(db, this.#files.db)) {
      this.#lose(connection, STORE_FILE_REPLACED, `another file replaced ${this.path} while open`);
    }
    const walPath = walPathOf(this.path);
    const wal = statPath(walPath);
    const expected = this.#files.wal;
    if (expected === undefined) {
      if (wal !== undefined)
        this.#files = extend(this.#files, { wal: { dev: wal.dev, ino: wal.ino } });
      return;
    }
    if (wal === undefined) {
      this.#lose(connection, STORE_FILE_MISSING, `${walPath} was removed while open`);
    }
    if (!sameFile(wal, expected)) {
      this.#lose(connection, STORE_FILE_REPLACED, `another file replaced ${walPath} while open`);
    }
  }

  /**
   * Fails the store closed after its file (or log) left the path: copies the
   * log into the file the connection has open (which saves it when that file
   * still exists, as with a `-wal` file removed or a hard link kept), which
   * also empties the `-wal` file, so that no later connection applies this
   * log to another file; then closes the connection without `PRAGMA
   * optimize`, which would write to the log again.
   */
  #lose(connection: SqliteConnection, reason: LostFile['reason'], detail: string): never {
    this.#lost = { reason, detail, files: this.#files };
    this.#connection = undefined;
    try {
      connection.drainLog();
    } catch (_e: unknown) {
      // The log stays; #recover() refuses to pair it with another file.
    }
    connection.db.close();
    throw new StoreUnavailableError(reason, `the store failed closed: ${detail}`);
  }

  /**
   * Reopens the store once an agenthooks database is at the path again: the
   * lost file itself (a hard link put back) or a restored copy. Refuses a
   * file that is not an agenthooks database, without writing to it, and a
   * `-wal` file still holding the lost file's log next to another file.
   */
  #recover(lost: LostFile): void {
    const action = 'reopen the store';
    const walPath = walPathOf(this.path);
    // Records why the store stays lost, for the calls' errors too.
    const refuse = (reason: LostFile['reason'], detail: string): StoreUnavailableError => {
      lost.reason = reason;
      lost.detail = detail;
      return new StoreUnavailableError(reason, `cannot ${action}: ${detail}`);
    };
    let found: BigIntStats | undefined;
    let log: BigIntStats | undefined;
    try {
      found = statPath(this.path);
      log = statPath(walPath);
    } catch (e: unknown) {
      throw storeErrorFromSqlite(e, action);
    }
    if (found === undefined) {
      throw refuse(STORE_FILE_MISSING, `${this.path} is missing`);
    }
    // The lock first: a file another sidecar serves (it took a new lock file) is not ours to open.
    const lock = this.#lock;
    if (lock !== undefined && !lock.stillHeld()) {
      let again: StoreLock | undefined;
      try {
        again = holdStoreLock(this.path, 0);
      } catch (e: unknown) {
        throw refuse(
          STORE_FILE_REPLACED,
          `${lock.path} was replaced and another process holds it: ${(e as Error).message}`,
        );
      }
      if (again === undefined) {
        throw refuse(STORE_FILE_REPLACED, `${lock.path} was replaced and cannot be locked again`);
      }
      lock.release();
      this.#lock = again;
    }
    const lostLog = lost.files.wal;
    if (
      !sameFile(found, lost.files.db) &&
      log !== undefined &&
      lostLog !== undefined &&
      sameFile(log, lostLog) &&
      log.size > 0n
    ) {
      throw refuse(
        STORE_FILE_REPLACED,
        `${walPath} still holds the log of the database that was at ${this.path}; move it away`,
      );
    }
    const signature = `${found.dev}:${found.ino}:${found.size}:${found.mtimeNs}`;
    if (lost.refused !== signature) {
      let why: string | undefined;
      try {
        why = whyNotAgentHooksDatabase(this.path, this.#settings.busyTimeoutMs);
      } catch (e: unknown) {
        throw storeErrorFromSqlite(e, action);
      }
      lost.refused = why === undefined ? undefined : signature;
      if (why !== undefined) {
        throw refuse(STORE_FILE_REPLACED, `${this.path} is not an agenthooks database (${why})`);
      }
    }
    if (lost.refused !== undefined) {
      throw new StoreUnavailableError(lost.reason, `cannot ${action}: ${lost.detail}`);
    }
    let fresh: SqliteConnection | undefined;
    let files: OpenedFiles;
    try {
      fresh = openConnection(this.path, this.#settings);
      fresh.probe();
      files = recordFiles(this.path);
    } catch (e: unknown) {
      const error = storeErrorFromSqlite(e, action);
      closeQuietly(fresh);
      throw error;
    }
    this.#connection = fresh;
    this.#parkedRows = undefined;
    this.#generation += 1;
    this.#files = files;
    this.#lost = undefined;
    this.#writeFailure = undefined;
  }

  /**
   * Opens a new connection to the file and swaps it in if it can write; the
   * old one is closed then. When the new one cannot write either, it is
   * closed and the old one stays, still serving reads.
   */
  #reopen(stale: SqliteConnection, commit: boolean): void {
    let fresh: SqliteConnection | undefined;
    let files: OpenedFiles;
    try {
      fresh = openConnection(this.path, this.#settings);
      probe(fresh, commit);
      files = recordFiles(this.path);
    } catch (e: unknown) {
      const error = storeErrorFromSqlite(e, 'reopen the store');
      closeQuietly(fresh);
      throw error;
    }
    this.#connection = fresh;
    this.#parkedRows = undefined;
    this.#generation += 1;
    this.#files = files;
    closeQuietly(stale);
  }

  /**
   * Runs `fn` on the current connection, turns whatever it throws into a
   * domain error, remembers a write's failure that only a commit clears,
   * and reports the call to the `observe` option.
   */
  #run<T>(
    operation: string,
    action: string,
    kind: 'read' | 'write',
    fn: (connection: SqliteConnection) => T,
  ): T {
    const observe = this.#observe;
    const started = observe === undefined ? 0 : performance.now();
    try {
      const result = fn(this.#current(action));
      observe?.(operation, 'ok', (performance.now() - started) / 1000);
      return result;
    } catch (e: unknown) {
      const err = this.#error(e, action);
      if (kind === 'write' && COMMIT_FAILURE_REASONS.has(err.reason)) {
        this.#writeFailure = err;
      }
      observe?.(operation, err.reason, (performance.now() - started) / 1000);
      throw err;
    }
  }

  #error(e: unknown, action: string): AgentHooksError {
    return storeErrorFromSqlite(e, action, this.#connection?.db);
  }
}

/** Runs the probe of `ping()`: rolled back, or committed after a write failed at its commit. */
function probe(connection: SqliteConnection, commit: boolean): void {
  if (commit) {
    connection.commitProbe();
  } else {
    connection.probe();
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
