/**
 * @module An unbounded async queue for one stream's outgoing messages: the
 * producers push, the RPC generator drains it. Backpressure is the
 * producers' business (they bound what they have in flight).
 */

/** A queue that is also an async iterable, ending once closed and drained. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  /** Adds an item; ignored once closed. */
  push(item: T): void {
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake?.();
  }

  /** Ends the iteration after the items already queued. */
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  /** Number of items waiting. */
  get size(): number {
    return this.#items.length;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}
