/**
 * @module The owner of work that outlives the call that started it: webhooks
 * started and not awaited (the `beforeToolCall` observers of an allowed
 * call, the `afterToolCall` notification of a published deferred result).
 *
 * The scope bounds that work: at most `maxTasks` tasks in flight, holding at
 * most `maxBytes` of payload (each task declares an estimate when it
 * starts). A task past either bound is not started: the caller learns it
 * was dropped, the observer counts it, and a warning says how many were
 * dropped, at most once per {@link DROP_LOG_INTERVAL_MS}.
 *
 * Each task runs under its own abort signal, so concurrent tasks add no
 * listeners to one shared signal; at shutdown the scope waits for its tasks
 * until a deadline, then aborts them, so no detached webhook holds the
 * process past `--shutdown-grace`.
 */

import { extend } from './extend.js';
import type { Logger } from './log.js';

/** Default of `--max-detached-deliveries`: detached tasks in flight at most. */
export const DEFAULT_MAX_DETACHED_TASKS = 256;

/** Default of `--max-detached-bytes`: 64 MiB of payload held by detached tasks at most. */
export const DEFAULT_MAX_DETACHED_BYTES = 64 * 1024 * 1024;

/** Shortest time between two warnings about dropped tasks, in milliseconds. */
export const DROP_LOG_INTERVAL_MS = 10_000;

/** Why a task was not started: the count bound or the memory bound was reached. */
export type BackgroundDropReason = 'max_tasks' | 'max_bytes';

/** What {@link BackgroundScope.run} did with a task. */
export type BackgroundRun =
  | { readonly started: true }
  | { readonly started: false; readonly reason: BackgroundDropReason };

/** Bounds of a {@link BackgroundScope}. */
export interface BackgroundLimits {
  /** Tasks in flight at most. Default {@link DEFAULT_MAX_DETACHED_TASKS}. */
  readonly maxTasks?: number;
  /** Sum of the tasks' byte estimates at most. Default {@link DEFAULT_MAX_DETACHED_BYTES}. */
  readonly maxBytes?: number;
}

/** Told about the scope's load, for metrics. */
export interface BackgroundObserver {
  /** A task was not started. */
  dropped(reason: BackgroundDropReason): void;
  /** Tasks in flight and the bytes they hold changed. */
  inFlight(tasks: number, bytes: number): void;
}

/** Options of {@link BackgroundScope.run}. */
export interface BackgroundTaskOptions {
  /** Fields of the line logged when the task fails (such as `operationId`). */
  readonly fields?: object;
  /**
   * Estimated bytes the task holds until it settles (its payload), counted
   * against `maxBytes`. Default 0.
   */
  readonly bytes?: number;
}

/** Why the tasks still running at the shutdown deadline were aborted. */
export class BackgroundAbortedError extends Error {
  override readonly name = 'BackgroundAbortedError';
  readonly code = 'BACKGROUND_ABORTED';

  constructor() {
    super('the sidecar is shutting down; background work was cut off');
  }
}

/** One task in flight. */
interface Task {
  readonly controller: AbortController;
  readonly bytes: number;
  readonly settled: Promise<void>;
}

/**
 * Tracks detached tasks, bounds them, and aborts them at shutdown.
 *
 * @example
 * const scope = new BackgroundScope(logger, { maxTasks: 256 });
 * const run = scope.run('observer webhooks', (signal) => deliver(signal), { bytes: 1024 });
 * if (!run.started) report(run.reason);
 * await scope.close(Date.now() + 1_000);
 */
export class BackgroundScope {
  readonly #logger: Logger;
  readonly #observer: BackgroundObserver | undefined;
  readonly #maxTasks: number;
  readonly #maxBytes: number;
  readonly #tasks = new Set<Task>();
  #bytes = 0;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Drops not yet logged, by reason. */
  #unlogged: Record<BackgroundDropReason, number> = { max_tasks: 0, max_bytes: 0 };
  /** Runs while drops are logged at most once per interval; a drop then waits for it. */
  #dropLogTimer: NodeJS.Timeout | undefined;

  /**
   * Creates an open scope; failures of its tasks and dropped tasks are
   * logged on `logger`, and `observer` hears of every drop and load change.
   */
  constructor(logger: Logger, limits: BackgroundLimits = {}, observer?: BackgroundObserver) {
    this.#logger = logger;
    this.#maxTasks = limits.maxTasks ?? DEFAULT_MAX_DETACHED_TASKS;
    this.#maxBytes = limits.maxBytes ?? DEFAULT_MAX_DETACHED_BYTES;
    this.#observer = observer;
  }

  /** Tasks started and not yet settled. */
  get size(): number {
    return this.#tasks.size;
  }

  /** Sum of the byte estimates of the tasks in flight. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Starts `task` under a signal of its own without awaiting it, unless the
   * scope is at one of its bounds: then the task is not started and the
   * result says which bound. A failure is logged (with `name` and
   * `options.fields`), never thrown. Once the scope closed, the task still
   * starts with an aborted signal, so it ends at once.
   */
  run(
    name: string,
    task: (signal: AbortSignal) => Promise<void>,
    options: BackgroundTaskOptions = {},
  ): BackgroundRun {
    const bytes = Math.max(0, options.bytes ?? 0);
    const reason = this.#overBound(bytes);
    if (reason !== undefined) {
      this.#dropped(reason);
      return { started: false, reason };
    }
    const controller = new AbortController();
    if (this.#closed) controller.abort(new BackgroundAbortedError());
    const logger = this.#logger;
    const settled = (async function runBackgroundTask(signal: AbortSignal) {
      try {
        await task(signal);
      } catch (e: unknown) {
        if (signal.aborted) return; // cut off at shutdown, counted by the caller's outcome
        logger.error(`${name} failed`, extend(options.fields ?? {}, { err: e }));
      }
    })(controller.signal);
    const entry: Task = { controller, bytes, settled };
    this.#tasks.add(entry);
    this.#bytes += bytes;
    this.#observer?.inFlight(this.#tasks.size, this.#bytes);
    void settled.finally(() => {
      this.#tasks.delete(entry);
      this.#bytes -= entry.bytes;
      this.#observer?.inFlight(this.#tasks.size, this.#bytes);
    });
    return { started: true };
  }

  /**
   * Waits for the running tasks until `deadlineMs` (epoch milliseconds), then
   * aborts the rest and waits for them to settle. Safe to call twice.
   */
  close(deadlineMs: number): Promise<void> {
    this.#closing ??= (async () => {
      const wait = Math.max(0, deadlineMs - Date.now());
      if (this.#tasks.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, wait);
        });
        await Promise.race([this.#settleAll(), deadline]);
        clearTimeout(timer);
      }
      if (this.#tasks.size > 0) {
        this.#logger.warn('shutdown deadline reached; aborting background work', {
          tasks: this.#tasks.size,
        });
      }
      this.#closed = true;
      const reason = new BackgroundAbortedError();
      for (const task of this.#tasks) task.controller.abort(reason);
      await this.#settleAll();
      clearTimeout(this.#dropLogTimer);
      this.#dropLogTimer = undefined;
      this.#logDrops();
    })();
    return this.#closing;
  }

  /** The bound a new task of `bytes` would break, if any. */
  #overBound(bytes: number): BackgroundDropReason | undefined {
    if (this.#tasks.size >= this.#maxTasks) return 'max_tasks';
    if (this.#bytes + bytes > this.#maxBytes) return 'max_bytes';
    return undefined;
  }

  /**
   * Counts a dropped task. The first drop after a quiet interval is logged at
   * once; later ones are summed and logged when the interval ends, so a flood
   * of drops writes one line per {@link DROP_LOG_INTERVAL_MS}.
   */
  #dropped(reason: BackgroundDropReason): void {
    this.#observer?.dropped(reason);
    this.#unlogged[reason] += 1;
    if (this.#dropLogTimer !== undefined) return;
    this.#logDrops();
    const tick = () => {
      if (this.#logDrops()) {
        this.#dropLogTimer = setTimeout(tick, DROP_LOG_INTERVAL_MS).unref();
      } else {
        this.#dropLogTimer = undefined;
      }
    };
    this.#dropLogTimer = setTimeout(tick, DROP_LOG_INTERVAL_MS).unref();
  }

  /** Logs the drops not yet logged; false when there were none. */
  #logDrops(): boolean {
    const { max_tasks, max_bytes } = this.#unlogged;
    if (max_tasks + max_bytes === 0) return false;
    this.#unlogged = { max_tasks: 0, max_bytes: 0 };
    this.#logger.warn('detached deliveries dropped: too many in flight', {
      dropped: max_tasks + max_bytes,
      droppedMaxTasks: max_tasks,
      droppedMaxBytes: max_bytes,
      tasks: this.#tasks.size,
      bytes: this.#bytes,
      maxTasks: this.#maxTasks,
      maxBytes: this.#maxBytes,
    });
    return true;
  }

  /** Resolves once every task started so far (and any they start) has settled. */
  async #settleAll(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks].map((t) => t.settled));
  }
}
