/**
 * Library output reaches stderr only as redacted JSON lines: grpc-js's
 * messages quote refused header values, and console or warning text may
 * hold a credential.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, REDACTED, redactSecretsInText, routeProcessOutput } from '../src/log.js';

describe('redactSecretsInText', () => {
  it.each([
    [
      'Failed to add metadata entry authorization: Bearer\ttoken-secret-123. Metadata string value "Bearer\ttoken-secret-123" contains illegal characters',
      `Failed to add metadata entry authorization: ${REDACTED}`,
    ],
    [
      'Failed to add metadata entry x-custom: v\tsecret-1. For more information see x',
      `Failed to add metadata entry x-custom: ${REDACTED}`,
    ],
    ['header Authorization: Bearer abc', `header Authorization ${REDACTED}`],
    ['sent Bearer abc\nsecond line abc', `sent Bearer ${REDACTED}`],
    ['No address added out of total 1 resolved', 'No address added out of total 1 resolved'],
  ])('redacts %j', (text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
  });
});

describe('routeProcessOutput', () => {
  let restore: (() => void) | undefined;
  afterEach(() => {
    restore?.();
    restore = undefined;
  });

  it('writes console calls and process warnings as redacted JSON lines', async () => {
    const lines: string[] = [];
    restore = routeProcessOutput(createLogger({ write: (line) => lines.push(line) }));
    console.error('handler for rpc %s failed', 'Decide', new Error('boom'));
    console.warn('QStash: Authorization: Bearer qs-secret');
    const warned = new Promise((resolve) => process.once('warning', resolve));
    process.emitWarning('too many listeners', 'MaxListenersExceededWarning');
    await warned;
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toMatchObject({
      level: 'error',
      source: 'console',
      msg: 'handler for rpc Decide failed',
      err: { name: 'Error', message: 'boom' },
    });
    expect(parsed[1]).toMatchObject({ level: 'warn', msg: `QStash: Authorization ${REDACTED}` });
    expect(parsed[2]).toMatchObject({
      level: 'warn',
      source: 'process',
      warning: 'MaxListenersExceededWarning',
      msg: 'too many listeners',
    });
    expect(lines.join('\n')).not.toContain('qs-secret');
  });
});
