import { describe, expect, it } from 'vitest';
import { clampTimeoutHeaders, MAX_TIMER_MS } from '../../src/server/timeout-header.js';

describe('clampTimeoutHeaders', () => {
  const clamped = (headers: Record<string, string>) => {
    const copy: Record<string, string | string[] | undefined> = { ...headers };
    clampTimeoutHeaders(copy);
    return copy;
  };

  it('cuts a grpc-timeout past a timer to 596 hours, whatever its unit', () => {
    expect(clamped({ 'grpc-timeout': '720H' })['grpc-timeout']).toBe('596H');
    expect(clamped({ 'grpc-timeout': '99999999S' })['grpc-timeout']).toBe('596H');
    expect(clamped({ 'grpc-timeout': '35792M' })['grpc-timeout']).toBe('596H');
  });

  it('keeps a grpc-timeout a timer holds, and one that does not parse', () => {
    expect(clamped({ 'grpc-timeout': '596H' })['grpc-timeout']).toBe('596H');
    expect(clamped({ 'grpc-timeout': '35791M' })['grpc-timeout']).toBe('35791M');
    expect(clamped({ 'grpc-timeout': '99999999n' })['grpc-timeout']).toBe('99999999n');
    expect(clamped({ 'grpc-timeout': 'abc' })['grpc-timeout']).toBe('abc');
  });

  it('reads grpc-timeout as grpc-js does for the gRPC listener: spaces before the unit, a run inside the value', () => {
    const asGrpcJs = (value: string) => {
      const headers: Record<string, string | string[] | undefined> = { 'grpc-timeout': value };
      clampTimeoutHeaders(headers, 'grpc-js');
      return headers['grpc-timeout'];
    };
    expect(asGrpcJs('720 H')).toBe('596H');
    expect(asGrpcJs(' 99999999 S ')).toBe('596H');
    expect(asGrpcJs('596 H')).toBe('596 H');
    expect(clamped({ 'grpc-timeout': '720 H' })['grpc-timeout']).toBe('720 H');
  });

  it('cuts a connect-timeout-ms past a timer to the longest a timer holds', () => {
    expect(clamped({ 'connect-timeout-ms': '2592000000' })['connect-timeout-ms']).toBe(
      String(MAX_TIMER_MS),
    );
    expect(clamped({ 'connect-timeout-ms': '2147483647' })['connect-timeout-ms']).toBe(
      '2147483647',
    );
    expect(clamped({ 'connect-timeout-ms': '-1' })['connect-timeout-ms']).toBe('-1');
  });
});
