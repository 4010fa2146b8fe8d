/**
 * @module The encoded size of large stream requests (after any compression
 * is undone), recorded where the gRPC deserializer sees it, so that what
 * buffers or holds requests can bound the bytes it keeps and not only the
 * count. It is not their heap size: a decoded message takes more, and a
 * `google.protobuf.Value` of many small elements far more. Only large requests are
 * recorded: a small one costs a comparison, and the count bounds that hold
 * them already bound their bytes (64 requests under {@link LARGE_REQUEST_BYTES}
 * are under a mebibyte).
 */

/** Requests of at least this many encoded bytes are recorded. */
export const LARGE_REQUEST_BYTES = 16 * 1024;

const sizes = new WeakMap<object, number>();

/** Records the encoded size of a decoded request, when it is large. */
export function noteWireBytes(request: object, bytes: number): void {
  if (bytes >= LARGE_REQUEST_BYTES) sizes.set(request, bytes);
}

/**
 * The bytes a request counts against a byte bound: its encoded size when
 * it was recorded as large, else 0.
 *
 * @example
 * largeWireBytes(request); // 4_000_012 for a 4 MB event, 0 for a small one
 */
export function largeWireBytes(request: unknown): number {
  if (typeof request !== 'object' || request === null) return 0;
  return sizes.get(request) ?? 0;
}
