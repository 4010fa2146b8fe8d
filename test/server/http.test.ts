import { describe, expect, it } from 'vitest';
import { prepend } from '../../src/server/http.js';

/** An iterator over `values` that records the calls it gets. */
function recording(values: number[]) {
  const calls: string[] = [];
  const it: AsyncIterator<number> = {
    next() {
      calls.push('next');
      const value = values.shift();
      return Promise.resolve(
        value === undefined ? { done: true, value: undefined } : { done: false, value },
      );
    },
    return(value?: unknown) {
      calls.push(`return ${String(value)}`);
      return Promise.resolve({ done: true, value: undefined });
    },
    throw(e?: unknown) {
      calls.push(`throw ${String(e)}`);
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return { it, calls };
}

describe('prepend', () => {
  it('yields the head, then the rest of the iterator', async () => {
    const { it: source } = recording([2, 3]);
    const seen: number[] = [];
    for await (const value of prepend(1, source)) seen.push(value);
    expect(seen).toEqual([1, 2, 3]);
  });

  it('hands return and throw to the iterator at once, before or after the head', async () => {
    const before = recording([2]);
    await prepend(1, before.it).return?.('early');
    expect(before.calls).toEqual(['return early']);

    const after = recording([2, 3]);
    const wrapped = prepend(1, after.it);
    expect(await wrapped.next()).toEqual({ done: false, value: 1 });
    await wrapped.return?.('late');
    expect(after.calls).toEqual(['return late']);

    const thrown = recording([2]);
    const failed = prepend(1, thrown.it);
    await failed.next();
    await failed.throw?.('write failed');
    expect(thrown.calls).toEqual(['throw write failed']);
  });
});
