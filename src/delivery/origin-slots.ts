/**
 * @module The requests in flight to each webhook origin, held to the
 * sender's connections per origin (`--webhook-max-connections`), so that
 * undici never queues one: a request that finds every connection of its
 * origin busy waits here, in arrival order, and is built only when it has
 * a connection to go out on. A signed request's `webhook-timestamp` is then
 * the time it is sent: signed before a wait in undici's queue (a long
 * control holding every connection), it reached the receiver past the
 * Standard Webhooks tolerance (5 minutes) and was refused.
 */

/** Something that can stop a wait: the request's deadline. */
export interface WaitSignal {
  readonly aborted: boolean;
  once(event: 'abort', listener: () => void): unknown;
  off(event: 'abort', listener: () => void): unknown;
}

/** Queue length past which stopped waiters are dropped once they are half of it. */
const COMPACT_AT = 64;

/** A request waiting for a slot; `grant` is gone once it stopped waiting. */
interface Waiter {
  grant: (() => void) | undefined;
}

/**
 * One origin's taken slots and the requests waiting for one, oldest first.
 * A waiter that stops waiting (its deadline fired) stays in `waiting`,
 * emptied, until a release passes it: removing it there would cost a scan
 * of the queue per abort, quadratic for a burst that times out together.
 */
interface Origin {
  taken: number;
  readonly waiting: Waiter[];
  /** Waiters in `waiting` still waiting. */
  live: number;
}

/**
 * Slots per origin. An origin's entry exists only while a slot of it is
 * taken, so the map holds the origins in use, not every origin ever seen.
 *
 * @example
 * const slots = new OriginSlots(64);
 * if (slots.tryTake(origin) || (await slots.wait(origin, signal))) {
 *   try { await send(); } finally { slots.release(origin); }
 * }
 */
export class OriginSlots {
  readonly #limit: number;
  readonly #origins = new Map<string, Origin>();

  /** `limit`: slots per origin, a positive integer (the connections per origin). */
  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a positive integer, got ${limit}`);
    }
    this.#limit = limit;
  }

  /** Takes a slot of `origin` when one is free and nobody waits; false otherwise. */
  tryTake(origin: string): boolean {
    const entry = this.#origins.get(origin);
    if (entry === undefined) {
      this.#origins.set(origin, { taken: 1, waiting: [], live: 0 });
      return true;
    }
    if (entry.taken >= this.#limit || entry.live > 0) return false;
    entry.taken += 1;
    return true;
  }

  /**
   * Waits for a slot of `origin` (call after {@link tryTake} answered
   * false). Resolves true with the slot taken, or false, holding none, once
   * `signal` aborts first.
   */
  wait(origin: string, signal: WaitSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    const entry = this.#origins.get(origin);
    // tryTake answered false, so the entry is there; a free slot means it was released since.
    if (entry === undefined || (entry.taken < this.#limit && entry.live === 0)) {
      return Promise.resolve(this.tryTake(origin));
    }
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        grant: () => {
          signal.off('abort', aborted);
          resolve(true);
        },
      };
      const aborted = () => {
        if (waiter.grant === undefined) return;
        waiter.grant = undefined;
        entry.live -= 1;
        // Mostly stopped waiters (a saturated origin, no release for a while):
        // dropped in one pass, so they cost amortised constant time and memory.
        if (entry.waiting.length > COMPACT_AT && entry.live * 2 < entry.waiting.length) {
          const { waiting } = entry;
          let kept = 0;
          for (const w of waiting) if (w.grant !== undefined) waiting[kept++] = w;
          waiting.length = kept;
        }
        resolve(false);
      };
      entry.waiting.push(waiter);
      entry.live += 1;
      signal.once('abort', aborted);
    });
  }

  /** Gives a taken slot of `origin` back: to the oldest waiter, else free. */
  release(origin: string): void {
    const entry = this.#origins.get(origin);
    if (entry === undefined) return;
    // The oldest waiter still waiting; the ones that stopped are dropped on the way.
    for (let next = entry.waiting.shift(); next !== undefined; next = entry.waiting.shift()) {
      const grant = next.grant;
      if (grant === undefined) continue;
      next.grant = undefined;
      entry.live -= 1;
      // The slot passes on, still taken.
      grant();
      return;
    }
    entry.taken -= 1;
    if (entry.taken <= 0) this.#origins.delete(origin);
  }

  /** Slots taken and requests waiting for `origin` (for tests). */
  usage(origin: string): { taken: number; waiting: number } {
    const entry = this.#origins.get(origin);
    return { taken: entry?.taken ?? 0, waiting: entry?.live ?? 0 };
  }
}
