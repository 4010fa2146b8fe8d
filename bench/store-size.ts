/**
 * @module `node dist/bench/store-size.js [--operations N]` (after `npm run
 * build && npm run build:bench`): measures what the SQLite file keeps per
 * operation and per tombstone, and what the retention defaults cost at a
 * steady load. It drives N typical operations (`lib/typical-operation.ts`:
 * five hooks, three decisions, completion) through the real sidecar, then
 * restarts it with short retentions so that retention turns them into
 * tombstones, then removes the tombstones. Between phases the sidecar is
 * stopped, which checkpoints the log into the file, and the file is read with
 * `dbstat`. Prints Markdown for the README.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { startReceiver } from '../test/support/receiver.js';
import { type SidecarProcess, startSidecar, tempDbPath } from '../test/support/sidecar.js';
import { createClient, waitForReady } from './lib/grpc-codec.js';
import { measureThroughput } from './lib/load.js';
import { DECISIONS_PER_OPERATION, typicalOperation } from './lib/typical-operation.js';

/** Operations driven by default: enough that B-tree fill, not page rounding, sets the result. */
const DEFAULT_OPERATIONS = 5_000;
/** Calls in flight while loading, kept low so that the run does not crowd a shared machine. */
const CONCURRENCY = 4;
/** How long the client waits for the sidecar's channel. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How long retention may take to expire or remove every operation of a phase. */
const PHASE_TIMEOUT_MS = 120_000;
/** How often the sidecar's log is read while waiting for retention. */
const POLL_MS = 50;
/** A retention long enough that nothing expires while the phase runs. */
const KEEP = '1000d';
/** A retention short enough that everything expires at the next sweep. */
const EXPIRE_NOW = '1ms';
/** Seconds per day, for the projections. */
const SECONDS_PER_DAY = 86_400;
/** Retentions the projection table prices, in days: the defaults and a few alternatives. */
const RETENTION_DAYS = [1, 7, 30] as const;
/** Steady loads the projection table prices, in completed operations per second. */
const RATES = [0.1, 1, 10, 100] as const;
/** Bytes per megabyte and gigabyte (decimal, as disks are sold). */
const MB = 1e6;
const GB = 1e9;

/** What the file holds after a phase. */
interface FileSize {
  /** Bytes of the database file and its `-wal` file. */
  readonly fileBytes: number;
  /** Bytes of the pages in use (not on the free list). */
  readonly usedBytes: number;
  /** Bytes of the free list: kept by the file, reused by later writes. */
  readonly freeBytes: number;
  /** Bytes of pages and of payload per table or index, from `dbstat`. */
  readonly tables: ReadonlyMap<string, { readonly bytes: number; readonly payload: number }>;
  /** Rows of `operations`, `hooks` and tombstones. */
  readonly rows: { readonly operations: number; readonly hooks: number; readonly expired: number };
}

/** Reads the size of a database whose sidecar has stopped (so the log is checkpointed). */
function measure(path: string): FileSize {
  const wal = `${path}-wal`;
  const fileBytes = statSync(path).size + (existsSync(wal) ? statSync(wal).size : 0);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    const free = db.pragma('freelist_count', { simple: true }) as number;
    const tables = new Map(
      db
        .prepare<[], { name: string; bytes: number; payload: number }>(
          'SELECT name, sum(pgsize) AS bytes, sum(payload) AS payload FROM dbstat GROUP BY name',
        )
        .all()
        .map((row) => [row.name, { bytes: row.bytes, payload: row.payload }]),
    );
    const count = (sql: string): number => db.prepare<[], { n: number }>(sql).get()?.n ?? 0;
    return {
      fileBytes,
      usedBytes: (pages - free) * pageSize,
      freeBytes: free * pageSize,
      tables,
      rows: {
        operations: count('SELECT count(*) AS n FROM operations'),
        hooks: count('SELECT count(*) AS n FROM hooks'),
        expired: count("SELECT count(*) AS n FROM operations WHERE status = 'expired'"),
      },
    };
  } finally {
    db.close();
  }
}

/**
 * True for the planner's statistics tables, which `PRAGMA optimize` writes
 * at close, and for the schema, which gains their definitions: a few pages
 * whatever the number of rows, so not a per-row cost.
 */
function isStatistics(name: string): boolean {
  return name.startsWith('sqlite_stat') || name === 'sqlite_schema';
}

/** True when the table or index has more pages or payload in a later phase than in `empty`. */
function grew(name: string, empty: FileSize, ...later: FileSize[]): boolean {
  const before = empty.tables.get(name);
  return later.some((s) => {
    const t = s.tables.get(name);
    return (t?.bytes ?? 0) > (before?.bytes ?? 0) || (t?.payload ?? 0) > (before?.payload ?? 0);
  });
}

/** Bytes of the pages of tables and indexes, the statistics and the schema left out. */
function dataBytes(s: FileSize): number {
  return [...s.tables]
    .filter(([name]) => !isStatistics(name))
    .reduce((sum, [, t]) => sum + t.bytes, 0);
}

/** Sum of `key` over the sidecar's log lines whose message is `msg`. */
function logTotal(sidecar: SidecarProcess, msg: string, key: string): number {
  return sidecar.logs
    .filter((line) => line.msg === msg)
    .reduce((sum, line) => sum + Number(line[key] ?? 0), 0);
}

/** Polls the sidecar's log until the total of `key` over `msg` lines reaches `n`. */
async function waitForTotal(
  sidecar: SidecarProcess,
  msg: string,
  key: string,
  n: number,
): Promise<void> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  while (logTotal(sidecar, msg, key) < n) {
    if (Date.now() > deadline) {
      throw new Error(
        `${msg}: ${logTotal(sidecar, msg, key)} of ${n} within ${PHASE_TIMEOUT_MS} ms`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Runs a sidecar on `db` with the two retentions, runs `fn`, then stops it politely. */
async function withSidecar(
  db: string,
  retention: string,
  tombstoneRetention: string,
  fn: (sidecar: SidecarProcess) => Promise<void>,
): Promise<void> {
  const sidecar = await startSidecar({
    db,
    http: false,
    args: ['--retention', retention, '--tombstone-retention', tombstoneRetention],
  });
  try {
    await fn(sidecar);
  } finally {
    // SIGTERM closes the store; the last connection's close checkpoints the log.
    sidecar.kill('SIGTERM');
    await sidecar.exited;
  }
}

/** Formats bytes per row. */
function perRow(bytes: number, rows: number): string {
  return (bytes / rows).toFixed(0);
}

/** Formats a size in MB or GB. */
function size(bytes: number): string {
  return bytes >= GB ? `${(bytes / GB).toFixed(1)} GB` : `${(bytes / MB).toFixed(0)} MB`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { operations: { type: 'string' } } });
  const operations = Number(values.operations ?? DEFAULT_OPERATIONS);
  if (!Number.isSafeInteger(operations) || operations < 1) {
    throw new Error('--operations must be a whole number >= 1');
  }
  const receiver = await startReceiver({ answer: { json: { decision: 'allow' } }, record: false });
  const db = tempDbPath();
  try {
    await withSidecar(db, KEEP, KEEP, async () => undefined);
    const empty = measure(db);

    let perSecond = 0;
    await withSidecar(db, KEEP, KEEP, async (sidecar) => {
      const client = createClient(sidecar.grpc);
      try {
        await waitForReady(client, CONNECT_TIMEOUT_MS);
        const operation = typicalOperation(client, receiver.url);
        const run = await measureThroughput(
          (i) => operation.drive(`op_${randomUUID()}`, i),
          CONCURRENCY,
          0,
          operations,
        );
        perSecond = run.perSecond;
      } finally {
        client.close();
      }
    });
    const loaded = measure(db);

    await withSidecar(db, EXPIRE_NOW, KEEP, (sidecar) =>
      waitForTotal(sidecar, 'operations expired', 'operations', operations),
    );
    const tombstoned = measure(db);

    await withSidecar(db, EXPIRE_NOW, EXPIRE_NOW, (sidecar) =>
      waitForTotal(sidecar, 'tombstones removed', 'tombstones', operations),
    );
    const removed = measure(db);

    const opBytes = (dataBytes(loaded) - dataBytes(empty)) / operations;
    const tombstoneBytes = (dataBytes(tombstoned) - dataBytes(empty)) / operations;
    const names = [...new Set([...loaded.tables.keys(), ...tombstoned.tables.keys()])]
      .filter((name) => !isStatistics(name) && grew(name, empty, loaded, tombstoned))
      .sort();
    const lines = [
      `${operations} operations (op_<uuid> ids, ${DECISIONS_PER_OPERATION} decisions each, ${perSecond.toFixed(0)} ops/s at c=${CONCURRENCY}), receiver ${receiver.url}`,
      '',
      '| phase | file (db + wal) | pages in use | free list | operations | hooks | tombstones |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...(
        [
          ['empty', empty],
          ['loaded', loaded],
          ['expired (tombstones)', tombstoned],
          ['tombstones removed', removed],
        ] as const
      ).map(
        ([name, s]) =>
          `| ${name} | ${s.fileBytes} | ${s.usedBytes} | ${s.freeBytes} | ${s.rows.operations} | ${s.rows.hooks} | ${s.rows.expired} |`,
      ),
      '',
      `bytes per operation (pages of tables and indexes): ${opBytes.toFixed(0)}; per tombstone: ${tombstoneBytes.toFixed(0)}`,
      `file growth per operation: ${perRow(loaded.fileBytes - empty.fileBytes, operations)}`,
      '',
      '| table or index | bytes per operation (pages) | payload per operation | per tombstone (pages) |',
      '| --- | --- | --- | --- |',
      ...names.map((name) => {
        const before = empty.tables.get(name)?.bytes ?? 0;
        const payload = empty.tables.get(name)?.payload ?? 0;
        const full = loaded.tables.get(name);
        const tomb = tombstoned.tables.get(name)?.bytes ?? 0;
        return `| ${name} | ${perRow((full?.bytes ?? 0) - before, operations)} | ${perRow((full?.payload ?? 0) - payload, operations)} | ${perRow(tomb - before, operations)} |`;
      }),
      '',
      '| completed ops/s | ' +
        RETENTION_DAYS.map((d) => `${d}d of operations`).join(' | ') +
        ' | ' +
        RETENTION_DAYS.map((d) => `${d}d of tombstones`).join(' | ') +
        ' |',
      `| --- |${' --- |'.repeat(2 * RETENTION_DAYS.length)}`,
      ...RATES.map((rate) => {
        const ops = RETENTION_DAYS.map((d) => size(rate * d * SECONDS_PER_DAY * opBytes));
        const tombs = RETENTION_DAYS.map((d) => size(rate * d * SECONDS_PER_DAY * tombstoneBytes));
        return `| ${rate} | ${ops.join(' | ')} | ${tombs.join(' | ')} |`;
      }),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await receiver.close();
    rmSync(dirname(db), { recursive: true, force: true });
  }
}

await main();
