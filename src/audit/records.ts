/**
 * @module Builds the `DecisionRecord` of each kind of decision from what the
 * RPC answered. Only called when the audit log has a sink or a subscriber.
 */
import { type JsonValue, toJson } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import {
  DecisionKind,
  DecisionOutcome,
  type DecisionRecord,
} from '../../gen/agenthooks/v1/audit_pb.js';
import type { Decision, HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type ToolCallContext,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import type { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import { durationOf } from '../hooks/dispatch.js';
import type { ModifyAnswer } from '../modify/run.js';
import { applyMasks, type Pointer } from './masks.js';

/** Whether payloads are recorded, and what is removed from them first. */
export interface PayloadPolicy {
  /** JSON pointers removed from each payload before any sink sees it. */
  readonly masks: readonly Pointer[];
}

/** What every record has, whatever its kind. */
interface Common {
  readonly decisionId: string;
  /** `performance.now()` when the request arrived. */
  readonly startedAt: number;
  /** Recorded payloads, when the operator opted in; undefined records none. */
  readonly payloads: PayloadPolicy | undefined;
}

/** A tool decision: `DecideToolCall`, `DecideToolResult` or a publication. */
export interface ToolDecision extends Common {
  readonly kind: DecisionKind;
  readonly context: ToolCallContext | undefined;
  readonly chain: readonly string[];
  readonly decision: Decision;
  readonly outcomes: readonly HookOutcome[];
  /** The result the runtime submitted (tool result decisions and publications). */
  readonly result?: ToolResult;
}

/** The record of a tool decision. */
export function toolDecisionRecord(d: ToolDecision): DecisionRecord {
  const context = d.context;
  const outcome = d.decision.outcome;
  let payloadJson = '';
  if (d.payloads !== undefined) {
    const doc: Record<string, JsonValue> = {
      // A Struct is a JSON object in protobuf-es: copied, since masks edit the document.
      args: context?.args === undefined ? {} : structuredClone(context.args),
    };
    if (d.result !== undefined) doc.result = toJson(ToolResultSchema, d.result);
    if (outcome.case === 'mock' && outcome.value.result !== undefined) {
      doc.mockResult = toJson(ToolResultSchema, outcome.value.result);
    }
    if (outcome.case === 'deny' && outcome.value.blockedResult !== undefined) {
      doc.blockedResult = toJson(ToolResultSchema, outcome.value.blockedResult);
    }
    payloadJson = maskedJson(doc, d.payloads);
  }
  return {
    $typeName: 'agenthooks.v1.DecisionRecord',
    decisionId: d.decisionId,
    time: timestampNow(),
    kind: d.kind,
    operationId: context?.operationId ?? '',
    operationChain: [...d.chain],
    toolCallId: context?.toolCallId ?? '',
    identifier: context?.identifier ?? '',
    apiName: context?.apiName ?? '',
    point: 0,
    outcome:
      outcome.case === 'deny'
        ? DecisionOutcome.DENY
        : outcome.case === 'mock'
          ? DecisionOutcome.MOCK
          : DecisionOutcome.ALLOW,
    reason: outcome.case === 'deny' ? outcome.value.reason : '',
    classification: outcome.case === 'deny' ? outcome.value.classification : 0,
    hookId: outcome.case === 'deny' || outcome.case === 'mock' ? outcome.value.hookId : '',
    outcomes: [...d.outcomes],
    duration: durationOf(performance.now() - d.startedAt),
    payloadJson: bounded(payloadJson),
  };
}

/** A `Modify` call. */
export interface ModifyDecision extends Common {
  readonly operationId: string;
  readonly point: ModifyPoint;
  readonly toolName: string | undefined;
  readonly answer: ModifyAnswer;
  /** The request's context JSON (read only when payloads are recorded). */
  readonly contextJson: string;
}

/** The record of a `Modify` call. */
export function modifyRecord(d: ModifyDecision): DecisionRecord {
  const outcome = d.answer.outcome;
  let payloadJson = '';
  if (d.payloads !== undefined) {
    const result = outcome.case === 'resultJson' ? `,"result":${outcome.value}` : '';
    if (d.payloads.masks.length === 0) {
      // Both are JSON objects already: kept as sent, large integers included.
      payloadJson = `{"context":${d.contextJson}${result}}`;
    } else {
      // Parsed to be masked: integers past 2^53 lose precision here.
      const doc: Record<string, JsonValue> = { context: JSON.parse(d.contextJson) as JsonValue };
      if (outcome.case === 'resultJson') doc.result = JSON.parse(outcome.value) as JsonValue;
      payloadJson = maskedJson(doc, d.payloads);
    }
  }
  return {
    $typeName: 'agenthooks.v1.DecisionRecord',
    decisionId: d.decisionId,
    time: timestampNow(),
    kind: DecisionKind.MODIFY,
    operationId: d.operationId,
    operationChain: [],
    toolCallId: '',
    identifier: '',
    apiName: d.toolName ?? '',
    point: d.point,
    outcome:
      outcome.case === 'blocked'
        ? DecisionOutcome.BLOCKED
        : outcome.value === '{}'
          ? DecisionOutcome.UNCHANGED
          : DecisionOutcome.MODIFIED,
    reason: outcome.case === 'blocked' ? outcome.value.message : '',
    classification: 0,
    hookId: outcome.case === 'blocked' ? outcome.value.hookId : '',
    outcomes: [...d.answer.outcomes],
    duration: durationOf(performance.now() - d.startedAt),
    payloadJson: bounded(payloadJson),
  };
}

/*
 * Records are built as the plain objects protobuf-es messages are, every
 * field set: `create()` would walk the schema for each one, on the decision
 * path.
 */

/** The current time as a Timestamp. */
function timestampNow(): Timestamp {
  const ms = Date.now();
  const seconds = Math.floor(ms / 1000);
  return {
    $typeName: 'google.protobuf.Timestamp',
    seconds: BigInt(seconds),
    nanos: (ms - seconds * 1000) * 1_000_000,
  };
}

/**
 * Largest recorded payload, in bytes of its JSON text. A larger one (a request
 * may hold 16 MiB) is recorded as {@link truncatedPayload}: an entry must fit
 * a `ListDecisions` page that a stock gRPC client reads (4 MiB), and a sink's
 * buffer should hold many.
 */
export const MAX_PAYLOAD_JSON_BYTES = 1024 * 1024;

/** The payload recorded in place of one over {@link MAX_PAYLOAD_JSON_BYTES}. */
export function truncatedPayload(bytes: number): string {
  return `{"truncated":true,"bytes":${bytes}}`;
}

/** `json`, or its {@link truncatedPayload} when it is over the bound. */
function bounded(json: string): string {
  // Three bytes a UTF-16 unit at most: most payloads are measured by their length alone.
  if (json.length * 3 <= MAX_PAYLOAD_JSON_BYTES) return json;
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes <= MAX_PAYLOAD_JSON_BYTES ? json : truncatedPayload(bytes);
}

function maskedJson(doc: Record<string, JsonValue>, policy: PayloadPolicy): string {
  applyMasks(doc, policy.masks);
  return JSON.stringify(doc);
}
