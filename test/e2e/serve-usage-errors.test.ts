/**
 * @module A command line or environment the sidecar cannot take as meant
 * ends a real `agenthooks serve` at once with exit 2, the usage error, and
 * a last stderr line naming the flag or variable; it never starts with a
 * setting quietly off or at its default, and never ends with a raw stack.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { launchNode, MAIN_JS, withTimeout } from '../support/sidecar.js';

/** How long a refused start may take to exit, in milliseconds. */
const EXIT_DEADLINE_MS = 20_000;

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agenthooks-usage-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs `serve` on loopback with `args` and `env` on top, and returns its
 * exit code and stderr; the database path it is given must stay uncreated.
 */
async function serve(args: readonly string[], env: Record<string, string> = {}) {
  const db = join(dir, 'data', 'agenthooks.db');
  const child = launchNode({
    args: [MAIN_JS, 'serve', '--grpc-listen', '127.0.0.1:0', '--db', db, ...args],
    env: { AGENTHOOKS_HTTP_LISTEN: 'off', AGENTHOOKS_ADMIN_LISTEN: 'off', ...env },
  });
  try {
    const code = await withTimeout(child.exited, EXIT_DEADLINE_MS, 'the sidecar did not exit');
    expect(existsSync(db)).toBe(false);
    return { code, stderr: child.logs.map((l) => l.msg).join('\n') };
  } finally {
    // One that started after all is not left running.
    await child.destroy();
  }
}

describe('serve usage errors', () => {
  it.each([
    // Read as unset, each turned a protection off: no env file, so readiness
    // SERVING and calls allowed; the TCP defaults instead of a socket.
    [{ AGENTHOOKS_ENV_FILE: '' }, 'AGENTHOOKS_ENV_FILE is set but empty'],
    [{ AGENTHOOKS_ADMIN_LISTEN: '' }, 'AGENTHOOKS_ADMIN_LISTEN is set but empty'],
  ])('exits 2 for %j, naming the variable', async (env, message) => {
    const { code, stderr } = await serve([], env);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });

  it.each([
    [['--shutdown-grace', ''], '--shutdown-grace is given an empty value'],
    [['--admin-listen', 'off', '--admin-listen', '127.0.0.1:0'], '--admin-listen is given more'],
    [['--shutdown-grace', '0x10'], '--shutdown-grace must be a number of seconds'],
    // A raw RangeError from SQLite (exit 1) before.
    [['--db-busy-timeout', '0.0001'], '--db-busy-timeout must be a number of seconds'],
    // A timer of 1 ms before: every local handler failed at once.
    [['--handler-timeout', '10000000'], 'at most 2147483 seconds (24.8 days)'],
  ])('exits 2 for %j, naming the flag', async (args, message) => {
    const { code, stderr } = await serve(args);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });

  it('exits 2 for --env-file, a flag of Node itself, naming --hooks-env-file', async () => {
    const envFile = join(dir, 'agenthooks.env');
    writeFileSync(envFile, 'UNRELATED=1\n');
    const { code, stderr } = await serve(['--env-file', envFile]);
    expect(code).toBe(2);
    expect(stderr).toContain('give the env file as --hooks-env-file');
    expect(stderr).not.toContain('unknown option');
  });
});

describe("Node 20's own --env-file", () => {
  /** Runs a script printing `process.env.PROBE` with `args` after the script. */
  async function probe(args: readonly string[]) {
    const script = join(dir, 'probe.cjs');
    writeFileSync(script, 'process.stdout.write(String(process.env.PROBE));\n');
    const child = launchNode({ args: [script, ...args] });
    const code = await withTimeout(child.exited, EXIT_DEADLINE_MS, 'the probe did not exit');
    return { code, output: child.output.join('\n'), stderr: child.logs.map((l) => l.msg) };
  }

  it('ends the process before any script runs when the file after the script is missing', async () => {
    const { code, output, stderr } = await probe(['serve', '--env-file', join(dir, 'missing')]);
    expect(code).toBe(9);
    expect(output).toBe('');
    expect(stderr.join('\n')).toContain('not found');
  });

  it('does not load the variables of a file after the script into process.env', async () => {
    const envFile = join(dir, 'node.env');
    writeFileSync(envFile, 'PROBE=from-file\n');
    expect(await probe(['serve', '--env-file', envFile])).toMatchObject({
      code: 0,
      output: 'undefined',
    });
  });
});
