/**
 * @module Decisions kept in memory for the console when the audit log's
 * store sink is off: {@link RecentDecisions} keeps the last decisions of
 * each operation (bounded in operations and per operation) and tells
 * subscribers of each new one; {@link hookOutcomeView} is the console's
 * view of one hook's part in a decision.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import {
  type HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { hookTypeLiteral } from '../delivery/event-json.js';
import type { DecisionHookView, DecisionSource, DecisionView } from './views.js';

/** Decisions kept per operation by default. */
export const DEFAULT_DECISIONS_PER_OPERATION = 100;
/** Operations whose decisions are kept by default; the least recently decided one goes first. */
export const DEFAULT_DECISION_OPERATIONS = 1_000;

/** Options of {@link RecentDecisions}. */
export interface RecentDecisionsOptions {
  readonly perOperation?: number;
  readonly operations?: number;
}

/** An in-memory {@link DecisionSource}: the last decisions of the most recently active operations. */
export class RecentDecisions implements DecisionSource {
  readonly #perOperation: number;
  readonly #operations: number;
  /** Oldest first per operation; the map's order is the least recently decided first. */
  readonly #byOperation = new Map<string, DecisionView[]>();
  readonly #listeners = new Set<(decision: DecisionView) => void>();

  constructor(options: RecentDecisionsOptions = {}) {
    this.#perOperation = options.perOperation ?? DEFAULT_DECISIONS_PER_OPERATION;
    this.#operations = options.operations ?? DEFAULT_DECISION_OPERATIONS;
  }

  /** Keeps `decision` and tells each subscriber; a subscriber's throw is not the caller's. */
  record(decision: DecisionView): void {
    const list = this.#byOperation.get(decision.operationId) ?? [];
    this.#byOperation.delete(decision.operationId);
    list.push(decision);
    if (list.length > this.#perOperation) list.splice(0, list.length - this.#perOperation);
    this.#byOperation.set(decision.operationId, list);
    if (this.#byOperation.size > this.#operations) {
      const oldest = this.#byOperation.keys().next().value;
      if (oldest !== undefined) this.#byOperation.delete(oldest);
    }
    for (const listener of this.#listeners) {
      try {
        listener(decision);
      } catch {
        // A console connection that fails is dropped by its own handler.
      }
    }
  }

  async recent(operationId: string, limit: number): Promise<DecisionView[]> {
    const list = this.#byOperation.get(operationId) ?? [];
    return list.slice(-Math.max(0, limit)).reverse();
  }

  subscribe(listener: (decision: DecisionView) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }
}

/** Builds the view of one hook's outcome. */
export function hookOutcomeView(
  outcome: MessageInitShape<typeof HookOutcomeSchema>,
): DecisionHookView {
  const hookType = outcome.hookType ?? HookType.UNSPECIFIED;
  return {
    hookId: outcome.hookId ?? '',
    hookType: hookType === HookType.UNSPECIFIED ? '' : hookTypeLiteral(hookType),
    source: (HookSource[outcome.source ?? HookSource.UNSPECIFIED] ?? 'UNSPECIFIED').toLowerCase(),
    status: (
      HookOutcomeStatus[outcome.status ?? HookOutcomeStatus.UNSPECIFIED] ?? 'UNSPECIFIED'
    ).toLowerCase(),
    errorCode: outcome.errorCode ?? '',
    message: outcome.message ?? '',
    httpStatus: outcome.httpStatus ?? 0,
    latencyMs: durationMs(outcome.duration),
  };
}

function durationMs(duration: { seconds?: bigint; nanos?: number } | undefined): number {
  if (duration === undefined) return 0;
  return Number(duration.seconds ?? 0n) * 1000 + (duration.nanos ?? 0) / 1e6;
}
