/**
 * @module Notification dispatch: the matching non-control hooks of an
 * event's type run in registration order, each awaited, then the current
 * environment hooks. While a `Handle` stream serves the operation (local
 * mode), a hook with the handler flag runs its handler (a hook with both runs
 * only the handler); otherwise (queue mode) only webhooks run and
 * handler-only hooks are skipped. A failed delivery or handler is reported
 * and the next hook still runs; a failed critical webhook (`fallback: none`)
 * fails the dispatch after every sibling ran.
 */
import { create, type DescMessage, toBinary } from '@bufbuild/protobuf';
import type { Duration } from '@bufbuild/protobuf/wkt';
import {
  type HookOutcome,
  HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  ExecutorSchema,
  type HookEvent,
  HookEventSchema,
  HookType,
  type ToolResult,
} from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  type Hook,
  ModifyPoint,
  ModifyPointSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DispatchResponseSchema,
  type ModifyResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import type { BackgroundRun, BackgroundScope } from '../background.js';
import type { EmailEnricher } from '../delivery/email.js';
import { type EventCase, enumLiteral, hookTypeLiteral } from '../delivery/event-json.js';
import { buildWebhookPayload } from '../delivery/payload.js';
import type { WebhookSender } from '../delivery/webhook.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Tracing } from '../tracing/tracing.js';
import type { HandlerHub, HandlerResult } from './handlers.js';
import { compileMatcher } from './matcher.js';
import type { HookRegistry } from './registry.js';
import { checkToolName, TOOL_CALL_CONTEXT_INVALID } from './tool-call.js';
import { isControlHook, REASON, validateOperationId } from './validate.js';

/** What dispatch and control evaluation need. */
export interface DispatchDeps {
  readonly registry: HookRegistry;
  readonly sender: WebhookSender;
  readonly logger: Logger;
  /**
   * The current environment hooks (`AGENT_HOOK_WEBHOOK_*`), read at each
   * evaluation; throws INVALID_ENVIRONMENT while the environment is invalid.
   */
  readonly environmentHooks: () => readonly Hook[];
  /** The runtime's attached handler streams. */
  readonly handlers: HandlerHub;
  /** Adds `userEmail` to payloads (one cache per dispatcher); absent in tests that need no users. */
  readonly enricher?: EmailEnricher;
  /** Prometheus metrics; absent in tests that read none. */
  readonly metrics?: Metrics;
  /** Owner of the webhooks started and not awaited; aborts them at shutdown. */
  readonly background: BackgroundScope;
  /** Makes a span per webhook delivery; absent while tracing is off. */
  readonly tracing?: Tracing | undefined;
}

/** The `source` label of a hook's outcome. */
const SOURCE_LABEL: Readonly<Partial<Record<HookSource, string>>> = {
  [HookSource.ENVIRONMENT]: 'environment',
  [HookSource.OPERATOR]: 'operator',
};

/**
 * Records a hook's outcome in the metrics and returns it: a lifecycle hook
 * under its hook type (`beforeToolCall`), a modifying hook under its point
 * with `modify:` before it (`modify:beforeToolCall`), as three points share
 * their name with a hook type.
 */
export function noteOutcome(
  deps: { readonly metrics?: Metrics | undefined },
  outcome: HookOutcome,
): HookOutcome {
  deps.metrics?.hookOutcome(
    outcome.point === ModifyPoint.UNSPECIFIED
      ? hookTypeLiteral(outcome.hookType)
      : `modify:${enumLiteral(ModifyPointSchema, outcome.point) ?? outcome.point}`,
    SOURCE_LABEL[outcome.source] ?? 'caller',
    (HookOutcomeStatus[outcome.status] ?? 'UNSPECIFIED').toLowerCase(),
  );
  return outcome;
}

/** Reason of a dispatch that failed because a critical webhook (`fallback: none`) failed. */
export const CRITICAL_HOOK_DELIVERY_FAILED = 'CRITICAL_HOOK_DELIVERY_FAILED';

/**
 * A critical webhook (`fallback: none`) failed; thrown after every sibling
 * hook ran, with all their outcomes, so a queue step can retry. The message
 * is upstream's: `Critical webhook delivery failed: <hookId>`.
 */
export class CriticalDeliveryError extends AgentHooksError {
  override readonly name = 'CriticalDeliveryError';
  /** Outcomes of every hook that ran, the failed one included. */
  readonly outcomes: HookOutcome[];

  /**
   * @param response The detail holding `outcomes`: a `DispatchResponse` (the
   *   default), or the call's own response type (`ModifyResponse`).
   */
  constructor(
    hookId: string,
    outcomes: HookOutcome[],
    response: typeof DispatchResponseSchema | typeof ModifyResponseSchema = DispatchResponseSchema,
  ) {
    super(
      'unavailable',
      CRITICAL_HOOK_DELIVERY_FAILED,
      `Critical webhook delivery failed: ${hookId}`,
      {
        metadata: { hookId },
        details: [{ desc: response, value: create(response, { outcomes }) }],
      },
    );
    this.outcomes = outcomes;
  }
}

/** The routing facts of an event: its case, operation and tool name parts. */
export interface EventRoute extends EventCase {
  /** Operation whose hooks run: the event's `operationId` (the parent's, for call-agent events). */
  readonly operationId: string;
  /** Tool identifier, for tool events. */
  readonly identifier?: string;
  /** Tool API name, for tool events. */
  readonly apiName?: string;
}

/** Hook types whose event carries a tool-call context. */
const TOOL_EVENT_TYPES: ReadonlySet<HookType> = new Set([
  HookType.BEFORE_TOOL_CALL,
  HookType.AFTER_TOOL_CALL,
  HookType.ON_TOOL_CALL_ERROR,
]);

/** Executor numbers the contract defines, `EXECUTOR_UNSPECIFIED` included. */
const KNOWN_EXECUTORS: ReadonlySet<number> = new Set(ExecutorSchema.values.map((v) => v.number));

/**
 * Returns the routing facts of an event.
 *
 * @throws InvalidArgumentError when no event is set, a tool event has no
 *   context, it names no operation, its executor is a number the contract
 *   does not define, or its tool name is too long (`IDENTIFIER_TOO_LONG`).
 */
export function routeOf(event: HookEvent | undefined, field = 'event'): EventRoute {
  const set = event?.event;
  if (set?.case === undefined) {
    throw new InvalidArgumentError(field, 'EVENT_REQUIRED', 'an event is required');
  }
  const oneofField = HookEventSchema.field[set.case];
  // Every case of the oneof is a message field whose number is its HookType value.
  const type = oneofField.number as HookType;
  const message = set.value as {
    operationId?: string;
    context?: { operationId: string; identifier: string; apiName: string; executor: number };
  };
  const paths =
    (field === 'event' ? EVENT_PATHS[set.case] : undefined) ?? eventPaths(`${field}.${set.case}`);
  const context = message.context;
  if (context === undefined && TOOL_EVENT_TYPES.has(type)) {
    // Without its context a tool event names no operation: say what is missing.
    throw new InvalidArgumentError(
      paths.context,
      TOOL_CALL_CONTEXT_INVALID,
      'a tool-call context is required',
    );
  }
  if (context === undefined) {
    validateOperationId(message.operationId ?? '', paths.operationId);
  } else {
    validateOperationId(context.operationId, paths.contextOperationId);
    if (!KNOWN_EXECUTORS.has(context.executor)) {
      // A number the sidecar does not know, as on the webhook enums; an unset one is
      // refused by the event's required fields (`event-fields.ts`).
      throw new InvalidArgumentError(
        paths.executor,
        REASON.INVALID_ENUM_VALUE,
        `Unknown executor value ${context.executor}`,
      );
    }
    checkToolName(context.identifier, paths.identifier);
    checkToolName(context.apiName, paths.apiName);
  }
  return {
    type,
    desc: oneofField.message as DescMessage,
    message: set.value,
    operationId: context?.operationId ?? message.operationId ?? '',
    identifier: context?.identifier,
    apiName: context?.apiName,
  };
}

/** The field paths {@link routeOf} names in its errors, under one event case. */
function eventPaths(prefix: string) {
  return {
    context: `${prefix}.context`,
    operationId: `${prefix}.operationId`,
    contextOperationId: `${prefix}.context.operationId`,
    executor: `${prefix}.context.executor`,
    identifier: `${prefix}.context.identifier`,
    apiName: `${prefix}.context.apiName`,
  };
}

/** {@link eventPaths} of each case under `event`, built once rather than per event. */
const EVENT_PATHS: Record<string, ReturnType<typeof eventPaths>> = Object.fromEntries(
  HookEventSchema.fields.map((f) => [f.localName, eventPaths(`event.${f.localName}`)]),
);

/** A notification hook to run, with where it came from and how it runs. */
interface Notification {
  readonly hook: Hook;
  readonly source: HookSource;
  /** `handler` in local mode for a hook with the handler flag; `webhook` when it has one; else `skip`. */
  readonly mode: 'handler' | 'webhook' | 'skip';
}

/**
 * Returns the notification hooks of an event, in order: the operation's
 * caller hooks, then the current environment hooks. Both lists are read
 * before anything runs.
 *
 * @throws AgentHooksError INVALID_ENVIRONMENT, or a store error.
 */
async function notificationsOf(deps: DispatchDeps, route: EventRoute): Promise<Notification[]> {
  const environment = deps.environmentHooks();
  const { hooks } = await deps.registry.hooksOf(route.operationId);
  return notificationsFrom(deps, route, hooks, environment);
}

/**
 * Whether an event would run no hook, known without waiting: true only when
 * the operation's hooks are cached and none of them, nor of the environment,
 * applies. False means "ask {@link dispatchEvent}", not "some hook applies".
 */
export function matchesNoHookNow(deps: DispatchDeps, route: EventRoute): boolean {
  const cached = deps.registry.cachedHooksOf(route.operationId);
  if (cached === undefined) return false;
  let environment: readonly Hook[];
  try {
    environment = deps.environmentHooks();
  } catch {
    return false; // dispatchEvent reports INVALID_ENVIRONMENT
  }
  return notificationsFrom(deps, route, cached.hooks, environment).length === 0;
}

function notificationsFrom(
  deps: DispatchDeps,
  route: EventRoute,
  hooks: readonly Hook[],
  environment: readonly Hook[],
): Notification[] {
  const out: Notification[] = [];
  for (const hook of hooks) {
    if (!appliesTo(hook, route)) continue;
    const local = hook.handler && deps.handlers.serves(route.operationId, hook.plugin);
    const mode = local ? 'handler' : hook.webhook !== undefined ? 'webhook' : 'skip';
    out.push({ hook, source: HookSource.CALLER, mode });
  }
  for (const hook of environment) {
    if (appliesTo(hook, route)) out.push({ hook, source: HookSource.ENVIRONMENT, mode: 'webhook' });
  }
  return out;
}

/**
 * Runs the notification hooks of an event in order, each awaited, and
 * returns one outcome per hook of the event's type that matched.
 *
 * @throws CriticalDeliveryError after all hooks ran, when a `fallback: none` webhook failed.
 */
export async function dispatchEvent(
  deps: DispatchDeps,
  event: HookEvent,
  signal: AbortSignal,
): Promise<HookOutcome[]> {
  const route = routeOf(event);
  const outcomes: HookOutcome[] = [];
  let critical: string | undefined;
  for (const notification of await notificationsOf(deps, route)) {
    signal.throwIfAborted();
    const outcome = await runNotification(deps, notification, route, event, signal);
    outcomes.push(outcome);
    if (outcome.critical && critical === undefined) critical = outcome.hookId;
  }
  if (critical !== undefined) {
    deps.logger.error('critical webhook delivery failed', {
      operationId: route.operationId,
      hookId: critical,
      hookType: hookTypeLiteral(route.type as HookType),
    });
    throw new CriticalDeliveryError(critical, outcomes);
  }
  return outcomes;
}

/** `errorCode` of a SKIPPED observer webhook that was not sent: too many detached deliveries in flight. */
export const DETACHED_LIMIT = 'detached_limit';

/** `message` of a {@link DETACHED_LIMIT} outcome, followed by the bound reached. */
const DETACHED_LIMIT_MESSAGE = 'Hook HTTP request not sent: too many detached deliveries in flight';

/**
 * The bytes a detached task of `event` is counted for: the event's encoded
 * size. The task holds the event, and one JSON body built from it at a time.
 */
export function detachedBytes(event: HookEvent): number {
  return toBinary(HookEventSchema, event).byteLength;
}

/** What the `beforeToolCall` observers of an allowed call produced. */
export interface ObserverRun {
  /** The first mock a local handler supplied, if any. */
  readonly mock?: { readonly result: ToolResult; readonly hookId: string };
  /**
   * Outcomes of the handlers that ran, and SKIPPED for webhooks started
   * without being awaited (with `errorCode` {@link DETACHED_LIMIT} when they
   * were not started because too many detached deliveries were in flight).
   */
  readonly outcomes: HookOutcome[];
}

/**
 * Runs the `beforeToolCall` observers of an allowed call (upstream
 * `dispatchBeforeToolCall`): the notification webhooks are started without
 * being awaited (their failures, critical ones included, are only logged;
 * past the background scope's bounds they are not sent at all),
 * then the local handlers run in order; the first mock wins and the
 * remaining handlers are skipped. Mocks exist only in local mode. The hook
 * lists are read before this resolves, so a store or environment failure
 * still reaches the caller.
 */
export async function runToolCallObservers(
  deps: DispatchDeps,
  event: HookEvent,
  signal: AbortSignal,
): Promise<ObserverRun> {
  const route = routeOf(event);
  const notifications = await notificationsOf(deps, route);
  const webhooks = notifications.filter((n) => n.mode === 'webhook');
  // Detached: they run under the background scope, which bounds them and cuts them off at shutdown.
  const run: BackgroundRun =
    webhooks.length === 0
      ? { started: true }
      : deps.background.run(
          'notification webhooks',
          async (background) => {
            deps.tracing?.adopt(background, signal);
            for (const n of webhooks) await runNotification(deps, n, route, event, background);
          },
          { fields: { operationId: route.operationId }, bytes: detachedBytes(event) },
        );
  const outcomes: HookOutcome[] = webhooks.map((n) => {
    const skipped = create(
      HookOutcomeSchema,
      extend(outcomeBase(n, route), {
        status: HookOutcomeStatus.SKIPPED,
      }),
    );
    if (run.started) return skipped;
    // Never sent: the one outcome this webhook gets, so it is counted here.
    skipped.errorCode = DETACHED_LIMIT;
    skipped.message = `${DETACHED_LIMIT_MESSAGE} (${run.reason})`;
    return noteOutcome(deps, skipped);
  });
  for (const n of notifications) {
    if (n.mode !== 'handler') continue;
    const started = performance.now();
    const result = await deps.handlers.call(route.operationId, n.hook.id, event, signal);
    outcomes.push(
      noteOutcome(deps, handlerOutcome(deps, n, route, result, performance.now() - started)),
    );
    // The first mock wins, even when its handler also reported an error.
    if (result.kind === 'mock')
      return { mock: { result: result.result, hookId: n.hook.id }, outcomes };
    if (result.kind === 'error' && result.code === 'cancelled') signal.throwIfAborted();
  }
  return { outcomes };
}

/** True when a hook is a notification hook of the event's type whose matcher matches. */
export function appliesTo(hook: Hook, route: EventRoute): boolean {
  if (hook.type !== route.type || isControlHook(hook)) return false;
  return compileMatcher(hook.matcher)(route.identifier, route.apiName);
}

function outcomeBase(n: Notification, route: EventRoute) {
  return {
    hookId: n.hook.id,
    hookType: route.type,
    operationId: n.source === HookSource.CALLER ? route.operationId : '',
    source: n.source,
  };
}

async function runNotification(
  deps: DispatchDeps,
  n: Notification,
  route: EventRoute,
  event: HookEvent,
  signal: AbortSignal,
): Promise<HookOutcome> {
  const outcome = await notificationOutcome(deps, n, route, event, signal);
  return noteOutcome(deps, outcome);
}

async function notificationOutcome(
  deps: DispatchDeps,
  n: Notification,
  route: EventRoute,
  event: HookEvent,
  signal: AbortSignal,
): Promise<HookOutcome> {
  const base = outcomeBase(n, route);
  if (n.mode === 'skip') {
    // A handler-only hook runs only while a Handle stream serves its operation.
    return create(HookOutcomeSchema, extend(base, { status: HookOutcomeStatus.SKIPPED }));
  }
  if (n.mode === 'handler') {
    const started = performance.now();
    const result = await deps.handlers.call(route.operationId, n.hook.id, event, signal);
    return handlerOutcome(deps, n, route, result, performance.now() - started);
  }
  const webhook = n.hook.webhook as NonNullable<Hook['webhook']>;
  const built = buildWebhookPayload(event, n.hook.id, webhook);
  const payload = deps.enricher ? await deps.enricher.enrich(event, built, webhook, signal) : built;
  if (payload === undefined) {
    // The caller went away while the email lookup ran: nothing is sent.
    return create(
      HookOutcomeSchema,
      extend(base, {
        status: HookOutcomeStatus.CANCELLED,
        errorCode: 'cancelled',
      }),
    );
  }
  const span = deps.tracing?.startDelivery(
    {
      hookId: n.hook.id,
      kind: webhook.delivery === Delivery.QSTASH ? 'qstash' : 'fetch',
      event: hookTypeLiteral(route.type as HookType),
    },
    signal,
  );
  const result = await deps.sender.notify(webhook, payload, signal, span);
  span?.end(
    result.ok
      ? { status: 'delivered', httpStatus: result.status, route: result.route }
      : {
          status: result.code,
          httpStatus: result.status,
          error: result.message,
          route: result.route,
        },
  );
  deps.metrics?.webhookResult('notification', result.ok ? 'ok' : result.code);
  const duration = durationOf(result.durationMs);
  if (result.ok) {
    return create(
      HookOutcomeSchema,
      extend(base, {
        status: HookOutcomeStatus.DELIVERED,
        httpStatus: result.status,
        duration,
      }),
    );
  }
  const critical = webhook.fallback === Fallback.NONE && result.code !== 'cancelled';
  deps.logger.warn(
    critical ? 'critical webhook delivery failed' : 'webhook delivery failed (non-fatal)',
    {
      operationId: route.operationId,
      hookId: n.hook.id,
      hookType: hookTypeLiteral(route.type as HookType),
      code: result.code,
      httpStatus: result.status,
    },
  );
  return failedOutcome(
    extend(base, { httpStatus: result.status ?? 0, duration, critical }),
    result.code,
    result.message,
  );
}

function handlerOutcome(
  deps: DispatchDeps,
  n: Notification,
  route: EventRoute,
  result: HandlerResult,
  ms: number,
): HookOutcome {
  const base = extend(outcomeBase(n, route), { duration: durationOf(ms) });
  if (result.kind !== 'error') {
    return create(HookOutcomeSchema, extend(base, { status: HookOutcomeStatus.HANDLED }));
  }
  deps.logger.warn('handler failed', {
    operationId: route.operationId,
    hookId: n.hook.id,
    hookType: hookTypeLiteral(route.type as HookType),
    code: result.code,
  });
  return failedOutcome(base, result.code, result.message);
}

/**
 * The outcome of a hook that failed with `code`: `CANCELLED` when the code
 * is `cancelled`, else `FAILED`, with the code and message; `base` holds
 * the hook's identity and whatever else the failure knows.
 */
export function failedOutcome(
  base: Partial<
    Pick<
      HookOutcome,
      | 'hookId'
      | 'hookType'
      | 'point'
      | 'plugin'
      | 'operationId'
      | 'source'
      | 'httpStatus'
      | 'duration'
      | 'critical'
    >
  >,
  code: string,
  message: string,
): HookOutcome {
  return create(
    HookOutcomeSchema,
    extend(base, {
      status: code === 'cancelled' ? HookOutcomeStatus.CANCELLED : HookOutcomeStatus.FAILED,
      errorCode: code,
      message,
    }),
  );
}

/**
 * Converts milliseconds (>= 0) to a `google.protobuf.Duration`, built as the
 * plain object a protobuf-es message is: `create()` would walk the schema
 * for every hook outcome and audit record.
 */
export function durationOf(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return {
    $typeName: 'google.protobuf.Duration',
    seconds: BigInt(seconds),
    // Rounding can reach a whole second; a Duration's nanos stay below it.
    nanos: Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6)),
  };
}
