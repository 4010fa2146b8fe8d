/**
 * @module The bytes of large events that the `DispatchStream`s hold while
 * they deliver them, bounded over every stream and per stream. A count of
 * events in flight does not bound memory: 64 events of 4 MB each, waiting
 * on one slow webhook, hold 256 MB, and ten such streams ran the sidecar out
 * of heap. Each stream takes from one shared {@link ByteBudget} through its
 * own {@link StreamBytes}. Waiting streams are served in arrival order, so a
 * large event is not passed over forever by small ones; an event larger
 * than the whole budget goes once nothing else is held.
 *
 * One stream's share beyond the limit is kept for streams that hold
 * nothing: their event goes past the waiting ones while it fits there, at
 * most {@link MAX_PASSED_OVER} past the first that does not fit.
 * Streams are not independent: an event held by a local handler that
 * itself waits for the ack of a large event on another stream would
 * otherwise keep that event out until the handler timed out.
 */

/**
 * Default of `--stream-max-in-flight-bytes`: 32 MiB over every stream, 8 MiB
 * for one. An event costs more heap than its encoded size (its decoded
 * strings, the JSON body of each webhook), about three times for text, so
 * this fits the shipped manifest's 256 MiB limit beside the sidecar's own.
 */
export const DEFAULT_STREAM_MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024;

/** A stream waiting for room, in arrival order. */
interface Waiter {
  readonly stream: StreamBytes;
  readonly bytes: number;
  readonly admit: () => void;
  /** Events let past it through the reserve while it was the first that did not fit. */
  passedOver: number;
}

/**
 * Events the reserve lets past the first waiter that does not fit. Past
 * them the reserve closes until that waiter is in: streams that keep
 * taking small events through it would otherwise never let the budget
 * empty for an event larger than the limit (a review saw one passed over
 * 60 times, for 9 s, until the small streams stopped). Closing it may keep
 * a stream holding nothing waiting, at worst until the events held are
 * delivered (or their handlers time out).
 */
const MAX_PASSED_OVER = 16;

/** Bytes shared by every stream. */
export class ByteBudget {
  /** Bytes the streams may hold together. */
  readonly limit: number;
  /** Bytes one stream may hold (a quarter of {@link limit}, so no stream takes all of it). */
  readonly perStream: number;
  #used = 0;
  readonly #waiting: Waiter[] = [];

  constructor(limit: number) {
    this.limit = limit;
    this.perStream = Math.max(1, Math.floor(limit / 4));
  }

  /** Bytes held now, over every stream. */
  get used(): number {
    return this.#used;
  }

  /**
   * Takes `bytes` for `stream` once they fit: within the stream's share
   * (a stream holding nothing may take one event of any size) and within
   * the limit (or nothing at all is held), after the streams that waited
   * first; a stream holding nothing goes first while it fits within the
   * reserve of one share beyond the limit. Resolves false, taking nothing,
   * if `signal` aborts first.
   */
  take(stream: StreamBytes, bytes: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        stream,
        bytes,
        passedOver: 0,
        admit: () => {
          signal.removeEventListener('abort', aborted);
          resolve(true);
        },
      };
      const aborted = () => {
        const at = this.#waiting.indexOf(waiter);
        if (at !== -1) this.#waiting.splice(at, 1);
        resolve(false);
        // The streams behind it may fit now.
        this.#admitWaiting();
      };
      signal.addEventListener('abort', aborted, { once: true });
      this.#waiting.push(waiter);
      this.#admitWaiting();
    });
  }

  /** Gives back `bytes` of `stream` and lets the waiting streams in that now fit. */
  release(stream: StreamBytes, bytes: number): void {
    stream.held -= bytes;
    this.#used -= bytes;
    this.#admitWaiting();
  }

  /** True if `bytes` more would take `stream` past its share (a stream holding nothing never is). */
  #overShare(stream: StreamBytes, bytes: number): boolean {
    return stream.held > 0 && stream.held + bytes > this.perStream;
  }

  #fits(stream: StreamBytes, bytes: number): boolean {
    if (this.#overShare(stream, bytes)) return false;
    return this.#used === 0 || this.#used + bytes <= this.limit;
  }

  #grant(stream: StreamBytes, bytes: number): void {
    stream.held += bytes;
    this.#used += bytes;
  }

  /** True if a stream holding nothing fits `bytes` in the reserve beyond the limit. */
  #fitsReserve(stream: StreamBytes, bytes: number): boolean {
    return stream.held === 0 && this.#used + bytes <= this.limit + this.perStream;
  }

  /**
   * Admits waiters in order. One that is over its own stream's share is
   * passed over (its stream's own release wakes it); once one does not fit
   * the limit, only streams holding nothing that fit the reserve go past
   * it, so it is served before the rest.
   */
  #admitWaiting(): void {
    /** The first waiter that does not fit the limit: only the reserve goes past it, a while. */
    let blocker: Waiter | undefined;
    for (let i = 0; i < this.#waiting.length; ) {
      const w = this.#waiting[i] as Waiter;
      let admitted: boolean;
      if (blocker === undefined) {
        admitted = this.#fits(w.stream, w.bytes) || this.#fitsReserve(w.stream, w.bytes);
      } else {
        admitted = blocker.passedOver < MAX_PASSED_OVER && this.#fitsReserve(w.stream, w.bytes);
        if (admitted) blocker.passedOver += 1;
      }
      if (!admitted) {
        if (blocker === undefined && !this.#overShare(w.stream, w.bytes)) blocker = w;
        i += 1;
        continue;
      }
      this.#waiting.splice(i, 1);
      this.#grant(w.stream, w.bytes);
      w.admit();
    }
  }
}

/** What one stream holds of a {@link ByteBudget}. */
export class StreamBytes {
  readonly #budget: ByteBudget;
  /** Bytes this stream holds now; kept by the budget. */
  held = 0;

  constructor(budget: ByteBudget) {
    this.#budget = budget;
  }

  /** Takes `bytes` for one event once they fit ({@link ByteBudget.take}). */
  take(bytes: number, signal: AbortSignal): Promise<boolean> {
    return this.#budget.take(this, bytes, signal);
  }

  /** Gives back the bytes of one event. */
  release(bytes: number): void {
    this.#budget.release(this, bytes);
  }
}
