/**
 * @module Forward-only, expand-only schema migrations of the PostgreSQL
 * store, and the lock that applies them once however many pods start
 * together.
 *
 * The schema's history is the table `agenthooks_schema_migrations`: one row
 * per applied migration, written in the migration's own transaction, so a
 * crash leaves the database at a whole version. Each row also records the
 * oldest code version that can still run on the schema it leaves (its
 * minimum-compatible version). An expand-only migration (new tables, new
 * nullable columns, new indexes) keeps the previous minimum, so a pod of the
 * previous release keeps serving while a newer pod migrates; a migration that
 * older code cannot live with raises it, and older pods then refuse to open.
 */
import type { ClientBase } from 'pg';
import { StoreUnavailableError } from '../errors.js';

/** One migration: its version, the minimum-compatible version it leaves, and its SQL. */
export interface PostgresMigration {
  /** The schema version this migration takes the database to (1, 2, ...). */
  readonly version: number;
  /**
   * Oldest code version (a {@link POSTGRES_SCHEMA_VERSION}) that can run on
   * the schema once this migration is applied; never lower than the previous
   * migration's.
   */
  readonly minCompatibleVersion: number;
  /** Statements, run in one transaction. */
  readonly sql: string;
}

/**
 * Key of the session-level advisory lock (`pg_advisory_lock`) that
 * serialises migrations across processes: the first 8 bytes of
 * sha256("agenthooks.store.migrate"), as a signed 64-bit integer.
 */
export const MIGRATION_LOCK_KEY = '-8843709812385773875';

/** The history table; created, outside the numbered migrations, under the lock. */
export const MIGRATIONS_TABLE = 'agenthooks_schema_migrations';

/**
 * Migrations in order. Times are epoch milliseconds in `bigint` columns (the
 * SQLite store's INTEGER), read back as numbers.
 */
export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    // Version 1: the whole store as SQLite has it at its version 4. Every
    // table's name starts with `agenthooks_`, so the store can share a
    // database (or a user directory's `users` table) with the application.
    // - `agenthooks_operations.status` is `active`, `completed` or `expired`; an expired
    //   row is a tombstone kept after its hooks were deleted, so a decision
    //   fails closed with `OPERATION_EXPIRED`. `completed_at` is the last
    //   completion, `expired_at` when retention made the tombstone. Appends
    //   and parks lock the row, which serialises registrations of one
    //   operation across pods.
    // - `agenthooks_hooks.config` is the hook as canonical proto3 JSON in `text`, not
    //   `jsonb`: the bytes stay exactly as written (the config-size limit
    //   counts them) and templates stay unresolved. `hook_id`, `hook_type`
    //   and `plugin` repeat fields of it for queries; `plugin` is '' for a
    //   hook without one. The primary key starts with `operation_id`, so it
    //   also serves the cascade from `agenthooks_operations`.
    // - `agenthooks_parked_calls.context` and `final_result` are protobuf binary in
    //   `bytea`; `chain` is a `jsonb` array of operation ids. An empty
    //   placeholder is `final_result IS NULL`; the CHECK keeps
    //   `published_at` in step.
    // - `agenthooks_parked_call_operations` links a parked call to each operation of
    //   its chain, so retention asks "does a waiting call need this
    //   operation?" through an index.
    // - Partial indexes hold only the rows retention walks: completed
    //   operations, tombstones and published calls, each by its time.
    // - `agenthooks_probe` stays empty: `ping()` inserts a row (a random id) and rolls it back.
    version: 1,
    minCompatibleVersion: 1,
    sql: `
      CREATE TABLE agenthooks_operations (
        id text PRIMARY KEY,
        parent_id text,
        status text NOT NULL DEFAULT 'active'
          CHECK (status IN ('active', 'completed', 'expired')),
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        completed_at bigint,
        expired_at bigint
      );
      CREATE INDEX agenthooks_operations_completed_at ON agenthooks_operations (completed_at)
        WHERE status = 'completed';
      CREATE INDEX agenthooks_operations_expired_at ON agenthooks_operations (expired_at)
        WHERE status = 'expired';

      CREATE TABLE agenthooks_hooks (
        operation_id text NOT NULL REFERENCES agenthooks_operations (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        hook_id text NOT NULL,
        hook_type integer NOT NULL,
        plugin text NOT NULL,
        config text NOT NULL,
        PRIMARY KEY (operation_id, seq)
      );

      CREATE TABLE agenthooks_users (
        id text PRIMARY KEY,
        email text,
        updated_at bigint NOT NULL
      );

      CREATE TABLE agenthooks_parked_calls (
        tool_call_id text PRIMARY KEY,
        operation_id text NOT NULL REFERENCES agenthooks_operations (id),
        chain jsonb NOT NULL CHECK (jsonb_typeof(chain) = 'array'),
        kind integer NOT NULL CHECK (kind > 0),
        context bytea NOT NULL,
        parked_at bigint NOT NULL,
        final_result bytea,
        published_at bigint,
        CHECK ((final_result IS NULL) = (published_at IS NULL))
      );
      CREATE INDEX agenthooks_parked_calls_published_at ON agenthooks_parked_calls (published_at)
        WHERE published_at IS NOT NULL;
      CREATE INDEX agenthooks_parked_calls_operation_id ON agenthooks_parked_calls (operation_id);

      CREATE TABLE agenthooks_parked_call_operations (
        operation_id text NOT NULL REFERENCES agenthooks_operations (id),
        tool_call_id text NOT NULL REFERENCES agenthooks_parked_calls (tool_call_id) ON DELETE CASCADE,
        PRIMARY KEY (operation_id, tool_call_id)
      );
      CREATE INDEX agenthooks_parked_call_operations_tool_call_id ON agenthooks_parked_call_operations (tool_call_id);

      CREATE TABLE agenthooks_probe (
        id integer PRIMARY KEY
      );
    `,
  },
  {
    // Version 2: the publication lease of parked calls (SQLite's version 5),
    // so that of the pods publishing one deferred result only the lease's
    // holder runs the result controls. Expand-only (two nullable columns,
    // no rewrite), so the minimum stays 1: a pod of version 1 keeps serving
    // and publishes without the lease (its conditional write still publishes
    // once).
    // - `lease_holder` names the publication in progress (a process's holder
    //   id and a sequence number); NULL while nobody publishes, and again
    //   once the result is published or the holder gave up.
    // - `lease_expires_at` is the epoch milliseconds of the server's clock at
    //   which the lease lapses unless renewed; another pod may take it over
    //   from then on (its holder died mid-publication).
    version: 2,
    minCompatibleVersion: 1,
    sql: `
      ALTER TABLE agenthooks_parked_calls
        ADD COLUMN lease_holder text,
        ADD COLUMN lease_expires_at bigint;
    `,
  },
  {
    // Version 3: the decision audit log (SQLite's version 6). Expand-only
    // (a new table), so the minimum stays 1: older pods neither read nor
    // write it.
    // - `decision_id` is the time-ordered UUID the RPC answered; a group
    //   commit retried after an uncertain failure skips the ids it finds.
    // - `time` is the decision's epoch milliseconds, `outcome` the
    //   `DecisionOutcome` number, `record` the whole `DecisionRecord` as
    //   binary protobuf; the columns beside it serve filters and retention.
    version: 3,
    minCompatibleVersion: 1,
    sql: `
      CREATE TABLE agenthooks_decisions (
        decision_id text COLLATE "C" PRIMARY KEY,
        time bigint NOT NULL,
        operation_id text NOT NULL,
        outcome integer NOT NULL,
        record bytea NOT NULL
      );
      CREATE INDEX agenthooks_decisions_time ON agenthooks_decisions (time, decision_id);
      CREATE INDEX agenthooks_decisions_operation
        ON agenthooks_decisions (operation_id, time, decision_id);
    `,
  },
  {
    // Version 4: who published a deferred result (PostgreSQL only: SQLite's
    // write answers in process and is never in doubt). Expand-only (one
    // nullable column), so the minimum stays 1: older pods publish without
    // it, and their rows never match a newer pod's marker.
    // - `published_by` is a random id each publication attempt writes with
    //   its result. When the connection drops before the write's answer
    //   comes, the attempt reads the row again and published it iff the row
    //   holds its id: two attempts writing the same bytes in the same
    //   millisecond cannot both take the publication.
    version: 4,
    minCompatibleVersion: 1,
    sql: `
      ALTER TABLE agenthooks_parked_calls ADD COLUMN published_by text;
    `,
  },
];

/** The schema version this code writes and reads. */
export const POSTGRES_SCHEMA_VERSION = POSTGRES_MIGRATIONS.length;

/** Where the database's schema is, as its history table says. */
export interface SchemaState {
  /** Highest applied version; 0 for an empty database. */
  readonly version: number;
  /** Minimum-compatible version of that migration; 0 for an empty database. */
  readonly minCompatibleVersion: number;
}

/** What {@link migratePostgres} did: the schema it left, and the migrations it applied itself. */
export interface MigrationOutcome extends SchemaState {
  /** Versions this call applied, in order; empty when another process had, or none was missing. */
  readonly applied: readonly number[];
}

/**
 * Brings the database to {@link POSTGRES_SCHEMA_VERSION} on `client`, under
 * the session-level advisory lock {@link MIGRATION_LOCK_KEY}: a second pod
 * waits for the first, then finds the schema current and applies nothing.
 * Each missing migration runs in its own transaction with its history row.
 * A schema newer than the code opens when its minimum-compatible version
 * allows this code; it is never changed.
 *
 * @param lockTimeoutMs How long to wait for the lock (and run the
 *   migrations), in milliseconds; the session's `statement_timeout` during
 *   migration.
 * @throws StoreUnavailableError `STORE_NEWER_THAN_CODE` when the schema's
 *   minimum-compatible version is above this code's version.
 * @throws what `pg` throws otherwise; the caller maps it.
 */
export async function migratePostgres(
  client: ClientBase,
  lockTimeoutMs: number,
): Promise<MigrationOutcome> {
  await client.query(`SET statement_timeout = ${Math.trunc(lockTimeoutMs)}`);
  await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
  try {
    // Under the lock, so two pods on an empty database never race on it.
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
         version integer PRIMARY KEY,
         min_compatible_version integer NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    let state = await readSchemaState(client);
    refuseIncompatible(state);
    const applied: number[] = [];
    for (const migration of POSTGRES_MIGRATIONS.slice(state.version)) {
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query(
          `INSERT INTO ${MIGRATIONS_TABLE} (version, min_compatible_version) VALUES ($1, $2)`,
          [migration.version, migration.minCompatibleVersion],
        );
        await client.query('COMMIT');
      } catch (e: unknown) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
      state = { version: migration.version, minCompatibleVersion: migration.minCompatibleVersion };
      applied.push(migration.version);
    }
    return { version: state.version, minCompatibleVersion: state.minCompatibleVersion, applied };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
  }
}

/** Reads the highest applied version and its minimum-compatible version. */
async function readSchemaState(client: ClientBase): Promise<SchemaState> {
  const { rows } = await client.query<{ version: number; min_compatible_version: number }>(
    `SELECT version, min_compatible_version FROM ${MIGRATIONS_TABLE}
     ORDER BY version DESC LIMIT 1`,
  );
  const row = rows[0];
  return row === undefined
    ? { version: 0, minCompatibleVersion: 0 }
    : { version: row.version, minCompatibleVersion: row.min_compatible_version };
}

/** Refuses a schema whose minimum-compatible version is above this code's. */
function refuseIncompatible(state: SchemaState): void {
  if (state.minCompatibleVersion > POSTGRES_SCHEMA_VERSION) {
    throw new StoreUnavailableError(
      'STORE_NEWER_THAN_CODE',
      `database schema version ${state.version} needs agenthooks schema version ${state.minCompatibleVersion} or newer, this agenthooks has ${POSTGRES_SCHEMA_VERSION}; did you start an older agenthooks?`,
      {
        metadata: {
          schemaVersion: String(state.version),
          minCompatibleVersion: String(state.minCompatibleVersion),
          supportedVersion: String(POSTGRES_SCHEMA_VERSION),
        },
      },
    );
  }
}
