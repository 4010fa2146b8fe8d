/**
 * @module OpenTelemetry traces, as the rest of the sidecar sees them: a
 * server span per HookService call (made in the one guard, `server/guard.ts`)
 * and a client span per hook delivery (notification, control, modifying
 * webhook), with the W3C trace context (`traceparent`, `tracestate`) read
 * from the caller's metadata and written into the delivery's headers.
 *
 * Off by default. {@link tracingSettings} reads the standard `OTEL_*`
 * variables of the process environment at start; only when they ask for an
 * OTLP exporter does {@link startTracing} load the SDK (`otel.ts`, a dynamic
 * import, so a sidecar without tracing never loads or parses it). With
 * tracing off the sidecar holds no {@link Tracing} at all: the guard serves
 * the plain methods, and a delivery pays one `undefined` check.
 *
 * A delivery finds its RPC's span through the call's abort signal, which
 * the service already hands to every delivery, rather than through an
 * AsyncLocalStorage context: on Node 20 that turns on V8's promise hooks
 * for every promise of the process, a cost the bench measured on every
 * decision.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import type { Logger } from '../log.js';

/** Value of `OTEL_SERVICE_NAME` when it is unset. */
export const DEFAULT_SERVICE_NAME = 'agenthooks';

/** The one exporter and protocol the sidecar ships: OTLP over HTTP with protobuf bodies. */
export const OTLP_EXPORTER = 'otlp';
export const OTLP_PROTOCOL = 'http/protobuf';

/** The `OTEL_*` variables the sidecar itself reads (the SDK reads the others, see the README). */
const OTEL_SDK_DISABLED = 'OTEL_SDK_DISABLED';
const OTEL_TRACES_EXPORTER = 'OTEL_TRACES_EXPORTER';
const OTEL_EXPORTER_OTLP_ENDPOINT = 'OTEL_EXPORTER_OTLP_ENDPOINT';
const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
const OTEL_EXPORTER_OTLP_PROTOCOL = 'OTEL_EXPORTER_OTLP_PROTOCOL';
const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
const OTEL_SERVICE_NAME = 'OTEL_SERVICE_NAME';

/** Attribute names of our own, beside the semantic-convention ones. */
export const ATTR = {
  HOOK_ID: 'agenthooks.hook.id',
  HOOK_EVENT: 'agenthooks.hook.event',
  HOOK_POINT: 'agenthooks.hook.point',
  DELIVERY_KIND: 'agenthooks.delivery.kind',
  DELIVERY_ROUTE: 'agenthooks.delivery.route',
  HOOK_STATUS: 'agenthooks.hook.status',
  RPC_PROTOCOL: 'agenthooks.rpc.protocol',
} as const;

/**
 * How a hook is delivered: a notification `POST` (`fetch`) or QStash
 * publish (`qstash`), a tool-call control (`control`), a modifying webhook
 * (`modify`).
 */
export type DeliveryKind = 'fetch' | 'qstash' | 'control' | 'modify';

/** What a delivery span names: the hook, its event or point, and how it is delivered. */
export interface DeliveryLabel {
  readonly hookId: string;
  readonly kind: DeliveryKind;
  /** The event (`beforeToolCall`, `afterStep`, ...) of a notification or control. */
  readonly event?: string;
  /** The point (`transformContext`, ...) of a modifying hook. */
  readonly point?: string;
}

/** How a delivery ended, for its span. */
export interface DeliveryOutcome {
  /**
   * The hook's outcome: `delivered`, `allow`, `deny`, `ignored`, `applied`,
   * or the failure's code (`http_error`, `timeout`, ...). A failure sets the
   * span's status to ERROR, except `cancelled`.
   */
  readonly status: string;
  /** The receiver's HTTP status, when a response arrived. */
  readonly httpStatus?: number | undefined;
  /** The failure's message (never a header or a body), set on an ERROR status. */
  readonly error?: string | undefined;
  /** Which path delivered a notification: `fetch`, `qstash` or `fallback`. */
  readonly route?: string | undefined;
}

/** The span of one hook delivery. */
export interface DeliverySpan {
  /**
   * Writes this span's `traceparent` (and `tracestate`, when there is one)
   * into a request's headers, names lower-cased. Ours win over a hook's own
   * header template of the same name.
   */
  inject(headers: Record<string, string>): void;
  /** Records the outcome and ends the span; later calls do nothing. */
  end(outcome: DeliveryOutcome): void;
}

/** Reads a request header by its lower-case name (`Headers` is one). */
export interface RequestHeaders {
  get(name: string): string | null | undefined;
}

/** The server span of one RPC. */
export interface RpcSpan {
  /** Records the gRPC status code the client gets (0 for OK) and ends the span. */
  end(code: number, message?: string): void;
}

/** The tracer of a sidecar with tracing on. */
export interface Tracing {
  /**
   * Starts the server span of an RPC, the child of the caller's
   * `traceparent` when its metadata carries a valid one. The call's
   * `signal`, which the service hands down to every delivery of the call,
   * names the span from then on.
   */
  startRpc(
    method: DescMethod,
    protocolName: string,
    requestHeader: RequestHeaders,
    signal: AbortSignal,
  ): RpcSpan;
  /**
   * Starts a delivery span, the child of the RPC span whose call `signal`
   * is (or that {@link Tracing.adopt} tied it to); a root span otherwise.
   */
  startDelivery(label: DeliveryLabel, signal: AbortSignal): DeliverySpan;
  /**
   * Ties the signal of work a call leaves running (detached notifications)
   * to the call's: its deliveries are children of the call's span too.
   */
  adopt(child: AbortSignal, parent: AbortSignal): void;
  /** Ends the exporter: spans not yet sent are flushed first (bounded by `OTEL_EXPORTER_OTLP_TIMEOUT`). */
  shutdown(): Promise<void>;
}

/** What {@link tracingSettings} found in the environment, when tracing is on. */
export interface TracingSettings {
  /** `OTEL_SERVICE_NAME`, default {@link DEFAULT_SERVICE_NAME}. */
  readonly serviceName: string;
}

/** A tracing variable that the sidecar cannot honour; the start fails rather than trace elsewhere. */
export class TracingConfigError extends Error {
  override readonly name = 'TracingConfigError';
  readonly code = 'INVALID_TRACING_CONFIG';
}

/**
 * Decides from the process environment whether tracing is on.
 *
 * - `OTEL_SDK_DISABLED=true` wins: off.
 * - `OTEL_TRACES_EXPORTER=otlp` turns it on; `none` turns it off; any other
 *   exporter (`console`, `zipkin`, a list) is refused.
 * - Unset `OTEL_TRACES_EXPORTER`: on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 *   or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else off.
 * - With tracing on, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (else
 *   `OTEL_EXPORTER_OTLP_PROTOCOL`) may only be `http/protobuf`, and the
 *   endpoint the exporter uses must be an http(s) URL. Values are
 *   case-insensitive.
 *
 * @throws TracingConfigError for an exporter or protocol the sidecar does not ship.
 * @example
 * tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' }); // { serviceName: 'agenthooks' }
 * tracingSettings({}); // undefined
 */
export function tracingSettings(
  env: Readonly<Record<string, string | undefined>>,
): TracingSettings | undefined {
  if (trimmed(env[OTEL_SDK_DISABLED])?.toLowerCase() === 'true') return undefined;
  // Enum values are case-insensitive (OpenTelemetry's environment specification).
  const exporter = trimmed(env[OTEL_TRACES_EXPORTER])?.toLowerCase();
  const tracesEndpoint = trimmed(env[OTEL_EXPORTER_OTLP_TRACES_ENDPOINT]);
  const baseEndpoint = trimmed(env[OTEL_EXPORTER_OTLP_ENDPOINT]);
  if (exporter === undefined) {
    if (tracesEndpoint === undefined && baseEndpoint === undefined) return undefined;
  } else if (exporter === 'none') {
    return undefined;
  } else if (exporter !== OTLP_EXPORTER) {
    throw new TracingConfigError(
      `${OTEL_TRACES_EXPORTER}: only '${OTLP_EXPORTER}' or 'none' is supported, not '${exporter}'`,
    );
  }
  const protocolVar =
    trimmed(env[OTEL_EXPORTER_OTLP_TRACES_PROTOCOL]) !== undefined
      ? OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
      : OTEL_EXPORTER_OTLP_PROTOCOL;
  const protocol = trimmed(env[protocolVar]);
  if (protocol !== undefined && protocol.toLowerCase() !== OTLP_PROTOCOL) {
    throw new TracingConfigError(
      `${protocolVar}: only '${OTLP_PROTOCOL}' is supported, not '${protocol}'`,
    );
  }
  // The one the exporter uses: the traces endpoint, else the base one.
  if (tracesEndpoint !== undefined) {
    checkEndpoint(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, tracesEndpoint);
  } else if (baseEndpoint !== undefined) {
    checkEndpoint(OTEL_EXPORTER_OTLP_ENDPOINT, baseEndpoint);
  }
  return { serviceName: trimmed(env[OTEL_SERVICE_NAME]) ?? DEFAULT_SERVICE_NAME };
}

/**
 * Starts tracing when the environment asks for it (see
 * {@link tracingSettings}), loading the SDK only then; answers `undefined`
 * when tracing is off. The SDK's own warnings and errors (an export that
 * failed, a full queue) go to `logger` as warnings.
 *
 * @throws TracingConfigError for an exporter or protocol the sidecar does not ship.
 */
export async function startTracing(
  env: Readonly<Record<string, string | undefined>>,
  logger: Logger,
): Promise<Tracing | undefined> {
  const settings = tracingSettings(env);
  if (settings === undefined) return undefined;
  const { createOtelTracing } = await import('./otel.js');
  return createOtelTracing(settings, logger);
}

/**
 * Refuses an endpoint that is not an absolute http(s) URL: the exporter
 * would fall back to its default (`localhost:4318`) or fail only at export.
 */
function checkEndpoint(variable: string, value: string): void {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new TracingConfigError(`${variable}: must be an http(s) URL`);
  }
}

function trimmed(value: string | undefined): string | undefined {
  const t = value?.trim();
  return t === undefined || t === '' ? undefined : t;
}
