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
import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { StoreUnavailableError } from '../errors.js';

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
 * process that holds it (one that is shutting down) to let go. Answers
 * `undefined` when the lock file cannot be written (a read-only folder or
 * file): such a store cannot be written by a second sidecar either.
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
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { timeout: waitMs });
    // SQLite opens a file it may not write read-only, and a read-only
    // connection locks nothing: that is no lock.
    if (db.readonly) {
      db.close();
      return undefined;
    }
    // Held from the first write until the connection closes; the write (the
    // holder's PID, for whoever inspects the file) makes sure it is a write lock.
    db.pragma('locking_mode = EXCLUSIVE');
    // No `-journal` file beside it: the lock file is all there is.
    db.pragma('journal_mode = MEMORY');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)');
    db.exec('DELETE FROM holder');
    db.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
    db.exec('COMMIT');
  } catch (e: unknown) {
    db?.close();
    const code = (e as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
      throw new StoreUnavailableError(
        'STORE_LOCKED',
        `another agenthooks process serves the store at ${dbPath} (it holds ${path}); one sidecar per database file, or PostgreSQL for several`,
        { cause: e },
      );
    }
    if (typeof code === 'string' && /^SQLITE_(CANTOPEN|READONLY|PERM|AUTH)/.test(code)) {
      return undefined;
    }
    throw e;
  }
  const held = db;
  const locked = statSync(path, { bigint: true });
  let released = false;
  return {
    path,
    stillHeld() {
      const now = statSync(path, { bigint: true, throwIfNoEntry: false });
      return !released && now?.ino === locked.ino && now.dev === locked.dev;
    },
    release() {
      if (released) return;
      released = true;
      held.close();
    },
  };
}
