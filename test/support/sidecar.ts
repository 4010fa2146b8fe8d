/**
 * @module The one launcher of the tests and the bench. It starts node child
 * processes (the built sidecar, `dist/src/main.js serve`, as a runtime's pod
 * would; or a bench child) from a scrubbed environment, so that the host's
 * agenthooks, QStash or OpenTelemetry settings cannot leak into what is
 * measured; reads the sidecar's bound addresses from its `listening` log
 * line; and removes the temp folders it made once the child is stopped.
 *
 * The bench compiles this file too (`tsconfig.bench.json`), to
 * `dist/test/support/sidecar.js`; paths are found from the repository root,
 * so they hold in both places.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

/** The nearest folder above `from` that holds `package.json`. */
function findRepoRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** The repository root, whether this file runs from `test/support/` or `dist/test/support/`. */
export const REPO_ROOT = findRepoRoot(import.meta.dirname);
/** Path of the built entry point; `npm test` and `npm run bench` build it first. */
export const MAIN_JS = join(REPO_ROOT, 'dist', 'src', 'main.js');

/** Prefixes of the variables a child never inherits: they configure the sidecar or its exporters. */
export const SCRUBBED_ENV_PREFIXES: readonly string[] = [
  'AGENT_HOOK_',
  'AGENTHOOKS_',
  'QSTASH_',
  'OTEL_',
];
/** Variables a child never inherits: the delivery's base URLs and bypass secret, and node's flags. */
export const SCRUBBED_ENV_NAMES: ReadonlySet<string> = new Set([
  'APP_URL',
  'INTERNAL_APP_URL',
  'VERCEL_AUTOMATION_BYPASS_SECRET',
  'NODE_OPTIONS',
]);

/** How long a child may take to say it listens. */
const START_TIMEOUT_MS = 20_000;
/** How long a child may take to exit after SIGTERM before it gets SIGKILL. */
const STOP_TIMEOUT_MS = 15_000;

/**
 * This process's environment without any variable that configures the
 * sidecar (see {@link SCRUBBED_ENV_PREFIXES} and {@link SCRUBBED_ENV_NAMES}),
 * then `explicit` on top: a test sets what the child sees on purpose.
 */
export function scrubbedEnv(explicit: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (SCRUBBED_ENV_NAMES.has(key)) continue;
    if (SCRUBBED_ENV_PREFIXES.some((prefix) => key.startsWith(prefix))) continue;
    env[key] = value;
  }
  return { ...env, ...explicit };
}

/** Temp folders this launcher made and has not removed yet. */
const ownedTempDirs = new Set<string>();
/** Children started and not yet exited, with the temp folders each one uses. */
const live = new Map<ChildProcess, readonly string[]>();

/**
 * Returns a fresh database path in a new temp folder. The folder goes when a
 * sidecar on that database is stopped with `stop()`, `destroy()` or
 * {@link killSidecar}; a bare `kill()` keeps it, for a restart on the same file.
 */
export function tempDbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-test-'));
  ownedTempDirs.add(dir);
  return join(dir, 'agenthooks.db');
}

/** Removes the folders among `dirs` that this launcher made and no running child uses. */
function removeTempDirs(dirs: readonly string[]): void {
  const inUse = new Set([...live.values()].flat());
  for (const dir of dirs) {
    if (!ownedTempDirs.has(dir) || inUse.has(dir)) continue;
    rmSync(dir, { recursive: true, force: true });
    ownedTempDirs.delete(dir);
  }
}

/** Options of {@link launchNode}. */
export interface LaunchOptions {
  /** Everything after `node`: node flags, the script, its arguments. */
  readonly args: readonly string[];
  /** Variables set on top of the scrubbed environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory; default this process's. */
  readonly cwd?: string;
  /**
   * Runs node as this uid (and the same gid) through `setpriv`, which execs
   * node in place, so the child's pid is node's and a kill reaches it (CI
   * runs as root).
   */
  readonly uid?: number;
  /** Folders the child works in; those this launcher made are removed when it is stopped. */
  readonly dirs?: readonly string[];
}

/** A running node child. */
export interface NodeChild {
  readonly child: ChildProcess;
  readonly pid: number;
  /** `process.hrtime.bigint()` just before the spawn. */
  readonly spawnedAt: bigint;
  /** Every stderr line so far, parsed as JSON (else `{ msg, raw: true }`). */
  readonly logs: Record<string, unknown>[];
  /** Every stdout line so far. */
  readonly output: string[];
  /**
   * Resolves with the exit code (or signal name) once the process exited and
   * its output was read, so `logs` is complete by then.
   */
  readonly exited: Promise<number | string>;
  /** Sends a signal; the temp folders stay (see {@link NodeChild.stop}). */
  kill(signal: NodeJS.Signals): void;
  /** Resolves when a log line satisfies `predicate`; rejects if the process ends first. */
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>>;
  /** Resolves when a stdout line satisfies `predicate`; rejects if the process ends first. */
  waitForOutput(predicate: (line: string) => boolean): Promise<string>;
  /**
   * Stops it politely (SIGTERM, SIGKILL after a grace period), waits for the
   * exit and removes its temp folders. Idempotent.
   */
  stop(): Promise<void>;
  /** Stops it with SIGKILL, waits for the exit and removes its temp folders. Idempotent. */
  destroy(): Promise<void>;
}

/** A line waiter of {@link lineWaiters}. */
interface Waiter<T> {
  readonly predicate: (line: T) => boolean;
  readonly resolve: (line: T) => void;
  readonly reject: (e: Error) => void;
}

/** Lines of one stream, and promises of the first line that satisfies a predicate. */
function lineWaiters<T>(lines: T[], ended: Promise<unknown>, what: string) {
  const waiters = new Set<Waiter<T>>();
  let done = false;
  void ended.then(() => {
    done = true;
    for (const w of waiters) w.reject(new Error(`the process ended before ${what}`));
    waiters.clear();
  });
  return {
    push(line: T) {
      lines.push(line);
      for (const w of waiters) {
        if (w.predicate(line)) {
          waiters.delete(w);
          w.resolve(line);
        }
      }
    },
    wait(predicate: (line: T) => boolean): Promise<T> {
      const found = lines.find(predicate);
      if (found !== undefined) return Promise.resolve(found);
      if (done) return Promise.reject(new Error(`the process ended before ${what}`));
      return new Promise<T>((resolve, reject) => waiters.add({ predicate, resolve, reject }));
    },
  };
}

/** Starts `node …args` from the scrubbed environment (see {@link scrubbedEnv}). */
export function launchNode(options: LaunchOptions): NodeChild {
  const [command, argv] =
    options.uid === undefined
      ? [process.execPath, [...options.args]]
      : [
          'setpriv',
          [
            `--reuid=${options.uid}`,
            `--regid=${options.uid}`,
            '--clear-groups',
            process.execPath,
            ...options.args,
          ],
        ];
  const spawnedAt = process.hrtime.bigint();
  const child = spawn(command, argv, {
    env: scrubbedEnv(options.env),
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const dirs = options.dirs ?? [];
  live.set(child, dirs);
  child.once('close', () => live.delete(child));
  const logs: Record<string, unknown>[] = [];
  // 'close', not 'exit': it comes once stdout and stderr are read to the end.
  const exited = new Promise<number | string>((resolve) => {
    child.once('close', (code, signal) => resolve(code ?? signal ?? -1));
    // A spawn failure (such as ENOENT) is followed by 'close' with the negative errno.
    child.once('error', (e) => logs.push({ msg: e.message, raw: true }));
  });
  const output: string[] = [];
  const logWaiters = lineWaiters(logs, exited, 'the log line');
  const outputWaiters = lineWaiters(output, exited, 'the output line');
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      line = { msg: text, raw: true };
    }
    logWaiters.push(line);
  });
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) =>
    outputWaiters.push(text),
  );
  const running = () => child.exitCode === null && child.signalCode === null;
  const end = async (signal: NodeJS.Signals) => {
    if (running()) {
      child.kill(signal);
      if (signal !== 'SIGKILL') {
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
    }
    await exited;
    removeTempDirs(dirs);
  };
  return {
    child,
    pid: child.pid as number,
    spawnedAt,
    logs,
    output,
    exited,
    kill: (signal) => child.kill(signal),
    waitForLog: (predicate) => logWaiters.wait(predicate),
    waitForOutput: (predicate) => outputWaiters.wait(predicate),
    stop: () => end('SIGTERM'),
    destroy: () => end('SIGKILL'),
  };
}

/** Stops, with SIGKILL, every child this process started and has not stopped. */
export function killRemainingChildren(): void {
  const dirs = [...live.values()].flat();
  for (const child of live.keys()) child.kill('SIGKILL');
  live.clear();
  removeTempDirs(dirs);
}

/** Rejects with `message` when `promise` takes longer than `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Options of {@link startSidecar}. */
export interface SidecarOptions {
  /**
   * Database file; default: a new temp folder's `agenthooks.db` (see
   * {@link tempDbPath}). `false` passes no `--db` and makes no folder, for a
   * database named by `env` (`AGENTHOOKS_DB`, such as a PostgreSQL URL).
   */
  readonly db?: string | false;
  /** Extra arguments after `serve`. */
  readonly args?: readonly string[];
  /** Node flags before the entry point, such as `--cpu-prof`. */
  readonly nodeFlags?: readonly string[];
  /** Variables set on top of the scrubbed environment. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Whether to listen on HTTP too (on a free loopback port), or the address
   * to listen on (the flag takes one value). Default true.
   */
  readonly http?: boolean | string;
  /**
   * Whether to serve the admin console (on a free port). Default false: its
   * default address is fixed, and sidecars of parallel tests would collide.
   */
  readonly admin?: boolean;
  /** Working directory; default this process's. */
  readonly cwd?: string;
  /** Runs the sidecar as this uid (and the same gid); see {@link LaunchOptions.uid}. */
  readonly uid?: number;
}

/** A running sidecar process. */
export interface SidecarProcess extends NodeChild {
  /** The database file; empty with `db: false`. */
  readonly db: string;
  /** The database's folder; empty with `db: false`. */
  readonly dir: string;
  /** `host:port` of the first gRPC listener. */
  readonly grpc: string;
  /** Every gRPC listener, as logged. */
  readonly grpcAll: string[];
  /** `host:port` of the HTTP listener, if any. */
  readonly http?: string;
  /** `host:port` of the health-only listener, if any. */
  readonly health?: string;
  /** `host:port` of the metrics-only listener, if any. */
  readonly metrics?: string;
  /** `host:port` of the admin console, if any. */
  readonly admin?: string;
}

/**
 * Starts `dist/src/main.js serve` on 127.0.0.1 port 0 (gRPC, and HTTP unless
 * `http: false`) and resolves once it logged its listeners.
 *
 * @example
 * const sidecar = await startSidecar({ args: ['--handler-timeout', '0.5'] });
 * try { … } finally { await killSidecar(sidecar); }
 */
export async function startSidecar(options: SidecarOptions = {}): Promise<SidecarProcess> {
  const db = options.db === false ? '' : (options.db ?? tempDbPath());
  const dir = db === '' ? '' : dirname(db);
  const launched = launchNode({
    args: [
      ...(options.nodeFlags ?? []),
      MAIN_JS,
      'serve',
      '--grpc-listen',
      '127.0.0.1:0',
      '--http-listen',
      typeof options.http === 'string'
        ? options.http
        : options.http === false
          ? 'off'
          : '127.0.0.1:0',
      '--admin-listen',
      options.admin === true ? '127.0.0.1:0' : 'off',
      ...(db === '' ? [] : ['--db', db]),
      ...(options.args ?? []),
    ],
    env: options.env,
    cwd: options.cwd,
    uid: options.uid,
    dirs: dir === '' ? [] : [dir],
  });
  let listening: Record<string, unknown>;
  try {
    listening = await withTimeout(
      launched.waitForLog((l) => l.msg === 'listening'),
      START_TIMEOUT_MS,
      'the sidecar did not log listening',
    );
  } catch (e: unknown) {
    if (options.db === undefined) {
      await launched.destroy();
    } else {
      // The caller's database folder stays, for the caller to look into.
      launched.kill('SIGKILL');
      await launched.exited;
    }
    const reason = e instanceof Error ? e.message : String(e);
    throw new Error(
      `sidecar did not start (${reason}; exit ${await launched.exited}): ${JSON.stringify(launched.logs)}`,
    );
  }
  const grpcAll = listening.grpc as string[];
  return {
    ...launched,
    db,
    dir,
    grpc: grpcAll[0] as string,
    grpcAll,
    http: listening.http as string | undefined,
    health: listening.health as string | undefined,
    metrics: listening.metrics as string | undefined,
    admin: listening.admin as string | undefined,
  };
}

/**
 * Ends a sidecar for good: SIGKILL if it still runs, then removes its temp
 * folder. Does nothing for `undefined`, and nothing more the second time. To
 * restart on the same database, use `sidecar.kill('SIGKILL')` and await
 * `sidecar.exited` instead.
 */
export async function killSidecar(sidecar: SidecarProcess | undefined): Promise<void> {
  await sidecar?.destroy();
}
