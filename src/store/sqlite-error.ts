/**
 * @module Maps the failures of better-sqlite3 (and of the file system while
 * opening) to agenthooks domain errors, in one place, so that no SQLite code
 * escapes `src/store/`.
 */
import Database from 'better-sqlite3';
import { AgentHooksError } from '../errors.js';
import { storeInternalError, storeUnavailableError } from './store.js';

/**
 * Returns the domain error for a failure of `action` on the SQLite store; the
 * original error is kept as `cause`. Domain errors pass through unchanged. A
 * failure that says nothing about the store's health (a constraint, an SQL
 * error, a bug) becomes an `internal` error with reason `STORE_INTERNAL`.
 *
 * @param action What was attempted, in the infinitive (`append hooks`), for the message.
 * @param db The connection, when there is one, to tell a closed store apart.
 * @example
 * try { insert.run(row); } catch (e: unknown) { throw storeErrorFromSqlite(e, 'append hooks', db); }
 */
export function storeErrorFromSqlite(
  e: unknown,
  action: string,
  db?: Database.Database,
): AgentHooksError {
  // Already decided (a refused schema version, a corrupt stored hook): keep it.
  if (e instanceof AgentHooksError) {
    return e;
  }
  // better-sqlite3 throws a plain TypeError ("The database connection is not
  // open") once the connection is closed, so ask the connection instead.
  if (db !== undefined && !db.open) {
    return storeUnavailableError('STORE_CLOSED', action, 'the store is closed', e);
  }
  if (e instanceof Database.SqliteError) {
    // Codes are extended codes (`SQLITE_BUSY_SNAPSHOT`); the primary code is
    // the first two words (https://sqlite.org/rescode.html).
    const primary = e.code.split('_', 2).join('_');
    const detail = `${e.message} (${e.code})`;
    switch (primary) {
      // Another connection holds the write lock past busy_timeout, or a table
      // lock in this connection conflicts.
      case 'SQLITE_BUSY':
      case 'SQLITE_LOCKED':
      // The WAL locking protocol kept failing under contention.
      case 'SQLITE_PROTOCOL':
        return storeUnavailableError('STORE_LOCKED', action, detail, e);
      // The file, its directory or the file system is read-only, or the file
      // was moved or replaced under the connection (SQLITE_READONLY_DBMOVED).
      case 'SQLITE_READONLY':
        return storeUnavailableError('STORE_READ_ONLY', action, detail, e);
      // The disk is full, or the file reached max_page_count (maxSizeBytes).
      case 'SQLITE_FULL':
        return storeUnavailableError('STORE_FULL', action, detail, e);
      // The file is damaged, or is something other than an SQLite database.
      case 'SQLITE_CORRUPT':
      case 'SQLITE_NOTADB':
        return storeUnavailableError('STORE_CORRUPT', action, detail, e);
      // The operating system failed a read, write, lock or open, denied access,
      // or ran out of memory: the store cannot be used right now.
      case 'SQLITE_IOERR':
      case 'SQLITE_CANTOPEN':
      case 'SQLITE_PERM':
      case 'SQLITE_NOLFS':
      case 'SQLITE_NOMEM':
        return storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
      // Constraint, SQL, mismatch, misuse and range errors are bugs of this
      // code (or a schema changed by hand), not an unavailable store.
      default:
        return new AgentHooksError('internal', 'STORE_INTERNAL', `cannot ${action}: ${detail}`, {
          cause: e,
        });
    }
  }
  if (isErrnoException(e)) {
    const detail = `${e.message}`;
    switch (e.code) {
      // Creating the parent directory hit a full disk.
      case 'ENOSPC':
      case 'EDQUOT':
        return storeUnavailableError('STORE_FULL', action, detail, e);
      // Creating the parent directory on a read-only file system.
      case 'EROFS':
        return storeUnavailableError('STORE_READ_ONLY', action, detail, e);
      // Any other file-system failure (EACCES, ENOTDIR, EIO, ...) while opening.
      default:
        return storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
    }
  }
  // Anything else is a bug in this code; fail closed, never as "no hooks".
  return storeInternalError(action, e);
}

function isErrnoException(e: unknown): e is NodeJS.ErrnoException & { code: string } {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string';
}
