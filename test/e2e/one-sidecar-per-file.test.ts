/**
 * @module One `agenthooks serve` per SQLite file, with real sidecar
 * processes: a second one on a file that a running sidecar serves fails to
 * start once its wait (`--shutdown-grace`) is over (`STORE_LOCKED`, the lock
 * file named) and the first keeps serving; one started while the holder runs
 * takes the file once the holder is gone, even when SIGKILL ended it (the
 * kernel drops the lock with the process).
 */
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { holdStoreLock, type StoreLock } from '../../src/store/sqlite-lock.js';
import { type AnyClient, errorInfoOf, hookClient, unary } from '../support/grpc-client.js';
import {
  killSidecar,
  launchNode,
  MAIN_JS,
  type NodeChild,
  type SidecarProcess,
  startSidecar,
  withTimeout,
} from '../support/sidecar.js';

/** How long a refused start may take to exit, in milliseconds. */
const EXIT_DEADLINE_MS = 20_000;

/** A `serve` on `db` (gRPC on `grpcListen`), with `--shutdown-grace` (its wait for the lock) of `graceSeconds`. */
function serveOn(db: string, graceSeconds: number, grpcListen = '127.0.0.1:0'): NodeChild {
  return launchNode({
    args: [
      MAIN_JS,
      'serve',
      '--db',
      db,
      '--grpc-listen',
      grpcListen,
      '--http-listen',
      'off',
      '--admin-listen',
      'off',
      '--shutdown-grace',
      String(graceSeconds),
    ],
  });
}

/** Polls `/healthz` (every 50 ms) until it answers `status`; fails after {@link EXIT_DEADLINE_MS}. */
async function untilHealthz(sidecar: SidecarProcess, status: number): Promise<void> {
  const deadline = Date.now() + EXIT_DEADLINE_MS;
  for (;;) {
    const got = (await fetch(`http://${sidecar.http as string}/healthz`)).status;
    if (got === status) return;
    if (Date.now() > deadline) throw new Error(`/healthz answered ${got}, not ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Polls (every 20 ms) until process `pid` has `path` open; fails after {@link EXIT_DEADLINE_MS}. */
async function untilOpen(pid: number, path: string): Promise<void> {
  const deadline = Date.now() + EXIT_DEADLINE_MS;
  for (;;) {
    const fds = readdirSync(`/proc/${pid}/fd`);
    if (fds.some((fd) => readlinkOr(`/proc/${pid}/fd/${fd}`) === path)) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not open ${path}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function readlinkOr(link: string): string | undefined {
  try {
    return readlinkSync(link);
  } catch {
    return undefined;
  }
}

async function register(client: AnyClient, operationId: string): Promise<void> {
  await unary(client, 'RegisterHooks', {
    operationId,
    hooks: [{ id: 'h1', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/h1' } }],
  });
}

async function hookIds(client: AnyClient, operationId: string): Promise<string[]> {
  const res = await unary<{ hooks: { id: string }[] }>(client, 'ListHooks', { operationId });
  return res.hooks.map((h) => h.id);
}

describe('one sidecar per SQLite file', () => {
  it('refuses a second sidecar on a served file with STORE_LOCKED, and the first keeps serving', async () => {
    const first = await startSidecar();
    const client = hookClient(first.grpc);
    try {
      await register(client, 'op-lock');
      expect(existsSync(`${first.db}.lock`)).toBe(true);

      const second = serveOn(first.db, 1);
      const code = await withTimeout(second.exited, EXIT_DEADLINE_MS, 'the second did not exit');
      expect(code).toBe(1);
      const failed = second.logs.find((l) => l.msg === 'failed to start');
      expect(failed).toMatchObject({ reason: 'STORE_LOCKED' });
      expect(JSON.stringify(failed)).toContain(`${first.db}.lock`);
      // Nothing the second did touched what the first serves.
      expect(await hookIds(client, 'op-lock')).toEqual(['h1']);
    } finally {
      (client as grpc.Client).close();
      await killSidecar(first);
    }
  }, 60_000);

  it('leaves the database of the sidecar that won when two start at once on a new file', async () => {
    const db = join(mkdtempSync(join(tmpdir(), 'agenthooks-lock-')), 'agenthooks.db');
    // A wait long enough for the winner to have made the file when the loser gives up.
    const both = [serveOn(db, 5), serveOn(db, 5)];
    try {
      // The one that lost the lock exits; the other serves.
      const loser = await withTimeout(
        Promise.race(both.map((c, i) => c.exited.then(() => i))),
        EXIT_DEADLINE_MS,
        'neither exited',
      );
      const lost = both[loser] as NodeChild;
      const won = both[1 - loser] as NodeChild;
      expect(await lost.exited).toBe(1);
      expect(lost.logs.find((l) => l.msg === 'failed to start')).toMatchObject({
        reason: 'STORE_LOCKED',
      });
      const listening = await withTimeout(
        won.waitForLog((l) => l.msg === 'listening'),
        EXIT_DEADLINE_MS,
        'the winner did not start',
      );
      // The loser saw no file when it started, but it did not make this one: it stays.
      expect(existsSync(db)).toBe(true);
      const client = hookClient((listening.grpc as string[])[0] as string);
      try {
        await register(client, 'op-race');
        expect(await hookIds(client, 'op-race')).toEqual(['h1']);
      } finally {
        (client as grpc.Client).close();
      }
    } finally {
      for (const c of both) await c.destroy();
      rmSync(dirname(db), { recursive: true, force: true });
    }
  }, 60_000);

  it('keeps a database another process made while a start waited for the lock, when that start then fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-lock-'));
    const db = join(dir, 'agenthooks.db');
    // A port taken, so that the waiting start fails after it opened the store.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    // This process plays the first sidecar: it holds the lock while no file is there.
    const holder = holdStoreLock(db, 0) as StoreLock;
    const waiting = serveOn(db, 30, `127.0.0.1:${port}`);
    try {
      // It saw no file, and now waits for the lock.
      await withTimeout(
        waiting.waitForLog((l) => l.msg === 'environment reloaded'),
        EXIT_DEADLINE_MS,
        'the start did not load its environment',
      );
      // The holder makes the database, with a hook, and lets go.
      const store = openSqliteStore(db);
      await store.appendHooks('op-kept', undefined, [
        create(HookSchema, { id: 'h1', type: HookType.AFTER_STEP, webhook: { url: '/h1' } }),
      ]);
      await store.close();
      holder.release();

      expect(await withTimeout(waiting.exited, EXIT_DEADLINE_MS, 'the start did not end')).toBe(1);
      expect(JSON.stringify(waiting.logs.find((l) => l.msg === 'failed to start'))).toMatch(
        /EADDRINUSE/,
      );
      // The failed start did not make the file, so it did not remove it.
      const reopened = openSqliteStore(db);
      try {
        expect((await reopened.listHooks('op-kept')).hooks.map((h) => h.id)).toEqual(['h1']);
      } finally {
        await reopened.close();
      }
    } finally {
      holder.release();
      await waiting.destroy();
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('fails a sidecar closed when its lock file is removed and another process locks a new one, and reopens once it can lock again', async () => {
    const first = await startSidecar({ args: ['--store-check-interval', '0.2'] });
    const client = hookClient(first.grpc);
    let other: StoreLock | undefined;
    try {
      await register(client, 'op-lock-gone');
      rmSync(`${first.db}.lock`);
      // This process plays a second sidecar: with the file gone, it can lock a new one.
      other = holdStoreLock(first.db, 0);
      expect(other).toBeDefined();
      // The first stops serving the file: never two on one file.
      await untilHealthz(first, 503);
      const err = await unary(client, 'ListHooks', { operationId: 'op-lock-gone' }).then(
        () => undefined,
        (e: unknown) => e as grpc.ServiceError,
      );
      expect(err?.code).toBe(14);
      expect(errorInfoOf(err as grpc.ServiceError)?.reason).toBe('STORE_FILE_REPLACED');

      // Once the other lets go, the first locks the file at the path and serves again.
      other?.release();
      await untilHealthz(first, 200);
      expect(await hookIds(client, 'op-lock-gone')).toEqual(['h1']);
    } finally {
      (client as grpc.Client).close();
      other?.release();
      await killSidecar(first);
    }
  }, 60_000);

  it('does not let a start that waited on a removed lock file serve beside the sidecar that locked the new one', async () => {
    const first = await startSidecar({ args: ['--store-check-interval', '0.2'] });
    const client = hookClient(first.grpc);
    const lock = `${first.db}.lock`;
    let waiting: NodeChild | undefined;
    try {
      await register(client, 'op-waited');
      waiting = serveOn(first.db, 3);
      // It has the lock file open, and waits for its lock.
      await untilOpen(waiting.pid, lock);
      // The file it waits on goes; the first fails closed and locks a new one.
      rmSync(lock);
      const code = await withTimeout(waiting.exited, EXIT_DEADLINE_MS, 'the waiting start ran on');
      expect(code).toBe(1);
      expect(waiting.logs.find((l) => l.msg === 'failed to start')).toMatchObject({
        reason: 'STORE_LOCKED',
      });
      await untilHealthz(first, 200);
      expect(await hookIds(client, 'op-waited')).toEqual(['h1']);
    } finally {
      (client as grpc.Client).close();
      await waiting?.destroy();
      await killSidecar(first);
    }
  }, 60_000);

  it('warns, and serves, when the lock file cannot be written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-lock-'));
    const db = join(dir, 'agenthooks.db');
    // The folder is the sidecar's (nobody's); a lock file left by root is not.
    chownSync(dir, 65534, 65534);
    writeFileSync(`${db}.lock`, '', { mode: 0o644 });
    const sidecar = await startSidecar({ db, uid: 65534 });
    const client = hookClient(sidecar.grpc);
    try {
      expect(
        sidecar.logs.find((l) => l.msg?.toString().startsWith('the store lock file')),
      ).toMatchObject({
        level: 'warn',
        lock: `${db}.lock`,
      });
      await register(client, 'op-unlocked');
      expect(await hookIds(client, 'op-unlocked')).toEqual(['h1']);
    } finally {
      (client as grpc.Client).close();
      await killSidecar(sidecar);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('lets a sidecar started beside the holder take the file once SIGKILL ended the holder', async () => {
    const first = await startSidecar();
    const client = hookClient(first.grpc);
    let next: NodeChild | undefined;
    try {
      await register(client, 'op-handover');
      // Waits up to 30 s for the lock; the holder is killed while it waits.
      next = serveOn(first.db, 30);
      const started = next.waitForLog((l) => l.msg === 'listening');
      // Logged (synchronously) just before it opens the store, and so waits for the lock.
      await withTimeout(
        next.waitForLog((l) => l.msg === 'environment reloaded'),
        EXIT_DEADLINE_MS,
        'the next did not load its environment',
      );
      expect(next.logs.some((l) => l.msg === 'listening' || l.msg === 'failed to start')).toBe(
        false,
      );
      first.kill('SIGKILL');
      await first.exited;
      const listening = await withTimeout(started, EXIT_DEADLINE_MS, 'the next did not start');
      const address = (listening.grpc as string[])[0] as string;
      const nextClient = hookClient(address);
      try {
        expect(await hookIds(nextClient, 'op-handover')).toEqual(['h1']);
      } finally {
        (nextClient as grpc.Client).close();
      }
    } finally {
      (client as grpc.Client).close();
      await next?.destroy();
      await killSidecar(first);
    }
  }, 60_000);
});
