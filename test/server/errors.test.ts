import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { AgentHooksError, InvalidArgumentError } from '../../src/errors.js';
import { clipErrorText, MAX_ERROR_TEXT, toConnectError } from '../../src/server/errors.js';

describe('clipErrorText', () => {
  it('keeps a short text and cuts a long one, marking the cut', () => {
    expect(clipErrorText('short')).toBe('short');
    const clipped = clipErrorText('x'.repeat(MAX_ERROR_TEXT + 1));
    expect(clipped).toBe(`${'x'.repeat(MAX_ERROR_TEXT)}…`);
  });

  it('never splits a surrogate pair', () => {
    const text = `${'x'.repeat(MAX_ERROR_TEXT - 1)}😀tail`;
    const clipped = clipErrorText(text);
    expect(clipped).toBe(`${'x'.repeat(MAX_ERROR_TEXT - 1)}…`);
    expect(() => new TextEncoder().encode(clipped)).not.toThrow();
  });

  it('turns a lone surrogate into U+FFFD, so a gRPC-Web trailer can percent-encode it', () => {
    const lone = 'key "\ud800" and "\udc00x" are unknown; "😀" is a pair';
    const clean = clipErrorText(lone);
    expect(clean).toBe('key "\ufffd" and "\ufffdx" are unknown; "😀" is a pair');
    expect(() => encodeURIComponent(clean)).not.toThrow();
    const passed = toConnectError(new ConnectError(lone, Code.InvalidArgument));
    expect(passed.rawMessage).toBe(clean);
    const ours = toConnectError(new InvalidArgumentError('\ud800', 'FORBIDDEN_HEADER', lone));
    expect(() => encodeURIComponent(ours.rawMessage)).not.toThrow();
  });
});

describe('toConnectError', () => {
  const long = 'n'.repeat(40_000);

  it('clips the message, the BadRequest description and field, and ErrorInfo metadata', () => {
    const err = toConnectError(
      new InvalidArgumentError(`hooks[0].headers.${long}`, 'FORBIDDEN_HEADER', `bad ${long}`, {
        metadata: { name: long },
      }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage.length).toBeLessThanOrEqual(MAX_ERROR_TEXT + 1);
    const texts = JSON.stringify(err.details.map((d) => ('value' in d ? d.value : d)));
    expect(texts.length).toBeLessThan(6 * MAX_ERROR_TEXT);
    expect(texts).toContain('FORBIDDEN_HEADER');
  });

  it('clips a long ConnectError it passes through, keeping its code and details', () => {
    const source = new ConnectError(long, Code.ResourceExhausted);
    const err = toConnectError(source);
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toBe(clipErrorText(long));
    const short = new ConnectError('short', Code.Canceled);
    expect(toConnectError(short)).toBe(short);
  });

  it('keeps an error of ordinary size as it is', () => {
    const err = toConnectError(
      new AgentHooksError('not_found', 'PARKED_CALL_NOT_FOUND', 'no parked call c1'),
    );
    expect(err.rawMessage).toBe('no parked call c1');
  });
});
