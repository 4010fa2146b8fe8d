/**
 * @module Schema version 4: retention tombstones expire, so that the file
 * stops growing at a steady load.
 */
import type Database from 'better-sqlite3';

/**
 * Lets retention delete tombstones. Runs inside the transaction that
 * `migrate()` opens, which also sets `user_version` to 4.
 *
 * - `operations.expired_at` is the epoch milliseconds at which retention
 *   turned the operation into a tombstone (`status = 'expired'`); NULL for
 *   every other status. Tombstones written by version 3 take their
 *   `updated_at`, which retention set at that moment and nothing changes
 *   afterwards (a tombstone refuses appends, and completion skips it).
 *   `updated_at` is not reused: its meaning is "last write", and a later
 *   write path that forgot tombstones would silently move their expiry.
 * - The partial index `operations_expired_at` holds only tombstones, by
 *   expiry time: the sweep walks it oldest first and stops at its limit.
 * - `parked_calls_operation_id` indexes the foreign key `parked_calls
 *   (operation_id)`. Deleting an operation row makes SQLite look for child
 *   rows in every table whose foreign key names `operations`; without this
 *   index that is a scan of `parked_calls` per deleted tombstone
 *   (https://sqlite.org/foreignkeys.html#fk_indexes). The other children
 *   (`hooks`, `parked_call_operations`) have primary keys that start with
 *   `operation_id`.
 */
export function migrate004(db: Database.Database): void {
  db.exec(`
    ALTER TABLE operations ADD COLUMN expired_at INTEGER;
    UPDATE operations SET expired_at = updated_at WHERE status = 'expired';

    CREATE INDEX operations_expired_at ON operations (expired_at)
      WHERE status = 'expired';

    CREATE INDEX parked_calls_operation_id ON parked_calls (operation_id);
  `);
}
