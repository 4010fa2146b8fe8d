/**
 * @module The PostgreSQL user directory: one pooled `pg` connection pool and
 * one configured query, run as a named prepared statement (parsed once per
 * connection). Errors never carry the connection URL or the user id.
 */
import { Pool } from 'pg';
import { AgentHooksError } from '../errors.js';
import { type Logger, silentLogger } from '../log.js';
import type { UserDirectory } from './directory.js';

/** Default lookup query: its first column of the first row is the email. */
export const DEFAULT_USERS_POSTGRES_QUERY = 'SELECT email FROM users WHERE id = $1';

/** Largest number of pooled connections. Lookups are cached, so a few suffice. */
export const DEFAULT_POOL_SIZE = 4;

/** How long a lookup waits for a new connection, in milliseconds. */
const CONNECT_TIMEOUT_MS = 5_000;

/** Longest a lookup query may run, in milliseconds, enforced client- and server-side. */
const QUERY_TIMEOUT_MS = 5_000;

/** How long an idle pooled connection is kept, in milliseconds. */
const IDLE_TIMEOUT_MS = 30_000;

/** `application_name` of the connections, as `pg_stat_activity` shows it. */
const APPLICATION_NAME = 'agenthooks';

/** Name of the prepared lookup statement on each connection. */
const STATEMENT_NAME = 'agenthooks_user_email';

/** `ErrorInfo.reason` of a failed lookup. */
const LOOKUP_FAILED = 'USER_DIRECTORY_UNAVAILABLE';

/** Options of {@link createPostgresUserDirectory}. */
export interface PostgresUserDirectoryOptions {
  /** Connection URL (`postgres://user:password@host:5432/db`); it holds a secret. */
  readonly url: string;
  /**
   * Lookup query with one parameter `$1`, the user id; the first column of
   * its first row is the email (a non-string or empty value counts as none).
   * Default {@link DEFAULT_USERS_POSTGRES_QUERY}.
   */
  readonly query?: string | undefined;
  /** Largest number of pooled connections. Default {@link DEFAULT_POOL_SIZE}. */
  readonly maxConnections?: number;
  /** Where errors of idle pooled connections are logged. Default: silent. */
  readonly logger?: Logger | undefined;
}

/**
 * Creates a directory that runs the configured query on a `pg` pool.
 * Connections open lazily, at the first lookup.
 *
 * @example
 * const directory = createPostgresUserDirectory({ url: 'postgres://agenthooks@db/app' });
 * await directory.lookupEmail('user_1');
 * await directory.close();
 */
export function createPostgresUserDirectory(options: PostgresUserDirectoryOptions): UserDirectory {
  const logger = options.logger ?? silentLogger;
  const text = options.query ?? DEFAULT_USERS_POSTGRES_QUERY;
  const pool = new Pool({
    connectionString: options.url,
    max: options.maxConnections ?? DEFAULT_POOL_SIZE,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: IDLE_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    statement_timeout: QUERY_TIMEOUT_MS,
    application_name: APPLICATION_NAME,
  });
  // An idle connection that fails (a server restart) is reported here; without
  // a listener the pool's 'error' event would crash the process.
  pool.on('error', (e: Error) => {
    logger.warn('user directory connection failed', { code: errorCode(e) });
  });
  let closing: Promise<void> | undefined;
  return {
    async lookupEmail(userId: string): Promise<string | null> {
      // PostgreSQL text holds no U+0000: no user has such an id, and the query would fail.
      if (userId.includes('\0')) return null;
      try {
        const result = await pool.query<unknown[]>({
          name: STATEMENT_NAME,
          text,
          values: [userId],
          rowMode: 'array',
        });
        const email = result.rows[0]?.[0];
        return typeof email === 'string' && email !== '' ? email : null;
      } catch (e: unknown) {
        throw new AgentHooksError(
          'unavailable',
          LOOKUP_FAILED,
          `cannot look up a user email in PostgreSQL${codeSuffix(e)}`,
          { cause: e },
        );
      }
    },
    close(): Promise<void> {
      closing ??= pool.end();
      return closing;
    },
  };
}

/** The SQLSTATE or system error code of a `pg` failure, never its message. */
function errorCode(e: unknown): string | undefined {
  const code = e instanceof Error ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

function codeSuffix(e: unknown): string {
  const code = errorCode(e);
  return code === undefined ? '' : ` (${code})`;
}
