/**
 * @module Readiness follows the configuration files: while the effective
 * environment (`--hooks-env-file`) or the plugins file is invalid, every call fails
 * (`INVALID_ENVIRONMENT`, `INVALID_PLUGINS`), so a real sidecar reports
 * readiness NOT_SERVING (`/readyz` 503, gRPC `readiness`) and logs the
 * reload at `error`, from the start or after a reload; liveness stays
 * SERVING, and fixing the file (SIGHUP) makes it ready again without a
 * restart.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from '../../gen/grpc/health/v1/health_pb.js';
import { killSidecar, type SidecarProcess, startSidecar, withTimeout } from '../support/sidecar.js';

/** A signing secret too short to be one (canonical base64 of fewer than 24 bytes). */
const SHORT_SECRET = 'whsec_dG9vc2hvcnQ=';
const GOOD_SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

let dir: string;
let sidecar: SidecarProcess | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agenthooks-config-readiness-'));
});

afterEach(async () => {
  await killSidecar(sidecar);
  sidecar = undefined;
  rmSync(dir, { recursive: true, force: true });
});

function signingLines(secret: string): string {
  return `AGENTHOOKS_SIGNING_SECRET_R=${secret}\nAGENTHOOKS_SIGNING_ORIGINS_R=http://127.0.0.1:9\n`;
}

/** Readiness over HTTP and gRPC, and liveness. */
async function probes(s: SidecarProcess) {
  const health = createClient(Health, createGrpcTransport({ baseUrl: `http://${s.grpc}` }));
  const status = async (service: string) => ServingStatus[(await health.check({ service })).status];
  const http = async (path: string) => (await fetch(`http://${s.http}${path}`)).status;
  return {
    readyz: await http('/readyz'),
    livez: await http('/livez'),
    readiness: await status('readiness'),
    liveness: await status('liveness'),
  };
}

const READY = { readyz: 200, livez: 200, readiness: 'SERVING', liveness: 'SERVING' };
const NOT_READY = { readyz: 503, livez: 200, readiness: 'NOT_SERVING', liveness: 'SERVING' };

/**
 * Sends SIGHUP and waits for a reload of `msg` past those logged so far that
 * read the file as `valid` (the file watcher may reload on the write first).
 */
async function reload(s: SidecarProcess, msg: string, valid: boolean) {
  const seen = Math.max(
    0,
    ...s.logs.filter((l) => l.msg === msg).map((l) => l.generation as number),
  );
  s.kill('SIGHUP');
  return withTimeout(
    s.waitForLog((l) => l.msg === msg && (l.generation as number) > seen && l.valid === valid),
    10_000,
    `no '${msg}' with valid ${valid} after generation ${seen}`,
  );
}

describe('readiness and the configuration files', () => {
  it('is not ready while the environment is invalid, from the start, and ready once it is fixed', async () => {
    const envFile = join(dir, 'agenthooks.env');
    writeFileSync(envFile, signingLines(SHORT_SECRET));
    sidecar = await startSidecar({ args: ['--hooks-env-file', envFile] });
    const first = sidecar.logs.find((l) => l.msg === 'environment reloaded');
    expect(first).toMatchObject({ level: 'error', valid: false, reason: 'INVALID_ENVIRONMENT' });
    expect(JSON.stringify(sidecar.logs)).not.toContain(SHORT_SECRET);
    expect(await probes(sidecar)).toEqual(NOT_READY);

    writeFileSync(envFile, signingLines(GOOD_SECRET));
    expect(await reload(sidecar, 'environment reloaded', true)).toMatchObject({ level: 'info' });
    expect(await probes(sidecar)).toEqual(READY);

    // And back: a reload that breaks it takes readiness away again.
    writeFileSync(envFile, 'AGENT_HOOK_WEBHOOK_URL=\n');
    expect(await reload(sidecar, 'environment reloaded', false)).toMatchObject({ level: 'error' });
    expect(await probes(sidecar)).toEqual(NOT_READY);
  });

  it('is not ready while the env file holds a misspelt environment hook variable', async () => {
    const envFile = join(dir, 'agenthooks.env');
    const control = [
      'AGENT_HOOK_WEBHOOK_URL=http://127.0.0.1:9/env',
      'AGENT_HOOK_WEBHOOK_TOKEN=s3cret-token',
      'AGENT_HOOK_WEBHOOK_EVENTS=beforeToolCall',
      'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
      '',
    ].join('\n');
    writeFileSync(envFile, `${control}AGENT_HOOK_WEBHOOK_ONERROR=block\n`);
    sidecar = await startSidecar({ args: ['--hooks-env-file', envFile] });
    expect(sidecar.logs.find((l) => l.msg === 'environment reloaded')).toMatchObject({
      level: 'error',
      valid: false,
      reason: 'INVALID_ENVIRONMENT',
    });
    expect(await probes(sidecar)).toEqual(NOT_READY);

    writeFileSync(envFile, `${control}AGENT_HOOK_WEBHOOK_ON_ERROR=block\n`);
    expect(await reload(sidecar, 'environment reloaded', true)).toMatchObject({ hooks: 1 });
    expect(await probes(sidecar)).toEqual(READY);

    // A hook removed from the file is gone at the reload: the env file never
    // reaches process.env, where it would live on.
    writeFileSync(envFile, '# no environment hooks\n');
    expect(await reload(sidecar, 'environment reloaded', true)).toMatchObject({ hooks: 0 });
  });

  it('is not ready while the plugins file is invalid', async () => {
    const pluginsFile = join(dir, 'plugins.json');
    writeFileSync(pluginsFile, '{"plugins": [');
    sidecar = await startSidecar({ args: ['--plugins-file', pluginsFile] });
    expect(sidecar.logs.find((l) => l.msg === 'plugins reloaded')).toMatchObject({
      level: 'error',
      valid: false,
    });
    expect(await probes(sidecar)).toEqual(NOT_READY);

    writeFileSync(pluginsFile, '{"plugins": []}');
    expect(await reload(sidecar, 'plugins reloaded', true)).toMatchObject({ level: 'info' });
    expect(await probes(sidecar)).toEqual(READY);
  });
});
