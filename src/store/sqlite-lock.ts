/**
 * @module One `agenthooks serve` per SQLite database. A second sidecar on
 * the same file would serve from its own hook cache, which the first one's
 * registrations never reach, and both would run retention and recover each
 * other's parked calls. The serving process holds an exclusive lock on a
 * small file beside the database, `<path>.lock`, for as long as its store is
 * open: SQLite's own file lock (`locking_mode = EXCLUSIVE` on a connection to
 * that file), a POSIX record lock that the kernel drops when the process
 * ends, however it ends, so a sidecar killed with SIGKILL leaves no stale
 * lock. The database itself is not locked: `agenthooks users import` and
 * read-only tools (`sqlite3 .backup`) still open it beside a running sidecar.
 */
import { accessSync, constants, statSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { StoreUnavailableError } from '../errors.js';
import { type FileIdentity, sameFile, statPath } from './file-identity.js';

/** The lock a serving process holds on its database. */
export interface StoreLock {
  /** Path of the lock file. */
  readonly path: string;
  /**
   * Whether the file at {@link path} is still the one locked (one `stat`):
   * once it was removed or replaced, another process can lock the new one
   * and serve the database too.
   */
  stillHeld(): boolean;
  /** Releases the lock (closes its connection); safe to call twice. */
  release(): void;
}

/** Path of the lock file of the database at `dbPath`. */
export function lockPathOf(dbPath: string): string {
  return `${dbPath}.lock`;
}

/**
 * Takes the lock of the database at `dbPath`, waiting up to `waitMs` for a
 * process that holds it (one that is shutting down) to let go. The lock
 * counts only when the file locked is still the one at the path once the
 * wait is over (the file waited on may have been removed meanwhile, and a
 * lock on it keeps nobody out): otherwise it is taken again on the file now
 * there, within the same wait. Answers `undefined` when the lock file cannot
 * be written (a read-only folder or file): it would lock nothing.
 *
 * @throws StoreUnavailableError `STORE_LOCKED` when another process still
 *   holds the lock after `waitMs`.
 * @example
 * const lock = holdStoreLock('/var/lib/agenthooks/agenthooks.db', 10_000);
 * // ... serve ...
 * lock?.release();
 */
export function holdStoreLock(dbPath: string, waitMs: number): StoreLock | undefined {
  const path = lockPathOf(dbPath);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const taken = lockOnce(path, Math.max(0, deadline - Date.now()));
    if (taken === undefined) return undefined;
    if (taken === BUSY) {
      // SQLite answers BUSY at once, without waiting, to the one of two
      // connections racing for the lock that would otherwise deadlock (both
      // hold a shared lock, one wants to write): give the other a moment to
      // take it, then wait on it as usual. Only a busy lock past the
      // deadline is another sidecar's.
      if (Date.now() >= deadline) throw lockedError(dbPath, path, undefined);
      pause(RACE_PAUSE_MS + Math.floor(Math.random() * RACE_PAUSE_MS));
      continue;
    }
    const { db, locked } = taken;
    const now = statPath(path);
    if (now !== undefined && sameFile(now, locked)) return heldLock(path, db, locked);
    // The file locked left the path while this waited: lock the one there now.
    db.close();
    if (Date.now() > deadline) throw lockedError(dbPath, path, undefined);
  }
}

/** A lock connection and the file it opened. */
interface Taken {
  readonly db: Database.Database;
  readonly locked: FileIdentity;
}

/** Opens `path` and locks it, waiting up to `waitMs`; `undefined` when it cannot be written. */
/** What {@link lockOnce} answers when SQLite said busy (within or past its wait). */
const BUSY = Symbol('busy');

/** Milliseconds (and as many more, at random) a start that lost a race for the lock pauses. */
const RACE_PAUSE_MS = 20;

/** Sleeps `ms` synchronously, as SQLite's own busy wait does. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function lockOnce(path: string, waitMs: number): Taken | typeof BUSY | undefined {
  let db: Database.Database | undefined;
  try {
    // Made readable by the sidecar's user only, as the database is. An
    // existing lock file is left as it is, and a folder it may not write in
    // is for SQLite's open to report, as before.
    try {
      writeFileSync(path, '', { mode: 0o600, flag: 'wx' });
    } catch {}
    db = new Database(path, { timeout: waitMs });
    // The file just opened (better-sqlite3 gives no access to its descriptor).
    const locked = statSync(path, { bigint: true });
    // SQLite opens a file it may not write read-only, and a read-only
    // connection locks nothing: that is no lock.
    if (!writable(path)) {
      db.close();
      return undefined;
    }
    // An exclusive lock, held from here until the connection closes. Nothing
    // is written: the lock file stays an empty database.
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return { db, locked };
  } catch (e: unknown) {
    db?.close();
    const code = (e as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') return BUSY;
    if (typeof code === 'string' && /^SQLITE_(CANTOPEN|READONLY|PERM|AUTH)/.test(code)) {
      return undefined;
    }
    throw e;
  }
}

function lockedError(dbPath: string, path: string, cause: unknown): StoreUnavailableError {
  return new StoreUnavailableError(
    'STORE_LOCKED',
    `another agenthooks process serves the store at ${dbPath} (it holds ${path}); one sidecar per database file, or PostgreSQL for several`,
    { cause },
  );
}

/** Whether this process may write `path` (as SQLite's open checks it). */
function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function heldLock(path: string, held: Database.Database, locked: FileIdentity): StoreLock {
  let released = false;
  return {
    path,
    stillHeld() {
      const now = statPath(path);
      return !released && now !== undefined && sameFile(now, locked);
    },
    release() {
      if (released) return;
      released = true;
      held.close();
    },
  };
}
