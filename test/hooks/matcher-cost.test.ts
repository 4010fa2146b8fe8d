/**
 * @module The cost of matchers at their limits. The stall case
 * (`[\s\S]{1,1000}[0-9]{5}` against a 2,000-character name) is refused at
 * registration; realistic matchers are still accepted; and the costliest
 * matcher the limits accept, against the longest tool name allowed, costs
 * a bounded amount of CPU time (measured with `process.cpuUsage`, not wall
 * time, so that a busy machine does not fail the test).
 */
import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { LINEAR_REGEXP_LIMITS } from '../../src/hooks/linear-regexp.js';
import { compileMatcher, MATCHER_CACHE_BYTES, matcherCacheBytes } from '../../src/hooks/matcher.js';
import { MAX_TOOL_NAME_BYTES } from '../../src/hooks/tool-call.js';
import { REASON, validateHooks } from '../../src/hooks/validate.js';

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
});
