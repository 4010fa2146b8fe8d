import { describe, expect, it } from 'vitest';
import { TracingConfigError, tracingSettings } from '../../src/tracing/tracing.js';

describe('tracingSettings', () => {
  it('is off with no OTEL_* variable', () => {
    expect(tracingSettings({})).toBeUndefined();
  });

  it('turns on with OTEL_TRACES_EXPORTER=otlp, the service name defaulting to agenthooks', () => {
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual({
      serviceName: 'agenthooks',
    });
    expect(
      tracingSettings({ OTEL_TRACES_EXPORTER: ' otlp ', OTEL_SERVICE_NAME: 'sidecar-a' }),
    ).toEqual({ serviceName: 'sidecar-a' });
  });

  it('turns on with an OTLP endpoint when no exporter is named', () => {
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']) {
      expect(tracingSettings({ [name]: 'http://127.0.0.1:4318' })).toBeDefined();
      expect(tracingSettings({ [name]: '  ' })).toBeUndefined();
    }
  });

  it('stays off with OTEL_TRACES_EXPORTER=none, even with an endpoint', () => {
    expect(
      tracingSettings({
        OTEL_TRACES_EXPORTER: 'none',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      }),
    ).toBeUndefined();
  });

  it('lets OTEL_SDK_DISABLED=true win over everything', () => {
    const on = { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318' };
    expect(tracingSettings(Object.assign({ OTEL_SDK_DISABLED: 'TRUE' }, on))).toBeUndefined();
    expect(tracingSettings(Object.assign({ OTEL_SDK_DISABLED: 'false' }, on))).toBeDefined();
    // An exporter the sidecar does not ship is not refused while the SDK is disabled.
    expect(
      tracingSettings({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'zipkin' }),
    ).toBeUndefined();
  });

  it('reads the exporter and protocol names case-insensitively, as OpenTelemetry does', () => {
    expect(
      tracingSettings({
        OTEL_TRACES_EXPORTER: 'OTLP',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'HTTP/Protobuf',
      }),
    ).toEqual({ serviceName: 'agenthooks' });
    expect(
      tracingSettings({ OTEL_TRACES_EXPORTER: 'None', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' }),
    ).toBeUndefined();
  });

  it('refuses an exporter or a protocol the sidecar does not ship, naming the variable', () => {
    for (const [env, variable] of [
      [{ OTEL_TRACES_EXPORTER: 'console' }, 'OTEL_TRACES_EXPORTER'],
      [{ OTEL_TRACES_EXPORTER: 'otlp,console' }, 'OTEL_TRACES_EXPORTER'],
      [
        { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        'OTEL_EXPORTER_OTLP_PROTOCOL',
      ],
      [
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
          OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        },
        'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
      ],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'not-a-url' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
      [
        { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x/v1/traces' },
        'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      ],
    ] as const) {
      let thrown: unknown;
      try {
        tracingSettings(env);
      } catch (e: unknown) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(TracingConfigError);
      expect((thrown as Error).message).toMatch(new RegExp(`^${variable}: `));
    }
    expect(
      tracingSettings({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      }),
    ).toBeDefined();
  });
});
