/**
 * @module The deferred store on a fake open: calls fail STORE_UNAVAILABLE at
 * once until a ping opens it (one attempt at a time), then go to the opened
 * store; an open that no retry fixes, or that still fails past the deadline,
 * is given up once; closing while an attempt runs closes what it opened.
 */
import { describe, expect, it } from 'vitest';
import { AgentHooksError, StoreUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import {
  type DeferrableStore,
  DeferredStore,
  isRetryableOpenError,
} from '../../src/store/deferred.js';

const logger = createLogger({ write: () => undefined });

/** A stand-in for an opened store: the calls it got, and whether it was closed. */
function fakeStore() {
  const state = { calls: [] as string[], closed: false };
  const store = {
    listHooks: async (operationId: string) => {
      state.calls.push(`listHooks ${operationId}`);
      return { hooks: [], status: 'active' };
    },
    ping: async () => {
      state.calls.push('ping');
    },
    close: async () => {
      state.closed = true;
    },
  } as unknown as DeferrableStore;
  return { store, state };
}

const unreachable = () =>
  new StoreUnavailableError('STORE_UNAVAILABLE', 'cannot open the store: ECONNREFUSED');

/** Resolves with the error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<AgentHooksError> {
  try {
    await promise;
  } catch (e: unknown) {
    return e as AgentHooksError;
  }
  throw new Error('expected a rejection');
}

describe('DeferredStore', () => {
  it('fails calls STORE_UNAVAILABLE without opening, until a ping opens the store; then delegates', async () => {
    const { store, state } = fakeStore();
    let attempts = 0;
    let reachable = false;
    const deferred = new DeferredStore({
      open: async () => {
        attempts += 1;
        if (!reachable) throw unreachable();
        return store;
      },
      onGiveUp: () => {
        throw new Error('must not give up');
      },
      logger,
    });
    const err = await rejection(deferred.listHooks('op-1'));
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(err.reason).toBe('STORE_UNAVAILABLE');
    expect(attempts).toBe(0);
    expect((await rejection(deferred.ping())).reason).toBe('STORE_UNAVAILABLE');
    expect(attempts).toBe(1);
    expect(deferred.opened).toBe(false);

    reachable = true;
    await deferred.ping();
    expect(attempts).toBe(2);
    expect(deferred.opened).toBe(true);
    await deferred.listHooks('op-2');
    await deferred.ping();
    expect(attempts).toBe(2);
    expect(state.calls).toEqual(['ping', 'listHooks op-2', 'ping']);

    await deferred.close();
    expect(state.closed).toBe(true);
    expect((await rejection(deferred.listHooks('op-3'))).reason).toBe('STORE_CLOSED');
  });

  it('runs one open at a time for concurrent pings', async () => {
    const { store } = fakeStore();
    let attempts = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const deferred = new DeferredStore({
      open: async () => {
        attempts += 1;
        await gate;
        return store;
      },
      onGiveUp: () => undefined,
      logger,
    });
    const pings = [deferred.ping(), deferred.ping(), deferred.ping()];
    release();
    await Promise.all(pings);
    expect(attempts).toBe(1);
  });

  it('gives up once on a failure no retry fixes', async () => {
    const gaveUp: unknown[] = [];
    const newer = new StoreUnavailableError('STORE_NEWER_THAN_CODE', 'the schema is newer');
    const deferred = new DeferredStore({
      open: async () => {
        throw newer;
      },
      onGiveUp: (e) => gaveUp.push(e),
      logger,
    });
    await rejection(deferred.ping());
    await rejection(deferred.ping());
    expect(gaveUp).toEqual([newer]);
  });

  it('retries until the deadline, then gives up once', async () => {
    let now = 1_000;
    const gaveUp: unknown[] = [];
    const deferred = new DeferredStore({
      open: async () => {
        throw unreachable();
      },
      deadlineMs: 5_000,
      now: () => now,
      onGiveUp: (e) => gaveUp.push(e),
      logger,
    });
    await rejection(deferred.ping());
    now = 4_999;
    await rejection(deferred.ping());
    expect(gaveUp).toEqual([]);
    now = 5_000;
    await rejection(deferred.ping());
    await rejection(deferred.ping());
    expect(gaveUp).toHaveLength(1);
  });

  it('closes a store that opens while it is being closed', async () => {
    const { store, state } = fakeStore();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const deferred = new DeferredStore({
      open: async () => {
        await gate;
        return store;
      },
      onGiveUp: () => undefined,
      logger,
    });
    const ping = rejection(deferred.ping());
    const closed = deferred.close();
    release();
    await closed;
    expect((await ping).reason).toBe('STORE_CLOSED');
    expect(state.closed).toBe(true);
    expect(deferred.opened).toBe(false);
  });

  it('retries what may clear by itself, and nothing else', () => {
    expect(isRetryableOpenError(unreachable())).toBe(true);
    expect(isRetryableOpenError(new StoreUnavailableError('STORE_LOCKED', 'lock held'))).toBe(true);
    expect(isRetryableOpenError(new StoreUnavailableError('STORE_NEWER_THAN_CODE', 'newer'))).toBe(
      false,
    );
    expect(isRetryableOpenError(new AgentHooksError('internal', 'STORE_INTERNAL', 'bug'))).toBe(
      false,
    );
    expect(isRetryableOpenError(new Error('ECONNREFUSED'))).toBe(false);
  });
});
