/**
 * @module Keeps health honest about the store: SERVING only while the store
 * can be written. Two checks, chosen by cost:
 * - the quick check (`quickCheck()`), on every interval while the store is
 *   healthy: no transaction and no lock, only what a ping cannot see between
 *   pings (for the SQLite store, two `stat` calls comparing the database and
 *   `-wal` files at their paths with those opened, and the memory of a write
 *   that failed at its commit), a few microseconds on the event loop, so the
 *   calls around it do not wait for it;
 * - the full check (`ping()`), a write probe that may wait for the store's
 *   busy timeout and that repairs or reopens the store: at the first
 *   interval, right after a call failed with a store error while healthy,
 *   and on every interval while unhealthy, until it passes.
 * A failed check turns health NOT_SERVING; a passing full check turns it back.
 */
import type { Logger } from '../log.js';

/** How often the store is checked, in milliseconds, by default. */
export const DEFAULT_STORE_CHECK_INTERVAL_MS = 5_000;

/** Options of a {@link StoreHealthMonitor}. */
export interface StoreHealthOptions {
  /**
   * Tests cheaply, without a transaction, what can break between two pings;
   * rejects with the store's error (see `HookStore.quickCheck`).
   */
  readonly quickCheck: () => Promise<void>;
  /**
   * Tests the store with a write probe and repairs it where it can; rejects
   * with the store's error while it cannot be written (see `HookStore.ping`).
   */
  readonly ping: () => Promise<void>;
  /** Called with the new state whenever it changes. */
  readonly onChange: (healthy: boolean) => void;
  readonly logger: Logger;
  /** Milliseconds between two checks; default {@link DEFAULT_STORE_CHECK_INTERVAL_MS}. */
  readonly intervalMs?: number;
  /**
   * The state before the first check; default true. False for a store that
   * is not open yet: every interval then runs the full check (which opens
   * it) until one passes.
   */
  readonly healthy?: boolean;
}

/** Checks the store on an interval and reports changes of its health. */
export class StoreHealthMonitor {
  readonly #options: StoreHealthOptions;
  readonly #timer: NodeJS.Timeout;
  #healthy = true;
  /** Whether a full check ran: the first interval runs one to set the baseline. */
  #pinged = false;
  #checking: Promise<void> | undefined;
  /** A full check was asked for while another check ran. */
  #fullPending = false;
  /** Message of the last failure while unhealthy, to log a change of cause once. */
  #cause: string | undefined;

  /** Starts checking on an unref'd interval. */
  constructor(options: StoreHealthOptions) {
    this.#options = options;
    this.#healthy = options.healthy ?? true;
    this.#timer = setInterval(
      () => void this.#schedule(!this.#healthy || !this.#pinged),
      options.intervalMs ?? DEFAULT_STORE_CHECK_INTERVAL_MS,
    );
    this.#timer.unref();
  }

  /** True while the last check passed. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /**
   * Runs the full check now, after a call failed with a store error. While
   * health is NOT_SERVING already, the interval's checks are enough: a burst
   * of failing calls costs no burst of write probes.
   */
  check(): Promise<void> {
    if (!this.#healthy) {
      return this.#checking ?? Promise.resolve();
    }
    return this.#schedule(true);
  }

  /** Stops checking. */
  stop(): void {
    clearInterval(this.#timer);
  }

  /** Runs one check at a time; a full one asked for meanwhile runs right after. */
  #schedule(full: boolean): Promise<void> {
    if (this.#checking !== undefined) {
      if (full) this.#fullPending = true;
      return this.#checking;
    }
    this.#checking = (async () => {
      let next = full;
      do {
        this.#fullPending = false;
        await this.#checkOnce(next);
        next = true;
      } while (this.#fullPending);
    })().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  async #checkOnce(full: boolean): Promise<void> {
    let healthy: boolean;
    try {
      await (full ? this.#options.ping() : this.#options.quickCheck());
      healthy = true;
    } catch (e: unknown) {
      healthy = false;
      const cause = e instanceof Error ? e.message : String(e);
      if (this.#healthy) {
        this.#options.logger.error('store cannot be written; health NOT_SERVING', { err: e });
      } else if (cause !== this.#cause) {
        // Such as a restored file found not to be a database agenthooks can open.
        this.#options.logger.warn('store still cannot be written', { err: e });
      }
      this.#cause = cause;
    }
    if (full) this.#pinged = true;
    if (healthy !== this.#healthy) {
      this.#healthy = healthy;
      if (healthy) {
        this.#cause = undefined;
        this.#options.logger.info('store recovered; health SERVING');
      }
      this.#options.onChange(healthy);
    }
  }
}
