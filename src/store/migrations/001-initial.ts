/**
 * @module Schema version 1: operations and their caller hooks.
 */
import type Database from 'better-sqlite3';

/**
 * Creates the `operations` and `hooks` tables. Runs inside the transaction
 * that `migrate()` opens, which also sets `user_version` to 1.
 *
 * - Tables are `STRICT`, so a value of the wrong type is refused instead of
 *   coerced (a numeric-looking id stays TEXT).
 * - `operations.id` is `NOT NULL` as well: in an ordinary rowid table SQLite
 *   lets a non-INTEGER primary key hold NULL.
 * - `hooks` keeps the rowid: `config` can be several kilobytes (a webhook
 *   `body`), which suits a rowid table better than `WITHOUT ROWID`. Its
 *   primary key starts with `operation_id`, so it also indexes the foreign key
 *   that `ON DELETE CASCADE` looks up.
 * - `config` is the hook as canonical proto3 JSON, header templates as the
 *   caller gave them, never resolved values; `hook_id` and `hook_type` repeat
 *   two of its fields for queries. Times are epoch milliseconds.
 */
export function migrate001(db: Database.Database): void {
  db.exec(`
    CREATE TABLE operations (
      id TEXT NOT NULL PRIMARY KEY,
      parent_id TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE hooks (
      operation_id TEXT NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      hook_id TEXT NOT NULL,
      hook_type INTEGER NOT NULL,
      config TEXT NOT NULL,
      PRIMARY KEY (operation_id, seq)
    ) STRICT;
  `);
}
