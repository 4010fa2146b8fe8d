/**
 * @module The listeners over an edge: the grpc-js server (HookService,
 * health, reflection) on every `--grpc-listen` address, the health-only
 * listener for kubelet probes, and the HTTP/1.1 listener (Connect protocol,
 * gRPC-Web, `/metrics`, `/healthz`); and their drain at shutdown. Transport
 * security is applied here: TLS on TCP listeners, the mode and group of unix
 * sockets, message size limits. The servers are built unbound and listen in
 * {@link Server.listen}.
 */
import { existsSync, lstatSync, unlinkSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { ServerReflection as ServerReflectionV1 } from '../../gen/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import type { ListenAddress, ServeConfig } from '../config/config.js';
import { createTokenCheck, readAuthToken, type TokenCheck } from './auth.js';
import { createEdge, type Edge, type EdgeApp } from './edge.js';
import { type AnyServiceImpl, addService } from './grpc.js';
import { ServingStatus } from './health.js';
import { createHttpHandler } from './http.js';
import {
  bindUnixSocket,
  grpcServerCredentials,
  readTlsMaterial,
  resolveGroup,
  type TlsMaterial,
} from './transport-security.js';

/** The addresses a started server listens on (ports resolved when 0 was asked). */
export interface BoundAddresses {
  readonly grpc: string[];
  readonly health?: string;
  readonly http?: string;
}

/** The security material of the listeners, read before anything else starts. */
export interface TransportSecurity {
  readonly checkToken: TokenCheck;
  readonly tls?: TlsMaterial;
  readonly socket: UnixSocketOptions;
}

/** Mode and group of unix sockets. */
interface UnixSocketOptions {
  readonly mode: number;
  readonly gid?: number | undefined;
}

/**
 * Reads the token, TLS files and socket group named by the config, so that
 * a bad one fails the start before the store is opened.
 *
 * @throws AgentHooksError `INVALID_AUTH_TOKEN` or `INVALID_TRANSPORT_SECURITY`.
 */
export function readTransportSecurity(config: ServeConfig): TransportSecurity {
  return {
    checkToken: createTokenCheck(readAuthToken(config)),
    tls: config.tls === undefined ? undefined : readTlsMaterial(config.tls),
    socket: {
      mode: config.socketMode,
      gid: config.socketGroup === undefined ? undefined : resolveGroup(config.socketGroup),
    },
  };
}

/** Listeners serving an app. */
export interface Server {
  /** The guarded services the listeners serve. */
  readonly edge: Edge;
  /** Binds every listener and turns health SERVING; resolves with the bound addresses. */
  listen(): Promise<BoundAddresses>;
  /**
   * Drains: health turns NOT_SERVING, new HookService calls are refused,
   * calls in flight may finish until `deadlineMs` (epoch milliseconds), then
   * they are cut off. The health-only listener keeps answering NOT_SERVING
   * until the others have closed. Safe to call twice.
   */
  shutdown(deadlineMs: number): Promise<void>;
}

/** Builds the listeners of `app`; nothing listens until {@link Server.listen}. */
export function createServer(
  app: EdgeApp,
  config: ServeConfig,
  security: TransportSecurity,
): Server {
  const logger = app.logger;
  const hardStop = new AbortController();
  const edge = createEdge(app, {
    checkToken: security.checkToken,
    reflectionPublic: config.reflectionPublic,
  });
  const serverOptions: grpc.ServerOptions = {
    'grpc.max_receive_message_length': config.maxMessageBytes,
  };
  const common = { shutdownSignal: hardStop.signal, logger };
  const grpcServer = new grpc.Server(serverOptions);
  addService(grpcServer, HookService, edge.hook as AnyServiceImpl, common);
  addService(grpcServer, Health, edge.health as AnyServiceImpl, common);
  addService(grpcServer, ServerReflectionV1, edge.reflection as AnyServiceImpl, common);
  addService(grpcServer, ServerReflectionV1Alpha, edge.reflectionAlpha as AnyServiceImpl, common);
  let healthServer: grpc.Server | undefined;
  if (config.healthListen !== undefined) {
    healthServer = new grpc.Server(serverOptions);
    addService(healthServer, Health, edge.health as AnyServiceImpl, common);
  }
  let httpServer: http.Server | undefined;
  if (config.httpListen !== undefined) {
    const handler = createHttpHandler({
      routes: (router) => edge.routes(router),
      guardedMethod: (method) => edge.guardedMethod(method),
      readMaxBytes: config.maxMessageBytes,
      shutdownSignal: hardStop.signal,
      logger,
      fallback(req, res) {
        if (req.url === '/metrics') {
          app.metrics.registry.metrics().then(
            (text) => {
              res.writeHead(200, { 'content-type': app.metrics.registry.contentType });
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
          const serving = app.health.get('') === ServingStatus.SERVING;
          res.writeHead(serving ? 200 : 503, { 'content-type': 'text/plain' });
          res.end(serving ? 'ok\n' : 'not serving\n');
          return;
        }
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found\n');
      },
    });
    const tls = security.tls;
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
  }

  let stopping: Promise<void> | undefined;
  return {
    edge,
    async listen() {
      const grpcAddresses: string[] = [];
      for (const address of config.grpcListen) {
        grpcAddresses.push(await bindGrpc(grpcServer, address, security));
      }
      let healthAddress: string | undefined;
      if (healthServer !== undefined && config.healthListen !== undefined) {
        // Plaintext: kubelet's gRPC probes speak neither TLS nor a token.
        healthAddress = await bindGrpc(healthServer, config.healthListen, {
          socket: security.socket,
        });
      }
      let httpAddress: string | undefined;
      if (httpServer !== undefined && config.httpListen !== undefined) {
        httpAddress = await listenHttp(httpServer, config.httpListen);
      }
      app.markListening();
      return { grpc: grpcAddresses, health: healthAddress, http: httpAddress };
    },
    shutdown(deadlineMs) {
      stopping ??= (async () => {
        app.health.setAll(ServingStatus.NOT_SERVING);
        edge.startDraining();
        const timer = setTimeout(
          () => {
            logger.warn('shutdown grace period over; cutting off calls in flight');
            hardStop.abort();
            grpcServer.forceShutdown();
            httpServer?.closeAllConnections();
          },
          Math.max(0, deadlineMs - Date.now()),
        );
        await Promise.all([
          new Promise<void>((resolve) => grpcServer.tryShutdown(() => resolve())),
          httpServer === undefined
            ? Promise.resolve()
            : new Promise<void>((resolve) => {
                httpServer.close(() => resolve());
                httpServer.closeIdleConnections();
              }),
        ]);
        clearTimeout(timer);
        // Probes saw NOT_SERVING throughout the drain; the health listener goes last.
        if (healthServer !== undefined) healthServer.forceShutdown();
      })();
      return stopping;
    },
  };
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
