/**
 * Detached webhooks are bounded: the observer webhooks of allowed
 * `beforeToolCall` calls to a receiver that never answers stop at
 * `--max-detached-deliveries` in flight and at `--webhook-max-connections`
 * sockets; the excess is not sent, is counted in
 * `agenthooks_detached_deliveries_dropped_total` and reported as SKIPPED
 * with `detached_limit`, while every decision still answers allow at once.
 */
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterEach, describe, expect, it } from 'vitest';
import { HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const MAX_DETACHED = 20;
const MAX_CONNECTIONS = 8;
const CALLS = 100;
/** The observers' timeout: far longer than the test, so no detached delivery settles during it. */
const WEBHOOK_TIMEOUT_S = 120;

/** The value of one sample of the Prometheus text, or undefined. */
function sample(metrics: string, name: string): number | undefined {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe('detached deliveries', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('keeps observer webhooks to a receiver that never answers within the bounds and drops the rest', async () => {
    receiver = await startReceiver();
    receiver.respond(() => undefined); // never answers
    sidecar = await startSidecar({
      args: [
        '--max-detached-deliveries',
        String(MAX_DETACHED),
        '--webhook-max-connections',
        String(MAX_CONNECTIONS),
      ],
    });
    const client = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    await client.registerHooks({
      operationId: 'bounded-op',
      hooks: [
        {
          id: 'observer',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${receiver.url}/observe`, timeout: WEBHOOK_TIMEOUT_S },
        },
      ],
    });

    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        client.decideToolCall({
          event: {
            context: {
              operationId: 'bounded-op',
              toolCallId: `call-${i}`,
              identifier: 'search',
              apiName: 'query',
              executor: Executor.SERVER,
            },
          },
        }),
      ),
    );
    const elapsedMs = performance.now() - started;
    expect(answers.every((a) => a.decision?.outcome.case === 'allow')).toBe(true);
    // None waited for its observer, which only its 120 s timeout could end.
    expect(elapsedMs).toBeLessThan((WEBHOOK_TIMEOUT_S * 1000) / 4);
    const observers = answers.map((a) => a.outcomes[0]);
    expect(observers.every((o) => o?.status === HookOutcomeStatus.SKIPPED)).toBe(true);
    const dropped = observers.filter((o) => o?.errorCode === 'detached_limit');
    expect(dropped).toHaveLength(CALLS - MAX_DETACHED);
    expect(dropped[0]?.message).toContain('too many detached deliveries in flight (max_tasks)');

    // The started ones reach the receiver on at most MAX_CONNECTIONS sockets; the rest queue.
    await receiver.waitForRequests(MAX_CONNECTIONS);
    const metrics = await (await fetch(`http://${sidecar.http}/metrics`)).text();
    expect(
      sample(metrics, 'agenthooks_detached_deliveries_dropped_total{reason="max_tasks"}'),
    ).toBe(CALLS - MAX_DETACHED);
    expect(sample(metrics, 'agenthooks_detached_deliveries_in_flight')).toBe(MAX_DETACHED);
    expect(receiver.connections()).toBe(MAX_CONNECTIONS);
    expect(receiver.requests).toHaveLength(MAX_CONNECTIONS);

    const warning = await sidecar.waitForLog(
      (l) => l.msg === 'detached deliveries dropped: too many in flight',
    );
    expect(warning).toMatchObject({ level: 'warn', maxTasks: MAX_DETACHED });
    // Drops are logged at most once per 10 s, not once per call.
    expect(
      sidecar.logs.filter((l) => l.msg === 'detached deliveries dropped: too many in flight')
        .length,
    ).toBeLessThan(CALLS - MAX_DETACHED);
    // Stderr holds JSON lines only, and no listener pile-up was warned about.
    expect(sidecar.logs.filter((l) => l.raw === true)).toEqual([]);
    expect(JSON.stringify(sidecar.logs)).not.toContain('MaxListenersExceededWarning');
  });
});
