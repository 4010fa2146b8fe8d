/**
 * @module Drives `store-child.mjs`: the built store in another process,
 * optionally as another user (`runuser -u nobody`), for the tests that need a
 * second writer process or an unprivileged sidecar. Requires `npm run build`.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
/** The script every child runs. */
const SCRIPT = join(HERE, 'store-child.mjs');
/** How long a child may take to answer one command before the test fails. */
const REPLY_TIMEOUT_MS = 20_000;

/** The user id of `nobody`, which owns the folders of the unprivileged tests. */
export const NOBODY_UID = 65534;
/** The group id of `nogroup`. */
export const NOBODY_GID = 65534;

/** What a child answered for a failed command. */
export interface ChildError {
  readonly name?: string;
  readonly kind?: string;
  readonly reason?: string;
  readonly message: string;
  /** The SQLite or Node error code of the cause, if any. */
  readonly code?: string;
}

/** The rejection of {@link StoreChild.call} when the child's command failed. */
export class ChildCommandError extends Error {
  override readonly name = 'ChildCommandError';
  readonly kind: string | undefined;
  readonly reason: string | undefined;
  readonly code: string | undefined;

  constructor(error: ChildError) {
    super(error.message);
    this.kind = error.kind;
    this.reason = error.reason;
    this.code = error.code;
  }
}

/** A store in another process. */
export interface StoreChild {
  /** The child's user id, as it reported it. */
  readonly uid: number;
  /** Sends one command and resolves to its value; rejects with a {@link ChildCommandError}. */
  call<T = unknown>(cmd: string, args?: Record<string, unknown>): Promise<T>;
  /** Sends one command and resolves to its error; fails when the command succeeded. */
  failure(cmd: string, args?: Record<string, unknown>): Promise<ChildCommandError>;
}

/** Options of {@link useStoreChildren}'s `spawn`. */
export interface SpawnOptions {
  /** Runs the child as this user through `runuser -u USER --`. Default: this process's user. */
  readonly user?: string;
}

/**
 * Fails fast when `dist/` is missing or older than `src/store/`, so that the
 * child never runs stale code.
 *
 * @throws Error naming the first stale file and the command that fixes it.
 */
export function assertFreshBuild(): void {
  const srcDir = join(ROOT, 'src', 'store');
  for (const file of listFiles(srcDir)) {
    if (!file.endsWith('.ts')) continue;
    const built = join(
      ROOT,
      'dist',
      'src',
      'store',
      relative(srcDir, file).replace(/\.ts$/, '.js'),
    );
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(file).mtimeMs) {
      throw new Error(
        `${relative(ROOT, built)} is missing or older than its source: run npm run build`,
      );
    }
  }
}

/** True when `runuser` can start a process as `nobody` here (root with util-linux). */
export function canRunAsNobody(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = spawnSync('runuser', ['-u', 'nobody', '--', 'true'], { stdio: 'ignore' });
  return probe.status === 0;
}

/**
 * Gives the calling test file a `spawn` that starts store children; every
 * child is ended (stdin closed, then SIGKILL if it lingers) after each test.
 */
export function useStoreChildren(): { spawn(options?: SpawnOptions): Promise<StoreChild> } {
  const running: ChildProcessWithoutNullStreams[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map(endChild));
  });
  return {
    async spawn(options = {}) {
      const child =
        options.user === undefined
          ? spawn(process.execPath, [SCRIPT], { cwd: ROOT })
          : spawn('runuser', ['-u', options.user, '--', process.execPath, SCRIPT], { cwd: ROOT });
      running.push(child);
      return connect(child);
    },
  };
}

async function connect(child: ChildProcessWithoutNullStreams): Promise<StoreChild> {
  const pending = new Map<number, (reply: Reply) => void>();
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<never>((_resolve, reject) => {
    child.once('exit', (code, signal) => {
      reject(new Error(`store child exited (${code ?? signal}): ${stderr}`));
    });
  });
  // Keeps a child that dies between commands from failing the test run.
  exited.catch(() => undefined);
  createInterface({ input: child.stdout }).on('line', (line) => {
    const reply = JSON.parse(line) as Reply;
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });

  let nextId = 0;
  const send = (cmd: string, args: Record<string, unknown>, id: number): Promise<Reply> => {
    const replied = new Promise<Reply>((resolve) => pending.set(id, resolve));
    if (cmd !== '') child.stdin.write(`${JSON.stringify({ id, cmd, ...args })}\n`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`store child did not answer ${cmd || 'ready'}: ${stderr}`)),
        REPLY_TIMEOUT_MS,
      );
    });
    return Promise.race([replied, exited, timeout]).finally(() => clearTimeout(timer));
  };

  // The child announces itself with id 0 before reading any command.
  const ready = await send('', {}, 0);
  const uid = (ready.value as { uid: number }).uid;

  const call = async <T>(cmd: string, args: Record<string, unknown> = {}): Promise<T> => {
    nextId += 1;
    const reply = await send(cmd, args, nextId);
    if (!reply.ok) throw new ChildCommandError(reply.error as ChildError);
    return reply.value as T;
  };
  return {
    uid,
    call,
    async failure(cmd, args) {
      try {
        await call(cmd, args);
      } catch (e: unknown) {
        if (e instanceof ChildCommandError) return e;
        throw e;
      }
      throw new Error(`expected ${cmd} to fail in the store child`);
    },
  };
}

/** One line a child writes. */
interface Reply {
  readonly id: number;
  readonly ok: boolean;
  readonly value?: unknown;
  readonly error?: ChildError;
}

async function endChild(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Closing stdin makes the child close its store and exit.
  child.stdin.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), REPLY_TIMEOUT_MS / 4);
  await exited;
  clearTimeout(timer);
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listFiles(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}
