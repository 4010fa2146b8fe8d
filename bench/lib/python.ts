/**
 * @module The Python grpcio client of the bench: a venv under `bench/.venv`
 * with the pinned `bench/requirements.txt` (installed with pip when missing
 * or when the pins changed), and a runner of `bench/python/client.py`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, scrubbedEnv, withTimeout } from '../../test/support/sidecar.js';

/** The bench's venv. */
export const VENV_DIR = join(REPO_ROOT, 'bench', '.venv');
/** The pinned requirements of the venv. */
export const REQUIREMENTS = join(REPO_ROOT, 'bench', 'requirements.txt');
/** The Python client script. */
export const CLIENT_PY = join(REPO_ROOT, 'bench', 'python', 'client.py');
/** The generated Python client, used for its messages when present. */
export const GENERATED_CLIENT_DIR = join(REPO_ROOT, 'clients', 'python');
/** Records which requirements the venv was installed from. */
const STAMP = join(VENV_DIR, '.bench-requirements.sha256');
/** How long one Python client run may take. */
const RUN_TIMEOUT_MS = 120_000;

/** The venv's Python interpreter. */
export const VENV_PYTHON = join(VENV_DIR, 'bin', 'python');

/**
 * Creates the venv and installs the pinned requirements unless they are
 * already installed. Answers why Python cannot run when it cannot (no
 * python3, pip failed), so the bench reports it instead of failing.
 */
export function ensurePythonVenv(
  log: (line: string) => void,
): { ok: true } | { ok: false; reason: string } {
  const want = createHash('sha256').update(readFileSync(REQUIREMENTS)).digest('hex');
  try {
    if (!existsSync(VENV_PYTHON)) {
      log('creating bench/.venv');
      execFileSync('python3', ['-m', 'venv', VENV_DIR], { stdio: 'pipe' });
    }
    if (!existsSync(STAMP) || readFileSync(STAMP, 'utf8').trim() !== want) {
      log('installing bench/requirements.txt into bench/.venv (pip)');
      execFileSync(
        join(VENV_DIR, 'bin', 'pip'),
        ['install', '--quiet', '--disable-pip-version-check', '-r', REQUIREMENTS],
        { stdio: 'pipe' },
      );
      writeFileSync(STAMP, `${want}\n`);
    }
    return { ok: true };
  } catch (e: unknown) {
    const err = e as { message?: string; stderr?: Buffer };
    return {
      ok: false,
      reason: `${err.message ?? String(e)} ${err.stderr?.toString() ?? ''}`.trim(),
    };
  }
}

/** What one Python client run measured. */
export interface PythonRun {
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly count: number;
  readonly requestBytes: number;
  /** Where its messages came from: `clients/python` or generated at bench time. */
  readonly messages: string;
  readonly grpcio: string;
}

/** Options of {@link runPythonClient}. */
export interface PythonClientOptions {
  readonly target: string;
  readonly method: string;
  /** Wire bytes of the DecideToolCall request to send. */
  readonly request: Uint8Array;
  /** True against the echo baseline. */
  readonly echo: boolean;
  readonly warmup: number;
  readonly calls: number;
}

/** Runs the Python client once and answers what it measured. */
export async function runPythonClient(options: PythonClientOptions): Promise<PythonRun> {
  const env = scrubbedEnv();
  if (existsSync(GENERATED_CLIENT_DIR)) env.PYTHONPATH = GENERATED_CLIENT_DIR;
  const args = [
    CLIENT_PY,
    '--target',
    options.target,
    '--method',
    options.method,
    '--request-hex',
    Buffer.from(options.request).toString('hex'),
    '--warmup',
    String(options.warmup),
    '--calls',
    String(options.calls),
    '--repo-root',
    REPO_ROOT,
  ];
  if (options.echo) args.push('--echo');
  const child = spawn(VENV_PYTHON, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await withTimeout(
    new Promise<number | null>((resolve) => child.once('exit', resolve)),
    RUN_TIMEOUT_MS,
    'the Python client did not finish',
  ).catch((e: unknown) => {
    child.kill('SIGKILL');
    throw e;
  });
  if (code !== 0) throw new Error(`the Python client failed (${code}): ${stderr.trim()}`);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as PythonRun;
}
