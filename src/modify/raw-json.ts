/**
 * @module JSON that the sidecar carries without reading into it. Messages,
 * arguments and provider payloads of the modifying hooks are opaque to the
 * sidecar, and a history can be megabytes with integers beyond 2^53 that
 * `JSON.parse` would round: so a value stays the text it arrived as, and
 * the sidecar only splits an object into its members (and an array into its
 * elements) when a composition rule needs to. Every function here checks
 * the full JSON grammar (RFC 8259) of what it is given, so text that reaches
 * a runtime is always valid JSON.
 */

/** A JSON value as text, checked against the grammar. */
export type RawJson = string;

/** The kind of a JSON value, read from its first character. */
export type JsonKind = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';

/** Raised for text that is not JSON, or not the kind a caller needs. */
export class RawJsonError extends Error {
  override readonly name = 'RawJsonError';
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/**
 * Most containers (objects and arrays) a value may nest, the outermost
 * counted as 1; deeper text is refused rather than recursed into. Scalars
 * are not a level.
 */
export const MAX_JSON_DEPTH = 512;

/** Index of the first non-whitespace character at or after `i`. */
function skipWs(text: string, i: number): number {
  while (i < text.length && WHITESPACE.has(text.charCodeAt(i))) i++;
  return i;
}

function fail(text: string, i: number, what: string): never {
  const at = i >= text.length ? 'at the end' : `at offset ${i}`;
  throw new RawJsonError(`invalid JSON ${at}: ${what}`);
}

/** Characters a string may hold as they are: not a quote, a backslash or a control character. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON strings may not hold.
const PLAIN = /[^"\\\u0000-\u001f]*/y;

/**
 * A whole valid string matched in one call: a history's text has an escape
 * (`\\n`) every line, and a call per run of plain characters costs more
 * than the run. Written as plain (escape plain)*: an escape begins with the
 * one character a plain run cannot hold, so there is one way to match and
 * text that fails costs linear time, not exponential backtracking.
 */
const STRING =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON strings may not hold.
  /"[^"\\\u0000-\u001f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\u0000-\u001f]*)*"/y;

/** Checks the string starting at `i` (a `"`) and returns the index after its closing quote. */
function scanString(text: string, i: number): number {
  STRING.lastIndex = i;
  try {
    if (STRING.test(text)) return STRING.lastIndex;
  } catch (e: unknown) {
    // V8 keeps a backtrack entry per escape: millions of escapes in one
    // string (about 3.3 million on Node 20) overflow its stack. Rare; the
    // run-at-a-time scan has no such bound.
    if (!(e instanceof RangeError)) throw e;
  }
  return scanStringByRuns(text, i);
}

/**
 * {@link scanString} a run at a time, which names the offset of the first
 * error: the path of a string {@link STRING} did not match.
 */
function scanStringByRuns(text: string, i: number): number {
  i++;
  for (;;) {
    // Skip a run of plain characters at once: most of a history is these.
    PLAIN.lastIndex = i;
    PLAIN.test(text);
    i = PLAIN.lastIndex;
    if (i >= text.length) fail(text, i, 'unterminated string');
    const c = text.charCodeAt(i);
    if (c === 0x22) return i + 1;
    if (c < 0x20) fail(text, i, 'control character in a string');
    if (c === 0x5c) {
      const e = text[i + 1];
      if (e === 'u') {
        if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          fail(text, i, 'bad \\u escape');
        }
        i += 6;
      } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
        i += 2;
      } else {
        fail(text, i, 'bad escape');
      }
    } else {
      i++;
    }
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * Checks the value starting at `i` and returns the index after it.
 *
 * @param depth The containers around the value: 0 for a whole text.
 */
function scanValue(text: string, i: number, depth: number): number {
  const c = text[i];
  // A container is level depth + 1: refused past MAX_JSON_DEPTH.
  if ((c === '{' || c === '[') && depth >= MAX_JSON_DEPTH) {
    fail(text, i, `nested deeper than ${MAX_JSON_DEPTH}`);
  }
  switch (c) {
    case '{': {
      i = skipWs(text, i + 1);
      if (text[i] === '}') return i + 1;
      for (;;) {
        if (text[i] !== '"') fail(text, i, 'expected a member name');
        i = skipWs(text, scanString(text, i));
        if (text[i] !== ':') fail(text, i, "expected ':'");
        i = skipWs(text, scanValue(text, skipWs(text, i + 1), depth + 1));
        if (text[i] === '}') return i + 1;
        if (text[i] !== ',') fail(text, i, "expected ',' or '}'");
        i = skipWs(text, i + 1);
      }
    }
    case '[': {
      i = skipWs(text, i + 1);
      if (text[i] === ']') return i + 1;
      for (;;) {
        i = skipWs(text, scanValue(text, i, depth + 1));
        if (text[i] === ']') return i + 1;
        if (text[i] !== ',') fail(text, i, "expected ',' or ']'");
        i = skipWs(text, i + 1);
      }
    }
    case '"':
      return scanString(text, i);
    case 't':
      if (text.startsWith('true', i)) return i + 4;
      break;
    case 'f':
      if (text.startsWith('false', i)) return i + 5;
      break;
    case 'n':
      if (text.startsWith('null', i)) return i + 4;
      break;
    default: {
      NUMBER.lastIndex = i;
      if (NUMBER.test(text)) return NUMBER.lastIndex;
    }
  }
  return fail(text, i, 'expected a value');
}

/**
 * Checks that `text` is one JSON value (whitespace around it allowed) and
 * returns it without the surrounding whitespace.
 *
 * @throws RawJsonError naming the offset of the first error.
 */
export function checkJson(text: string): RawJson {
  const start = skipWs(text, 0);
  const end = scanValue(text, start, 0);
  if (skipWs(text, end) !== text.length) fail(text, skipWs(text, end), 'text after the value');
  return text.slice(start, end);
}

/** The kind of a checked JSON value. */
export function kindOf(value: RawJson): JsonKind {
  switch (value[0]) {
    case '{':
      return 'object';
    case '[':
      return 'array';
    case '"':
      return 'string';
    case 't':
    case 'f':
      return 'boolean';
    case 'n':
      return 'null';
    default:
      return 'number';
  }
}

/**
 * Splits a JSON object into its members, each value as raw text, in order.
 * A member name that repeats keeps its last value, as `JSON.parse` does.
 *
 * @throws RawJsonError when `text` is not JSON or not an object.
 */
export function objectMembers(text: string): Map<string, RawJson> {
  return splitObject(text).members;
}

/**
 * {@link objectMembers}, and whether a member name repeated (the text then
 * holds more members than the map).
 *
 * @throws RawJsonError when `text` is not JSON or not an object.
 */
export function splitObject(text: string): { members: Map<string, RawJson>; repeated: boolean } {
  let repeated = false;
  const start = skipWs(text, 0);
  if (text[start] !== '{') {
    if (start < text.length) scanValue(text, start, 0);
    throw new RawJsonError('expected a JSON object');
  }
  const members = new Map<string, RawJson>();
  let i = skipWs(text, start + 1);
  if (text[i] === '}') {
    i += 1;
  } else {
    for (;;) {
      if (text[i] !== '"') fail(text, i, 'expected a member name');
      const nameEnd = scanString(text, i);
      const name = JSON.parse(text.slice(i, nameEnd)) as string;
      i = skipWs(text, nameEnd);
      if (text[i] !== ':') fail(text, i, "expected ':'");
      const valueStart = skipWs(text, i + 1);
      const valueEnd = scanValue(text, valueStart, 1);
      if (members.delete(name)) repeated = true;
      members.set(name, text.slice(valueStart, valueEnd));
      i = skipWs(text, valueEnd);
      if (text[i] === '}') {
        i += 1;
        break;
      }
      if (text[i] !== ',') fail(text, i, "expected ',' or '}'");
      i = skipWs(text, i + 1);
    }
  }
  if (skipWs(text, i) !== text.length) fail(text, skipWs(text, i), 'text after the value');
  return { members, repeated };
}

/**
 * Splits a checked JSON array into its elements, each as raw text.
 *
 * @throws RawJsonError when `value` is not an array.
 */
export function arrayElements(value: RawJson): RawJson[] {
  if (value[0] !== '[') throw new RawJsonError('expected a JSON array');
  const out: RawJson[] = [];
  let i = skipWs(value, 1);
  if (value[i] === ']') return out;
  for (;;) {
    const end = scanValue(value, i, 1);
    out.push(value.slice(i, end));
    i = skipWs(value, end);
    if (value[i] === ']') return out;
    if (value[i] !== ',') fail(value, i, "expected ',' or ']'");
    i = skipWs(value, i + 1);
  }
}

/** Writes an object from members whose values are raw JSON, in the map's order. */
export function objectText(members: ReadonlyMap<string, RawJson>): RawJson {
  const parts: string[] = [];
  for (const [name, value] of members) parts.push(`${JSON.stringify(name)}:${value}`);
  return `{${parts.join(',')}}`;
}

/** Writes an array from raw JSON elements. */
export function arrayText(elements: readonly RawJson[]): RawJson {
  return `[${elements.join(',')}]`;
}
