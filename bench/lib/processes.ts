/**
 * @module Child processes of the bench, started by the one launcher of the
 * tests and the bench (`test/support/sidecar.ts`, from a scrubbed
 * environment): the real sidecar (`dist/src/main.js serve` on 127.0.0.1 port
 * 0 with a fresh temp database as its working directory), the echo baseline
 * server and the webhook receiver; plus what `/proc` says about a process
 * (RSS, CPU time). Node flags (such as `--cpu-prof`) are passed to any child.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  launchNode,
  type NodeChild,
  type SidecarProcess,
  startSidecar,
  tempDbPath,
  withTimeout,
} from '../../test/support/sidecar.js';
import { MS_PER_S, NS_PER_MS } from './stats.js';

/** The built bench folder (`dist/bench`; this file is `dist/bench/lib/processes.js` once built). */
export const BENCH_DIST = join(import.meta.dirname, '..');

/** How long a bench child may take to say where it listens. */
const START_TIMEOUT_MS = 20_000;
/** Clock ticks per second of `/proc/<pid>/stat` CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_S = 100;
/** Kibibytes per mebibyte. */
const KIB_PER_MIB = 1024;

/** A started bench child that listens somewhere. */
export interface BenchChild extends NodeChild {
  /** `host:port` it listens on. */
  readonly address: string;
  /** Every port it printed, by name (`port`, and `httpPort` for the floor). */
  readonly ports: Record<string, number>;
}

/** Options of {@link startBenchSidecar}. */
export interface BenchSidecarOptions {
  /** Node flags placed before the entry point, such as `--cpu-prof`. */
  readonly nodeFlags?: readonly string[];
  /** Arguments after `serve`, added to the defaults. */
  readonly args?: readonly string[];
}

/**
 * Starts the real sidecar as a runtime's pod would: `node dist/src/main.js
 * serve` on 127.0.0.1 port 0 (gRPC and HTTP), a fresh temp database, and
 * the default log level. Its working directory is the database's temp
 * folder, so a heap snapshot lands there; `stop()` removes the folder.
 */
export function startBenchSidecar(options: BenchSidecarOptions = {}): Promise<SidecarProcess> {
  const db = tempDbPath();
  return startSidecar({
    db,
    cwd: dirname(db),
    nodeFlags: options.nodeFlags,
    args: options.args,
  });
}

/**
 * Starts a bench child (`dist/bench/<script>.js`) that prints one JSON line
 * `{"port": N, ...}` on stdout once it listens on 127.0.0.1.
 */
export async function startBenchChild(
  script: string,
  args: readonly string[] = [],
  nodeFlags: readonly string[] = [],
): Promise<BenchChild> {
  const child = launchNode({ args: [...nodeFlags, join(BENCH_DIST, script), ...args] });
  try {
    const line = await withTimeout(
      child.waitForOutput(() => true),
      START_TIMEOUT_MS,
      `${script} did not start`,
    );
    const ports = JSON.parse(line) as Record<string, number>;
    return { ...child, address: `127.0.0.1:${ports.port}`, ports };
  } catch (e: unknown) {
    await child.destroy();
    const reason = e instanceof Error ? e.message : String(e);
    throw new Error(`${script} did not start (${reason}): ${JSON.stringify(child.logs)}`);
  }
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

/**
 * CPU time `pid` used so far, in milliseconds: the sum of its threads' run
 * time in `/proc/<pid>/task/<tid>/schedstat` (nanoseconds), or, where the
 * kernel keeps no schedstat, user + system time from `/proc/<pid>/stat`.
 * `stat` counts in clock ticks of 10 ms: over a window of a few hundred ms
 * of CPU, one tick either side is a few percent of a reading, more than
 * some of the differences the bench compares (see BENCHMARKS.md).
 * A thread that exits between two readings takes its time out of the sum;
 * a Node process keeps its threads (main, V8's workers, libuv's pool).
 */
export function cpuMsOf(pid: number): number {
  const runNs = schedstatNsOf(pid);
  if (runNs !== undefined) return runNs / NS_PER_MS;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * MS_PER_S) / CLOCK_TICKS_PER_S;
}

/** Whether this kernel keeps per-thread run times (this process's own reads non-zero). */
const SCHEDSTAT_KEPT = ((): boolean => {
  try {
    const line = readFileSync('/proc/self/schedstat', 'utf8');
    return Number(line.slice(0, line.indexOf(' '))) > 0;
  } catch {
    return false;
  }
})();

/**
 * The summed run time of `pid`'s threads in nanoseconds, or undefined without schedstat.
 * Throws, as the `stat` reading does, when the process is gone: its main thread's file
 * must have been read.
 */
function schedstatNsOf(pid: number): number | undefined {
  if (!SCHEDSTAT_KEPT) return undefined;
  let ns = 0;
  let leaderRead = false;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let line: string;
    try {
      line = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
    } catch (e: unknown) {
      // A thread that exited since the listing.
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ESRCH') continue;
      throw e;
    }
    const runNs = Number(line.slice(0, line.indexOf(' ')));
    if (!Number.isFinite(runNs)) throw new Error(`unreadable /proc/${pid}/task/${tid}/schedstat`);
    ns += runNs;
    if (tid === String(pid)) leaderRead = true;
  }
  if (!leaderRead) throw new Error(`process ${pid} exited while its CPU time was read`);
  return ns;
}
