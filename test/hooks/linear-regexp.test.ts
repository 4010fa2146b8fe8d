/**
 * @module The linear-time matcher engine: JavaScript `RegExp` syntax
 * translated to RE2. Property tests compare its answers with V8's own
 * `RegExp` on generated patterns and inputs, so the translation keeps
 * JavaScript's meaning; the refusals and the linear time are tested directly.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compileLinearRegExp,
  LINEAR_REGEXP_LIMITS,
  NotLinearError,
  TooComplexError,
  translateToRe2,
} from '../../src/hooks/linear-regexp.js';

/** Runs per property: enough to cover the grammar, bounded so the suite stays fast. */
const NUM_RUNS = 500;

/** Characters of generated inputs: ASCII, JavaScript whitespace and line terminators, Latin-1. */
const INPUT_CHARS = [
  'a',
  'b',
  'A',
  '/',
  '_',
  '-',
  '.',
  '1',
  ' ',
  '\t',
  '\n',
  '\r',
  'é',
  '\u00a0',
  '\u2028',
  '\ufeff',
  '{',
  '\\',
];

const input = fc.string({ unit: fc.constantFrom(...INPUT_CHARS), maxLength: 12 });

/** True when V8 compiles `source` without flags. */
function isJs(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}

/**
 * Patterns from a grammar of everything a linear engine can run (no
 * backreferences, no lookaround); `\1` is left out because with a group it
 * is a backreference (it is covered by the arbitrary-source property).
 */
const pattern: fc.Arbitrary<string> = fc
  .letrec((tie) => ({
    atom: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom('a', 'b', 'A', '/', '_', '-', '1', ' ', 'é', ',', '}', ']'),
      fc.constantFrom('\\.', '\\/', '\\-', '\\{', '\\\\', '\\*', '\\$', '\\^', '\\|', '\\('),
      fc.constantFrom('.', '\\d', '\\D', '\\w', '\\W', '\\s', '\\S'),
      fc.constantFrom(
        '\\x41',
        '\\u00e9',
        '\\t',
        '\\n',
        '\\0',
        '\\cJ',
        '\\c',
        '\\a',
        '\\8',
        '\\k',
        '\\p',
        '\\u{2}',
        '\\x4',
      ),
      fc.constantFrom(
        '[]',
        '[^]',
        '[a-c]',
        '[^a]',
        '[\\s]',
        '[^\\S]',
        '[\\d-z]',
        '[-a]',
        '[a-]',
        '[\\b]',
        '[\\c1]',
        '[\\1]',
        '[\\w.]',
        '[é-ñ]',
        '[\\]]',
      ),
      fc.constantFrom('{', '{,2}', 'a{,}', 'x{2'),
      tie('group'),
    ),
    group: fc
      .tuple(fc.constantFrom('(', '(?:'), tie('alternation'))
      .map(([open, inner]) => `${open}${inner})`),
    piece: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom('^', '$', '\\b', '\\B'),
      fc
        .tuple(
          tie('atom') as fc.Arbitrary<string>,
          fc.constantFrom('', '', '*', '+', '?', '{2}', '{1,3}', '{0,}', '*?', '+?', '??', '{2,}?'),
        )
        .map(([a, q]) => `${a}${q}`),
    ),
    sequence: fc
      .array(tie('piece') as fc.Arbitrary<string>, { maxLength: 4 })
      .map((p) => p.join('')),
    alternation: fc
      .array(tie('sequence') as fc.Arbitrary<string>, { minLength: 1, maxLength: 3 })
      .map((s) => s.join('|')),
  }))
  .alternation.filter(isJs);

describe('compileLinearRegExp', () => {
  it('answers like JavaScript RegExp for generated linear patterns and inputs', () => {
    fc.assert(
      fc.property(pattern, fc.array(input, { minLength: 1, maxLength: 5 }), (source, inputs) => {
        let linear: ReturnType<typeof compileLinearRegExp>;
        try {
          linear = compileLinearRegExp(source);
        } catch (e: unknown) {
          // A generated pattern past the program bound is refused by design (tested below).
          if (e instanceof TooComplexError) return;
          throw e;
        }
        const js = new RegExp(source);
        for (const text of inputs)
          expect(linear.test(text), `${source} on ${JSON.stringify(text)}`).toBe(js.test(text));
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('throws only SyntaxError or NotLinearError for arbitrary sources, and agrees with JavaScript when it compiles', () => {
    const source = fc.string({
      unit: fc.constantFrom(...'ab()[]{}?*+|^$\\.-,:=!<>kdswbBux0123489'.split('')),
      maxLength: 16,
    });
    fc.assert(
      fc.property(source, input, (text, sample) => {
        let linear: ReturnType<typeof compileLinearRegExp>;
        try {
          linear = compileLinearRegExp(text);
        } catch (e: unknown) {
          expect(e instanceof SyntaxError || e instanceof NotLinearError).toBe(true);
          return;
        }
        expect(linear.test(sample), `${text} on ${JSON.stringify(sample)}`).toBe(
          new RegExp(text).test(sample),
        );
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it.each([
    ['(a)\\1', 'backreference'],
    ['(?<n>a)\\k<n>', 'backreference'],
    ['(?=a)', 'lookahead'],
    ['(?!a)', 'lookahead'],
    ['(?<=a)b', 'lookbehind'],
    ['(?<!a)b', 'lookbehind'],
    ['\\ud800', 'lone surrogate'],
  ])('refuses %j (%s) with NotLinearError', (source, why) => {
    expect(() => compileLinearRegExp(source)).toThrow(NotLinearError);
    expect(() => compileLinearRegExp(source)).toThrow(why);
  });

  it.each([
    ['a{101}', 'counted repetition'],
    ['a{1,1001}', 'counted repetition'],
    ['a{101,}', 'counted repetition'],
    ['[\\s\\S]{1,1000}[0-9]{5}', 'counted repetition'],
    ['(?:(?:a{10}){10}){4}', 'instructions'],
    ['[\\s\\S]{1,100}[\\s\\S]{1,100}[0-9]{100}', 'instructions'],
    ['(?:ab|cd)*'.repeat(60), 'instructions'],
  ])('refuses %j with TooComplexError (%s)', (source, why) => {
    expect(() => compileLinearRegExp(source)).toThrow(TooComplexError);
    expect(() => compileLinearRegExp(source)).toThrow(why);
  });

  it.each(['^(search|fetch)_.*$', 'mcp__github__.*', 'Bash|Edit', '.*', 'a{100}', '(?:a{10}){10}'])(
    'accepts %j within the limits',
    (source) => {
      const compiled = compileLinearRegExp(source);
      expect(compiled.programSize).toBeLessThanOrEqual(LINEAR_REGEXP_LIMITS.maxProgramSize);
    },
  );

  it('reports an upper bound of the program RE2 builds', () => {
    // 100 class instructions, 99 optional-copy alternations, 5 digits, match and fail.
    expect(compileLinearRegExp('[\\s\\S]{1,100}[0-9]{5}').programSize).toBeGreaterThanOrEqual(206);
    expect(compileLinearRegExp('Bash|Edit').programSize).toBeLessThan(20);
  });

  it('reads \\1 as an octal escape when the pattern has no group, as JavaScript does', () => {
    expect(compileLinearRegExp('\\1').test('\u0001')).toBe(true);
    expect(compileLinearRegExp('[\\1]').test('\u0001')).toBe(true);
  });

  it('throws SyntaxError for what JavaScript refuses', () => {
    expect(() => compileLinearRegExp('(')).toThrow(SyntaxError);
    expect(() => compileLinearRegExp('a**')).toThrow(SyntaxError);
  });

  it('runs a backtracking bomb in time linear in the input', () => {
    // V8 would take 2^10000 steps for this one; RE2 takes one pass.
    const bomb = compileLinearRegExp('(a+)+$');
    const started = performance.now();
    expect(bomb.test(`${'a'.repeat(10_000)}/x`)).toBe(false);
    expect(bomb.test(`${'a'.repeat(100_000)}/x`)).toBe(false);
    expect(bomb.test('a'.repeat(100_000))).toBe(true);
    // A generous bound: the point is that it ends at all.
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe('translateToRe2', () => {
  it('writes groups non-capturing and characters as code point escapes', () => {
    expect(translateToRe2('^fs/(read|write)$')).toBe('^fs\\x{2f}(?:read|write)$');
    expect(translateToRe2('(?<id>x)')).toBe('(?:x)');
  });

  it('keeps JavaScript dot and \\s sets', () => {
    expect(compileLinearRegExp('^.$').test('\u2028')).toBe(false);
    expect(compileLinearRegExp('\\s').test('\u00a0')).toBe(true);
    expect(compileLinearRegExp('\\S').test('\ufeff')).toBe(false);
  });
});
