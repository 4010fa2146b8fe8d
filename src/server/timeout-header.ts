/**
 * @module Deadlines longer than a Node timer can hold. `setTimeout` takes at
 * most 2^31 - 1 ms (24.8 days); a longer delay fires after 1 ms. grpc-js
 * also truncates a `grpc-timeout` to a signed 32-bit integer. So a client
 * that asks for a month (a common spelling of "no deadline") saw its call
 * fail at once: `DEADLINE_EXCEEDED` over gRPC, `CANCELLED` over Connect.
 * The request's timeout header is cut to the longest a timer holds before
 * the transport reads it.
 */

/** The longest delay a Node timer holds, in milliseconds. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Milliseconds per `grpc-timeout` unit. */
const GRPC_TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000001,
};

/**
 * A `grpc-timeout` value as each transport reads it: connect (gRPC-Web on
 * the HTTP listener) takes exactly 8 digits at most and a unit; grpc-js
 * (the gRPC listener) the first such run anywhere in the value, with
 * spaces allowed before the unit.
 */
const GRPC_TIMEOUT = {
  connect: /^(\d{1,8})([HMSmun])$/,
  'grpc-js': /(\d{1,8})\s*([HMSmun])/,
} as const;

/** Whose reading of `grpc-timeout` {@link clampTimeoutHeaders} follows. */
export type TimeoutReader = keyof typeof GRPC_TIMEOUT;

/** The longest `grpc-timeout` a timer holds: 596 hours, 2,145,600,000 ms. */
const MAX_GRPC_TIMEOUT = `${Math.floor(MAX_TIMER_MS / 3_600_000)}H`;

/**
 * Cuts the `grpc-timeout` (gRPC, gRPC-Web) and `connect-timeout-ms`
 * (Connect) of `headers` to {@link MAX_TIMER_MS}, in place, reading
 * `grpc-timeout` as `reader` will. A value that does not parse is left for
 * the transport to refuse.
 *
 * @example
 * const headers = { 'grpc-timeout': '720H' };
 * clampTimeoutHeaders(headers); // headers['grpc-timeout'] === '596H'
 */
export function clampTimeoutHeaders(
  headers: Record<string, string | string[] | undefined>,
  reader: TimeoutReader = 'connect',
): void {
  const grpcTimeout = headers['grpc-timeout'];
  if (typeof grpcTimeout === 'string') {
    const match = GRPC_TIMEOUT[reader].exec(grpcTimeout);
    if (match !== null) {
      const ms = Number(match[1]) * (GRPC_TIMEOUT_UNIT_MS[match[2] as string] as number);
      if (ms > MAX_TIMER_MS) headers['grpc-timeout'] = MAX_GRPC_TIMEOUT;
    }
  }
  const connectTimeout = headers['connect-timeout-ms'];
  if (typeof connectTimeout === 'string' && /^\d{1,10}$/.test(connectTimeout)) {
    if (Number(connectTimeout) > MAX_TIMER_MS) {
      headers['connect-timeout-ms'] = String(MAX_TIMER_MS);
    }
  }
}
