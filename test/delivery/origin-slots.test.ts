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
