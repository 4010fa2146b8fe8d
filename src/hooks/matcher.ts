/**
 * @module Tool matchers of hooks. A matcher is an unanchored regular
 * expression in JavaScript syntax, compiled without flags, tested against
 * `${identifier}/${apiName}` of a tool event; an absent, empty or `*` matcher
 * matches every event (upstream contract §6, "Matcher"). Unlike the
 * reference system, matchers run on a linear-time engine (RE2, see
 * `linear-regexp.ts`), so no matcher can stall the sidecar; a pattern that
 * engine cannot run (backreferences, lookaround) is refused with
 * `MATCHER_NOT_LINEAR`.
 */
import { InvalidArgumentError } from '../errors.js';
import { compileLinearRegExp, type LinearRegExp, NotLinearError } from './linear-regexp.js';

/**
 * Tells whether a hook applies to a tool event, from the event's `identifier`
 * and `apiName`. Either may be `undefined` for events that carry no tool.
 */
export type ToolMatcher = (identifier: string | undefined, apiName: string | undefined) => boolean;

/** Number of compiled matchers kept; the least recently used one is dropped first. */
const MATCHER_CACHE_SIZE = 1_000;

/** Reasons of a matcher that cannot be compiled; part of `REASON` in `validate.ts`. */
export const MATCHER_REASON = {
  /** The matcher does not compile as a JavaScript regular expression. */
  INVALID_MATCHER: 'INVALID_MATCHER',
  /** The matcher is valid JavaScript but needs backtracking (a backreference or lookaround). */
  MATCHER_NOT_LINEAR: 'MATCHER_NOT_LINEAR',
} as const;

/** Upstream message of {@link MATCHER_REASON}`.INVALID_MATCHER`. */
const INVALID_MATCHER_MESSAGE = 'Invalid hook matcher regular expression';

const MATCHER_NOT_LINEAR_MESSAGE =
  'Hook matcher cannot run on the linear-time engine (backreferences and lookaround are not supported)';

const cache = new Map<string, ToolMatcher>();

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
 * @throws InvalidArgumentError with reason `INVALID_MATCHER` and field
 *   `matcher` when the source is not a valid JavaScript regular expression.
 * @example
 * const matches = compileMatcher('^fs/readFile$');
 * matches('fs', 'readFile'); // true
 * matches('fs', 'readFileSync'); // false
 */
export function compileMatcher(matcher: string | undefined): ToolMatcher {
  if (isWildcard(matcher)) return matchAll;

  const cached = cache.get(matcher);
  if (cached !== undefined) {
    // Re-insert so that Map order is least recently used first.
    cache.delete(matcher);
    cache.set(matcher, cached);
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
  const compiled: ToolMatcher = function matchTool(identifier, apiName) {
    if (typeof identifier !== 'string' || typeof apiName !== 'string') return false;
    return regexp.test(`${identifier}/${apiName}`);
  };

  if (cache.size >= MATCHER_CACHE_SIZE) {
    const oldest = cache.keys().next();
    if (oldest.done !== true) cache.delete(oldest.value);
  }
  cache.set(matcher, compiled);
  return compiled;
}

/**
 * Checks a matcher the way registration does: `''`, `'*'`, or a source that
 * compiles as a JavaScript regular expression without flags and runs on the
 * linear-time engine.
 *
 * @throws InvalidArgumentError with field `matcher` and reason
 *   `INVALID_MATCHER` or `MATCHER_NOT_LINEAR` (see {@link compileMatcher}).
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
