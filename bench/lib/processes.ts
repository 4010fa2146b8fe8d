/**
 * @module Child processes of the bench: the real sidecar (`dist/src/main.js
 * serve` on 127.0.0.1 port 0 with a fresh temp database), the echo baseline
 * server and the webhook receiver; plus what `/proc` says about a process
 * (RSS, CPU time). Node flags (such as `--cpu-prof`) are passed to any child.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { MS_PER_S } from './stats.js';

/** Repository root (this file is `dist/bench/lib/processes.js` once built). */
export const REPO_ROOT = join(import.meta.dirname, '..', '..', '..');
/** The built sidecar entry point. */
export const MAIN_JS = join(REPO_ROOT, 'dist', 'src', 'main.js');
/** The built bench folder (`dist/bench`). */
export const BENCH_DIST = join(import.meta.dirname, '..');

/** How long a child may take to say where it listens. */
const START_TIMEOUT_MS = 20_000;
/** How long a child may take to exit after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 15_000;
/** Clock ticks per second of `/proc/<pid>/stat` CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_S = 100;
/** Kibibytes per mebibyte. */
const KIB_PER_MIB = 1024;

/** Environment variable prefixes removed from children, so the host's settings cannot leak in. */
const STRIPPED_ENV_PREFIXES = ['AGENT_HOOK_', 'AGENTHOOKS_', 'QSTASH_'];
/** Environment variables removed from children, for the same reason. */
const STRIPPED_ENV_NAMES = new Set([
  'APP_URL',
  'INTERNAL_APP_URL',
  'VERCEL_AUTOMATION_BYPASS_SECRET',
  'NODE_OPTIONS',
]);

/** Every child started and not yet exited, so that a failed run can stop them. */
const live = new Set<ChildProcess>();

function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
}

/** Kills (SIGKILL) every child this process started that is still running. */
export function killRemainingChildren(): void {
  for (const child of live) child.kill('SIGKILL');
}

/** The bench's own environment without anything that configures the sidecar. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (STRIPPED_ENV_NAMES.has(key)) continue;
    if (STRIPPED_ENV_PREFIXES.some((p) => key.startsWith(p))) continue;
    env[key] = value;
  }
  return env;
}

/** A started child that listens somewhere. */
export interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  /** `host:port` it listens on. */
  readonly address: string;
  /** Log lines (parsed JSON, else `{msg}`) it wrote on stderr. */
  readonly logs: Record<string, unknown>[];
  /** Stops it with SIGTERM (SIGKILL after a grace period) and removes its temp files. */
  stop(): Promise<void>;
}

/** Options of {@link startSidecar}. */
export interface SidecarStartOptions {
  /** Node flags placed before the entry point, such as `--cpu-prof`. */
  readonly nodeFlags?: readonly string[];
  /** Arguments after `serve`, added to the defaults. */
  readonly args?: readonly string[];
}

/** A started sidecar, with the time from spawn to its `listening` line. */
export interface SidecarChild extends Child {
  /** `process.hrtime.bigint()` just before the spawn. */
  readonly spawnedAt: bigint;
  readonly db: string;
  /** Its temp folder (database, and its working directory). */
  readonly dir: string;
}

/**
 * Starts the real sidecar as a runtime's pod would: `node dist/src/main.js
 * serve` on 127.0.0.1 port 0 (gRPC and HTTP), a fresh temp database, and
 * the default log level. Resolves once it logged `listening`.
 */
export async function startSidecar(options: SidecarStartOptions = {}): Promise<SidecarChild> {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-bench-'));
  const db = join(dir, 'agenthooks.db');
  const argv = [
    ...(options.nodeFlags ?? []),
    MAIN_JS,
    'serve',
    '--grpc-listen',
    '127.0.0.1:0',
    '--http-listen',
    '127.0.0.1:0',
    '--db',
    db,
    ...(options.args ?? []),
  ];
  const spawnedAt = process.hrtime.bigint();
  const child = spawn(process.execPath, argv, {
    env: cleanEnv(),
    stdio: ['ignore', 'ignore', 'pipe'],
    cwd: dir,
  });
  track(child);
  const logs: Record<string, unknown>[] = [];
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (text) => {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        line = { msg: text, raw: true };
      }
      logs.push(line);
      if (line.msg === 'listening') resolve(line);
    });
    child.once('exit', (code, signal) =>
      reject(
        new Error(`sidecar exited (${code ?? signal}) before listening: ${JSON.stringify(logs)}`),
      ),
    );
  });
  const line = await withTimeout(listening, START_TIMEOUT_MS, 'sidecar did not start');
  const address = (line.grpc as string[])[0] as string;
  return {
    process: child,
    pid: child.pid as number,
    address,
    logs,
    spawnedAt,
    db,
    dir,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts a bench child (`dist/bench/<script>.js`) that prints one JSON line
 * `{"port": N}` on stdout once it listens on 127.0.0.1.
 */
export async function startBenchChild(
  script: string,
  args: readonly string[] = [],
  nodeFlags: readonly string[] = [],
): Promise<Child> {
  const child = spawn(process.execPath, [...nodeFlags, join(BENCH_DIST, script), ...args], {
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  const logs: Record<string, unknown>[] = [];
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (text) => {
    logs.push({ msg: text });
  });
  const ready = new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', (text) => {
      try {
        resolve((JSON.parse(text) as { port: number }).port);
      } catch (e: unknown) {
        reject(e);
      }
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`${script} exited (${code ?? signal}): ${JSON.stringify(logs)}`)),
    );
  });
  const port = await withTimeout(ready, START_TIMEOUT_MS, `${script} did not start`);
  return {
    process: child,
    pid: child.pid as number,
    address: `127.0.0.1:${port}`,
    logs,
    stop: () => stopChild(child),
  };
}

/** Sends SIGTERM and waits for the exit; SIGKILL when it takes too long. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Resident memory of a process, from `/proc/<pid>/status`. */
export interface MemoryUsage {
  /** VmRSS in MiB. */
  readonly rssMb: number;
  /** VmHWM (peak RSS) in MiB. */
  readonly peakMb: number;
  /** RssAnon in MiB: heap and other private memory. */
  readonly anonMb: number;
  /** RssFile in MiB: mapped files (the node binary, native addons), shared with other processes. */
  readonly fileMb: number;
}

/** Reads VmRSS, VmHWM, RssAnon and RssFile of `pid`. */
export function memoryOf(pid: number): MemoryUsage {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (match === null) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]);
  };
  return {
    rssMb: kib('VmRSS') / KIB_PER_MIB,
    peakMb: kib('VmHWM') / KIB_PER_MIB,
    anonMb: kib('RssAnon') / KIB_PER_MIB,
    fileMb: kib('RssFile') / KIB_PER_MIB,
  };
}

/** CPU time (user + system) `pid` used so far, in milliseconds, from `/proc/<pid>/stat`. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * MS_PER_S) / CLOCK_TICKS_PER_S;
}

/** Rejects with `message` when `promise` takes longer than `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
