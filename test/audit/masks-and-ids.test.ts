import { describe, expect, it } from 'vitest';
import { newDecisionId, publicationDecisionId } from '../../src/audit/decision-id.js';
import { applyMasks, parsePointer } from '../../src/audit/masks.js';
import { parseServeConfig } from '../../src/config/config.js';
import { InvalidArgumentError } from '../../src/errors.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('decision ids', () => {
  it('are version 7 UUIDs whose first 48 bits are the time, so they sort by time', () => {
    const a = newDecisionId(1_700_000_000_000);
    const b = newDecisionId(1_700_000_000_001);
    expect(a).toMatch(UUID_V7);
    expect(a.slice(0, 13).replace('-', '')).toBe(
      (1_700_000_000_000).toString(16).padStart(12, '0'),
    );
    expect(a < b).toBe(true);
    expect(newDecisionId(5)).not.toBe(newDecisionId(5));
  });

  it('carry each id its own time, however the times of successive ids go', () => {
    const times = [7, 7, 1_700_000_000_000, 7, 0x123456789abc, 0x123456789abc, 8];
    for (const ms of times) {
      const id = newDecisionId(ms);
      expect(id).toMatch(UUID_V7);
      expect(id.slice(0, 13).replace('-', '')).toBe(ms.toString(16).padStart(12, '0'));
    }
  });

  it('derive a publication id from the tool call id and time alone', () => {
    const id = publicationDecisionId('call_1', 1_700_000_000_000);
    expect(id).toMatch(UUID_V7);
    expect(publicationDecisionId('call_1', 1_700_000_000_000)).toBe(id);
    expect(publicationDecisionId('call_2', 1_700_000_000_000)).not.toBe(id);
    expect(publicationDecisionId('call_1', 1_700_000_000_001)).not.toBe(id);
  });
});

describe('audit masks', () => {
  it('parses RFC 6901 pointers, unescaping ~1 and ~0', () => {
    expect(parsePointer('/args/api~1key/a~0b', 'audit-mask')).toEqual(['args', 'api/key', 'a~b']);
    expect(parsePointer('/a//b', 'audit-mask')).toEqual(['a', '', 'b']);
  });

  it('refuses what is not a pointer, naming the flag', () => {
    for (const bad of ['', 'args/password', '/a~2', '/a~']) {
      const err = (() => {
        try {
          parsePointer(bad, 'audit-mask');
        } catch (e: unknown) {
          return e;
        }
        return undefined;
      })() as InvalidArgumentError;
      expect(err, bad).toBeInstanceOf(InvalidArgumentError);
      expect(err.field).toBe('audit-mask');
    }
  });

  it('deletes members, nulls array elements, follows * and ignores what is absent', () => {
    const doc = {
      args: { password: 'x', keep: 1, 'api/key': 'y' },
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
      list: [1, 2, 3],
    };
    applyMasks(doc, [
      parsePointer('/args/password', 'm'),
      parsePointer('/args/api~1key', 'm'),
      parsePointer('/messages/*/content', 'm'),
      parsePointer('/list/1', 'm'),
      parsePointer('/missing/deep', 'm'),
      parsePointer('/args/keep/deeper', 'm'),
    ]);
    expect(doc).toEqual({
      args: { keep: 1 },
      messages: [{ role: 'user' }, { role: 'assistant' }],
      list: [1, null, 3],
    });
  });
});

describe('audit configuration', () => {
  const parse = (args: string[], env: Record<string, string> = {}) => parseServeConfig(args, env);
  const fieldOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (e: unknown) {
      return (e as InvalidArgumentError).field;
    }
    return undefined;
  };

  it('is off by default, with the default buffer', () => {
    expect(parse([]).audit).toEqual({
      store: false,
      stdout: false,
      httpUrl: undefined,
      bufferEntries: 10_000,
      bufferBytes: 64 * 1024 * 1024,
      payloads: undefined,
    });
  });

  it('reads every sink, the payloads and the masks from flags and variables', () => {
    const config = parse(
      ['--audit-store', '--audit-http', 'https://audit.example/v1', '--audit-payloads'],
      { AGENTHOOKS_AUDIT_STDOUT: 'true', AGENTHOOKS_AUDIT_MASK: '/args/password,/result/content' },
    );
    expect(config.audit).toMatchObject({
      store: true,
      stdout: true,
      httpUrl: 'https://audit.example/v1',
      payloads: {
        masks: [
          ['args', 'password'],
          ['result', 'content'],
        ],
      },
    });
  });

  it('splits a comma-separated --audit-mask as it splits the variable', () => {
    const config = parseServeConfig(
      [
        '--audit-payloads',
        '--audit-mask',
        '/args/password, /result/content',
        '--audit-mask',
        '/args/token',
      ],
      {},
    );
    expect(config.audit.payloads?.masks).toEqual([
      ['args', 'password'],
      ['result', 'content'],
      ['args', 'token'],
    ]);
  });

  it('refuses a mask without payloads, a URL that is not http(s) or holds credentials, a bad buffer', () => {
    expect(fieldOf(() => parse(['--audit-mask', '/args/x']))).toBe('audit-mask');
    expect(fieldOf(() => parse(['--audit-payloads', '--audit-mask', 'args']))).toBe('audit-mask');
    // An empty item masks nothing: refused, not dropped (as a flag, in a list, in the variable).
    expect(fieldOf(() => parse(['--audit-payloads', '--audit-mask', '']))).toBe('audit-mask');
    expect(fieldOf(() => parse(['--audit-payloads', '--audit-mask', '/a,,/b']))).toBe('audit-mask');
    expect(
      fieldOf(() =>
        parseServeConfig(['--audit-payloads'], { AGENTHOOKS_AUDIT_MASK: '/args/password, ' }),
      ),
    ).toBe('audit-mask');
    expect(fieldOf(() => parse(['--audit-http', 'ftp://x.example/']))).toBe('audit-http');
    expect(fieldOf(() => parse(['--audit-http', 'https://u:p@x.example/']))).toBe('audit-http');
    expect(fieldOf(() => parse(['--audit-buffer', '0']))).toBe('audit-buffer');
  });
});
