/**
 * @module The edge over an application: its services wrapped in the one
 * guard, with the admission rules of each (the bearer token on HookService
 * and, unless public, reflection; health always open; HookService refused
 * while draining), and the Connect routes of the HTTP listener. Both
 * transports and the in-process tests serve the same guarded objects.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import type { ConnectRouter, HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { ServerReflection as ServerReflectionV1 } from '../../gen/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import { shuttingDown } from '../errors.js';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Tracing } from '../tracing/tracing.js';
import type { HeaderReader, TokenCheck } from './auth.js';
import { type Admission, guardService } from './guard.js';
import { createHealthService, type HealthState } from './health.js';
import {
  createReflectionAlphaService,
  createReflectionIndex,
  createReflectionService,
  type ReflectionIndex,
} from './reflection.js';

/** What the edge needs of an application (`createApp` returns one). */
export interface EdgeApp {
  /** The HookService implementation, unguarded. */
  readonly hookService: Partial<ServiceImpl<typeof HookService>>;
  readonly health: HealthState;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Makes a server span per HookService call; absent while tracing is off. */
  readonly tracing?: Tracing | undefined;
  /** Called once the listeners are bound; turns health SERVING unless the app knows better. */
  markListening(): void;
  /** Told about each call that failed on the server's side. */
  serverFault(e: unknown): void;
  /** Told that the sidecar starts draining (its streams end). */
  startDraining?(): void;
}

/** Options of {@link createEdge}. */
export interface EdgeOptions {
  /** Checks the bearer token of HookService (and reflection) calls; none without a token. */
  readonly checkToken: TokenCheck | undefined;
  /** Serve reflection without the token. */
  readonly reflectionPublic: boolean;
}

/** The guarded services of an app. */
export interface Edge {
  readonly hook: ServiceImpl<typeof HookService>;
  readonly health: ServiceImpl<typeof Health>;
  readonly reflection: ServiceImpl<typeof ServerReflectionV1>;
  readonly reflectionAlpha: ServiceImpl<typeof ServerReflectionV1Alpha>;
  /** Registers the services the HTTP listener serves (HookService and health). */
  routes(router: ConnectRouter): void;
  /** Returns the guarded method serving `method`, if the edge serves it. */
  guardedMethod(
    method: DescMethod,
  ): ((request: unknown, ctx: HandlerContext) => Promise<unknown>) | undefined;
  /**
   * Whether a call's headers carry the token its method needs, so a
   * transport can refuse it before reading its body (health needs none).
   */
  authorized(method: DescMethod, header: Headers): boolean;
  /** {@link Edge.authorized} by the service's full name (`agenthooks.v1.HookService`). */
  authorizedService(service: string, header: HeaderReader): boolean;
  /** Refuses new HookService calls (`SHUTTING_DOWN`) and ends health Watch streams. */
  startDraining(): void;
  /**
   * Resolves once no HookService call runs (after {@link Edge.startDraining}
   * none starts), or when `signal` aborts.
   */
  callsEnded(signal: AbortSignal): Promise<void>;
}

/**
 * Wraps an app's services in the guard.
 *
 * @example
 * const edge = createEdge(app, { checkToken: createTokenCheck(undefined), reflectionPublic: false });
 * const client = createClient(HookService, createRouterTransport((r) => edge.routes(r)));
 */
export function createEdge(app: EdgeApp, options: EdgeOptions): Edge {
  let draining = false;
  const watchStop = new AbortController();
  const common = {
    logger: app.logger,
    onServerError: (e: unknown) => app.serverFault(e),
  };
  const { checkToken } = options;
  const admitHookCall: Admission = (_method, ctx) => {
    // The token first: an unauthenticated caller learns nothing, not even that we are draining.
    checkToken?.(ctx.requestHeader);
    if (draining) {
      throw shuttingDown();
    }
  };
  const admitReflection: Admission | undefined =
    options.reflectionPublic || checkToken === undefined
      ? undefined
      : (_method, ctx) => checkToken(ctx.requestHeader);
  // Built on the first reflection request from the committed descriptor set, with source info, so reflection
  // clients read the proto comments and resolve the google.rpc error details.
  let index: ReflectionIndex | undefined;
  const reflectionIndex = () => {
    index ??= createReflectionIndex([
      HookService,
      Health,
      ServerReflectionV1,
      ServerReflectionV1Alpha,
    ]);
    return index;
  };
  // The HookService calls running, and who waits for them to end (a drain).
  let running = 0;
  let ended: (() => void) | undefined;
  const calls = {
    enter() {
      running += 1;
    },
    leave() {
      running -= 1;
      if (running === 0) ended?.();
    },
  };
  const hook = guardService(
    HookService,
    app.hookService,
    extend(common, {
      metrics: app.metrics,
      admit: admitHookCall,
      calls,
      // HookService only: kubelet probes and reflection would only add noise to traces.
      tracing: app.tracing,
    }),
  );
  // Health stays open for kubelet probes, which send no token.
  const health = guardService(Health, createHealthService(app.health, watchStop.signal), common);
  const reflection = guardService(
    ServerReflectionV1,
    createReflectionService(reflectionIndex),
    extend(common, {
      admit: admitReflection,
    }),
  );
  const reflectionAlpha = guardService(
    ServerReflectionV1Alpha,
    createReflectionAlphaService(reflectionIndex),
    extend(common, { admit: admitReflection }),
  );
  const byService = new Map<string, Record<string, unknown>>([
    [HookService.typeName, hook],
    [Health.typeName, health],
  ]);
  const authorizedService = (service: string, header: HeaderReader): boolean => {
    const needsToken =
      service === HookService.typeName ||
      (admitReflection !== undefined &&
        (service === ServerReflectionV1.typeName || service === ServerReflectionV1Alpha.typeName));
    if (checkToken === undefined || !needsToken) return true;
    try {
      checkToken(header);
      return true;
    } catch {
      return false;
    }
  };
  return {
    hook,
    health,
    reflection,
    reflectionAlpha,
    routes(router) {
      router.service(HookService, hook);
      router.service(Health, health);
    },
    guardedMethod(method) {
      const fn = byService.get(method.parent.typeName)?.[method.localName];
      return typeof fn === 'function'
        ? (fn as (request: unknown, ctx: HandlerContext) => Promise<unknown>)
        : undefined;
    },
    authorized: (method, header) => authorizedService(method.parent.typeName, header),
    authorizedService,
    startDraining() {
      draining = true;
      // Watch streams end after they have sent NOT_SERVING, so they do not hold the drain open.
      watchStop.abort();
      // So do the HookService streams, once what they hold is answered.
      app.startDraining?.();
    },
    callsEnded(signal) {
      if (running === 0 || signal.aborted) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          ended = undefined;
          signal.removeEventListener('abort', done);
          resolve();
        };
        ended = done;
        signal.addEventListener('abort', done);
      });
    },
  };
}
