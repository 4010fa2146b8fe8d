/**
 * @module The sidecar's configuration: command-line flags, each also readable
 * from an `AGENTHOOKS_*` variable, validated into one frozen object. The
 * table `OPTIONS` is the single source for parsing, `serve --help` and the
 * README's configuration table.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_QSTASH_URL } from '../delivery/webhook.js';
import { InvalidArgumentError } from '../errors.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';
import { DEFAULT_USERS_POSTGRES_QUERY } from '../users/postgres.js';

/** Schemes of a `--users-postgres-url`. */
const POSTGRES_PROTOCOLS = new Set(['postgres:', 'postgresql:']);

/** Schemes of a `--qstash-url`. */
const HTTP_PROTOCOLS = new Set(['http:', 'https:']);

/** The one parameter a `--users-postgres-query` must use: the user id. */
const USER_ID_PARAMETER = '$1';

/** One configuration option: its flag, variable, default and help text. */
export interface OptionSpec {
  /** Flag name without dashes. */
  readonly flag: string;
  /** Environment variable read when the flag is absent. */
  readonly env: string;
  /** Placeholder in help output. */
  readonly value: string;
  /** Default, as written on the command line; `undefined` means off. */
  readonly default?: string;
  /** May be given more than once (the variable takes a comma-separated list). */
  readonly multiple?: boolean;
  /** One-line description. */
  readonly help: string;
}

/** Every option of `agenthooks serve`, in help order. */
export const OPTIONS: readonly OptionSpec[] = [
  {
    flag: 'grpc-listen',
    env: 'AGENTHOOKS_GRPC_LISTEN',
    value: 'ADDR',
    default: '127.0.0.1:50051',
    multiple: true,
    help: 'gRPC listener, host:port or unix:/path; repeat for several (HookService, health, reflection)',
  },
  {
    flag: 'health-listen',
    env: 'AGENTHOOKS_HEALTH_LISTEN',
    value: 'ADDR',
    help: 'extra gRPC listener serving only grpc.health.v1, for kubelet probes (host:port)',
  },
  {
    flag: 'http-listen',
    env: 'AGENTHOOKS_HTTP_LISTEN',
    value: 'ADDR',
    default: '127.0.0.1:8080',
    help: 'HTTP/1.1 listener for the Connect protocol, gRPC-Web and /healthz; "off" disables it',
  },
  {
    flag: 'db',
    env: 'AGENTHOOKS_DB',
    value: 'PATH',
    default: './data/agenthooks.db',
    help: 'SQLite database file (created with its folder if missing)',
  },
  {
    flag: 'env-file',
    env: 'AGENTHOOKS_ENV_FILE',
    value: 'PATH',
    help: 'KEY=VALUE file (a mounted ConfigMap or Secret) overlaid on the process environment; re-read when it changes and on SIGHUP',
  },
  {
    flag: 'handler-timeout',
    env: 'AGENTHOOKS_HANDLER_TIMEOUT',
    value: 'SECONDS',
    default: '10',
    help: 'how long a local handler (Handle stream) has to reply before it counts as failed',
  },
  {
    flag: 'stream-max-in-flight',
    env: 'AGENTHOOKS_STREAM_MAX_IN_FLIGHT',
    value: 'N',
    default: '64',
    help: 'events in flight per DispatchStream; beyond it the stream stops reading (flow control)',
  },
  {
    flag: 'shutdown-grace',
    env: 'AGENTHOOKS_SHUTDOWN_GRACE',
    value: 'SECONDS',
    default: '10',
    help: 'on SIGTERM/SIGINT, how long calls in flight may take before they are cut off',
  },
  {
    flag: 'log-level',
    env: 'AGENTHOOKS_LOG_LEVEL',
    value: 'LEVEL',
    default: 'info',
    help: `lowest log level written: ${LOG_LEVELS.join(', ')}`,
  },
  {
    flag: 'qstash-url',
    env: 'QSTASH_URL',
    value: 'URL',
    default: DEFAULT_QSTASH_URL,
    help: 'QStash API base URL of delivery: qstash webhooks (the token is QSTASH_TOKEN, read at each send)',
  },
  {
    flag: 'users-postgres-url',
    env: 'AGENTHOOKS_USERS_POSTGRES_URL',
    value: 'URL',
    help: 'PostgreSQL URL of the user directory that userEmail comes from; off uses the users table of --db',
  },
  {
    flag: 'users-postgres-query',
    env: 'AGENTHOOKS_USERS_POSTGRES_QUERY',
    value: 'SQL',
    default: DEFAULT_USERS_POSTGRES_QUERY,
    help: 'user directory query: $1 is the user id, the first column of the first row the email',
  },
];

/** A listen address. */
export type ListenAddress =
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number; readonly text: string }
  | { readonly kind: 'unix'; readonly path: string; readonly text: string };

/** The validated, frozen configuration of `agenthooks serve`. */
export interface ServeConfig {
  readonly grpcListen: readonly ListenAddress[];
  readonly healthListen?: ListenAddress;
  readonly httpListen?: ListenAddress;
  readonly dbPath: string;
  /** Env file overlaid on the process environment (environment hooks, templates, app URLs). */
  readonly envFile?: string;
  readonly shutdownGraceMs: number;
  /** Time a local handler has to reply. */
  readonly handlerTimeoutMs: number;
  /** Events in flight per DispatchStream. */
  readonly streamMaxInFlight: number;
  readonly logLevel: LogLevel;
  /** QStash API base URL of `delivery: qstash` webhooks. */
  readonly qstashUrl: string;
  /** PostgreSQL URL of the user directory; absent means the store's `users` table. A secret: never log it. */
  readonly usersPostgresUrl?: string;
  /** Query of the PostgreSQL user directory, with `$1` the user id. */
  readonly usersPostgresQuery: string;
}

/** Returns the help text of `agenthooks serve`. */
export function serveHelp(): string {
  const lines = [
    'Usage: agenthooks serve [options]',
    '',
    'Runs the agenthooks sidecar. Every option can also be set through its variable;',
    'a flag wins over its variable.',
    '',
    'Options:',
  ];
  for (const o of OPTIONS) {
    const name = `--${o.flag} ${o.value}`;
    const def = o.default === undefined ? '' : ` (default ${o.default})`;
    lines.push(`  ${name.padEnd(26)} ${o.help}${def}`);
    lines.push(`  ${''.padEnd(26)} env ${o.env}${o.multiple ? ' (comma-separated)' : ''}`);
  }
  lines.push(`  ${'--help'.padEnd(26)} show this help`);
  return `${lines.join('\n')}\n`;
}

/**
 * Parses `serve` arguments and the environment into a frozen config.
 *
 * @throws InvalidArgumentError naming the flag, for an unknown flag or a bad value.
 */
export function parseServeConfig(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ServeConfig {
  const options: Record<string, { type: 'string'; multiple?: boolean }> = {};
  for (const o of OPTIONS) options[o.flag] = { type: 'string', multiple: o.multiple === true };
  let values: Record<string, string | string[] | undefined>;
  try {
    values = parseArgs({ args: [...args], options, allowPositionals: false, strict: true })
      .values as Record<string, string | string[] | undefined>;
  } catch (e: unknown) {
    throw new InvalidArgumentError('args', 'INVALID_FLAG', (e as Error).message, { cause: e });
  }
  const get = (flag: string): string[] => {
    const spec = OPTIONS.find((o) => o.flag === flag) as OptionSpec;
    const v = values[flag];
    if (v !== undefined) return Array.isArray(v) ? v : [v];
    const fromEnv = env[spec.env];
    if (fromEnv !== undefined && fromEnv !== '') {
      return spec.multiple
        ? fromEnv
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [fromEnv];
    }
    return spec.default === undefined ? [] : [spec.default];
  };
  const one = (flag: string): string | undefined => get(flag).at(-1);

  const grpcListen = get('grpc-listen').map((a) => parseListen(a, 'grpc-listen', true));
  if (grpcListen.length === 0) {
    throw new InvalidArgumentError(
      'grpc-listen',
      'INVALID_FLAG',
      '--grpc-listen needs at least one address',
    );
  }
  const health = one('health-listen');
  const http = one('http-listen');
  const grace = Number(one('shutdown-grace'));
  if (!Number.isFinite(grace) || grace < 0) {
    throw new InvalidArgumentError(
      'shutdown-grace',
      'INVALID_FLAG',
      '--shutdown-grace must be a number of seconds >= 0',
    );
  }
  const handlerTimeout = Number(one('handler-timeout'));
  if (!Number.isFinite(handlerTimeout) || handlerTimeout <= 0) {
    throw new InvalidArgumentError(
      'handler-timeout',
      'INVALID_FLAG',
      '--handler-timeout must be a number of seconds > 0',
    );
  }
  const maxInFlight = Number(one('stream-max-in-flight'));
  if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
    throw new InvalidArgumentError(
      'stream-max-in-flight',
      'INVALID_FLAG',
      '--stream-max-in-flight must be a whole number >= 1',
    );
  }
  const level = one('log-level') as LogLevel;
  if (!LOG_LEVELS.includes(level)) {
    throw new InvalidArgumentError(
      'log-level',
      'INVALID_FLAG',
      `--log-level must be one of ${LOG_LEVELS.join(', ')}`,
    );
  }
  const dbPath = one('db') as string;
  const qstashUrl = one('qstash-url') as string;
  if (!hasProtocol(qstashUrl, HTTP_PROTOCOLS)) {
    throw new InvalidArgumentError(
      'qstash-url',
      'INVALID_FLAG',
      '--qstash-url must be an http(s) URL',
    );
  }
  const usersPostgresUrl = one('users-postgres-url');
  if (usersPostgresUrl !== undefined && !hasProtocol(usersPostgresUrl, POSTGRES_PROTOCOLS)) {
    // The URL holds a password: the message never quotes it.
    throw new InvalidArgumentError(
      'users-postgres-url',
      'INVALID_FLAG',
      '--users-postgres-url must be a postgres:// or postgresql:// URL',
    );
  }
  const usersPostgresQuery = one('users-postgres-query') as string;
  if (!usersPostgresQuery.includes(USER_ID_PARAMETER)) {
    throw new InvalidArgumentError(
      'users-postgres-query',
      'INVALID_FLAG',
      `--users-postgres-query must use ${USER_ID_PARAMETER} for the user id`,
    );
  }
  return Object.freeze({
    grpcListen: Object.freeze(grpcListen),
    healthListen: health === undefined ? undefined : parseListen(health, 'health-listen', false),
    httpListen:
      http === undefined || http === 'off' ? undefined : parseListen(http, 'http-listen', false),
    dbPath,
    envFile: one('env-file'),
    shutdownGraceMs: grace * 1000,
    handlerTimeoutMs: handlerTimeout * 1000,
    streamMaxInFlight: maxInFlight,
    logLevel: level,
    qstashUrl,
    usersPostgresUrl,
    usersPostgresQuery,
  });
}

/** True when `text` parses as a URL with one of `protocols`. */
function hasProtocol(text: string, protocols: ReadonlySet<string>): boolean {
  try {
    return protocols.has(new URL(text).protocol);
  } catch {
    return false;
  }
}

/** Parses `host:port`, `[v6]:port` or (where allowed) `unix:/path`. */
export function parseListen(text: string, flag: string, allowUnix: boolean): ListenAddress {
  if (text.startsWith('unix:')) {
    const path = text.slice('unix:'.length);
    if (!allowUnix || path === '') {
      throw new InvalidArgumentError(flag, 'INVALID_FLAG', `--${flag} does not take ${text}`);
    }
    return { kind: 'unix', path, text };
  }
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (m === null || port > 65535) {
    throw new InvalidArgumentError(
      flag,
      'INVALID_FLAG',
      `--${flag} must be host:port, got ${text}`,
    );
  }
  return { kind: 'tcp', host: (m[1] ?? m[2]) as string, port, text };
}
