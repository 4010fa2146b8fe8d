/**
 * @module The requests of a grpc-js bidi call as an async iterator, built
 * for streams of many small messages. Node's `Readable` iterator is an async
 * generator over `readable` events, and wrapping it to surface undecodable
 * requests adds a second one: two generator resumptions and several promises
 * per request. This iterator answers `next()` from a small buffer filled by
 * `data` events. While the buffer is full it holds back the call's next
 * read, so the transport stops reading and HTTP/2 flow control pushes back on
 * the client. A large request ({@link largeWireBytes}) fills it alone, and
 * while the consumer holds one, nothing is read ahead: a stream keeps at most
 * one large request the consumer has not asked for.
 */

import type { DescMethod } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type * as grpc from '@grpc/grpc-js';
import { RefusedRequest } from './errors.js';
import { largeWireBytes } from './wire-bytes.js';

/** Whether a method reads a stream of requests (client or bidi streaming), on any transport. */
export function readsRequestStream(method: DescMethod): boolean {
  return method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming';
}

/** Requests buffered before the call stops reading (a Readable's object-mode default). */
const HIGH_WATER = 16;

/** Requests left in the buffer when a stopped call reads again. */
const LOW_WATER = 4;

const DONE: IteratorReturnResult<undefined> = Object.freeze({ value: undefined, done: true });

/** The reason the iteration fails with when the call closed before its requests ended. */
const CLOSED_EARLY = new ConnectError('the stream closed before its requests ended', Code.Canceled);

/** A grpc-js bidi call, with the Readable hook it asks the transport for its next request through. */
type Call = grpc.ServerDuplexStream<object, object> & { _read(size: number): void };

/**
 * The requests of a call, in order. A request the transport could not decode
 * ({@link RefusedRequest}) fails the iteration with its error after the
 * requests before it; so does an `error` event, or the call closing before
 * the client ended its requests.
 */
export class RequestStream implements AsyncIterableIterator<unknown> {
  readonly #call: Call;
  readonly #read: (size: number) => void;
  readonly #buffered: unknown[] = [];
  /** Encoded bytes of the large requests in `#buffered` ({@link largeWireBytes}). */
  #bufferedBytes = 0;
  /** True while the buffer is full: the call's reads wait. */
  #paused = false;
  /** True from handing the consumer a large request until it asks for the next: reads wait. */
  #largeInHand = false;
  /** True when the call asked for a read while paused; it is made on resuming. */
  #readHeld = false;
  #ended = false;
  #failure: unknown;
  #waiting:
    | { resolve: (r: IteratorResult<unknown>) => void; reject: (e: unknown) => void }
    | undefined;
  /** The callback of a {@link take} that found nothing: called once something can be taken. */
  #ready: (() => void) | undefined;
  /** True while {@link take} asks the call for a read, which may deliver at once. */
  #taking = false;

  constructor(call: grpc.ServerDuplexStream<object, object>) {
    this.#call = call as Call;
    // A Readable asks for the next request through `_read`, also while it is
    // paused, until a high-water mark of 16 requests; whatever their size.
    // Holding the ask back here instead stops the transport at once.
    const read = this.#call._read;
    this.#read = (size) => read.call(call, size);
    this.#call._read = (size: number) => {
      if (this.#paused || this.#largeInHand || this.#ended) {
        this.#readHeld = true;
        return;
      }
      this.#read(size);
    };
    call.on('data', this.#onData);
    call.on('end', this.#onEnd);
    call.on('error', this.#onError);
    call.on('close', this.#onClose);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  next(): Promise<IteratorResult<unknown>> {
    const buffered = this.#shift();
    if (buffered !== undefined) return Promise.resolve(buffered);
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#ended) return Promise.resolve(DONE);
    if (this.#waiting !== undefined || this.#ready !== undefined) {
      return Promise.reject(new Error('RequestStream: next() called while another is pending'));
    }
    const next = new Promise<IteratorResult<unknown>>((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
    // After the waiter is set: the read may deliver at once.
    this.#readAgain();
    return next;
  }

  /**
   * The next request as `next()` answers it, but now: `undefined` when none
   * has arrived yet, and then `ready` is called once (from the transport's
   * event, synchronously) when one has, or the requests ended or failed; the
   * consumer takes again then. Throws where `next()` rejects. A consumer that
   * handles most requests in the turn they arrive saves a promise and a
   * resumption per request.
   */
  take(ready: () => void): IteratorResult<unknown> | undefined {
    const buffered = this.#shift();
    if (buffered !== undefined) return buffered;
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#ended) return DONE;
    if (this.#waiting !== undefined || this.#ready !== undefined) {
      throw new Error('RequestStream: take() called while another is pending');
    }
    this.#ready = ready;
    this.#taking = true;
    try {
      this.#readAgain();
    } finally {
      this.#taking = false;
    }
    // The read delivered at once (into the buffer): answered here, not through `ready`.
    if (this.#ready === undefined) return this.take(ready);
    return undefined;
  }

  /** The first buffered request, reading on when there is room; `undefined` when none. */
  #shift(): IteratorResult<unknown> | undefined {
    // Asking for the next request is done with the one before.
    this.#largeInHand = false;
    if (this.#buffered.length === 0) return undefined;
    const value = this.#buffered.shift();
    if (this.#bufferedBytes > 0) {
      const bytes = largeWireBytes(value);
      this.#bufferedBytes -= bytes;
      this.#largeInHand = bytes > 0;
    }
    if (this.#paused && this.#buffered.length <= LOW_WATER && this.#bufferedBytes === 0) {
      this.#paused = false;
    }
    if (!this.#paused && !this.#largeInHand) this.#readAgain();
    return { value, done: false };
  }

  /** Tells a waiting {@link take} that something can be taken; not while it is still asking. */
  #wakeTaker(): void {
    const ready = this.#ready;
    this.#ready = undefined;
    if (ready !== undefined && !this.#taking) ready();
  }

  /** Stops reading: the requests not yet read are dropped; the call is not ended. */
  return(): Promise<IteratorResult<unknown>> {
    this.#finish();
    this.#buffered.length = 0;
    this.#bufferedBytes = 0;
    // A next() still waiting ends too, rather than never.
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.resolve(DONE);
    this.#wakeTaker();
    return Promise.resolve(DONE);
  }

  readonly #onData = (message: unknown): void => {
    if (message instanceof RefusedRequest) {
      this.#fail(message.error);
      return;
    }
    const bytes = largeWireBytes(message);
    const waiting = this.#waiting;
    if (waiting !== undefined) {
      this.#waiting = undefined;
      this.#largeInHand = bytes > 0;
      waiting.resolve({ value: message, done: false });
      return;
    }
    this.#buffered.push(message);
    this.#bufferedBytes += bytes;
    if (this.#buffered.length >= HIGH_WATER || bytes > 0) this.#paused = true;
    this.#wakeTaker();
  };

  /** Makes the read the call asked for while reads waited, if it asked. */
  #readAgain(): void {
    if (this.#ended || !this.#readHeld) return;
    this.#readHeld = false;
    // The size is unused: grpc-js reads one request per ask.
    this.#read(1);
  }

  readonly #onEnd = (): void => {
    this.#finish();
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.resolve(DONE);
    this.#wakeTaker();
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
    this.#wakeTaker();
  }

  /** Reads no more: later messages, errors and the close are ignored. */
  #finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#call.off('data', this.#onData);
    this.#call.off('end', this.#onEnd);
    this.#call.off('error', this.#onError);
    this.#call.off('close', this.#onClose);
    // Reads the call asks for from now on are held forever (see the
    // constructor), so the transport stops pulling requests nobody will read;
    // pausing also keeps a flowing call from dropping them.
    this.#call.pause();
  }
}

/** Requests that can be taken in the turn they arrive ({@link RequestStream.take}). */
export interface TakesNow<T> {
  take(ready: () => void): IteratorResult<T> | undefined;
}

/** Whether `requests` can be taken in the turn they arrive: a gRPC call's, read by a {@link RequestStream}. */
export function takesNow<T>(
  requests: AsyncIterator<T>,
): requests is AsyncIterator<T> & TakesNow<T> {
  return requests instanceof RequestStream;
}
