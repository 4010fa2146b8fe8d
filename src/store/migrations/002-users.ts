/**
 * @module Schema version 2: the `users` table of user email enrichment.
 */
import type Database from 'better-sqlite3';

/**
 * Creates the `users` table, the embedded user directory that webhook
 * payloads take `userEmail` from (upstream contract §5). Runs inside the
 * transaction that `migrate()` opens, which also sets `user_version` to 2.
 *
 * - `STRICT`, so an id that looks like a number stays TEXT.
 * - `id` is `NOT NULL` as well: in an ordinary rowid table SQLite lets a
 *   non-INTEGER primary key hold NULL.
 * - `email` may be NULL: a known user without an address, which enrichment
 *   treats like an unknown one (the field is omitted).
 * - `updated_at` is the epoch milliseconds of the last import that wrote the row.
 */
export function migrate002(db: Database.Database): void {
  db.exec(`
    CREATE TABLE users (
      id TEXT NOT NULL PRIMARY KEY,
      email TEXT,
      updated_at INTEGER NOT NULL
    ) STRICT;
  `);
}
