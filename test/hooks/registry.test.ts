/**
 * @module The hook registry over a real SQLite store: stored hooks are
 * checked against the schema rules as they enter the cache, once per load,
 * and a hook that breaks one fails every read that would run the
 * operation's hooks, while listing and purging still work.
 */
import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema, ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError } from '../../src/errors.js';
import {
  estimateCachedBytes,
  HookRegistry,
  STORED_HOOK_INVALID,
} from '../../src/hooks/registry.js';
import { validateStoredHook } from '../../src/hooks/validate.js';
import { useTempStore } from '../store/helpers.js';

const HOOK_URL = 'https://hooks.example.com/agent';

function notification(id: string): Hook {
  return create(HookSchema, { id, type: HookType.AFTER_STEP, webhook: { url: HOOK_URL } });
}

/** A `beforeToolCall` control that sets `eventFields`, which a control may not. */
function controlWithProjection(id: string): Hook {
  return create(HookSchema, {
    id,
    type: HookType.BEFORE_TOOL_CALL,
    webhook: {
      url: HOOK_URL,
      responseHandling: ResponseHandling.TOOL_CALL,
      eventFields: { names: ['userId'] },
    },
  });
}

/** The default check, counting the hooks it is called for. */
function countingCheck() {
  const checked: string[] = [];
  return {
    checked,
    check(hook: Hook, path: string) {
      checked.push(hook.id);
      validateStoredHook(hook, path);
    },
  };
}

async function rejection(promise: Promise<unknown>): Promise<AgentHooksError> {
  try {
    await promise;
  } catch (e: unknown) {
    if (e instanceof AgentHooksError) return e;
    throw e;
  }
  throw new Error('expected an AgentHooksError, the call resolved');
}

describe('HookRegistry: stored hooks re-validated on read', () => {
  const temp = useTempStore();

  it('checks each stored hook once per load; a cached operation is not checked again', async () => {
    const store = temp.open();
    const { checked, check } = countingCheck();
    const registry = new HookRegistry(store, { checkStoredHook: check });
    await registry.register('op-1', undefined, [notification('a'), notification('b')]);
    expect(checked).toEqual([]);

    for (let i = 0; i < 3; i++) {
      expect((await registry.hooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
    }
    expect(checked).toEqual(['a', 'b']);

    // A registration changes the rows: the next read loads and checks them again.
    await registry.register('op-1', undefined, [notification('c')]);
    await registry.hooksOf('op-1');
    await registry.hooksOf('op-1');
    expect(checked).toEqual(['a', 'b', 'a', 'b', 'c']);

    registry.forget(['op-1']);
    await registry.hooksOf('op-1');
    expect(checked).toEqual(['a', 'b', 'a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('fails hooksOf with STORED_HOOK_INVALID for a stored hook that breaks a rule, checked once', async () => {
    const store = temp.open();
    // As an older version wrote it: the store itself applies no registration rule.
    await store.appendHooks('op-bad', undefined, [
      notification('first'),
      controlWithProjection('guard'),
      notification('never-checked'),
    ]);
    const { checked, check } = countingCheck();
    const registry = new HookRegistry(store, { checkStoredHook: check });

    const errors = [
      await rejection(registry.hooksOf('op-bad')),
      await rejection(registry.hooksOf('op-bad')),
    ];
    for (const error of errors) {
      expect(error.kind).toBe('failed_precondition');
      expect(error.reason).toBe(STORED_HOOK_INVALID);
      expect(error.message).toContain('"op-bad"');
      expect(error.message).toContain('"guard"');
      expect(error.message).toContain('CONTROL_PAYLOAD_OVERRIDE');
      expect(error.metadata).toEqual({
        operationId: 'op-bad',
        hookId: 'guard',
        rule: 'CONTROL_PAYLOAD_OVERRIDE',
        field: 'hooks[1].webhook.eventFields',
      });
    }
    // The first broken hook decides; the second read used the cached verdict.
    expect(checked).toEqual(['first', 'guard']);

    // Listing still shows every stored hook, the broken one included.
    const listed = await registry.storedHooksOf('op-bad');
    expect(listed.hooks.map((h) => h.id)).toEqual(['first', 'guard', 'never-checked']);
    expect(checked).toEqual(['first', 'guard']);

    // Purging removes it, and the operation then reads as it is: no hooks.
    expect(await registry.unregister('op-bad', true)).toBe(3);
    expect((await registry.hooksOf('op-bad')).hooks).toEqual([]);
  });

  it('keeps other operations usable while one has a broken stored hook', async () => {
    const store = temp.open();
    await store.appendHooks('op-bad', undefined, [controlWithProjection('guard')]);
    const registry = new HookRegistry(store);
    await registry.register('op-good', undefined, [notification('a')]);
    expect((await rejection(registry.hooksOf('op-bad'))).reason).toBe(STORED_HOOK_INVALID);
    expect((await registry.hooksOf('op-good')).hooks.map((h) => h.id)).toEqual(['a']);
  });
});

describe('HookRegistry: the bounded cache', () => {
  const temp = useTempStore();

  /** Operations of one small hook the test cache holds. */
  const OPERATIONS = 200;
  /** Bytes of an operation that was never registered: it caches an empty list. */
  const EMPTY = estimateCachedBytes([]);

  it('keeps an operation read between loads of many others cached; an unread one is evicted', async () => {
    const store = temp.open();
    const { checked, check } = countingCheck();
    const registry = new HookRegistry(store, {
      checkStoredHook: check,
      cacheBytes: OPERATIONS * EMPTY,
    });
    await registry.register('op-busy', undefined, [notification('busy')]);
    await registry.register('op-idle', undefined, [notification('idle')]);
    await registry.hooksOf('op-busy');
    await registry.hooksOf('op-idle');

    // Three times the cache's size of other operations pass through it,
    // while op-busy is read after every 100 of them.
    for (let i = 0; i < 3 * OPERATIONS; i++) {
      await registry.hooksOf(`op-${i}`);
      if (i % 20 === 0) await registry.hooksOf('op-busy');
    }
    expect(checked).toEqual(['busy', 'idle']);

    await registry.hooksOf('op-busy');
    await registry.hooksOf('op-idle');
    expect(checked).toEqual(['busy', 'idle', 'idle']);
  });

  it('is bounded by the estimated bytes of its entries, not by how many there are', async () => {
    const store = temp.open();
    const budget = OPERATIONS * EMPTY;
    const registry = new HookRegistry(store, { cacheBytes: budget });
    // Hooks with large header templates: each operation is worth many empty ones.
    const large = (id: string) =>
      create(HookSchema, {
        id,
        type: HookType.AFTER_STEP,
        webhook: { url: HOOK_URL, headers: { 'x-note': 'n'.repeat(2000) } },
      });
    for (let i = 0; i < 20; i++) await registry.register(`op-large-${i}`, undefined, [large('h')]);
    const perLarge = estimateCachedBytes([large('h')]);
    expect(perLarge).toBeGreaterThan(20 * EMPTY);

    for (let i = 0; i < OPERATIONS; i++) await registry.hooksOf(`op-small-${i}`);
    expect(registry.cachedBytes).toBe(OPERATIONS * EMPTY);
    for (let i = 0; i < 20; i++) await registry.hooksOf(`op-large-${i}`);
    expect(registry.cachedBytes).toBeLessThanOrEqual(budget);
    // The large ones pushed out far more small ones than their own number.
    const smallLeft = Array.from({ length: OPERATIONS }, (_, i) => `op-small-${i}`).filter(
      (id) => registry.cachedHooksOf(id) !== undefined,
    ).length;
    const largeKept = Array.from({ length: 20 }, (_, i) => `op-large-${i}`).filter(
      (id) => registry.cachedHooksOf(id) !== undefined,
    ).length;
    expect(largeKept).toBeGreaterThan(0);
    expect(largeKept * perLarge + smallLeft * EMPTY).toBe(registry.cachedBytes);
    expect(smallLeft).toBeLessThan(OPERATIONS - 20);
  });

  it('evicts in placement order after many reloads of one operation', async () => {
    const store = temp.open();
    const registry = new HookRegistry(store, { cacheBytes: 50 * EMPTY });
    await registry.hooksOf('op-first');
    // Each unregister forgets op-hot and each read places it again: thousands
    // of placements while the cache stays far under its budget.
    for (let i = 0; i < 3000; i++) {
      await registry.unregister('op-hot', false);
      await registry.hooksOf('op-hot');
    }
    for (let i = 0; i < 48; i++) await registry.hooksOf(`op-${i}`);
    expect(registry.cachedBytes).toBe(50 * EMPTY);
    await registry.hooksOf('op-48');
    // The oldest placement goes first, then op-hot's last one (a read
    // through cachedHooksOf counts as a use, so only misses are checked).
    expect(registry.cachedHooksOf('op-first')).toBeUndefined();
    await registry.hooksOf('op-49');
    expect(registry.cachedHooksOf('op-hot')).toBeUndefined();
    expect(registry.cachedBytes).toBe(50 * EMPTY);
    expect(registry.cachedHooksOf('op-0')).toBeDefined();
  });

  it('holds a bounded eviction order while misses evict one entry each', async () => {
    const store = temp.open();
    const registry = new HookRegistry(store, { cacheBytes: 10 * EMPTY });
    let most = 0;
    for (let i = 0; i < 5000; i++) {
      await registry.hooksOf(`op-${i}`);
      most = Math.max(most, registry.placementsHeld);
    }
    // Twice the entries (11 with the one just placed) plus the slack of the
    // compaction (1,024), never one per miss.
    expect(most).toBeLessThanOrEqual(2 * 11 + 1024 + 1);
    expect(registry.cachedBytes).toBe(10 * EMPTY);
  });

  it('keeps the entry just loaded even when it alone is over the budget', async () => {
    const store = temp.open();
    const registry = new HookRegistry(store, { cacheBytes: 1 });
    await registry.register('op-1', undefined, [notification('a')]);
    await registry.hooksOf('op-1');
    expect(registry.cachedHooksOf('op-1')?.hooks.map((h) => h.id)).toEqual(['a']);
    await registry.hooksOf('op-2');
    expect(registry.cachedHooksOf('op-1')).toBeUndefined();
    expect(registry.cachedBytes).toBe(EMPTY);
  });

  it('gives back the bytes of what it forgets', async () => {
    const store = temp.open();
    const registry = new HookRegistry(store);
    await registry.register('op-1', undefined, [notification('a'), notification('b')]);
    await registry.hooksOf('op-1');
    await registry.hooksOf('op-2');
    expect(registry.cachedBytes).toBe(
      estimateCachedBytes([notification('a'), notification('b')]) + EMPTY,
    );
    await registry.register('op-1', undefined, [notification('c')]);
    expect(registry.cachedBytes).toBe(EMPTY);
    registry.forget(['op-2']);
    await registry.unregister('op-1', false);
    expect(registry.cachedBytes).toBe(0);
  });
});

describe('HookRegistry: without a cache, over a store other processes write', () => {
  const temp = useTempStore();

  it('sees a registration made through another registry at once', async () => {
    const store = temp.open();
    const writer = new HookRegistry(store, { cache: false });
    const reader = new HookRegistry(store, { cache: false });
    await writer.register('op-1', undefined, [notification('a')]);
    expect((await reader.hooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a']);

    await writer.register('op-1', undefined, [notification('b')]);
    expect((await reader.hooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
    expect((await reader.storedHooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
    expect(reader.cachedHooksOf('op-1')).toBeUndefined();

    await writer.unregister('op-1', true);
    expect((await reader.hooksOf('op-1')).hooks).toEqual([]);
  });

  it('checks the stored hooks on every read instead of once', async () => {
    const store = temp.open();
    const { checked, check } = countingCheck();
    const registry = new HookRegistry(store, { cache: false, checkStoredHook: check });
    await registry.register('op-1', undefined, [notification('a')]);
    await registry.hooksOf('op-1');
    await registry.hooksOf('op-1');
    expect(checked).toEqual(['a', 'a']);
  });

  it('is stale with the default cache, which is why a shared store turns it off', async () => {
    const store = temp.open();
    const writer = new HookRegistry(store);
    const reader = new HookRegistry(store);
    await writer.register('op-1', undefined, [notification('a')]);
    expect((await reader.hooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
    await writer.register('op-1', undefined, [notification('b')]);
    expect((await reader.hooksOf('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
  });
});
