/**
 * @module Forward-only schema migrations of the SQLite store. The schema
 * version is `PRAGMA user_version`; migration N takes it from N-1 to N inside
 * its own transaction, so a crash leaves the database at a whole version.
 */
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../errors.js';
import { migrate001 } from './001-initial.js';
import { migrate002 } from './002-users.js';
import { migrate003 } from './003-parked-calls.js';
import { migrate004 } from './004-tombstone-expiry.js';
import { migrate005 } from './005-publication-lease.js';
import { migrate006 } from './006-decisions.js';

/** One migration: changes the schema from the previous version to the next. */
export type Migration = (db: Database.Database) => void;

/** Migrations in order; the one at index i takes the schema from version i to i + 1. */
export const MIGRATIONS: readonly Migration[] = [
  migrate001,
  migrate002,
  migrate003,
  migrate004,
  migrate005,
  migrate006,
];

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings the database to {@link SCHEMA_VERSION}, running each missing
 * migration in its own `BEGIN IMMEDIATE` transaction that also bumps
 * `user_version`. Does nothing when the database is current.
 *
 * @throws StoreUnavailableError with reason `STORE_NEWER_THAN_CODE` when the
 *   database was written by a newer agenthooks; it is left untouched.
 * @example
 * migrate(db); // a fresh file ends at user_version = SCHEMA_VERSION
 */
export function migrate(db: Database.Database): void {
  // Checked outside a write transaction first, so that an up-to-date database
  // opens without taking the write lock (and opens on a read-only file).
  if (checkedVersion(db) === SCHEMA_VERSION) {
    return;
  }
  const step = db.transaction(() => {
    // Read again under the write lock: another process opening the same file
    // may have migrated between the check above and this transaction.
    const version = checkedVersion(db);
    const migration = MIGRATIONS[version];
    if (migration === undefined) {
      return false;
    }
    migration(db);
    // user_version lives in the file header and is written by this transaction.
    db.pragma(`user_version = ${version + 1}`);
    return true;
  });
  while (step.immediate()) {
    // Each pass applies one migration in its own transaction.
  }
}

/** Reads `user_version` and refuses a database newer than {@link SCHEMA_VERSION}. */
function checkedVersion(db: Database.Database): number {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new StoreUnavailableError(
      'STORE_NEWER_THAN_CODE',
      `database schema version ${version} is newer than this agenthooks supports (${SCHEMA_VERSION}); did you start an older agenthooks?`,
      { metadata: { schemaVersion: String(version), supportedVersion: String(SCHEMA_VERSION) } },
    );
  }
  return version;
}
