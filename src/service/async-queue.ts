/**
 * @module An async queue for one stream's outgoing messages: the producers
 * push, the transport drains it. Backpressure is the producers' business:
 * they bound what they have in flight. It is an iterator written
 * out, not an async generator: a stream answers one message per event, and a
 * generator (with the generator around it that re-yields each message) costs
 * a resumption and several promises per message.
 */

import type { SinkTarget, StreamSink } from '../server/stream-sink.js';

/** What a queue tells its owner as the consumer drains it. */
export interface AsyncQueueOptions<T> {
  /** Called each time the consumer (or the sink) takes an item, with the item. */
  readonly onTake?: (item: T) => void;
  /** Called once when the iteration ends: drained after `close`, failed, or returned early. */
  readonly onEnd?: () => void;
  /**
   * Whether a transport may attach a sink ({@link AsyncQueue.attachSink}); a
   * queue whose items can be taken back ({@link AsyncQueue.remove}) takes none.
   */
  readonly takesSink?: boolean;
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ value: undefined, done: true });

/**
 * A queue that is also an async iterator, ending once closed and drained.
 * With a sink attached ({@link StreamSink}), an item pushed while the
 * consumer waits in `next()` is written through the sink at once instead;
 * while the sink's transport is full, items queue, and the sink writes them
 * once it drained. The end (close or failure) comes after them.
 */
export class AsyncQueue<T> implements AsyncIterableIterator<T>, SinkTarget<T> {
  readonly #items: T[] = [];
  #sink: StreamSink<T> | undefined;
  /** True while the sink's transport is full: pushed items queue. */
  #sinkFull = false;
  readonly #options: AsyncQueueOptions<T>;
  #closed = false;
  #failed = false;
  #failure: unknown;
  #ended = false;
  #wake: ((result: IteratorResult<T>) => void) | undefined;
  #wakeFailed: ((e: unknown) => void) | undefined;

  constructor(options: AsyncQueueOptions<T> = {}) {
    this.#options = options;
  }

  /** Ignored unless the queue was made {@link AsyncQueueOptions.takesSink}. */
  attachSink(sink: StreamSink<T>): void {
    if (this.#options.takesSink === true) this.#sink = sink;
  }

  /** Adds an item; ignored once closed. */
  push(item: T): void {
    if (this.#closed) return;
    const wake = this.#wake;
    if (wake !== undefined) {
      // The consumer waits, so it wrote every item before: the sink writes this one now.
      if (this.#sink !== undefined) {
        if (this.#sinkFull) this.#items.push(item);
        else this.#write(item);
        return;
      }
      this.#unpark();
      this.#options.onTake?.(item);
      wake({ value: item, done: false });
      return;
    }
    this.#items.push(item);
  }

  /** Ends the iteration after the items already queued. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // The end waits for the items queued while the sink's transport was full.
    if (this.#wake !== undefined && this.#items.length === 0) this.#settle();
  }

  /** Ends the iteration with `e` after the items already queued; ignored once ended. */
  fail(e: unknown): void {
    if (this.#ended || this.#failed) return;
    this.#failed = true;
    this.#failure = e;
    this.#closed = true;
    if (this.#wake !== undefined && this.#items.length === 0) this.#settle();
  }

  /** Number of items waiting. */
  get size(): number {
    return this.#items.length;
  }

  /**
   * Takes back an item not yet taken (a call whose answer is no longer
   * awaited); false when it is not waiting. Searches from the oldest.
   */
  remove(item: T): boolean {
    const at = this.#items.indexOf(item);
    if (at < 0) return false;
    this.#items.splice(at, 1);
    return true;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#items.length > 0) {
      const value = this.#items.shift() as T;
      this.#options.onTake?.(value);
      return Promise.resolve({ value, done: false });
    }
    if (this.#closed) return this.#ending();
    if (this.#wake !== undefined) {
      return Promise.reject(new Error('AsyncQueue: next() called while another is pending'));
    }
    return new Promise((resolve, reject) => {
      this.#wake = resolve;
      this.#wakeFailed = reject;
    });
  }

  /** Stops the iteration early: the items still queued are dropped. */
  return(): Promise<IteratorResult<T>> {
    this.#closed = true;
    this.#items.length = 0;
    this.#end();
    // A next() still waiting ends too, rather than never.
    const wake = this.#wake;
    this.#unpark();
    wake?.(DONE);
    return Promise.resolve(DONE);
  }

  /** Writes `item` through the sink; a full transport holds the next ones until it drains. */
  #write(item: T): void {
    const sink = this.#sink as StreamSink<T>;
    this.#options.onTake?.(item);
    let room: boolean;
    try {
      room = sink.write(item);
    } catch (e: unknown) {
      // As a write by the consumer that failed: the iteration fails with it,
      // and what queued behind the item is not written.
      this.#sink = undefined;
      this.#items.length = 0;
      this.fail(e);
      return;
    }
    if (room) return;
    this.#sinkFull = true;
    sink.drained((writable) => {
      this.#sinkFull = false;
      if (!writable) {
        // The call ended: what queued can no longer be written.
        this.#items.length = 0;
      }
      // Written while the consumer still waits; once it runs again, it takes them itself.
      while (
        this.#sink !== undefined &&
        this.#wake !== undefined &&
        this.#items.length > 0 &&
        !this.#sinkFull
      ) {
        this.#write(this.#items.shift() as T);
      }
      if (this.#wake !== undefined && this.#closed && this.#items.length === 0) this.#settle();
    });
  }

  /** Answers the waiting consumer once closed and drained. */
  #settle(): void {
    const wake = this.#wake;
    const wakeFailed = this.#wakeFailed;
    this.#unpark();
    this.#ending().then(wake, wakeFailed);
  }

  /** The last answer of a closed and drained queue: its failure once, then done. */
  #ending(): Promise<IteratorResult<T>> {
    this.#end();
    if (!this.#failed) return Promise.resolve(DONE);
    this.#failed = false;
    return Promise.reject(this.#failure);
  }

  #unpark(): void {
    this.#wake = undefined;
    this.#wakeFailed = undefined;
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#options.onEnd?.();
  }
}
