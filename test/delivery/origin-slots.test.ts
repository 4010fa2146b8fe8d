/** @module Unit tests of the per-origin request slots (`src/delivery/origin-slots.ts`). */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { OriginSlots } from '../../src/delivery/origin-slots.js';

/** A request deadline's signal, as `postWebhook` has one. */
class Signal extends EventEmitter {
  aborted = false;
  abort(): void {
    this.aborted = true;
    this.emit('abort');
  }
}

const A = 'https://a.example';
const B = 'https://b.example';

describe('OriginSlots', () => {
  it('takes up to the limit per origin, each origin on its own', () => {
    const slots = new OriginSlots(2);
    expect([slots.tryTake(A), slots.tryTake(A), slots.tryTake(A)]).toEqual([true, true, false]);
    expect(slots.tryTake(B)).toBe(true);
    expect(slots.usage(A)).toEqual({ taken: 2, waiting: 0 });
  });

  it('hands a released slot to the oldest waiter, and frees the origin when the last is back', async () => {
    const slots = new OriginSlots(1);
    slots.tryTake(A);
    const order: string[] = [];
    const first = slots.wait(A, new Signal()).then((ok) => order.push(`first ${ok}`));
    const second = slots.wait(A, new Signal()).then((ok) => order.push(`second ${ok}`));
    expect(slots.usage(A)).toEqual({ taken: 1, waiting: 2 });
    // A newcomer does not jump the queue while others wait.
    slots.release(A);
    expect(slots.tryTake(A)).toBe(false);
    await first;
    expect(order).toEqual(['first true']);
    slots.release(A);
    await second;
    expect(order).toEqual(['first true', 'second true']);
    slots.release(A);
    expect(slots.usage(A)).toEqual({ taken: 0, waiting: 0 });
    expect(slots.tryTake(A)).toBe(true);
  });

  it('stops a wait when its signal aborts, holding nothing, and skips it on release', async () => {
    const slots = new OriginSlots(1);
    slots.tryTake(A);
    const gone = new Signal();
    const abandoned = slots.wait(A, gone);
    const kept = slots.wait(A, new Signal());
    gone.abort();
    expect(await abandoned).toBe(false);
    expect(slots.usage(A)).toEqual({ taken: 1, waiting: 1 });
    slots.release(A);
    expect(await kept).toBe(true);
    expect(slots.usage(A)).toEqual({ taken: 1, waiting: 0 });
    const late = new Signal();
    late.abort();
    expect(await slots.wait(A, late)).toBe(false);
  });

  it('refuses a limit that is not a positive integer', () => {
    for (const limit of [0, -1, 1.5, Number.NaN]) {
      expect(() => new OriginSlots(limit)).toThrow(RangeError);
    }
  });
});

describe('OriginSlots with many stopped waiters', () => {
  it('grants in arrival order among those still waiting, however many stopped, and frees the origin', async () => {
    const slots = new OriginSlots(1);
    slots.tryTake(A);
    const signals = Array.from({ length: 1_000 }, () => new Signal());
    const granted: number[] = [];
    const waits = signals.map((signal, i) =>
      slots.wait(A, signal).then((ok) => {
        if (ok) granted.push(i);
        return ok;
      }),
    );
    // Every waiter but each hundredth stops, newest first (the order a burst's timeouts fire in reverse).
    for (let i = signals.length - 1; i >= 0; i -= 1) if (i % 100 !== 0) signals[i]?.abort();
    expect(slots.usage(A)).toEqual({ taken: 1, waiting: 10 });
    // While only stopped waiters are left behind the live ones, nobody jumps the queue.
    expect(slots.tryTake(A)).toBe(false);
    for (let n = 0; n < 10; n += 1) {
      slots.release(A);
      await Promise.resolve();
    }
    const answers = await Promise.all(waits);
    expect(answers.filter(Boolean)).toHaveLength(10);
    expect(granted).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
    slots.release(A);
    expect(slots.usage(A)).toEqual({ taken: 0, waiting: 0 });
    expect(slots.tryTake(A)).toBe(true);
  });
});
