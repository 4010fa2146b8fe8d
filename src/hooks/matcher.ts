/**
 * @module Tool matchers of hooks. A matcher is an unanchored JavaScript
 * regular expression, compiled without flags, tested against
 * `${identifier}/${apiName}` of a tool event; an absent, empty or `*` matcher
 * matches every event (upstream contract §6, "Matcher").
 */
import { hasReason, InvalidArgumentError } from '../errors.js';

/**
 * Tells whether a hook applies to a tool event, from the event's `identifier`
 * and `apiName`. Either may be `undefined` for events that carry no tool.
 */
export type ToolMatcher = (identifier: string | undefined, apiName: string | undefined) => boolean;

/** Number of compiled matchers kept; the least recently used one is dropped first. */
const MATCHER_CACHE_SIZE = 1_000;

/** Same reason and message as `REASON.INVALID_MATCHER` in `validate.ts`. */
const INVALID_MATCHER_REASON = 'INVALID_MATCHER';
const INVALID_MATCHER_MESSAGE = 'Invalid hook matcher regular expression';

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

  let regexp: RegExp;
  try {
    regexp = new RegExp(matcher);
  } catch (e: unknown) {
    throw new InvalidArgumentError('matcher', INVALID_MATCHER_REASON, INVALID_MATCHER_MESSAGE, {
      cause: e,
    });
  }
  // No `g` or `y` flag, so `test` keeps no `lastIndex` state and one RegExp
  // can be shared by every caller.
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
 * Returns true when `matcher` is accepted: `''`, `'*'`, or a source that
 * compiles as a JavaScript regular expression without flags.
 *
 * @example
 * isValidMatcher('*'); // true
 * isValidMatcher('fs/(read'); // false
 */
export function isValidMatcher(matcher: string): boolean {
  if (isWildcard(matcher)) return true;
  try {
    compileMatcher(matcher);
    return true;
  } catch (e: unknown) {
    if (hasReason(e, INVALID_MATCHER_REASON)) return false;
    throw e;
  }
}
