/**
 * @module The requests of a grpc-js bidi call as an async iterator, built
 * for streams of many small messages. Node's `Readable` iterator is an async
 * generator over `readable` events, and wrapping it to surface undecodable
 * requests adds a second one: two generator resumptions and several promises
 * per request. This iterator answers `next()` from a small buffer filled by
 * `data` events, and pauses the call while the buffer is full, so the
 * transport stops reading and HTTP/2 flow control pushes back on the client.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import type * as grpc from '@grpc/grpc-js';
import { MalformedRequest } from './errors.js';

/** Requests buffered before the call is paused (a Readable's object-mode default). */
const HIGH_WATER = 16;

/** Requests left in the buffer when a paused call resumes. */
const LOW_WATER = 4;

const DONE: IteratorReturnResult<undefined> = Object.freeze({ value: undefined, done: true });

/** The reason the iteration fails with when the call closed before its requests ended. */
const CLOSED_EARLY = new ConnectError('the stream closed before its requests ended', Code.Canceled);

type Call = grpc.ServerDuplexStream<object, object>;

/**
 * The requests of a call, in order. A request the transport could not decode
 * ({@link MalformedRequest}) fails the iteration with its error after the
 * requests before it; so does an `error` event, or the call closing before
 * the client ended its requests.
 */
export class RequestStream implements AsyncIterableIterator<unknown> {
  readonly #call: Call;
  readonly #buffered: unknown[] = [];
  #paused = false;
  #ended = false;
  #failure: unknown;
  #waiting:
    | { resolve: (r: IteratorResult<unknown>) => void; reject: (e: unknown) => void }
    | undefined;

  constructor(call: Call) {
    this.#call = call;
    call.on('data', this.#onData);
    call.on('end', this.#onEnd);
    call.on('error', this.#onError);
    call.on('close', this.#onClose);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.#buffered.length > 0) {
      const value = this.#buffered.shift();
      if (this.#paused && !this.#ended && this.#buffered.length <= LOW_WATER) {
        this.#paused = false;
        this.#call.resume();
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#ended) return Promise.resolve(DONE);
    if (this.#waiting !== undefined) {
      return Promise.reject(new Error('RequestStream: next() called while another is pending'));
    }
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
  }

  /** Stops reading: the requests not yet read are dropped; the call is not ended. */
  return(): Promise<IteratorResult<unknown>> {
    this.#finish();
    this.#buffered.length = 0;
    // A next() still waiting ends too, rather than never.
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.resolve(DONE);
    return Promise.resolve(DONE);
  }

  readonly #onData = (message: unknown): void => {
    if (message instanceof MalformedRequest) {
      this.#fail(message.error);
      return;
    }
    const waiting = this.#waiting;
    if (waiting !== undefined) {
      this.#waiting = undefined;
      waiting.resolve({ value: message, done: false });
      return;
    }
    this.#buffered.push(message);
    if (!this.#paused && this.#buffered.length >= HIGH_WATER) {
      this.#paused = true;
      this.#call.pause();
    }
  };

  readonly #onEnd = (): void => {
    this.#finish();
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.resolve(DONE);
  };

  readonly #onError = (e: unknown): void => {
    this.#fail(e);
  };

  readonly #onClose = (): void => {
    if (!this.#ended) this.#fail(CLOSED_EARLY);
  };

  /** Ends the iteration with `e` once the buffered requests are read. */
  #fail(e: unknown): void {
    if (this.#ended) return;
    this.#finish();
    this.#failure = e;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(e);
  }

  /** Reads no more: later messages, errors and the close are ignored. */
  #finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#call.off('data', this.#onData);
    this.#call.off('end', this.#onEnd);
    this.#call.off('error', this.#onError);
    this.#call.off('close', this.#onClose);
    // Removing the `data` listener leaves the call flowing: pause it, so the
    // transport stops pulling requests nobody will read.
    this.#call.pause();
  }
}
