/**
 * @module Schema version 6: the decision audit log (`--audit-store`).
 */
import type Database from 'better-sqlite3';

/**
 * Creates `decisions`. Runs inside the transaction that `migrate()` opens,
 * which also sets `user_version` to 6. Expand-only: a new table.
 *
 * - `decision_id` is the time-ordered UUID the RPC answered; a group commit
 *   retried after an uncertain failure skips the ids it finds.
 * - `time` is the decision's epoch milliseconds; `outcome` the
 *   `DecisionOutcome` number; `record` the whole `DecisionRecord` as binary
 *   protobuf (the columns beside it serve the filters and retention).
 * - `decisions_time` serves the listing of every operation, newest first,
 *   and retention's oldest-first deletes; `decisions_operation` one
 *   operation's listing.
 */
export function migrate006(db: Database.Database): void {
  db.exec(`
    CREATE TABLE decisions (
      decision_id TEXT PRIMARY KEY,
      time INTEGER NOT NULL,
      operation_id TEXT NOT NULL,
      outcome INTEGER NOT NULL,
      record BLOB NOT NULL
    ) STRICT;
    CREATE INDEX decisions_time ON decisions (time, decision_id);
    CREATE INDEX decisions_operation ON decisions (operation_id, time, decision_id);
  `);
}
