/**
 * @module Runs the modifying hooks of one point occurrence (`Modify`): the
 * operation's hooks registered at that point, in registration order, each
 * given the context as the hooks before it left it, their results composed
 * by the point's rules (`compose.ts`).
 *
 * A webhook gets the context JSON plus `operationId`, `hookId`, `point` and
 * `plugin`; a 2xx with a JSON object is its result, a 204 or an empty body
 * "no change". A
 * non-2xx, a timeout, a body that is not a JSON object or a result of the
 * wrong shape is a failure: `onError: continue` (the default) skips the hook
 * and keeps the value it was given, `onError: block` answers `blocked` and
 * nothing of the call applies (a handler's failure follows its webhook's
 * `onError`, `continue` for a handler-only hook). While a `Handle` stream
 * serves the operation, a hook with a handler runs there instead: the
 * runtime gets the point and its context and replies `modified` with its
 * result or `done`; without a stream a handler-only hook is skipped. Each
 * hook's outcome is counted in the metrics as on the lifecycle path, each
 * webhook's result under the kind `modify`, and a failed hook is logged at
 * warn.
 *
 * After the operation's own hooks run the operator's plugins
 * (`--plugins-file`), webhooks for every operation; while that file is
 * invalid every call fails with `INVALID_PLUGINS` before any hook runs.
 */
import { create } from '@bufbuild/protobuf';
import {
  type HookOutcome,
  HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import { Fallback, type Hook, ModifyPoint, OnError } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  ModifyBlockedSchema,
  type ModifyRequest,
  type ModifyResponse,
  ModifyResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { readBounded } from '../delivery/control.js';
import { EncodedJson, type WebhookSender } from '../delivery/webhook.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import {
  CriticalDeliveryError,
  durationOf,
  failedOutcome,
  noteOutcome,
} from '../hooks/dispatch.js';
import { type HandlerHub, ModifyingCall } from '../hooks/handlers.js';
import { matchesToolName } from '../hooks/matcher.js';
import type { HookRegistry } from '../hooks/registry.js';
import { checkToolName } from '../hooks/tool-call.js';
import { REASON, validateOperationId } from '../hooks/validate.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { DeliverySpan, Tracing } from '../tracing/tracing.js';
import {
  Composition,
  ContextShapeError,
  MODIFY_POINTS,
  type ModifyPoint as PointName,
  ResultShapeError,
  ResultTooLargeError,
  TOOL_POINTS,
} from './compose.js';

/**
 * Largest answer a modifying webhook may send, in bytes: a history of
 * messages can be large, unlike a control's decision (64 KiB).
 */
export const MODIFY_RESPONSE_MAX_BYTES = 16 * 1024 * 1024;

/** What running the modifying hooks needs. */
export interface ModifyDeps {
  readonly registry: HookRegistry;
  readonly sender: Pick<WebhookSender, 'post' | 'notify'>;
  /** The runtime's attached `Handle` streams, which serve handler hooks. */
  readonly handlers: Pick<HandlerHub, 'serves' | 'call'>;
  /**
   * The operator's plugins (`--plugins-file`), run after the operation's own
   * hooks; throws `INVALID_PLUGINS` while the file cannot be used.
   */
  readonly operatorHooks: () => readonly Hook[];
  /** Makes a span per webhook delivery; absent while tracing is off. */
  readonly tracing?: Tracing | undefined;
  /** Where a failed hook is logged (at warn, with its id and point; never a body). */
  readonly logger: Pick<Logger, 'warn'>;
  /** Counts each hook's outcome and each webhook's result; absent in tests that read none. */
  readonly metrics?: Metrics | undefined;
}

/** `ErrorInfo.reason` of a context that is not a JSON object or lacks what its point reads. */
export const MODIFY_CONTEXT_INVALID = 'MODIFY_CONTEXT_INVALID';

/** `ErrorInfo.reason` of a request without a point. */
export const MODIFY_POINT_REQUIRED = 'MODIFY_POINT_REQUIRED';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** The spec's name of a point (`transformContext`); the enum numbers follow the spec's order. */
export function pointName(point: ModifyPoint): PointName | undefined {
  return point === ModifyPoint.UNSPECIFIED ? undefined : MODIFY_POINTS[point - 1];
}

/**
 * Checks a `Modify` request whole: the operation, the point and the context,
 * whose `toolCall.name` on the tool points is at most 256 UTF-8 bytes.
 *
 * @throws InvalidArgumentError naming the field.
 */
function checkedRequest(request: ModifyRequest): {
  name: PointName;
  composition: Composition;
  toolName: string | undefined;
} {
  validateOperationId(request.operationId, 'operationId');
  if (request.point === ModifyPoint.UNSPECIFIED) {
    throw new InvalidArgumentError('point', MODIFY_POINT_REQUIRED, 'a point is required');
  }
  const name = pointName(request.point);
  if (name === undefined) {
    throw new InvalidArgumentError(
      'point',
      REASON.INVALID_ENUM_VALUE,
      `Unknown modify point value ${request.point}`,
    );
  }
  let composition: Composition;
  try {
    composition = new Composition(name, request.contextJson);
  } catch (e: unknown) {
    if (!(e instanceof ContextShapeError)) throw e;
    throw new InvalidArgumentError('contextJson', MODIFY_CONTEXT_INVALID, e.message);
  }
  // As a lifecycle event's tool name: matchers run on it, and the audit keeps it.
  const toolName = TOOL_POINTS.has(name) ? composition.toolName : undefined;
  if (toolName !== undefined) checkToolName(toolName, 'contextJson.toolCall.name');
  return { name, composition, toolName };
}

/**
 * The body a modifying webhook gets: the context, then `operationId` (the
 * `Modify` call's), `hookId`, `point` and `plugin`, which replace context
 * members of the same names.
 */
function webhookBody(
  composition: Composition,
  hook: Hook,
  name: PointName,
  operationId: string,
): EncodedJson {
  return new EncodedJson(
    composition.contextWith({
      operationId: JSON.stringify(operationId),
      hookId: JSON.stringify(hook.id),
      point: JSON.stringify(name),
      plugin: JSON.stringify(hook.plugin),
    }),
  );
}

/** A hook's failure: its code and detail, and the HTTP status if there was an answer. */
interface Failure {
  readonly code: string;
  readonly message: string;
  readonly httpStatus?: number;
}

/**
 * {@link sendWebhook} inside a delivery span when tracing is on; its
 * outcome is `applied` or the failure's code.
 */
async function runWebhook(
  deps: ModifyDeps,
  operationId: string,
  hook: Hook,
  composition: Composition,
  name: PointName,
  signal: AbortSignal,
): Promise<{ failure?: Failure; httpStatus?: number }> {
  const span = deps.tracing?.startDelivery(
    { hookId: hook.id, kind: 'modify', point: name },
    signal,
  );
  if (span === undefined) return sendWebhook(deps, operationId, hook, composition, name, signal);
  try {
    const sent = await sendWebhook(deps, operationId, hook, composition, name, signal, span);
    const { failure } = sent;
    span.end(
      failure === undefined
        ? { status: 'applied', httpStatus: sent.httpStatus }
        : { status: failure.code, httpStatus: failure.httpStatus, error: failure.message },
    );
    return sent;
  } catch (e: unknown) {
    span.end(
      e instanceof ResultTooLargeError
        ? { status: 'result_too_large', error: e.message }
        : { status: 'internal', error: 'modifying webhook failed' },
    );
    throw e;
  }
}

/** Sends one hook its context and applies its answer to `composition`; a failure applies nothing. */
async function sendWebhook(
  deps: ModifyDeps,
  operationId: string,
  hook: Hook,
  composition: Composition,
  name: PointName,
  signal: AbortSignal,
  trace?: DeliverySpan,
): Promise<{ failure?: Failure; httpStatus?: number }> {
  const webhook = hook.webhook;
  if (webhook === undefined) return {};
  if (name === 'afterProviderResponse') {
    // Observe-only: no answer is read, so the hook may use QStash (with its fallback).
    const sent = await deps.sender.notify(
      webhook,
      webhookBody(composition, hook, name, operationId),
      signal,
      trace,
    );
    if (sent.ok) return { httpStatus: sent.status };
    return { failure: { code: sent.code, message: sent.message, httpStatus: sent.status } };
  }
  const response = await deps.sender.post(
    webhook,
    webhookBody(composition, hook, name, operationId),
    signal,
    undefined,
    trace,
  );
  if (!response.ok) {
    return {
      failure: { code: response.code, message: response.message, httpStatus: response.status },
    };
  }
  const body = await readBounded(response, MODIFY_RESPONSE_MAX_BYTES);
  if (!(body instanceof Uint8Array)) {
    return { failure: { code: body.code, message: body.message, httpStatus: response.status } };
  }
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    const message = 'Hook HTTP response is not UTF-8';
    return { failure: { code: 'invalid_response', message, httpStatus: response.status } };
  }
  try {
    composition.apply(text);
  } catch (e: unknown) {
    if (!(e instanceof ResultShapeError)) throw e;
    return {
      failure: { code: 'invalid_response', message: e.message, httpStatus: response.status },
    };
  }
  return { httpStatus: response.status };
}

/** Asks the runtime's handler for its result and applies it to `composition`; a failure applies nothing. */
async function runHandler(
  deps: ModifyDeps,
  operationId: string,
  hook: Hook,
  composition: Composition,
  signal: AbortSignal,
): Promise<{ failure?: Failure; httpStatus?: number }> {
  const call = new ModifyingCall(hook.point, composition.context(), hook.plugin);
  const result = await deps.handlers.call(operationId, hook.id, call, signal);
  switch (result.kind) {
    case 'done':
      return {};
    case 'modified':
      try {
        composition.apply(result.resultJson);
        return {};
      } catch (e: unknown) {
        if (!(e instanceof ResultShapeError)) throw e;
        return { failure: { code: 'invalid_response', message: e.message } };
      }
    case 'mock':
      return {
        failure: {
          code: 'handler_error',
          message: 'a modifying handler replies modified or done, not mock',
        },
      };
    case 'error':
      return { failure: { code: result.code, message: result.message } };
  }
}

/**
 * The call's error when a hook's result would pass the composed result's
 * bound: the call fails whole, rather than answer a result that lacks it.
 */
function resultTooLarge(hookId: string, e: ResultTooLargeError): AgentHooksError {
  return new AgentHooksError(
    'resource_exhausted',
    'MODIFY_RESULT_TOO_LARGE',
    `hook ${hookId}: ${e.message}`,
    { metadata: { hookId, limit: String(e.limit) }, cause: e },
  );
}

/** The answer of {@link runModifyingHooks}: a `ModifyResponse` but its decision id. */
export type ModifyAnswer = Omit<ModifyResponse, '$typeName' | '$unknown' | 'decisionId'>;

/** What {@link runModifyingHooks} read from the context, for the audit log. */
export interface ModifySeen {
  /** The tool's name (`toolCall.name`), on the tool points. */
  toolName?: string;
}

/**
 * Runs a point occurrence's hooks and answers the composed result, or the
 * block of the first `onError: block` hook that failed.
 *
 * A webhook with `fallback: none` is critical, as on the lifecycle events:
 * when its delivery fails (and `onError: block` does not answer it), the
 * chain goes on, and then the call fails instead of answering a result
 * that lacks the hook's change.
 *
 * @throws InvalidArgumentError for a request that is not whole, before any hook runs.
 * @throws AgentHooksError `MODIFY_RESULT_TOO_LARGE` as soon as a hook's result
 *   would make the composed result pass 16 MiB.
 * @throws CriticalDeliveryError once the chain ended, when a critical webhook failed;
 *   its details hold a `ModifyResponse` with every hook's outcome.
 * @throws AgentHooksError from the store (`STORED_HOOK_INVALID`, unavailable, ...)
 *   or `INVALID_PLUGINS` while the operator's plugins file cannot be used.
 */
export async function runModifyingHooks(
  deps: ModifyDeps,
  request: ModifyRequest,
  signal: AbortSignal,
  seen?: ModifySeen,
): Promise<ModifyAnswer> {
  const { name, composition, toolName } = checkedRequest(request);
  // Read before any hook runs: an invalid plugins file fails the call whole.
  const operatorHooks = deps.operatorHooks();
  const { hooks } = await deps.registry.hooksOf(request.operationId);
  if (seen !== undefined) seen.toolName = toolName;
  const outcomes: HookOutcome[] = [];
  // The first critical webhook that failed.
  let critical: string | undefined;
  // The operation's own hooks, then the operator's plugins.
  const sources = [
    { hooks, source: HookSource.CALLER, operationId: request.operationId },
    { hooks: operatorHooks, source: HookSource.OPERATOR, operationId: '' },
  ];
  // Each distinct matcher is tested once per call, however many hooks share it.
  const matched = new Map<string, boolean>();
  const matches = (matcher: string | undefined, tool: string): boolean => {
    const key = matcher ?? '';
    let hit = matched.get(key);
    if (hit === undefined) {
      hit = matchesToolName(matcher, tool);
      matched.set(key, hit);
    }
    return hit;
  };
  for (const { hooks, source, operationId } of sources) {
    for (const hook of hooks) {
      if (hook.point !== request.point) continue;
      if (toolName !== undefined && !matches(hook.matcher, toolName)) continue;
      if (composition.ended) break;
      const base = { hookId: hook.id, point: hook.point, plugin: hook.plugin, operationId, source };
      // As for lifecycle hooks: while a Handle stream serves the operation the
      // handler runs instead of the webhook; otherwise a handler-only hook is
      // skipped. An operator plugin's hook is always a webhook.
      const local = hook.handler && deps.handlers.serves(request.operationId, hook.plugin);
      if (!local && hook.webhook === undefined) {
        outcomes.push(
          noteOutcome(
            deps,
            create(HookOutcomeSchema, extend(base, { status: HookOutcomeStatus.SKIPPED })),
          ),
        );
        continue;
      }
      const started = performance.now();
      signal.throwIfAborted();
      let ran: { failure?: Failure; httpStatus?: number };
      try {
        ran = local
          ? await runHandler(deps, request.operationId, hook, composition, signal)
          : await runWebhook(deps, request.operationId, hook, composition, name, signal);
      } catch (e: unknown) {
        if (!(e instanceof ResultTooLargeError)) throw e;
        // The webhook answered well; the call's result is what cannot grow.
        if (!local) deps.metrics?.webhookResult('modify', 'ok');
        throw resultTooLarge(hook.id, e);
      }
      const { failure, httpStatus } = ran;
      const duration = durationOf(performance.now() - started);
      if (!local) deps.metrics?.webhookResult('modify', failure?.code ?? 'ok');
      if (failure === undefined) {
        const status = local ? HookOutcomeStatus.HANDLED : HookOutcomeStatus.DELIVERED;
        outcomes.push(
          noteOutcome(
            deps,
            create(
              HookOutcomeSchema,
              extend(base, { status, httpStatus: httpStatus ?? 0, duration }),
            ),
          ),
        );
        continue;
      }
      const block = hook.webhook?.onError === OnError.BLOCK;
      const isCritical =
        !local &&
        !block &&
        hook.webhook?.fallback === Fallback.NONE &&
        failure.code !== 'cancelled';
      if (isCritical) critical ??= hook.id;
      // As on the lifecycle path: the hook and the code, never a body.
      deps.logger.warn(
        local
          ? 'handler failed'
          : block
            ? 'webhook delivery failed; blocking (onError: block)'
            : isCritical
              ? 'critical webhook delivery failed'
              : 'webhook delivery failed (non-fatal)',
        {
          operationId: request.operationId,
          hookId: hook.id,
          point: name,
          source: source === HookSource.OPERATOR ? 'operator' : 'caller',
          code: failure.code,
          httpStatus: failure.httpStatus,
        },
      );
      outcomes.push(
        noteOutcome(
          deps,
          failedOutcome(
            extend(base, { httpStatus: failure.httpStatus ?? 0, duration, critical: isCritical }),
            failure.code,
            failure.message,
          ),
        ),
      );
      // The caller gave up: no answer, rather than one missing this hook's change.
      if (failure.code === 'cancelled') signal.throwIfAborted();
      if (block) {
        if (critical !== undefined) {
          throw new CriticalDeliveryError(critical, outcomes, ModifyResponseSchema);
        }
        return {
          outcome: {
            case: 'blocked',
            value: create(ModifyBlockedSchema, {
              hookId: hook.id,
              errorCode: failure.code,
              message: failure.message,
            }),
          },
          outcomes,
        };
      }
    }
  }
  signal.throwIfAborted();
  if (critical !== undefined)
    throw new CriticalDeliveryError(critical, outcomes, ModifyResponseSchema);
  return { outcome: { case: 'resultJson', value: composition.result() }, outcomes };
}
