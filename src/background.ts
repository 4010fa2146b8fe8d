/**
 * @module The owner of work that outlives the call that started it: webhooks
 * started and not awaited (the `beforeToolCall` observers of an allowed
 * call, the `afterToolCall` notification of a published deferred result).
 * Each task runs under the scope's signal; at shutdown the scope waits for
 * its tasks until a deadline, then aborts them, so no detached webhook holds
 * the process past `--shutdown-grace`.
 */
import type { Logger } from './log.js';

/** Why the tasks still running at the shutdown deadline were aborted. */
export class BackgroundAbortedError extends Error {
  override readonly name = 'BackgroundAbortedError';
  readonly code = 'BACKGROUND_ABORTED';

  constructor() {
    super('the sidecar is shutting down; background work was cut off');
  }
}

/**
 * Tracks detached tasks and aborts them at shutdown.
 *
 * @example
 * const scope = new BackgroundScope(logger);
 * scope.run('observer webhooks', (signal) => deliver(signal));
 * await scope.close(Date.now() + 1_000);
 */
export class BackgroundScope {
  readonly #logger: Logger;
  readonly #controller = new AbortController();
  readonly #tasks = new Set<Promise<void>>();
  #closing: Promise<void> | undefined;

  /** Creates an open scope; failures of its tasks are logged on `logger`. */
  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Aborted when the scope closes at its deadline; detached work runs under it. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Tasks started and not yet settled. */
  get size(): number {
    return this.#tasks.size;
  }

  /**
   * Starts `task` under the scope's signal without awaiting it. A failure is
   * logged (with `name` and `fields`), never thrown. Once the scope closed,
   * the task still starts with an aborted signal, so it ends at once.
   */
  run(name: string, task: (signal: AbortSignal) => Promise<void>, fields?: object): void {
    const settled = (async function runBackgroundTask(scope: BackgroundScope, signal: AbortSignal) {
      try {
        await task(signal);
      } catch (e: unknown) {
        if (signal.aborted) return; // cut off at shutdown, counted by the caller's outcome
        scope.#logger.error(`${name} failed`, { ...fields, err: e });
      }
    })(this, this.#controller.signal);
    this.#tasks.add(settled);
    void settled.finally(() => this.#tasks.delete(settled));
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
      this.#controller.abort(new BackgroundAbortedError());
      await this.#settleAll();
    })();
    return this.#closing;
  }

  /** Resolves once every task started so far (and any they start) has settled. */
  async #settleAll(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.all(this.#tasks);
  }
}
