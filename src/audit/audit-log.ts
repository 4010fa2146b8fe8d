/**
 * @module The decision audit log: every decision the sidecar answers becomes
 * a `DecisionRecord`, handed to the sinks the operator turned on (the store,
 * JSON lines on stdout, an HTTP endpoint) and to in-process subscribers (the
 * admin console's live view). Recording never blocks or fails a decision:
 * each sink buffers a bounded number of entries and writes them in batches
 * off the decision path; a full buffer, or a sink that keeps failing, drops
 * the oldest entries and counts them.
 */
import { write as fsWrite } from 'node:fs';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import { toJsonString } from '@bufbuild/protobuf';
import { Agent, type Dispatcher, request } from 'undici';
import { type DecisionRecord, DecisionRecordSchema } from '../../gen/agenthooks/v1/audit_pb.js';
import type { Logger } from '../log.js';
import type { DecisionRow, DecisionStore } from '../store/store.js';
import { encodeDecisionRecord } from './record-codec.js';

const gzip = promisify(gzipCallback);

/** Default bound of the entries each sink buffers (`--audit-buffer`). */
export const DEFAULT_AUDIT_BUFFER = 10_000;

/**
 * Default bound of the estimated bytes each sink buffers
 * (`--audit-buffer-bytes`): 64 MiB. With recorded payloads an entry can
 * weigh megabytes, and the entry count alone would let a sink that cannot
 * write hold gigabytes before it dropped anything.
 */
export const DEFAULT_AUDIT_BUFFER_BYTES = 64 * 1024 * 1024;

/** Estimated heap bytes of an entry without its payload (ids, hooks, times). */
const ENTRY_OVERHEAD_BYTES = 1_024;

/** Estimated heap bytes of a hook outcome or a chain entry, beside its strings. */
const OUTCOME_OVERHEAD_BYTES = 128;
const CHAIN_ENTRY_OVERHEAD_BYTES = 16;

/**
 * Estimated heap bytes a buffered entry holds: each of its strings twice
 * (the record's text, and the proto JSON the stdout and HTTP sinks make of
 * it) at two bytes a character, the worst case of a V8 string, plus the
 * rest. The payload is most of it when payloads are recorded; without
 * them, a chain (128 ids of 256 bytes) or a receiver's deny reason can
 * still outweigh the fixed part many times over.
 */
export function entryBytes(record: DecisionRecord): number {
  let chars =
    record.payloadJson.length +
    record.decisionId.length +
    record.operationId.length +
    record.toolCallId.length +
    record.identifier.length +
    record.apiName.length +
    record.reason.length +
    record.hookId.length;
  for (const id of record.operationChain) chars += id.length;
  for (const o of record.outcomes) {
    chars += o.hookId.length + o.operationId.length + o.errorCode.length + o.message.length;
  }
  return (
    ENTRY_OVERHEAD_BYTES +
    4 * chars +
    OUTCOME_OVERHEAD_BYTES * record.outcomes.length +
    CHAIN_ENTRY_OVERHEAD_BYTES * record.operationChain.length
  );
}

/**
 * Longest time between a decision and the group commit that writes it to
 * the store, or the write that puts it on stdout: 40 ms, so that with the
 * commit's own time an entry is durable within 50 ms of its decision.
 */
export const AUDIT_FLUSH_INTERVAL_MS = 40;

/** Interval of the HTTP sink's batches. */
export const AUDIT_HTTP_INTERVAL_MS = 1_000;

/** Most entries in one group commit, one stdout write or one HTTP batch. */
const MAX_BATCH = 1_000;

/**
 * Most estimated bytes in one batch (a batch holds at least one entry): the
 * stdout and HTTP sinks join a batch's JSON into one text.
 */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** First pause after a failed write; doubles up to {@link MAX_RETRY_PAUSE_MS}. */
const FIRST_RETRY_PAUSE_MS = 100;
const MAX_RETRY_PAUSE_MS = 30_000;

/** How long one HTTP batch may take, headers and body. */
const HTTP_TIMEOUT_MS = 10_000;

/** Counts what the sinks do, by sink name (`store`, `stdout`, `http`). */
export interface AuditMetrics {
  auditWritten(sink: string, entries: number): void;
  auditDropped(sink: string, entries: number): void;
  auditFailed(sink: string): void;
  auditBuffered(sink: string, entries: number): void;
}

/**
 * Where a sink's batches go. Resolves once the whole batch is done: written,
 * or (an HTTP endpoint that refuses some entries for good) partly dropped, as
 * the {@link WriteResult} says (`undefined`: all written). Rejects when it was
 * not done; a {@link PartialWriteError} says which first entries were.
 */
type WriteBatch = (batch: readonly DecisionRecord[]) => Promise<WriteResult | undefined>;

/** What became of a batch's entries: written, or refused for good and dropped. */
interface WriteResult {
  readonly written: number;
  readonly dropped: number;
}

/** A batch whose first `written + dropped` entries were done before the write failed. */
class PartialWriteError extends Error {
  override readonly name = 'PartialWriteError';

  constructor(
    readonly done: WriteResult,
    override readonly cause: unknown,
  ) {
    super('an audit batch was written in part', { cause });
  }
}

/** A non-2xx answer of the audit endpoint. */
class AuditHttpStatusError extends Error {
  override readonly name = 'AuditHttpStatusError';

  constructor(readonly status: number) {
    super(`the audit endpoint answered HTTP ${status}`);
  }
}

/**
 * Answers of the audit endpoint that refuse entries for good, however often
 * they are sent: sent again they would hold the sink (and every entry after
 * them) back forever. 413 is first split (see {@link postSplitting}).
 */
const REFUSED_FOR_GOOD: ReadonlySet<number> = new Set([400, 413, 422]);

/**
 * One sink: a bounded buffer of entries, written in batches by one writer
 * at a time, at most `intervalMs` after the oldest entry arrived; a failed
 * batch goes back to the buffer's front and is retried after a pause that
 * doubles, while the bound drops the oldest entries.
 */
class Sink {
  readonly name: string;
  readonly #write: WriteBatch;
  readonly #bound: number;
  readonly #boundBytes: number;
  readonly #intervalMs: number;
  readonly #metrics: AuditMetrics | undefined;
  readonly #logger: Logger;
  /**
   * Entries not written yet, oldest first, from `#head` on; the slots before
   * `#head` are emptied as it passes them, so an entry written or dropped is
   * not held (with its payload) until the array is compacted.
   */
  #entries: (DecisionRecord | undefined)[] = [];
  #head = 0;
  /** Estimated bytes of the entries from `#head` on ({@link entryBytes}). */
  #bytes = 0;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #pauseMs = 0;
  #closed = false;

  constructor(
    name: string,
    write: WriteBatch,
    options: {
      bound: number;
      boundBytes: number;
      intervalMs: number;
      metrics?: AuditMetrics;
      logger: Logger;
    },
  ) {
    this.name = name;
    this.#write = write;
    this.#bound = options.bound;
    this.#boundBytes = options.boundBytes;
    this.#intervalMs = options.intervalMs;
    this.#metrics = options.metrics;
    this.#logger = options.logger;
  }

  /** Entries waiting to be written. */
  get buffered(): number {
    return this.#entries.length - this.#head;
  }

  add(entry: DecisionRecord): void {
    this.#entries.push(entry);
    this.#bytes += entryBytes(entry);
    this.#trim();
    this.#schedule(this.#intervalMs);
  }

  /**
   * Writes what is buffered now, batch after batch, until the buffer is
   * empty or a write fails (then resolves; the entries stay buffered).
   */
  async flush(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
    while (this.buffered > 0) {
      if (!(await this.#writeOnce())) return;
    }
  }

  /** Stops the timer; a last {@link flush} is the caller's. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #counted(result: WriteResult): void {
    if (result.written > 0) this.#metrics?.auditWritten(this.name, result.written);
    if (result.dropped > 0) this.#metrics?.auditDropped(this.name, result.dropped);
  }

  /** Drops the oldest entries past either bound, and counts them. */
  #trim(): void {
    let dropped = 0;
    while (this.buffered > 0 && (this.buffered > this.#bound || this.#bytes > this.#boundBytes)) {
      this.#bytes -= entryBytes(this.#entries[this.#head] as DecisionRecord);
      this.#entries[this.#head] = undefined;
      this.#head += 1;
      dropped += 1;
    }
    if (dropped > 0) this.#metrics?.auditDropped(this.name, dropped);
    if (this.#head > 1_024 && this.#head * 2 > this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
    this.#metrics?.auditBuffered(this.name, this.buffered);
  }

  #schedule(delayMs: number): void {
    if (this.#timer !== undefined || this.#writing !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#writeOnce().then((ok) => {
        if (this.buffered > 0) this.#schedule(ok ? 0 : this.#pauseMs);
      });
    }, delayMs);
    this.#timer.unref();
  }

  /** Writes one batch from the front; resolves true when it was written. */
  async #writeOnce(): Promise<boolean> {
    if (this.#writing !== undefined || this.buffered === 0) return true;
    const last = Math.min(this.#entries.length, this.#head + MAX_BATCH);
    let end = this.#head;
    let batchBytes = 0;
    while (end < last) {
      const bytes = entryBytes(this.#entries[end] as DecisionRecord);
      if (end > this.#head && batchBytes + bytes > MAX_BATCH_BYTES) break;
      batchBytes += bytes;
      end += 1;
    }
    const batch = this.#entries.slice(this.#head, end) as DecisionRecord[];
    this.#entries.fill(undefined, this.#head, end);
    this.#head = end;
    this.#bytes -= batchBytes;
    let ok = true;
    const writing = this.#write(batch).then(
      (result) => {
        this.#pauseMs = 0;
        this.#counted(result ?? { written: batch.length, dropped: 0 });
      },
      (e: unknown) => {
        ok = false;
        // The entries done before the failure stay done; the rest is retried.
        let rest = batch;
        if (e instanceof PartialWriteError) {
          this.#counted(e.done);
          const done = e.done.written + e.done.dropped;
          rest = batch.slice(done);
          for (const entry of batch.slice(0, done)) batchBytes -= entryBytes(entry);
        }
        this.#pauseMs =
          this.#pauseMs === 0
            ? FIRST_RETRY_PAUSE_MS
            : Math.min(this.#pauseMs * 2, MAX_RETRY_PAUSE_MS);
        this.#metrics?.auditFailed(this.name);
        this.#logger.warn('cannot write decision audit entries; they stay buffered', {
          sink: this.name,
          entries: rest.length,
          retryInMs: this.#pauseMs,
          err: e instanceof PartialWriteError ? e.cause : e,
        });
        // Back to the front, older than anything that arrived meanwhile.
        this.#entries = [...rest, ...this.#entries.slice(this.#head)];
        this.#head = 0;
        this.#bytes += batchBytes;
      },
    );
    this.#writing = writing;
    try {
      await writing;
    } finally {
      this.#writing = undefined;
      this.#trim();
    }
    return ok;
  }
}

/** Options of an {@link AuditLog}. */
export interface AuditLogOptions {
  /** Keeps entries in the store (`--audit-store`), for `ListDecisions`. */
  readonly store?: DecisionStore;
  /**
   * Writes JSON lines to this file descriptor (`--audit-stdout`: 1). Writes
   * go through the thread pool, so a slow reader never blocks the sidecar.
   */
  readonly stdoutFd?: number;
  /** POSTs gzip JSON batches to this URL (`--audit-http`). */
  readonly httpUrl?: string;
  /** The HTTP sink's `Authorization` header, read at each send; none when undefined. */
  readonly httpAuthorization?: () => string | undefined;
  /** Entries each sink buffers at most. Default {@link DEFAULT_AUDIT_BUFFER}. */
  readonly bufferEntries?: number;
  /** Estimated bytes each sink buffers at most. Default {@link DEFAULT_AUDIT_BUFFER_BYTES}. */
  readonly bufferBytes?: number;
  /** Interval of the store and stdout sinks. Default {@link AUDIT_FLUSH_INTERVAL_MS}. */
  readonly flushIntervalMs?: number;
  /** Interval of the HTTP sink. Default {@link AUDIT_HTTP_INTERVAL_MS}. */
  readonly httpIntervalMs?: number;
  readonly metrics?: AuditMetrics;
  readonly logger: Logger;
}

/** Receives each decision as it is recorded. */
export type DecisionListener = (record: DecisionRecord) => void;

/**
 * Records decisions to the configured sinks and subscribers.
 *
 * @example
 * const audit = new AuditLog({ store, logger });
 * if (audit.enabled) audit.record(record);
 * await audit.close();
 */
export class AuditLog {
  readonly #sinks: Sink[] = [];
  readonly #listeners = new Set<DecisionListener>();
  readonly #logger: Logger;
  #agent: Agent | undefined;
  /** True when the store sink is on, so `ListDecisions` can answer. */
  readonly keepsInStore: boolean;

  constructor(options: AuditLogOptions) {
    this.#logger = options.logger;
    const common = {
      bound: options.bufferEntries ?? DEFAULT_AUDIT_BUFFER,
      boundBytes: options.bufferBytes ?? DEFAULT_AUDIT_BUFFER_BYTES,
      metrics: options.metrics,
      logger: options.logger,
    };
    const interval = options.flushIntervalMs ?? AUDIT_FLUSH_INTERVAL_MS;
    const { store, stdoutFd, httpUrl } = options;
    this.keepsInStore = store !== undefined;
    if (store !== undefined) {
      this.#sinks.push(
        new Sink(
          'store',
          async (batch) => {
            await store.appendDecisions(batch.map(toRow));
            return undefined;
          },
          Object.assign({ intervalMs: interval }, common),
        ),
      );
    }
    if (stdoutFd !== undefined) {
      this.#sinks.push(
        new Sink(
          'stdout',
          async (batch) => {
            await writeAll(stdoutFd, Buffer.from(await jsonLines(batch)));
            return undefined;
          },
          Object.assign({ intervalMs: interval }, common),
        ),
      );
    }
    if (httpUrl !== undefined) {
      const authorization = options.httpAuthorization ?? (() => undefined);
      // Its own pool: the operator chose this endpoint, so the webhooks'
      // destination policy (which guards against callers' URLs) does not apply.
      const agent = new Agent({ connections: 2 });
      this.#agent = agent;
      const bodies = new BatchBodies();
      this.#sinks.push(
        new Sink(
          'http',
          async (batch) => {
            let split = false;
            try {
              const result = await postSplitting(
                batch,
                async (part) => {
                  // The whole batch's body is kept for a resend; a part's is made for it.
                  if (part !== batch) split = true;
                  const body = part === batch ? await bodies.of(batch) : await gzipBatch(part);
                  await postBatch(agent, httpUrl, body, authorization());
                },
                options.logger,
              );
              bodies.forget();
              return result;
            } catch (e: unknown) {
              // Kept only for the same batch sent again whole.
              if (split || e instanceof PartialWriteError) bodies.forget();
              throw e;
            }
          },
          Object.assign({ intervalMs: options.httpIntervalMs ?? AUDIT_HTTP_INTERVAL_MS }, common),
        ),
      );
    }
  }

  /** True when a sink or a subscriber would receive a record: only then build one. */
  get enabled(): boolean {
    return this.#sinks.length > 0 || this.#listeners.size > 0;
  }

  /** Hands `record` to every sink and subscriber; never throws, never waits. */
  record(record: DecisionRecord): void {
    for (const sink of this.#sinks) sink.add(record);
    for (const listener of this.#listeners) {
      try {
        listener(record);
      } catch (e: unknown) {
        this.#logger.warn('a decision subscriber failed', { err: e });
      }
    }
  }

  /** Calls `listener` with every decision recorded from now on; returns the unsubscribe. */
  subscribe(listener: DecisionListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Writes what every sink buffers now (a failed write leaves its entries buffered). */
  async flush(): Promise<void> {
    await Promise.all(this.#sinks.map((s) => s.flush()));
  }

  /**
   * Stops the sinks' timers and writes what they buffer, giving up after
   * `timeoutMs` (what is left is lost, and logged).
   */
  async close(timeoutMs = 5_000): Promise<void> {
    for (const sink of this.#sinks) sink.close();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([this.flush(), deadline]);
    clearTimeout(timer);
    await this.#agent?.destroy().catch(() => undefined);
    for (const sink of this.#sinks) {
      if (sink.buffered > 0) {
        this.#logger.warn('decision audit entries not written at shutdown', {
          sink: sink.name,
          entries: sink.buffered,
        });
      }
    }
  }
}

/** A record as the store keeps it. */
function toRow(record: DecisionRecord): DecisionRow {
  const time = record.time;
  return {
    decisionId: record.decisionId,
    time: time === undefined ? 0 : Number(time.seconds) * 1000 + Math.floor(time.nanos / 1e6),
    operationId: record.operationId,
    outcome: record.outcome,
    record: encodeDecisionRecord(record),
  };
}

/**
 * Proto JSON of records, made once per record: the stdout and the HTTP sinks
 * both write it, and a batch the HTTP sink could not send is sent again.
 */
const jsonOfRecord = new WeakMap<DecisionRecord, string>();

/**
 * Records encoded between two turns of the event loop (records whose JSON
 * was made before cost nothing and do not count): a record's proto JSON took
 * about 6 µs on the bench's machine, so a slice holds the loop for about
 * 0.6 ms. Smaller slices hold it for less, but a loop busy with decisions
 * turns only so often, and the sink must encode as fast as decisions come.
 */
const ENCODE_SLICE = 100;

/**
 * The records of `batch` as proto JSON, as both the stdout and the HTTP sink
 * write it: each made once (kept in {@link jsonOfRecord}), a slice of
 * {@link ENCODE_SLICE} made per turn of the event loop.
 */
async function batchJson(batch: readonly DecisionRecord[]): Promise<string[]> {
  const out: string[] = [];
  let encoded = 0;
  for (const record of batch) {
    let json = jsonOfRecord.get(record);
    if (json === undefined) {
      if (encoded > 0 && encoded % ENCODE_SLICE === 0) await new Promise(setImmediate);
      json = toJsonString(DecisionRecordSchema, record);
      jsonOfRecord.set(record, json);
      encoded += 1;
    }
    out.push(json);
  }
  return out;
}

/** One proto JSON object per line. */
async function jsonLines(batch: readonly DecisionRecord[]): Promise<string> {
  const lines = await batchJson(batch);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** Longest pause before a write a full pipe refused (`EAGAIN`) is tried again, in milliseconds. */
const MAX_FULL_PIPE_PAUSE_MS = 50;

/**
 * Writes all of `bytes` to `fd` through the thread pool. A non-blocking pipe
 * that is full (a slow reader; Node makes a pipe on stdout non-blocking)
 * refuses with `EAGAIN`: the write waits for room and goes on from where it
 * stopped, pausing 1 ms and doubling up to {@link MAX_FULL_PIPE_PAUSE_MS}.
 * Failing the batch instead would write it again from its start, after the
 * part the pipe took: a cut line, then lines twice.
 */
async function writeAll(fd: number, bytes: Buffer): Promise<void> {
  let offset = 0;
  let pauseMs = 1;
  while (offset < bytes.length) {
    try {
      offset += await new Promise<number>((resolve, reject) => {
        fsWrite(fd, bytes, offset, bytes.length - offset, null, (err, written) =>
          err === null ? resolve(written) : reject(err),
        );
      });
      pauseMs = 1;
    } catch (e: unknown) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
      // Unref'd: a shutdown that gives up on the sink (its deadline) is not held by it.
      await new Promise((resolve) => setTimeout(resolve, pauseMs).unref());
      pauseMs = Math.min(pauseMs * 2, MAX_FULL_PIPE_PAUSE_MS);
    }
  }
}

/**
 * The gzip JSON array of the HTTP sink's batches. A batch that failed goes
 * back to the buffer's front and is sent again: while nothing was dropped
 * from the front, the next batch starts with the same record and, of the
 * same length, holds the same records (new ones join at the back), so the
 * body made for it is sent again as it is.
 */
class BatchBodies {
  #first: DecisionRecord | undefined;
  #count = 0;
  #body: Buffer | undefined;

  /** Drops the body kept for a resend, once its batch was sent. */
  forget(): void {
    this.#first = undefined;
    this.#count = 0;
    this.#body = undefined;
  }

  async of(batch: readonly DecisionRecord[]): Promise<Buffer> {
    if (this.#body !== undefined && batch[0] === this.#first && batch.length === this.#count) {
      return this.#body;
    }
    const body = await gzipBatch(batch);
    this.#first = batch[0];
    this.#count = batch.length;
    this.#body = body;
    return body;
  }
}

/** A batch as the HTTP sink sends it: a gzip JSON array. */
async function gzipBatch(batch: readonly DecisionRecord[]): Promise<Buffer> {
  return gzip(`[${(await batchJson(batch)).join(',')}]`);
}

/**
 * Requests one attempt at a batch may make while it splits parts the endpoint
 * finds too large: enough to find a few oversized entries among 1,000 (each
 * costs about two a halving), not the 2,000 an endpoint that refuses every
 * entry (a proxy's body limit below one entry) would take.
 */
const MAX_POSTS_PER_BATCH = 48;

/**
 * Sends `batch` with `post`, in order. A part the endpoint finds too large
 * (413) is sent again as two halves, down to single entries; a part refused
 * for good ({@link REFUSED_FOR_GOOD}: 400, 422, or one entry still too large)
 * is dropped and counted, and the drops of the attempt are logged once, so
 * that they do not hold the sink back. Any other failure, or more than
 * {@link MAX_POSTS_PER_BATCH} requests, rejects: at once when nothing was
 * done, else with a {@link PartialWriteError}, so that the parts already
 * done are not sent again; the rest waits for the sink's pause.
 */
async function postSplitting(
  batch: readonly DecisionRecord[],
  post: (part: readonly DecisionRecord[]) => Promise<void>,
  logger: Logger,
): Promise<WriteResult> {
  let written = 0;
  let dropped = 0;
  let posts = 0;
  const statuses = new Set<number>();
  const parts: (readonly DecisionRecord[])[] = [batch];
  try {
    for (let part = parts.shift(); part !== undefined; part = parts.shift()) {
      if (posts === MAX_POSTS_PER_BATCH) {
        throw new Error(
          `the audit endpoint refused parts of a batch ${posts} times (HTTP ${[...statuses].join(', ')})`,
        );
      }
      posts += 1;
      try {
        await post(part);
        written += part.length;
      } catch (e: unknown) {
        const status = e instanceof AuditHttpStatusError ? e.status : undefined;
        if (status === undefined || !REFUSED_FOR_GOOD.has(status)) throw e;
        statuses.add(status);
        if (status === 413 && part.length > 1) {
          const half = Math.ceil(part.length / 2);
          parts.unshift(part.slice(0, half), part.slice(half));
        } else {
          dropped += part.length;
        }
      }
    }
    return { written, dropped };
  } catch (e: unknown) {
    if (written + dropped === 0) throw e;
    throw new PartialWriteError({ written, dropped }, e);
  } finally {
    if (dropped > 0) {
      logger.warn('the audit endpoint refused decision audit entries; they are dropped', {
        sink: 'http',
        entries: dropped,
        statuses: [...statuses],
      });
    }
  }
}

/**
 * POSTs one batch as a gzip JSON array (`Content-Encoding: gzip`, as OPA's
 * decision logs do); rejects unless the answer is 2xx.
 */
async function postBatch(
  dispatcher: Dispatcher,
  url: string,
  body: Buffer,
  authorization: string | undefined,
): Promise<void> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-encoding': 'gzip',
  };
  if (authorization !== undefined && authorization !== '') headers.authorization = authorization;
  const response = await request(url, {
    dispatcher,
    method: 'POST',
    headers,
    body,
    headersTimeout: HTTP_TIMEOUT_MS,
    bodyTimeout: HTTP_TIMEOUT_MS,
  });
  await response.body.dump();
  if (response.statusCode < 200 || response.statusCode >= 300) {
    throw new AuditHttpStatusError(response.statusCode);
  }
}
