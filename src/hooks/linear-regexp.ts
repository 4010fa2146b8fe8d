/**
 * @module JavaScript regular expressions on a linear-time engine. A hook
 * matcher is written in JavaScript `RegExp` syntax (no flags, Annex B rules,
 * as `new RegExp(source)` takes it) and runs on `re2js`, a pure-JavaScript
 * port of RE2, whose matching time is linear in the input: no pattern can
 * make a search backtrack exponentially and stall the sidecar.
 *
 * {@link translateToRe2} rewrites a valid JavaScript source into RE2 syntax
 * with the same meaning for a search: every character is written as a code
 * point escape, `.` and `\s` keep their JavaScript sets, groups become
 * non-capturing (a search needs no captures), and Annex B forms (legacy
 * octal escapes, identity escapes, a literal `{`, `[]` and `[^]`) become
 * their plain equivalents. Constructs RE2 cannot run in linear time —
 * backreferences (`\1`, `\k<name>`) and lookaround (`(?=`, `(?!`, `(?<=`,
 * `(?<!`) — throw a {@link NotLinearError}. One known difference: RE2 reads
 * the input by code point, so an astral character (an emoji) is one
 * character to `.` and to quantifiers, where JavaScript without the `u` flag
 * sees two UTF-16 code units.
 *
 * Linear time is not cheap time: RE2 expands a counted repetition into
 * copies of its operand, and a search costs up to the program size for each
 * input character. So the translation also estimates the size of the program
 * RE2 will build, and a pattern whose counted repetition or program is over
 * {@link LINEAR_REGEXP_LIMITS} throws a {@link TooComplexError} before RE2
 * builds anything. The search keeps a lazy DFA whose memory is capped at
 * {@link LINEAR_REGEXP_LIMITS}`.dfaMemory` bytes; past it RE2 starts the
 * cache again or falls back to its NFA, still in linear time.
 */
import { RE2Set } from 're2js';

/** Why a valid JavaScript pattern cannot run on the linear-time engine. */
export class NotLinearError extends Error {
  override readonly name = 'NotLinearError';
}

/** Why a pattern the linear-time engine could run is refused as too costly; see {@link LINEAR_REGEXP_LIMITS}. */
export class TooComplexError extends Error {
  override readonly name = 'TooComplexError';
}

/**
 * Cost limits of a pattern. With them, one search of an input of n
 * characters builds at most about `maxProgramSize` × n DFA steps and holds
 * at most `dfaMemory` bytes of DFA states, however the pattern is written.
 */
export const LINEAR_REGEXP_LIMITS = Object.freeze({
  /** Largest bound of a counted repetition (`{n}`, `{n,}`, `{n,m}`). */
  maxRepeatCount: 100,
  /**
   * Largest program, in RE2 instructions, with every counted repetition
   * expanded (so nested counts multiply); `^(search|fetch)_.*$` takes 23.
   */
  maxProgramSize: 300,
  /** Bytes of DFA states one compiled pattern may keep between searches. */
  dfaMemory: 16 * 1024,
});

/** A compiled linear-time regular expression; `test` searches anywhere in the input. */
export interface LinearRegExp {
  /** Returns true when the pattern matches some part of `input`. */
  test(input: string): boolean;
  /** Instructions in the compiled RE2 program, a measure of the cost of a search. */
  readonly programSize: number;
}

/** Instructions RE2 adds to every program: the match and the fail instruction. */
const PROGRAM_OVERHEAD = 2;

/** JavaScript's `\s`: WhiteSpace and LineTerminator code points (ECMA-262 §22.2.2.9), as ranges. */
const JS_WHITESPACE: readonly (readonly [number, number])[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
];

/** Largest Unicode code point. */
const MAX_CODE_POINT = 0x10ffff;

/** The first and last code point of the UTF-16 surrogate range, which RE2 cannot match. */
const SURROGATE_FIRST = 0xd800;
const SURROGATE_LAST = 0xdfff;
const LOW_SURROGATE_FIRST = 0xdc00;

/** The first code point outside the Basic Multilingual Plane (two UTF-16 code units). */
const FIRST_ASTRAL = 0x10000;

/** Code points the translation writes by number. */
const BACKSPACE = 0x08;
const HYPHEN = 0x2d;
const BACKSLASH = 0x5c;
const LETTER_U = 0x75;
const LEFT_BRACE = 0x7b;

/** Largest value of a legacy octal escape (`\377`). */
const MAX_OCTAL_ESCAPE = 0o377;

/** Code points outside JavaScript's `\s`, as ranges. */
const JS_NON_WHITESPACE = complement(JS_WHITESPACE);

/** `.` without the `s` flag: anything but a line terminator. */
const JS_DOT = '[^\\x{a}\\x{d}\\x{2028}\\x{2029}]';

/** `[^]`: any code point. */
const ANY = `[\\x{0}-\\x{${MAX_CODE_POINT.toString(16)}}]`;

/** `[]`: no code point. */
const NOTHING = `[^\\x{0}-\\x{${MAX_CODE_POINT.toString(16)}}]`;

/** A braced quantifier: `{n}`, `{n,}` or `{n,m}`; anything else starting with `{` is a literal. */
const BRACED_QUANTIFIER = /^\{\d+(?:,\d*)?\}/;

/** Simple escapes with a fixed code point: `\t \n \v \f \r`. */
const CONTROL_ESCAPES: Readonly<Record<string, number>> = { t: 9, n: 10, v: 11, f: 12, r: 13 };

/** Class escapes RE2 writes the same way, with the same (ASCII) sets. */
const SAME_CLASS_ESCAPES = new Set(['d', 'D', 'w', 'W']);

/** A character class atom: one code point, or a set written as RE2 class content. */
type ClassAtom = { readonly cp: number } | { readonly set: string };

/**
 * Compiles a JavaScript `RegExp` source (no flags) to a linear-time matcher.
 *
 * @throws SyntaxError when `source` is not a valid JavaScript regular expression.
 * @throws NotLinearError when it is valid but uses a backreference or
 *   lookaround, or RE2 refuses the translation.
 * @throws TooComplexError when a counted repetition or the program is over
 *   {@link LINEAR_REGEXP_LIMITS}.
 * @example
 * compileLinearRegExp('(a+)+$').test(`${'a'.repeat(10_000)}/x`); // false, in linear time
 * compileLinearRegExp('[\\s\\S]{1,1000}'); // throws TooComplexError
 */
export function compileLinearRegExp(source: string): LinearRegExp {
  // Validates the JavaScript syntax; the RegExp is never run.
  new RegExp(source);
  const { re2, programSize: estimate } = new Translator(source).translateWithSize();
  const set = new RE2Set(RE2Set.UNANCHORED, 0, LINEAR_REGEXP_LIMITS.dfaMemory);
  try {
    set.add(re2);
    set.compile();
  } catch (e: unknown) {
    throw new NotLinearError(`the linear-time engine refuses the pattern: ${errorText(e)}`, {
      cause: e,
    });
  }
  // The estimate bounds what RE2 builds; this checks the program itself.
  const programSize = Math.max(estimate, (set as unknown as CompiledSet).prog.numInst());
  checkProgramSize(programSize);
  return {
    programSize,
    test(input: string): boolean {
      return set.match(input).length > 0;
    },
  };
}

/** The compiled program of an `RE2Set`, which `re2js` keeps but does not type. */
interface CompiledSet {
  readonly prog: { numInst(): number };
}

/**
 * Translates a valid JavaScript `RegExp` source (no flags) into RE2 syntax
 * with the same search semantics; see the module comment.
 *
 * @throws NotLinearError for a backreference, lookaround or lone surrogate.
 * @throws TooComplexError when a counted repetition or the program is over
 *   {@link LINEAR_REGEXP_LIMITS}.
 * @example
 * translateToRe2('^fs/(read|write)$'); // '^fs\\x{2f}(?:read|write)$'
 */
export function translateToRe2(source: string): string {
  return new Translator(source).translateWithSize().re2;
}

function checkProgramSize(size: number): void {
  if (size > LINEAR_REGEXP_LIMITS.maxProgramSize) {
    throw new TooComplexError(
      `the pattern compiles to more than ${LINEAR_REGEXP_LIMITS.maxProgramSize} instructions`,
    );
  }
}

/**
 * The program size of one group level while translating: the size so far
 * (alternatives and their `|` included) and the size of the last atom, which
 * a following quantifier repeats.
 */
interface SizeFrame {
  size: number;
  last: number;
}

/** One pass over a JavaScript pattern, writing RE2 syntax. */
class Translator {
  readonly #src: string;
  readonly #groupCount: number;
  readonly #hasNamedGroups: boolean;
  #i = 0;
  #out = '';
  /** One frame per open group, the pattern itself at the bottom. */
  readonly #frames: SizeFrame[] = [{ size: 0, last: 0 }];
  /** True right after a quantifier, where `?` makes it lazy instead of repeating. */
  #quantified = false;

  constructor(source: string) {
    this.#src = source;
    const groups = countGroups(source);
    this.#groupCount = groups.count;
    this.#hasNamedGroups = groups.named;
  }

  /** Translates the pattern and estimates the RE2 program size, every repeat expanded. */
  translateWithSize(): { re2: string; programSize: number } {
    const re2 = this.#translate();
    return { re2, programSize: (this.#frames[0] as SizeFrame).size + PROGRAM_OVERHEAD };
  }

  #translate(): string {
    const src = this.#src;
    while (this.#i < src.length) {
      const ch = src[this.#i] as string;
      const atomStart = this.#out.length;
      const wasQuantified = this.#quantified;
      this.#quantified = false;
      switch (ch) {
        case '\\':
          this.#escape();
          break;
        case '.':
          this.#out += JS_DOT;
          this.#i += 1;
          break;
        case '^':
        case '$':
        case '|':
        case ')':
        case '*':
        case '+':
        case '?':
          // Same meaning in RE2 without flags; `?` after a quantifier makes it lazy in both.
          this.#out += ch;
          this.#i += 1;
          if (ch === '|') this.#alternative();
          else if (ch === ')') this.#closeGroup();
          else if (ch === '^' || ch === '$') this.#atom(1);
          else if (!(ch === '?' && wasQuantified)) this.#repeat(1, ch === '+' ? 1 : 0);
          break;
        case '(':
          this.#group();
          this.#frames.push({ size: 0, last: 0 });
          break;
        case '[':
          this.#class();
          break;
        case '{': {
          const quantifier = BRACED_QUANTIFIER.exec(src.slice(this.#i))?.[0];
          if (quantifier !== undefined) {
            this.#out += quantifier;
            this.#i += quantifier.length;
            this.#bracedRepeat(quantifier);
          } else {
            // Annex B: a `{` that does not start a quantifier is a literal.
            this.#out += literal(LEFT_BRACE);
            this.#i += 1;
          }
          break;
        }
        default: {
          const cp = this.#codePoint();
          this.#out += literal(cp);
        }
      }
      // Characters, classes, `.` and escapes: one instruction each in RE2.
      if (
        ch !== '(' &&
        !'^$|)*+?'.includes(ch) &&
        !this.#quantified &&
        this.#out.length > atomStart
      ) {
        this.#atom(1);
      }
    }
    return this.#out;
  }

  /** The current group's frame. */
  #frame(): SizeFrame {
    return this.#frames[this.#frames.length - 1] as SizeFrame;
  }

  /** Adds an atom of `size` instructions to the current sequence. */
  #atom(size: number): void {
    const frame = this.#frame();
    frame.size += size;
    frame.last = size;
    checkProgramSize(frame.size);
  }

  /** `|`: one more alternation instruction, and nothing for a quantifier to repeat. */
  #alternative(): void {
    const frame = this.#frame();
    frame.size += 1;
    frame.last = 0;
  }

  /** `)`: the group becomes one atom of its parent. */
  #closeGroup(): void {
    const group = this.#frames.pop() as SizeFrame;
    this.#atom(group.size);
  }

  /**
   * A quantifier on the last atom: RE2 writes `x{n,m}` as n copies of x
   * and m - n optional ones (one alternation each), `x{n,}` as n copies and
   * a star, and `*`, `+`, `?` as x and one alternation.
   */
  #repeat(copies: number, alternations: number): void {
    const frame = this.#frame();
    const repeated = frame.last * Math.max(copies, 1) + Math.max(alternations, 1);
    frame.size += repeated - frame.last;
    frame.last = repeated;
    this.#quantified = true;
    checkProgramSize(frame.size);
  }

  /** `{n}`, `{n,}` or `{n,m}`: checks the counts, then sizes the repeat. */
  #bracedRepeat(quantifier: string): void {
    const [min, max] = quantifier
      .slice(1, -1)
      .split(',')
      .map((n) => (n === '' ? undefined : Number(n)));
    const unbounded = quantifier.includes(',') && max === undefined;
    const low = min as number;
    const high = unbounded ? low + 1 : (max ?? low);
    if (low > LINEAR_REGEXP_LIMITS.maxRepeatCount || high > LINEAR_REGEXP_LIMITS.maxRepeatCount) {
      throw new TooComplexError(
        `a counted repetition is over ${LINEAR_REGEXP_LIMITS.maxRepeatCount}`,
      );
    }
    this.#repeat(high, high - low);
  }

  /** Reads one source code point (a surrogate pair counts as one) and moves past it. */
  #codePoint(): number {
    const cp = this.#src.codePointAt(this.#i) as number;
    if (cp >= SURROGATE_FIRST && cp <= SURROGATE_LAST) {
      throw new NotLinearError('a lone surrogate cannot be matched by the linear-time engine');
    }
    this.#i += cp >= FIRST_ASTRAL ? 2 : 1;
    return cp;
  }

  /** `(`: a group, or lookaround, which RE2 cannot run. */
  #group(): void {
    const rest = this.#src.slice(this.#i, this.#i + 4);
    if (rest.startsWith('(?=') || rest.startsWith('(?!')) {
      throw new NotLinearError('lookahead is not supported by the linear-time engine');
    }
    if (rest.startsWith('(?<=') || rest.startsWith('(?<!')) {
      throw new NotLinearError('lookbehind is not supported by the linear-time engine');
    }
    if (rest.startsWith('(?:')) {
      this.#i += 3;
    } else if (rest.startsWith('(?<')) {
      // A named group; its name is only needed by backreferences, which are refused.
      this.#i = this.#src.indexOf('>', this.#i) + 1;
    } else {
      this.#i += 1;
    }
    this.#out += '(?:';
  }

  /** An escape outside a character class. */
  #escape(): void {
    const src = this.#src;
    const c = src[this.#i + 1] ?? '';
    if (c === 'b' || c === 'B' || SAME_CLASS_ESCAPES.has(c)) {
      this.#out += `\\${c}`;
      this.#i += 2;
      return;
    }
    if (c === 's' || c === 'S') {
      this.#out += `[${ranges(c === 's' ? JS_WHITESPACE : JS_NON_WHITESPACE)}]`;
      this.#i += 2;
      return;
    }
    if (c >= '1' && c <= '9') {
      const digits = /^\d+/.exec(src.slice(this.#i + 1))?.[0] ?? '';
      if (Number(digits) <= this.#groupCount) {
        throw new NotLinearError('backreferences are not supported by the linear-time engine');
      }
    }
    if (c === 'k' && this.#hasNamedGroups) {
      throw new NotLinearError('backreferences are not supported by the linear-time engine');
    }
    this.#out += literal(this.#characterEscape(false));
  }

  /**
   * Reads a character escape (the `\` at the cursor) and returns its code
   * point: control, `\cX`, `\xHH`, `\uHHHH` (a pair of them for an astral
   * character), legacy octal, or an identity escape. `inClass` allows the
   * Annex B class-only forms `\b` (backspace) and `\c` with a digit or `_`.
   */
  #characterEscape(inClass: boolean): number {
    const src = this.#src;
    const c = src[this.#i + 1] ?? '';
    const control = CONTROL_ESCAPES[c];
    if (control !== undefined) {
      this.#i += 2;
      return control;
    }
    if (inClass && c === 'b') {
      this.#i += 2;
      return BACKSPACE;
    }
    if (c === 'c') {
      const next = src[this.#i + 2] ?? '';
      if (/^[A-Za-z]$/.test(next) || (inClass && /^[\d_]$/.test(next))) {
        this.#i += 3;
        return (next.codePointAt(0) as number) % 32;
      }
      // Annex B: `\c` without a control letter is a literal backslash; the `c` follows.
      this.#i += 1;
      return BACKSLASH;
    }
    if (c === 'x' && /^[\da-fA-F]{2}$/.test(src.slice(this.#i + 2, this.#i + 4))) {
      this.#i += 4;
      return Number.parseInt(src.slice(this.#i - 2, this.#i), 16);
    }
    if (c === 'u') return this.#unicodeEscape();
    if (c >= '0' && c <= '7') return this.#octalEscape();
    if (c === '') {
      // A trailing backslash does not compile in JavaScript; kept for safety.
      this.#i += 1;
      return BACKSLASH;
    }
    // An identity escape (`\/`, `\-`, `\8`, `\k` without named groups, ...): the character itself.
    this.#i += 1;
    return this.#codePoint();
  }

  /** `\uHHHH`, joined with a following `\uHHHH` low surrogate; otherwise the letter `u`. */
  #unicodeEscape(): number {
    const src = this.#src;
    const hex = (at: number) =>
      /^[\da-fA-F]{4}$/.test(src.slice(at, at + 4))
        ? Number.parseInt(src.slice(at, at + 4), 16)
        : -1;
    const unit = hex(this.#i + 2);
    if (unit < 0) {
      this.#i += 2;
      return LETTER_U;
    }
    this.#i += 6;
    if (unit < SURROGATE_FIRST || unit > SURROGATE_LAST) return unit;
    if (unit < LOW_SURROGATE_FIRST && src.startsWith('\\u', this.#i)) {
      const low = hex(this.#i + 2);
      if (low >= LOW_SURROGATE_FIRST && low <= SURROGATE_LAST) {
        this.#i += 6;
        return ((unit - SURROGATE_FIRST) << 10) + (low - LOW_SURROGATE_FIRST) + FIRST_ASTRAL;
      }
    }
    throw new NotLinearError('a lone surrogate cannot be matched by the linear-time engine');
  }

  /** Annex B legacy octal escape: up to three octal digits, at most `\377`. */
  #octalEscape(): number {
    const src = this.#src;
    let value = 0;
    let length = 0;
    while (length < 3) {
      const d = src[this.#i + 1 + length] ?? '';
      if (d < '0' || d > '7') break;
      const next = value * 8 + Number(d);
      if (next > MAX_OCTAL_ESCAPE) break;
      value = next;
      length += 1;
    }
    this.#i += 1 + length;
    return value;
  }

  /** A character class, `[` to its closing `]`. */
  #class(): void {
    const src = this.#src;
    this.#i += 1;
    const negated = src[this.#i] === '^';
    if (negated) this.#i += 1;
    let body = '';
    let empty = true;
    while (this.#i < src.length && src[this.#i] !== ']') {
      const first = this.#classAtom();
      if (src[this.#i] === '-' && this.#i + 1 < src.length && src[this.#i + 1] !== ']') {
        this.#i += 1;
        const last = this.#classAtom();
        if ('cp' in first && 'cp' in last) {
          body += `${hexEscape(first.cp)}-${hexEscape(last.cp)}`;
        } else {
          // Annex B: a range with a class escape at either end is the two sets and a `-`.
          body += `${classItem(first)}${hexEscape(HYPHEN)}${classItem(last)}`;
        }
      } else {
        body += classItem(first);
      }
      empty = false;
    }
    this.#i += 1;
    if (empty) {
      this.#out += negated ? ANY : NOTHING;
      return;
    }
    this.#out += `[${negated ? '^' : ''}${body}]`;
  }

  /** One atom of a class: a code point, or `\d \D \w \W \s \S`. */
  #classAtom(): ClassAtom {
    const src = this.#src;
    if (src[this.#i] !== '\\') return { cp: this.#codePoint() };
    const c = src[this.#i + 1] ?? '';
    if (SAME_CLASS_ESCAPES.has(c)) {
      this.#i += 2;
      return { set: `\\${c}` };
    }
    if (c === 's' || c === 'S') {
      this.#i += 2;
      return { set: ranges(c === 's' ? JS_WHITESPACE : JS_NON_WHITESPACE) };
    }
    // In a class, `\1` is an octal escape and `\B`, `\k`, `\8` are identity escapes.
    return { cp: this.#characterEscape(true) };
  }
}

/** Counts capturing groups and tells whether any is named, skipping escapes and classes. */
function countGroups(source: string): { count: number; named: boolean } {
  let count = 0;
  let named = false;
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '\\') {
      i += 1;
    } else if (inClass) {
      if (ch === ']') inClass = false;
    } else if (ch === '[') {
      inClass = true;
    } else if (ch === '(') {
      if (source[i + 1] !== '?') {
        count += 1;
      } else if (source[i + 2] === '<' && source[i + 3] !== '=' && source[i + 3] !== '!') {
        count += 1;
        named = true;
      }
    }
  }
  return { count, named };
}

/** A code point outside a class: ASCII letters, digits and `_` as is, anything else escaped. */
function literal(cp: number): string {
  return /^\w$/.test(String.fromCodePoint(cp)) ? String.fromCodePoint(cp) : hexEscape(cp);
}

/** `\x{HEX}`, RE2's escape of any code point. */
function hexEscape(cp: number): string {
  return `\\x{${cp.toString(16)}}`;
}

function classItem(atom: ClassAtom): string {
  return 'cp' in atom ? hexEscape(atom.cp) : atom.set;
}

/** Writes ranges as RE2 class content. */
function ranges(list: readonly (readonly [number, number])[]): string {
  return list
    .map(([lo, hi]) => (lo === hi ? hexEscape(lo) : `${hexEscape(lo)}-${hexEscape(hi)}`))
    .join('');
}

/** The code points not in `list` (sorted, disjoint ranges). */
function complement(
  list: readonly (readonly [number, number])[],
): readonly (readonly [number, number])[] {
  const out: [number, number][] = [];
  let next = 0;
  for (const [lo, hi] of list) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
