/** @module Unit tests of the bearer-token check and of the socket group lookup. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { createTokenCheck, readAuthToken } from '../../src/server/auth.js';
import { resolveGroup } from '../../src/server/transport-security.js';

/** Returns the Connect code `fn` throws, or undefined when it passes. */
function codeOf(fn: () => void): Code | undefined {
  try {
    fn();
    return undefined;
  } catch (e: unknown) {
    return ConnectError.from(e).code;
  }
}

describe('createTokenCheck', () => {
  const created = createTokenCheck('s3cret');
  if (created === undefined) throw new Error('a token makes a check');
  const check = created;

  it.each([
    ['the token', 'Bearer s3cret', undefined],
    ['any case of the scheme', 'bearer s3cret', undefined],
    ['no header', undefined, Code.Unauthenticated],
    ['a wrong token', 'Bearer s3creT', Code.Unauthenticated],
    ['a longer token', 'Bearer s3cret-and-more', Code.Unauthenticated],
    ['a prefix', 'Bearer s3c', Code.Unauthenticated],
    ['another scheme', 'Basic s3cret', Code.Unauthenticated],
    ['the token alone', 's3cret', Code.Unauthenticated],
  ])('with %s answers %s', (_, value, code) => {
    const header = new Headers(value === undefined ? {} : { authorization: value });
    expect(codeOf(() => check(header))).toBe(code);
  });

  it('reads the value without the spaces and tabs around it, as HTTP/1.1 hands it over, and no others', () => {
    // A gRPC call's metadata keeps them, where Node's HTTP/1.1 parser drops them.
    const raw = (value: string) => ({ get: () => value });
    expect(codeOf(() => check(raw(' Bearer s3cret \t')))).toBeUndefined();
    expect(codeOf(() => check(raw('\tBearer s3cret')))).toBeUndefined();
    expect(codeOf(() => check(raw('Bearer s3 cret')))).toBe(Code.Unauthenticated);
    expect(codeOf(() => check(raw('Bearer s3cret\n')))).toBe(Code.Unauthenticated);
  });

  it('makes no check when no token is configured, so calls skip it', () => {
    expect(createTokenCheck(undefined)).toBeUndefined();
  });
});

describe('readAuthToken', () => {
  it('reads the file, trims it, and refuses a blank one without quoting it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-auth-'));
    const file = join(dir, 'token');
    writeFileSync(file, '  tok\n');
    expect(readAuthToken({ authTokenFile: file })).toBe('tok');
    writeFileSync(file, '\n');
    expect(() => readAuthToken({ authTokenFile: file })).toThrow(
      expect.objectContaining({ reason: 'INVALID_AUTH_TOKEN' }),
    );
    expect(() => readAuthToken({ authTokenFile: join(dir, 'missing') })).toThrow(
      expect.objectContaining({ reason: 'INVALID_AUTH_TOKEN' }),
    );
    expect(readAuthToken({})).toBeUndefined();
  });
});

describe('resolveGroup', () => {
  it('takes a GID as is and looks a name up in the group file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-group-'));
    const file = join(dir, 'group');
    writeFileSync(file, 'root:x:0:\nagents:x:4321:nobody\n');
    expect(resolveGroup('77', file)).toBe(77);
    expect(resolveGroup('agents', file)).toBe(4321);
    expect(() => resolveGroup('nope', file)).toThrow(
      expect.objectContaining({ reason: 'INVALID_TRANSPORT_SECURITY' }),
    );
  });
});
