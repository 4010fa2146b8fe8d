/** @module Unit tests of hook tool matchers. */
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../src/errors.js';
import {
  compileMatcher,
  isValidMatcher,
  MATCHER_CACHE_BYTES,
  matcherCacheBytes,
} from '../../src/hooks/matcher.js';
import { REASON } from '../../src/hooks/validate.js';

describe('compileMatcher', () => {
  it.each([
    ['undefined', undefined],
    ['empty', ''],
    ['star', '*'],
  ])('matches every event with a %s matcher, even events without a tool', (_, source) => {
    const matches = compileMatcher(source);
    expect(matches('fs', 'readFile')).toBe(true);
    expect(matches('lobe-web-browsing', 'search')).toBe(true);
    expect(matches(undefined, undefined)).toBe(true);
    expect(matches('fs', undefined)).toBe(true);
  });

  it('tests an unanchored regular expression against identifier/apiName', () => {
    const matches = compileMatcher('readFile');
    expect(matches('fs', 'readFile')).toBe(true);
    expect(matches('fs', 'readFileSync')).toBe(true);
    expect(matches('readFile', 'x')).toBe(true);
    expect(matches('fs', 'writeFile')).toBe(false);
  });

  it('honours anchors around the combined name', () => {
    const matches = compileMatcher('^fs/readFile$');
    expect(matches('fs', 'readFile')).toBe(true);
    expect(matches('fs', 'readFileSync')).toBe(false);
    expect(matches('xfs', 'readFile')).toBe(false);
  });

  it('matches across the slash and supports alternation', () => {
    const matches = compileMatcher('^fs/|/search$');
    expect(matches('fs', 'stat')).toBe(true);
    expect(matches('lobe-web-browsing', 'search')).toBe(true);
    expect(matches('lobe-web-browsing', 'crawl')).toBe(false);
  });

  it('is case-sensitive because it compiles without flags', () => {
    expect(compileMatcher('READFILE')('fs', 'readFile')).toBe(false);
  });

  it('never matches an event without a string identifier and apiName', () => {
    const matches = compileMatcher('.*');
    expect(matches(undefined, undefined)).toBe(false);
    expect(matches('fs', undefined)).toBe(false);
    expect(matches(undefined, 'readFile')).toBe(false);
  });

  it('gives the same answer on repeated calls', () => {
    const matches = compileMatcher('fs/read');
    expect([1, 2, 3].map(() => matches('fs', 'readFile'))).toEqual([true, true, true]);
  });

  it('throws INVALID_MATCHER with the upstream message for an invalid regular expression', () => {
    let error: unknown;
    try {
      compileMatcher('fs/(read');
    } catch (e: unknown) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error).toMatchObject({
      field: 'matcher',
      reason: REASON.INVALID_MATCHER,
      message: 'Invalid hook matcher regular expression',
    });
    expect((error as InvalidArgumentError).cause).toBeInstanceOf(SyntaxError);
  });

  it('reuses a compiled matcher for the same source', () => {
    expect(compileMatcher('^cache/same$')).toBe(compileMatcher('^cache/same$'));
    expect(compileMatcher(undefined)).toBe(compileMatcher('*'));
  });

  it('keeps compiled matchers within the byte budget, dropping the least recently used', () => {
    // Equal-sized entries, costly ones so that the budget fills fast; six digits keep the size equal.
    const big = (i: number) => `[\\s\\S]{1,100}[0-9]{90}${String(i).padStart(6, '0')}`;
    let n = 0;
    const before = matcherCacheBytes();
    compileMatcher(big(n++));
    const entryBytes = matcherCacheBytes() - before;
    const capacity = Math.floor(MATCHER_CACHE_BYTES / entryBytes);
    // More than `capacity` entries: every earlier entry is dropped, so earlier tests do not matter.
    for (let i = 0; i < 2 * capacity; i++) compileMatcher(big(n++));
    expect(matcherCacheBytes()).toBe(capacity * entryBytes);

    const used = compileMatcher(big(900_001));
    const unused = compileMatcher(big(900_002));
    for (let i = 0; i < capacity - 2; i++) compileMatcher(big(n++));
    // Touch `used`, the oldest entry, so that `unused` becomes the least recently used.
    expect(compileMatcher(big(900_001))).toBe(used);
    compileMatcher(big(n++));
    expect(compileMatcher(big(900_001))).toBe(used);
    const recompiled = compileMatcher(big(900_002));
    expect(recompiled).not.toBe(unused);
    expect(recompiled('a', `${'0'.repeat(90)}900002`)).toBe(true);
  });
});

describe('isValidMatcher', () => {
  it.each(['', '*', 'readFile', '^fs/readFile$', 'a{2}', '.*', '(?<id>fs)/read'])(
    'accepts %j',
    (source) => {
      expect(isValidMatcher(source)).toBe(true);
    },
  );

  it.each(['(', 'fs/(read', '[a-', '**', '+x', '(?<a>x)(?<a>y)'])('refuses %j', (source) => {
    expect(isValidMatcher(source)).toBe(false);
  });
});
