/**
 * @module The OpenTelemetry SDK behind {@link Tracing}: a Node tracer
 * provider (AsyncLocalStorage context, so a delivery started anywhere in an
 * RPC's async work is that RPC's child), a batch span processor and the
 * OTLP/HTTP protobuf exporter. Loaded by `startTracing` with a dynamic
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
import type { Attributes, Context, Span, TextMapGetter } from '@opentelemetry/api';
import type {
  DeliveryLabel,
  DeliveryOutcome,
  DeliverySpan,
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
const HEADERS_GETTER: TextMapGetter<Headers> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  keys: (carrier) => Array.from(carrier.keys()),
};

/**
 * Starts the SDK and answers the {@link Tracing} over it.
 *
 * @example
 * const tracing = await createOtelTracing({ serviceName: 'agenthooks' });
 */
export async function createOtelTracing(settings: TracingSettings): Promise<Tracing> {
  const [api, core, node, exporterModule, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
  ]);
  const { SpanKind, SpanStatusCode, ROOT_CONTEXT, context, trace, defaultTextMapSetter } = api;
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
  // The AsyncLocalStorage context manager; no global propagator: ours writes
  // W3C trace context only, so a caller's `baggage` never reaches a receiver.
  provider.register({ propagator: null });
  const propagator = new core.W3CTraceContextPropagator();
  const tracer = provider.getTracer(SCOPE);

  return {
    startRpc(method: DescMethod, protocolName: string, requestHeader: Headers): RpcSpan {
      const parent = propagator.extract(ROOT_CONTEXT, requestHeader, HEADERS_GETTER);
      const service = method.parent.typeName;
      const span = tracer.startSpan(
        `${service}/${method.name}`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'rpc.system': protocolName === 'connect' ? 'connect_rpc' : 'grpc',
            'rpc.service': service,
            'rpc.method': method.name,
            'agenthooks.rpc.protocol': protocolName,
          },
        },
        parent,
      );
      const active: Context = trace.setSpan(parent, span);
      let ended = false;
      return {
        run: (fn) => context.with(active, fn),
        end(code: number, message?: string) {
          if (ended) return;
          ended = true;
          span.setAttribute('rpc.grpc.status_code', code);
          if (code !== OK && SERVER_ERROR_CODES.has(code)) {
            span.setStatus(
              message === undefined
                ? { code: SpanStatusCode.ERROR }
                : { code: SpanStatusCode.ERROR, message },
            );
          }
          span.end();
        },
      };
    },

    startDelivery(label: DeliveryLabel): DeliverySpan {
      const attributes: Attributes = {
        [ATTR.HOOK_ID]: label.hookId,
        [ATTR.DELIVERY_KIND]: label.kind,
        'http.request.method': 'POST',
      };
      if (label.event !== undefined) attributes[ATTR.HOOK_EVENT] = label.event;
      if (label.point !== undefined) attributes[ATTR.HOOK_POINT] = label.point;
      const span: Span = tracer.startSpan(
        `${label.kind} ${label.event ?? label.point ?? ''}`.trimEnd(),
        { kind: SpanKind.CLIENT, attributes },
        context.active(),
      );
      const own = trace.setSpan(ROOT_CONTEXT, span);
      let ended = false;
      return {
        inject(headers: Record<string, string>) {
          propagator.inject(own, headers, defaultTextMapSetter);
        },
        end(outcome: DeliveryOutcome) {
          if (ended) return;
          ended = true;
          span.setAttribute(ATTR.HOOK_STATUS, outcome.status);
          if (outcome.httpStatus !== undefined && outcome.httpStatus > 0) {
            span.setAttribute('http.response.status_code', outcome.httpStatus);
          }
          if (outcome.route !== undefined) span.setAttribute(ATTR.DELIVERY_ROUTE, outcome.route);
          if (outcome.error !== undefined && outcome.status !== 'cancelled') {
            span.setAttribute('error.type', outcome.status);
            span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
          }
          span.end();
        },
      };
    },

    shutdown: () => provider.shutdown(),
  };
}
