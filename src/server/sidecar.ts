/**
 * @module Wires a running sidecar: store, hook engine, the grpc-js listeners
 * (HookService, health, reflection), the health-only listener and the
 * HTTP/1.1 listener (Connect protocol, gRPC-Web, `/healthz`); and shuts it
 * down in order. Security is wired here too: the bearer token (every service
 * but health; reflection unless public), TLS on TCP listeners, the mode and
 * group of unix sockets, message size limits, and the caller-hook policy
 * (variable allowlist, webhook destinations, hooks per operation).
 */
import { existsSync, lstatSync, unlinkSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError, type ConnectRouter, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { ServerReflection as ServerReflectionV1 } from '../../gen/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import type { ListenAddress, ServeConfig } from '../config/config.js';
import { EffectiveEnvironment } from '../config/environment.js';
import { createDnsResolver, DestinationPolicy } from '../delivery/destination.js';
import { EmailEnricher } from '../delivery/email.js';
import { WebhookSender } from '../delivery/webhook.js';
import { AgentHooksError, StoreUnavailableError } from '../errors.js';
import { HandlerHub } from '../hooks/handlers.js';
import { HookRegistry } from '../hooks/registry.js';
import type { Logger } from '../log.js';
import { Metrics } from '../metrics.js';
import { startRetention } from '../store/retention.js';
import { openSqliteStore } from '../store/sqlite.js';
import { createUserDirectory } from '../users/directory.js';
import { createTokenCheck, readAuthToken } from './auth.js';
import { toConnectError } from './errors.js';
import { type AnyServiceImpl, addService } from './grpc.js';
import { createHealthService, HealthState, ServingStatus } from './health.js';
import { createHookService } from './hook-service.js';
import {
  createReflectionAlphaService,
  createReflectionIndex,
  createReflectionService,
} from './reflection.js';
import { StoreHealthMonitor } from './store-health.js';
import {
  bindUnixSocket,
  grpcServerCredentials,
  readTlsMaterial,
  resolveGroup,
  type TlsMaterial,
} from './transport-security.js';

/** Reason of a call refused because the sidecar is shutting down. */
export const SHUTTING_DOWN_REASON = 'SHUTTING_DOWN';

/** The addresses a started sidecar listens on (ports resolved when 0 was asked). */
export interface BoundAddresses {
  readonly grpc: string[];
  readonly health?: string;
  readonly http?: string;
}

/** A started sidecar. */
export interface Sidecar {
  readonly addresses: BoundAddresses;
  /** Drains and stops; resolves when everything is closed. Safe to call twice. */
  shutdown(): Promise<void>;
  /** Re-reads the effective environment (SIGHUP); returns the new generation. */
  reloadEnvironment(): number;
}

/**
 * Opens the store, starts every listener and turns health SERVING.
 *
 * @throws StoreUnavailableError when the database cannot be opened.
 */
export async function startSidecar(config: ServeConfig, logger: Logger): Promise<Sidecar> {
  // Security material first, so a bad token, certificate or group fails before anything opens.
  const checkToken = createTokenCheck(readAuthToken(config));
  const tls = config.tls === undefined ? undefined : readTlsMaterial(config.tls);
  const socket: UnixSocketOptions = {
    mode: config.socketMode,
    gid: config.socketGroup === undefined ? undefined : resolveGroup(config.socketGroup),
  };
  const destinations = new DestinationPolicy({
    allow: config.webhookAllow,
    deny: config.webhookDeny,
  });
  const metrics = new Metrics();
  const environment = new EffectiveEnvironment({
    processEnv: process.env,
    envFile: config.envFile,
    logger,
    onReload: (snapshot) => metrics.environmentReloaded(snapshot.generation, snapshot.hooks.ok),
  });
  const store = timedStore(
    openSqliteStore(config.dbPath, {
      busyTimeoutMs: config.dbBusyTimeoutMs,
      maxSizeBytes: config.dbMaxSizeBytes,
    }),
    metrics,
  );
  // Templates and application URLs resolve from the effective environment at send time.
  // One pooled undici Agent, also set as the global dispatcher so the QStash SDK's fetch uses it.
  const sender = new WebhookSender({
    env: () => environment.current().env,
    qstashUrl: config.qstashUrl,
    globalDispatcher: true,
    logger,
    // Every connection is checked on the address it goes to (link-local and metadata refused).
    destinations,
    resolver: config.dnsServer === undefined ? undefined : createDnsResolver(config.dnsServer),
  });
  const directory = createUserDirectory(config, { users: store, logger });
  const enricher = new EmailEnricher({ directory, logger });
  const registry = new HookRegistry(store, {
    callerEnvAllowlist: new Set(config.callerEnvAllowlist),
    destinations,
    maxHooksPerOperation: config.maxHooksPerOperation,
  });
  const health = new HealthState([HookService.typeName]);
  const hardStop = new AbortController();
  const watchStop = new AbortController();
  let draining = false;

  const admit = (_method: unknown, requestHeader: Headers) => {
    // The token first: an unauthenticated caller learns nothing, not even that we are draining.
    checkToken(requestHeader);
    if (draining) {
      throw new ConnectError('agenthooks is shutting down', Code.Unavailable, undefined, undefined);
    }
  };
  const handlers = new HandlerHub({ logger, timeoutMs: config.handlerTimeoutMs });
  // Health follows the store: NOT_SERVING while it cannot be written (checked on an
  // interval, and at once after a call failed with a store error).
  const storeHealth = new StoreHealthMonitor({
    ping: () => store.ping(),
    intervalMs: config.storeCheckIntervalMs,
    logger,
    onChange: (healthy) => {
      if (!draining) health.setAll(healthy ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    },
  });
  const retention = startRetention({
    store,
    retentionMs: config.retentionMs,
    intervalMs: Math.min(RETENTION_SWEEP_INTERVAL_MS, Math.max(100, config.retentionMs / 4)),
    batchSize: RETENTION_BATCH_SIZE,
    onExpired: (operations) => {
      registry.forget(operations);
      logger.info('operations expired', { operations: operations.length });
    },
    onError: (e) => {
      logger.warn('retention sweep failed', { err: e });
      void storeHealth.check();
    },
  });
  const hookService = instrument(
    createHookService(
      {
        registry,
        sender,
        logger,
        environmentHooks: () => environment.hooksOrThrow(),
        handlers,
        enricher,
        parks: store,
        now: Date.now,
        metrics,
      },
      { streamMaxInFlight: config.streamMaxInFlight },
    ) as AnyServiceImpl,
    metrics,
    () => void storeHealth.check(),
  );
  const healthService = createHealthService(health, watchStop.signal) as unknown as AnyServiceImpl;
  const reflection = createReflectionIndex([
    HookService,
    Health,
    ServerReflectionV1,
    ServerReflectionV1Alpha,
  ]);

  const serverOptions: grpc.ServerOptions = {
    'grpc.max_receive_message_length': config.maxMessageBytes,
  };
  const grpcServer = new grpc.Server(serverOptions);
  const common = { shutdownSignal: hardStop.signal, logger };
  // Health stays open for kubelet probes; reflection needs the token unless --reflection-public.
  const reflectionOptions = {
    ...common,
    admit: config.reflectionPublic
      ? undefined
      : (_method: unknown, requestHeader: Headers) => checkToken(requestHeader),
  };
  addService(grpcServer, HookService, hookService, { ...common, admit });
  addService(grpcServer, Health, healthService, common);
  addService(
    grpcServer,
    ServerReflectionV1,
    createReflectionService(reflection) as AnyServiceImpl,
    reflectionOptions,
  );
  addService(
    grpcServer,
    ServerReflectionV1Alpha,
    createReflectionAlphaService(reflection) as AnyServiceImpl,
    reflectionOptions,
  );
  const servers: grpc.Server[] = [grpcServer];
  const grpcAddresses: string[] = [];
  for (const address of config.grpcListen) {
    grpcAddresses.push(await bindGrpc(grpcServer, address, { tls, socket }));
  }
  let healthAddress: string | undefined;
  if (config.healthListen !== undefined) {
    const healthServer = new grpc.Server(serverOptions);
    addService(healthServer, Health, healthService, common);
    // Plaintext: kubelet's gRPC probes speak neither TLS nor a token.
    healthAddress = await bindGrpc(healthServer, config.healthListen, { socket });
    servers.push(healthServer);
  }

  let httpServer: http.Server | undefined;
  let httpAddress: string | undefined;
  if (config.httpListen !== undefined) {
    const refuseWhileDraining: Interceptor = (next) => async (req) => {
      if (req.service.typeName === HookService.typeName) admit(undefined, req.header);
      return next(req);
    };
    const handler = connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(HookService, hookService);
        router.service(Health, healthService);
      },
      interceptors: [refuseWhileDraining],
      readMaxBytes: config.maxMessageBytes,
      shutdownSignal: hardStop.signal,
      fallback(req, res) {
        if (req.url === '/metrics') {
          metrics.registry.metrics().then(
            (text) => {
              res.writeHead(200, { 'content-type': metrics.registry.contentType });
              res.end(text);
            },
            (e: unknown) => {
              logger.error('rendering metrics failed', { err: e });
              res.writeHead(500);
              res.end();
            },
          );
          return;
        }
        if (req.url === '/healthz') {
          const serving = health.get('') === ServingStatus.SERVING;
          res.writeHead(serving ? 200 : 503, { 'content-type': 'text/plain' });
          res.end(serving ? 'ok\n' : 'not serving\n');
          return;
        }
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found\n');
      },
    });
    httpServer =
      tls === undefined
        ? http.createServer(handler)
        : https.createServer(
            {
              cert: tls.cert,
              key: tls.key,
              ca: tls.clientCa,
              requestCert: tls.clientCa !== undefined,
              rejectUnauthorized: tls.clientCa !== undefined,
            },
            handler,
          );
    httpAddress = await listenHttp(httpServer, config.httpListen);
  }

  health.setAll(ServingStatus.SERVING);
  const addresses: BoundAddresses = {
    grpc: grpcAddresses,
    health: healthAddress,
    http: httpAddress,
  };
  logger.info('listening', { ...addresses });

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    stopping ??= (async () => {
      draining = true;
      health.setAll(ServingStatus.NOT_SERVING);
      logger.info('draining', { graceMs: config.shutdownGraceMs });
      // Watch streams end after they have sent NOT_SERVING, so they do not hold the drain open.
      watchStop.abort();
      const timer = setTimeout(() => {
        logger.warn('shutdown grace period over; cutting off calls in flight');
        hardStop.abort();
        for (const s of servers) s.forceShutdown();
        httpServer?.closeAllConnections();
      }, config.shutdownGraceMs);
      await Promise.all([
        ...servers.map((s) => new Promise<void>((resolve) => s.tryShutdown(() => resolve()))),
        httpServer === undefined
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              httpServer.close(() => resolve());
              httpServer.closeIdleConnections();
            }),
      ]);
      clearTimeout(timer);
      retention.stop();
      storeHealth.stop();
      environment.close();
      await sender.close();
      await directory.close();
      await store.close();
      logger.info('stopped');
    })();
    return stopping;
  };
  return { addresses, shutdown, reloadEnvironment: () => environment.reload('signal').generation };
}

/** Interval of the retention sweep, in milliseconds (shorter when the retention itself is short). */
export const RETENTION_SWEEP_INTERVAL_MS = 60_000;
/** Rows removed per retention transaction, so a sweep never stalls calls. */
export const RETENTION_BATCH_SIZE = 200;

/**
 * Wraps a service's methods to record each RPC's status code and latency,
 * and to trigger a store health check at once when a call failed with a
 * store error (health then turns NOT_SERVING without waiting for the
 * interval). Errors still reach the caller unchanged.
 */
function instrument(
  impl: AnyServiceImpl,
  metrics: Metrics,
  onStoreError: () => void,
): AnyServiceImpl {
  const wrapped: AnyServiceImpl = {};
  const done = (name: string, started: number, e?: unknown) => {
    const code = e === undefined ? 'OK' : codeName(toConnectError(e).code);
    // The RPC's proto name (DecideToolCall), not the implementation's local name.
    metrics.rpc(
      name.charAt(0).toUpperCase() + name.slice(1),
      code,
      (performance.now() - started) / 1000,
    );
    if (e instanceof StoreUnavailableError) onStoreError();
  };
  for (const [name, method] of Object.entries(impl)) {
    if (method.constructor.name === 'AsyncGeneratorFunction') {
      wrapped[name] = async function* (...args: unknown[]) {
        const started = performance.now();
        try {
          yield* method(...args);
          done(name, started);
        } catch (e: unknown) {
          done(name, started, e);
          throw e;
        }
      };
      continue;
    }
    wrapped[name] = async (...args: unknown[]) => {
      const started = performance.now();
      try {
        const result = await method(...args);
        done(name, started);
        return result;
      } catch (e: unknown) {
        done(name, started, e);
        throw e;
      }
    };
  }
  return wrapped;
}

/** Returns the gRPC name of a status code, such as `UNAVAILABLE`. */
function codeName(code: Code): string {
  return (Code[code] ?? 'UNKNOWN').replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

/** Wraps a store so that every call's latency and result are recorded. */
function timedStore<S extends object>(store: S, metrics: Metrics): S {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return (...args: unknown[]) => {
        const started = performance.now();
        const settle = (result: string) =>
          metrics.storeCall(property, result, (performance.now() - started) / 1000);
        const out = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (out instanceof Promise) {
          return out.then(
            (v: unknown) => {
              settle('ok');
              return v;
            },
            (e: unknown) => {
              settle(e instanceof AgentHooksError ? e.reason : 'error');
              throw e;
            },
          );
        }
        return out;
      };
    },
  });
}

/** Mode and group of unix sockets. */
interface UnixSocketOptions {
  readonly mode: number;
  readonly gid?: number | undefined;
}

/** How a gRPC listener is secured: TLS for TCP addresses, mode and group for unix sockets. */
interface BindSecurity {
  readonly tls?: TlsMaterial | undefined;
  readonly socket: UnixSocketOptions;
}

async function bindGrpc(
  server: grpc.Server,
  address: ListenAddress,
  security: BindSecurity,
): Promise<string> {
  let target: string;
  if (address.kind === 'unix') {
    removeStaleSocket(address.path);
    target = `unix:${address.path}`;
  } else {
    target = address.host.includes(':')
      ? `[${address.host}]:${address.port}`
      : `${address.host}:${address.port}`;
  }
  const credentials =
    address.kind === 'unix'
      ? grpc.ServerCredentials.createInsecure()
      : grpcServerCredentials(security.tls);
  const bind = () =>
    new Promise<number>((resolve, reject) => {
      server.bindAsync(target, credentials, (err, p) => (err ? reject(err) : resolve(p)));
    });
  if (address.kind === 'unix') {
    await bindUnixSocket(address.path, security.socket.mode, security.socket.gid, bind);
    return target;
  }
  const port = await bind();
  return target.replace(/:\d+$/, `:${port}`);
}

/** A socket left by a killed sidecar would make the bind fail; a regular file is never removed. */
function removeStaleSocket(path: string): void {
  if (existsSync(path) && lstatSync(path).isSocket()) unlinkSync(path);
}

async function listenHttp(server: http.Server, address: ListenAddress): Promise<string> {
  if (address.kind !== 'tcp') throw new Error('the HTTP listener needs host:port');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return `${host}:${bound.port}`;
}
