/**
 * @module `agenthooks users import FILE.jsonl [--db PATH]`: fills the
 * embedded store's `users` table, the default user directory of email
 * enrichment. The file holds one JSON object per line,
 * `{"id": "user_1", "email": "ada@example.com"}` (`email` may be null);
 * blank lines are skipped. Every line is validated before anything is
 * written, and the whole file is upserted in one transaction: all users or
 * none.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { isPostgresUrl } from '../store/postgres.js';
import { DEFAULT_DB_PATH, openSqliteStore } from '../store/sqlite.js';
import type { UserRecord, UserStore } from '../store/store.js';

/** `ErrorInfo.reason` of a file with invalid lines. */
export const USERS_FILE_INVALID = 'USERS_FILE_INVALID';

/** `ErrorInfo.reason` of a file that cannot be read. */
export const USERS_FILE_UNREADABLE = 'USERS_FILE_UNREADABLE';

/**
 * Variable naming the SQLite database file when `--db` is absent, read by
 * `users import` and by `serve` (the variable of its `--db` option).
 */
export const DB_PATH_VAR = 'AGENTHOOKS_DB';

/** How many invalid lines a message names; the rest are counted. */
const MAX_REPORTED_LINES = 20;

/** Keys a line may have. */
const USER_KEYS = new Set(['id', 'email']);

/** Strict UTF-8: a file with invalid bytes is refused rather than imported with U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Exit code of a bad command line. */
const EXIT_USAGE = 2;

/** Exit code of a file or store that cannot be imported. */
const EXIT_FAILURE = 1;

/** Help of `agenthooks users`. */
export const USERS_USAGE = `Usage: agenthooks users import FILE.jsonl [--db PATH]

Imports users into the users table of the SQLite database, the default
directory that webhook payloads take userEmail from. FILE.jsonl holds one JSON
object per line: {"id": "user_1", "email": "ada@example.com"} (email may be
null). Existing users are replaced. Every line is checked first: one invalid
line imports nothing.

Options:
  --db PATH   SQLite database file (default: $${DB_PATH_VAR}, else ${DEFAULT_DB_PATH})
  --help      show this help
`;

/** Where {@link runUsersCommand} writes. */
export interface CommandOutput {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * Parses and validates a users JSONL text.
 *
 * @param text The file's content.
 * @param source Name of the file, for messages.
 * @throws InvalidArgumentError with reason {@link USERS_FILE_INVALID} naming
 *   each invalid line (line numbers start at 1), such as
 *   `users.jsonl: 1 invalid line: line 3: "id" must be a non-empty string`.
 *   The message never quotes a line's content.
 * @example
 * parseUsersJsonl('{"id":"u1","email":"ada@example.com"}\n', 'users.jsonl')
 * // [{ id: 'u1', email: 'ada@example.com' }]
 */
export function parseUsersJsonl(text: string, source: string): UserRecord[] {
  const users: UserRecord[] = [];
  const problems: string[] = [];
  const lines = text.split('\n');
  for (const [index, raw] of lines.entries()) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') continue;
    const parsed = parseUserLine(line);
    if (typeof parsed === 'string') problems.push(`line ${index + 1}: ${parsed}`);
    else users.push(parsed);
  }
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_REPORTED_LINES);
    const more = problems.length - shown.length;
    const noun = problems.length === 1 ? 'line' : 'lines';
    throw new InvalidArgumentError(
      'file',
      USERS_FILE_INVALID,
      `${source}: ${problems.length} invalid ${noun}, nothing imported: ${shown.join('; ')}${more > 0 ? `; and ${more} more` : ''}`,
    );
  }
  return users;
}

/**
 * Reads and validates a users JSONL file; nothing is written.
 *
 * @throws InvalidArgumentError with reason {@link USERS_FILE_INVALID} for
 *   invalid lines or a file that is not UTF-8; AgentHooksError
 *   `USERS_FILE_UNREADABLE` when the file cannot be read.
 */
export function readUsersFile(path: string): UserRecord[] {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e: unknown) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    throw new AgentHooksError(
      'failed_precondition',
      USERS_FILE_UNREADABLE,
      `cannot read ${path}: ${code}`,
      { cause: e },
    );
  }
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch (e: unknown) {
    throw new InvalidArgumentError('file', USERS_FILE_INVALID, `${path}: not valid UTF-8`, {
      cause: e,
    });
  }
  return parseUsersJsonl(text, path);
}

/**
 * Reads, validates and upserts a users JSONL file, all or nothing.
 *
 * @returns How many users were written.
 * @throws what {@link readUsersFile} throws, or a store error when the store
 *   cannot be written (nothing is written then).
 * @example await importUsersFile('users.jsonl', store) // 2
 */
export async function importUsersFile(
  path: string,
  users: Pick<UserStore, 'upsertUsers'>,
): Promise<number> {
  return users.upsertUsers(readUsersFile(path));
}

/**
 * Runs `agenthooks users ARGS...` and resolves to the exit code: 0 on
 * success, 1 when the file or the store fails (nothing imported), 2 for a
 * bad command line.
 *
 * @param args The arguments after `users`, such as `['import', 'users.jsonl', '--db', 'x.db']`.
 * @param env Read for `AGENTHOOKS_DB` when `--db` is absent.
 */
export async function runUsersCommand(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: CommandOutput,
): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand === undefined || subcommand === '--help' || subcommand === 'help') {
    out.stdout(USERS_USAGE);
    return subcommand === undefined ? EXIT_USAGE : 0;
  }
  if (subcommand !== 'import') {
    out.stderr(`agenthooks: unknown users command ${JSON.stringify(subcommand)}\n\n${USERS_USAGE}`);
    return EXIT_USAGE;
  }
  let file: string;
  let dbFlag: string | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: [...rest],
      options: { db: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    if (values.help === true) {
      out.stdout(USERS_USAGE);
      return 0;
    }
    if (positionals.length !== 1 || positionals[0] === undefined) {
      throw new Error('users import takes exactly one FILE.jsonl');
    }
    file = positionals[0];
    dbFlag = values.db;
  } catch (e: unknown) {
    out.stderr(`agenthooks: ${(e as Error).message}\n\n${USERS_USAGE}`);
    return EXIT_USAGE;
  }
  const dbPath = dbFlag ?? defaultDbPath(env);
  if (isPostgresUrl(dbPath)) {
    // The URL may hold a password: the message never quotes it.
    out.stderr(
      `agenthooks: users import fills the SQLite store only; ${dbFlag === undefined ? DB_PATH_VAR : '--db'} names a PostgreSQL database (fill its agenthooks_users table, or use --users-postgres-url)\n`,
    );
    return EXIT_USAGE;
  }
  try {
    // The file is checked before the store is opened (or created).
    const users = readUsersFile(file);
    const store = openSqliteStore(dbPath);
    try {
      const count = await store.upsertUsers(users);
      out.stdout(`imported ${count} ${count === 1 ? 'user' : 'users'} into ${dbPath}\n`);
    } finally {
      await store.close();
    }
    return 0;
  } catch (e: unknown) {
    out.stderr(`agenthooks: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT_FAILURE;
  }
}

/** `AGENTHOOKS_DB`, else the store's default file, as for `agenthooks serve`. */
function defaultDbPath(env: Readonly<Record<string, string | undefined>>): string {
  const fromEnv = env[DB_PATH_VAR];
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_DB_PATH;
}

/** Parses one non-blank line into a user, or returns what is wrong with it. */
function parseUserLine(line: string): UserRecord | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'not valid JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'not a JSON object';
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!USER_KEYS.has(key))
      return `unknown key ${JSON.stringify(key)} (expected "id" and "email")`;
  }
  const { id, email } = record;
  if (typeof id !== 'string' || id === '') return '"id" must be a non-empty string';
  if (!Object.hasOwn(record, 'email')) return '"email" is required (a string or null)';
  if (email !== null && (typeof email !== 'string' || email === '')) {
    return '"email" must be a non-empty string or null';
  }
  return { id, email };
}
