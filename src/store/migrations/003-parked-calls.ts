/**
 * @module Schema version 3: parked tool calls, deferred-result placeholders,
 * the operation lifecycle that retention works on, and the write probe of
 * `ping()`.
 */
import type Database from 'better-sqlite3';

/**
 * Adds the operation lifecycle and the parked-call tables. Runs inside the
 * transaction that `migrate()` opens, which also sets `user_version` to 3.
 *
 * - `operations.status` is `active`, `completed` or `expired`; an expired
 *   row is a tombstone kept after its hooks were deleted, so that a later
 *   decision fails closed with `OPERATION_EXPIRED` instead of finding no
 *   hooks. Existing rows become `active`. `completed_at` is the epoch
 *   milliseconds of the last completion.
 * - `parked_calls` holds one row per tool call id. `context` and
 *   `final_result` are protobuf binary (`ToolCallContext`, `ToolResult`):
 *   lossless for every message the RPC accepted (JSON cannot hold a NaN in a
 *   `Struct`), and the bytes of the first result are what every duplicate
 *   publication decodes. `chain` is a JSON array of operation ids, oldest
 *   first. `final_result IS NULL` means the placeholder is still empty; the
 *   CHECK keeps `published_at` in step with it.
 * - `parked_call_operations` links a parked call to each distinct operation
 *   of its chain (and its own operation), with foreign keys to both sides; it
 *   lets retention ask "does a waiting call need this operation?" through an
 *   index instead of parsing every chain. Its primary key starts with
 *   `operation_id` (that lookup); the second index serves the cascade from
 *   `parked_calls`.
 * - Partial indexes hold only the rows retention looks for: completed
 *   operations by completion time, and published calls by publication time.
 * - `probe` stays empty: `ping()` inserts a one-page blob there inside a
 *   transaction it rolls back, to prove that a write can take the lock and
 *   allocate a page.
 */
export function migrate003(db: Database.Database): void {
  db.exec(`
    ALTER TABLE operations ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
      CHECK (status IN ('active', 'completed', 'expired'));
    ALTER TABLE operations ADD COLUMN completed_at INTEGER;

    CREATE INDEX operations_completed_at ON operations (completed_at)
      WHERE status = 'completed';

    CREATE TABLE parked_calls (
      tool_call_id TEXT NOT NULL PRIMARY KEY,
      operation_id TEXT NOT NULL REFERENCES operations (id),
      chain TEXT NOT NULL CHECK (json_valid(chain)),
      kind INTEGER NOT NULL CHECK (kind > 0),
      context BLOB NOT NULL,
      parked_at INTEGER NOT NULL,
      final_result BLOB,
      published_at INTEGER,
      CHECK ((final_result IS NULL) = (published_at IS NULL))
    ) STRICT;

    CREATE INDEX parked_calls_published_at ON parked_calls (published_at)
      WHERE published_at IS NOT NULL;

    CREATE TABLE parked_call_operations (
      operation_id TEXT NOT NULL REFERENCES operations (id),
      tool_call_id TEXT NOT NULL REFERENCES parked_calls (tool_call_id) ON DELETE CASCADE,
      PRIMARY KEY (operation_id, tool_call_id)
    ) STRICT, WITHOUT ROWID;

    CREATE INDEX parked_call_operations_tool_call_id ON parked_call_operations (tool_call_id);

    CREATE TABLE probe (
      id INTEGER PRIMARY KEY,
      data BLOB NOT NULL
    ) STRICT;
  `);
}
