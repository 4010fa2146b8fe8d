/**
 * @module User directories: where email enrichment (upstream contract §5)
 * finds a user's email address. Two kinds exist: the embedded store's `users`
 * table (the default, filled by `agenthooks users import FILE.jsonl`) and a
 * PostgreSQL database with a configured query ({@link createPostgresUserDirectory}).
 * {@link createUserDirectory} picks one from the configuration.
 */
import type { Logger } from '../log.js';
import type { UserStore } from '../store/store.js';
import { createPostgresUserDirectory } from './postgres.js';

/**
 * Looks up user email addresses. Implementations own their timeouts; a
 * failure rejects (the caller treats it like a miss), and the rejection never
 * holds a connection string or an email address.
 *
 * @example
 * const email = await directory.lookupEmail('user_1'); // 'ada@example.com' or null
 */
export interface UserDirectory {
  /** The user's email address; null for an unknown user or one without an address. */
  lookupEmail(userId: string): Promise<string | null>;
  /** Releases the directory's connections; later lookups reject. Closing twice is a no-op. */
  close(): Promise<void>;
}

/** The directory options of the configuration (`--users-postgres-url`, `--users-postgres-query`). */
export interface UserDirectoryConfig {
  /** PostgreSQL connection URL; absent means the embedded `users` table. It holds a secret. */
  readonly usersPostgresUrl?: string | undefined;
  /**
   * Query with one parameter `$1` (the user id) whose first column of the
   * first row is the email. Default `SELECT email FROM users WHERE id = $1`.
   */
  readonly usersPostgresQuery?: string | undefined;
}

/** What {@link createUserDirectory} needs besides the configuration. */
export interface UserDirectoryDeps {
  /** The embedded store's users; used when no PostgreSQL URL is configured. */
  readonly users: Pick<UserStore, 'lookupUserEmail'>;
  /** Where the PostgreSQL directory logs pool errors. Default: silent. */
  readonly logger?: Logger;
}

/**
 * Returns the directory over the embedded store's `users` table. Its
 * `close()` does nothing: the store belongs to whoever opened it.
 *
 * @example createStoreUserDirectory(openSqliteStore('./data/agenthooks.db'))
 */
export function createStoreUserDirectory(users: Pick<UserStore, 'lookupUserEmail'>): UserDirectory {
  return {
    lookupEmail: (userId) => users.lookupUserEmail(userId),
    close: async () => undefined,
  };
}

/**
 * Builds the user directory the configuration names: PostgreSQL when
 * `usersPostgresUrl` is set (pooled; close it at shutdown), else the embedded
 * store's `users` table, which is fine empty (every lookup is a miss).
 *
 * @example
 * const directory = createUserDirectory(config, { users: store, logger });
 * const enricher = new EmailEnricher({ directory, logger });
 * // at shutdown, before the store closes:
 * await directory.close();
 */
export function createUserDirectory(
  config: UserDirectoryConfig,
  deps: UserDirectoryDeps,
): UserDirectory {
  const url = config.usersPostgresUrl;
  if (url === undefined || url === '') return createStoreUserDirectory(deps.users);
  return createPostgresUserDirectory({
    url,
    query: config.usersPostgresQuery,
    logger: deps.logger,
  });
}
