import { readFileSync } from 'node:fs';
import type * as http from 'node:http';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { DispatchRequestSchema } from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  hookClient,
  type LoaderObject,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { eventually, metric } from '../support/observe.js';
import { startReceiver } from '../support/receiver.js';
import { killSidecar, startSidecar } from '../support/sidecar.js';

/** An afterStep event in proto-loader's object form. */
function afterStep(operationId: string, stepIndex: number): LoaderObject {
  const event = create(HookEventSchema, {
    event: { case: 'afterStep', value: { operationId, userId: 'u', stepIndex } },
  });
  return toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event }))
    .event as LoaderObject;
}

/** An afterStep event with a `content` of `bytes` characters, in proto-loader's object form. */
function largeAfterStep(operationId: string, bytes: number): LoaderObject {
  const event = create(HookEventSchema, {
    event: {
      case: 'afterStep',
      value: { operationId, userId: 'u', stepIndex: 1, content: 'x'.repeat(bytes) },
    },
  });
  return toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event }))
    .event as LoaderObject;
}

/** A beforeStep event in proto-loader's object form. */
function beforeStep(operationId: string, stepIndex: number): LoaderObject {
  const event = create(HookEventSchema, {
    event: { case: 'beforeStep', value: { operationId, userId: 'u', stepIndex } },
  });
  return toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event }))
    .event as LoaderObject;
}

/** Resident set size of a process, in bytes, read from /proc. */
function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  return kb * 1024;
}

async function registerAll(client: AnyClient, ops: string[], url: string) {
  for (const op of ops) {
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [{ id: `hook-${op}`, type: 'HOOK_TYPE_AFTER_STEP', webhook: { url } }],
    });
  }
}

/** Writes events, waiting for `drain` when the stream pushes back, and collects every ack. */
async function stream(
  client: AnyClient,
  events: Iterable<[string, LoaderObject]>,
  onWrite?: (accepted: boolean, written: number) => void,
  onAck?: (ack: LoaderObject) => void,
): Promise<LoaderObject[]> {
  const call = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
  const acks: LoaderObject[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on('data', (a: LoaderObject) => {
      acks.push(a);
      onAck?.(a);
    });
    call.on('end', resolve);
    call.on('error', reject);
  });
  let written = 0;
  for (const [eventId, event] of events) {
    const accepted = call.write({ eventId, event });
    written += 1;
    onWrite?.(accepted, written);
    if (!accepted) await new Promise((resolve) => call.once('drain', resolve));
  }
  call.end();
  await done;
  return acks;
}

/**
 * Streams `steps` afterStep events to each of `operations` operations,
 * interleaved (step 0 of every operation, then step 1, ...), and checks
 * that each was acknowledged without error once and that the receiver saw
 * each operation's steps in order.
 */
async function expectPerOperationOrder(operations: number, steps: number): Promise<void> {
  const receiver = await startReceiver();
  const sidecar = await startSidecar();
  const client = hookClient(sidecar.grpc);
  try {
    const ops = Array.from({ length: operations }, (_, i) => `op-stream-${i}`);
    await registerAll(client, ops, `${receiver.url}/steps`);
    function* events(): Generator<[string, LoaderObject]> {
      for (let step = 0; step < steps; step++) {
        for (const op of ops) yield [`${op}/${step}`, afterStep(op, step)];
      }
    }
    const total = operations * steps;
    const acks = await stream(client, events());
    expect(acks).toHaveLength(total);
    expect(acks.filter((a) => a.error)).toEqual([]);
    expect(new Set(acks.map((a) => a.eventId)).size).toBe(total);
    const seen = new Map<string, number[]>();
    for (const r of receiver.requests) {
      const body = r.json as { operationId: string; stepIndex: number };
      seen.set(body.operationId, [...(seen.get(body.operationId) ?? []), body.stepIndex]);
    }
    expect(receiver.requests).toHaveLength(total);
    for (const op of ops) {
      expect(seen.get(op)).toEqual(Array.from({ length: steps }, (_, i) => i));
    }
  } finally {
    client.close();
    await killSidecar(sidecar);
    await receiver.close();
  }
}

describe('DispatchStream', () => {
  it('delivers 10,000 events over 50 operations to the receiver in per-operation order', async () => {
    await expectPerOperationOrder(50, 200);
  }, 120_000);

  // More operations than a stream keeps before it forgets the settled ones (1,024).
  it('keeps per-operation order past the operations a stream remembers (1,100 operations)', async () => {
    await expectPerOperationOrder(1_100, 3);
  }, 120_000);

  // An event no hook matches is acked at once when its operation has nothing
  // pending; behind a pending event of its operation it still waits its turn.
  it("acks an event no hook matches at once, but never ahead of its operation's pending event", async () => {
    const receiver = await startReceiver();
    let held: http.ServerResponse | undefined;
    const arrived = new Promise<void>((resolve) => {
      receiver.respond((_req, res) => {
        held = res;
        resolve();
      });
    });
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      await registerAll(client, ['op-held'], `${receiver.url}/held`);
      const call = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      const acks: string[] = [];
      const waiters: { count: number; resolve: () => void }[] = [];
      call.on('data', (a: LoaderObject) => {
        expect(a.error).toBeFalsy();
        acks.push(a.eventId as string);
        for (const w of waiters) if (acks.length >= w.count) w.resolve();
      });
      const ended = new Promise((resolve, reject) => {
        call.on('end', resolve);
        call.on('error', reject);
      });
      const acked = (count: number) =>
        new Promise<void>((resolve) => {
          if (acks.length >= count) resolve();
          else waiters.push({ count, resolve });
        });

      call.write({ eventId: 'free-0', event: beforeStep('op-free', 0) });
      await acked(1);
      call.write({ eventId: 'held-0', event: afterStep('op-held', 0) });
      await arrived;
      call.write({ eventId: 'held-1', event: beforeStep('op-held', 1) });
      call.write({ eventId: 'free-1', event: beforeStep('op-free', 1) });
      await acked(2);
      expect(acks).toEqual(['free-0', 'free-1']);

      held?.writeHead(204);
      held?.end();
      call.end();
      await ended;
      expect(acks).toEqual(['free-0', 'free-1', 'held-0', 'held-1']);
      expect(receiver.requests).toHaveLength(1);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  }, 60_000);

  it('counts each stream under the status its client got: OK, CANCELLED, DEADLINE_EXCEEDED', async () => {
    // A webhook that never answers: an event delivered to it keeps the stream's work in flight.
    const receiver = await startReceiver();
    receiver.respond(() => undefined);
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    await unary(client, 'RegisterHooks', {
      operationId: 'op-held',
      hooks: [
        { id: 'held', type: 'HOOK_TYPE_BEFORE_STEP', webhook: { url: `${receiver.url}/held` } },
      ],
    });
    const series = (code: string) =>
      `agenthooks_rpc_calls_total{method="DispatchStream",code="${code}"}`;
    /** Opens a stream (a deadline in ms, if any), has one event acked, and says how it ended. */
    const stream = async (end: 'half-close' | 'cancel' | 'deadline') => {
      const call = client.DispatchStream(
        end === 'deadline' ? { deadline: Date.now() + 500 } : {},
      ) as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      const ended = new Promise<string>((resolve) => {
        call.on('error', (e: grpc.ServiceError) => resolve(String(e.code)));
        call.on('end', () => resolve('OK'));
      });
      call.on('data', () => undefined);
      await new Promise<void>((resolve) => {
        call.once('data', () => resolve());
        call.write({ eventId: 'e1', event: beforeStep('op-count', 0) });
      });
      if (end === 'half-close') call.end();
      if (end === 'cancel') {
        // Cancelled while the sidecar still delivers an event of the stream. (A
        // cancel after the sidecar finished is its OK: grpc-js ends the requests
        // before it resets the stream, and the sidecar may answer in between.)
        const arrived = receiver.waitForRequests(1);
        call.write({ eventId: 'e2', event: beforeStep('op-held', 0) });
        await arrived;
        call.cancel();
      }
      return ended;
    };
    try {
      expect(await stream('half-close')).toBe('OK');
      expect(await stream('cancel')).toBe('1');
      // Left open past its deadline: grpc-js ends it.
      expect(await stream('deadline')).toBe('4');
      const counts = () =>
        Promise.all(
          ['OK', 'CANCELLED', 'DEADLINE_EXCEEDED'].map((code) => metric(sidecar, series(code))),
        );
      expect(await eventually(counts, (c) => c.every((n) => n === 1))).toEqual([1, 1, 1]);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('holds at most its share of the byte budget in large events while the receiver stalls', async () => {
    // 1 MB over every stream gives one stream 250 kB: two events of 100 kB,
    // each on its own operation, so only the budget keeps a third back.
    const events = 8;
    const receiver = await startReceiver();
    const held: http.ServerResponse[] = [];
    receiver.respond((_req, res) => {
      held.push(res);
    });
    const sidecar = await startSidecar({ args: ['--stream-max-in-flight-bytes', '1000000'] });
    const client = hookClient(sidecar.grpc);
    const state = async () => ({
      arrived: receiver.requests.length,
      read: await metric(sidecar, 'agenthooks_dispatch_stream_events_in_flight'),
      bytes: await metric(sidecar, 'agenthooks_dispatch_stream_bytes_in_flight'),
    });
    try {
      const ops = Array.from({ length: events }, (_, i) => `op-large-${i}`);
      await registerAll(client, ops, `${receiver.url}/large`);
      // After the large events, a small one of an operation without hooks:
      // acked as soon as it is read, so its ack shows when the stream read it.
      let answered = 0;
      let answeredAtSentinel = -1;
      const acked = stream(
        client,
        [
          ...ops.map((op, i): [string, LoaderObject] => [
            `large-${i}`,
            largeAfterStep(op, 100_000),
          ]),
          ['sentinel', afterStep('op-large-none', 1)],
        ],
        undefined,
        (ack) => {
          if (ack.eventId === 'sentinel') answeredAtSentinel = answered;
        },
      );
      acked.catch(() => {});
      // Before answering the i-th request: two events are at the receiver and
      // a third is read and waits for room (unacked: three), until the last.
      for (let i = 0; i < events; i++) {
        const want = { arrived: Math.min(i + 2, events), read: Math.min(3, events - i) };
        const now = await eventually(
          state,
          (s) => s.arrived === want.arrived && s.read === want.read,
        );
        expect({ arrived: now.arrived, read: now.read }).toEqual(want);
        expect(now.bytes).toBeGreaterThan(Math.min(2, events - i) * 100_000);
        expect(now.bytes).toBeLessThanOrEqual(250_000);
        const res = held.shift() as http.ServerResponse;
        res.writeHead(204);
        res.end();
        answered += 1;
      }
      const acks = await acked;
      expect(acks.map((a) => a.eventId).sort()).toEqual(
        [...ops.map((_, i) => `large-${i}`), 'sentinel'].sort(),
      );
      expect(acks.filter((a) => a.error)).toEqual([]);
      // The stream read the last event only once the receiver had taken all
      // but the two the budget holds: six answers.
      expect(answeredAtSentinel).toBeGreaterThanOrEqual(events - 2);
      expect(await eventually(state, (s) => s.bytes === 0)).toMatchObject({ bytes: 0, read: 0 });
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('shares the byte budget between streams in arrival order, and a stream cancelled while it waits takes nothing', async () => {
    // 200 kB over every stream, and a reserve of 50 kB for streams holding
    // nothing: four events of 60 kB fit, a fifth waits.
    const receiver = await startReceiver();
    const held: http.ServerResponse[] = [];
    receiver.respond((_req, res) => {
      held.push(res);
    });
    const sidecar = await startSidecar({ args: ['--stream-max-in-flight-bytes', '200000'] });
    const client = hookClient(sidecar.grpc);
    const state = async () => ({
      arrived: receiver.requests.length,
      read: await metric(sidecar, 'agenthooks_dispatch_stream_events_in_flight'),
      bytes: await metric(sidecar, 'agenthooks_dispatch_stream_bytes_in_flight'),
    });
    const calls: grpc.ClientDuplexStream<LoaderObject, LoaderObject>[] = [];
    /** Opens a stream that sends one large event of `op` and reads its acks. */
    const open = (op: string) => {
      const call = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      call.on('data', () => {});
      call.on('error', () => {});
      call.write({ eventId: op, event: largeAfterStep(op, 60_000) });
      calls.push(call);
      return call;
    };
    try {
      const ops = Array.from({ length: 6 }, (_, i) => `op-share-${i + 1}`);
      await registerAll(client, ops, `${receiver.url}/share`);
      for (const op of ops.slice(0, 4)) open(op);
      expect(await eventually(state, (s) => s.arrived === 4)).toMatchObject({ arrived: 4 });
      const cancelled = open('op-share-5');
      // Read, and waiting for room: five events in flight, four delivered.
      const waiting = await eventually(state, (s) => s.read === 5);
      expect(waiting).toMatchObject({ read: 5, arrived: 4 });
      expect(waiting.bytes).toBeGreaterThan(4 * 60_000);
      expect(waiting.bytes).toBeLessThanOrEqual(250_000);
      cancelled.cancel();
      expect((await eventually(state, (s) => s.read === 4)).read).toBe(4);
      open('op-share-6');
      expect((await eventually(state, (s) => s.read === 5)).read).toBe(5);
      // The first delivery's answer makes room for one event: the one still waiting.
      const first = held.shift() as http.ServerResponse;
      first.writeHead(204);
      first.end();
      const after = await eventually(state, (s) => s.arrived === 5);
      expect(after.arrived).toBe(5);
      expect(receiver.requests[4]?.json).toMatchObject({ operationId: 'op-share-6' });
      for (const res of held.splice(0)) {
        res.writeHead(204);
        res.end();
      }
      expect(await eventually(state, (s) => s.bytes === 0)).toMatchObject({ bytes: 0 });
      expect(receiver.requests).toHaveLength(5);
    } finally {
      for (const call of calls) call.cancel();
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('stops reading at its bound while its client reads no acks, then acks every event once, in order', async () => {
    const bound = 16;
    const sidecar = await startSidecar({ args: ['--stream-max-in-flight', String(bound)] });
    const client = hookClient(sidecar.grpc);
    try {
      // Known to the sidecar, with no afterStep hook: each event is acked as it is read.
      await unary(client, 'RegisterHooks', {
        operationId: 'op-unread',
        hooks: [
          { id: 'before', type: 'HOOK_TYPE_BEFORE_STEP', webhook: { url: 'http://127.0.0.1:9/' } },
        ],
      });
      const call = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      // Paused before its data listener, so the client reads no ack until it resumes.
      call.pause();
      const acks: string[] = [];
      const done = new Promise<void>((resolve, reject) => {
        call.on('data', (a: LoaderObject) => {
          expect(a.error).toBeFalsy();
          acks.push(a.eventId as string);
        });
        call.on('end', resolve);
        call.on('error', reject);
      });
      const total = 100_000;
      let written = 0;
      // Read while the client writes: once the transport holds all the acks it
      // can, the stream keeps the rest in flight up to its bound, then stops reading.
      const stalled = eventually(
        () => metric(sidecar, 'agenthooks_dispatch_stream_events_in_flight'),
        (n) => n >= bound,
      );
      let writtenAtStall = -1;
      let waitingForDrain = false;
      const stall = { blocked: false, inFlightAfter: -1 };
      void stalled.then(
        async () => {
          // The client fills what the transport still buffers, then waits for room.
          stall.blocked = await eventually(
            () => waitingForDrain,
            (w) => w,
          );
          writtenAtStall = written;
          // Read again: the client's paused call may still take a few acks, never more reads.
          stall.inFlightAfter = await metric(
            sidecar,
            'agenthooks_dispatch_stream_events_in_flight',
          );
          call.resume();
        },
        () => call.resume(),
      );
      for (; written < total; written++) {
        if (call.write({ eventId: String(written), event: afterStep('op-unread', written) })) {
          continue;
        }
        waitingForDrain = true;
        await new Promise((resolve) => call.once('drain', resolve));
        waitingForDrain = false;
      }
      call.end();
      await done;
      // Held at the bound, not past it, and the client pushed back long before
      // its last event (about 30,000 events fit the HTTP/2 windows and buffers).
      expect(await stalled).toBe(bound);
      expect(writtenAtStall).toBeGreaterThan(0);
      expect(writtenAtStall).toBeLessThan(total * 0.6);
      // The client was pushed back: it waited for room that did not come while stalled.
      expect(stall.blocked).toBe(true);
      expect(stall.inFlightAfter).toBeLessThanOrEqual(bound);
      expect(acks).toEqual(Array.from({ length: total }, (_, i) => String(i)));
      expect(await metric(sidecar, 'agenthooks_dispatch_stream_events_in_flight')).toBe(0);
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  }, 120_000);

  it('stops reading at its bound while the receiver stalls, and its memory stays flat over 100,000 events', async () => {
    const bound = 16;
    const receiver = await startReceiver();
    let concurrent = 0;
    let maxConcurrent = 0;
    let stalled = true;
    const held: http.ServerResponse[] = [];
    receiver.respond((_req, res) => {
      concurrent += 1;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      res.on('finish', () => {
        concurrent -= 1;
      });
      if (stalled) held.push(res);
      else {
        res.writeHead(204);
        res.end();
      }
    });
    const sidecar = await startSidecar({ args: ['--stream-max-in-flight', String(bound)] });
    const client = hookClient(sidecar.grpc);
    try {
      const ops = Array.from({ length: 50 }, (_, i) => `op-bound-${i}`);
      await registerAll(client, ops, `${receiver.url}/stall`);
      const total = 100_000;
      function* events(): Generator<[string, LoaderObject]> {
        for (let i = 0; i < total; i++) {
          const op = ops[i % ops.length] as string;
          yield [String(i), afterStep(op, i)];
        }
      }
      let writtenAtFirstPushBack = -1;
      // Idle, after start-up and registration: the baseline growth is measured against.
      const rssBefore = rssOf(sidecar.child.pid as number);
      let rssPeak = 0;
      const acks = await stream(client, events(), (accepted, written) => {
        if (!accepted && writtenAtFirstPushBack < 0) {
          writtenAtFirstPushBack = written;
          // The producer is pushed back while the receiver holds the first requests.
          expect(held.length).toBeLessThanOrEqual(bound);
          stalled = false;
          for (const res of held.splice(0)) {
            res.writeHead(204);
            res.end();
          }
        }
        if (written % 10_000 === 0) rssPeak = Math.max(rssPeak, rssOf(sidecar.child.pid as number));
      });
      expect(acks).toHaveLength(total);
      expect(maxConcurrent).toBeLessThanOrEqual(bound);
      // Pushed back after the bound plus what gRPC's transport buffers (one HTTP/2
      // flow-control window of 64 KiB, about 30 bytes an event here).
      expect(writtenAtFirstPushBack).toBeGreaterThan(0);
      expect(writtenAtFirstPushBack).toBeLessThanOrEqual(bound + 65_536 / 20);
      expect(rssPeak - rssBefore).toBeLessThan(50 * 1024 * 1024);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  }, 300_000);
});
