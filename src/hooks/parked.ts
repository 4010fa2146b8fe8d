/**
 * @module Parked tool calls (the spec's "Hook configuration lifetime" and
 * "Publish after the result hook"): a call that completes later or waits for
 * a human is recorded with its context and operation chain, so a later
 * decision or publication works on any restarted sidecar; a deferred result
 * runs the result controls, then is published into the call's placeholder
 * exactly once, and duplicates get the first final result, a denial included.
 */
import { create } from '@bufbuild/protobuf';
import {
  type AfterToolCallEvent,
  AfterToolCallEventSchema,
  HookEventSchema,
  HookType,
  type ToolCallContext,
  type ToolResult,
} from '../../gen/agenthooks/v1/events_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import { type AgentHooksError, InvalidArgumentError } from '../errors.js';
import {
  type ParkedCallRecord,
  type ParkStore,
  parkedCallNotFoundError,
  toolCallContextUnavailableError,
} from '../store/store.js';
import { evaluateControls } from './control.js';
import { type DispatchDeps, detachedBytes, dispatchEvent } from './dispatch.js';
import { resolveChain, validateToolCallContext } from './tool-call.js';
import { isControlHook } from './validate.js';

/** What parking and publishing need beyond dispatch. */
export interface ParkDeps extends DispatchDeps {
  readonly parks: ParkStore;
  /** Current time in epoch milliseconds. */
  readonly now: () => number;
}

/** The answer of a publication. */
export interface Publication {
  /** The final result in the placeholder, identical for every caller. */
  readonly finalResult: ToolResult;
  /** True for the one call that wrote it. */
  readonly published: boolean;
}

/**
 * Records a parked call; idempotent per tool call id (a repeated park
 * returns the first record). Committed before it resolves.
 *
 * @throws InvalidArgumentError for a missing context field, chain entry or kind.
 */
export async function parkToolCall(
  deps: ParkDeps,
  context: ToolCallContext | undefined,
  requestedChain: readonly string[],
  kind: ParkKind,
): Promise<{ record: ParkedCallRecord; created: boolean }> {
  validateToolCallContext(context, 'context');
  const chain = resolveChain(requestedChain, context);
  if (kind !== ParkKind.DEFERRED && kind !== ParkKind.HUMAN_APPROVAL) {
    throw new InvalidArgumentError(
      'kind',
      'PARK_KIND_REQUIRED',
      'kind must be PARK_KIND_DEFERRED or PARK_KIND_HUMAN_APPROVAL',
    );
  }
  // The store refuses a new record on an expired operation (OPERATION_EXPIRED).
  return deps.parks.parkCall({
    toolCallId: context.toolCallId,
    operationId: context.operationId,
    chain,
    kind,
    context,
    parkedAt: deps.now(),
  });
}

/**
 * Returns the operation chain of a decision: the request's chain when it
 * names one; else, for a parked call, its recorded chain followed by the
 * call's current operation (an approval's continuation); else the call's
 * own operation. An expired operation of the chain fails the decision
 * later, when its hooks are read (OPERATION_EXPIRED).
 *
 * @throws AgentHooksError a store error.
 */
export async function decisionChain(
  deps: ParkDeps,
  requested: readonly string[],
  context: ToolCallContext,
): Promise<string[]> {
  let chain: string[];
  if (requested.length > 0) {
    chain = resolveChain(requested, context);
  } else {
    const parked = await deps.parks.getParkedCall(context.toolCallId);
    chain = parked === undefined ? [context.operationId] : [...parked.chain];
    if (chain.at(-1) !== context.operationId) chain.push(context.operationId);
  }
  // No separate expiry check: reading an expired operation's hooks fails
  // with OPERATION_EXPIRED in the same snapshot (the store's listHooks).
  return chain;
}

/**
 * Publishes deferred results exactly once per tool call. Within a process,
 * a duplicate that arrives while the controls run waits for them, then gets
 * the first final result; across processes the store's conditional write
 * arbitrates.
 */
export class DeferredPublisher {
  readonly #running = new Map<string, Promise<Publication>>();

  /**
   * Runs the result controls on `result`, then publishes the allowed result
   * or the denial into the placeholder, once. When the controls or the store
   * fail, nothing is published and the error propagates; a later call can
   * publish.
   *
   * @throws AgentHooksError TOOL_CALL_CONTEXT_UNAVAILABLE, PARKED_CALL_NOT_FOUND,
   *   OPERATION_EXPIRED, INVALID_ENVIRONMENT, CANCELLED, or a store error.
   */
  async publish(
    deps: ParkDeps,
    toolCallId: string,
    result: ToolResult,
    requestedChain: readonly string[],
    signal: AbortSignal,
  ): Promise<Publication> {
    for (;;) {
      const running = this.#running.get(toolCallId);
      if (running !== undefined) {
        // Wait for the publication in progress; if it failed, try again ourselves.
        await running.catch(() => undefined);
      }
      const record = await deps.parks.getParkedCall(toolCallId);
      if (record === undefined) {
        throw await missingRecordError(deps, toolCallId, requestedChain);
      }
      if (record.finalResult !== undefined) {
        return { finalResult: record.finalResult, published: false };
      }
      if (this.#running.has(toolCallId)) continue;
      const publication = this.#publishOnce(deps, record, result, requestedChain, signal);
      this.#running.set(toolCallId, publication);
      try {
        return await publication;
      } finally {
        this.#running.delete(toolCallId);
      }
    }
  }

  async #publishOnce(
    deps: ParkDeps,
    record: ParkedCallRecord,
    result: ToolResult,
    requestedChain: readonly string[],
    signal: AbortSignal,
  ): Promise<Publication> {
    // An expired operation of the chain fails the controls' hook read (OPERATION_EXPIRED).
    const chain =
      requestedChain.length > 0 ? resolveChain(requestedChain, record.context) : [...record.chain];
    const event: AfterToolCallEvent = create(AfterToolCallEventSchema, {
      context: record.context,
      mocked: false,
      result,
    });
    const { decision } = await evaluateControls(
      deps,
      { type: HookType.AFTER_TOOL_CALL, event },
      chain,
      signal,
    );
    const final =
      decision.outcome.case === 'deny' && decision.outcome.value.blockedResult !== undefined
        ? decision.outcome.value.blockedResult
        : result;
    const publication = await deps.parks.publishResult(record.toolCallId, final, deps.now());
    if (publication.published) {
      // The call that published sends the afterToolCall notification, once.
      const notification = create(HookEventSchema, {
        event: {
          case: 'afterToolCall',
          value: { context: record.context, mocked: false, result: publication.finalResult },
        },
      });
      // Past the background scope's bounds it is not sent; the scope counts and logs that.
      deps.background.run(
        'afterToolCall notification of a published result',
        async (background) => {
          await dispatchEvent(deps, notification, background);
        },
        { fields: { operationId: record.context.operationId }, bytes: detachedBytes(notification) },
      );
    }
    return publication;
  }
}

/**
 * The error of a publication without a parked record: fails closed when any
 * result control could apply (caller controls of the requested chain, or the
 * environment's), since its context cannot be rebuilt.
 */
async function missingRecordError(
  deps: ParkDeps,
  toolCallId: string,
  requestedChain: readonly string[],
): Promise<AgentHooksError> {
  const controls = (hooks: readonly { type: HookType; webhook?: unknown }[]) =>
    hooks.some((h) => h.type === HookType.AFTER_TOOL_CALL && isControlHook(h as never));
  let configured = controls(deps.environmentHooks());
  for (const op of requestedChain) {
    if (configured) break;
    configured = controls((await deps.registry.hooksOf(op)).hooks);
  }
  return configured
    ? toolCallContextUnavailableError(toolCallId, undefined)
    : parkedCallNotFoundError(toolCallId);
}
