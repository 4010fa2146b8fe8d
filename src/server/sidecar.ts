/**
 * @module Wires a running sidecar: store, hook engine, the grpc-js listeners
 * (HookService, health, reflection), the health-only listener and the
 * HTTP/1.1 listener (Connect protocol, gRPC-Web, `/healthz`); and shuts it
 * down in order.
 */
import { existsSync, lstatSync, unlinkSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { file_google_protobuf_descriptor } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type ConnectRouter, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { file_agenthooks_v1_service, HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { file_grpc_health_v1_health, Health } from '../../gen/grpc/health/v1/health_pb.js';
import {
  file_grpc_reflection_v1_reflection,
  ServerReflection as ServerReflectionV1,
} from '../../gen/grpc/reflection/v1/reflection_pb.js';
import {
  file_grpc_reflection_v1alpha_reflection,
  ServerReflection as ServerReflectionV1Alpha,
} from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import type { ListenAddress, ServeConfig } from '../config/config.js';
import { EffectiveEnvironment } from '../config/environment.js';
import { EmailEnricher } from '../delivery/email.js';
import { WebhookSender } from '../delivery/webhook.js';
import { HandlerHub } from '../hooks/handlers.js';
import { HookRegistry } from '../hooks/registry.js';
import type { Logger } from '../log.js';
import { openSqliteStore } from '../store/sqlite.js';
import { createUserDirectory } from '../users/directory.js';
import { type AnyServiceImpl, addService } from './grpc.js';
import { createHealthService, HealthState, ServingStatus } from './health.js';
import { createHookService } from './hook-service.js';
import {
  createReflectionAlphaService,
  createReflectionService,
  ReflectionIndex,
} from './reflection.js';

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
  const environment = new EffectiveEnvironment({
    processEnv: process.env,
    envFile: config.envFile,
    logger,
  });
  const store = openSqliteStore(config.dbPath);
  // Templates and application URLs resolve from the effective environment at send time.
  // One pooled undici Agent, also set as the global dispatcher so the QStash SDK's fetch uses it.
  const sender = new WebhookSender({
    env: () => environment.current().env,
    qstashUrl: config.qstashUrl,
    globalDispatcher: true,
    logger,
  });
  const directory = createUserDirectory(config, { users: store, logger });
  const enricher = new EmailEnricher({ directory, logger });
  const registry = new HookRegistry(store);
  const health = new HealthState([HookService.typeName]);
  const hardStop = new AbortController();
  const watchStop = new AbortController();
  let draining = false;

  const admit = () => {
    if (draining) {
      throw new ConnectError('agenthooks is shutting down', Code.Unavailable, undefined, undefined);
    }
  };
  const handlers = new HandlerHub({ logger, timeoutMs: config.handlerTimeoutMs });
  const hookService = createHookService(
    {
      registry,
      sender,
      logger,
      environmentHooks: () => environment.hooksOrThrow(),
      handlers,
      enricher,
    },
    { streamMaxInFlight: config.streamMaxInFlight },
  ) as AnyServiceImpl;
  const healthService = createHealthService(health, watchStop.signal) as unknown as AnyServiceImpl;
  const reflection = new ReflectionIndex(
    [
      file_agenthooks_v1_service,
      file_grpc_health_v1_health,
      file_grpc_reflection_v1_reflection,
      file_grpc_reflection_v1alpha_reflection,
      file_google_protobuf_descriptor,
    ],
    [
      HookService.typeName,
      Health.typeName,
      ServerReflectionV1.typeName,
      ServerReflectionV1Alpha.typeName,
    ],
  );

  const grpcServer = new grpc.Server();
  const common = { shutdownSignal: hardStop.signal, logger };
  addService(grpcServer, HookService, hookService, { ...common, admit });
  addService(grpcServer, Health, healthService, common);
  addService(
    grpcServer,
    ServerReflectionV1,
    createReflectionService(reflection) as AnyServiceImpl,
    common,
  );
  addService(
    grpcServer,
    ServerReflectionV1Alpha,
    createReflectionAlphaService(reflection) as AnyServiceImpl,
    common,
  );
  const servers: grpc.Server[] = [grpcServer];
  const grpcAddresses: string[] = [];
  for (const address of config.grpcListen) {
    grpcAddresses.push(await bindGrpc(grpcServer, address));
  }
  let healthAddress: string | undefined;
  if (config.healthListen !== undefined) {
    const healthServer = new grpc.Server();
    addService(healthServer, Health, healthService, common);
    healthAddress = await bindGrpc(healthServer, config.healthListen);
    servers.push(healthServer);
  }

  let httpServer: http.Server | undefined;
  let httpAddress: string | undefined;
  if (config.httpListen !== undefined) {
    const refuseWhileDraining: Interceptor = (next) => async (req) => {
      if (req.service.typeName === HookService.typeName) admit();
      return next(req);
    };
    const handler = connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(HookService, hookService);
        router.service(Health, healthService);
      },
      interceptors: [refuseWhileDraining],
      shutdownSignal: hardStop.signal,
      fallback(req, res) {
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
    httpServer = http.createServer(handler);
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

async function bindGrpc(server: grpc.Server, address: ListenAddress): Promise<string> {
  let target: string;
  if (address.kind === 'unix') {
    removeStaleSocket(address.path);
    target = `unix:${address.path}`;
  } else {
    target = address.host.includes(':')
      ? `[${address.host}]:${address.port}`
      : `${address.host}:${address.port}`;
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    );
  });
  if (address.kind === 'unix') return target;
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
