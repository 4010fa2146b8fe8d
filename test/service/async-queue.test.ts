/**
 * The outgoing queue of a stream: items come out in order, a close or a
 * failure takes effect after the items queued before it, a failure is
 * answered once, and the owner hears of each take and of the end once.
 */
import { describe, expect, it } from 'vitest';
import { AsyncQueue } from '../../src/service/async-queue.js';

function counting<T>() {
  const seen = { taken: 0, ended: 0 };
  const queue = new AsyncQueue<T>({
    onTake: () => {
      seen.taken += 1;
    },
    onEnd: () => {
      seen.ended += 1;
    },
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
