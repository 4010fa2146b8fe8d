/**
 * @module Tool matchers of hooks. A matcher is an unanchored regular
 * expression in JavaScript syntax, compiled without flags, tested against
 * `${identifier}/${apiName}` of a tool event; an absent, empty or `*` matcher
 * matches every event (upstream contract §6, "Matcher"). Unlike the
 * reference system, matchers run on a linear-time engine (RE2, see
 * `linear-regexp.ts`), so no matcher can stall the sidecar; a pattern that
 * engine cannot run (backreferences, lookaround) is refused with
 * `MATCHER_NOT_LINEAR`, and one over the engine's cost limits (counted
 * repetition over 100, a program over 300 instructions) with
 * `MATCHER_TOO_COMPLEX`. Compiled matchers are cached by source within
 * {@link MATCHER_CACHE_BYTES} of estimated memory.
 */
import { InvalidArgumentError } from '../errors.js';
import {
  compileLinearRegExp,
  LINEAR_REGEXP_LIMITS,
  type LinearRegExp,
  NotLinearError,
  TooComplexError,
} from './linear-regexp.js';

/**
 * Tells whether a hook applies to a tool event, from the event's `identifier`
 * and `apiName`. Either may be `undefined` for events that carry no tool.
 */
export type ToolMatcher = (identifier: string | undefined, apiName: string | undefined) => boolean;

/**
 * Estimated bytes of compiled matchers kept; past it the least recently used
 * ones are dropped first (and compiled again when next used).
 */
export const MATCHER_CACHE_BYTES = 16 * 1024 * 1024;

/**
 * Estimated heap bytes of one RE2 instruction with its share of the parsed
 * pattern, measured on re2js 2.10 (about 260 bytes per instruction retained).
 */
const BYTES_PER_INSTRUCTION = 320;

/** Estimated heap bytes of a compiled matcher besides its instructions and DFA. */
const BYTES_PER_MATCHER = 2 * 1024;

/** Reasons of a matcher that cannot be compiled; part of `REASON` in `validate.ts`. */
export const MATCHER_REASON = {
  /** The matcher does not compile as a JavaScript regular expression. */
  INVALID_MATCHER: 'INVALID_MATCHER',
  /** The matcher is valid JavaScript but needs backtracking (a backreference or lookaround). */
  MATCHER_NOT_LINEAR: 'MATCHER_NOT_LINEAR',
  /** The matcher is over the cost limits: a counted repetition over 100, or a program over 300 instructions. */
  MATCHER_TOO_COMPLEX: 'MATCHER_TOO_COMPLEX',
  /** The operation's distinct matchers together are over {@link MATCHER_BUDGET_PER_OPERATION}. */
  MATCHER_BUDGET_EXCEEDED: 'MATCHER_BUDGET_EXCEEDED',
} as const;

/** Upstream message of {@link MATCHER_REASON}`.INVALID_MATCHER`. */
const INVALID_MATCHER_MESSAGE = 'Invalid hook matcher regular expression';

const MATCHER_NOT_LINEAR_MESSAGE =
  'Hook matcher cannot run on the linear-time engine (backreferences and lookaround are not supported)';

const MATCHER_TOO_COMPLEX_MESSAGE = `Hook matcher is too costly to run: counted repetitions are limited to ${LINEAR_REGEXP_LIMITS.maxRepeatCount} and the compiled program to ${LINEAR_REGEXP_LIMITS.maxProgramSize} instructions, every repetition expanded`;

/** A compiled matcher in the cache, with its estimated size in bytes and its cost. */
interface CacheEntry {
  readonly matcher: ToolMatcher;
  /** Tests a modifying hook's tool name (`toolCall.name`) alone. */
  readonly matchesName: (name: string) => boolean;
  readonly bytes: number;
  readonly cost: number;
  /** {@link placements} when the entry last moved to the young end of the cache. */
  placed: number;
}

/**
 * Cost units of one matcher besides its instructions: the fixed work of a
 * cold compile and search, in instruction equivalents (a realistic matcher
 * costs 25-30 units in all).
 */
export const MATCHER_BASE_COST = 8;

/**
 * Most cost units the distinct matchers of one operation may add up to
 * (instructions, every repetition expanded, plus {@link MATCHER_BASE_COST}
 * each; a matcher used by several hooks counts once). A cold search of the
 * longest tool name costs about 23 microseconds of CPU per unit here, so one
 * operation's matchers cost a decision at most about 20 ms: the per-matcher
 * limits alone would let 1,000 hooks cost seconds.
 */
export const MATCHER_BUDGET_PER_OPERATION = 900;

/** Compiled matchers by source, least recently used first (Map order). */
const cache = new Map<string, CacheEntry>();
/** Sum of the `bytes` of the cache's entries. */
let cachedBytes = 0;
/** Entries placed at the cache's young end so far: the age clock of `CacheEntry.placed`. */
let placements = 0;

/** Matches every event, including events without a tool. */
const matchAll: ToolMatcher = function matchAll() {
  return true;
};

/** Returns true for the matchers that match every event: absent, `''` and `'*'`. */
function isWildcard(matcher: string | undefined): matcher is '' | '*' | undefined {
  return matcher === undefined || matcher === '' || matcher === '*';
}

/**
 * Compiles a hook matcher into a {@link ToolMatcher}. `undefined`, `''` and
 * `'*'` match every event, even one without `identifier` or `apiName`; any
 * other matcher is `new RegExp(matcher)` (no flags, unanchored) tested against
 * `${identifier}/${apiName}`, and never matches an event missing either part.
 * Compiled matchers are cached by source.
 *
 * @throws InvalidArgumentError with field `matcher` and reason
 *   `INVALID_MATCHER` when the source is not a valid JavaScript regular
 *   expression, `MATCHER_NOT_LINEAR` when it needs backtracking, or
 *   `MATCHER_TOO_COMPLEX` when it is over the engine's cost limits.
 * @example
 * const matches = compileMatcher('^fs/readFile$');
 * matches('fs', 'readFile'); // true
 * matches('fs', 'readFileSync'); // false
 */
export function compileMatcher(matcher: string | undefined): ToolMatcher {
  if (isWildcard(matcher)) return matchAll;
  return compiledEntry(matcher).matcher;
}

/**
 * Whether a modifying hook's matcher matches a tool's name (`toolCall.name`),
 * compiled and cached as {@link compileMatcher} does. `undefined`, `''` and
 * `*` match every name.
 *
 * @throws InvalidArgumentError as {@link compileMatcher} does.
 * @example
 * matchesToolName('^search$', 'search'); // true
 */
export function matchesToolName(matcher: string | undefined, name: string): boolean {
  return isWildcard(matcher) || compiledEntry(matcher).matchesName(name);
}

/**
 * Returns the cost units of a matcher (see {@link MATCHER_BUDGET_PER_OPERATION}):
 * 0 for one that matches every event.
 *
 * @throws InvalidArgumentError as {@link compileMatcher} does.
 * @example
 * matcherCost('*'); // 0
 * matcherCost('^(search|fetch)_.*$'); // about 30
 */
export function matcherCost(matcher: string | undefined): number {
  if (isWildcard(matcher)) return 0;
  return compiledEntry(matcher).cost;
}

/** Empties the cache of compiled matchers (they compile again when next used). */
export function clearMatcherCache(): void {
  cache.clear();
  cachedBytes = 0;
}

function compiledEntry(matcher: string): CacheEntry {
  const cached = cache.get(matcher);
  if (cached !== undefined) {
    // Re-insert so that Map order is least recently used first, but only once
    // the entry drifted into the older half: a delete and a set per decision
    // churn the Map's tables, which on Node 20 promotes garbage (see
    // `src/live-slots.ts`).
    if (placements - cached.placed > cache.size / 2) {
      cache.delete(matcher);
      cached.placed = ++placements;
      cache.set(matcher, cached);
    }
    return cached;
  }

  let regexp: LinearRegExp;
  try {
    regexp = compileLinearRegExp(matcher);
  } catch (e: unknown) {
    if (e instanceof NotLinearError) {
      throw new InvalidArgumentError(
        'matcher',
        MATCHER_REASON.MATCHER_NOT_LINEAR,
        MATCHER_NOT_LINEAR_MESSAGE,
        { cause: e },
      );
    }
    if (e instanceof TooComplexError) {
      throw new InvalidArgumentError(
        'matcher',
        MATCHER_REASON.MATCHER_TOO_COMPLEX,
        MATCHER_TOO_COMPLEX_MESSAGE,
        { cause: e },
      );
    }
    throw new InvalidArgumentError(
      'matcher',
      MATCHER_REASON.INVALID_MATCHER,
      INVALID_MATCHER_MESSAGE,
      {
        cause: e,
      },
    );
  }
  // A search keeps no state between calls, so one compiled matcher is shared by every caller.
  // The last answer is remembered: the hooks of one decision that share a matcher test the
  // same tool name, and search it once.
  let lastIdentifier: string | undefined;
  let lastApiName: string | undefined;
  let lastResult = false;
  const compiled: ToolMatcher = function matchTool(identifier, apiName) {
    if (typeof identifier !== 'string' || typeof apiName !== 'string') return false;
    if (identifier === lastIdentifier && apiName === lastApiName) return lastResult;
    const result = regexp.test(`${identifier}/${apiName}`);
    lastIdentifier = identifier;
    lastApiName = apiName;
    lastResult = result;
    return result;
  };

  const bytes = estimatedBytes(matcher, regexp);
  for (const [source, entry] of cache) {
    if (cachedBytes + bytes <= MATCHER_CACHE_BYTES) break;
    cache.delete(source);
    cachedBytes -= entry.bytes;
  }
  const entry: CacheEntry = {
    placed: ++placements,
    matcher: compiled,
    matchesName: (name: string) => regexp.test(name),
    bytes,
    cost: regexp.programSize + MATCHER_BASE_COST,
  };
  cache.set(matcher, entry);
  cachedBytes += bytes;
  return entry;
}

/**
 * An upper estimate of the heap a compiled matcher holds: its source, its
 * program and the most its lazy DFA may keep.
 */
function estimatedBytes(source: string, regexp: LinearRegExp): number {
  return (
    BYTES_PER_MATCHER +
    2 * source.length +
    BYTES_PER_INSTRUCTION * regexp.programSize +
    LINEAR_REGEXP_LIMITS.dfaMemory
  );
}

/**
 * Returns the estimated bytes of the compiled matchers in the cache, never
 * more than {@link MATCHER_CACHE_BYTES}.
 *
 * @example
 * compileMatcher('^fs/');
 * matcherCacheBytes(); // about 20 KiB more than before
 */
export function matcherCacheBytes(): number {
  return cachedBytes;
}

/**
 * Checks a matcher the way registration does: `''`, `'*'`, or a source that
 * compiles as a JavaScript regular expression without flags and runs on the
 * linear-time engine within its cost limits.
 *
 * @throws InvalidArgumentError with field `matcher` and reason
 *   `INVALID_MATCHER`, `MATCHER_NOT_LINEAR` or `MATCHER_TOO_COMPLEX` (see {@link compileMatcher}).
 * @example
 * checkMatcher('^fs/'); // ok
 * checkMatcher('(a)\\1'); // throws MATCHER_NOT_LINEAR
 */
export function checkMatcher(matcher: string): void {
  compileMatcher(matcher);
}

/**
 * Returns true when `matcher` is accepted by {@link checkMatcher}.
 *
 * @example
 * isValidMatcher('*'); // true
 * isValidMatcher('fs/(read'); // false
 * isValidMatcher('(?=fs)'); // false: lookaround cannot run in linear time
 */
export function isValidMatcher(matcher: string): boolean {
  try {
    checkMatcher(matcher);
    return true;
  } catch (e: unknown) {
    if (e instanceof InvalidArgumentError) return false;
    throw e;
  }
}
