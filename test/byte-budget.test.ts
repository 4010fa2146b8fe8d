import { describe, expect, it } from 'vitest';
import { ByteBudget, StreamBytes } from '../src/byte-budget.js';

/** Whether `promise` has settled once the microtasks queued before it have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => {
    done = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

const never = new AbortController().signal;

describe('ByteBudget', () => {
  it('gives one stream a quarter of the budget, and more once it gives bytes back', async () => {
    const budget = new ByteBudget(1000);
    const stream = new StreamBytes(budget);
    expect(await stream.take(200, never)).toBe(true);
    const second = stream.take(100, never);
    // 300 is past the stream's 250.
    expect(await settled(second)).toBe(false);
    stream.release(200);
    expect(await second).toBe(true);
    expect({ held: stream.held, used: budget.used }).toEqual({ held: 100, used: 100 });
  });

  it('lets a stream holding nothing past the limit into a reserve of one share, and no further', async () => {
    const budget = new ByteBudget(400);
    const streams = Array.from({ length: 6 }, () => new StreamBytes(budget));
    for (const s of streams.slice(0, 4)) expect(await s.take(90, never)).toBe(true);
    // 360 + 90 is past the limit of 400, within the reserve up to 500.
    expect(await (streams[4] as StreamBytes).take(90, never)).toBe(true);
    const sixth = (streams[5] as StreamBytes).take(90, never);
    expect(await settled(sixth)).toBe(false);
    (streams[1] as StreamBytes).release(90);
    expect(await sixth).toBe(true);
    expect(budget.used).toBe(450);
  });

  it('lets an event larger than the whole budget go once nothing else is held', async () => {
    const budget = new ByteBudget(100);
    const a = new StreamBytes(budget);
    const b = new StreamBytes(budget);
    expect(await a.take(10, never)).toBe(true);
    const huge = b.take(500, never);
    expect(await settled(huge)).toBe(false);
    a.release(10);
    expect(await huge).toBe(true);
    expect(budget.used).toBe(500);
  });

  it('serves waiting streams in order, but for a stream holding nothing within the reserve', async () => {
    const budget = new ByteBudget(1000);
    const [a, b, c, d, e] = Array.from({ length: 5 }, () => new StreamBytes(budget)) as [
      StreamBytes,
      StreamBytes,
      StreamBytes,
      StreamBytes,
      StreamBytes,
    ];
    for (const s of [b, c, d]) expect(await s.take(250, never)).toBe(true);
    expect(await a.take(200, never)).toBe(true);
    expect(await e.take(40, never)).toBe(true);
    // 990 held: a's next 40 is past the limit, and a waits.
    const large = a.take(40, never);
    expect(await settled(large)).toBe(false);
    // e's next 5 would fit, but e holds some: it waits behind a.
    const small = e.take(5, never);
    expect(await settled(small)).toBe(false);
    // A stream holding nothing goes past both, within the reserve (up to 1,250).
    expect(await new StreamBytes(budget).take(100, never)).toBe(true);
    b.release(250);
    expect(await large).toBe(true);
    expect(await small).toBe(true);
    expect(budget.used).toBe(885);
  });

  it('lets an event larger than the budget in while other streams keep taking small events', async () => {
    const budget = new ByteBudget(1000);
    const small = Array.from({ length: 3 }, () => new StreamBytes(budget));
    for (const s of small) expect(await s.take(100, never)).toBe(true);
    const huge = new StreamBytes(budget).take(1500, never);
    // Each small stream delivers its event and takes the next, again and again:
    // the budget would never be empty for the large one.
    let cycles = 0;
    while (!(await settled(huge))) {
      cycles += 1;
      if (cycles > 100) throw new Error('the large event is passed over forever');
      const s = small[cycles % small.length] as StreamBytes;
      if (s.held === 0) continue;
      s.release(100);
      // Admitted through the reserve while it may pass, else queued behind the large one.
      void s.take(100, never);
    }
    // At most 16 passed it, then the small streams queued behind it until it was in.
    expect(cycles).toBeLessThanOrEqual(16 + small.length + 1);
    expect(budget.used).toBe(1500);
  });

  it('passes over a stream waiting on its own share', async () => {
    const budget = new ByteBudget(1000);
    const a = new StreamBytes(budget);
    expect(await a.take(200, never)).toBe(true);
    const overShare = a.take(100, never);
    // b waits behind a, whose wait is on its own share, not on the limit.
    expect(await new StreamBytes(budget).take(100, never)).toBe(true);
    expect(await settled(overShare)).toBe(false);
  });

  it('lets a waiting stream go, taking nothing, when its signal aborts, and the next one in', async () => {
    const budget = new ByteBudget(100);
    const a = new StreamBytes(budget);
    const b = new StreamBytes(budget);
    expect(await a.take(80, never)).toBe(true);
    expect(await b.take(10, never)).toBe(true);
    const aborter = new AbortController();
    // 140 is past the limit and the reserve (125).
    const first = new StreamBytes(budget).take(50, aborter.signal);
    // b's next fits the limit, but b holds some: it waits behind the first.
    const second = b.take(10, never);
    expect(await settled(second)).toBe(false);
    aborter.abort();
    expect(await first).toBe(false);
    expect(await second).toBe(true);
    expect(budget.used).toBe(100);
  });
});
