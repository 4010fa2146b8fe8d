/**
 * @module Notification dispatch: the matching non-control hooks of an
 * event's type run in registration order, each awaited; a failed delivery is
 * logged and reported, and the next hook still runs.
 */
import { create } from '@bufbuild/protobuf';
import { type Duration, DurationSchema } from '@bufbuild/protobuf/wkt';
import {
  type HookOutcome,
  HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import type { HookEvent, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { buildWebhookPayload } from '../delivery/payload.js';
import type { WebhookSender } from '../delivery/webhook.js';
import { InvalidArgumentError } from '../errors.js';
import type { Logger } from '../log.js';
import { type EventCase, eventCase, hookTypeLiteral } from './event-json.js';
import { compileMatcher } from './matcher.js';
import type { HookRegistry } from './registry.js';
import { isControlHook } from './validate.js';

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

/**
 * Returns the routing facts of an event.
 *
 * @throws InvalidArgumentError when no event is set or it names no operation.
 */
export function routeOf(event: HookEvent | undefined, field = 'event'): EventRoute {
  const c = event === undefined ? undefined : eventCase(event);
  if (c === undefined) {
    throw new InvalidArgumentError(field, 'EVENT_REQUIRED', 'an event is required');
  }
  const message = c.message as {
    operationId?: string;
    context?: { operationId: string; identifier: string; apiName: string };
  };
  const context = message.context;
  const operationId = context ? context.operationId : (message.operationId ?? '');
  if (operationId === '') {
    const path = context
      ? `${field}.${caseName(event)}.context.operationId`
      : `${field}.${caseName(event)}.operationId`;
    throw new InvalidArgumentError(path, 'OPERATION_ID_REQUIRED', 'operationId is required');
  }
  return { ...c, operationId, identifier: context?.identifier, apiName: context?.apiName };
}

function caseName(event: HookEvent | undefined): string {
  return event?.event.case ?? '';
}

/** A notification hook to run, with where it came from. */
interface Notification {
  readonly hook: Hook;
  readonly source: HookSource;
}

/**
 * Returns the notification hooks of an event, in order: the operation's
 * caller hooks, then the current environment hooks. Both lists are read
 * before anything is sent.
 *
 * @throws AgentHooksError INVALID_ENVIRONMENT, or a store error.
 */
async function notificationsOf(deps: DispatchDeps, route: EventRoute): Promise<Notification[]> {
  const environment = deps.environmentHooks();
  const { hooks } = await deps.registry.hooksOf(route.operationId);
  const out: Notification[] = [];
  for (const hook of hooks) {
    if (appliesTo(hook, route)) out.push({ hook, source: HookSource.CALLER });
  }
  for (const hook of environment) {
    if (appliesTo(hook, route)) out.push({ hook, source: HookSource.ENVIRONMENT });
  }
  return out;
}

/**
 * Runs the notification hooks of an event, in registration order and then
 * the environment hooks, each awaited, and returns one outcome per hook of
 * the event's type that matched.
 */
export async function dispatchEvent(
  deps: DispatchDeps,
  event: HookEvent,
  signal: AbortSignal,
): Promise<HookOutcome[]> {
  const route = routeOf(event);
  const outcomes: HookOutcome[] = [];
  for (const { hook, source } of await notificationsOf(deps, route)) {
    signal.throwIfAborted();
    outcomes.push(await runNotification(deps, hook, source, route, event, signal));
  }
  return outcomes;
}

/**
 * Starts the notification webhooks of an event without awaiting them (the
 * `beforeToolCall` observers of an allowed call). Their failures are logged
 * only; the hook lists are read before this resolves, so a store or
 * environment failure still reaches the caller.
 */
export async function startNotifications(deps: DispatchDeps, event: HookEvent): Promise<void> {
  const route = routeOf(event);
  const notifications = await notificationsOf(deps, route);
  void (async () => {
    for (const { hook, source } of notifications) {
      await runNotification(deps, hook, source, route, event, new AbortController().signal);
    }
  })().catch((e: unknown) => {
    deps.logger.error('notification webhooks failed', { operationId: route.operationId, err: e });
  });
}

/** True when a hook is a notification hook of the event's type whose matcher matches. */
export function appliesTo(hook: Hook, route: EventRoute): boolean {
  if (hook.type !== route.type || isControlHook(hook)) return false;
  return compileMatcher(hook.matcher)(route.identifier, route.apiName);
}

async function runNotification(
  deps: DispatchDeps,
  hook: Hook,
  source: HookSource,
  route: EventRoute,
  event: HookEvent,
  signal: AbortSignal,
): Promise<HookOutcome> {
  const base = {
    hookId: hook.id,
    hookType: route.type,
    operationId: source === HookSource.CALLER ? route.operationId : '',
    source,
  };
  if (hook.webhook === undefined) {
    // A handler-only hook runs only while a Handle stream serves its operation.
    return create(HookOutcomeSchema, { ...base, status: HookOutcomeStatus.SKIPPED });
  }
  const payload = buildWebhookPayload(event, hook.id, hook.webhook);
  const result = await deps.sender.notify(hook.webhook, payload, signal);
  const duration = durationOf(result.durationMs);
  if (result.ok) {
    return create(HookOutcomeSchema, {
      ...base,
      status: HookOutcomeStatus.DELIVERED,
      httpStatus: result.status,
      duration,
    });
  }
  deps.logger.warn('webhook delivery failed (non-fatal)', {
    operationId: route.operationId,
    hookId: hook.id,
    hookType: hookTypeLiteral(route.type as HookType),
    code: result.code,
    httpStatus: result.status,
  });
  return create(HookOutcomeSchema, {
    ...base,
    status: result.code === 'cancelled' ? HookOutcomeStatus.CANCELLED : HookOutcomeStatus.FAILED,
    errorCode: result.code,
    message: result.message,
    httpStatus: result.status ?? 0,
    duration,
  });
}

/** Converts milliseconds to a `google.protobuf.Duration`. */
export function durationOf(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return create(DurationSchema, {
    seconds: BigInt(seconds),
    nanos: Math.round((ms - seconds * 1000) * 1e6),
  });
}
