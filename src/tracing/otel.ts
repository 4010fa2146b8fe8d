/**
 * @module The OpenTelemetry SDK behind {@link Tracing}: a Node tracer
 * provider, a batch span processor and the OTLP/HTTP protobuf exporter. Loaded by `startTracing` with a dynamic
 * import only when tracing is on, and the packages are imported dynamically
 * here too: the bundle (`scripts/bundle.mjs`) leaves `@opentelemetry/*`
 * outside, so a sidecar without tracing never reads them.
 *
 * The SDK reads its own variables: the exporter's `OTEL_EXPORTER_OTLP_*`
 * (endpoint, headers, timeout, compression, certificates), the batch
 * processor's `OTEL_BSP_*`, the sampler's `OTEL_TRACES_SAMPLER(_ARG)` and the
 * resource's `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import type {
  Attributes,
  Span,
  SpanContext,
  SpanStatusCode,
  TextMapGetter,
} from '@opentelemetry/api';
import type { Logger } from '../log.js';
import type {
  DeliveryLabel,
  DeliveryOutcome,
  DeliverySpan,
  RequestHeaders,
  RpcSpan,
  Tracing,
  TracingSettings,
} from './tracing.js';
import { ATTR, DEFAULT_SERVICE_NAME } from './tracing.js';

/** Name and version of the instrumentation scope of our spans. */
const SCOPE = 'agenthooks';

/** gRPC's OK; Connect's Code has no member for it. */
const OK = 0;

/**
 * gRPC codes of a server span with status ERROR (the RPC semantic
 * conventions: the server's own failures, not the client's mistakes):
 * UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
 */
const SERVER_ERROR_CODES = new Set([2, 4, 12, 13, 14, 15]);

/** Reads W3C trace context from a request's `Headers` (names are case-insensitive there). */
const HEADERS_GETTER: TextMapGetter<RequestHeaders> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  // The W3C propagator reads the two names it knows; it never lists the keys.
  keys: () => [],
};

/**
 * Starts the SDK and answers the {@link Tracing} over it.
 *
 * @example
 * const tracing = await createOtelTracing({ serviceName: 'agenthooks' }, logger);
 */
export async function createOtelTracing(
  settings: TracingSettings,
  logger: Logger,
): Promise<Tracing> {
  const [api, core, node, exporterModule, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
  ]);
  const { SpanKind, SpanStatusCode, ROOT_CONTEXT, trace } = api;
  // The SDK reports a failed export or a dropped span through `diag` only: ours logs them.
  const warn = (message: string, ...args: unknown[]) =>
    logger.warn(
      'tracing',
      args.length === 0 ? { detail: message } : { detail: message, err: args[0] },
    );
  const quiet = () => undefined;
  api.diag.setLogger(
    { error: warn, warn, info: quiet, debug: quiet, verbose: quiet },
    api.DiagLogLevel.WARN,
  );
  // Ours, then the environment's (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME) over it.
  const resource = resources
    .resourceFromAttributes({
      'service.name': settings.serviceName || DEFAULT_SERVICE_NAME,
    })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new node.NodeTracerProvider({
    resource,
    // The exporter reads OTEL_EXPORTER_OTLP_(TRACES_)*; the processor OTEL_BSP_*.
    spanProcessors: [new node.BatchSpanProcessor(new exporterModule.OTLPTraceExporter())],
  });
  // Not registered globally: no context manager (parents travel with the
  // call's signal) and no global propagator: ours writes W3C trace context
  // only, so a caller's `baggage` never reaches a receiver.
  const propagator = new core.W3CTraceContextPropagator();
  const tracer = provider.getTracer(SCOPE);
  /** Each call's span, by the call's signal; gone with the signal. */
  const parents = new WeakMap<AbortSignal, Span>();

  const sdk: Sdk = { error: SpanStatusCode.ERROR, isValid: trace.isSpanContextValid };
  /** Each method's span name and attributes, by protocol: made once, not per call (the SDK copies them). */
  const rpcLabels = new Map<DescMethod, Map<string, RpcLabel>>();
  const rpcLabel = (method: DescMethod, protocolName: string): RpcLabel => {
    let byProtocol = rpcLabels.get(method);
    if (byProtocol === undefined) {
      byProtocol = new Map();
      rpcLabels.set(method, byProtocol);
    }
    let label = byProtocol.get(protocolName);
    if (label === undefined) {
      const service = method.parent.typeName;
      label = {
        name: `${service}/${method.name}`,
        attributes: Object.freeze({
          'rpc.system': protocolName === 'connect' ? 'connect_rpc' : 'grpc',
          'rpc.service': service,
          'rpc.method': method.name,
          [ATTR.RPC_PROTOCOL]: protocolName,
        }),
      };
      byProtocol.set(protocolName, label);
    }
    return label;
  };

  return {
    startRpc(
      method: DescMethod,
      protocolName: string,
      requestHeader: RequestHeaders,
      signal: AbortSignal,
    ): RpcSpan {
      const parent = propagator.extract(ROOT_CONTEXT, requestHeader, HEADERS_GETTER);
      const label = rpcLabel(method, protocolName);
      const span = tracer.startSpan(
        label.name,
        { kind: SpanKind.SERVER, attributes: label.attributes },
        parent,
      );
      // The span, not a context holding it: a context is a copied Map, made
      // only when a delivery starts under it.
      parents.set(signal, span);
      return new OtelRpcSpan(span, sdk);
    },

    startDelivery(label: DeliveryLabel, signal: AbortSignal): DeliverySpan {
      // Literal keys: an object literal with computed keys is built property by property.
      const attributes: Attributes = {
        'agenthooks.hook.id': label.hookId,
        'agenthooks.delivery.kind': label.kind,
      };
      if (label.event !== undefined) attributes[ATTR.HOOK_EVENT] = label.event;
      if (label.point !== undefined) attributes[ATTR.HOOK_POINT] = label.point;
      const parent = parents.get(signal);
      const span: Span = tracer.startSpan(
        `${label.kind} ${label.event ?? label.point ?? ''}`.trimEnd(),
        { kind: SpanKind.CLIENT, attributes },
        parent === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, parent),
      );
      return new OtelDeliverySpan(span, sdk);
    },

    adopt(child: AbortSignal, parent: AbortSignal) {
      const found = parents.get(parent);
      if (found !== undefined) parents.set(child, found);
    },

    shutdown: () => provider.shutdown(),
  };
}

/** An RPC span's name and attributes. */
interface RpcLabel {
  readonly name: string;
  readonly attributes: Readonly<Attributes>;
}

/** What the span classes use of the SDK, loaded once. */
interface Sdk {
  readonly error: SpanStatusCode;
  /** Whether a span context has non-zero ids (a suppressed span's has none, and is not propagated). */
  readonly isValid: (context: SpanContext) => boolean;
}

/**
 * An RPC's server span. A class rather than an object of closures: a call
 * pays for one object, not for a function per member.
 */
class OtelRpcSpan implements RpcSpan {
  #ended = false;

  constructor(
    readonly span: Span,
    readonly sdk: Sdk,
  ) {}

  end(code: number, message?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const { span } = this;
    span.setAttribute('rpc.grpc.status_code', code);
    if (code !== OK && SERVER_ERROR_CODES.has(code)) {
      span.setStatus(
        message === undefined ? { code: this.sdk.error } : { code: this.sdk.error, message },
      );
    }
    span.end();
  }
}

/** A delivery's client span; see {@link OtelRpcSpan} for why a class. */
class OtelDeliverySpan implements DeliverySpan {
  #ended = false;

  constructor(
    readonly span: Span,
    readonly sdk: Sdk,
  ) {}

  /**
   * The W3C `traceparent` of this span (version 00, its trace and span ids
   * and flags) and its `tracestate`, written here: the propagator would
   * first build a context around the span.
   */
  inject(headers: Record<string, string>): void {
    const context = this.span.spanContext();
    if (!this.sdk.isValid(context)) return;
    const { traceId, spanId, traceFlags, traceState } = context;
    headers.traceparent = `00-${traceId}-${spanId}-${traceFlags < 16 ? '0' : ''}${traceFlags.toString(16)}`;
    const state = traceState?.serialize();
    if (state !== undefined && state !== '') headers.tracestate = state;
  }

  end(outcome: DeliveryOutcome): void {
    if (this.#ended) return;
    this.#ended = true;
    const { span } = this;
    span.setAttribute(ATTR.HOOK_STATUS, outcome.status);
    if (outcome.httpStatus !== undefined && outcome.httpStatus > 0) {
      span.setAttribute('http.response.status_code', outcome.httpStatus);
    }
    if (outcome.route !== undefined) span.setAttribute(ATTR.DELIVERY_ROUTE, outcome.route);
    if (outcome.error !== undefined && outcome.status !== 'cancelled') {
      span.setAttribute('error.type', outcome.status);
      span.setStatus({ code: this.sdk.error, message: outcome.error });
    }
    span.end();
  }
}
