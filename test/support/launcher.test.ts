/**
 * @module Tests of the launcher (`sidecar.ts`): children start from a
 * scrubbed environment, and the temp folders it makes go when a child is
 * stopped.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type AnyClient,
  healthClient,
  hookClient,
  type LoaderObject,
  securedClient,
  unary,
} from './grpc-client.js';
import { startReceiver } from './receiver.js';
import {
  killRemainingChildren,
  killSidecar,
  launchNode,
  type SidecarProcess,
  startSidecar,
  tempDbPath,
} from './sidecar.js';

/** gRPC status UNAUTHENTICATED. */
const UNAUTHENTICATED = 16;

/** Variables this process had before a test changed them. */
const saved = new Map<string, string | undefined>();

/** Sets variables in this process's environment until the test ends. */
function setParentEnv(vars: Record<string, string>): void {
  for (const [key, value] of Object.entries(vars)) {
    if (!saved.has(key)) saved.set(key, process.env[key]);
    process.env[key] = value;
  }
}

let sidecars: SidecarProcess[] = [];
let clients: grpc.Client[] = [];

afterEach(async () => {
  for (const client of clients) client.close();
  await Promise.all(sidecars.map((s) => killSidecar(s)));
  clients = [];
  sidecars = [];
  for (const [key, value] of saved) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  saved.clear();
});

async function sidecar(options: Parameters<typeof startSidecar>[0] = {}) {
  const s = await startSidecar(options);
  sidecars.push(s);
  return s;
}

describe('the scrubbed environment', () => {
  it("keeps the parent's AGENT_HOOK_*, AGENTHOOKS_*, QSTASH_*, OTEL_* and named variables from a child, and passes the caller's", async () => {
    const leaked = {
      AGENT_HOOK_WEBHOOK_URL: 'http://127.0.0.1:9/leaked',
      AGENTHOOKS_GRPC_LISTEN: '0.0.0.0:50051',
      QSTASH_TOKEN: 'leaked-qstash-token',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      APP_URL: 'http://127.0.0.1:9',
      INTERNAL_APP_URL: 'http://127.0.0.1:9',
      VERCEL_AUTOMATION_BYPASS_SECRET: 'leaked-bypass',
      NODE_OPTIONS: '--max-old-space-size=256',
    };
    setParentEnv({ ...leaked, LAUNCHER_TEST_KEPT: 'kept' });
    const child = launchNode({
      args: ['-e', 'process.stdout.write(JSON.stringify(process.env) + "\\n")'],
      env: { AGENT_HOOK_EXPLICIT: 'explicit', QSTASH_URL: 'http://127.0.0.1:8' },
    });
    expect(await child.exited).toBe(0);
    const seen = JSON.parse(child.output[0] ?? '{}') as Record<string, string>;
    expect(Object.keys(leaked).filter((key) => key in seen)).toEqual([]);
    expect(seen).toMatchObject({
      LAUNCHER_TEST_KEPT: 'kept',
      AGENT_HOOK_EXPLICIT: 'explicit',
      QSTASH_URL: 'http://127.0.0.1:8',
    });
  });

  it("starts the sidecar without the parent's environment webhook and auth token, and with the caller's", async () => {
    const receiver = await startReceiver();
    try {
      const vars = {
        AGENT_HOOK_WEBHOOK_URL: `${receiver.url}/env`,
        AGENT_HOOK_WEBHOOK_TOKEN: 'env-hook-token',
        AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
        AGENTHOOKS_AUTH_TOKEN: 'parent-token',
      };
      setParentEnv(vars);
      const [scrubbed, explicit] = await Promise.all([
        sidecar({ http: false }),
        sidecar({ http: false, env: vars }),
      ]);
      const dispatch = (client: AnyClient) =>
        unary<LoaderObject>(client, 'Dispatch', {
          event: { afterStep: { operationId: 'op-env', userId: 'u' } },
        });
      const open = hookClient(scrubbed.grpc);
      const anonymous = hookClient(explicit.grpc);
      const authorized = securedClient('agenthooks.v1.HookService', explicit.grpc, {
        token: 'parent-token',
      });
      clients.push(open, anonymous, authorized);

      // The parent's variables did not reach the first: no token asked, no environment hook.
      expect((await dispatch(open)).outcomes ?? []).toEqual([]);
      expect(receiver.count()).toBe(0);

      // The same variables passed on purpose do reach the second.
      expect(((await dispatch(anonymous).catch((e: unknown) => e)) as grpc.ServiceError).code).toBe(
        UNAUTHENTICATED,
      );
      const answered = await dispatch(authorized);
      expect(answered.outcomes.map((o: LoaderObject) => [o.hookId, o.status])).toEqual([
        ['server-env-webhook:afterStep', 'HOOK_OUTCOME_STATUS_DELIVERED'],
      ]);
      expect(receiver.requests.map((r) => r.path)).toEqual(['/env']);
    } finally {
      await receiver.close();
    }
  });
});

describe('temp folders', () => {
  it('removes the database folder it made when the sidecar is killed, and the second kill does nothing', async () => {
    const s = await sidecar();
    expect(existsSync(s.db)).toBe(true);
    await killSidecar(s);
    expect(await s.exited).toBe('SIGKILL');
    expect(existsSync(s.dir)).toBe(false);
    await killSidecar(s);
    await s.stop();
    expect(existsSync(s.dir)).toBe(false);
  });

  it('removes the folder after a graceful stop', async () => {
    const s = await sidecar();
    // Once a call is answered, the sidecar has its SIGTERM handler.
    const health = healthClient(s.grpc);
    clients.push(health);
    expect(await unary(health, 'Check', { service: '' })).toEqual({ status: 'SERVING' });
    await s.stop();
    expect(await s.exited).toBe(0);
    expect(existsSync(s.dir)).toBe(false);
  });

  it('keeps the folder through a bare kill for a restart on the same database, and removes it after', async () => {
    const db = tempDbPath();
    const first = await sidecar({ db });
    first.kill('SIGKILL');
    await first.exited;
    expect(existsSync(db)).toBe(true);
    await expect(first.waitForLog((l) => l.msg === 'no such line')).rejects.toThrow(
      'the process ended before the log line',
    );
    const second = await sidecar({ db });
    await killSidecar(second);
    expect(existsSync(second.dir)).toBe(false);
  });

  it('leaves a database folder the caller made', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-launcher-'));
    try {
      const s = await sidecar({ db: join(dir, 'own.db') });
      await killSidecar(s);
      expect(existsSync(join(dir, 'own.db'))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('removes the folder it made for a sidecar that fails to start', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'agenthooks-launcher-'));
    try {
      // tmpdir() reads TMPDIR on each call: the launcher's folder lands in `parent`.
      setParentEnv({ TMPDIR: parent });
      await expect(startSidecar({ args: ['--no-such-flag'] })).rejects.toThrow(
        'sidecar did not start',
      );
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('kills every remaining child and removes its folder on killRemainingChildren', async () => {
    const s = await sidecar();
    killRemainingChildren();
    expect(await s.exited).toBe('SIGKILL');
    expect(existsSync(s.dir)).toBe(false);
  });
});
