/**
 * @module The console's decisions from the decision audit log: an
 * operation's recent decisions from the store (`ListDecisions`' listing)
 * when the store sink is on, else from an in-memory record fed by the audit
 * log's feed; the live view subscribes to the feed while it is open.
 */
import { create } from '@bufbuild/protobuf';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import {
  DecisionKind,
  DecisionOutcome,
  type DecisionRecord,
  ListDecisionsRequestSchema,
} from '../../gen/agenthooks/v1/audit_pb.js';
import { DenyClassification } from '../../gen/agenthooks/v1/decisions_pb.js';
import { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import type { AuditLog } from '../audit/audit-log.js';
import { listDecisions, MAX_PAGE_SIZE } from '../audit/list.js';
import type { DecisionStore } from '../store/store.js';
import { hookOutcomeView, RecentDecisions } from './decisions.js';
import type { DecisionSource, DecisionView } from './views.js';

/** The RPC of each decision kind, as the console names it. */
const KIND_RPC: Readonly<Record<number, string>> = {
  [DecisionKind.TOOL_CALL]: 'DecideToolCall',
  [DecisionKind.TOOL_RESULT]: 'DecideToolResult',
  [DecisionKind.PUBLICATION]: 'PublishDeferredResult',
  [DecisionKind.MODIFY]: 'Modify',
};

/** The console's view of one audit log entry. */
export function decisionViewOf(record: DecisionRecord): DecisionView {
  return {
    decisionId: record.decisionId,
    time: new Date(record.time === undefined ? 0 : timestampMs(record.time)).toISOString(),
    kind: KIND_RPC[record.kind] ?? 'unknown',
    operationId: record.operationId,
    toolCallId: record.toolCallId,
    identifier: record.identifier,
    apiName: record.apiName,
    point:
      record.point === ModifyPoint.UNSPECIFIED
        ? ''
        : `MODIFY_POINT_${ModifyPoint[record.point] ?? 'UNSPECIFIED'}`,
    outcomes: record.outcomes.map(hookOutcomeView),
    decision: (DecisionOutcome[record.outcome] ?? 'UNSPECIFIED').toLowerCase(),
    reason: record.reason,
    classification:
      record.classification === DenyClassification.UNSPECIFIED
        ? ''
        : (DenyClassification[record.classification] ?? '').toLowerCase(),
  };
}

/**
 * The decisions of the audit log: listed from `store` when the store sink
 * keeps them (undefined otherwise: then, with `keepInMemory`, the last
 * decisions of each operation are kept in memory from the feed). The live
 * view subscribes to the feed only while it is open.
 */
export function createAuditDecisionSource(
  audit: AuditLog,
  store: DecisionStore | undefined,
  options: { readonly keepInMemory: boolean },
): DecisionSource {
  let memory: RecentDecisions | undefined;
  // A subscriber makes the service build a record for every decision: only
  // when the console is served and no store keeps the records already.
  if (store === undefined && options.keepInMemory) {
    const recent = new RecentDecisions();
    audit.subscribe((record) => recent.record(decisionViewOf(record)));
    memory = recent;
  }
  return {
    async recent(operationId, limit) {
      if (memory !== undefined) return memory.recent(operationId, limit);
      if (store === undefined) return [];
      const page = await listDecisions(
        store,
        create(ListDecisionsRequestSchema, {
          operationId,
          pageSize: Math.min(limit, MAX_PAGE_SIZE),
        }),
      );
      return page.decisions.map(decisionViewOf);
    },
    subscribe(listener) {
      return audit.subscribe((record) => listener(decisionViewOf(record)));
    },
  };
}
