/**
 * @module `LiveSlots`: the set of in-progress items kept in slots (see
 * `src/live-slots.ts` for why not a `Set`).
 */
import { describe, expect, it } from 'vitest';
import { LiveSlots, type Slotted } from '../src/live-slots.js';

function item(name: string): Slotted & { name: string } {
  return { name, liveSlot: -1 };
}

describe('LiveSlots', () => {
  it('adds, counts, deletes and drains its items, each once', () => {
    const slots = new LiveSlots<ReturnType<typeof item>>();
    const [a, b, c] = [item('a'), item('b'), item('c')];
    slots.add(a);
    slots.add(b);
    slots.add(b);
    expect(slots.size).toBe(2);
    expect(slots.delete(a)).toBe(true);
    expect(slots.delete(a)).toBe(false);
    expect(a.liveSlot).toBe(-1);
    slots.add(c);
    expect(slots.size).toBe(2);
    expect(
      slots
        .drain()
        .map((i) => i.name)
        .sort(),
    ).toEqual(['b', 'c']);
    expect(slots.size).toBe(0);
    expect([b.liveSlot, c.liveSlot]).toEqual([-1, -1]);
  });

  it('reuses a freed slot, so the array grows only to the most items in at once', () => {
    const slots = new LiveSlots<ReturnType<typeof item>>();
    const first = item('first');
    slots.add(first);
    const slot = first.liveSlot;
    slots.delete(first);
    const second = item('second');
    slots.add(second);
    expect(second.liveSlot).toBe(slot);
    for (let n = 0; n < 1_000; n++) {
      const transient = item(`t${n}`);
      slots.add(transient);
      slots.delete(transient);
    }
    const last = item('last');
    slots.add(last);
    expect(last.liveSlot).toBeLessThanOrEqual(1);
  });

  it('does not delete an item of another LiveSlots that sits at the same index', () => {
    const one = new LiveSlots<ReturnType<typeof item>>();
    const two = new LiveSlots<ReturnType<typeof item>>();
    const inOne = item('one');
    const inTwo = item('two');
    one.add(inOne);
    two.add(inTwo);
    expect(one.delete(inTwo)).toBe(false);
    expect(one.size).toBe(1);
    expect(two.size).toBe(1);
  });
});
