/**
 * @module The `grpc.health.v1.Health` service, with two probes kept apart
 * so that a database outage takes a pod out of service without its liveness
 * probe restarting it:
 * - `liveness` ({@link LIVENESS_SERVICE}): SERVING while the process serves,
 *   from the moment its listeners are bound until it drains, whatever the store;
 * - `readiness` ({@link READINESS_SERVICE}): SERVING while the sidecar can
 *   decide: listening, the store usable, not draining. The server itself (the
 *   empty service name, what a probe without `service` asks) and each API
 *   service (`agenthooks.v1.HookService`) follow readiness, as they always did.
 * Watch streams the current status, then every change.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import {
  type Health,
  type HealthCheckRequest,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from '../../gen/grpc/health/v1/health_pb.js';
import { clipErrorText, errorInfo } from './errors.js';

/** Serving status of the health protocol. */
export { ServingStatus };

/** Service name of the liveness probe: SERVING while the process serves. */
export const LIVENESS_SERVICE = 'liveness';
/** Service name of the readiness probe: SERVING while the sidecar can decide. */
export const READINESS_SERVICE = 'readiness';

/**
 * Holds the serving status of the server ('') and of each named service,
 * and tells watchers about changes. {@link LIVENESS_SERVICE} has a status of
 * its own; every other name follows readiness.
 */
export class HealthState {
  readonly #statuses = new Map<string, ServingStatus>();
  readonly #watchers = new Set<() => void>();

  /**
   * Creates the state with the server (''), {@link READINESS_SERVICE},
   * {@link LIVENESS_SERVICE} and every named service NOT_SERVING.
   */
  constructor(services: readonly string[]) {
    for (const name of ['', READINESS_SERVICE, LIVENESS_SERVICE, ...services]) {
      this.#statuses.set(name, ServingStatus.NOT_SERVING);
    }
  }

  /** Sets the status of the server and of every service, liveness included (shutdown). */
  setAll(status: ServingStatus): void {
    this.#set(() => true, status);
  }

  /** Sets readiness: the server (''), {@link READINESS_SERVICE} and every API service. */
  setReadiness(status: ServingStatus): void {
    this.#set((name) => name !== LIVENESS_SERVICE, status);
  }

  /** Sets {@link LIVENESS_SERVICE} alone. */
  setLiveness(status: ServingStatus): void {
    this.#set((name) => name === LIVENESS_SERVICE, status);
  }

  #set(which: (name: string) => boolean, status: ServingStatus): void {
    let changed = false;
    for (const [name, old] of this.#statuses) {
      if (which(name) && old !== status) {
        this.#statuses.set(name, status);
        changed = true;
      }
    }
    if (changed) for (const notify of this.#watchers) notify();
  }

  /** Returns the status of a service, or `undefined` for an unknown name. */
  get(service: string): ServingStatus | undefined {
    return this.#statuses.get(service);
  }

  /** Returns every service's status. */
  entries(): [string, ServingStatus][] {
    return [...this.#statuses];
  }

  /** Calls `notify` after each change until the returned function is called. */
  subscribe(notify: () => void): () => void {
    this.#watchers.add(notify);
    return () => this.#watchers.delete(notify);
  }
}

/**
 * Creates the Health service implementation over a {@link HealthState}.
 * When `stop` aborts (the server drains), each Watch stream sends the status
 * changes it has not sent yet, then ends, so it does not hold the drain open.
 */
export function createHealthService(
  state: HealthState,
  stop?: AbortSignal,
): ServiceImpl<typeof Health> {
  return {
    check(request: HealthCheckRequest): HealthCheckResponse {
      const status = state.get(request.service);
      if (status === undefined) {
        throw new ConnectError(`unknown service ${request.service}`, Code.NotFound, undefined, [
          // Cut as every error's text is, so that a long name still fits the trailers.
          errorInfo('SERVICE_NOT_FOUND', { service: clipErrorText(request.service) }),
        ]);
      }
      return create(HealthCheckResponseSchema, { status });
    },
    list() {
      return {
        statuses: Object.fromEntries(
          state
            .entries()
            .map(([name, status]) => [name, create(HealthCheckResponseSchema, { status })]),
        ),
      };
    },
    async *watch(request: HealthCheckRequest, ctx: HandlerContext) {
      const current = () => state.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
      let wake: (() => void) | undefined;
      let changed = true;
      const unsubscribe = state.subscribe(() => {
        changed = true;
        wake?.();
      });
      const onAbort = () => wake?.();
      ctx.signal.addEventListener('abort', onAbort);
      stop?.addEventListener('abort', onAbort);
      try {
        let last: ServingStatus | undefined;
        while (!ctx.signal.aborted) {
          if (changed) {
            changed = false;
            const status = current();
            // The protocol sends a status only when it differs from the last one sent.
            if (status !== last) {
              last = status;
              yield create(HealthCheckResponseSchema, { status });
            }
            continue;
          }
          if (stop?.aborted) return;
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener('abort', onAbort);
        stop?.removeEventListener('abort', onAbort);
      }
    },
  };
}
