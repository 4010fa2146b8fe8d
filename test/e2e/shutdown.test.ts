/**
 * Shutdown keeps its grace bound: webhooks that were started and not
 * awaited (the observers of an allowed `beforeToolCall`) are owned by the
 * app's background scope, which cuts them off at the deadline, so SIGTERM
 * ends the process within `--shutdown-grace` plus a small margin even when
 * a receiver never answers. During the drain the health-only listener
 * (`--health-listen`) stays up and answers NOT_SERVING while the API
 * listener refuses new calls.
 */
import type { ServerResponse } from 'node:http';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import type * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  errorInfoOf,
  hookClient as grpcHookClient,
  healthClient,
  type LoaderObject,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** The grace given to the sidecar, and the most the test accepts from SIGTERM to exit. */
const GRACE_S = 1;
const EXIT_WITHIN_MS = 3_000;

/** A grace far longer than the test: only the held call's end can finish the drain. */
const LONG_GRACE_S = 300;

/** gRPC status UNAVAILABLE, as grpc-js reports it. */
const UNAVAILABLE = 14;

/** A HookService client of `sidecar`'s gRPC listener. */
function hookClient(sidecar: SidecarProcess) {
  return createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
}

/** A control at `${url}/gate` whose answer the test holds: the call lasts until it is released. */
function gate(url: string) {
  return {
    id: 'gate',
    type: HookType.BEFORE_TOOL_CALL,
    webhook: {
      url: `${url}/gate`,
      responseHandling: ResponseHandling.TOOL_CALL,
      timeout: LONG_GRACE_S,
    },
  };
}

/** The one tool call every test here decides, on `operationId`. */
function decide(client: ReturnType<typeof hookClient>, operationId: string) {
  return client.decideToolCall({
    event: {
      context: {
        operationId,
        toolCallId: 'call-1',
        identifier: 'search',
        apiName: 'query',
        executor: Executor.SERVER,
      },
    },
  });
}

/** The serving status the health listener reports for the whole server (service ""). */
async function healthStatus(client: AnyClient): Promise<string> {
  const res = await unary<{ status: string }>(client, 'Check', { service: '' });
  return res.status;
}

describe('shutdown', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;
  let clients: AnyClient[] = [];

  afterEach(async () => {
    for (const client of clients) client.close();
    clients = [];
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
    const client = hookClient(sidecar);
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
    const answer = await decide(client, 'shutdown-op');
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

  it('sends the notifications of a call that ends during the drain before it exits', async () => {
    receiver = await startReceiver();
    // Holds the control's answer until the test releases it; notifications get 204.
    let held!: (res: ServerResponse) => void;
    const heldResponse = new Promise<ServerResponse>((resolve) => {
      held = resolve;
    });
    receiver.respond((req, res) => {
      if (req.path === '/gate') held(res);
      else res.writeHead(204).end();
    });
    sidecar = await startSidecar({ args: ['--shutdown-grace', String(LONG_GRACE_S)] });
    const client = hookClient(sidecar);
    await client.registerHooks({
      operationId: 'drain-notify-op',
      hooks: [
        gate(receiver.url),
        {
          id: 'observer',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${receiver.url}/observe` },
        },
      ],
    });
    const decision = decide(client, 'drain-notify-op');
    const res = await heldResponse;
    sidecar.kill('SIGTERM');
    await sidecar.waitForLog((l) => l.msg === 'draining');

    // The call ends during the drain; its allow starts the observer's notification.
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"allow"}');
    expect((await decision).decision?.outcome.case).toBe('allow');
    expect(await sidecar.exited).toBe(0);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/gate', '/observe']);
  });

  it('answers NOT_SERVING on the health listener during a drain, refuses new calls, then exits 0', async () => {
    receiver = await startReceiver();
    // Holds the control webhook's answer until the test releases it: the drain lasts until then.
    let held!: (res: ServerResponse) => void;
    const heldResponse = new Promise<ServerResponse>((resolve) => {
      held = resolve;
    });
    receiver.respond((_req, res) => held(res));
    sidecar = await startSidecar({
      args: ['--health-listen', '127.0.0.1:0', '--shutdown-grace', String(LONG_GRACE_S)],
    });
    const healthAddress = sidecar.health;
    if (healthAddress === undefined) throw new Error('the sidecar logged no health listener');
    const client = hookClient(sidecar);
    const health = healthClient(healthAddress);
    clients.push(health);
    expect(await healthStatus(health)).toBe('SERVING');
    await client.registerHooks({
      operationId: 'drain-op',
      hooks: [gate(receiver.url)],
    });
    const decision = decide(client, 'drain-op');
    const res = await heldResponse;

    sidecar.kill('SIGTERM');
    // Logged just before the listeners start draining, in the same tick as NOT_SERVING.
    await sidecar.waitForLog((l) => l.msg === 'draining');
    // A new connection to the health listener, opened during the drain.
    const fresh = healthClient(healthAddress);
    clients.push(fresh);
    expect(await healthStatus(fresh)).toBe('NOT_SERVING');
    expect(await healthStatus(health)).toBe('NOT_SERVING');
    // The API listener takes no new HookService call while the held one runs.
    const refused = await client.listHooks({ operationId: 'drain-op' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refused?.code).toBe(Code.Unavailable);
    const newcomer = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    const refusedNew = await newcomer.listHooks({ operationId: 'drain-op' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refusedNew?.code).toBe(Code.Unavailable);
    // Still draining: the process has not exited, and the health listener still answers.
    expect(sidecar.logs.some((l) => l.msg === 'stopped')).toBe(false);
    expect(await healthStatus(fresh)).toBe('NOT_SERVING');

    res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"allow"}');
    const answer = await decision;
    expect(answer.decision?.outcome.case).toBe('allow');
    expect(await sidecar.exited).toBe(0);
    expect(sidecar.logs.some((l) => l.msg === 'stopped')).toBe(true);
    // Once the process is gone, so is the health listener.
    const after = await healthStatus(fresh).then(
      () => undefined,
      (e: { code?: number }) => e.code,
    );
    expect(after).toBe(UNAVAILABLE);
  });

  it('answers NOT_SERVING on the API listeners during a drain, gRPC health and HTTP probes alike, on new connections', async () => {
    receiver = await startReceiver();
    // Holds the control webhook's answer until the test releases it: the drain lasts until then.
    let held!: (res: ServerResponse) => void;
    const heldResponse = new Promise<ServerResponse>((resolve) => {
      held = resolve;
    });
    receiver.respond((_req, res) => held(res));
    sidecar = await startSidecar({ args: ['--shutdown-grace', String(LONG_GRACE_S)] });
    const client = hookClient(sidecar);
    await client.registerHooks({ operationId: 'drain-api-op', hooks: [gate(receiver.url)] });
    const decision = decide(client, 'drain-api-op');
    const res = await heldResponse;

    sidecar.kill('SIGTERM');
    await sidecar.waitForLog((l) => l.msg === 'draining');
    // Connections opened during the drain, on the gRPC and the HTTP listener.
    const health = healthClient(sidecar.grpc);
    clients.push(health);
    expect(await healthStatus(health)).toBe('NOT_SERVING');
    for (const path of ['/readyz', '/healthz']) {
      const probe = await fetch(`http://${sidecar.http}${path}`, {
        headers: { connection: 'close' },
      });
      expect([path, probe.status, await probe.text()]).toEqual([path, 503, 'not serving\n']);
    }
    // A new HookService call there is refused, as shutting down.
    const refused = await hookClient(sidecar)
      .listHooks({ operationId: 'drain-api-op' })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(refused?.code).toBe(Code.Unavailable);
    expect(refused?.rawMessage).toContain('shutting down');
    expect(sidecar.logs.some((l) => l.msg === 'stopped')).toBe(false);

    res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"allow"}');
    expect((await decision).decision?.outcome.case).toBe('allow');
    expect(await sidecar.exited).toBe(0);
  });

  it('ends a DispatchStream at the drain once it acked what it read, and keeps a Handle stream for the calls in flight', async () => {
    receiver = await startReceiver();
    // Holds the first event's notification and the decision's gate until the test releases them.
    let holdStep!: (res: ServerResponse) => void;
    let holdGate!: (res: ServerResponse) => void;
    const heldStep = new Promise<ServerResponse>((resolve) => {
      holdStep = resolve;
    });
    const heldGate = new Promise<ServerResponse>((resolve) => {
      holdGate = resolve;
    });
    receiver.respond((req, res) => (req.path === '/gate' ? holdGate(res) : holdStep(res)));
    sidecar = await startSidecar({ args: ['--shutdown-grace', String(LONG_GRACE_S)] });
    await hookClient(sidecar).registerHooks({
      operationId: 'stream-op',
      hooks: [
        {
          id: 'step',
          type: HookType.AFTER_STEP,
          webhook: { url: `${receiver.url}/step`, timeout: LONG_GRACE_S },
        },
        gate(receiver.url),
        // After the gate: called only once the drain has begun.
        { id: 'mocker', type: HookType.BEFORE_TOOL_CALL, handler: true },
      ],
    });
    const client = grpcHookClient(sidecar.grpc);
    clients.push(client);
    const step = (eventId: string) => ({
      eventId,
      event: { afterStep: { operationId: 'stream-op', userId: 'u', stepIndex: 0 } },
    });
    /** Opens a stream; `ended` is how it ended: its status code and reason, or 'end'. */
    const open = (method: 'DispatchStream' | 'Handle') => {
      const call = client[method]() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      const seen: LoaderObject[] = [];
      call.on('data', (m: LoaderObject) => seen.push(m));
      const ended = new Promise<string>((resolve) => {
        call.on('error', (e: grpc.ServiceError) => resolve(`${e.code} ${errorInfoOf(e)?.reason}`));
        call.on('end', () => resolve('end'));
      });
      return { call, seen, ended };
    };
    const events = open('DispatchStream');
    events.call.write(step('e1'));
    const stepRes = await heldStep;
    // The runtime's handler mocks every call it gets.
    const handler = open('Handle');
    const attached = new Promise<void>((resolve) => {
      handler.call.on('data', (m: LoaderObject) => {
        if (m.attached) resolve();
        if (m.call) {
          handler.call.write({
            reply: { callId: m.call.callId, mock: { result: { content: 'mocked' } } },
          });
        }
      });
    });
    handler.call.write({ attach: { operationIds: ['stream-op'] } });
    await attached;
    const decision = decide(hookClient(sidecar), 'stream-op');
    const gateRes = await heldGate;

    sidecar.kill('SIGTERM');
    await sidecar.waitForLog((l) => l.msg === 'draining');
    // Sent after the drain began: never read, never acked.
    events.call.write(step('e2'));
    stepRes.writeHead(204).end();
    expect(await events.ended).toBe(`${UNAVAILABLE} SHUTTING_DOWN`);
    expect(events.seen.map((a) => a.eventId)).toEqual(['e1']);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/step', '/gate']);
    // The decision in flight still reaches its handler, over the stream the drain kept.
    gateRes.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"allow"}');
    const answer = await decision;
    expect(answer.decision?.outcome.case).toBe('mock');
    // The runtime lets go of its stream; nothing else holds the drain.
    handler.call.end();
    expect(await handler.ended).toBe('end');
    expect(await sidecar.exited).toBe(0);
  });
});
