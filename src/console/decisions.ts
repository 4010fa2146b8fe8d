/**
 * @module The decisions the console shows, until the audit log's store
 * listing and feed are wired in: {@link RecentDecisions} keeps the last
 * decisions of each operation in memory (bounded in operations and per
 * operation) and tells subscribers of each new one; {@link decisionView}
 * turns an RPC's request and answer into a {@link DecisionView}.
 * Nothing here is on a decision's critical path beyond an array push.
 */
import { randomUUID } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import {
  type DecisionSchema,
  DenyClassification,
  type HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../../gen/agenthooks/v1/decisions_pb.js';
import type { ToolCallContext } from '../../gen/agenthooks/v1/events_pb.js';
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

/** What an RPC decided, as {@link decisionView} reads it. */
export interface DecisionFacts {
  readonly kind: string;
  readonly context?: ToolCallContext | undefined;
  readonly operationId?: string;
  readonly toolCallId?: string;
  /** The answer's decision, as the service built it (a message or its init shape). */
  readonly decision?: MessageInitShape<typeof DecisionSchema> | undefined;
  /** For a publication: `published` or `duplicate`. */
  readonly outcome?: string;
  readonly outcomes: readonly MessageInitShape<typeof HookOutcomeSchema>[];
  readonly at: number;
}

/** Builds the view of one decision. */
export function decisionView(facts: DecisionFacts): DecisionView {
  const outcome = facts.decision?.outcome;
  const deny = outcome?.case === 'deny' ? outcome.value : undefined;
  return {
    decisionId: randomUUID(),
    time: new Date(facts.at).toISOString(),
    kind: facts.kind,
    operationId: facts.operationId ?? facts.context?.operationId ?? '',
    toolCallId: facts.toolCallId ?? facts.context?.toolCallId ?? '',
    identifier: facts.context?.identifier ?? '',
    apiName: facts.context?.apiName ?? '',
    point: '',
    outcomes: facts.outcomes.map(hookOutcomeView),
    decision: facts.outcome ?? outcome?.case ?? '',
    reason: deny?.reason ?? '',
    classification:
      deny === undefined
        ? ''
        : classificationLiteral(deny.classification ?? DenyClassification.UNSPECIFIED),
  };
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

/** The spec's literal of a deny classification (`hook_denied`, `hook_control_error`). */
function classificationLiteral(classification: DenyClassification): string {
  return (DenyClassification[classification] ?? 'UNSPECIFIED').toLowerCase();
}

function durationMs(duration: { seconds?: bigint; nanos?: number } | undefined): number {
  if (duration === undefined) return 0;
  return Number(duration.seconds ?? 0n) * 1000 + (duration.nanos ?? 0) / 1e6;
}
