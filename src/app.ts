/**
 * @module The composition root: opens the store (the SQLite file, or the
 * shared PostgreSQL database of a `postgres://` `--db`), builds the webhook sender, email
 * enrichment, the hook registry, the handler hub, retention, store health
 * and the HookService implementation from a validated config, owns their
 * background work, and closes them in order. It listens on nothing: the
 * transports in `src/server/` serve an app, and tests build one in process.
 */
import { setMaxListeners } from 'node:events';
import type { ServiceImpl } from '@connectrpc/connect';
import { HookService } from '../gen/agenthooks/v1/service_pb.js';
import { AuditLog } from './audit/audit-log.js';
import { BackgroundScope } from './background.js';
import { AUDIT_HTTP_AUTHORIZATION_VAR, type ServeConfig } from './config/config.js';
import { EffectiveEnvironment } from './config/environment.js';
import { OperatorPlugins } from './config/plugins.js';
import { createAuditDecisionSource } from './console/audit-source.js';
import { createConsoleSource } from './console/source.js';
import type { ConsoleSource } from './console/views.js';
import { createDnsResolver, DestinationPolicy } from './delivery/destination.js';
import { EmailEnricher } from './delivery/email.js';
import { WebhookSender } from './delivery/webhook.js';
import { AgentHooksError, StoreUnavailableError } from './errors.js';
import { extend } from './extend.js';
import { HandlerHub } from './hooks/handlers.js';
import { HookRegistry } from './hooks/registry.js';
import type { Logger } from './log.js';
import { Metrics } from './metrics.js';
import {
  HealthState,
  LIVENESS_SERVICE,
  READINESS_SERVICE,
  ServingStatus,
} from './server/health.js';
import { createHookService } from './service/hook-service.js';
import { DeferredStore, isRetryableOpenError } from './store/deferred.js';
import { StoreHealthMonitor } from './store/health-monitor.js';
import { openPostgresStore } from './store/postgres.js';
import { startRetention } from './store/retention.js';
import { openSqliteStore, type SqliteStore } from './store/sqlite.js';
import { lockPathOf } from './store/sqlite-lock.js';
import type {
  DecisionStore,
  HookStore,
  ParkStore,
  RetentionStore,
  UserStore,
} from './store/store.js';
import type { Tracing } from './tracing/tracing.js';
import { createUserDirectory } from './users/directory.js';
import { packageVersion } from './version.js';

/** Interval of the retention sweep, in milliseconds (shorter when a retention itself is short). */
export const RETENTION_SWEEP_INTERVAL_MS = 60_000;
/**
 * Sweeps per retention period when the shorter retention is under four
 * intervals: rows then outstay it by at most a quarter of it.
 */
const SWEEPS_PER_SHORT_RETENTION = 4;
/** Shortest sweep interval, in milliseconds, whatever the retentions. */
const RETENTION_SWEEP_MIN_INTERVAL_MS = 100;
/** Rows removed per retention transaction, so a sweep never stalls calls. */
export const RETENTION_BATCH_SIZE = 200;

/** Time a shutdown gives the trace exporter to flush, even when the grace period is spent. */
const MIN_TRACE_FLUSH_MS = 2000;

/** Least time the store gets to close at shutdown, however late, in milliseconds. */
const MIN_STORE_CLOSE_MS = 500;

/**
 * Whether `work` resolved within `ms`; rejects as it does within them. Past
 * them it goes on in the background (the race still handles its rejection).
 */
async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([work.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Every store interface the app uses; the SQLite and the PostgreSQL store both have them. */
export type AppStore = HookStore & UserStore & ParkStore & RetentionStore & DecisionStore;

/** A store opened before the app, and whether other processes write it too. */
export interface OpenedStore {
  readonly store: AppStore;
  /**
   * Other sidecars write it (the shared PostgreSQL store): nothing read from
   * it is cached, and every health interval asks the server.
   */
  readonly shared: boolean;
  /**
   * The store is not open yet (a {@link DeferredStore} whose database could
   * not be reached at start): readiness starts NOT_SERVING, and each health
   * interval tries to open it until it opens. Default false.
   */
  readonly opening?: boolean;
}

/** What `createApp` needs beyond the config. */
export interface AppOptions {
  /**
   * The store, already open; the app closes it. Default: the SQLite file of
   * `config.dbPath`, opened by `createApp` ({@link openApp} opens the
   * PostgreSQL store of `config.dbUrl`).
   */
  readonly store?: OpenedStore;
  /** The process's metrics, when the store already reports to them; default new ones. */
  readonly metrics?: Metrics;
  /** The process environment the effective environment starts from. Default `process.env`. */
  readonly processEnv?: Readonly<Record<string, string | undefined>>;
  /**
   * Called once when the app cannot go on: its store could not be opened
   * within `--db-start-timeout`, or can never be (a schema newer than the
   * code). The owner shuts the process down with a non-zero exit. Without
   * it, the failure is only logged.
   */
  readonly onFatal?: (e: unknown) => void;
  /**
   * Whether the webhook sender's pool also becomes undici's global
   * dispatcher (so that any global `fetch` goes through its pool and
   * destination check; QStash publishes use the pool either way). Default
   * true; tests that build several apps in one process turn it off.
   */
  readonly globalDispatcher?: boolean;
  /**
   * The tracer (`startTracing`), when the `OTEL_*` variables turn tracing
   * on; the app ends it last in `close()`, which flushes its spans. Default
   * none: no spans.
   */
  readonly tracing?: Tracing | undefined;
  /**
   * Whether the SQLite store holds its lock file while open, so that a second
   * `serve` on the same file fails to start (`STORE_LOCKED`), waiting up to
   * `--shutdown-grace` for a holder on its way out. `agenthooks serve` sets it;
   * tests that run several apps on one file in a process do not. Default false.
   */
  readonly lockStore?: boolean;
  /** Called when opening the SQLite store made its file (see `SqliteStoreOptions.onCreated`). */
  readonly onStoreCreated?: () => void;
}

/** A built application: the service implementation and what the edge reports on. */
export interface App {
  /** The HookService implementation (unguarded: the edge wraps it). */
  readonly hookService: Partial<ServiceImpl<typeof HookService>>;
  /**
   * Serving status of the server and its services: liveness SERVING while
   * listening; readiness (and the rest) NOT_SERVING while the store fails.
   */
  readonly health: HealthState;
  /** The process's Prometheus metrics. */
  readonly metrics: Metrics;
  /** What the admin console reads (read-only views, redacted). */
  readonly console: ConsoleSource;
  readonly logger: Logger;
  /** The tracer the edge makes server spans with; undefined while tracing is off. */
  readonly tracing: Tracing | undefined;
  /** Owner of detached work (webhooks started and not awaited). */
  readonly background: BackgroundScope;
  /** Called once the listeners are bound: liveness turns SERVING, readiness too unless the store failed. */
  markListening(): void;
  /** Runs the store's write probe now (not while it is still opening); health follows its answer. */
  checkStore(): Promise<void>;
  /** Tells the app that a call failed on the server's side; a store error triggers a store check. */
  serverFault(e: unknown): void;
  /** Re-reads the effective environment and the operator plugins file (SIGHUP). */
  reloadConfiguration(): void;
  /** The sidecar starts draining: the streams end once what they hold is answered. */
  startDraining(): void;
  /**
   * Waits for background work until `deadlineMs` (epoch milliseconds), aborts
   * what is left, then stops retention and health checks and closes the
   * sender, the user directory and the store. Safe to call twice.
   */
  close(deadlineMs?: number): Promise<void>;
}

/**
 * Opens the store the config names and builds the application on it: the
 * PostgreSQL store of `config.dbUrl` (connected and migrated first, so this
 * is async), else {@link createApp}'s SQLite file.
 *
 * A PostgreSQL database that cannot be reached at start (or whose migration
 * lock stays held) does not fail the start: the app is built on a
 * {@link DeferredStore} that each health interval tries to open, so the
 * sidecar listens with liveness SERVING and readiness NOT_SERVING, and its
 * calls fail `UNAVAILABLE` (`STORE_UNAVAILABLE`) until the store opens. Past
 * `config.dbStartTimeoutMs`, or on a failure no retry fixes, `options.onFatal`
 * is called.
 *
 * @throws StoreUnavailableError when the database cannot be opened and no
 *   retry would help, such as a schema newer than the code (`STORE_NEWER_THAN_CODE`).
 * @example
 * const app = await openApp(config, logger, { onFatal: (e) => stop(1, e) });
 */
export async function openApp(
  config: ServeConfig,
  logger: Logger,
  options: AppOptions = {},
): Promise<App> {
  if (options.store !== undefined || config.dbUrl === undefined) {
    return checked(createApp(config, logger, options));
  }
  const url = config.dbUrl;
  const metrics = options.metrics ?? new Metrics();
  const startedAt = Date.now();
  const open = async () => {
    const store = await openPostgresStore(url, {
      maxConnections: config.dbPoolSize,
      observe: (operation, result, seconds) => metrics.storeCall(operation, result, seconds),
      // The pool replaces the connection; calls and health report the outage itself.
      onIdleError: (e) => logger.warn('an idle PostgreSQL connection failed', { err: e }),
    });
    // Which pod migrated, and on which schema each one runs (a newer one during a rolling upgrade).
    logger.info('store opened', {
      store: 'postgres',
      schemaVersion: store.schemaVersion,
      migrationsApplied: store.migrationsApplied,
    });
    return store;
  };
  let opened: OpenedStore;
  try {
    opened = { store: await open(), shared: true };
  } catch (e: unknown) {
    if (!isRetryableOpenError(e)) throw e;
    // Exiting would only have the platform restart the sidecar with a
    // growing back-off (CrashLoopBackOff), and serve later than a retry.
    logger.warn('the PostgreSQL store cannot be opened yet; listening NOT_SERVING and retrying', {
      err: e,
      retryIntervalMs: config.storeCheckIntervalMs,
      startTimeoutMs: config.dbStartTimeoutMs,
    });
    const deferred = new DeferredStore({
      open,
      deadlineMs:
        config.dbStartTimeoutMs === undefined ? undefined : startedAt + config.dbStartTimeoutMs,
      logger,
      onGiveUp: (cause) => {
        const reason = cause instanceof AgentHooksError ? cause.reason : undefined;
        logger.error('giving up opening the PostgreSQL store', { reason, err: cause });
        options.onFatal?.(cause);
      },
    });
    opened = { store: deferred, shared: true, opening: true };
  }
  let app: App;
  try {
    app = createApp(config, logger, extend(options, { metrics, store: opened }));
  } catch (e: unknown) {
    await opened.store.close();
    throw e;
  }
  return checked(app);
}

/**
 * `app` once its store passed or failed a write probe: the first readiness
 * is the probe's answer, not an assumption, so a file opened read-only or a
 * full disk is NOT_SERVING from the start. (A store still opening is
 * NOT_SERVING already and is not probed here.)
 */
async function checked(app: App): Promise<App> {
  await app.checkStore();
  return app;
}

/**
 * Builds the application from a validated config, on `options.store` or
 * else on the SQLite file of `config.dbPath`, opened here.
 *
 * @throws StoreUnavailableError when the SQLite database cannot be opened.
 * @throws Error when the config names a PostgreSQL store and none is given: use {@link openApp}.
 * @example
 * const app = createApp(config, logger);
 * // ... serve it ...
 * await app.close(Date.now() + config.shutdownGraceMs);
 */
export function createApp(config: ServeConfig, logger: Logger, options: AppOptions = {}): App {
  const metrics = options.metrics ?? new Metrics();
  const destinations = new DestinationPolicy({
    allow: config.webhookAllow,
    deny: config.webhookDeny,
  });
  /** True while SIGHUP reloads both files: the plugins then reload once, for the signal. */
  let reloadingBoth = false;
  /**
   * Whether the last load of the environment and of the plugins file was
   * valid: while one is not, every call fails (`INVALID_ENVIRONMENT`,
   * `INVALID_PLUGINS`), so the sidecar cannot decide and is not ready.
   */
  let environmentValid = true;
  let pluginsValid = true;
  /** Sets readiness from the store's health and the configuration's validity, once listening. */
  let updateReadiness = (): void => undefined;
  const environment = new EffectiveEnvironment({
    processEnv: options.processEnv ?? process.env,
    envFile: config.envFile,
    logger,
    onReload: (snapshot) => {
      metrics.environmentReloaded(snapshot.generation, snapshot.hooks.ok);
      environmentValid = snapshot.hooks.ok;
      updateReadiness();
      // The plugins' signing secrets are checked against the environment:
      // a secret declared or removed there changes whether they are valid.
      // (The first load happens before the plugins exist; they load after it.)
      // Queued: the new snapshot becomes the environment's current one once
      // this callback returns.
      if (snapshot.generation > 1 && !reloadingBoth) {
        queueMicrotask(() => plugins.reload('environment'));
      }
    },
  });
  // Operator plugins follow the registration rules; their templates may name any variable.
  const plugins = new OperatorPlugins({
    pluginsFile: config.pluginsFile,
    logger,
    // Signing secrets are checked against the effective environment at each load.
    validation: { destinations, signingEnv: () => environment.current().env },
    maxHooks: config.maxHooksPerOperation,
    onReload: (snapshot) => {
      metrics.pluginsReloaded(snapshot.generation, snapshot.hooks.ok);
      pluginsValid = snapshot.hooks.ok;
      updateReadiness();
    },
  });
  let opened: OpenedStore;
  try {
    opened = options.store ?? {
      store: openSqlite(config, options, metrics, logger),
      shared: false,
    };
  } catch (e: unknown) {
    environment.close();
    plugins.close();
    throw e;
  }
  const { store, shared } = opened;
  const opening = opened.opening ?? false;
  // Templates and application URLs resolve from the effective environment at send time.
  // One pooled undici Agent for fetch and QStash delivery, also set as the global dispatcher.
  const sender = new WebhookSender({
    env: () => environment.current().env,
    qstashUrl: config.qstashUrl,
    globalDispatcher: options.globalDispatcher ?? true,
    logger,
    // Every connection is checked on the address it goes to (link-local and metadata refused).
    destinations,
    resolver: config.dnsServer === undefined ? undefined : createDnsResolver(config.dnsServer),
    connectionsPerOrigin: config.webhookMaxConnections,
  });
  const directory = createUserDirectory(config, { users: store, logger });
  const enricher = new EmailEnricher({ directory, logger });
  const registry = new HookRegistry(store, {
    callerEnvAllowlist: new Set(config.callerEnvAllowlist),
    destinations,
    // A named signing secret must be declared and bound to the hook's origin now.
    signingEnv: () => environment.current().env,
    maxHooksPerOperation: config.maxHooksPerOperation,
    // Another pod may register at any moment: a cached list could miss it.
    cache: !shared,
    cacheBytes: config.hookCacheBytes,
  });
  const handlers = new HandlerHub({ logger, timeoutMs: config.handlerTimeoutMs });
  metrics.handlerCallsFrom(() => handlers.pendingCalls);
  // Detached webhooks are bounded in count and payload bytes; the excess is dropped and counted.
  const background = new BackgroundScope(
    logger,
    { maxTasks: config.maxDetachedDeliveries, maxBytes: config.maxDetachedBytes },
    {
      dropped: (reason) => metrics.detachedDropped(reason),
      inFlight: (tasks, bytes) => metrics.detachedInFlight(tasks, bytes),
    },
  );
  const health = new HealthState([HookService.typeName]);
  let closing = false;
  let listening = false;
  // Health follows the store: NOT_SERVING while it cannot be written or its file is
  // lost. The interval runs the quick check (two stats, no transaction) while healthy,
  // the write probe while unhealthy and at once after a call failed with a store error.
  // A shared server can fail while this sidecar is idle, and no local check sees
  // it (the PostgreSQL quickCheck only checks the store is open): ask the server
  // each interval, one round trip off the event loop.
  const storeHealth = new StoreHealthMonitor({
    quickCheck: shared ? () => store.ping() : () => store.quickCheck(),
    ping: () => store.ping(),
    intervalMs: config.storeCheckIntervalMs,
    // A store still opening is NOT_SERVING until a check opens it.
    healthy: !opening,
    logger,
    onChange: (healthy) => {
      metrics.storeServing(healthy);
      setReadiness(healthy);
    },
  });
  /**
   * Readiness only: liveness stays SERVING, so a store outage or an invalid
   * file takes the pod out of service without its liveness probe restarting
   * it, and it is ready again once healed. Before the listeners are bound
   * nothing is served yet; markListening sets the first status.
   */
  function setReadiness(storeHealthy: boolean): void {
    if (closing || !listening) return;
    health.setReadiness(
      storeHealthy && environmentValid && pluginsValid
        ? ServingStatus.SERVING
        : ServingStatus.NOT_SERVING,
    );
  }
  updateReadiness = () => setReadiness(storeHealth.healthy);
  metrics.storeServing(!opening);
  const shortestRetentionMs = Math.min(config.retentionMs, config.tombstoneRetentionMs);
  const retention = startRetention({
    store,
    retentionMs: config.retentionMs,
    tombstoneRetentionMs: config.tombstoneRetentionMs,
    intervalMs: Math.min(
      RETENTION_SWEEP_INTERVAL_MS,
      Math.max(RETENTION_SWEEP_MIN_INTERVAL_MS, shortestRetentionMs / SWEEPS_PER_SHORT_RETENTION),
    ),
    batchSize: RETENTION_BATCH_SIZE,
    onExpired: (operations, _parkedCalls, tombstones) => {
      if (operations.length > 0) {
        registry.forget(operations);
        logger.info('operations expired', { operations: operations.length });
      }
      // Nothing is cached for a tombstone: reading one fails, and failures are not cached.
      if (tombstones > 0) logger.info('tombstones removed', { tombstones });
    },
    onError: (e) => {
      logger.warn('retention sweep failed', { err: e });
      void storeHealth.check();
    },
  });
  // Decisions are recorded off the decision path; each sink buffers a bounded number.
  const audit = new AuditLog({
    store: config.audit.store ? store : undefined,
    stdoutFd: config.audit.stdout ? 1 : undefined,
    httpUrl: config.audit.httpUrl,
    httpAuthorization: () => environment.current().env[AUDIT_HTTP_AUTHORIZATION_VAR],
    bufferEntries: config.audit.bufferEntries,
    bufferBytes: config.audit.bufferBytes,
    metrics,
    logger,
  });
  /** Aborts when the sidecar starts draining: the streams end (see `HookServiceOptions.draining`). */
  const drain = new AbortController();
  // One listener per open stream.
  setMaxListeners(0, drain.signal);
  const hookService = createHookService(
    {
      registry,
      sender,
      logger,
      environmentHooks: () => environment.hooksOrThrow(),
      operatorHooks: () => plugins.hooksOrThrow(),
      handlers,
      enricher,
      parks: store,
      decisions: store,
      now: Date.now,
      metrics,
      background,
      tracing: options.tracing,
    },
    {
      streamMaxInFlight: config.streamMaxInFlight,
      streamMaxInFlightBytes: config.streamMaxInFlightBytes,
      publisher: { leaseMs: config.publicationLeaseMs },
      audit,
      auditPayloads: config.audit.payloads,
      draining: drain.signal,
    },
  );

  // The console reads the audit log: its store listing when the store sink is
  // on, else the last decisions kept in memory from its feed.
  const decisions = createAuditDecisionSource(audit, config.audit.store ? store : undefined, {
    keepInMemory: config.adminListen !== undefined,
  });
  const consoleSource = createConsoleSource({
    version: packageVersion(),
    startedAt: Date.now(),
    config,
    envFile: config.envFile,
    pluginsFile: config.pluginsFile,
    environment: () => environment.current(),
    plugins: () => plugins.current(),
    health: () => ({
      liveness: ServingStatus[health.get(LIVENESS_SERVICE) ?? ServingStatus.UNKNOWN] ?? 'UNKNOWN',
      readiness: ServingStatus[health.get(READINESS_SERVICE) ?? ServingStatus.UNKNOWN] ?? 'UNKNOWN',
    }),
    store: () => ({
      kind: config.dbUrl === undefined ? 'sqlite' : 'postgres',
      serving: storeHealth.healthy,
      location: config.dbUrl ?? config.dbPath ?? '',
    }),
    gauges: () => metrics.streams(),
    storedHooks: (operationId) => registry.storedHooksOf(operationId),
    parkedCalls: (operationId, limit) => store.listParkedCalls(operationId, limit),
    decisions,
  });

  let stopped: Promise<void> | undefined;
  return {
    hookService,
    health,
    metrics,
    console: consoleSource,
    logger,
    tracing: options.tracing,
    background,
    checkStore: () => (opening ? Promise.resolve() : storeHealth.check()),
    markListening() {
      listening = true;
      health.setLiveness(ServingStatus.SERVING);
      updateReadiness();
    },
    serverFault(e) {
      if (e instanceof StoreUnavailableError) void storeHealth.check();
    },
    startDraining() {
      drain.abort();
    },
    reloadConfiguration() {
      reloadingBoth = true;
      try {
        environment.reload('signal');
      } finally {
        reloadingBoth = false;
      }
      plugins.reload('signal');
    },
    close(deadlineMs = Date.now()) {
      stopped ??= (async () => {
        closing = true;
        health.setAll(ServingStatus.NOT_SERVING);
        storeHealth.stop();
        await retention.stop();
        await background.close(deadlineMs);
        // What the sinks still buffer, before the store closes; at least a second for it.
        await audit.close(Math.max(1_000, deadlineMs - Date.now()));
        environment.close();
        plugins.close();
        await sender.close();
        await directory.close();
        // A store that does not answer (a frozen database server, a query
        // still waiting out its timeout) does not hold the exit past the
        // deadline: its connections end with the process.
        const storeClosed = await settlesWithin(
          store.close(),
          Math.max(MIN_STORE_CLOSE_MS, deadlineMs - Date.now()),
        );
        if (!storeClosed) logger.warn('the store did not close before the shutdown deadline');
        // Last: the spans of the drained calls and deliveries are flushed.
        if (options.tracing !== undefined) {
          await shutdownTracing(options.tracing, deadlineMs, logger);
        }
      })();
      return stopped;
    },
  };
}

/**
 * Ends the tracer, flushing its spans, within what is left of the shutdown
 * deadline (at least {@link MIN_TRACE_FLUSH_MS}); a collector that does not
 * answer in time loses those spans, logged, and never holds the exit.
 */
async function shutdownTracing(tracing: Tracing, deadlineMs: number, logger: Logger) {
  try {
    const flushed = await settlesWithin(
      tracing.shutdown(),
      Math.max(MIN_TRACE_FLUSH_MS, deadlineMs - Date.now()),
    );
    if (!flushed) logger.warn('trace export did not finish before the deadline');
  } catch (e: unknown) {
    logger.warn('trace export failed at shutdown', { err: e });
  }
}

/** Opens the config's SQLite store, holding its lock when `options.lockStore` asks. */
function openSqlite(
  config: ServeConfig,
  options: AppOptions,
  metrics: Metrics,
  logger: Logger,
): SqliteStore {
  const lock = options.lockStore === true;
  const store = openSqliteStore(sqlitePath(config), {
    busyTimeoutMs: config.dbBusyTimeoutMs,
    maxSizeBytes: config.dbMaxSizeBytes,
    // A sidecar on its way out (a container restarted in place) has its grace to let go.
    lockWaitMs: lock ? config.shutdownGraceMs : undefined,
    onCreated: options.onStoreCreated,
    observe: (operation, result, seconds) => metrics.storeCall(operation, result, seconds),
  });
  if (lock && !store.locked) {
    logger.warn(
      'the store lock file cannot be written: nothing keeps a second sidecar off this database',
      { lock: lockPathOf(store.path) },
    );
  }
  return store;
}

function sqlitePath(config: ServeConfig): string {
  if (config.dbPath === undefined) {
    throw new Error('the config names a PostgreSQL store, which opens asynchronously: use openApp');
  }
  return config.dbPath;
}
