/**
 * @module The listeners over an edge: the grpc-js server (HookService,
 * health, reflection) on every `--grpc-listen` address, the health-only
 * listener for kubelet probes, the HTTP/1.1 listener (Connect protocol,
 * gRPC-Web, `/metrics`, and the probes `/healthz`, `/livez` and `/readyz`)
 * and the metrics-only HTTP listener; and their drain at shutdown. Transport security is applied here: TLS on TCP
 * listeners, the mode and group of unix sockets, message size limits, and
 * the connection cap and timeouts of every listener. The servers are built
 * unbound and listen in {@link Server.listen}.
 */
import { EventEmitter, setMaxListeners } from 'node:events';
import { existsSync, lstatSync, unlinkSync } from 'node:fs';
import * as http from 'node:http';
import type * as http2 from 'node:http2';
import * as https from 'node:https';
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { ServerReflection as ServerReflectionV1 } from '../../gen/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import {
  type ConnectionLimits,
  exposedListeners,
  type ListenAddress,
  type ServeConfig,
} from '../config/config.js';
import { createConsoleHandler } from '../console/handler.js';
import type { ConsoleSource } from '../console/views.js';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import { createTokenCheck, readAuthToken, type TokenCheck } from './auth.js';
import { createEdge, type Edge, type EdgeApp } from './edge.js';
import { type AnyServiceImpl, addService } from './grpc.js';
import { LIVENESS_SERVICE, READINESS_SERVICE, ServingStatus } from './health.js';
import { createHttpHandler } from './http.js';
import { requestGate } from './request-gate.js';
import { clampTimeoutHeaders } from './timeout-header.js';
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
  readonly metrics?: string;
  /** The admin console's listener, if any. */
  readonly admin?: string;
}

/**
 * The HTTP probe paths and the health service each reports: 200 while it is
 * SERVING, 503 otherwise. `/healthz` is the server's status (''), which
 * follows readiness.
 */
const HTTP_PROBES: ReadonlyMap<string, string> = new Map([
  ['/healthz', ''],
  ['/livez', LIVENESS_SERVICE],
  ['/readyz', READINESS_SERVICE],
]);

/** The HTTP/2 client connection preface (RFC 9113 §3.4), the first bytes of every gRPC connection. */
const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Longest wait for the answer to a keepalive ping (gRPC's own default). */
const KEEPALIVE_TIMEOUT_MAX_MS = 20_000;

/** A gRPC connection is asked to go away after this long (spreads clients over restarts). */
const MAX_CONNECTION_AGE_MS = 60 * 60_000;

/** Calls still running on a connection past its age may finish within this time. */
const MAX_CONNECTION_AGE_GRACE_MS = 10 * 60_000;

/**
 * Stream resets (RST_STREAM) a gRPC client may send on one connection at once,
 * and how many a second it regains: a token bucket, like nghttp2's own (1000,
 * then 33 a second). Past nghttp2's, it sends GOAWAY and Node stops reading
 * the connection for good, so it would not see the client close it: the
 * session and its file descriptor would stay until a keepalive ping failed.
 * Ours is tighter at every moment (900, then 30 a second), so the
 * connection is closed first; it is as loose as that allows, because a client
 * resets a stream for each call it cancels or whose deadline passes (a burst
 * well above the default `--max-streams-per-connection`, 250, and 30 a second
 * after it).
 */
const STREAM_RESET_BURST = 900;

/** Stream resets a second a gRPC connection regains, up to {@link STREAM_RESET_BURST}. */
const STREAM_RESETS_PER_SECOND = 30;

/**
 * How often a gRPC connection is checked: one that read bytes since the last
 * check is sent a ping. nghttp2 may end a session on its own (a GOAWAY for
 * resets of streams already closed, which {@link STREAM_RESET_BURST} does
 * not see); Node then reads no more, and only an unanswered ping tells.
 */
const LIVENESS_CHECK_MS = 2_000;

/** A connection whose ping is not answered within this is closed. */
const LIVENESS_TIMEOUT_MS = 10_000;

/** Idle time between two requests on an HTTP keep-alive connection (Node's default). */
const HTTP_KEEP_ALIVE_TIMEOUT_MS = 5_000;

/** Longest interval at which Node checks HTTP header and request timeouts (Node's default). */
const HTTP_TIMEOUT_CHECK_MAX_MS = 30_000;

/**
 * The health-only listener closes a connection that has not sent the HTTP/2
 * preface, or has no call in flight, after this long (or after
 * `--handshake-timeout` and `--idle-timeout` when shorter). A kubelet probe
 * dials, checks and hangs up within it, and a flood of silent connections
 * holds the listener's `--max-connections` for seconds, not for minutes.
 */
const HEALTH_IDLE_TIMEOUT_MS = 5_000;

/**
 * Largest request the health-only listener reads: a `HealthCheckRequest`
 * holds one service name, and the names served are a few dozen bytes.
 */
export const HEALTH_MAX_MESSAGE_BYTES = 4096;

/** The security material of the listeners, read before anything else starts. */
export interface TransportSecurity {
  readonly checkToken: TokenCheck | undefined;
  /** Whether callers must authenticate: a bearer token, or a client certificate (`--tls-client-ca`). */
  readonly authenticated: boolean;
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
  const token = readAuthToken(config);
  return {
    checkToken: createTokenCheck(token),
    // A client certificate signed by --tls-client-ca authenticates as a token does.
    authenticated: token !== undefined || config.tls?.clientCaFile !== undefined,
    tls: config.tls === undefined ? undefined : readTlsMaterial(config.tls),
    socket: {
      mode: config.socketMode,
      gid: config.socketGroup === undefined ? undefined : resolveGroup(config.socketGroup),
    },
  };
}

/** What the listeners serve: the edge's app and the admin console's views. */
export interface ServerApp extends EdgeApp {
  /** Read by the admin console (`--admin-listen`). */
  readonly console: ConsoleSource;
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
   * they are cut off. Until they have ended, the API listeners still answer
   * health and the probes (NOT_SERVING); they close then, and the
   * health-only listener keeps answering until they have. Safe to call twice.
   */
  shutdown(deadlineMs: number): Promise<void>;
}

/** Builds the listeners of `app`; nothing listens until {@link Server.listen}. */
export function createServer(
  app: ServerApp,
  config: ServeConfig,
  security: TransportSecurity,
): Server {
  const logger = app.logger;
  const hardStop = new AbortController();
  // connect-node links every HTTP request in flight to this signal (one
  // listener each, removed when the request ends), so their number is
  // bounded by the connections, not by a listener limit.
  setMaxListeners(0, hardStop.signal);
  const edge = createEdge(app, {
    checkToken: security.checkToken,
    reflectionPublic: config.reflectionPublic,
  });
  const limits = config.connections;
  const serverOptions: grpc.ServerOptions = {
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_concurrent_streams': limits.maxStreamsPerConnection,
    'grpc.keepalive_time_ms': limits.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': Math.min(limits.keepaliveTimeMs, KEEPALIVE_TIMEOUT_MAX_MS),
    'grpc.max_connection_idle_ms': limits.idleTimeoutMs,
    'grpc.max_connection_age_ms': MAX_CONNECTION_AGE_MS,
    'grpc.max_connection_age_grace_ms': MAX_CONNECTION_AGE_GRACE_MS,
    interceptors: [
      // Counted as the guard counts a call: under the code the client got.
      requestGate({
        timeoutMs: limits.requestTimeoutMs,
        onTimeout: (method) =>
          app.metrics.rpc(method, 'DEADLINE_EXCEEDED', limits.requestTimeoutMs / 1000),
        authorized:
          security.checkToken === undefined
            ? undefined
            : (service, header) => edge.authorizedService(service, header),
        onUnauthenticated: (method) => app.metrics.rpc(method, 'UNAUTHENTICATED', 0),
      }),
    ],
  };
  const common = {
    shutdownSignal: hardStop.signal,
    logger,
    maxMessageNodes: config.maxMessageNodes,
  };
  const grpcServer = new grpc.Server(serverOptions);
  // Counted as its guard counts the calls it answers (health and reflection are not).
  addService(
    grpcServer,
    HookService,
    edge.hook as AnyServiceImpl,
    extend(common, {
      onRefused: (method: string, code: string) => app.metrics.rpc(method, code, 0),
      // A call to a runtime that stopped reading stays with the sidecar, which takes it back
      // when its decision gives up on it, instead of 16 of them in grpc-js's buffer.
      writeOneAtATime: new Set([HookService.method.handle.name]),
      // Its streams by the status their client got (the guard counts its unary calls).
      onStreamEnd: (method: string, code: string, seconds: number) =>
        app.metrics.rpc(method, code, seconds),
    }),
  );
  addService(grpcServer, Health, edge.health as AnyServiceImpl, common);
  addService(grpcServer, ServerReflectionV1, edge.reflection as AnyServiceImpl, common);
  addService(grpcServer, ServerReflectionV1Alpha, edge.reflectionAlpha as AnyServiceImpl, common);
  let healthServer: grpc.Server | undefined;
  if (config.healthListen !== undefined) {
    // Plaintext and tokenless (kubelet probes), so a request is held to what a
    // HealthCheckRequest needs: a client cannot have grpc-js buffer up to
    // --max-message-bytes on each of its streams here.
    healthServer = new grpc.Server(
      extend(serverOptions, {
        'grpc.max_receive_message_length': HEALTH_MAX_MESSAGE_BYTES,
        'grpc.max_connection_idle_ms': Math.min(limits.idleTimeoutMs, HEALTH_IDLE_TIMEOUT_MS),
      }),
    );
    addService(
      healthServer,
      Health,
      edge.health as AnyServiceImpl,
      extend(common, { messageBound: "the health listener's bound" }),
    );
  }
  // Connections with a `/metrics` answer being rendered.
  const rendering = new WeakSet<net.Socket>();
  // `/metrics` and the probes, on the HTTP listener and the metrics-only one.
  const serveOps = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    if (req.url === '/metrics') {
      // Rendered asynchronously, the answer leaves Node nothing unsent to stop
      // reading pipelined requests by: each would be rendered and queued. So
      // the connection reads no more and closes after it (RFC 9112 §9.6), and
      // requests already read behind it are not answered.
      if (rendering.has(req.socket)) return;
      rendering.add(req.socket);
      req.socket.pause();
      res.setHeader('connection', 'close');
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
    const probe = req.url === undefined ? undefined : HTTP_PROBES.get(req.url);
    if (probe !== undefined) {
      const serving = app.health.get(probe) === ServingStatus.SERVING;
      res.writeHead(serving ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(serving ? 'ok\n' : 'not serving\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  };
  let httpServer: http.Server | undefined;
  if (config.httpListen !== undefined) {
    const handler = createHttpHandler({
      routes: (router) => edge.routes(router),
      guardedMethod: (method) => edge.guardedMethod(method),
      authorized: (method, header) => edge.authorized(method, header),
      readMaxBytes: config.maxMessageBytes,
      maxMessageNodes: config.maxMessageNodes,
      shutdownSignal: hardStop.signal,
      logger,
      fallback: serveOps,
    });
    httpServer = createHttpServer(handler, limits, security.tls);
  }
  // Plaintext, like the health listener: scrapers and probes bring neither TLS nor a token.
  const metricsServer =
    config.metricsListen === undefined ? undefined : createHttpServer(serveOps, limits);
  // The admin console: its own listener, never an API one, behind the same token.
  const adminConsole =
    config.adminListen === undefined
      ? undefined
      : createConsoleHandler({
          source: app.console,
          checkToken: security.checkToken,
          logger,
        });
  const adminServer =
    adminConsole === undefined
      ? undefined
      : createHttpServer(adminConsole.handle, limits, security.tls);
  const grpcListeners: GrpcListener[] = [];
  let healthListener: GrpcListener | undefined;

  let stopping: Promise<void> | undefined;
  return {
    edge,
    async listen() {
      // Only with --allow-unauthenticated: the config refuses it otherwise.
      const exposed = exposedListeners(config).map((e) => e.text);
      if (!security.authenticated && exposed.length > 0) {
        logger.warn('the API is served without a token on addresses other than loopback', {
          listeners: exposed,
        });
      }
      for (const address of config.grpcListen) {
        grpcListeners.push(
          await listenGrpc(grpcServer, address, limits, extend(security, { logger })),
        );
      }
      if (healthServer !== undefined && config.healthListen !== undefined) {
        // Plaintext: kubelet's gRPC probes speak neither TLS nor a token.
        const probeLimits = extend(limits, {
          handshakeTimeoutMs: Math.min(limits.handshakeTimeoutMs, HEALTH_IDLE_TIMEOUT_MS),
        });
        healthListener = await listenGrpc(healthServer, config.healthListen, probeLimits, {
          socket: security.socket,
          logger,
        });
      }
      let httpAddress: string | undefined;
      if (httpServer !== undefined && config.httpListen !== undefined) {
        httpAddress = await listenHttp(httpServer, config.httpListen);
      }
      let metricsAddress: string | undefined;
      if (metricsServer !== undefined && config.metricsListen !== undefined) {
        metricsAddress = await listenHttp(metricsServer, config.metricsListen);
      }
      let adminAddress: string | undefined;
      if (adminServer !== undefined && config.adminListen !== undefined) {
        adminAddress = await listenHttp(adminServer, config.adminListen);
      }
      app.markListening();
      return {
        admin: adminAddress,
        grpc: grpcListeners.map((l) => l.address),
        health: healthListener?.address,
        http: httpAddress,
        metrics: metricsAddress,
      };
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
        // The API listeners stay open while the calls in flight run, so their
        // health and probes answer NOT_SERVING (a new HookService call is
        // refused SHUTTING_DOWN); once none runs, they close.
        await edge.callsEnded(hardStop.signal);
        for (const listener of grpcListeners) listener.close();
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
        // Probes saw NOT_SERVING throughout the drain; the health listeners go last.
        healthListener?.close();
        if (healthServer !== undefined) healthServer.forceShutdown();
        if (adminServer !== undefined) {
          adminConsole?.close();
          await new Promise<void>((resolve) => {
            adminServer.close(() => resolve());
            adminServer.closeAllConnections();
          });
        }
        if (metricsServer !== undefined) {
          await new Promise<void>((resolve) => {
            metricsServer.close(() => resolve());
            metricsServer.closeAllConnections();
          });
        }
      })();
      return stopping;
    },
  };
}

/** How a gRPC listener is secured: TLS for TCP addresses, mode and group for unix sockets. */
interface BindSecurity {
  readonly tls?: TlsMaterial | undefined;
  readonly socket: UnixSocketOptions;
  readonly logger: Logger;
}

/** A bound gRPC listener: our own `net.Server` handing connections to grpc-js. */
interface GrpcListener {
  /** The address as reported: `host:port` with the bound port, or `unix:/path`. */
  readonly address: string;
  /** Stops accepting and drops connections that have not sent the preface yet. */
  close(): void;
}

/**
 * Listens on `address` with a `net.Server` of our own and hands each
 * connection to `server` through a connection injector: grpc-js has no
 * connection cap and no preface timeout, and its bind would hide the socket.
 * Past `limits.maxConnections` open connections, new ones are closed at once
 * (`net.Server#maxConnections`); a plaintext connection that has not sent
 * the HTTP/2 preface within `limits.handshakeTimeoutMs` is closed. A TLS
 * connection is handed over at once: the TLS handshake has Node's own
 * timeout, and grpc-js's idle timeout and keepalive take over from there.
 */
async function listenGrpc(
  server: grpc.Server,
  address: ListenAddress,
  limits: ConnectionLimits,
  security: BindSecurity,
): Promise<GrpcListener> {
  const tls = address.kind === 'tcp' ? security.tls : undefined;
  const injector = server.createConnectionInjector(grpcServerCredentials(tls));
  guardGrpcSessions(server, security.logger);
  const waiting = new Set<net.Socket>();
  const netServer = net.createServer(function acceptGrpcConnection(socket) {
    // Errors of a connection are its client's business; grpc-js adds its own handlers.
    socket.on('error', () => {});
    if (tls !== undefined) {
      injector.injectConnection(socket);
      return;
    }
    waiting.add(socket);
    awaitPreface(socket, limits.handshakeTimeoutMs).then((received) => {
      waiting.delete(socket);
      if (received === undefined) {
        socket.destroy();
        return;
      }
      // grpc-js's HTTP/2 session reads what is buffered before reading the socket.
      socket.unshift(received);
      injector.injectConnection(socket);
    });
  });
  netServer.maxConnections = limits.maxConnections;
  netServer.on('drop', () => security.logger.debug('connection refused: listener full'));
  const listen = (options: net.ListenOptions) =>
    new Promise<void>((resolve, reject) => {
      netServer.once('error', reject);
      netServer.listen(options, () => {
        netServer.off('error', reject);
        resolve();
      });
    });
  let text: string;
  if (address.kind === 'unix') {
    removeStaleSocket(address.path);
    await bindUnixSocket(address.path, security.socket.mode, security.socket.gid, () =>
      listen({ path: address.path }),
    );
    text = `unix:${address.path}`;
  } else {
    await listen({ port: address.port, host: address.host });
    const port = (netServer.address() as net.AddressInfo).port;
    text = address.host.includes(':') ? `[${address.host}]:${port}` : `${address.host}:${port}`;
  }
  return {
    address: text,
    close() {
      netServer.close();
      for (const socket of waiting) socket.destroy();
      waiting.clear();
    },
  };
}

/** The HTTP/2 servers a grpc-js server made for its listeners and injectors (a private field). */
const guardedServers = new WeakSet<object>();

/**
 * Hooks the HTTP/2 servers grpc-js made, which it keeps in a private map:
 * each request's `grpc-timeout` is cut before grpc-js reads it (see
 * `timeout-header.ts`), by a listener put first on their `stream` event; and
 * a connection whose client resets streams faster than
 * {@link STREAM_RESET_BURST} allows is closed (see there). Should a grpc-js
 * version not have that map, neither applies, and that is logged.
 */
function guardGrpcSessions(server: grpc.Server, logger: Logger): void {
  const servers = (server as unknown as { http2Servers?: Map<unknown, unknown> }).http2Servers;
  if (!(servers instanceof Map)) {
    logger.warn(
      'cannot reach grpc-js HTTP/2 servers; deadlines over 24.8 days end at once and floods of stream resets are not cut off',
    );
    return;
  }
  for (const candidate of servers.keys()) {
    if (!(candidate instanceof EventEmitter) || guardedServers.has(candidate)) continue;
    guardedServers.add(candidate);
    candidate.prependListener('stream', (_stream: unknown, headers: http2.IncomingHttpHeaders) => {
      clampTimeoutHeaders(headers, 'grpc-js');
    });
    candidate.on('session', (session: http2.ServerHttp2Session) => {
      limitStreamResets(session, logger);
      checkLiveness(session, logger);
    });
  }
}

/**
 * Closes `session` once its client has reset more streams than the bucket of
 * {@link STREAM_RESET_BURST} holds (HTTP/2 "rapid reset", CVE-2023-44487).
 * Every stream closed with an error code counts, whoever reset it.
 */
function limitStreamResets(session: http2.ServerHttp2Session, logger: Logger): void {
  let tokens = STREAM_RESET_BURST;
  let last = performance.now();
  session.on('stream', function countReset(stream: http2.ServerHttp2Stream) {
    stream.once('close', () => {
      // 0 (NGHTTP2_NO_ERROR) or unset: the stream ended without a reset.
      if (!stream.rstCode || session.destroyed) return;
      const now = performance.now();
      tokens = Math.min(
        STREAM_RESET_BURST,
        tokens + ((now - last) / 1000) * STREAM_RESETS_PER_SECOND,
      );
      last = now;
      tokens -= 1;
      if (tokens < 0) {
        logger.debug('connection closed: too many stream resets');
        session.destroy();
      }
    });
  });
}

/**
 * Every {@link LIVENESS_CHECK_MS}, pings `session` if it read bytes since the
 * last check, and closes it if a ping is still unanswered after
 * {@link LIVENESS_TIMEOUT_MS}. A connection without traffic is left to the
 * idle timeout and grpc-js's keepalive.
 */
function checkLiveness(session: http2.ServerHttp2Session, logger: Logger): void {
  let read = 0;
  let pingSince: number | undefined;
  const timer = setInterval(function checkSession() {
    if (session.destroyed) return;
    const now = performance.now();
    if (pingSince !== undefined) {
      if (now - pingSince < LIVENESS_TIMEOUT_MS) return;
      logger.debug('connection closed: ping not answered');
      session.destroy();
      return;
    }
    const bytesRead = session.socket?.bytesRead ?? read;
    if (bytesRead === read) return;
    read = bytesRead;
    pingSince = now;
    // An error (the session closing, too many pings outstanding) also ends the wait.
    const sent = session.ping(() => {
      pingSince = undefined;
    });
    if (!sent) pingSince = undefined;
  }, LIVENESS_CHECK_MS);
  timer.unref();
  session.once('close', () => clearInterval(timer));
}

/**
 * Reads until `socket` has sent the HTTP/2 client preface; resolves with the
 * bytes read (paused, to be put back), or undefined when the client sent
 * something else, closed, or took longer than `timeoutMs`.
 */
function awaitPreface(socket: net.Socket, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    const finish = (result: Buffer | undefined) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      resolve(result);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    const onClose = () => finish(undefined);
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const n = Math.min(received.length, HTTP2_PREFACE.length);
      if (!received.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n))) finish(undefined);
      else if (received.length >= HTTP2_PREFACE.length) finish(received);
    };
    socket.on('data', onData);
    socket.on('close', onClose);
  });
}

/** A socket left by a killed sidecar would make the bind fail; a regular file is never removed. */
function removeStaleSocket(path: string): void {
  if (existsSync(path) && lstatSync(path).isSocket()) unlinkSync(path);
}

/**
 * Creates an HTTP/1.1 server (HTTPS with `tls`) that holds at most
 * `limits.maxConnections` connections, closes a connection whose request
 * headers take longer than the handshake timeout or whose whole request
 * takes longer than the request timeout, and one without traffic for the
 * idle timeout.
 */
function createHttpServer(
  handler: http.RequestListener,
  limits: ConnectionLimits,
  tls?: TlsMaterial,
): http.Server {
  const options: http.ServerOptions = {
    headersTimeout: limits.handshakeTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: Math.min(HTTP_KEEP_ALIVE_TIMEOUT_MS, limits.idleTimeoutMs),
    // Node checks the two timeouts above only this often.
    connectionsCheckingInterval: Math.min(
      HTTP_TIMEOUT_CHECK_MAX_MS,
      Math.ceil(limits.handshakeTimeoutMs / 4),
    ),
  };
  const server =
    tls === undefined
      ? http.createServer(options, handler)
      : https.createServer(
          extend(options, {
            cert: tls.cert,
            key: tls.key,
            ca: tls.clientCa,
            requestCert: tls.clientCa !== undefined,
            rejectUnauthorized: tls.clientCa !== undefined,
            handshakeTimeout: limits.handshakeTimeoutMs,
          }),
          handler,
        );
  server.maxConnections = limits.maxConnections;
  // A socket without traffic for this long is destroyed (no 'timeout' listener keeps it).
  server.timeout = limits.idleTimeoutMs;
  return server;
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
  const bound = server.address() as net.AddressInfo;
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return `${host}:${bound.port}`;
}
