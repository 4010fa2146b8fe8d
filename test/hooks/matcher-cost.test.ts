/**
 * @module The cost of matchers at their limits. The stall case
 * (`[\s\S]{1,1000}[0-9]{5}` against a 2,000-character name) is refused at
 * registration; realistic matchers are still accepted; and the costliest
 * matcher the limits accept, against the longest tool name allowed, costs
 * a bounded amount of CPU time (measured with `process.cpuUsage`, not wall
 * time, so that a busy machine does not fail the test).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { afterAll, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { LINEAR_REGEXP_LIMITS } from '../../src/hooks/linear-regexp.js';
import {
  clearMatcherCache,
  compileMatcher,
  MATCHER_BUDGET_PER_OPERATION,
  MATCHER_CACHE_BYTES,
  matcherCacheBytes,
  matcherCost,
} from '../../src/hooks/matcher.js';
import { DEFAULT_MAX_HOOKS_PER_OPERATION, HookRegistry } from '../../src/hooks/registry.js';
import { MAX_TOOL_NAME_BYTES } from '../../src/hooks/tool-call.js';
import { REASON, validateHooks } from '../../src/hooks/validate.js';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite.js';

const folders: string[] = [];
const stores: SqliteStore[] = [];

afterAll(async () => {
  for (const store of stores) await store.close();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** A store on a fresh file in a temp folder, closed and removed after the tests. */
function openTempStore(): SqliteStore {
  const folder = mkdtempSync(join(tmpdir(), 'agenthooks-matcher-cost-'));
  folders.push(folder);
  const store = openSqliteStore(join(folder, 'agenthooks.db'));
  stores.push(store);
  return store;
}

function toolHooks(matchers: readonly string[]) {
  return matchers.map((matcher, i) =>
    create(HookSchema, { id: `h${i}`, type: HookType.BEFORE_TOOL_CALL, handler: true, matcher }),
  );
}

/** CPU time of this process (user and system) in milliseconds. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1_000;
}

/**
 * The costliest matcher shape the limits accept: 100 optional copies of any
 * character, then digits up to the program size, with a distinct 3-digit
 * tail. On a name without digits every copy stays alive at every character.
 */
function costliest(i: number): string {
  return `[\\s\\S]{1,${LINEAR_REGEXP_LIMITS.maxRepeatCount}}[0-9]{95}${String(i).padStart(3, '0')}`;
}

describe('matcher cost limits', () => {
  it('refuses the stall case of the issue at registration with MATCHER_TOO_COMPLEX', () => {
    expect(() => validateHooks(toolHooks(['Bash', '[\\s\\S]{1,1000}[0-9]{5}']))).toThrow(
      expect.objectContaining({ reason: REASON.MATCHER_TOO_COMPLEX, field: 'hooks[1].matcher' }),
    );
  });

  it('accepts realistic tool matchers', () => {
    expect(() =>
      validateHooks(
        toolHooks(['^(search|fetch)_.*$', 'mcp__github__.*', 'Bash|Edit', '.*', '*', '']),
      ),
    ).not.toThrow();
  });

  it('accepts the costliest test matcher, which sits at the program size limit', () => {
    expect(() => validateHooks(toolHooks([costliest(999)]))).not.toThrow();
    // One more digit is over the limit.
    expect(() => validateHooks(toolHooks([`${costliest(999)}0`]))).toThrow(
      expect.objectContaining({ reason: REASON.MATCHER_TOO_COMPLEX }),
    );
  });

  it('compiles and runs the costliest matchers on the longest names in bounded CPU time and memory', () => {
    const longest = 'a'.repeat(MAX_TOOL_NAME_BYTES);
    // Warm the JIT on other matchers, so that the measure is of matching, not of compiling re2js.
    for (let i = 0; i < 20; i++) compileMatcher(`warm${i}[\\s\\S]{1,50}`)(longest, longest);
    const count = 20;
    const started = cpuMs();
    for (let i = 0; i < count; i++) {
      expect(compileMatcher(costliest(i))(longest, longest)).toBe(false);
    }
    const perMatcher = (cpuMs() - started) / count;
    // Measured about 7 ms per matcher on a loaded 2-core machine, against 330 ms for the case.
    expect(perMatcher).toBeLessThan(25);
    expect(matcherCacheBytes()).toBeLessThanOrEqual(MATCHER_CACHE_BYTES);
  });

  it('keeps the budget when two registries on one file register at once (two processes)', async () => {
    const store = openTempStore();
    // Two registries: each checks the budget against what it read, then the
    // store checks it again under the append's lock, as on two pods.
    const a = new HookRegistry(store);
    const b = new HookRegistry(store);
    const fit = Math.floor(MATCHER_BUDGET_PER_OPERATION / matcherCost(costliest(0)));
    const batch = (from: number, count: number) =>
      toolHooks(Array.from({ length: count }, (_, i) => costliest(from + i)));
    // Each batch fits alone on the empty operation; both together do not.
    const half = Math.ceil((fit + 1) / 2);
    const results = await Promise.allSettled([
      a.register('race-op', undefined, batch(0, half)),
      b.register('race-op', undefined, batch(100, half)),
    ]);
    const refused = results.filter((r) => r.status === 'rejected');
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({
      reason: 'MATCHER_BUDGET_EXCEEDED',
      field: 'hooks',
    });
    expect((await store.listHooks('race-op')).hooks).toHaveLength(half);
  });

  it('refuses matchers past the operation budget, and counts a matcher shared by hooks once', async () => {
    const registry = new HookRegistry(openTempStore());
    let accepted = 0;
    let refused: unknown;
    for (let i = 0; refused === undefined && i < 100; i++) {
      await registry.register('budget-op', undefined, toolHooks([costliest(i)])).then(
        () => {
          accepted += 1;
        },
        (e: unknown) => {
          refused = e;
        },
      );
    }
    expect(accepted).toBe(Math.floor(MATCHER_BUDGET_PER_OPERATION / matcherCost(costliest(0))));
    expect(refused).toMatchObject({ reason: 'MATCHER_BUDGET_EXCEEDED', field: 'hooks' });
    // Hooks that reuse a registered matcher add nothing to the budget.
    await expect(
      registry.register('budget-op', undefined, toolHooks([costliest(0), costliest(1)])),
    ).resolves.toBe(accepted + 2);
  });

  it('keeps the worst registrable decision within 50 ms of CPU and 64 MB', async () => {
    const registry = new HookRegistry(openTempStore());
    // The worst an operation can register: distinct costliest matchers up to the budget,
    // then the rest of the hook limit reusing them.
    const distinct: string[] = [];
    for (let i = 0; ; i++) {
      const ok = await registry.register('worst-op', undefined, toolHooks([costliest(i)])).then(
        () => true,
        () => false,
      );
      if (!ok) break;
      distinct.push(costliest(i));
    }
    const fill = Array.from(
      { length: DEFAULT_MAX_HOOKS_PER_OPERATION - distinct.length },
      (_, i) => distinct[i % distinct.length] as string,
    );
    for (let at = 0; at < fill.length; at += 100) {
      await registry.register('worst-op', undefined, toolHooks(fill.slice(at, at + 100)));
    }
    const { hooks } = await registry.hooksOf('worst-op');
    expect(hooks).toHaveLength(DEFAULT_MAX_HOOKS_PER_OPERATION);
    // The longest names allowed, with no digit, so that every copy of `[\s\S]` stays alive.
    const identifier = 'a'.repeat(MAX_TOOL_NAME_BYTES);
    const apiName = 'b'.repeat(MAX_TOOL_NAME_BYTES);
    // Warm the JIT on other matchers, then start from a cold matcher cache, as a fresh process would.
    for (let i = 0; i < 20; i++) compileMatcher(`warm${i}[\\s\\S]{1,50}`)(identifier, apiName);
    clearMatcherCache();
    const heapBefore = process.memoryUsage().heapUsed;
    const started = cpuMs();
    let matched = 0;
    for (const hook of hooks) if (compileMatcher(hook.matcher)(identifier, apiName)) matched += 1;
    const spent = cpuMs() - started;
    const grown = process.memoryUsage().heapUsed - heapBefore;
    expect(matched).toBe(0);
    expect(spent).toBeLessThanOrEqual(50);
    expect(grown).toBeLessThanOrEqual(64 * 1024 * 1024);
  });
});
