/**
 * @module Tool-call and tool-result controls (the spec's `responseHandling:
 * 'toolCall'`, upstream contract §3). For one phase, the controls are the
 * hooks of the phase's type with `toolCall` response handling whose matcher
 * matches: each operation of the chain's caller hooks in order, then the
 * current environment hooks once, last. They run one after another:
 * - `allow` and notification responses go on to the next control (an allow
 *   never skips a later policy);
 * - `deny` stops, with the receiver's reason or, when it is omitted or
 *   empty, `Blocked by <type> hook.`;
 * - a failure follows the hook's `onError`: `continue` goes on (and is
 *   counted), `block` denies with `hook_control_error`;
 * - cancellation is an error, never an allow.
 * No control left: allow.
 */
import { create, type JsonObject } from '@bufbuild/protobuf';
import {
  type Decision,
  DecisionSchema,
  DenyClassification,
  type HookOutcome,
  HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type AfterToolCallEvent,
  type BeforeToolCallEvent,
  HookEventSchema,
  HookType,
  type ToolCallContext,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, OnError } from '../../gen/agenthooks/v1/hooks_pb.js';
import { type ControlResult, executeControl } from '../delivery/control.js';
import { hookTypeLiteral } from '../delivery/event-json.js';
import { buildWebhookPayload } from '../delivery/payload.js';
import { AgentHooksError } from '../errors.js';
import { extend } from '../extend.js';
import type { DeliveryOutcome } from '../tracing/tracing.js';
import type { DispatchDeps } from './dispatch.js';
import { durationOf, noteOutcome } from './dispatch.js';
import { compileMatcher } from './matcher.js';
import { isControlHook } from './validate.js';

/** Content and reason of a control failure under `onError: block` (both phases). */
export const HOOK_CONTROL_ERROR = 'hook_control_error';
/** `error` of every blocked tool result. */
export const HOOK_DENIED = 'hook_denied';
/** Reason of an error answered because the caller cancelled or its deadline passed. */
export const CANCELLED_REASON = 'CANCELLED';

/** The phase a control decides: before the tool runs, or on its result. */
export type ControlPhase =
  | { readonly type: HookType.BEFORE_TOOL_CALL; readonly event: BeforeToolCallEvent }
  | { readonly type: HookType.AFTER_TOOL_CALL; readonly event: AfterToolCallEvent };

/** The answer of a control evaluation. */
export interface ControlEvaluation {
  /** Allow or deny. */
  readonly decision: Decision;
  /** One outcome per control that ran, in order. */
  readonly outcomes: HookOutcome[];
  /** Operations of the chain the store has no record of (a typo, or environment hooks only). */
  readonly unknownOperations: string[];
}

/** A control to run, with where it came from. */
interface Control {
  readonly hook: Hook;
  /** Operation of a caller hook; empty for an environment hook. */
  readonly operationId: string;
  readonly source: HookSource;
}

/** Returns `Blocked by <type> hook.`, the default reason of a deny without one. */
export function defaultDenyReason(type: HookType): string {
  return `Blocked by ${hookTypeLiteral(type)} hook.`;
}

/**
 * Runs the controls of a phase over an operation chain and answers allow or
 * deny. Every hook list is read before any control is called, so a store or
 * environment failure answers an error before a receiver saw anything.
 *
 * @throws AgentHooksError INVALID_ENVIRONMENT, a store error, or CANCELLED.
 */
export async function evaluateControls(
  deps: DispatchDeps,
  phase: ControlPhase,
  chain: readonly string[],
  signal: AbortSignal,
): Promise<ControlEvaluation> {
  const context = phase.event.context as ToolCallContext;
  const environmentHooks = deps.environmentHooks();
  const matches = (hook: Hook) =>
    hook.type === phase.type &&
    isControlHook(hook) &&
    compileMatcher(hook.matcher)(context.identifier, context.apiName);
  const controls: Control[] = [];
  const unknownOperations: string[] = [];
  for (const operationId of chain) {
    const { hooks, known } = await deps.registry.hooksOf(operationId);
    if (!known) unknownOperations.push(operationId);
    for (const hook of hooks) {
      if (matches(hook)) controls.push({ hook, operationId, source: HookSource.CALLER });
    }
  }
  for (const hook of environmentHooks) {
    if (matches(hook)) controls.push({ hook, operationId: '', source: HookSource.ENVIRONMENT });
  }

  const hookEvent = create(HookEventSchema, {
    event:
      phase.type === HookType.BEFORE_TOOL_CALL
        ? { case: 'beforeToolCall', value: phase.event }
        : { case: 'afterToolCall', value: phase.event },
  });
  const outcomes: HookOutcome[] = [];
  for (const control of controls) {
    if (signal.aborted) throw cancelled(signal);
    const built = buildWebhookPayload(hookEvent, control.hook.id, control.hook.webhook, {
      control: true,
    });
    // Controls get no body or projection, so the enricher looks up the event's own user.
    const payload: JsonObject | undefined = deps.enricher
      ? await deps.enricher.enrich(hookEvent, built, undefined, signal)
      : built;
    if (payload === undefined) throw cancelled(signal);
    const span = deps.tracing?.startDelivery(
      {
        hookId: control.hook.id,
        kind: 'control',
        event: hookTypeLiteral(phase.type),
      },
      signal,
    );
    const result = await executeControl(
      deps.sender,
      control.hook.webhook as NonNullable<Hook['webhook']>,
      payload,
      signal,
      span,
    );
    span?.end(controlOutcome(result));
    if (result.status === 'cancelled') throw cancelled(signal);
    outcomes.push(noteOutcome(deps, outcomeOf(control, phase.type, result)));
    deps.metrics?.webhookResult('control', result.status === 'error' ? result.code : 'ok');
    const log = {
      operationId: context.operationId,
      hookId: control.hook.id,
      hookType: hookTypeLiteral(phase.type),
    };
    if (result.status === 'success' && result.decision.decision === 'deny') {
      const reason = result.decision.reason || defaultDenyReason(phase.type);
      deps.logger.info('control denied', log);
      return {
        decision: deny(phase, control, reason, DenyClassification.HOOK_DENIED),
        outcomes,
        unknownOperations,
      };
    }
    if (result.status === 'error') {
      if (control.hook.webhook?.onError === OnError.BLOCK) {
        deps.logger.warn(
          'control failed; blocking (onError: block)',
          extend(log, {
            code: result.code,
          }),
        );
        return {
          decision: deny(phase, control, HOOK_CONTROL_ERROR, DenyClassification.HOOK_CONTROL_ERROR),
          outcomes,
          unknownOperations,
        };
      }
      deps.logger.warn(
        'control failed; continuing (onError: continue)',
        extend(log, {
          code: result.code,
        }),
      );
      deps.metrics?.controlErrorAllowed(hookTypeLiteral(phase.type), result.code);
    }
  }
  return {
    decision: create(DecisionSchema, {
      outcome: { case: 'allow', value: { controlsConsulted: controls.length } },
    }),
    outcomes,
    unknownOperations,
  };
}

/** Returns the CANCELLED error of a call whose caller cancelled or whose deadline passed. */
function cancelled(signal: AbortSignal): AgentHooksError {
  return new AgentHooksError(
    'cancelled',
    CANCELLED_REASON,
    'the call was cancelled before the controls decided',
    { cause: signal.reason },
  );
}

function deny(
  phase: ControlPhase,
  control: Control,
  reason: string,
  classification: DenyClassification,
): Decision {
  return create(DecisionSchema, {
    outcome: {
      case: 'deny',
      value: {
        reason,
        classification,
        hookId: control.hook.id,
        operationId: control.operationId,
        blockedResult: blockedResult(phase, reason),
      },
    },
  });
}

/**
 * Returns the tool result a runtime stores in place of the tool's own when a
 * control denies: content = reason, error `hook_denied`, state `{type:
 * 'blocked', reason}`, success false. After the tool ran, the state also has
 * `phase: 'afterToolCall'` and the timings and `stop` of the original stay.
 */
export function blockedResult(phase: ControlPhase, reason: string): ToolResult {
  const error = { kind: { case: 'stringValue' as const, value: HOOK_DENIED } };
  if (phase.type === HookType.BEFORE_TOOL_CALL) {
    return create(ToolResultSchema, {
      content: reason,
      success: false,
      error,
      executionTime: 0,
      state: { type: 'blocked', reason },
    });
  }
  const original = phase.event.result;
  return create(ToolResultSchema, {
    content: reason,
    success: false,
    error,
    executionTime: original?.executionTime,
    deviceExecutionTime: original?.deviceExecutionTime,
    stop: original?.stop,
    state: { type: 'blocked', phase: 'afterToolCall', reason },
  });
}

function outcomeOf(control: Control, type: HookType, result: ControlResult): HookOutcome {
  const base = {
    hookId: control.hook.id,
    hookType: type,
    operationId: control.operationId,
    source: control.source,
    duration: durationOf(result.durationMs),
  };
  switch (result.status) {
    case 'success':
      return create(
        HookOutcomeSchema,
        extend(base, {
          status:
            result.decision.decision === 'allow'
              ? HookOutcomeStatus.ALLOWED
              : HookOutcomeStatus.DENIED,
          httpStatus: result.httpStatus,
        }),
      );
    case 'ignored':
      return create(
        HookOutcomeSchema,
        extend(base, {
          status: HookOutcomeStatus.IGNORED,
          httpStatus: result.httpStatus,
        }),
      );
    case 'error':
      return create(
        HookOutcomeSchema,
        extend(base, {
          status: HookOutcomeStatus.FAILED,
          errorCode: result.code,
          message: result.message,
          httpStatus: result.httpStatus ?? 0,
        }),
      );
    case 'cancelled':
      return create(
        HookOutcomeSchema,
        extend(base, {
          status: HookOutcomeStatus.CANCELLED,
          errorCode: 'cancelled',
        }),
      );
  }
}

/** A control's result as its delivery span records it. */
function controlOutcome(result: ControlResult): DeliveryOutcome {
  switch (result.status) {
    case 'success':
      return { status: result.decision.decision, httpStatus: result.httpStatus };
    case 'ignored':
      return { status: 'ignored', httpStatus: result.httpStatus };
    case 'cancelled':
      return { status: 'cancelled' };
    case 'error':
      return { status: result.code, httpStatus: result.httpStatus, error: result.message };
  }
}
