/**
 * @module The publication lease of `PublishDeferredResult` (the
 * `DeferredPublisher` of `src/hooks/parked.ts`), in process: two apps built
 * by `createApp` on one SQLite file stand for two pods sharing a store, with
 * a real receiver answering the `afterToolCall` control. The result control
 * runs once however many duplicates arrive on either app; a duplicate waits
 * for the first final result, honours its own cancellation and deadline,
 * takes a lapsed lease over, and leaves a slow holder that renews alone.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  createClient,
  createHandlerContext,
  createRouterTransport,
  type ServiceImpl,
} from '@connectrpc/connect';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  HookService,
  ParkKind,
  PublishDeferredResultRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { type App, createApp, type OpenedStore } from '../../src/app.js';
import { parseServeConfig } from '../../src/config/config.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { createTokenCheck } from '../../src/server/auth.js';
import { createEdge } from '../../src/server/edge.js';
import { guardService } from '../../src/server/guard.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { ParkStore } from '../../src/store/store.js';
import { readConnectError } from '../support/connect-errors.js';
import { type Receiver, startReceiver } from '../support/receiver.js';

const OPERATION = 'op-lease';

/** This host and PID namespace, as a lease holder id names them. */
const HERE = `${hostname()}:${/\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? ''}`;

/** Path of the result control on the receiver. */
const CONTROL_PATH = '/control';
/** A lease the in-process tests wait out or outlast, in milliseconds. */
const SHORT_LEASE_MS = 300;
/** Duplicates sent to each app in the concurrency test. */
const DUPLICATES_PER_APP = 10;
/** How long a test waits for a condition before it fails, in milliseconds. */
const DEADLINE_MS = 10_000;

type Client = ReturnType<typeof createClient<typeof HookService>>;

/** An app (a "pod") on the shared file, and a client of its guarded service. */
interface Pod {
  readonly app: App;
  readonly client: Client;
}

const cleanups: (() => Promise<unknown> | unknown)[] = [];
let receiver: Receiver | undefined;

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await receiver?.close();
  receiver = undefined;
});

/** A fresh folder for the shared database file, removed after the test. */
function sharedDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-lease-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Builds an app on the database file in `dir`, with a publication lease of `lease`. */
function pod(
  dir: string,
  lease = '30s',
  extra: { store?: OpenedStore; write?: (line: string) => void } = {},
): Pod {
  const config = parseServeConfig(
    ['--db', join(dir, 'agenthooks.db'), '--publication-lease', lease],
    {},
  );
  const logger = createLogger(
    extra.write === undefined
      ? { level: 'error', write: () => undefined }
      : { level: 'warn', write: extra.write },
  );
  const app = createApp(config, logger, {
    store: extra.store,
    processEnv: {},
    globalDispatcher: false,
  });
  const edge = createEdge(app, {
    checkToken: createTokenCheck(undefined),
    reflectionPublic: false,
  });
  const client = createClient(
    HookService,
    createRouterTransport((router) => edge.routes(router)),
  );
  cleanups.push(() => app.close());
  return { app, client };
}

/** Registers the result control on the operation and parks `toolCallId` through `client`. */
async function parkWithControl(client: Client, url: string, toolCallId: string): Promise<void> {
  await client.registerHooks({
    operationId: OPERATION,
    hooks: [
      {
        id: 'guard',
        type: HookType.AFTER_TOOL_CALL,
        webhook: { url: `${url}${CONTROL_PATH}`, responseHandling: ResponseHandling.TOOL_CALL },
      },
    ],
  });
  await client.parkToolCall({
    context: {
      operationId: OPERATION,
      toolCallId,
      identifier: 'github',
      apiName: 'merge',
      executor: Executor.SERVER,
    },
    kind: ParkKind.HUMAN_APPROVAL,
  });
}

/** Requests the result control got so far. */
function controlCalls(): number {
  return receiver?.requests.filter((r) => r.path === CONTROL_PATH).length ?? 0;
}

/** A receiver that holds every control request until `release()`, then allows it. */
async function holdingReceiver(): Promise<{ release(): void }> {
  const held: ServerResponse[] = [];
  let released = false;
  const allow = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ decision: 'allow' }));
  };
  receiver = await startReceiver({
    answer: (_req, res) => {
      if (released) allow(res);
      else held.push(res);
    },
  });
  return {
    release() {
      released = true;
      for (const res of held.splice(0)) allow(res);
    },
  };
}

/** The ConnectError a call rejected with; fails when it resolved. */
async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (e: unknown) {
    return ConnectError.from(e);
  }
  throw new Error('expected the call to fail');
}

/** The domain error a call rejected with; fails when it resolved. */
async function domainFailure(call: Promise<unknown>): Promise<{ kind: string; reason?: string }> {
  try {
    await call;
  } catch (e: unknown) {
    const { code, reason } = readConnectError(e);
    return { kind: KIND_OF[code] ?? String(code), reason };
  }
  throw new Error('expected the call to fail');
}

/** The error kinds these tests expect, by the code the guard answers. */
const KIND_OF: Partial<Record<Code, string>> = {
  [Code.Canceled]: 'cancelled',
  [Code.DeadlineExceeded]: 'deadline_exceeded',
};

/** Resolves once `probe` is true; fails after {@link DEADLINE_MS}. */
async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('the publication lease across two apps on one store', () => {
  it('runs the result control once for duplicates on both apps, and answers each the first final result', async () => {
    const dir = sharedDir();
    const [a, b] = [pod(dir), pod(dir)] as [Pod, Pod];
    const hold = await holdingReceiver();
    await parkWithControl(a.client, receiver?.url ?? '', 'call-dup');

    const calls = Array.from({ length: DUPLICATES_PER_APP * 2 }, (_, i) =>
      (i % 2 === 0 ? a : b).client.publishDeferredResult({
        toolCallId: 'call-dup',
        result: { content: `result-${i}` },
      }),
    );
    // Every duplicate is in flight while the one control request is held.
    await until('the control was called', () => controlCalls() === 1);
    hold.release();
    const answers = await Promise.all(calls);

    expect(answers.filter((x) => x.published)).toHaveLength(1);
    expect(new Set(answers.map((x) => x.finalResult?.content)).size).toBe(1);
    expect(controlCalls()).toBe(1);
  });

  it('releases the lease when the holder’s call is cancelled, so a duplicate on the other app publishes at once', async () => {
    const dir = sharedDir();
    // A lease no test waits out: only the release lets B claim.
    const [a, b] = [pod(dir, '60s'), pod(dir, '60s')] as [Pod, Pod];
    const hold = await holdingReceiver();
    await parkWithControl(a.client, receiver?.url ?? '', 'call-cancel');
    const abort = new AbortController();

    const first = failure(
      a.client.publishDeferredResult(
        { toolCallId: 'call-cancel', result: { content: 'first' } },
        { signal: abort.signal },
      ),
    );
    await until('the control was called', () => controlCalls() === 1);
    abort.abort();
    expect((await first).code).toBe(Code.Canceled);
    hold.release();
    const started = Date.now();
    const second = await b.client.publishDeferredResult({
      toolCallId: 'call-cancel',
      result: { content: 'second' },
    });

    expect(second).toMatchObject({ published: true, finalResult: { content: 'second' } });
    expect(Date.now() - started).toBeLessThan(DEADLINE_MS);
    expect(controlCalls()).toBe(2);
  });

  it('fails a waiting duplicate CANCELLED or DEADLINE_EXCEEDED by its own call, while the first publication goes on', async () => {
    const dir = sharedDir();
    const [a, b] = [pod(dir), pod(dir)] as [Pod, Pod];
    const hold = await holdingReceiver();
    await parkWithControl(a.client, receiver?.url ?? '', 'call-wait');
    const first = a.client.publishDeferredResult({
      toolCallId: 'call-wait',
      result: { content: 'first' },
    });
    await until('the control was called', () => controlCalls() === 1);
    // Through the guard, as every transport serves it: the guard answers a
    // cancellation that came at the deadline as DEADLINE_EXCEEDED.
    const guarded = guardService(
      HookService,
      b.app.hookService as ServiceImpl<typeof HookService>,
      {
        logger: createLogger({ level: 'error', write: () => undefined }),
      },
    );
    const publish = guarded.publishDeferredResult.bind(guarded);
    const request = create(PublishDeferredResultRequestSchema, {
      toolCallId: 'call-wait',
      result: { content: 'duplicate' },
    });
    const context = (init: { timeoutMs?: number; requestSignal?: AbortSignal }) =>
      createHandlerContext({
        service: HookService,
        method: HookService.method.publishDeferredResult,
        protocolName: 'test',
        requestMethod: 'POST',
        url: '/agenthooks.v1.HookService/PublishDeferredResult',
        ...init,
      });

    const expired = await domainFailure(
      Promise.resolve(publish?.(request, context({ timeoutMs: 200 }))),
    );
    const abort = new AbortController();
    const cancelled = domainFailure(
      Promise.resolve(publish?.(request, context({ requestSignal: abort.signal }))),
    );
    abort.abort();
    // Node's timer can fire a millisecond before the wall clock reaches the
    // deadline: the deadline's own abort reason still makes it DEADLINE_EXCEEDED.
    const early = new AbortController();
    const earlyContext = context({ timeoutMs: 60_000, requestSignal: early.signal });
    // Clears the context's own 60 s deadline timer.
    cleanups.push(() => earlyContext.abort());
    const timedOutEarly = domainFailure(Promise.resolve(publish?.(request, earlyContext)));
    early.abort(new ConnectError('the operation timed out', Code.DeadlineExceeded));
    // A cancel without a reason 5 ms before the deadline (grpc-js's, or a Connect
    // client's own deadline closing the request): the clock decides.
    const atDeadline = new AbortController();
    const noReason = domainFailure(
      Promise.resolve(
        publish?.(request, {
          ...context({ requestSignal: atDeadline.signal }),
          timeoutMs: () => 5,
        }),
      ),
    );
    atDeadline.abort();

    expect([expired.kind, expired.reason]).toEqual(['deadline_exceeded', 'DEADLINE_EXCEEDED']);
    expect([(await cancelled).kind, (await cancelled).reason]).toEqual(['cancelled', 'CANCELLED']);
    const beforeClock = await timedOutEarly;
    expect([beforeClock.kind, beforeClock.reason]).toEqual([
      'deadline_exceeded',
      'DEADLINE_EXCEEDED',
    ]);
    const byClock = await noReason;
    expect([byClock.kind, byClock.reason]).toEqual(['deadline_exceeded', 'DEADLINE_EXCEEDED']);
    hold.release();
    expect(await first).toMatchObject({ published: true, finalResult: { content: 'first' } });
    const later = await b.client.publishDeferredResult({
      toolCallId: 'call-wait',
      result: { content: 'later' },
    });
    expect(later).toMatchObject({ published: false, finalResult: { content: 'first' } });
    expect(controlCalls()).toBe(1);
  });

  it('takes over a lease whose holder died, once it lapses', async () => {
    const dir = sharedDir();
    const b = pod(dir);
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(b.client, receiver.url, 'call-dead');
    // A holder that took the lease and died before it ran anything.
    const dead = openSqliteStore(join(dir, 'agenthooks.db'));
    cleanups.push(() => dead.close());
    expect((await dead.claimPublication('call-dead', 'dead/1', SHORT_LEASE_MS))?.state).toBe(
      'claimed',
    );
    const claimedAt = Date.now();

    const answer = await b.client.publishDeferredResult({
      toolCallId: 'call-dead',
      result: { content: 'taken over' },
    });

    expect(answer).toMatchObject({ published: true, finalResult: { content: 'taken over' } });
    // Not before the lease lapsed (a margin for the clock's granularity).
    expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(SHORT_LEASE_MS - 20);
    expect(controlCalls()).toBe(1);
  });

  it('takes over at once the lease of a process of this host that is gone, without waiting for it to lapse', async () => {
    const dir = sharedDir();
    const b = pod(dir, '60s');
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(b.client, receiver.url, 'call-gone');
    // A process of this host that has exited: its id is free.
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    const dead = openSqliteStore(join(dir, 'agenthooks.db'));
    cleanups.push(() => dead.close());
    const holder = `${HERE}/${gone}/0badf00d/1`;
    expect((await dead.claimPublication('call-gone', holder, 60_000))?.state).toBe('claimed');

    const answer = await b.client.publishDeferredResult(
      { toolCallId: 'call-gone', result: { content: 'taken over' } },
      { timeoutMs: DEADLINE_MS },
    );

    expect(answer).toMatchObject({ published: true, finalResult: { content: 'taken over' } });
    expect(controlCalls()).toBe(1);
  });

  it('waits for the lease of a live process of this host, which may be another sidecar', async () => {
    const dir = sharedDir();
    const b = pod(dir, '60s');
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(b.client, receiver.url, 'call-live');
    const live = openSqliteStore(join(dir, 'agenthooks.db'));
    cleanups.push(() => live.close());
    // This test process is alive: its lease must not be taken.
    const holder = `${HERE}/${process.ppid}/0badf00d/1`;
    expect((await live.claimPublication('call-live', holder, 60_000))?.state).toBe('claimed');

    const err = await failure(
      b.client.publishDeferredResult(
        { toolCallId: 'call-live', result: { content: 'too early' } },
        { timeoutMs: SHORT_LEASE_MS },
      ),
    );

    expect(err.code).toBe(Code.DeadlineExceeded);
    expect(controlCalls()).toBe(0);
  });

  it('waits for the lease of a gone process id under the same hostname in another PID namespace', async () => {
    const dir = sharedDir();
    const b = pod(dir, '60s');
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(b.client, receiver.url, 'call-other-ns');
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    const other = openSqliteStore(join(dir, 'agenthooks.db'));
    cleanups.push(() => other.close());
    // Pods on the host network share the node's hostname, not its PID namespace.
    const holder = `${hostname()}:1/${gone}/0badf00d/1`;
    expect((await other.claimPublication('call-other-ns', holder, 60_000))?.state).toBe('claimed');

    const err = await failure(
      b.client.publishDeferredResult(
        { toolCallId: 'call-other-ns', result: { content: 'too early' } },
        { timeoutMs: SHORT_LEASE_MS },
      ),
    );

    expect(err.code).toBe(Code.DeadlineExceeded);
    expect(controlCalls()).toBe(0);
  });

  it('leaves a slow holder that renews its lease alone, however long its control takes', async () => {
    const dir = sharedDir();
    const lease = `${SHORT_LEASE_MS}ms`;
    const [a, b] = [pod(dir, lease), pod(dir, lease)] as [Pod, Pod];
    const hold = await holdingReceiver();
    await parkWithControl(a.client, receiver?.url ?? '', 'call-slow');
    const first = a.client.publishDeferredResult({
      toolCallId: 'call-slow',
      result: { content: 'first' },
    });
    await until('the control was called', () => controlCalls() === 1);
    const duplicate = b.client.publishDeferredResult({
      toolCallId: 'call-slow',
      result: { content: 'duplicate' },
    });

    // Four lease durations: without renewal the duplicate would have taken over.
    await new Promise((resolve) => setTimeout(resolve, SHORT_LEASE_MS * 4));
    expect(controlCalls()).toBe(1);
    hold.release();

    expect(await first).toMatchObject({ published: true });
    expect(await duplicate).toMatchObject({ published: false, finalResult: { content: 'first' } });
    expect(controlCalls()).toBe(1);
  });

  it('answers PARKED_CALL_NOT_FOUND for a call never parked, without waiting', async () => {
    const { client } = pod(sharedDir());

    const err = await failure(
      client.publishDeferredResult({ toolCallId: 'never', result: { content: 'x' } }),
    );

    expect(err.code).toBe(Code.NotFound);
    expect(err.findDetails(ErrorInfoSchema)[0]?.reason).toBe('PARKED_CALL_NOT_FOUND');
  });

  /**
   * The real store of `dir`'s file, with `faults` replacing some of its methods
   * (each gets the real method to call).
   */
  function faultyStore(
    dir: string,
    faults: Partial<Record<keyof ParkStore, (real: (...args: never[]) => unknown) => unknown>>,
  ): OpenedStore {
    const real = openSqliteStore(join(dir, 'agenthooks.db'));
    const store = new Proxy(real, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        const bound = (value as (...args: never[]) => unknown).bind(target);
        const fault = faults[prop as keyof ParkStore];
        return fault === undefined ? bound : fault(bound);
      },
    });
    return { store, shared: false };
  }

  const outage = () => new StoreUnavailableError('STORE_UNAVAILABLE', 'the store is unreachable');

  /** A publication on `b` answers within a fraction of the 30 s lease: nothing holds it back. */
  async function publishesAtOnce(b: Pod, toolCallId: string): Promise<void> {
    const answer = await Promise.race([
      b.client.publishDeferredResult({ toolCallId, result: { content: 'retry' } }),
      new Promise<'held'>((resolve) => setTimeout(() => resolve('held'), 5_000).unref()),
    ]);
    expect(answer).toMatchObject({ published: true, finalResult: { content: 'retry' } });
  }

  /**
   * Parks `toolCallId` on pod A, whose store has `faults`, and has its
   * publication fail UNAVAILABLE there; answers A and a plain pod B on the
   * same file, both with a lease of `lease`.
   */
  async function failedOnA(
    toolCallId: string,
    faults: Parameters<typeof faultyStore>[1],
    options: { lease?: string; write?: (line: string) => void } = {},
  ): Promise<{ a: Pod; b: Pod }> {
    const dir = sharedDir();
    const lease = options.lease ?? '30s';
    const a = pod(dir, lease, { store: faultyStore(dir, faults), write: options.write });
    const b = pod(dir, lease);
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(a.client, receiver.url, toolCallId);
    const err = await failure(
      a.client.publishDeferredResult({ toolCallId, result: { content: 'x' } }),
    );
    expect(err.code).toBe(Code.Unavailable);
    return { a, b };
  }

  it('releases a lease whose claim committed but whose answer was lost, so a retry elsewhere publishes at once', async () => {
    let lost = 0;
    const { b } = await failedOnA('call-lost-claim', {
      // The claim commits, then the connection drops its answer (once).
      claimPublication:
        (real) =>
        async (...args: never[]) => {
          const out = await real(...args);
          if (lost++ === 0) throw outage();
          return out;
        },
    });
    await publishesAtOnce(b, 'call-lost-claim');
  });

  it('keeps releasing a lease the store could not release at once, so a retry elsewhere does not wait for it to lapse', async () => {
    let releases = 0;
    const lines: string[] = [];
    const { b } = await failedOnA(
      'call-outage',
      {
        // The store goes away while the control runs: the write fails, and so do
        // the first two releases; the third, 300 ms later, finds it back.
        publishResult: () => async () => {
          throw outage();
        },
        releasePublication:
          (real) =>
          async (...args: never[]) => {
            if (releases++ < 2) throw outage();
            return real(...args);
          },
      },
      { write: (line) => lines.push(line) },
    );
    await publishesAtOnce(b, 'call-outage');
    expect(releases).toBe(3);
    expect(lines.some((l) => l.includes('cannot release a publication lease'))).toBe(true);
  });

  it("sends a published result's afterToolCall notification when the store fails the first read of its hooks", async () => {
    const dir = sharedDir();
    let published = false;
    let failedReads = 0;
    const faults = {
      publishResult:
        (real: (...args: never[]) => unknown) =>
        async (...args: never[]) => {
          const out = await real(...args);
          published = true;
          return out;
        },
      // After the write, the connection drops once: the notification's read of the hooks fails.
      listHooks:
        (real: (...args: never[]) => unknown) =>
        async (...args: never[]) => {
          if (published && failedReads++ === 0) throw outage();
          return real(...args);
        },
    } as Parameters<typeof faultyStore>[1];
    // Shared, as PostgreSQL is: nothing read is cached, so the notification reads the store.
    const { store } = faultyStore(dir, faults);
    const { client } = pod(dir, '30s', { store: { store, shared: true } });
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    await parkWithControl(client, receiver.url, 'call-notify');
    await client.registerHooks({
      operationId: OPERATION,
      hooks: [
        { id: 'log', type: HookType.AFTER_TOOL_CALL, webhook: { url: `${receiver.url}/log` } },
      ],
    });
    const answer = await client.publishDeferredResult({
      toolCallId: 'call-notify',
      result: { content: 'done' },
    });
    expect(answer.published).toBe(true);
    const [, notified] = await receiver.waitForRequests(2);
    expect(notified?.path).toBe('/log');
    expect(failedReads).toBe(2);
  });

  it('does not retry a release the store refused for a lock (SQLite busy): the lease lapses by itself', async () => {
    let releases = 0;
    const busy = () => new StoreUnavailableError('STORE_LOCKED', 'the database is locked');
    const { b } = await failedOnA(
      'call-busy',
      {
        publishResult: () => async () => {
          throw busy();
        },
        releasePublication: () => async () => {
          releases += 1;
          throw busy();
        },
      },
      { lease: `${SHORT_LEASE_MS}ms` },
    );
    // B takes the lease over once it lapses; retries (100 ms, 300 ms) would have come before.
    expect(
      await b.client.publishDeferredResult({ toolCallId: 'call-busy', result: { content: 'y' } }),
    ).toMatchObject({ published: true });
    expect(releases).toBe(1);
  });

  it('does not report a lost lease when a renewal finds the lease the placeholder write just ended', async () => {
    const dir = sharedDir();
    const path = join(dir, 'agenthooks.db');
    const real = openSqliteStore(path);
    const renewals: Promise<unknown>[] = [];
    // The real store, but every renewal timer due in one lease fires right after the
    // placeholder's write, before the write answers: the race a slow database shows.
    const store = new Proxy(real, {
      get(target, prop) {
        if (prop === 'publishResult') {
          return async (...args: Parameters<typeof real.publishResult>) => {
            const out = await target.publishResult(...args);
            vi.advanceTimersByTime(SHORT_LEASE_MS);
            await Promise.all(renewals);
            return out;
          };
        }
        if (prop === 'renewPublication') {
          return (...args: Parameters<typeof real.renewPublication>) => {
            const renewal = target.renewPublication(...args);
            renewals.push(renewal.catch(() => undefined));
            return renewal;
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const lines: string[] = [];
    const { client } = pod(dir, `${SHORT_LEASE_MS}ms`, {
      store: { store, shared: false },
      write: (line) => lines.push(line),
    });
    receiver = await startReceiver({
      answer: {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: '{"decision":"allow"}',
      },
    });
    await parkWithControl(client, receiver.url, 'call-race');
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const answer = await client.publishDeferredResult({
        toolCallId: 'call-race',
        result: { content: 'done' },
      });
      expect(answer.published).toBe(true);
    } finally {
      vi.useRealTimers();
    }
    expect(lines.filter((l) => l.includes('lease lost'))).toEqual([]);
  });
});
