/**
 * @module The load generators of the bench: ghz (gRPC) and vegeta (HTTP,
 * Connect JSON), Go programs pinned and installed by
 * `scripts/install-bench-tools.sh` into `bench/.tools/bin`. They run as
 * their own processes, so the client is never the Node process under test
 * and never the bottleneck of a Node server. Every run answers the same
 * summary: calls, failures by message, the span, and latency percentiles
 * computed here from every call's latency (nearest rank), p99.9 included.
 *
 * Closed loop: a fixed number of calls with a fixed number in flight.
 * Open loop: calls started at a fixed rate whatever the answers do (ghz
 * `--async --rps`, vegeta `-rate`), so a slow answer cannot slow the offered
 * load and hide its own tail (coordinated omission).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../test/support/sidecar.js';
import { MS_PER_S, NS_PER_MS, percentile } from './stats.js';

/** Where the installer puts ghz and vegeta. */
export const TOOLS_BIN = join(REPO_ROOT, 'bench', '.tools', 'bin');
const GHZ = join(TOOLS_BIN, 'ghz');
const VEGETA = join(TOOLS_BIN, 'vegeta');
/** The descriptor set of `proto/` (with imports), which ghz reads instead of reflection. */
const PROTOSET = join(REPO_ROOT, 'gen', 'descriptors.binpb');
/** Largest report a generator may print (ghz details of every call). */
const MAX_OUTPUT_BYTES = 512 * 1024 * 1024;
/** Deadline of each call the generators make, in seconds. */
const CALL_TIMEOUT_S = 30;
/** Percentile ranks reported. */
const P50 = 50;
const P99 = 99;
const P999 = 99.9;

/** Says what is missing when the generators are not installed; undefined when they are. */
export function generatorsMissing(): string | undefined {
  const missing = [GHZ, VEGETA].filter((p) => !existsSync(p));
  return missing.length === 0
    ? undefined
    : `${missing.join(', ')} missing: run scripts/install-bench-tools.sh`;
}

/** What one generator run measured. */
export interface LoadResult {
  /** Calls made (ghz) or requests sent (vegeta). */
  readonly count: number;
  /** Calls that failed, by error message. */
  readonly errors: Record<string, number>;
  /** Wall time of the run, in seconds. */
  readonly seconds: number;
  /** Successful calls per second over the run. */
  readonly perSecond: number;
  /** Latency percentiles of the successful calls, in milliseconds. */
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  /** Every successful call's latency, in milliseconds, sorted. */
  readonly latenciesMs: readonly number[];
}

/** Sums the failures of a result, to check that a run is usable. */
export function failures(result: LoadResult): number {
  return Object.values(result.errors).reduce((a, b) => a + b, 0);
}

/** Throws when a run had failures (a benchmark of errors measures nothing). */
export function requireClean(label: string, result: LoadResult): LoadResult {
  const failed = failures(result);
  if (failed > 0) {
    throw new Error(
      `${label}: ${failed} of ${result.count} calls failed: ${JSON.stringify(result.errors)}`,
    );
  }
  return result;
}

function summarise(
  latenciesNs: number[],
  errors: Record<string, number>,
  count: number,
  seconds: number,
): LoadResult {
  const ms = latenciesNs.map((ns) => ns / NS_PER_MS).sort((a, b) => a - b);
  const pick = (p: number) => (ms.length === 0 ? Number.NaN : percentile(ms, p));
  return {
    count,
    errors,
    seconds,
    perSecond: ms.length / seconds,
    p50: pick(P50),
    p99: pick(P99),
    p999: pick(P999),
    latenciesMs: ms,
  };
}

function run(file: string, args: readonly string[], input?: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`${file} ${args.join(' ')}: ${err.message} ${stderr}`));
        else resolve(stdout);
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A ghz run against one server. */
export interface GhzOptions {
  /** `host:port` of the server. */
  readonly address: string;
  /** Method of `agenthooks.v1.HookService`, such as `DecideToolCall`. */
  readonly method: string;
  /** The request as a serialized message (unary), or length-delimited messages (a stream). */
  readonly binary?: Uint8Array;
  /** The request as proto3 JSON, with ghz templates such as `{{.RequestNumber}}`. */
  readonly json?: unknown;
  /** Calls (streams, for a streaming method). */
  readonly total: number;
  /** Workers; in a closed loop, the calls in flight. */
  readonly concurrency: number;
  /** Open loop: calls started per second, whatever the answers do. */
  readonly rps?: number;
  /** Messages each stream sends (cycling through `binary`'s) before it half-closes. */
  readonly streamCallCount?: number;
  /** Metadata of every call, such as a bearer token. */
  readonly metadata?: Record<string, string>;
}

/** The parts of ghz's JSON report the bench reads. */
interface GhzReport {
  readonly count: number;
  /** Nanoseconds. */
  readonly total: number;
  readonly details?: { latency: number; error: string; status: string }[];
}

/** Runs ghz once and summarises every call it made. */
export async function ghz(options: GhzOptions): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-ghz-'));
  try {
    const args = [
      '--insecure',
      '--protoset',
      PROTOSET,
      '--call',
      `agenthooks.v1.HookService/${options.method}`,
      '--total',
      String(options.total),
      '--concurrency',
      String(options.concurrency),
      '--connections',
      '1',
      '--timeout',
      `${CALL_TIMEOUT_S}s`,
      '--format',
      'json',
    ];
    if (options.binary !== undefined) {
      const file = join(dir, 'data.bin');
      writeFileSync(file, options.binary);
      args.push('--binary-file', file);
    } else {
      const file = join(dir, 'data.json');
      writeFileSync(file, JSON.stringify(options.json ?? {}));
      args.push('--data-file', file);
    }
    if (options.rps !== undefined) args.push('--async', '--rps', String(options.rps));
    if (options.streamCallCount !== undefined) {
      args.push('--stream-call-count', String(options.streamCallCount));
    }
    if (options.metadata !== undefined) args.push('--metadata', JSON.stringify(options.metadata));
    args.push(options.address);
    const report = JSON.parse(await run(GHZ, args)) as GhzReport;
    const latencies: number[] = [];
    const errors: Record<string, number> = {};
    for (const d of report.details ?? []) {
      if (d.status === 'OK' && d.error === '') latencies.push(d.latency);
      else errors[d.error || d.status] = (errors[d.error || d.status] ?? 0) + 1;
    }
    return summarise(latencies, errors, report.count, report.total / 1e9);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A vegeta run: one Connect JSON unary call, POSTed over HTTP/1.1. */
export interface VegetaOptions {
  /** The full URL, such as `http://127.0.0.1:8080/agenthooks.v1.HookService/DecideToolCall`. */
  readonly url: string;
  /** The JSON request body. */
  readonly body: string;
  /** How long to attack, in seconds. */
  readonly seconds: number;
  /** Open loop: requests per second. Without it, a closed loop of `workers` in flight. */
  readonly rate?: number;
  /** Requests in flight (closed loop) or the most workers the open loop may use. */
  readonly workers: number;
}

/** Runs `vegeta attack`, then decodes every result, and summarises them. */
export async function vegeta(options: VegetaOptions): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-vegeta-'));
  try {
    const target = {
      method: 'POST',
      url: options.url,
      header: { 'Content-Type': ['application/json'], 'Connect-Protocol-Version': ['1'] },
      body: Buffer.from(options.body).toString('base64'),
    };
    const targets = join(dir, 'targets.json');
    writeFileSync(targets, `${JSON.stringify(target)}\n`);
    const results = join(dir, 'results.bin');
    const rate =
      options.rate === undefined
        ? ['-rate=0', `-max-workers=${options.workers}`]
        : [`-rate=${options.rate}/1s`, `-max-workers=${options.workers}`];
    await run(VEGETA, [
      'attack',
      '-format=json',
      `-targets=${targets}`,
      `-duration=${options.seconds}s`,
      `-workers=${options.workers}`,
      ...rate,
      `-timeout=${CALL_TIMEOUT_S}s`,
      `-output=${results}`,
    ]);
    const lines = (await run(VEGETA, ['encode', '-to=json', results])).split('\n');
    const latencies: number[] = [];
    const errors: Record<string, number> = {};
    let first = Number.POSITIVE_INFINITY;
    let last = 0;
    let count = 0;
    for (const line of lines) {
      if (line === '') continue;
      const r = JSON.parse(line) as {
        code: number;
        latency: number;
        error: string;
        timestamp: string;
      };
      count += 1;
      const start = Date.parse(r.timestamp);
      first = Math.min(first, start);
      last = Math.max(last, start + r.latency / NS_PER_MS);
      if (r.code === 200 && r.error === '') latencies.push(r.latency);
      else {
        const key = r.error || `HTTP ${r.code}`;
        errors[key] = (errors[key] ?? 0) + 1;
      }
    }
    return summarise(latencies, errors, count, (last - first) / MS_PER_S);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
