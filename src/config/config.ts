/**
 * @module The sidecar's configuration: command-line flags, each also readable
 * from an `AGENTHOOKS_*` variable, validated into one frozen object. The
 * table `OPTIONS` is the single source for parsing, `serve --help` and the
 * README's configuration table.
 */

import { BlockList, isIP, isIPv4 } from 'node:net';
import { parseArgs } from 'node:util';
import { DEFAULT_AUDIT_BUFFER, DEFAULT_AUDIT_BUFFER_BYTES } from '../audit/audit-log.js';
import { type Pointer, parsePointer } from '../audit/masks.js';
import { DEFAULT_MAX_DETACHED_BYTES, DEFAULT_MAX_DETACHED_TASKS } from '../background.js';
import { DEFAULT_STREAM_MAX_IN_FLIGHT_BYTES } from '../byte-budget.js';
import { DestinationPolicy } from '../delivery/destination.js';
import { SIGNING_ORIGINS_PREFIX, SIGNING_SECRET_PREFIX } from '../delivery/signing.js';
import {
  DEFAULT_CONNECTIONS_PER_ORIGIN,
  DEFAULT_QSTASH_URL,
  OWN_VARIABLE_PREFIX,
} from '../delivery/webhook.js';
import { isEnvVarName } from '../delivery/webhook-rules.js';
import { INVALID_FLAG, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import { DEFAULT_HOOK_CACHE_BYTES, DEFAULT_MAX_HOOKS_PER_OPERATION } from '../hooks/registry.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';
import { DEFAULT_POSTGRES_POOL_SIZE, isPostgresUrl } from '../store/postgres.js';
import { DEFAULT_DB_PATH } from '../store/sqlite.js';
import { DB_PATH_VAR } from '../users/import.js';
import { DEFAULT_USERS_POSTGRES_QUERY } from '../users/postgres.js';
import { editDistance } from './did-you-mean.js';

/** The variable that may hold a `--users-postgres-url` with its password. */
const USERS_URL_VAR = 'AGENTHOOKS_USERS_POSTGRES_URL';

/** Variable holding the audit HTTP sink's `Authorization` header value (a secret). */
export const AUDIT_HTTP_AUTHORIZATION_VAR = 'AGENTHOOKS_AUDIT_HTTP_AUTHORIZATION';

/** Shortest `--publication-lease`: 100 ms (tests use a few hundred; deployments seconds). */
const MIN_PUBLICATION_LEASE_MS = 100;

/** Schemes of a `--users-postgres-url`. */
const POSTGRES_PROTOCOLS = new Set(['postgres:', 'postgresql:']);

/** Schemes of a `--qstash-url`. */
const HTTP_PROTOCOLS = new Set(['http:', 'https:']);

/** The one parameter a `--users-postgres-query` must use: the user id. */
const USER_ID_PARAMETER = '$1';

/**
 * Default of `--max-message-bytes`: 16 MiB, above gRPC's usual 4 MiB so that
 * a `Modify` call carrying an 8 MiB history works with the shipped defaults.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Default of `--max-message-nodes`. Decoding takes 200-450 bytes of heap and
 * 1-5 us a node (a `Value` of a JSON document's element or member): 100,000
 * is a 20-45 MB, sub-second decode, and far more than a tool call's
 * arguments or a history of messages hold.
 */
export const DEFAULT_MAX_MESSAGE_NODES = 100_000;

/**
 * Default of `--admin-listen`: loopback only, the port after the HTTP
 * listener's 8080, so that the console is reached through `kubectl
 * port-forward` or from the pod, never from the network by default.
 */
export const DEFAULT_ADMIN_LISTEN = '127.0.0.1:8081';

/** Default of `--max-connections`: four listeners stay under a 1,024 descriptor limit. */
export const DEFAULT_MAX_CONNECTIONS = 200;
/** Largest value of an HTTP/2 setting (32 bits). */
const MAX_HTTP2_SETTING = 2 ** 32 - 1;
/** Longest delay a Node timer takes: 2^31 - 1 ms, 24.8 days; a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** {@link MAX_TIMER_MS} as the messages write it. */
const MAX_TIMER_TEXT = `${Math.floor(MAX_TIMER_MS / 1000)} seconds (24.8 days)`;
/** A number as numeric flags take it: decimal digits, an optional fraction; no sign, exponent or `0x`. */
const DECIMAL = /^\d+(?:\.\d+)?$/;
/**
 * Default of `--max-streams-per-connection`: Go's HTTP/2 server default. With
 * {@link DEFAULT_MAX_CONNECTIONS} it bounds the calls a listener holds (a call
 * costs a few KB before its message arrives); a runtime with more calls in
 * flight on one connection has its client queue the rest.
 */
export const DEFAULT_MAX_STREAMS_PER_CONNECTION = 250;

/**
 * Smallest `--db-max-size`: an empty database takes 16 pages (64 KiB at the
 * default page size of 4 KiB, one page per table and index), so this leaves
 * as much again for rows, the planner's statistics and the write probe.
 */
export const MIN_DB_MAX_SIZE_BYTES = 128 * 1024;

/** A `--socket-mode`: three or four octal digits. */
const SOCKET_MODE = /^0?[0-7]{3}$/;

/** Values a boolean option's variable takes. */
const BOOLEAN_VALUES: Readonly<Record<string, boolean>> = {
  true: true,
  '1': true,
  false: false,
  '0': false,
};

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
  /** A switch without a value; its variable takes `true`/`1` or `false`/`0`. */
  readonly boolean?: boolean;
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
    help: 'HTTP/1.1 listener for the Connect protocol, gRPC-Web, /metrics and the probes (/healthz, /livez, /readyz); "off" disables it',
  },
  {
    flag: 'metrics-listen',
    env: 'AGENTHOOKS_METRICS_LISTEN',
    value: 'ADDR',
    help: 'extra HTTP/1.1 listener serving only /metrics and the probes (/healthz, /livez, /readyz), no API (host:port)',
  },
  {
    flag: 'admin-listen',
    env: 'AGENTHOOKS_ADMIN_LISTEN',
    value: 'ADDR',
    default: DEFAULT_ADMIN_LISTEN,
    help: 'HTTP/1.1 listener of the read-only admin console (status, config, hooks, decisions; behind the token when one is set), loopback by default; "off" disables it',
  },
  {
    flag: 'max-connections',
    env: 'AGENTHOOKS_MAX_CONNECTIONS',
    value: 'N',
    default: String(DEFAULT_MAX_CONNECTIONS),
    help: 'open connections each listener accepts; past it new ones are closed at once',
  },
  {
    flag: 'max-streams-per-connection',
    env: 'AGENTHOOKS_MAX_STREAMS_PER_CONNECTION',
    value: 'N',
    default: String(DEFAULT_MAX_STREAMS_PER_CONNECTION),
    help: 'calls one gRPC connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); clients queue the rest',
  },
  {
    flag: 'handshake-timeout',
    env: 'AGENTHOOKS_HANDSHAKE_TIMEOUT',
    value: 'SECONDS',
    default: '10',
    help: "time a new connection has to send the HTTP/2 preface (plaintext gRPC) or a request's headers (HTTP)",
  },
  {
    flag: 'request-timeout',
    env: 'AGENTHOOKS_REQUEST_TIMEOUT',
    value: 'SECONDS',
    default: '60',
    help: 'time an HTTP request has to arrive in full, body included, and a gRPC call its request message (calls the client streams excepted)',
  },
  {
    flag: 'idle-timeout',
    env: 'AGENTHOOKS_IDLE_TIMEOUT',
    value: 'SECONDS',
    default: '300',
    help: 'a connection with no call in flight (gRPC) or no traffic (HTTP) for this long is closed',
  },
  {
    flag: 'keepalive-time',
    env: 'AGENTHOOKS_KEEPALIVE_TIME',
    value: 'SECONDS',
    default: '60',
    help: 'gRPC connections get an HTTP/2 ping this often; one not answered in time (at most 20 s) is closed',
  },
  {
    flag: 'db',
    env: DB_PATH_VAR,
    value: 'PATH_OR_URL',
    default: DEFAULT_DB_PATH,
    help: `SQLite file (created with its folder if missing), or a postgres:// URL of a shared PostgreSQL store; no password in the flag: use ${DB_PATH_VAR}, PGPASSWORD or PGPASSFILE`,
  },
  {
    flag: 'db-busy-timeout',
    env: 'AGENTHOOKS_DB_BUSY_TIMEOUT',
    value: 'SECONDS',
    default: '1',
    help: 'SQLite only: how long a write waits for a database lock before the call fails UNAVAILABLE (STORE_LOCKED); the wait blocks the sidecar',
  },
  {
    flag: 'db-max-size',
    env: 'AGENTHOOKS_DB_MAX_SIZE',
    value: 'BYTES',
    help: 'SQLite only: size cap of the database file; writes past it fail UNAVAILABLE (STORE_FULL)',
  },
  {
    flag: 'db-start-timeout',
    env: 'AGENTHOOKS_DB_START_TIMEOUT',
    value: 'DURATION',
    help: 'PostgreSQL only: how long a sidecar whose database cannot be reached at start keeps retrying (listening, readiness NOT_SERVING) before it exits 1; off retries until it opens',
  },
  {
    flag: 'db-pool-size',
    env: 'AGENTHOOKS_DB_POOL_SIZE',
    value: 'N',
    default: String(DEFAULT_POSTGRES_POOL_SIZE),
    help: "PostgreSQL only: connections this sidecar keeps to the database at most (the replicas' sum must stay under the server's max_connections)",
  },
  {
    flag: 'store-check-interval',
    env: 'AGENTHOOKS_STORE_CHECK_INTERVAL',
    value: 'SECONDS',
    default: '5',
    help: 'how often health checks the database files, and retries the store while NOT_SERVING',
  },
  {
    flag: 'retention',
    env: 'AGENTHOOKS_RETENTION',
    value: 'DURATION',
    default: '7d',
    help: 'how long completed operations and published results are kept (e.g. 7d, 12h, 30m, 90s)',
  },
  {
    flag: 'tombstone-retention',
    env: 'AGENTHOOKS_TOMBSTONE_RETENTION',
    value: 'DURATION',
    default: '7d',
    help: 'how long an expired operation keeps a tombstone that fails decisions naming it closed (OPERATION_EXPIRED); afterwards it is unknown',
  },
  {
    flag: 'publication-lease',
    env: 'AGENTHOOKS_PUBLICATION_LEASE',
    value: 'DURATION',
    default: '30s',
    help: 'how long a PublishDeferredResult holds the lease that lets only it run the result controls; renewed while they run, taken over this long after its holder died',
  },
  {
    flag: 'hooks-env-file',
    env: 'AGENTHOOKS_ENV_FILE',
    value: 'PATH',
    help: 'KEY=VALUE file (a mounted ConfigMap or Secret) overlaid on the process environment; re-read when it changes and on SIGHUP',
  },
  {
    flag: 'plugins-file',
    env: 'AGENTHOOKS_PLUGINS_FILE',
    value: 'PATH',
    help: 'JSON file of operator plugins: modifying hooks run for every operation after its own, never stored; re-read when it changes and on SIGHUP; while invalid every Modify call fails (INVALID_PLUGINS)',
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
    flag: 'stream-max-in-flight-bytes',
    env: 'AGENTHOOKS_STREAM_MAX_IN_FLIGHT_BYTES',
    value: 'BYTES',
    default: String(DEFAULT_STREAM_MAX_IN_FLIGHT_BYTES),
    help: 'encoded bytes of the large events (16 KiB or more) all DispatchStreams together hold while delivering them, one stream at most a quarter, and a quarter more kept for streams holding none; beyond it a stream waits and stops reading',
  },
  {
    flag: 'shutdown-grace',
    env: 'AGENTHOOKS_SHUTDOWN_GRACE',
    value: 'SECONDS',
    default: '10',
    help: 'on SIGTERM/SIGINT, how long calls in flight may take before they are cut off; at start (SQLite), how long to wait for another sidecar to let go of the file',
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
    env: USERS_URL_VAR,
    value: 'URL',
    help: `PostgreSQL URL of the user directory that userEmail comes from; off uses the users table of --db; no password in the flag: use ${USERS_URL_VAR}, PGPASSWORD or PGPASSFILE`,
  },
  {
    flag: 'users-postgres-query',
    env: 'AGENTHOOKS_USERS_POSTGRES_QUERY',
    value: 'SQL',
    default: DEFAULT_USERS_POSTGRES_QUERY,
    help: 'user directory query: $1 is the user id, the first column of the first row the email',
  },
  {
    flag: 'caller-env-allowlist',
    env: 'AGENTHOOKS_CALLER_ENV_ALLOWLIST',
    value: 'NAMES',
    multiple: true,
    help: "variables a caller hook's allowedEnvVars may name; none when off, never AGENTHOOKS_* (environment hooks are not limited)",
  },
  {
    flag: 'webhook-allow',
    env: 'AGENTHOOKS_WEBHOOK_ALLOW',
    value: 'RULES',
    multiple: true,
    help: 'hosts (*.suffix too), addresses, CIDRs or classes (such as link-local) webhooks may reach despite the default deny list',
  },
  {
    flag: 'webhook-deny',
    env: 'AGENTHOOKS_WEBHOOK_DENY',
    value: 'RULES',
    multiple: true,
    help: 'hosts (*.suffix too), addresses, CIDRs or classes (such as loopback) webhooks may never reach; wins over --webhook-allow',
  },
  {
    flag: 'dns-server',
    env: 'AGENTHOOKS_DNS_SERVER',
    value: 'HOST:PORT',
    help: 'DNS server that resolves webhook hosts for the destination check; off uses the system resolver',
  },
  {
    flag: 'auth-token-file',
    env: 'AGENTHOOKS_AUTH_TOKEN_FILE',
    value: 'PATH',
    help: 'file holding the bearer token every RPC but health must send (AGENTHOOKS_AUTH_TOKEN sets it directly)',
  },
  {
    flag: 'allow-unauthenticated',
    env: 'AGENTHOOKS_ALLOW_UNAUTHENTICATED',
    value: '',
    boolean: true,
    help: 'serve the API on a non-loopback TCP address without a bearer token (refused otherwise)',
  },
  {
    flag: 'reflection-public',
    env: 'AGENTHOOKS_REFLECTION_PUBLIC',
    value: '',
    boolean: true,
    help: 'serve server reflection without the bearer token',
  },
  {
    flag: 'socket-mode',
    env: 'AGENTHOOKS_SOCKET_MODE',
    value: 'MODE',
    default: '0660',
    help: 'permissions (octal) of unix: gRPC sockets, set right after bind',
  },
  {
    flag: 'socket-group',
    env: 'AGENTHOOKS_SOCKET_GROUP',
    value: 'GROUP',
    help: 'group of unix: gRPC sockets (a name from /etc/group or a GID); off keeps the process group',
  },
  {
    flag: 'tls-cert',
    env: 'AGENTHOOKS_TLS_CERT',
    value: 'PATH',
    help: 'PEM certificate chain; with --tls-key, TCP gRPC and HTTP listeners serve TLS (not --health-listen)',
  },
  {
    flag: 'tls-key',
    env: 'AGENTHOOKS_TLS_KEY',
    value: 'PATH',
    help: 'PEM private key of --tls-cert',
  },
  {
    flag: 'tls-client-ca',
    env: 'AGENTHOOKS_TLS_CLIENT_CA',
    value: 'PATH',
    help: 'PEM CA certificates; TLS listeners then require a client certificate it signed (mutual TLS)',
  },
  {
    flag: 'max-message-bytes',
    env: 'AGENTHOOKS_MAX_MESSAGE_BYTES',
    value: 'BYTES',
    default: String(DEFAULT_MAX_MESSAGE_BYTES),
    help: 'largest request message either transport accepts; larger ones answer RESOURCE_EXHAUSTED',
  },
  {
    flag: 'max-message-nodes',
    env: 'AGENTHOOKS_MAX_MESSAGE_NODES',
    value: 'N',
    default: String(DEFAULT_MAX_MESSAGE_NODES),
    help: 'values a request message may decode into (each message, list element and map entry, counted alike over JSON); more answer RESOURCE_EXHAUSTED (MESSAGE_TOO_COMPLEX) before decoding',
  },
  {
    flag: 'max-hooks-per-operation',
    env: 'AGENTHOOKS_MAX_HOOKS_PER_OPERATION',
    value: 'N',
    default: String(DEFAULT_MAX_HOOKS_PER_OPERATION),
    help: 'most hooks one operation may have; RegisterHooks past it answers INVALID_ARGUMENT (TOO_MANY_HOOKS)',
  },
  {
    flag: 'max-detached-deliveries',
    env: 'AGENTHOOKS_MAX_DETACHED_DELIVERIES',
    value: 'N',
    default: String(DEFAULT_MAX_DETACHED_TASKS),
    help: 'detached webhooks in flight (observers of an allowed call, notifications of published results); past it they are not sent, and counted',
  },
  {
    flag: 'max-detached-bytes',
    env: 'AGENTHOOKS_MAX_DETACHED_BYTES',
    value: 'BYTES',
    default: String(DEFAULT_MAX_DETACHED_BYTES),
    help: 'event bytes the detached webhooks in flight may hold; past it they are not sent, and counted',
  },
  {
    flag: 'hook-cache-size',
    env: 'AGENTHOOKS_HOOK_CACHE_SIZE',
    value: 'BYTES',
    default: String(DEFAULT_HOOK_CACHE_BYTES),
    help: 'SQLite only: estimated heap bytes of the caller hooks kept in memory; the least recently used operations past it are read from the store again',
  },
  {
    flag: 'webhook-max-connections',
    env: 'AGENTHOOKS_WEBHOOK_MAX_CONNECTIONS',
    value: 'N',
    default: String(DEFAULT_CONNECTIONS_PER_ORIGIN),
    help: "connections open at once to one webhook origin; more requests wait for one, within the hook's timeout",
  },
  {
    flag: 'audit-store',
    env: 'AGENTHOOKS_AUDIT_STORE',
    value: '',
    boolean: true,
    help: 'keep the decision audit log in the store (group commits at most 50 ms after each decision, kept for --retention), listed by ListDecisions',
  },
  {
    flag: 'audit-stdout',
    env: 'AGENTHOOKS_AUDIT_STDOUT',
    value: '',
    boolean: true,
    help: 'write each decision as a JSON line (a DecisionRecord in proto JSON) on stdout; logs stay on stderr',
  },
  {
    flag: 'audit-http',
    env: 'AGENTHOOKS_AUDIT_HTTP',
    value: 'URL',
    help: `POST decisions to this http(s) URL in gzip JSON batches every second, retried while it fails (Authorization from ${AUDIT_HTTP_AUTHORIZATION_VAR})`,
  },
  {
    flag: 'audit-buffer',
    env: 'AGENTHOOKS_AUDIT_BUFFER',
    value: 'N',
    default: String(DEFAULT_AUDIT_BUFFER),
    help: 'decision audit entries each sink holds unwritten; past it the oldest are dropped and counted',
  },
  {
    flag: 'audit-buffer-bytes',
    env: 'AGENTHOOKS_AUDIT_BUFFER_BYTES',
    value: 'BYTES',
    default: String(DEFAULT_AUDIT_BUFFER_BYTES),
    help: 'estimated heap bytes of the decision audit entries each sink holds (each string counts four bytes a character); past it the oldest are dropped and counted',
  },
  {
    flag: 'audit-payloads',
    env: 'AGENTHOOKS_AUDIT_PAYLOADS',
    value: '',
    boolean: true,
    help: "also record each decision's arguments and results (Modify: context and result), after --audit-mask",
  },
  {
    flag: 'audit-mask',
    env: 'AGENTHOOKS_AUDIT_MASK',
    value: 'POINTERS',
    multiple: true,
    help: 'JSON pointers removed from recorded payloads before any sink sees them (e.g. /args/password, /result/content; * matches any member)',
  },
];

/** Variable holding the bearer token itself; a secret, so it has no flag (flags show in `ps`). */
export const AUTH_TOKEN_VAR = 'AGENTHOOKS_AUTH_TOKEN';

/** A listen address. */
export type ListenAddress =
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number; readonly text: string }
  | { readonly kind: 'unix'; readonly path: string; readonly text: string };

/** The validated, frozen configuration of `agenthooks serve`. */
export interface ServeConfig {
  readonly grpcListen: readonly ListenAddress[];
  readonly healthListen?: ListenAddress;
  readonly httpListen?: ListenAddress;
  /** HTTP listener serving only `/metrics` and the probes (`/healthz`, `/livez`, `/readyz`). */
  readonly metricsListen?: ListenAddress;
  /** HTTP listener of the read-only admin console; absent with `--admin-listen off`. */
  readonly adminListen?: ListenAddress;
  /** Connection cap and timeouts of every listener. */
  readonly connections: ConnectionLimits;
  /** SQLite database file; absent when `dbUrl` is set. */
  readonly dbPath?: string;
  /**
   * URL of the shared PostgreSQL store (`postgres://` or `postgresql://`),
   * with libpq's query options (`sslmode`...); absent for SQLite. May hold a
   * password (from `AGENTHOOKS_DB`): a secret, never log it.
   */
  readonly dbUrl?: string;
  /** Env file overlaid on the process environment (environment hooks, templates, app URLs). */
  readonly envFile?: string;
  /** Operator plugins file: modifying hooks for every operation, run after its own. */
  readonly pluginsFile?: string;
  /** Time a write waits for a database lock. */
  readonly dbBusyTimeoutMs: number;
  /** Size cap of the database file, in bytes. */
  readonly dbMaxSizeBytes?: number;
  /**
   * How long a sidecar on PostgreSQL retries opening its store at start
   * before it exits 1; undefined retries until it opens.
   */
  readonly dbStartTimeoutMs?: number;
  /** PostgreSQL only: the pool's largest number of connections. */
  readonly dbPoolSize: number;
  /** Interval of the store health check. */
  readonly storeCheckIntervalMs: number;
  /** How long completed operations and published results are kept. */
  readonly retentionMs: number;
  /** How long the tombstone of an expired operation is kept. */
  readonly tombstoneRetentionMs: number;
  /** Duration of a publication lease, renewed while its holder runs the controls. */
  readonly publicationLeaseMs: number;
  readonly shutdownGraceMs: number;
  /** Time a local handler has to reply. */
  readonly handlerTimeoutMs: number;
  /** Events in flight per DispatchStream. */
  readonly streamMaxInFlight: number;
  /** Bytes of large events every DispatchStream together holds (`--stream-max-in-flight-bytes`). */
  readonly streamMaxInFlightBytes: number;
  readonly logLevel: LogLevel;
  /** QStash API base URL of `delivery: qstash` webhooks. */
  readonly qstashUrl: string;
  /** PostgreSQL URL of the user directory; absent means the store's `users` table. A secret: never log it. */
  readonly usersPostgresUrl?: string;
  /** Query of the PostgreSQL user directory, with `$1` the user id. */
  readonly usersPostgresQuery: string;
  /** Variables a caller hook's `allowedEnvVars` may name (`--caller-env-allowlist`); empty: none. */
  readonly callerEnvAllowlist: readonly string[];
  /** Webhook destinations allowed despite the default deny list (`--webhook-allow`). */
  readonly webhookAllow: readonly string[];
  /** Webhook destinations always denied (`--webhook-deny`). */
  readonly webhookDeny: readonly string[];
  /** DNS server (`host:port`) resolving webhook hosts; absent: the system resolver. */
  readonly dnsServer?: string;
  /** File holding the bearer token (`--auth-token-file`). */
  readonly authTokenFile?: string;
  /** The bearer token from `AGENTHOOKS_AUTH_TOKEN`. A secret: never log it. */
  readonly authToken?: string;
  /** Serve reflection without the token. */
  readonly reflectionPublic: boolean;
  /** Permissions of unix sockets. */
  readonly socketMode: number;
  /** Group of unix sockets, a name or a GID as given; absent: unchanged. */
  readonly socketGroup?: string;
  /** TLS of the TCP gRPC and HTTP listeners; absent: plaintext. */
  readonly tls?: TlsFiles;
  /** Largest request message, in bytes. */
  readonly maxMessageBytes: number;
  /** Most nodes a request message may decode into (`--max-message-nodes`). */
  readonly maxMessageNodes: number;
  /** Most hooks one operation may have. */
  readonly maxHooksPerOperation: number;
  /** Detached webhook tasks in flight at most (`--max-detached-deliveries`). */
  readonly maxDetachedDeliveries: number;
  /** Event bytes the detached tasks in flight may hold (`--max-detached-bytes`). */
  readonly maxDetachedBytes: number;
  /** Connections open at once per webhook origin (`--webhook-max-connections`). */
  readonly webhookMaxConnections: number;
  /** Estimated heap bytes of cached caller hooks (`--hook-cache-size`). */
  readonly hookCacheBytes: number;
  /** The decision audit log's sinks. */
  readonly audit: AuditConfig;
}

/** Where the decision audit log goes (`--audit-*`). */
export interface AuditConfig {
  /** Keep entries in the store (`--audit-store`). */
  readonly store: boolean;
  /** JSON lines on stdout (`--audit-stdout`). */
  readonly stdout: boolean;
  /** The HTTP sink's URL (`--audit-http`); absent: off. */
  readonly httpUrl?: string;
  /** Entries each sink buffers at most (`--audit-buffer`). */
  readonly bufferEntries: number;
  /** Estimated bytes each sink buffers at most (`--audit-buffer-bytes`). */
  readonly bufferBytes: number;
  /** Record payloads, with these masks (`--audit-payloads`, `--audit-mask`); absent: none. */
  readonly payloads?: { readonly masks: readonly Pointer[] };
}

/** How many connections each listener holds, and how long an idle or slow one may stay. */
export interface ConnectionLimits {
  /** Open connections per listener (`--max-connections`). */
  readonly maxConnections: number;
  /** Calls open at once on one gRPC connection (`--max-streams-per-connection`). */
  readonly maxStreamsPerConnection: number;
  /** Time to the HTTP/2 preface or the request headers (`--handshake-timeout`). */
  readonly handshakeTimeoutMs: number;
  /** Time to a whole HTTP request, or to a gRPC call's request message (`--request-timeout`). */
  readonly requestTimeoutMs: number;
  /** Time a connection may stay idle (`--idle-timeout`). */
  readonly idleTimeoutMs: number;
  /** Interval of the server's HTTP/2 keepalive pings (`--keepalive-time`). */
  readonly keepaliveTimeMs: number;
}

/** PEM files of the TLS listeners. */
export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** CA of client certificates; set means mutual TLS. */
  readonly clientCaFile?: string;
}

/**
 * Returns how an option is written on the command line: `--flag VALUE`, or
 * `--flag` for a switch.
 *
 * @example optionSyntax(OPTIONS[0]) // '--grpc-listen ADDR'
 */
export function optionSyntax(o: OptionSpec): string {
  return o.boolean === true ? `--${o.flag}` : `--${o.flag} ${o.value}`;
}

/** Returns the help text of `agenthooks serve`. */
/** A variable the sidecar reads that is not an option's own, for `serve --help` and the README. */
export interface VariableSpec {
  readonly name: string;
  /** One-line description. */
  readonly help: string;
}

/**
 * Variables read from the effective environment (the process environment
 * overlaid by `--hooks-env-file`) at each use, besides the options' own.
 */
export const ENVIRONMENT_VARIABLES: readonly VariableSpec[] = [
  {
    name: 'AGENT_HOOK_WEBHOOK_URL',
    help: 'enables environment hooks for every operation: an http(s) URL or an application-relative path',
  },
  {
    name: 'AGENT_HOOK_WEBHOOK_TOKEN',
    help: 'bearer token of the environment hooks (required with the URL)',
  },
  {
    name: 'AGENT_HOOK_WEBHOOK_EVENTS',
    help: 'comma-separated hook types of the environment hooks (required with the URL)',
  },
  {
    name: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
    help: 'ignore (default) or toolCall: environment hooks as tool-call controls',
  },
  { name: 'AGENT_HOOK_WEBHOOK_ON_ERROR', help: 'continue (default) or block (needs toolCall)' },
  {
    name: 'AGENT_HOOK_WEBHOOK_SIGNING_SECRET',
    help: 'name of a declared signing secret that signs the environment hooks',
  },
  {
    name: 'AGENTHOOKS_SIGNING_SECRET_<NAME>',
    help: 'a whsec_ signing secret declared under NAME (two, space-separated, while rotating)',
  },
  {
    name: 'AGENTHOOKS_SIGNING_ORIGINS_<NAME>',
    help: 'comma-separated origins the secret NAME may sign requests to',
  },
  { name: 'APP_URL', help: 'base of application-relative webhook URLs (first for QStash)' },
  { name: 'INTERNAL_APP_URL', help: 'base of application-relative webhook URLs (first for fetch)' },
  { name: 'QSTASH_TOKEN', help: 'token of delivery: qstash webhooks, read at each send' },
  {
    name: 'VERCEL_AUTOMATION_BYPASS_SECRET',
    help: 'sent as x-vercel-protection-bypass to the origins of APP_URL and INTERNAL_APP_URL',
  },
  {
    name: 'AGENTHOOKS_AUTH_TOKEN',
    help: 'the bearer token itself, instead of --auth-token-file (the process env only, read at start)',
  },
  {
    name: AUDIT_HTTP_AUTHORIZATION_VAR,
    help: 'Authorization header value of the --audit-http sink (such as Bearer ...), read at each batch',
  },
  // Tracing (src/tracing): the process environment only, read at start.
  {
    name: 'OTEL_SDK_DISABLED',
    help: 'true turns tracing off whatever else is set (OTEL_* come from the process env, at start)',
  },
  {
    name: 'OTEL_TRACES_EXPORTER',
    help: 'otlp turns tracing on, none turns it off; any other exporter fails the start',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    help: 'OTLP/HTTP base URL (spans go to its /v1/traces); turns tracing on if no exporter is set',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    help: 'full OTLP/HTTP URL of spans, over the base URL; turns tracing on likewise',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    help: 'http/protobuf, the only protocol shipped (also OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_HEADERS',
    help: 'name=value,... headers of each export (also OTEL_EXPORTER_OTLP_TRACES_HEADERS)',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_TIMEOUT',
    help: 'milliseconds per export request, default 10000 (also ..._TRACES_TIMEOUT)',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_COMPRESSION',
    help: 'gzip or none (also OTEL_EXPORTER_OTLP_TRACES_COMPRESSION)',
  },
  { name: 'OTEL_SERVICE_NAME', help: 'service.name of the spans (default agenthooks)' },
  { name: 'OTEL_RESOURCE_ATTRIBUTES', help: 'name=value,... resource attributes of the spans' },
  {
    name: 'OTEL_TRACES_SAMPLER',
    help: 'sampler, default parentbased_always_on (always_off, traceidratio, parentbased_...)',
  },
  { name: 'OTEL_TRACES_SAMPLER_ARG', help: 'the sampler argument, such as the ratio 0.1' },
  {
    name: 'OTEL_BSP_SCHEDULE_DELAY',
    help: 'milliseconds between batch exports, default 5000 (also OTEL_BSP_MAX_QUEUE_SIZE, ...)',
  },
];

export function serveHelp(): string {
  const lines = [
    'Usage: agenthooks serve [options]',
    '',
    'Runs the agenthooks sidecar. Every option can also be set through its variable;',
    'a flag wins over its variable.',
    '',
    'Options:',
  ];
  // One column width for every name, so that no long flag breaks the columns.
  const width =
    Math.max(
      ...OPTIONS.map((o) => optionSyntax(o).length),
      ...ENVIRONMENT_VARIABLES.map((v) => v.name.length),
    ) + 1;
  for (const o of OPTIONS) {
    const name = optionSyntax(o);
    const def = o.default === undefined ? '' : ` (default ${o.default})`;
    lines.push(`  ${name.padEnd(width)} ${o.help}${def}`);
    lines.push(`  ${''.padEnd(width)} env ${o.env}${o.multiple ? ' (comma-separated)' : ''}`);
  }
  lines.push(`  ${'--help'.padEnd(width)} show this help`);
  lines.push(
    '',
    'Environment (the process environment overlaid by --hooks-env-file; never stored):',
  );
  for (const v of ENVIRONMENT_VARIABLES) lines.push(`  ${v.name.padEnd(width)} ${v.help}`);
  return `${lines.join('\n')}\n`;
}

/** The suffixes of the variables Kubernetes sets for each Service of the namespace. */
const SERVICE_LINK =
  /_(?:SERVICE_HOST|SERVICE_PORT(?:_\w+)?|PORT(?:_\d+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)?)$/;

/** Prefixes of the `AGENTHOOKS_*` variables whose names the operator chooses. */
const NAMED_VARIABLE_PREFIXES = [SIGNING_SECRET_PREFIX, SIGNING_ORIGINS_PREFIX];

/**
 * Refuses an `AGENTHOOKS_*` variable that is a near miss of one the sidecar
 * reads (`AGENTHOOKS_AUTH_TOKEN_FIL`): ignored, it would leave a setting at its
 * default, the token off among them. Names far from every known one are left
 * alone: clients and tools of the same family use the prefix too
 * (`AGENTHOOKS_ADDRESS`).
 *
 * @throws InvalidArgumentError naming the variable and the one it likely means.
 */
function checkVariableNames(env: Readonly<Record<string, string | undefined>>): void {
  const known = [
    ...OPTIONS.map((o) => o.env),
    ...ENVIRONMENT_VARIABLES.map((v) => v.name).filter((n) => !n.includes('<')),
  ];
  const knownSet = new Set(known);
  for (const name of Object.keys(env)) {
    if (!name.startsWith(OWN_VARIABLE_PREFIX) || knownSet.has(name)) continue;
    if (NAMED_VARIABLE_PREFIXES.some((p) => name.startsWith(p))) continue;
    // Kubernetes' service links (a Service named agenthooks-users-postgres gives
    // AGENTHOOKS_USERS_POSTGRES_PORT): not the operator's words.
    if (SERVICE_LINK.test(name)) continue;
    // A fifth of the part after the prefix may differ: a typo, not another name.
    const suffix = name.length - OWN_VARIABLE_PREFIX.length;
    const near = known.find((k) => editDistance(name, k) <= Math.max(1, Math.floor(suffix / 5)));
    if (near !== undefined) {
      throw new InvalidArgumentError(
        name,
        INVALID_FLAG,
        `unknown variable ${name}; did you mean ${near}?`,
      );
    }
  }
}

/**
 * Refuses `--env-file` among the arguments: Node 20 takes it wherever it
 * stands in `argv` (a missing file ends the process with exit 9 before any
 * of ours runs), so the sidecar's env file has a name Node does not take.
 *
 * @throws InvalidArgumentError naming `env-file` and `--hooks-env-file`.
 */
function refuseNodeEnvFile(args: readonly string[]): void {
  for (const arg of args) {
    if (arg === '--') return;
    if (arg === '--env-file' || arg.startsWith('--env-file=')) {
      throw new InvalidArgumentError(
        'env-file',
        INVALID_FLAG,
        '--env-file is a flag of Node itself, which checks the file before agenthooks starts; give the env file as --hooks-env-file (or AGENTHOOKS_ENV_FILE)',
      );
    }
  }
}

/**
 * Refuses a flag that takes one value given more than once: the last one
 * would win silently (`--admin-listen off --admin-listen 0.0.0.0:8081`).
 * List flags (`multiple`) may repeat.
 *
 * @throws InvalidArgumentError naming the flag.
 */
function refuseRepeatedFlags(tokens: readonly { kind: string; name?: string }[]): void {
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === undefined) continue;
    const spec = OPTIONS.find((o) => o.flag === token.name);
    if (spec?.multiple === true) continue;
    if (seen.has(token.name)) {
      throw new InvalidArgumentError(
        token.name,
        INVALID_FLAG,
        `--${token.name} is given more than once; it takes one value`,
      );
    }
    seen.add(token.name);
  }
}

/**
 * Refuses an empty value, of a flag (`--shutdown-grace ""`, `--db=`, one
 * value of a list flag) or of a variable the sidecar reads
 * (`AGENTHOOKS_ENV_FILE=`): read as unset it would turn a setting, such as
 * the env file or the token, off without a word. Variables far from every
 * name the sidecar reads are left alone, as {@link checkVariableNames} does.
 *
 * @throws InvalidArgumentError naming the flag or the variable.
 */
function refuseEmptyValues(
  values: Readonly<Record<string, string | string[] | boolean | undefined>>,
  env: Readonly<Record<string, string | undefined>>,
): void {
  for (const o of OPTIONS) {
    const v = values[o.flag];
    if (v === '' || (Array.isArray(v) && v.includes(''))) {
      throw new InvalidArgumentError(
        o.flag,
        INVALID_FLAG,
        `--${o.flag} is given an empty value; leave the flag out to use its default`,
      );
    }
  }
  for (const name of Object.keys(env)) {
    if (env[name] !== '' || !isReadVariable(name)) continue;
    throw new InvalidArgumentError(
      name,
      INVALID_FLAG,
      `${name} is set but empty; unset it to use its default`,
    );
  }
}

/**
 * True for an option's variable and for an `AGENTHOOKS_*` variable the
 * sidecar reads. The others of {@link ENVIRONMENT_VARIABLES} keep their own
 * rules (an empty `AGENT_HOOK_WEBHOOK_URL` is an invalid environment).
 */
function isReadVariable(name: string): boolean {
  if (OPTIONS.some((o) => o.env === name)) return true;
  if (!name.startsWith(OWN_VARIABLE_PREFIX)) return false;
  return (
    ENVIRONMENT_VARIABLES.some((v) => v.name === name) ||
    NAMED_VARIABLE_PREFIXES.some((p) => name.startsWith(p))
  );
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
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const o of OPTIONS) {
    options[o.flag] = {
      type: o.boolean === true ? 'boolean' : 'string',
      multiple: o.multiple === true,
    };
  }
  refuseNodeEnvFile(args);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...args],
      options,
      allowPositionals: false,
      strict: true,
      tokens: true,
    });
  } catch (e: unknown) {
    throw new InvalidArgumentError('args', INVALID_FLAG, (e as Error).message, { cause: e });
  }
  const values = parsed.values as Record<string, string | string[] | boolean | undefined>;
  refuseRepeatedFlags(parsed.tokens ?? []);
  refuseEmptyValues(values, env);
  const get = (flag: string): string[] => {
    const spec = OPTIONS.find((o) => o.flag === flag) as OptionSpec;
    const v = values[flag];
    if (typeof v === 'boolean') return [String(v)];
    if (v !== undefined) return Array.isArray(v) ? v : [v];
    const fromEnv = env[spec.env];
    if (fromEnv !== undefined) {
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
  // Every comma-separated item of a list flag (or its variable) as written: none trimmed or dropped.
  const items = (flag: string): string[] => {
    const spec = OPTIONS.find((o) => o.flag === flag) as OptionSpec;
    const v = values[flag];
    const fromEnv = env[spec.env];
    const given =
      typeof v === 'string' || Array.isArray(v)
        ? [v].flat()
        : fromEnv === undefined
          ? []
          : [fromEnv];
    return given.flatMap((text) => text.split(','));
  };
  // A list flag may also be given comma-separated, like its variable.
  const list = (flag: string): string[] =>
    get(flag)
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter(Boolean);
  const bool = (flag: string): boolean => {
    const text = (one(flag) ?? 'false').trim().toLowerCase();
    const value = BOOLEAN_VALUES[text];
    if (value === undefined) {
      throw new InvalidArgumentError(flag, INVALID_FLAG, `--${flag} takes true or false`);
    }
    return value;
  };

  const grpcListen = get('grpc-listen').map((a) => parseListen(a, 'grpc-listen', true));
  if (grpcListen.length === 0) {
    throw new InvalidArgumentError(
      'grpc-listen',
      INVALID_FLAG,
      '--grpc-listen needs at least one address',
    );
  }
  const health = one('health-listen');
  const http = one('http-listen');
  const shutdownGraceMs = positiveSeconds(one('shutdown-grace'), 'shutdown-grace', true);
  const handlerTimeoutMs = positiveSeconds(one('handler-timeout'), 'handler-timeout');
  const maxInFlight = decimal(one('stream-max-in-flight'));
  if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
    throw new InvalidArgumentError(
      'stream-max-in-flight',
      INVALID_FLAG,
      '--stream-max-in-flight must be a whole number >= 1',
    );
  }
  const level = one('log-level') as LogLevel;
  if (!LOG_LEVELS.includes(level)) {
    throw new InvalidArgumentError(
      'log-level',
      INVALID_FLAG,
      `--log-level must be one of ${LOG_LEVELS.join(', ')}`,
    );
  }
  const { dbPath, dbUrl } = parseDb(one('db') as string, values.db !== undefined);
  const dbBusyTimeoutMs = positiveSeconds(one('db-busy-timeout'), 'db-busy-timeout', true);
  const maxSize = one('db-max-size');
  const dbMaxSizeBytes = maxSize === undefined ? undefined : decimal(maxSize);
  if (
    dbMaxSizeBytes !== undefined &&
    (!Number.isSafeInteger(dbMaxSizeBytes) || dbMaxSizeBytes < MIN_DB_MAX_SIZE_BYTES)
  ) {
    throw new InvalidArgumentError(
      'db-max-size',
      INVALID_FLAG,
      `--db-max-size must be a whole number of bytes >= ${MIN_DB_MAX_SIZE_BYTES}`,
    );
  }
  const startTimeout = one('db-start-timeout');
  const dbStartTimeoutMs =
    startTimeout === undefined || startTimeout === 'off'
      ? undefined
      : parseDuration(startTimeout, 'db-start-timeout', true);
  const storeCheckIntervalMs = positiveSeconds(one('store-check-interval'), 'store-check-interval');
  const retentionMs = parseDuration(one('retention') as string, 'retention');
  const tombstoneRetentionMs = parseDuration(
    one('tombstone-retention') as string,
    'tombstone-retention',
  );
  const publicationLeaseMs = parseDuration(
    one('publication-lease') as string,
    'publication-lease',
    true,
  );
  if (publicationLeaseMs < MIN_PUBLICATION_LEASE_MS) {
    // Renewed every third of it: a shorter lease is a store write every few
    // milliseconds per publication, and live holders taken over on a GC pause.
    throw new InvalidArgumentError(
      'publication-lease',
      INVALID_FLAG,
      `--publication-lease must be at least ${MIN_PUBLICATION_LEASE_MS}ms`,
    );
  }
  const qstashUrl = one('qstash-url') as string;
  if (!hasProtocol(qstashUrl, HTTP_PROTOCOLS)) {
    throw new InvalidArgumentError(
      'qstash-url',
      INVALID_FLAG,
      '--qstash-url must be an http(s) URL',
    );
  }
  const usersPostgresUrl = one('users-postgres-url');
  if (usersPostgresUrl !== undefined && !hasProtocol(usersPostgresUrl, POSTGRES_PROTOCOLS)) {
    // The URL holds a password: the message never quotes it.
    throw new InvalidArgumentError(
      'users-postgres-url',
      INVALID_FLAG,
      '--users-postgres-url must be a postgres:// or postgresql:// URL',
    );
  }
  if (usersPostgresUrl !== undefined && values['users-postgres-url'] !== undefined) {
    refusePasswordInFlag(new URL(usersPostgresUrl), 'users-postgres-url', USERS_URL_VAR);
  }
  const usersPostgresQuery = one('users-postgres-query') as string;
  if (!usersPostgresQuery.includes(USER_ID_PARAMETER)) {
    throw new InvalidArgumentError(
      'users-postgres-query',
      INVALID_FLAG,
      `--users-postgres-query must use ${USER_ID_PARAMETER} for the user id`,
    );
  }
  const security = parseSecurityOptions({ one, list, items, bool }, env);
  const audit = parseAuditOptions({ one, list, items, bool });
  const metrics = one('metrics-listen');
  const admin = one('admin-listen');
  const connections = parseConnectionLimits(one);
  const config = Object.freeze(
    extend(security, {
      maxDetachedDeliveries: wholeNumber(one('max-detached-deliveries'), 'max-detached-deliveries'),
      maxDetachedBytes: wholeNumber(one('max-detached-bytes'), 'max-detached-bytes'),
      webhookMaxConnections: wholeNumber(one('webhook-max-connections'), 'webhook-max-connections'),
      hookCacheBytes: wholeNumber(one('hook-cache-size'), 'hook-cache-size'),
      audit,
      dbBusyTimeoutMs,
      dbMaxSizeBytes,
      dbStartTimeoutMs,
      dbPoolSize: wholeNumber(one('db-pool-size'), 'db-pool-size'),
      storeCheckIntervalMs,
      retentionMs,
      tombstoneRetentionMs,
      publicationLeaseMs,
      grpcListen: Object.freeze(grpcListen),
      healthListen: health === undefined ? undefined : parseListen(health, 'health-listen', false),
      httpListen:
        http === undefined || http === 'off' ? undefined : parseListen(http, 'http-listen', false),
      metricsListen:
        metrics === undefined || metrics === 'off'
          ? undefined
          : parseListen(metrics, 'metrics-listen', false),
      adminListen:
        admin === undefined || admin === 'off'
          ? undefined
          : parseListen(admin, 'admin-listen', false),
      connections,
      dbPath,
      dbUrl,
      envFile: one('hooks-env-file'),
      pluginsFile: one('plugins-file'),
      shutdownGraceMs,
      handlerTimeoutMs,
      streamMaxInFlight: maxInFlight,
      streamMaxInFlightBytes: wholeNumber(
        one('stream-max-in-flight-bytes'),
        'stream-max-in-flight-bytes',
      ),
      logLevel: level,
      qstashUrl,
      usersPostgresUrl,
      usersPostgresQuery,
    }),
  );
  // Refused rather than warned about: a default is a promise, and an API any
  // host can reach without a token is not one the operator should get by accident.
  const exposed = exposedListeners(config);
  // A client certificate signed by --tls-client-ca authenticates as a token does.
  const unauthenticated =
    security.authToken === undefined &&
    security.authTokenFile === undefined &&
    security.tls?.clientCaFile === undefined;
  // Read always, so that a bad value is refused whether or not it is needed.
  const allowUnauthenticated = bool('allow-unauthenticated');
  if (unauthenticated && exposed.length > 0 && !allowUnauthenticated) {
    throw new InvalidArgumentError(
      exposed[0]?.flag ?? 'grpc-listen',
      INVALID_FLAG,
      `${exposed.map((e) => e.text).join(', ')} would serve the API beyond loopback without a bearer token: set --auth-token-file (or AGENTHOOKS_AUTH_TOKEN), or --allow-unauthenticated to accept it`,
    );
  }
  return config;
}

/** A listener that serves the API on a TCP address other than loopback. */
export interface ExposedListener {
  readonly flag: string;
  /** `--grpc-listen 0.0.0.0:50051`. */
  readonly text: string;
}

/** The API listeners (and the admin console) on TCP addresses other than loopback. */
export function exposedListeners(config: ServeConfig): ExposedListener[] {
  const exposed: ExposedListener[] = [];
  const add = (flag: string, address: ListenAddress | undefined) => {
    if (address?.kind === 'tcp' && !isLoopback(address.host)) {
      exposed.push({ flag, text: `--${flag} ${address.text}` });
    }
  };
  for (const address of config.grpcListen) add('grpc-listen', address);
  add('admin-listen', config.adminListen);
  add('http-listen', config.httpListen);
  return exposed;
}

/** The loopback addresses: `127.0.0.0/8`, `::1` and IPv4-mapped `127.0.0.0/8`. */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/**
 * True for `localhost` (and `ip6-localhost`) and the loopback addresses
 * however they are written (`[0::1]`, `::ffff:7f00:1`, `127.1`): the
 * address is read as the system reads it before it is checked.
 */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h === 'ip6-localhost') return true;
  if (isIP(h) === 6) return LOOPBACK.check(h, 'ipv6');
  // An IPv4 address in a short or numeric form (`127.1`), as URL (and inet_aton) read it.
  let canonical: string;
  try {
    canonical = new URL(`http://${h}/`).hostname;
  } catch {
    return false;
  }
  return isIPv4(canonical) && LOOPBACK.check(canonical, 'ipv4');
}

/**
 * Reads the `--audit-*` options. A mask without `--audit-payloads` is
 * refused (it would mask nothing: no payload is recorded), and so is a
 * credential in the `--audit-http` URL (flags show in `ps`).
 */
function parseAuditOptions(read: OptionReaders): AuditConfig {
  const httpUrl = read.one('audit-http');
  if (httpUrl !== undefined) {
    if (!hasProtocol(httpUrl, HTTP_PROTOCOLS)) {
      throw new InvalidArgumentError(
        'audit-http',
        INVALID_FLAG,
        '--audit-http must be an http(s) URL',
      );
    }
    const url = new URL(httpUrl);
    if (url.username !== '' || url.password !== '') {
      throw new InvalidArgumentError(
        'audit-http',
        INVALID_FLAG,
        `--audit-http must not hold credentials; set ${AUDIT_HTTP_AUTHORIZATION_VAR} instead`,
      );
    }
  }
  const bufferEntries = wholeNumber(read.one('audit-buffer'), 'audit-buffer');
  const bufferBytes = wholeNumber(read.one('audit-buffer-bytes'), 'audit-buffer-bytes');
  // Each item trimmed (`/a, /b`), none dropped: an empty one would mask nothing, silently.
  const masks = read.items('audit-mask').map((item) => {
    const m = item.trim();
    if (m === '') {
      throw new InvalidArgumentError(
        'audit-mask',
        INVALID_FLAG,
        '--audit-mask: an empty item; each is a JSON pointer to one field (such as /args/password), and none names the whole payload (leave --audit-payloads off to record none)',
      );
    }
    return parsePointer(m, 'audit-mask');
  });
  const payloads = read.bool('audit-payloads');
  if (masks.length > 0 && !payloads) {
    throw new InvalidArgumentError(
      'audit-mask',
      INVALID_FLAG,
      '--audit-mask needs --audit-payloads: without it no payload is recorded',
    );
  }
  return Object.freeze({
    store: read.bool('audit-store'),
    stdout: read.bool('audit-stdout'),
    httpUrl,
    bufferEntries,
    bufferBytes,
    payloads: payloads ? Object.freeze({ masks: Object.freeze(masks) }) : undefined,
  });
}

/**
 * Reads `--db`: a `postgres://` or `postgresql://` URL names the PostgreSQL
 * store, anything else is an SQLite file. A password in the flag itself (in
 * the URL's user part or its `password` query option) is refused, as flags
 * show in `ps`; the variable may hold one. Messages never quote the value.
 */
function parseDb(text: string, fromFlag: boolean): { dbPath?: string; dbUrl?: string } {
  if (!isPostgresUrl(text)) return { dbPath: text };
  let url: URL;
  try {
    url = new URL(text);
  } catch (e: unknown) {
    throw new InvalidArgumentError(
      'db',
      INVALID_FLAG,
      '--db is not a valid postgres:// or postgresql:// URL',
      { cause: e },
    );
  }
  if (fromFlag) refusePasswordInFlag(url, 'db', DB_PATH_VAR);
  return { dbUrl: text };
}

/**
 * Refuses a PostgreSQL URL given as a flag with a password in it (its user
 * part or its `password` query option): flags show in `ps`. The message
 * names the variable that may hold the URL instead, and never quotes it.
 */
function refusePasswordInFlag(url: URL, flag: string, variable: string): void {
  if (url.password === '' && !url.searchParams.has('password')) return;
  throw new InvalidArgumentError(
    flag,
    INVALID_FLAG,
    `--${flag} must not hold a password (flags show in ps): put the URL in ${variable}, or the password in PGPASSWORD or a password file (PGPASSFILE)`,
  );
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
      throw new InvalidArgumentError(flag, INVALID_FLAG, `--${flag} does not take ${text}`);
    }
    return { kind: 'unix', path, text };
  }
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (m === null || port > 65535) {
    throw new InvalidArgumentError(flag, INVALID_FLAG, `--${flag} must be host:port, got ${text}`);
  }
  return { kind: 'tcp', host: (m[1] ?? m[2]) as string, port, text };
}

/** Reads a decimal number (`16`, `2.5`); NaN for anything else (`0x10`, `1e7`, `-1`, ` `). */
function decimal(text: string | undefined): number {
  return text !== undefined && DECIMAL.test(text.trim()) ? Number(text) : Number.NaN;
}

/** Parses a whole number >= 1. */
function wholeNumber(text: string | undefined, flag: string): number {
  const value = decimal(text);
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(flag, INVALID_FLAG, `--${flag} must be a whole number >= 1`);
  }
  return value;
}

/** Parses the connection cap and timeouts of the listeners. */
function parseConnectionLimits(one: (flag: string) => string | undefined): ConnectionLimits {
  const maxConnections = decimal(one('max-connections'));
  if (!Number.isSafeInteger(maxConnections) || maxConnections < 1) {
    throw new InvalidArgumentError(
      'max-connections',
      INVALID_FLAG,
      '--max-connections must be a whole number >= 1',
    );
  }
  const handshakeTimeoutMs = positiveSeconds(one('handshake-timeout'), 'handshake-timeout');
  const requestTimeoutMs = positiveSeconds(one('request-timeout'), 'request-timeout');
  // Node refuses a headers timeout longer than the request timeout.
  if (requestTimeoutMs < handshakeTimeoutMs) {
    throw new InvalidArgumentError(
      'request-timeout',
      INVALID_FLAG,
      '--request-timeout must be at least --handshake-timeout',
    );
  }
  const maxStreamsPerConnection = wholeNumber(
    one('max-streams-per-connection'),
    'max-streams-per-connection',
  );
  // An HTTP/2 setting is 32 bits; Node throws at the first connection past it.
  if (maxStreamsPerConnection > MAX_HTTP2_SETTING) {
    throw new InvalidArgumentError(
      'max-streams-per-connection',
      INVALID_FLAG,
      `--max-streams-per-connection must be at most ${MAX_HTTP2_SETTING}`,
    );
  }
  return Object.freeze({
    maxConnections,
    maxStreamsPerConnection,
    handshakeTimeoutMs,
    requestTimeoutMs,
    idleTimeoutMs: positiveSeconds(one('idle-timeout'), 'idle-timeout'),
    keepaliveTimeMs: positiveSeconds(one('keepalive-time'), 'keepalive-time'),
  });
}

/**
 * Parses a decimal number of seconds into whole milliseconds, from 1 ms (or
 * 0 when `zero` is allowed) to {@link MAX_TIMER_MS}: a Node timer fires a
 * longer delay after 1 ms, and a fraction of a millisecond is refused by
 * the APIs that take one (SQLite's busy timeout).
 *
 * @throws InvalidArgumentError naming the flag.
 * @example positiveSeconds('2.5', 'shutdown-grace') // 2500
 */
function positiveSeconds(text: string | undefined, flag: string, zero = false): number {
  const seconds = decimal(text);
  const ms = Math.round(seconds * 1000);
  if (!(ms >= 0) || (ms === 0 && !(zero && seconds === 0)) || ms > MAX_TIMER_MS) {
    throw new InvalidArgumentError(
      flag,
      INVALID_FLAG,
      `--${flag} must be a number of seconds from 0.001${zero ? ' (or 0)' : ''} to at most ${MAX_TIMER_TEXT}`,
    );
  }
  return ms;
}

const DURATION_UNITS_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/**
 * Parses a duration such as `7d`, `12h`, `30m`, `90s`, `500ms` or a plain
 * number of seconds into milliseconds, rounded to a whole number (the
 * retention sweep counts whole milliseconds). `timer` caps it at
 * {@link MAX_TIMER_MS}, for a duration a Node timer waits (a longer one
 * fires after 1 ms); a retention is an age, never a timer's delay.
 *
 * @throws InvalidArgumentError naming the flag, also when the duration
 *   rounds to 0 ms, is too long to count in milliseconds exactly or (with
 *   `timer`) is longer than a timer waits.
 * @example parseDuration('2.3h', 'retention') // 8_280_000
 */
export function parseDuration(text: string, flag: string, timer = false): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  const ms = Math.round(Number(m?.[1]) * (DURATION_UNITS_MS[m?.[2] ?? 's'] as number));
  if (m === null || !(ms > 0) || !Number.isSafeInteger(ms)) {
    throw new InvalidArgumentError(
      flag,
      INVALID_FLAG,
      `--${flag} must be a duration such as 7d, 12h, 30m or 90s`,
    );
  }
  if (timer && ms > MAX_TIMER_MS) {
    throw new InvalidArgumentError(
      flag,
      INVALID_FLAG,
      `--${flag} must be at most ${MAX_TIMER_TEXT}, the longest a timer waits`,
    );
  }
  return ms;
}

/** Readers of option values, as {@link parseServeConfig} builds them. */
interface OptionReaders {
  /** The last value of a flag, its variable or its default. */
  one(flag: string): string | undefined;
  /** Every value of a list flag, comma-separated values split. */
  list(flag: string): string[];
  /** Every comma-separated item of a list flag or its variable, as written (none trimmed or dropped). */
  items(flag: string): string[];
  /** A switch. */
  bool(flag: string): boolean;
}

/** The options of issue "safe by default": secrets, destinations, authentication and limits. */
type SecurityOptions = Pick<
  ServeConfig,
  | 'callerEnvAllowlist'
  | 'webhookAllow'
  | 'webhookDeny'
  | 'dnsServer'
  | 'authTokenFile'
  | 'authToken'
  | 'reflectionPublic'
  | 'socketMode'
  | 'socketGroup'
  | 'tls'
  | 'maxMessageBytes'
  | 'maxMessageNodes'
  | 'maxHooksPerOperation'
>;

/** Parses and checks the security options. */
function parseSecurityOptions(
  { one, list, bool }: OptionReaders,
  env: Readonly<Record<string, string | undefined>>,
): SecurityOptions {
  const callerEnvAllowlist = list('caller-env-allowlist');
  const badName = callerEnvAllowlist.find((name) => !isEnvVarName(name));
  if (badName !== undefined) {
    throw new InvalidArgumentError(
      'caller-env-allowlist',
      INVALID_FLAG,
      `--caller-env-allowlist: ${badName} is not a variable name`,
    );
  }
  // The sidecar's own settings hold its secrets (signing keys, the API token):
  // a caller's header template must never send one to its receiver.
  const ownName = callerEnvAllowlist.find((name) => name.startsWith(OWN_VARIABLE_PREFIX));
  if (ownName !== undefined) {
    throw new InvalidArgumentError(
      'caller-env-allowlist',
      INVALID_FLAG,
      `--caller-env-allowlist: ${ownName} is a setting of agenthooks (${OWN_VARIABLE_PREFIX}*), which caller hooks may not send`,
    );
  }
  const webhookAllow = list('webhook-allow');
  const webhookDeny = list('webhook-deny');
  for (const [flag, rules] of [
    ['webhook-allow', webhookAllow],
    ['webhook-deny', webhookDeny],
  ] as const) {
    try {
      new DestinationPolicy({ [flag === 'webhook-allow' ? 'allow' : 'deny']: rules });
    } catch (e: unknown) {
      throw new InvalidArgumentError(flag, INVALID_FLAG, `--${flag}: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }
  const dnsServer = one('dns-server');
  if (dnsServer !== undefined) parseListen(dnsServer, 'dns-server', false);

  checkVariableNames(env);
  // An empty token or token file (a Secret key that is present and empty) was
  // refused by refuseEmptyValues: it must not serve the API without a token.
  const authTokenFile = one('auth-token-file');
  const authToken = env[AUTH_TOKEN_VAR];
  if (authTokenFile !== undefined && authToken !== undefined) {
    throw new InvalidArgumentError(
      'auth-token-file',
      INVALID_FLAG,
      `set either --auth-token-file or ${AUTH_TOKEN_VAR}, not both`,
    );
  }
  if (authToken !== undefined && authToken.trim() === '') {
    // The message never quotes the token.
    throw new InvalidArgumentError(AUTH_TOKEN_VAR, INVALID_FLAG, `${AUTH_TOKEN_VAR} is blank`);
  }

  const modeText = one('socket-mode') as string;
  if (!SOCKET_MODE.test(modeText)) {
    throw new InvalidArgumentError(
      'socket-mode',
      INVALID_FLAG,
      '--socket-mode must be an octal mode such as 0660',
    );
  }

  const certFile = one('tls-cert');
  const keyFile = one('tls-key');
  const clientCaFile = one('tls-client-ca');
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new InvalidArgumentError(
      certFile === undefined ? 'tls-cert' : 'tls-key',
      INVALID_FLAG,
      '--tls-cert and --tls-key go together',
    );
  }
  if (clientCaFile !== undefined && certFile === undefined) {
    throw new InvalidArgumentError(
      'tls-client-ca',
      INVALID_FLAG,
      '--tls-client-ca needs --tls-cert and --tls-key',
    );
  }

  const maxMessageBytes = decimal(one('max-message-bytes'));
  if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1) {
    throw new InvalidArgumentError(
      'max-message-bytes',
      INVALID_FLAG,
      '--max-message-bytes must be a whole number >= 1',
    );
  }
  const maxHooksPerOperation = decimal(one('max-hooks-per-operation'));
  if (!Number.isSafeInteger(maxHooksPerOperation) || maxHooksPerOperation < 1) {
    throw new InvalidArgumentError(
      'max-hooks-per-operation',
      INVALID_FLAG,
      '--max-hooks-per-operation must be a whole number >= 1',
    );
  }
  return {
    callerEnvAllowlist: Object.freeze(callerEnvAllowlist),
    webhookAllow: Object.freeze(webhookAllow),
    webhookDeny: Object.freeze(webhookDeny),
    dnsServer,
    authTokenFile,
    authToken,
    reflectionPublic: bool('reflection-public'),
    socketMode: Number.parseInt(modeText, 8),
    socketGroup: one('socket-group'),
    tls:
      certFile === undefined || keyFile === undefined
        ? undefined
        : Object.freeze({ certFile, keyFile, clientCaFile }),
    maxMessageBytes,
    maxMessageNodes: wholeNumber(one('max-message-nodes'), 'max-message-nodes'),
    maxHooksPerOperation,
  };
}
