/**
 * @module The plain signal of unary gRPC calls (`src/server/call-signal.ts`):
 * the parts of `AbortSignal` that handler code uses behave as on a real one.
 */
import { describe, expect, it } from 'vitest';
import { CallSignal } from '../../src/server/call-signal.js';

describe('CallSignal', () => {
  it('is not aborted until abort(), then keeps the first reason', () => {
    const signal = new CallSignal();
    expect(signal.aborted).toBe(false);
    expect(() => signal.throwIfAborted()).not.toThrow();
    const first = new Error('first');
    signal.abort(first);
    signal.abort(new Error('second'));
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(first);
    expect(() => signal.throwIfAborted()).toThrow(first);
  });

  it('calls onabort, then each listener once, in order, with an abort event', () => {
    const signal = new CallSignal();
    const calls: string[] = [];
    const a = function (this: unknown, event: Event) {
      calls.push(`a:${event.type}:${this === signal.asAbortSignal()}`);
    };
    signal.onabort = () => calls.push('onabort');
    signal.addEventListener('abort', a);
    signal.addEventListener('abort', a);
    signal.addEventListener('abort', { handleEvent: (event) => calls.push(`b:${event.type}`) });
    signal.addEventListener('other', () => calls.push('other'));
    signal.abort('stop');
    signal.abort('again');
    expect(calls).toEqual(['onabort', 'a:abort:true', 'b:abort']);
  });

  it('does not call a removed listener, nor one added after the abort', () => {
    const signal = new CallSignal();
    const calls: string[] = [];
    const removed = () => calls.push('removed');
    signal.addEventListener('abort', removed);
    signal.removeEventListener('abort', removed);
    signal.abort('stop');
    signal.addEventListener('abort', () => calls.push('late'));
    expect(calls).toEqual([]);
  });
});
