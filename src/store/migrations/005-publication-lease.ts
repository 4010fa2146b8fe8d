/**
 * @module Schema version 5: the publication lease of parked calls, so that
 * of several processes sharing the file only one runs a deferred result's
 * controls at a time.
 */
import type Database from 'better-sqlite3';

/**
 * Adds the lease columns to `parked_calls`. Runs inside the transaction that
 * `migrate()` opens, which also sets `user_version` to 5. Expand-only: two
 * nullable columns, no rewrite of existing rows.
 *
 * - `lease_holder` names the publication in progress (a process's holder id
 *   and a sequence number); NULL while nobody publishes, and again once the
 *   result is published or the holder gave up.
 * - `lease_expires_at` is the epoch milliseconds at which the lease lapses
 *   unless renewed; another process may take it over from then on (its
 *   holder died mid-publication). NULL with `lease_holder`.
 */
export function migrate005(db: Database.Database): void {
  db.exec(`
    ALTER TABLE parked_calls ADD COLUMN lease_holder TEXT;
    ALTER TABLE parked_calls ADD COLUMN lease_expires_at INTEGER;
  `);
}
