/**
 * @module Starts the built sidecar (`dist/src/main.js`) as a child process,
 * as a runtime's pod would, and reads its bound addresses from the
 * `listening` log line.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** Path of the built entry point; `npm test` builds it first (`pretest`). */
export const MAIN_JS = join(import.meta.dirname, '..', '..', 'dist', 'src', 'main.js');

/** Options of {@link startSidecar}. */
export interface SidecarOptions {
  /** Database file; default: a new temp folder's `agenthooks.db`. */
  readonly db?: string;
  /** Extra arguments after `serve`. */
  readonly args?: readonly string[];
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>;
  /** Whether to listen on HTTP too (on a free port). Default true. */
  readonly http?: boolean;
  /**
   * Runs the sidecar as this uid (and the same gid) through `setpriv`, which
   * execs node in place, so the child's pid is the sidecar's and a kill
   * reaches it (CI runs as root).
   */
  readonly uid?: number;
}

/** A running sidecar process. */
export interface SidecarProcess {
  readonly child: ChildProcess;
  readonly db: string;
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
  /** Every log line parsed so far. */
  readonly logs: Record<string, unknown>[];
  /** Resolves with the exit code (or signal name) once the process exits. */
  readonly exited: Promise<number | string>;
  /** Sends a signal. */
  kill(signal: NodeJS.Signals): void;
  /** Resolves when a log line satisfies `predicate`. */
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>>;
}

/** Returns a fresh database path in a new temp folder. */
export function tempDbPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'agenthooks-test-')), 'agenthooks.db');
}

/** Starts the sidecar and resolves once it logged its listeners. */
export async function startSidecar(options: SidecarOptions = {}): Promise<SidecarProcess> {
  const db = options.db ?? tempDbPath();
  const args = [MAIN_JS, 'serve', '--grpc-listen', '127.0.0.1:0', '--db', db];
  args.push('--http-listen', options.http === false ? 'off' : '127.0.0.1:0');
  args.push(...(options.args ?? []));
  const [command, argv] =
    options.uid === undefined
      ? [process.execPath, args]
      : [
          'setpriv',
          [
            `--reuid=${options.uid}`,
            `--regid=${options.uid}`,
            '--clear-groups',
            process.execPath,
            ...args,
          ],
        ];
  const child = spawn(command, argv, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  const waiters = new Set<{
    p: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }>();
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1));
  });
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      line = { msg: text, raw: true };
    }
    logs.push(line);
    for (const w of waiters) {
      if (w.p(line)) {
        waiters.delete(w);
        w.resolve(line);
      }
    }
  });
  const waitForLog = (p: (l: Record<string, unknown>) => boolean) => {
    const found = logs.find(p);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise<Record<string, unknown>>((resolve) => waiters.add({ p, resolve }));
  };
  const listening = await Promise.race([
    waitForLog((l) => l.msg === 'listening'),
    exited.then((code) => {
      throw new Error(`sidecar exited (${code}) before listening: ${JSON.stringify(logs)}`);
    }),
  ]);
  const grpcAll = listening.grpc as string[];
  return {
    child,
    db,
    grpc: grpcAll[0] as string,
    grpcAll,
    http: listening.http as string | undefined,
    health: listening.health as string | undefined,
    metrics: listening.metrics as string | undefined,
    logs,
    exited,
    kill: (signal) => child.kill(signal),
    waitForLog,
  };
}

/** Stops a sidecar with SIGKILL if it still runs. */
export async function killSidecar(sidecar: SidecarProcess | undefined): Promise<void> {
  if (
    sidecar === undefined ||
    sidecar.child.exitCode !== null ||
    sidecar.child.signalCode !== null
  ) {
    return;
  }
  sidecar.kill('SIGKILL');
  await sidecar.exited;
}
