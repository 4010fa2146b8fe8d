/**
 * @module How a stream's responses can reach the transport without a promise
 * each. The transport pulls responses through `next()`; a response that is
 * ready while the transport waits in it can instead be written at once,
 * in the turn that produced it, through the sink the transport attaches.
 * `DispatchStream` answers one ack per event: without a sink each ack took a
 * promise in the queue, one in the guard and a resumption of the writer.
 */

/** The transport's side: writes one response, and tells when a full buffer drained. */
export interface StreamSink<T> {
  /** Writes `response`; false when the transport's buffer is full (see {@link drained}). */
  write(response: T): boolean;
  /**
   * Calls `resume` once, with true when the buffer drained, or false when the
   * call ended first (nothing more can be written).
   */
  drained(resume: (writable: boolean) => void): void;
}

/** Responses that take a sink: written through it while their consumer waits in `next()`. */
export interface SinkTarget<T> {
  attachSink(sink: StreamSink<T>): void;
}

/** Hands `sink` to `responses` when they take one; they are pulled through `next()` either way. */
export function attachSink<T>(responses: AsyncIterator<T>, sink: StreamSink<T>): void {
  const target = responses as Partial<SinkTarget<T>>;
  if (typeof target.attachSink === 'function') target.attachSink(sink);
}
