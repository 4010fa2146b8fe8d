/**
 * The outgoing queue of a stream: items come out in order, a close or a
 * failure takes effect after the items queued before it, a failure is
 * answered once, and the owner hears of each take and of the end once.
 */
import { describe, expect, it } from 'vitest';
import { AsyncQueue } from '../../src/service/async-queue.js';

function counting<T>(takesSink = false) {
  const seen = { taken: 0, ended: 0 };
  const queue = new AsyncQueue<T>({
    onTake: () => {
      seen.taken += 1;
    },
    onEnd: () => {
      seen.ended += 1;
    },
    takesSink,
  });
  return { queue, seen };
}

async function drain<T>(queue: AsyncQueue<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of queue) out.push(item);
  return out;
}

describe('AsyncQueue', () => {
  it('yields queued and later items in order, and ends after close once drained', async () => {
    const { queue, seen } = counting<number>();
    queue.push(1);
    queue.push(2);
    const drained = drain(queue);
    await Promise.resolve();
    queue.push(3);
    queue.close();
    queue.push(4);
    expect(await drained).toEqual([1, 2, 3]);
    expect(seen).toEqual({ taken: 3, ended: 1 });
    expect(await queue.next()).toEqual({ value: undefined, done: true });
    expect(seen.ended).toBe(1);
  });

  it('answers a waiting consumer when an item arrives', async () => {
    const { queue, seen } = counting<string>();
    const next = queue.next();
    queue.push('a');
    expect(await next).toEqual({ value: 'a', done: false });
    expect(seen.taken).toBe(1);
  });

  it('fails after the items queued before the failure, once, then is done', async () => {
    const { queue, seen } = counting<number>();
    queue.push(1);
    queue.fail(new Error('boom'));
    queue.push(2);
    expect(await queue.next()).toEqual({ value: 1, done: false });
    await expect(queue.next()).rejects.toThrow('boom');
    expect(await queue.next()).toEqual({ value: undefined, done: true });
    expect(seen).toEqual({ taken: 1, ended: 1 });
  });

  it('fails a consumer already waiting', async () => {
    const { queue, seen } = counting<number>();
    const next = queue.next();
    queue.fail(new Error('late'));
    await expect(next).rejects.toThrow('late');
    expect(seen.ended).toBe(1);
  });

  it('keeps a failure that comes after close but before the consumer reached the end', async () => {
    const { queue } = counting<number>();
    queue.push(1);
    queue.close();
    queue.fail(new Error('reader failed'));
    await expect(drain(queue)).rejects.toThrow('reader failed');
  });

  it('drops what is queued and ends once when the consumer returns early', async () => {
    const { queue, seen } = counting<number>();
    queue.push(1);
    queue.push(2);
    for await (const item of queue) {
      expect(item).toBe(1);
      break;
    }
    expect(seen).toEqual({ taken: 1, ended: 1 });
    expect(queue.size).toBe(0);
    queue.fail(new Error('ignored'));
    expect(await queue.next()).toEqual({ value: undefined, done: true });
    expect(seen.ended).toBe(1);
  });

  it('ends a next() still waiting when the consumer returns, and refuses a second waiting next()', async () => {
    const { queue, seen } = counting<number>();
    const first = queue.next();
    await expect(queue.next()).rejects.toThrow('another is pending');
    await queue.return();
    expect(await first).toEqual({ value: undefined, done: true });
    expect(seen.ended).toBe(1);
  });

  it('takes back an item not yet taken, and only such an item', async () => {
    const queue = new AsyncQueue<{ n: number }>();
    const [a, b, c] = [{ n: 1 }, { n: 2 }, { n: 3 }];
    queue.push(a);
    queue.push(b);
    queue.push(c);
    expect(queue.remove(b)).toBe(true);
    expect(queue.remove(b)).toBe(false);
    expect(await queue.next()).toEqual({ value: a, done: false });
    expect(queue.remove(a)).toBe(false);
    queue.close();
    expect(await drain(queue)).toEqual([c]);
  });
});

/** A transport's side of a sink: what it was given, a buffer of `room` items, and its drain. */
function transport(room: number) {
  const state = {
    written: [] as number[],
    buffered: 0,
    resume: undefined as ((writable: boolean) => void) | undefined,
  };
  const sink = {
    write(item: number): boolean {
      state.written.push(item);
      state.buffered += 1;
      return state.buffered < room;
    },
    drained(resume: (writable: boolean) => void): void {
      state.resume = resume;
    },
  };
  /** Sends what the transport buffered, then tells the queue once (true: drained). */
  const flush = (writable = true) => {
    state.buffered = 0;
    const resume = state.resume;
    state.resume = undefined;
    resume?.(writable);
  };
  return { sink, state, flush };
}

/** Whether `promise` settled by the time the microtasks queued now have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('AsyncQueue with a sink', () => {
  it('writes an item pushed while its consumer waits at once, and leaves the consumer waiting', async () => {
    const { queue, seen } = counting<number>(true);
    const { sink, state } = transport(10);
    queue.attachSink(sink);
    // Pushed before the consumer waits: taken through next(), as without a sink.
    queue.push(1);
    expect(await queue.next()).toEqual({ value: 1, done: false });
    const waiting = queue.next();
    queue.push(2);
    queue.push(3);
    expect(state.written).toEqual([2, 3]);
    expect(seen.taken).toBe(3);
    expect(await settled(waiting)).toBe(false);
    queue.close();
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(seen.ended).toBe(1);
  });

  it('queues while the transport is full, writes the queue in order once it drains, and ends after it', async () => {
    const { queue, seen } = counting<number>(true);
    const { sink, state, flush } = transport(2);
    queue.attachSink(sink);
    const waiting = queue.next();
    for (let i = 1; i <= 5; i++) queue.push(i);
    // Full after two: the rest wait for the drain, not yet taken.
    expect(state.written).toEqual([1, 2]);
    expect(seen.taken).toBe(2);
    queue.close();
    expect(await settled(waiting)).toBe(false);
    flush();
    expect(state.written).toEqual([1, 2, 3, 4]);
    expect(await settled(waiting)).toBe(false);
    flush();
    expect(state.written).toEqual([1, 2, 3, 4, 5]);
    expect(seen.taken).toBe(5);
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(seen.ended).toBe(1);
  });

  it('fails a waiting consumer only once what queued before the failure was written', async () => {
    const { queue } = counting<number>(true);
    const { sink, state, flush } = transport(1);
    queue.attachSink(sink);
    const waiting = queue.next();
    queue.push(1);
    queue.push(2);
    queue.push(3);
    expect(state.written).toEqual([1]);
    // A failure ends the wait only after the queue: the consumer is not answered yet.
    queue.fail(new Error('gone'));
    expect(await settled(waiting)).toBe(false);
    flush();
    expect(state.written).toEqual([1, 2]);
    flush();
    expect(state.written).toEqual([1, 2, 3]);
    await expect(waiting).rejects.toThrow('gone');
  });

  it('drops what queued when the call ended before it drained', async () => {
    const { queue, seen } = counting<number>(true);
    const { sink, state, flush } = transport(1);
    queue.attachSink(sink);
    const waiting = queue.next();
    queue.push(1);
    queue.push(2);
    queue.close();
    flush(false);
    expect(state.written).toEqual([1]);
    expect(seen.taken).toBe(1);
    expect(await waiting).toEqual({ value: undefined, done: true });
  });

  it('fails the iteration with the error of a write that throws, and writes nothing after it', async () => {
    const { queue } = counting<number>(true);
    const { sink, state, flush } = transport(1);
    let throwing = false;
    queue.attachSink({
      write: (item) => {
        if (throwing) throw new Error('write failed');
        return sink.write(item);
      },
      drained: sink.drained,
    });
    const waiting = queue.next();
    queue.push(1);
    queue.push(2);
    queue.push(3);
    throwing = true;
    flush();
    await expect(waiting).rejects.toThrow('write failed');
    expect(state.written).toEqual([1]);
    queue.push(4);
    expect(await queue.next()).toEqual({ value: undefined, done: true });
  });

  it('takes no sink unless made to, so items it can take back stay in it', async () => {
    const { queue, seen } = counting<number>();
    const { sink, state } = transport(10);
    queue.attachSink(sink);
    const waiting = queue.next();
    queue.push(1);
    expect(await waiting).toEqual({ value: 1, done: false });
    queue.push(2);
    expect(queue.remove(2)).toBe(true);
    expect(state.written).toEqual([]);
    expect(seen.taken).toBe(1);
  });
});
