/**
 * @module Keeps health honest about the store: SERVING only while the store
 * can be written. The store is pinged on an interval and right after a call
 * failed with a store error; a failed ping turns health NOT_SERVING, a good
 * one (the store may reopen itself) turns it back.
 */
import type { Logger } from '../log.js';

/** How often the store is pinged, in milliseconds, by default. */
export const DEFAULT_STORE_CHECK_INTERVAL_MS = 5_000;

/** Options of a {@link StoreHealthMonitor}. */
export interface StoreHealthOptions {
  /** Tests the store; rejects with the store's error while it cannot be written. */
  readonly ping: () => Promise<void>;
  /** Called with the new state whenever it changes. */
  readonly onChange: (healthy: boolean) => void;
  readonly logger: Logger;
  readonly intervalMs?: number;
}

/** Pings the store and reports changes of its health. */
export class StoreHealthMonitor {
  readonly #options: StoreHealthOptions;
  readonly #timer: NodeJS.Timeout;
  #healthy = true;
  #checking: Promise<void> | undefined;

  /** Starts pinging on an unref'd interval. */
  constructor(options: StoreHealthOptions) {
    this.#options = options;
    this.#timer = setInterval(
      () => void this.check(),
      options.intervalMs ?? DEFAULT_STORE_CHECK_INTERVAL_MS,
    );
    this.#timer.unref();
  }

  /** True while the last ping succeeded. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Pings now (once at a time) and updates the state. */
  check(): Promise<void> {
    this.#checking ??= (async () => {
      let healthy: boolean;
      try {
        await this.#options.ping();
        healthy = true;
      } catch (e: unknown) {
        healthy = false;
        if (this.#healthy)
          this.#options.logger.error('store cannot be written; health NOT_SERVING', { err: e });
      }
      if (healthy !== this.#healthy) {
        this.#healthy = healthy;
        if (healthy) this.#options.logger.info('store recovered; health SERVING');
        this.#options.onChange(healthy);
      }
    })().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  /** Stops pinging. */
  stop(): void {
    clearInterval(this.#timer);
  }
}
