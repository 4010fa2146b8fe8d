/**
 * @module The shared store: PostgreSQL through a bounded `pg` pool, behind
 * the same interfaces as the embedded SQLite store (`./sqlite.ts`), for pods
 * that share operations, hooks and parked calls. Migrations are in
 * `./postgres-migrations.ts`.
 *
 * Across processes:
 * - Registrations of one operation are serialised by the lock on its
 *   `operations` row: `appendHooks` upserts the row (which locks it until
 *   the commit) before it reads the hook count and the stored bytes, so two
 *   pods never interleave a batch, never both fit under the hook limit or
 *   the config-size limit, and keep the order of their commits.
 * - Publication is one conditional `UPDATE ... WHERE final_result IS NULL`:
 *   a concurrent one waits for the row lock, re-checks the condition on the
 *   committed row and finds it filled, so exactly one call publishes.
 * - The publication lease (who runs the result controls) is taken the same
 *   way, by a conditional `UPDATE` on the parked call's row, and its expiry
 *   is stamped and compared on the server's clock.
 * - Parking is idempotent per tool call id (`ON CONFLICT DO NOTHING` on its
 *   primary key); it holds `FOR SHARE` locks on its operations, which
 *   retention skips (`SKIP LOCKED`), so an operation never expires under a
 *   call being parked.
 *
 * Faults: every failure rejects with a domain error (`./postgres-error.ts`),
 * a `StoreUnavailableError` when the server cannot be used, never an empty
 * answer. The pool replaces broken connections on its own, so the store
 * recovers once the server is back. Statements are bounded by
 * `statement_timeout` (server side) and `query_timeout` (client side, for a
 * server that stopped answering), connections by a connect timeout.
 */
import { randomInt, randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, StoreUnavailableError } from '../errors.js';
import { extend } from '../extend.js';
import { fromHookRow, type StoredHookRow, toHookRow } from './hook-codec.js';
import {
  assertEpochMs,
  assertLease,
  claimAnswer,
  decodeResult,
  encodeResult,
  fromParkedCallRow,
  type ParkedCallRow,
  toParkedCallRow,
} from './parked-codec.js';
import { storeErrorFromPostgres } from './postgres-error.js';
import { type MigrationOutcome, migratePostgres } from './postgres-migrations.js';
import type { StoreObserver } from './sqlite.js';
import {
  type AppendHooksOptions,
  type DecisionQuery,
  type DecisionRow,
  type DecisionStore,
  type ExpireResult,
  type HookStore,
  hookConfigTooLargeError,
  type NewParkedCall,
  type OperationHooks,
  type OperationState,
  operationExpiredError,
  type ParkedCallRecord,
  type ParkOutcome,
  type ParkStore,
  type PublicationClaim,
  type PublishOutcome,
  parkedCallNotFoundError,
  type RetentionStore,
  tooManyHooksError,
  type UserRecord,
  type UserStore,
} from './store.js';

/**
 * Whether a `--db` value names the PostgreSQL store: a `postgres://` or
 * `postgresql://` URL (libpq's two schemes); anything else is an SQLite file.
 *
 * @example isPostgresUrl('postgresql:///agenthooks?host=/run/postgresql') // true
 */
export function isPostgresUrl(text: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(text);
}

/** Default of {@link PostgresStoreOptions.maxConnections}. */
export const DEFAULT_POSTGRES_POOL_SIZE = 10;

/** Default of {@link PostgresStoreOptions.statementTimeoutMs}, in milliseconds. */
export const DEFAULT_POSTGRES_STATEMENT_TIMEOUT_MS = 5_000;

/** Default of {@link PostgresStoreOptions.connectTimeoutMs}, in milliseconds. */
export const DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS = 5_000;

/** Default of {@link PostgresStoreOptions.migrationTimeoutMs}, in milliseconds. */
export const DEFAULT_POSTGRES_MIGRATION_TIMEOUT_MS = 60_000;

/**
 * Extra time the client waits past `statement_timeout` before it gives up on
 * a query itself, so that the server's cancellation (a clear SQLSTATE) wins
 * whenever the server still answers.
 */
const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/** How long an idle pooled connection is kept, in milliseconds. */
const IDLE_TIMEOUT_MS = 30_000;

/** `application_name` of the connections, as `pg_stat_activity` shows it. */
const APPLICATION_NAME = 'agenthooks-store';

/** Users written per statement by `upsertUsers`, within its one transaction. */
const USERS_PER_STATEMENT = 1_000;

/** OID of `int8`: times and counts, read as numbers (epoch ms and counts are safe integers). */
const INT8_OID = 20;

/** Type parsers of the store's connections: `bigint` as a number, the rest as `pg` reads it. */
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/** Options of {@link openPostgresStore}. */
export interface PostgresStoreOptions {
  /** Largest number of pooled connections; a positive integer. Default {@link DEFAULT_POSTGRES_POOL_SIZE}. */
  readonly maxConnections?: number;
  /**
   * Longest a statement may run, in milliseconds (`statement_timeout`; the
   * client gives up a second later); a positive integer. A statement waiting
   * on another transaction's lock past it fails with `STORE_LOCKED`.
   * Default {@link DEFAULT_POSTGRES_STATEMENT_TIMEOUT_MS}.
   */
  readonly statementTimeoutMs?: number;
  /**
   * How long a call waits for a connection (a new one, or a free one of a
   * full pool), in milliseconds, before it fails with `STORE_UNAVAILABLE`; a
   * positive integer. Default {@link DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS}.
   */
  readonly connectTimeoutMs?: number;
  /**
   * How long opening waits for another process's migration and runs its
   * own, in milliseconds; a positive integer. Default
   * {@link DEFAULT_POSTGRES_MIGRATION_TIMEOUT_MS}.
   */
  readonly migrationTimeoutMs?: number;
  /** Told about every store call, as {@link SqliteStoreOptions.observe}; default none. */
  readonly observe?: StoreObserver;
  /** Told about a failure of an idle pooled connection (a server restart); default none. */
  readonly onIdleError?: (error: Error) => void;
}

/** Every store interface, backed by a PostgreSQL database. */
export interface PostgresStore
  extends HookStore,
    UserStore,
    ParkStore,
    RetentionStore,
    DecisionStore {
  /** The schema version of the database when the store opened (it may be newer than the code's). */
  readonly schemaVersion: number;
  /**
   * The migrations this store applied as it opened, in order; empty when the
   * schema was current (another pod may have migrated it while this one waited).
   */
  readonly migrationsApplied: readonly number[];
}

/**
 * Connects to the database at `url`, runs the migrations it needs (once,
 * across processes) and returns the store. The URL holds a secret; no error
 * repeats it.
 *
 * @throws StoreUnavailableError when the database cannot be reached or
 *   migrated, with reason `STORE_NEWER_THAN_CODE` when its schema needs a
 *   newer agenthooks.
 * @throws RangeError when an option is out of range.
 * @example
 * const store = await openPostgresStore('postgres://agenthooks@db:5432/agenthooks', { maxConnections: 8 });
 */
export async function openPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<PostgresStore> {
  const max = positive('maxConnections', options.maxConnections, DEFAULT_POSTGRES_POOL_SIZE);
  const statementTimeoutMs = positive(
    'statementTimeoutMs',
    options.statementTimeoutMs,
    DEFAULT_POSTGRES_STATEMENT_TIMEOUT_MS,
  );
  const connectTimeoutMs = positive(
    'connectTimeoutMs',
    options.connectTimeoutMs,
    DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS,
  );
  const migrationTimeoutMs = positive(
    'migrationTimeoutMs',
    options.migrationTimeoutMs,
    DEFAULT_POSTGRES_MIGRATION_TIMEOUT_MS,
  );
  const connection: pg.ClientConfig = {
    connectionString: url,
    connectionTimeoutMillis: connectTimeoutMs,
    application_name: APPLICATION_NAME,
    keepAlive: true,
    types: TYPES,
  };
  // Migrations run on their own connection with their own timeout, so the
  // pool's connections never carry the migration's session settings.
  const migrator = new pg.Client(connection);
  migrator.on('error', () => undefined);
  let migration: MigrationOutcome;
  try {
    await migrator.connect();
    migration = await migratePostgres(migrator, migrationTimeoutMs);
  } catch (e: unknown) {
    throw storeErrorFromPostgres(e, 'open the PostgreSQL store');
  } finally {
    await migrator.end().catch(() => undefined);
  }
  const pool = new pg.Pool(
    extend(connection, {
      max,
      idleTimeoutMillis: IDLE_TIMEOUT_MS,
      statement_timeout: statementTimeoutMs,
      query_timeout: statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
      // A transaction left open by a client that vanished would hold its row
      // locks (and block that operation's registrations on every pod).
      idle_in_transaction_session_timeout: statementTimeoutMs,
    }),
  );
  const onIdleError = options.onIdleError;
  // Every connection listens for its own 'error' event from the moment it
  // connects. The pool listens only while a connection is idle, and a server
  // shutting down can send its FATAL 57P01 in the same read as the packet that
  // completed the connect: emitted before the caller that checked the
  // connection out could listen, it would crash the process. The query in
  // flight, if any, rejects with the failure, and the pool drops the client.
  pool.on('connect', (client) => client.on('error', ignoreCheckedOutError));
  // Without a listener, an idle connection's failure (a server restart)
  // would crash the process through the pool's 'error' event.
  pool.on('error', (e: Error) => onIdleError?.(e));
  return new PostgresStoreImpl(pool, migration, options.observe);
}

function positive(name: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen <= 0) {
    throw new RangeError(`${name} must be a positive integer, got ${chosen}`);
  }
  return chosen;
}

/** What one query on a pool or a client needs; both `pg.Pool` and `pg.PoolClient` have it. */
type Queryable = Pick<pg.PoolClient, 'query'>;

/** Columns of `parked_calls`, `chain` as JSON text for the codec. */
const PARKED_CALL_SELECT =
  'tool_call_id, operation_id, chain::text AS chain, kind, context, parked_at, final_result, published_at';

/**
 * The server's clock in epoch milliseconds, as SQL: leases are stamped and
 * compared on the one clock every pod shares, whatever the pods' own clocks say.
 */
const SERVER_NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** A row of the `listHooks` query: the operation, and one of its hooks (or none). */
interface OperationHookRow {
  readonly status: 'active' | 'completed' | 'expired';
  readonly parent_id: string | null;
  readonly seq: number | null;
  readonly hook_id: string | null;
  readonly hook_type: number | null;
  readonly config: string | null;
}

class PostgresStoreImpl implements PostgresStore {
  readonly schemaVersion: number;
  readonly migrationsApplied: readonly number[];
  readonly #pool: pg.Pool;
  readonly #observe: StoreObserver | undefined;
  #closing: Promise<void> | undefined;

  constructor(pool: pg.Pool, migration: MigrationOutcome, observe: StoreObserver | undefined) {
    this.#pool = pool;
    this.schemaVersion = migration.version;
    this.migrationsApplied = migration.applied;
    this.#observe = observe;
  }

  async lookupUserEmail(userId: string): Promise<string | null> {
    // A `text` column holds no U+0000, so no user has such an id (and the query would fail).
    if (userId.includes('\0')) return null;
    const { rows } = await this.#run('lookupUserEmail', 'look up a user', (db) =>
      db.query<{ email: string | null }>('SELECT email FROM agenthooks_users WHERE id = $1', [
        userId,
      ]),
    );
    return rows[0]?.email ?? null;
  }

  async upsertUsers(users: readonly UserRecord[]): Promise<number> {
    // The last record of an id wins; one statement cannot touch a row twice.
    const latest = [...new Map(users.map((user) => [user.id, user])).values()];
    const now = Date.now();
    await this.#transaction('upsertUsers', 'import users', async (db) => {
      for (let at = 0; at < latest.length; at += USERS_PER_STATEMENT) {
        const chunk = latest.slice(at, at + USERS_PER_STATEMENT);
        await db.query(
          `INSERT INTO agenthooks_users (id, email, updated_at)
           SELECT id, email, $3 FROM unnest($1::text[], $2::text[]) AS u (id, email)
           ON CONFLICT (id) DO UPDATE SET email = excluded.email, updated_at = excluded.updated_at`,
          [chunk.map((u) => u.id), chunk.map((u) => u.email), now],
        );
      }
    });
    return users.length;
  }

  async appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
    options: AppendHooksOptions = {},
  ): Promise<number> {
    const rows = hooks.map(toHookRow);
    const parentId =
      parentOperationId === undefined || parentOperationId === '' ? null : parentOperationId;
    const { maxConfigBytes, maxHooks, checkMatchers } = options;
    const now = Date.now();
    return this.#transaction('appendHooks', 'append hooks', async (db) => {
      // The upsert locks the operation row until the commit: every other
      // append of this operation, on any pod, waits here. The first
      // non-empty parent wins. A tombstone is updated too (and rolled back
      // below), so that it is locked and read in the same statement.
      const { rows: upserted } = await db.query<{ status: string }>(
        `INSERT INTO agenthooks_operations (id, parent_id, created_at, updated_at) VALUES ($1, $2, $3, $3)
         ON CONFLICT (id) DO UPDATE SET
           parent_id = coalesce(agenthooks_operations.parent_id, excluded.parent_id),
           updated_at = excluded.updated_at
         RETURNING status`,
        [operationId, parentId, now],
      );
      if (upserted[0]?.status === 'expired') {
        throw operationExpiredError(operationId);
      }
      // Read under the lock, so concurrent appends cannot both fit.
      // octet_length counts UTF-8 bytes, as Buffer.byteLength does.
      const { rows: counted } = await db.query<{ count: number; last: number; bytes: number }>(
        `SELECT count(*) AS count, coalesce(max(seq), 0) AS last,
                coalesce(sum(octet_length(config)), 0)::bigint AS bytes
         FROM agenthooks_hooks WHERE operation_id = $1`,
        [operationId],
      );
      const existing = counted[0] ?? { count: 0, last: 0, bytes: 0 };
      if (maxHooks !== undefined && existing.count + rows.length > maxHooks) {
        throw tooManyHooksError(maxHooks, existing.count, rows.length);
      }
      if (checkMatchers !== undefined) {
        // Read as text and parsed here: a `jsonb` cast refuses the `\u0000`
        // escape that a stored hook's body or header may hold.
        const { rows: configs } = await db.query<{ config: string }>(
          `SELECT config FROM agenthooks_hooks
           WHERE operation_id = $1 AND strpos(config, '"matcher"') > 0`,
          [operationId],
        );
        checkMatchers(storedMatchers(configs));
      }
      if (maxConfigBytes !== undefined) {
        const adding = rows.reduce((sum, row) => sum + Buffer.byteLength(row.config, 'utf8'), 0);
        if (existing.bytes + adding > maxConfigBytes) {
          throw hookConfigTooLargeError(maxConfigBytes, existing.bytes, adding);
        }
      }
      if (rows.length > 0) {
        // One statement for the batch; WITH ORDINALITY keeps the given order.
        await db.query(
          `INSERT INTO agenthooks_hooks (operation_id, seq, hook_id, hook_type, plugin, config)
           SELECT $1, $2 + h.ord, h.hook_id, h.hook_type, h.plugin, h.config
           FROM unnest($3::text[], $4::integer[], $5::text[], $6::text[])
             WITH ORDINALITY AS h (hook_id, hook_type, plugin, config, ord)`,
          [
            operationId,
            existing.last,
            rows.map((r) => r.hookId),
            rows.map((r) => r.hookType),
            rows.map((r) => r.plugin),
            rows.map((r) => r.config),
          ],
        );
      }
      return existing.count + rows.length;
    });
  }

  async listHooks(operationId: string): Promise<OperationHooks> {
    // One statement, so the status, the parent and the hooks come from one snapshot.
    const { rows } = await this.#run('listHooks', 'list hooks', (db) =>
      db.query<OperationHookRow>(
        `SELECT o.status, o.parent_id, h.seq, h.hook_id, h.hook_type, h.config
         FROM agenthooks_operations AS o LEFT JOIN agenthooks_hooks AS h ON h.operation_id = o.id
         WHERE o.id = $1
         ORDER BY h.seq`,
        [operationId],
      ),
    );
    const first = rows[0];
    if (first === undefined) {
      return { hooks: [], known: false };
    }
    if (first.status === 'expired') {
      throw operationExpiredError(operationId);
    }
    const hooks = rows
      .filter((row): row is OperationHookRow & StoredHookRow => row.seq !== null)
      .map((row) => fromHookRow(operationId, row));
    return first.parent_id === null
      ? { hooks, known: true }
      : { hooks, known: true, parentOperationId: first.parent_id };
  }

  async deleteHooks(operationId: string, plugin?: string): Promise<number> {
    const now = Date.now();
    return this.#transaction('deleteHooks', 'delete hooks', async (db) => {
      // Waits for a running append of the operation, like another append.
      await db.query('SELECT 1 FROM agenthooks_operations WHERE id = $1 FOR UPDATE', [operationId]);
      const { rowCount } =
        plugin === undefined
          ? await db.query('DELETE FROM agenthooks_hooks WHERE operation_id = $1', [operationId])
          : await db.query('DELETE FROM agenthooks_hooks WHERE operation_id = $1 AND plugin = $2', [
              operationId,
              plugin,
            ]);
      const deleted = rowCount ?? 0;
      if (deleted > 0) {
        // The operation row stays (with its parent): only the hooks are purged.
        await db.query('UPDATE agenthooks_operations SET updated_at = $1 WHERE id = $2', [
          now,
          operationId,
        ]);
      }
      return deleted;
    });
  }

  async parkCall(record: NewParkedCall): Promise<ParkOutcome> {
    const row = toParkedCallRow(record);
    // Each once, sorted: two parks lock shared operations in one order, so
    // they cannot deadlock.
    const operationIds = [...new Set([record.operationId, ...record.chain])].sort();
    const existing = await this.#transaction('parkCall', 'park a tool call', async (db) => {
      const found = await selectParked(db, row.tool_call_id);
      if (found !== undefined) {
        return found;
      }
      // Undone if another pod parks the same call first: the losing park leaves no operation rows.
      await db.query('SAVEPOINT park');
      await db.query(
        `INSERT INTO agenthooks_operations (id, parent_id, created_at, updated_at)
         SELECT id, NULL, $2, $2 FROM unnest($1::text[]) WITH ORDINALITY AS o (id, ord)
         ORDER BY ord
         ON CONFLICT (id) DO NOTHING`,
        [operationIds, row.parked_at],
      );
      // FOR SHARE until the commit: retention skips these rows (SKIP
      // LOCKED), and a retention batch that locked one first makes this
      // wait and then read the tombstone.
      const { rows: states } = await db.query<{ id: string; status: string }>(
        'SELECT id, status FROM agenthooks_operations WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE',
        [operationIds],
      );
      const expired = states.find((s) => s.status === 'expired');
      if (expired !== undefined) {
        throw operationExpiredError(expired.id);
      }
      const { rowCount } = await db.query(
        `INSERT INTO agenthooks_parked_calls
           (tool_call_id, operation_id, chain, kind, context, parked_at, final_result, published_at)
         VALUES ($1, $2, $3::jsonb, $4, $5, $6, NULL, NULL)
         ON CONFLICT (tool_call_id) DO NOTHING`,
        [row.tool_call_id, row.operation_id, row.chain, row.kind, row.context, row.parked_at],
      );
      if (rowCount === 0) {
        // Another pod parked the same call since the read above; its row is committed.
        await db.query('ROLLBACK TO SAVEPOINT park');
        return selectParked(db, row.tool_call_id);
      }
      await db.query(
        `INSERT INTO agenthooks_parked_call_operations (operation_id, tool_call_id)
         SELECT id, $2 FROM unnest($1::text[]) AS o (id)`,
        [operationIds, row.tool_call_id],
      );
      return undefined;
    });
    if (existing !== undefined) {
      return { record: fromParkedCallRow(existing), created: false };
    }
    const { toolCallId, operationId, chain, kind, context, parkedAt } = record;
    return {
      record: { toolCallId, operationId, chain: [...chain], kind, context, parkedAt },
      created: true,
    };
  }

  async getParkedCall(toolCallId: string): Promise<ParkedCallRecord | undefined> {
    const row = await this.#run('getParkedCall', 'read a parked call', (db) =>
      selectParked(db, toolCallId),
    );
    return row === undefined ? undefined : fromParkedCallRow(row);
  }

  async listParkedCalls(operationId: string, limit: number): Promise<ParkedCallRecord[]> {
    const rows = await this.#run('listParkedCalls', 'list parked calls', async (db) => {
      const { rows } = await db.query<ParkedCallRow>(
        `SELECT ${PARKED_CALL_SELECT} FROM agenthooks_parked_calls WHERE operation_id = $1
         ORDER BY parked_at DESC, tool_call_id LIMIT $2`,
        [operationId, limit],
      );
      return rows;
    });
    return rows.map(fromParkedCallRow);
  }

  async publishResult(
    toolCallId: string,
    result: ToolResult,
    publishedAt: number,
  ): Promise<PublishOutcome> {
    assertEpochMs('publishedAt', publishedAt);
    const bytes = encodeResult(result);
    // This attempt's mark on the row: what tells it, reading the row again,
    // that the write in doubt was its own (bytes and time can repeat).
    const marker = randomUUID();
    const readStored = async (db: Queryable) => {
      const { rows } = await db.query<{
        final_result: Uint8Array | null;
        published_at: number | null;
        published_by: string | null;
      }>(
        `SELECT final_result, published_at, published_by
         FROM agenthooks_parked_calls WHERE tool_call_id = $1`,
        [toolCallId],
      );
      return rows[0];
    };
    let stored: Awaited<ReturnType<typeof readStored>> | null;
    try {
      stored = await this.#run('publishResult', 'publish a deferred result', async (db) => {
        // The whole arbitration: a concurrent UPDATE waits for the row lock,
        // then re-checks `final_result IS NULL` on the committed row.
        const { rowCount } = await db.query(
          `UPDATE agenthooks_parked_calls SET final_result = $1, published_at = $2,
             published_by = $4, lease_holder = NULL, lease_expires_at = NULL
           WHERE tool_call_id = $3 AND final_result IS NULL`,
          [bytes, publishedAt, toolCallId, marker],
        );
        return rowCount === 1 ? null : readStored(db);
      });
    } catch (e: unknown) {
      // The write is one autocommit statement: when the connection drops after
      // the server committed it, its answer is lost. Read once more, on another
      // connection: a row holding this attempt's marker was filled by this
      // call, which then publishes (sends the notification, records the
      // decision) as if the answer had come; a row another attempt filled
      // answers as a duplicate would. An empty row leaves it in doubt (the
      // write may still be running on the server): the error stands.
      const after = await this.#run('publishResult', 'publish a deferred result', readStored).catch(
        () => undefined,
      );
      if (after?.final_result == null) throw e;
      stored = after.published_by === marker ? null : after;
    }
    if (stored === null) {
      return { published: true, finalResult: result, publishedAt };
    }
    if (stored === undefined) {
      throw parkedCallNotFoundError(toolCallId);
    }
    if (stored.final_result === null) {
      // Unreachable: the UPDATE above fills an empty placeholder, and a filled one stays filled.
      throw new Error(`the placeholder of ${toolCallId} is empty after a conditional write`);
    }
    return {
      published: false,
      finalResult: decodeResult(toolCallId, stored.final_result),
      publishedAt: stored.published_at ?? 0,
    };
  }

  async claimPublication(
    toolCallId: string,
    holder: string,
    leaseMs: number,
    replacing?: string,
  ): Promise<PublicationClaim | undefined> {
    assertLease(holder, leaseMs);
    const outcome = await this.#run('claimPublication', 'claim a publication', async (db) => {
      // The arbitration: a concurrent claim waits for the row lock, then
      // re-checks the condition on the committed row and finds the lease taken.
      const { rows: claimed } = await db.query<ParkedCallRow>(
        `UPDATE agenthooks_parked_calls
         SET lease_holder = $2, lease_expires_at = ${SERVER_NOW_MS} + $3
         WHERE tool_call_id = $1 AND final_result IS NULL
           AND (lease_holder IS NULL OR lease_expires_at <= ${SERVER_NOW_MS}
                OR lease_holder = $4)
         RETURNING ${PARKED_CALL_SELECT}`,
        [toolCallId, holder, leaseMs, replacing ?? null],
      );
      if (claimed[0] !== undefined) return { state: 'claimed' as const, row: claimed[0] };
      const { rows } = await db.query<
        ParkedCallRow & { lease_holder: string | null; expires_in_ms: number | null }
      >(
        `SELECT ${PARKED_CALL_SELECT}, lease_holder,
                lease_expires_at - ${SERVER_NOW_MS} AS expires_in_ms
         FROM agenthooks_parked_calls WHERE tool_call_id = $1`,
        [toolCallId],
      );
      const row = rows[0];
      if (row === undefined) return undefined;
      if (row.final_result !== null) return { state: 'published' as const, row };
      // Held, or freed between the two statements: either way, ask again soon.
      return {
        state: 'held' as const,
        holder: row.lease_holder ?? '',
        expiresInMs: Math.max(0, row.expires_in_ms ?? 0),
      };
    });
    if (outcome === undefined) return undefined;
    if (outcome.state === 'held') return outcome;
    return claimAnswer(outcome.state, outcome.row, () =>
      this.releasePublication(toolCallId, holder),
    );
  }

  async renewPublication(toolCallId: string, holder: string, leaseMs: number): Promise<boolean> {
    assertLease(holder, leaseMs);
    const { rowCount } = await this.#run('renewPublication', 'renew a publication lease', (db) =>
      db.query(
        `UPDATE agenthooks_parked_calls SET lease_expires_at = ${SERVER_NOW_MS} + $3
         WHERE tool_call_id = $1 AND lease_holder = $2 AND final_result IS NULL`,
        [toolCallId, holder, leaseMs],
      ),
    );
    return rowCount === 1;
  }

  async releasePublication(toolCallId: string, holder: string): Promise<void> {
    await this.#run('releasePublication', 'release a publication lease', (db) =>
      db.query(
        `UPDATE agenthooks_parked_calls SET lease_holder = NULL, lease_expires_at = NULL
         WHERE tool_call_id = $1 AND lease_holder = $2`,
        [toolCallId, holder],
      ),
    );
  }

  async operationState(operationIds: readonly string[]): Promise<Map<string, OperationState>> {
    const statuses = new Map<string, OperationState>();
    if (operationIds.length > 0) {
      const { rows } = await this.#run('operationState', 'read operation states', (db) =>
        db.query<{ id: string; status: OperationState }>(
          'SELECT id, status FROM agenthooks_operations WHERE id = ANY($1::text[])',
          [[...operationIds]],
        ),
      );
      for (const row of rows) statuses.set(row.id, row.status);
    }
    return new Map(operationIds.map((id) => [id, statuses.get(id) ?? 'unknown']));
  }

  async markOperationCompleted(operationId: string, at: number): Promise<void> {
    assertEpochMs('at', at);
    // Retention counts from the last completion; a tombstone stays a tombstone.
    await this.#run('markOperationCompleted', 'complete an operation', (db) =>
      db.query(
        `INSERT INTO agenthooks_operations (id, parent_id, created_at, updated_at, status, completed_at)
         VALUES ($1, NULL, $2, $2, 'completed', $2)
         ON CONFLICT (id) DO UPDATE SET
           status = 'completed',
           completed_at = greatest(agenthooks_operations.completed_at, excluded.completed_at),
           updated_at = excluded.updated_at
         WHERE agenthooks_operations.status <> 'expired'`,
        [operationId, at],
      ),
    );
  }

  async expireBefore(
    cutoff: number,
    batchSize: number,
    tombstoneCutoff?: number,
  ): Promise<ExpireResult> {
    assertEpochMs('cutoff', cutoff);
    if (tombstoneCutoff !== undefined) assertEpochMs('tombstoneCutoff', tombstoneCutoff);
    if (!Number.isSafeInteger(batchSize) || batchSize <= 0) {
      throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    }
    const now = Date.now();
    // SKIP LOCKED throughout: a row another transaction holds (a park, an
    // append, another pod's retention) waits for the next batch, and
    // retention never blocks a request.
    return this.#transaction('expireBefore', 'expire old records', async (db) => {
      // Published calls go first, so that their links no longer hold back
      // the operations and tombstones they named.
      const published = await db.query(
        `DELETE FROM agenthooks_parked_calls WHERE tool_call_id IN (
           SELECT tool_call_id FROM agenthooks_parked_calls
           WHERE published_at IS NOT NULL AND published_at < $1
           ORDER BY published_at LIMIT $2
           FOR UPDATE SKIP LOCKED)`,
        [cutoff, batchSize],
      );
      const { rows: candidates } = await db.query<{ id: string }>(
        `SELECT o.id FROM agenthooks_operations AS o
         WHERE o.status = 'completed' AND o.completed_at < $1
           AND NOT EXISTS (
             SELECT 1 FROM agenthooks_parked_call_operations AS l
             JOIN agenthooks_parked_calls AS p ON p.tool_call_id = l.tool_call_id
             WHERE l.operation_id = o.id AND p.final_result IS NULL)
         ORDER BY o.completed_at LIMIT $2
         FOR UPDATE OF o SKIP LOCKED`,
        [cutoff, batchSize],
      );
      // A new statement, so its snapshot is taken with the rows locked: a
      // park that committed before the lock is seen, a later one waits.
      const { rows: expired } = await db.query<{ id: string }>(
        `UPDATE agenthooks_operations AS o SET status = 'expired', updated_at = $2, expired_at = $2
         WHERE o.id = ANY($1::text[])
           AND NOT EXISTS (
             SELECT 1 FROM agenthooks_parked_call_operations AS l
             JOIN agenthooks_parked_calls AS p ON p.tool_call_id = l.tool_call_id
             WHERE l.operation_id = o.id AND p.final_result IS NULL)
         RETURNING o.id`,
        [candidates.map((c) => c.id), now],
      );
      const operations = sortLike(
        expired.map((r) => r.id),
        candidates.map((c) => c.id),
      );
      if (operations.length > 0) {
        await db.query('DELETE FROM agenthooks_hooks WHERE operation_id = ANY($1::text[])', [
          operations,
        ]);
      }
      let tombstones = 0;
      if (tombstoneCutoff !== undefined) {
        // A tombstone a remaining parked call names stays until retention
        // deletes that call (the foreign keys would refuse the delete).
        const deleted = await db.query(
          `DELETE FROM agenthooks_operations WHERE id IN (
             SELECT o.id FROM agenthooks_operations AS o
             WHERE o.status = 'expired' AND o.expired_at < $1
               AND NOT EXISTS (SELECT 1 FROM agenthooks_parked_call_operations AS l WHERE l.operation_id = o.id)
               AND NOT EXISTS (SELECT 1 FROM agenthooks_parked_calls AS p WHERE p.operation_id = o.id)
             ORDER BY o.expired_at LIMIT $2
             FOR UPDATE SKIP LOCKED)`,
          [tombstoneCutoff, batchSize],
        );
        tombstones = deleted.rowCount ?? 0;
      }
      const decisions = await db.query(
        `DELETE FROM agenthooks_decisions WHERE decision_id IN (
           SELECT decision_id FROM agenthooks_decisions WHERE time < $1
           ORDER BY time LIMIT $2
           FOR UPDATE SKIP LOCKED)`,
        [cutoff, batchSize],
      );
      return {
        operations,
        parkedCalls: published.rowCount ?? 0,
        tombstones,
        decisions: decisions.rowCount ?? 0,
      };
    });
  }

  async appendDecisions(rows: readonly DecisionRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement, one implicit transaction: the group commit.
    await this.#run('appendDecisions', 'write decision audit entries', (db) =>
      db.query(
        `INSERT INTO agenthooks_decisions (decision_id, time, operation_id, outcome, record)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[], $5::bytea[])
         ON CONFLICT (decision_id) DO NOTHING`,
        [
          rows.map((r) => r.decisionId),
          rows.map((r) => r.time),
          rows.map((r) => r.operationId),
          rows.map((r) => r.outcome),
          rows.map((r) => Buffer.from(r.record.buffer, r.record.byteOffset, r.record.byteLength)),
        ],
      ),
    );
  }

  async listDecisions(query: DecisionQuery): Promise<DecisionRow[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const param = (value: unknown): string => {
      params.push(value);
      return `$${params.length}`;
    };
    if (query.operationId !== undefined) where.push(`operation_id = ${param(query.operationId)}`);
    if (query.from !== undefined) where.push(`time >= ${param(query.from)}`);
    if (query.to !== undefined) where.push(`time < ${param(query.to)}`);
    if (query.outcome !== undefined) where.push(`outcome = ${param(query.outcome)}`);
    if (query.before !== undefined) {
      where.push(
        `(time, decision_id) < (${param(query.before.time)}, ${param(query.before.decisionId)})`,
      );
    }
    const filtered = `FROM agenthooks_decisions
      ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}`;
    const order = 'ORDER BY time DESC, decision_id DESC';
    // With a byte bound: a row only while the records before it, all but the
    // last, hold at most the bound (see DecisionQuery.maxBytes); the running
    // sum streams over the index scan, and rows past it are never sent.
    const sql =
      query.maxBytes === undefined
        ? `SELECT decision_id, time, operation_id, outcome, record ${filtered} ${order}
           LIMIT ${param(query.limit)}`
        : `SELECT decision_id, time, operation_id, outcome, record FROM (
             SELECT decision_id, time, operation_id, outcome, record,
               coalesce(sum(octet_length(record)) OVER (${order}
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS bytes_before
             ${filtered} ${order} LIMIT ${param(query.limit)}
           ) page WHERE bytes_before <= ${param(query.maxBytes)} ${order}`;
    const { rows } = await this.#run('listDecisions', 'list decision audit entries', (db) =>
      db.query<{
        decision_id: string;
        time: number;
        operation_id: string;
        outcome: number;
        record: Uint8Array;
      }>(sql, params),
    );
    return rows.map((row) => ({
      decisionId: row.decision_id,
      time: row.time,
      operationId: row.operation_id,
      outcome: row.outcome,
      record: row.record,
    }));
  }

  async ping(): Promise<void> {
    // A write that takes a row lock and is rolled back: fails as a write
    // would (unreachable, read-only standby, locked past the timeout). A row
    // of its own each time: with one shared id, a pod stalled between its
    // insert and its rollback held every other pod's check on that row.
    await this.#run('ping', 'check the store', async () => {
      const client = await this.#connect();
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO agenthooks_probe (id) VALUES ($1)', [
          randomInt(1, 2 ** 31 - 1),
        ]);
        await client.query('ROLLBACK');
        client.release();
      } catch (e: unknown) {
        client.release(true);
        throw e;
      }
    });
  }

  async quickCheck(): Promise<void> {
    // Nothing of a server can change between two pings that a cheap local
    // check could see; ping() asks the server.
    this.#assertOpen('check the store');
  }

  close(): Promise<void> {
    this.#closing ??= this.#pool.end();
    return this.#closing;
  }

  #assertOpen(action: string): void {
    if (this.#closing !== undefined) {
      throw new StoreUnavailableError('STORE_CLOSED', `cannot ${action}: the store is closed`);
    }
  }

  /**
   * A pooled connection; the pool's connect timeout bounds the wait. While
   * it is checked out, a failure of its socket rejects the query in flight;
   * the listener keeps the client's 'error' event (which the pool only
   * listens to while the client is idle) from crashing the process.
   */
  async #connect(): Promise<pg.PoolClient> {
    const client = await this.#pool.connect();
    client.on('error', ignoreCheckedOutError);
    const release = client.release.bind(client);
    client.release = (destroy?: Error | boolean) => {
      client.removeListener('error', ignoreCheckedOutError);
      release(destroy);
    };
    return client;
  }

  /**
   * Runs `fn` in one transaction on one pooled connection (READ COMMITTED,
   * PostgreSQL's default; each statement sees the commits before it),
   * rolling back when it throws. A connection whose rollback fails is
   * destroyed rather than returned to the pool.
   */
  #transaction<T>(
    operation: string,
    action: string,
    fn: (db: Queryable) => Promise<T>,
  ): Promise<T> {
    return this.#run(operation, action, async () => {
      const client = await this.#connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (e: unknown) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw e;
      } finally {
        client.release(broken);
      }
    });
  }

  /**
   * Runs `fn` on the pool, turns whatever it throws into a domain error, and
   * reports the call to the `observe` option.
   */
  async #run<T>(operation: string, action: string, fn: (db: Queryable) => Promise<T>): Promise<T> {
    const observe = this.#observe;
    const started = observe === undefined ? 0 : performance.now();
    try {
      this.#assertOpen(action);
      const result = await fn(this.#pool);
      observe?.(operation, 'ok', (performance.now() - started) / 1000);
      return result;
    } catch (e: unknown) {
      const err =
        this.#closing !== undefined && !(e instanceof AgentHooksError)
          ? new StoreUnavailableError('STORE_CLOSED', `cannot ${action}: the store is closed`, {
              cause: e,
            })
          : storeErrorFromPostgres(e, action);
      observe?.(operation, err.reason, (performance.now() - started) / 1000);
      throw err;
    }
  }
}

/** See `#connect`: the query in flight rejects with the same failure. */
function ignoreCheckedOutError(): void {}

/** The stored row of a parked call, or undefined. */
async function selectParked(db: Queryable, toolCallId: string): Promise<ParkedCallRow | undefined> {
  const { rows } = await db.query<ParkedCallRow>(
    `SELECT ${PARKED_CALL_SELECT} FROM agenthooks_parked_calls WHERE tool_call_id = $1`,
    [toolCallId],
  );
  return rows[0];
}

/** `ids` in the order they have in `order` (the oldest completion first). */
function sortLike(ids: readonly string[], order: readonly string[]): string[] {
  const wanted = new Set(ids);
  return order.filter((id) => wanted.has(id));
}

/**
 * The distinct matchers of stored hook configs (each a `Hook` in proto JSON,
 * whose `matcher` is a top-level member when set), as SQLite's
 * `json_extract(config, '$.matcher')` reads them.
 */
function storedMatchers(rows: readonly { config: string }[]): string[] {
  const matchers = new Set<string>();
  for (const { config } of rows) {
    const matcher = (JSON.parse(config) as { matcher?: unknown }).matcher;
    if (typeof matcher === 'string') matchers.add(matcher);
  }
  return [...matchers];
}
