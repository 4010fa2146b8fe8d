/**
 * Shutdown keeps its grace bound: webhooks that were started and not
 * awaited (the observers of an allowed `beforeToolCall`) are owned by the
 * app's background scope, which cuts them off at the deadline, so SIGTERM
 * ends the process within `--shutdown-grace` plus a small margin even when
 * a receiver never answers.
 */
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterEach, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** The grace given to the sidecar, and the most the test accepts from SIGTERM to exit. */
const GRACE_S = 1;
const EXIT_WITHIN_MS = 3_000;

describe('shutdown', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('exits 0 within 3 s of SIGTERM while an observer webhook never answers, closing its connection', async () => {
    receiver = await startReceiver();
    let connectionClosed!: () => void;
    const closed = new Promise<void>((resolve) => {
      connectionClosed = resolve;
    });
    // Never answers; tells the test when the sidecar hangs up.
    receiver.respond((_req, res) => {
      res.on('close', () => connectionClosed());
    });
    sidecar = await startSidecar({ args: ['--shutdown-grace', String(GRACE_S)] });
    const client = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    await client.registerHooks({
      operationId: 'shutdown-op',
      hooks: [
        {
          id: 'observer',
          type: HookType.BEFORE_TOOL_CALL,
          // Far longer than the grace: only the shutdown can end this request.
          webhook: { url: `${receiver.url}/observe`, timeout: 60 },
        },
      ],
    });
    const answer = await client.decideToolCall({
      event: {
        context: {
          operationId: 'shutdown-op',
          toolCallId: 'call-1',
          identifier: 'search',
          apiName: 'query',
          executor: Executor.SERVER,
        },
      },
    });
    expect(answer.decision?.outcome.case).toBe('allow');
    await receiver.waitForRequests(1);

    const signalled = performance.now();
    sidecar.kill('SIGTERM');
    const code = await sidecar.exited;
    const elapsed = performance.now() - signalled;
    expect(code).toBe(0);
    expect(elapsed).toBeLessThan(EXIT_WITHIN_MS);
    await closed;
    expect(
      sidecar.logs.some((l) => l.msg === 'shutdown deadline reached; aborting background work'),
    ).toBe(true);
  });
});
