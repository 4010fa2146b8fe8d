/**
 * Raw JSON: values are carried as the text they arrived as (large integers
 * unchanged), every function checks the whole grammar, and splitting an
 * object or an array gives back each member's exact text.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  arrayElements,
  arrayText,
  checkJson,
  kindOf,
  MAX_JSON_DEPTH,
  objectMembers,
  objectText,
  RawJsonError,
} from '../../src/modify/raw-json.js';

describe('checkJson', () => {
  it('accepts every kind of value and returns it without surrounding whitespace', () => {
    for (const text of [
      '{}',
      '[]',
      '""',
      '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9"',
      '0',
      '-0.5e+10',
      '12345678901234567890123',
      'true',
      'false',
      'null',
      '{"a":[1,{"b":null}],"c":"x"}',
    ]) {
      expect(checkJson(` \n\t${text}\r `)).toBe(text);
    }
  });

  it('refuses what JSON.parse refuses, naming the offset', () => {
    for (const text of [
      '',
      '{',
      '{"a"}',
      '{"a":1,}',
      '[1,]',
      '[1 2]',
      "{'a':1}",
      '01',
      '1.',
      '-',
      '+1',
      '.5',
      'tru',
      'nul',
      '"a',
      '"\\x"',
      '"\\u12"',
      '"a\nb"',
      'NaN',
      '{"a":1} x',
      '[] []',
    ]) {
      expect(() => JSON.parse(text), text).toThrow();
      expect(() => checkJson(text), text).toThrow(RawJsonError);
    }
    expect(() => checkJson('[1,]')).toThrow('invalid JSON at offset 3: expected a value');
  });

  it('names the first error of a long string with an escape on every line', () => {
    const lines = 'a line of history\\n'.repeat(20_000);
    // A whole history is one match; the same text cut short, or with a bad escape or a
    // control character near its end, is refused at that offset.
    expect(checkJson(`"${lines}"`)).toBe(`"${lines}"`);
    expect(() => checkJson(`"${lines}`)).toThrow('invalid JSON at the end: unterminated string');
    const badEscape = `"${lines}\\x"`;
    expect(() => checkJson(badEscape)).toThrow(
      `invalid JSON at offset ${badEscape.length - 3}: bad escape`,
    );
    const control = `"${lines}\u0001"`;
    expect(() => checkJson(control)).toThrow(
      `invalid JSON at offset ${control.length - 2}: control character in a string`,
    );
  });

  it('checks a string of more escapes than one regular-expression match can hold', () => {
    // 4 million escapes overflow the backtrack stack of V8's expression engine (about 3.3
    // million on Node 20); the check then goes on a run at a time.
    const escapes = '\\n'.repeat(4_000_000);
    expect(checkJson(`"${escapes}"`)).toHaveLength(escapes.length + 2);
    expect(() => checkJson(`"${escapes}\\x"`)).toThrow(
      `invalid JSON at offset ${escapes.length + 1}: bad escape`,
    );
  });

  it('refuses nesting deeper than its bound instead of overflowing the stack', () => {
    const ok = `${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`;
    expect(checkJson(ok)).toBe(ok);
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(() => checkJson(deep)).toThrow(`nested deeper than ${MAX_JSON_DEPTH}`);
  });

  it('accepts exactly 512 levels of containers and refuses 513, scalars not counting', () => {
    const arrays = (n: number, inner = '') => `${'['.repeat(n)}${inner}${']'.repeat(n)}`;
    const objects = (n: number, inner: string) =>
      `${'{"a":'.repeat(n - 1)}{"a":${inner}}${'}'.repeat(n - 1)}`;
    expect(MAX_JSON_DEPTH).toBe(512);
    for (const ok of [arrays(512), arrays(512, '1'), arrays(512, '"s"'), objects(512, 'null')]) {
      expect(checkJson(ok)).toBe(ok);
    }
    for (const deep of [arrays(513), arrays(513, '1'), objects(513, 'true'), objects(512, '[]')]) {
      expect(() => checkJson(deep)).toThrow(`nested deeper than ${MAX_JSON_DEPTH}`);
    }
    // An object's members start one level in, as do an array's elements.
    expect(objectMembers(`{"m":${arrays(511, '0')}}`).get('m')).toBe(arrays(511, '0'));
    expect(() => objectMembers(`{"m":${arrays(512)}}`)).toThrow(
      `nested deeper than ${MAX_JSON_DEPTH}`,
    );
    expect(arrayElements(arrays(512))).toEqual([arrays(511)]);
  });
});

describe('objectMembers and arrayElements', () => {
  it('keeps each member as its exact text, large integers included', () => {
    const text = '{ "id" : 9007199254740993 , "m":[ {"n":1e400} ],"s":"\\u00e9", "z":null }';
    const members = objectMembers(text);
    expect([...members]).toEqual([
      ['id', '9007199254740993'],
      ['m', '[ {"n":1e400} ]'],
      ['s', '"\\u00e9"'],
      ['z', 'null'],
    ]);
    expect(objectText(members)).toBe(
      '{"id":9007199254740993,"m":[ {"n":1e400} ],"s":"\\u00e9","z":null}',
    );
  });

  it('decodes member names and keeps the last of a repeated name, as JSON.parse does', () => {
    const members = objectMembers('{"a\\u0062":1,"x":2,"ab":3}');
    expect([...members]).toEqual([
      ['x', '2'],
      ['ab', '3'],
    ]);
    expect(JSON.parse(objectText(members))).toEqual(JSON.parse('{"a\\u0062":1,"x":2,"ab":3}'));
  });

  it('refuses a value that is not an object, and an object that is not valid JSON', () => {
    expect(() => objectMembers('[1]')).toThrow('expected a JSON object');
    expect(() => objectMembers('"{}"')).toThrow('expected a JSON object');
    expect(() => objectMembers('{"a":1')).toThrow(RawJsonError);
    expect(() => objectMembers('{"a":1}}')).toThrow('text after the value');
    expect(() => objectMembers('{"a":[1,]}')).toThrow(RawJsonError);
  });

  it('splits an array into its elements and writes them back', () => {
    const elements = arrayElements('[ 1 , {"a":[2]} ,"x", 18446744073709551617 ]');
    expect(elements).toEqual(['1', '{"a":[2]}', '"x"', '18446744073709551617']);
    expect(arrayText(elements)).toBe('[1,{"a":[2]},"x",18446744073709551617]');
    expect(arrayElements('[ ]')).toEqual([]);
    expect(() => arrayElements('{}')).toThrow('expected a JSON array');
  });

  it('reads the kind of a value from its text', () => {
    expect(['{}', '[]', '""', '-1', 'true', 'false', 'null'].map(kindOf)).toEqual([
      'object',
      'array',
      'string',
      'number',
      'boolean',
      'boolean',
      'null',
    ]);
  });
});

describe('raw JSON against JSON.parse (properties)', () => {
  it('accepts what JSON.stringify writes, and splits objects into what JSON.parse reads', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        expect(checkJson(text)).toBe(text);
        const members = objectMembers(text);
        // Compared with what JSON.parse reads, not with `value`: JSON writes -0 as 0.
        const parsed = JSON.parse(text) as Record<string, unknown>;
        expect(JSON.parse(objectText(members))).toEqual(parsed);
        for (const [name, raw] of members) expect(JSON.parse(raw)).toEqual(parsed[name]);
      }),
    );
  });

  it('refuses exactly the texts JSON.parse refuses', () => {
    const pieces = [
      '{',
      '}',
      '[',
      ']',
      ',',
      ':',
      '"',
      '\\',
      '1',
      '-',
      '.',
      'e',
      'true',
      'null',
      ' ',
      'a',
      '"k"',
      '\u0001',
    ];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 12 }), (parts) => {
        const text = parts.join('');
        let parsed = true;
        try {
          JSON.parse(text);
        } catch {
          parsed = false;
        }
        if (parsed) expect(checkJson(text)).toBe(text.trim());
        else expect(() => checkJson(text)).toThrow(RawJsonError);
      }),
      { numRuns: 5_000 },
    );
  });
});
