/**
 * The sidecar's heap policy: 40% of the live heap as room for a large heap
 * that holds no large requests, at least a fixed room for a small one, more
 * while request bytes are held outside it, never more than V8's own growth.
 */
import { describe, expect, it } from 'vitest';
import {
  EXTERNAL_ROOM_FACTOR,
  growingPercentFor,
  HEAP_GROWING_PERCENT,
  MAX_EXTERNAL_ROOM_BYTES,
  MIN_ROOM_BYTES,
} from '../src/heap-policy.js';

const MB = 2 ** 20;

describe('growingPercentFor', () => {
  it('keeps 40% for a heap whose 40% is more than the least room', () => {
    expect(growingPercentFor(60 * MB, 0)).toBe(HEAP_GROWING_PERCENT);
    expect(growingPercentFor(60 * MB, 2 * MB)).toBe(HEAP_GROWING_PERCENT);
    // A large heap's 40% is room enough for the most the external bytes ask.
    expect(growingPercentFor(70 * MB, 100 * MB)).toBe(HEAP_GROWING_PERCENT);
  });

  it('gives a small heap the least room in bytes, not 40% of little', () => {
    for (const live of [5 * MB, 15 * MB, 29 * MB]) {
      const percent = growingPercentFor(live, 0);
      expect(percent).toBe(Math.ceil((MIN_ROOM_BYTES / live) * 100));
      expect((live * percent) / 100).toBeGreaterThanOrEqual(MIN_ROOM_BYTES);
    }
    expect(growingPercentFor(29 * MB, 0)).toBeGreaterThan(HEAP_GROWING_PERCENT);
    // External bytes that ask for less room than the floor do not lower it.
    expect(growingPercentFor(15 * MB, 4 * MB)).toBe(growingPercentFor(15 * MB, 0));
    // A tiny heap gets V8's largest growth, which is less than the floor.
    expect(growingPercentFor(2 * MB, 0)).toBe(300);
  });

  it('gives a small heap the room the bytes held outside it ask for, up to its bound', () => {
    const live = 15 * MB;
    const external = 9 * MB;
    const percent = growingPercentFor(live, external);
    expect(percent).toBe(Math.ceil(((EXTERNAL_ROOM_FACTOR * external) / live) * 100));
    expect((live * percent) / 100).toBeGreaterThanOrEqual(EXTERNAL_ROOM_FACTOR * external);
    // Bounded: 100 MB outside asks no more room than the bound.
    expect(growingPercentFor(live, 100 * MB)).toBe(
      Math.ceil((MAX_EXTERNAL_ROOM_BYTES / live) * 100),
    );
  });

  it("never passes V8's own largest growth, and keeps 40% for sizes it cannot read", () => {
    expect(growingPercentFor(2 * MB, 100 * MB)).toBe(300);
    expect(growingPercentFor(0, 8 * MB)).toBe(HEAP_GROWING_PERCENT);
    expect(growingPercentFor(Number.NaN, 8 * MB)).toBe(HEAP_GROWING_PERCENT);
    // Unreadable external bytes count as none: the floor's room, not the external bound's.
    expect(growingPercentFor(15 * MB, Number.NaN)).toBe(growingPercentFor(15 * MB, 0));
    expect(growingPercentFor(15 * MB, Number.POSITIVE_INFINITY)).toBe(
      growingPercentFor(15 * MB, 0),
    );
  });
});
