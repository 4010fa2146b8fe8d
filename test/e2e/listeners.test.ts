import { afterEach, describe, expect, it } from 'vitest';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** The start-up warning about the API served without a token beyond loopback. */
const EXPOSED_WARNING = 'the API is served without a token on addresses other than loopback';

describe('listeners', () => {
  let sidecar: SidecarProcess | undefined;
  afterEach(async () => {
    await killSidecar(sidecar);
    sidecar = undefined;
  });

  it('warns once at start, naming the listener, when --allow-unauthenticated lets the API on 0.0.0.0 without a token', async () => {
    sidecar = await startSidecar({
      args: ['--grpc-listen', '0.0.0.0:0', '--allow-unauthenticated'],
    });
    const warnings = sidecar.logs.filter((l) => l.msg === EXPOSED_WARNING);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 'warn', listeners: ['--grpc-listen 0.0.0.0:0'] });
  });

  it('names a non-loopback HTTP listener too', async () => {
    sidecar = await startSidecar({
      http: '0.0.0.0:0',
      args: ['--allow-unauthenticated'],
    });
    const warning = sidecar.logs.find((l) => l.msg === EXPOSED_WARNING);
    expect(warning).toMatchObject({ listeners: ['--http-listen 0.0.0.0:0'] });
  });

  it('does not warn when a token is set', async () => {
    sidecar = await startSidecar({
      args: ['--grpc-listen', '0.0.0.0:0'],
      env: { AGENTHOOKS_AUTH_TOKEN: 'listeners-test-token' },
    });
    expect(sidecar.logs.filter((l) => l.msg === EXPOSED_WARNING)).toEqual([]);
  });

  it('does not warn for loopback listeners', async () => {
    sidecar = await startSidecar({ args: ['--grpc-listen', '[::1]:0'] });
    // The warning comes before the `listening` line startSidecar waited for.
    expect(sidecar.logs.filter((l) => l.msg === EXPOSED_WARNING)).toEqual([]);
  });

  it('serves /metrics and /healthz on --metrics-listen, and no API there', async () => {
    sidecar = await startSidecar({ http: false, args: ['--metrics-listen', '127.0.0.1:0'] });
    expect(sidecar.http).toBeUndefined();
    const base = `http://${sidecar.metrics}`;
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('agenthooks_rpc_calls_total');
    const healthz = await fetch(`${base}/healthz`);
    expect(healthz.status).toBe(200);
    expect(await healthz.text()).toBe('ok\n');
    const rpc = await fetch(`${base}/agenthooks.v1.HookService/ListHooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operationId: 'op-1' }),
    });
    expect(rpc.status).toBe(404);
    await rpc.body?.cancel();
  });

  it('keeps /metrics and /healthz on --http-listen next to the API', async () => {
    sidecar = await startSidecar({ args: ['--metrics-listen', '127.0.0.1:0'] });
    const metrics = await fetch(`http://${sidecar.http}/metrics`);
    expect(metrics.status).toBe(200);
    await metrics.body?.cancel();
    const healthz = await fetch(`http://${sidecar.http}/healthz`);
    expect(healthz.status).toBe(200);
    await healthz.body?.cancel();
  });
});
