/**
 * The README's quick start, run as a user would: `npm start` (which builds,
 * then runs the sidecar on the embedded SQLite default) with ports and the
 * database set through `AGENTHOOKS_*` variables. SIGTERM to the npm process
 * must stop the sidecar too: no process left behind, the ports free again.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { scrubbedEnv } from '../support/sidecar.js';

const REPO_ROOT = join(import.meta.dirname, '..', '..');
/** `npm start` compiles first; allow for a slow machine. */
const START_TIMEOUT_MS = 120_000;

/** A TCP port on 127.0.0.1 that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** True when something can listen on `port` again. */
async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Pids of processes whose environment holds `marker` (a variable only this test sets). */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(marker)) {
        pids.push(Number(entry));
      }
    } catch {
      // The process ended, or is not ours to read.
    }
  }
  return pids;
}

describe('quick start', () => {
  let npm: ChildProcess | undefined;
  let dir: string | undefined;

  afterEach(() => {
    if (npm?.pid !== undefined && npm.exitCode === null) npm.kill('SIGKILL');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'npm start serves on the SQLite default, and SIGTERM to npm leaves no process and frees the ports',
    async () => {
      dir = mkdtempSync(join(tmpdir(), 'agenthooks-quickstart-'));
      // A copy of the sources, so that its build does not rewrite the dist/ that
      // other test files are starting sidecars from meanwhile.
      const checkout = join(dir, 'checkout');
      for (const entry of [
        'package.json',
        'tsconfig.json',
        'tsconfig.build.json',
        'scripts',
        'src',
        'gen',
      ]) {
        cpSync(join(REPO_ROOT, entry), join(checkout, entry), { recursive: true });
      }
      symlinkSync(join(REPO_ROOT, 'node_modules'), join(checkout, 'node_modules'));
      const [grpcPort, httpPort] = [await freePort(), await freePort()];
      const marker = `AGENTHOOKS_DB=${join(dir, 'agenthooks.db')}`;
      npm = spawn('npm', ['start'], {
        cwd: checkout,
        env: scrubbedEnv({
          AGENTHOOKS_GRPC_LISTEN: `127.0.0.1:${grpcPort}`,
          AGENTHOOKS_HTTP_LISTEN: `127.0.0.1:${httpPort}`,
          AGENTHOOKS_DB: join(dir, 'agenthooks.db'),
        }),
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const exited = new Promise<number | string>((resolve) =>
        npm?.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
      );
      const listening = new Promise<void>((resolve, reject) => {
        createInterface({ input: npm?.stderr as NodeJS.ReadableStream }).on('line', (line) => {
          if (line.includes('"msg":"listening"')) resolve();
        });
        void exited.then((code) => reject(new Error(`npm start exited (${code}) first`)));
      });
      await listening;
      const health = await fetch(`http://127.0.0.1:${httpPort}/readyz`);
      expect(health.status).toBe(200);
      expect(processesWith(marker).length).toBeGreaterThan(0);

      npm.kill('SIGTERM');
      await exited;
      // npm exits once its child did: nothing with our environment may remain.
      expect(processesWith(marker)).toEqual([]);
      expect(await portIsFree(grpcPort)).toBe(true);
      expect(await portIsFree(httpPort)).toBe(true);
    },
    START_TIMEOUT_MS,
  );
});
