/**
 * @module The health service in process, over `createRouterTransport`: the
 * liveness and readiness probes are separate services (Check, List, Watch),
 * the server ('') and HookService follow readiness, a store outage moves
 * readiness alone, and shutdown moves both.
 */
import { Code, ConnectError, createClient, createRouterTransport } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import {
  createHealthService,
  HealthState,
  LIVENESS_SERVICE,
  READINESS_SERVICE,
  ServingStatus,
} from '../../src/server/health.js';

const { SERVING, NOT_SERVING } = ServingStatus;

/** A client of the health service over `state`, in process. */
function healthClient(state: HealthState, stop?: AbortSignal) {
  const transport = createRouterTransport((router) => {
    router.service(Health, createHealthService(state, stop));
  });
  return createClient(Health, transport);
}

/** Every service's status, by name, as List answers it. */
async function listed(client: ReturnType<typeof healthClient>): Promise<Record<string, string>> {
  const { statuses } = await client.list({});
  return Object.fromEntries(
    Object.entries(statuses).map(([name, res]) => [name, ServingStatus[res.status]]),
  );
}

describe('health service', () => {
  it('keeps liveness SERVING while readiness turns NOT_SERVING and back, and List shows both', async () => {
    const state = new HealthState([HookService.typeName]);
    const client = healthClient(state);
    expect(await listed(client)).toEqual({
      '': 'NOT_SERVING',
      [READINESS_SERVICE]: 'NOT_SERVING',
      [LIVENESS_SERVICE]: 'NOT_SERVING',
      [HookService.typeName]: 'NOT_SERVING',
    });

    state.setLiveness(SERVING);
    state.setReadiness(SERVING);
    for (const service of ['', READINESS_SERVICE, LIVENESS_SERVICE, HookService.typeName]) {
      expect((await client.check({ service })).status, service).toBe(SERVING);
    }

    // A store outage: readiness and everything that follows it, not liveness.
    state.setReadiness(NOT_SERVING);
    expect(await listed(client)).toEqual({
      '': 'NOT_SERVING',
      [READINESS_SERVICE]: 'NOT_SERVING',
      [LIVENESS_SERVICE]: 'SERVING',
      [HookService.typeName]: 'NOT_SERVING',
    });

    // Shutdown: both.
    state.setAll(NOT_SERVING);
    expect((await client.check({ service: LIVENESS_SERVICE })).status).toBe(NOT_SERVING);
    expect((await client.check({ service: READINESS_SERVICE })).status).toBe(NOT_SERVING);
  });

  it('answers NOT_FOUND for a service it does not know', async () => {
    const client = healthClient(new HealthState([]));
    const err = await client.check({ service: 'livenes' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.NotFound);
    // With the reason every other error carries, the same on every protocol.
    expect(err?.findDetails(ErrorInfoSchema)).toEqual([
      expect.objectContaining({ reason: 'SERVICE_NOT_FOUND', metadata: { service: 'livenes' } }),
    ]);
    // A long name is cut, as every error's text is: the status must fit gRPC's trailers.
    const long = await client.check({ service: 'x'.repeat(100_000) }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    const service = long?.findDetails(ErrorInfoSchema)[0]?.metadata.service ?? '';
    expect(service.length).toBeLessThanOrEqual(513);
    expect(service.endsWith('…')).toBe(true);
  });

  it('streams each change of liveness and of readiness to Watch, each on its own', async () => {
    const state = new HealthState([HookService.typeName]);
    const stop = new AbortController();
    const client = healthClient(state, stop.signal);
    const seen: Record<string, string[]> = { [LIVENESS_SERVICE]: [], [READINESS_SERVICE]: [] };
    const watchers = Object.keys(seen).map(async (service) => {
      for await (const res of client.watch({ service })) {
        seen[service]?.push(ServingStatus[res.status]);
      }
    });
    /** Waits until the watcher of `service` has seen `count` statuses. */
    const saw = async (service: string, count: number) => {
      const deadline = Date.now() + 5_000;
      while ((seen[service]?.length ?? 0) < count) {
        if (Date.now() > deadline) throw new Error(`watchers saw ${JSON.stringify(seen)}`);
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await saw(LIVENESS_SERVICE, 1);
    await saw(READINESS_SERVICE, 1);
    state.setLiveness(SERVING);
    await saw(LIVENESS_SERVICE, 2);
    state.setReadiness(SERVING);
    await saw(READINESS_SERVICE, 2);
    state.setReadiness(NOT_SERVING);
    await saw(READINESS_SERVICE, 3);
    state.setReadiness(SERVING);
    await saw(READINESS_SERVICE, 4);
    state.setAll(NOT_SERVING);
    await saw(LIVENESS_SERVICE, 3);
    await saw(READINESS_SERVICE, 5);
    stop.abort();
    await Promise.all(watchers);
    expect(seen).toEqual({
      [LIVENESS_SERVICE]: ['NOT_SERVING', 'SERVING', 'NOT_SERVING'],
      [READINESS_SERVICE]: ['NOT_SERVING', 'SERVING', 'NOT_SERVING', 'SERVING', 'NOT_SERVING'],
    });
  });
});
