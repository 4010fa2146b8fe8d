/**
 * @module Converts parked tool calls between their domain records and the
 * columns a store keeps: the context and the final result as protobuf binary,
 * the chain as a JSON array. Backend-neutral, so that a PostgreSQL store
 * (`bytea`, `jsonb`) can share it.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  type ToolCallContext,
  ToolCallContextSchema,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import { extend } from '../extend.js';
import {
  type NewParkedCall,
  type ParkedCallRecord,
  type PublicationClaim,
  toolCallContextUnavailableError,
} from './store.js';

/** A parked call as its columns hold it. */
export interface ParkedCallRow {
  readonly tool_call_id: string;
  readonly operation_id: string;
  /** JSON array of operation ids. */
  readonly chain: string;
  readonly kind: number;
  /** `ToolCallContext`, protobuf binary. */
  readonly context: Uint8Array;
  readonly parked_at: number;
  /** `ToolResult`, protobuf binary; null while the placeholder is empty. */
  readonly final_result: Uint8Array | null;
  readonly published_at: number | null;
}

/**
 * Checks a record before it is parked and returns its columns. Every check
 * guards against a bug in the caller (the service validates requests first).
 *
 * @throws RangeError when an id or chain entry is empty, the kind is
 *   unspecified, the context names another tool call, or the time is not a
 *   safe integer.
 */
export function toParkedCallRow(record: NewParkedCall): ParkedCallRow {
  const { toolCallId, operationId, chain, kind, context, parkedAt } = record;
  if (toolCallId === '' || operationId === '') {
    throw new RangeError('a parked call needs a tool call id and an operation id');
  }
  if (context.toolCallId !== toolCallId) {
    throw new RangeError(
      `the context is of tool call ${JSON.stringify(context.toolCallId)}, not ${JSON.stringify(toolCallId)}`,
    );
  }
  if (chain.length === 0 || chain.some((id) => id === '')) {
    throw new RangeError('a parked call needs a chain of non-empty operation ids');
  }
  if (kind === ParkKind.UNSPECIFIED) {
    throw new RangeError('a parked call needs a kind');
  }
  assertEpochMs('parkedAt', parkedAt);
  return {
    tool_call_id: toolCallId,
    operation_id: operationId,
    chain: JSON.stringify(chain),
    kind,
    context: toBinary(ToolCallContextSchema, context),
    parked_at: parkedAt,
    final_result: null,
    published_at: null,
  };
}

/**
 * Rebuilds the record of a stored row. A part that does not decode, or a
 * context of another tool call, fails the whole read: a control cannot be
 * evaluated without it.
 *
 * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE`.
 */
export function fromParkedCallRow(row: ParkedCallRow): ParkedCallRecord {
  const toolCallId = row.tool_call_id;
  let context: ToolCallContext;
  let chain: string[];
  try {
    context = fromBinary(ToolCallContextSchema, row.context);
    chain = decodeChain(row.chain);
  } catch (e: unknown) {
    throw toolCallContextUnavailableError(toolCallId, e);
  }
  if (context.toolCallId !== toolCallId) {
    throw toolCallContextUnavailableError(
      toolCallId,
      new Error(
        `the stored context is of tool call ${JSON.stringify(context.toolCallId)}, the row is ${JSON.stringify(toolCallId)}`,
      ),
    );
  }
  const record: ParkedCallRecord = {
    toolCallId,
    operationId: row.operation_id,
    chain,
    kind: row.kind as ParkKind,
    context,
    parkedAt: row.parked_at,
  };
  if (row.final_result === null) {
    return record;
  }
  return extend(record, {
    finalResult: decodeResult(toolCallId, row.final_result),
    ...(row.published_at === null ? {} : { publishedAt: row.published_at }),
  });
}

/** Encodes a final result for its column. */
export function encodeResult(result: ToolResult): Uint8Array {
  return toBinary(ToolResultSchema, result);
}

/**
 * Decodes a stored final result.
 *
 * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE` when it does not decode.
 */
export function decodeResult(toolCallId: string, bytes: Uint8Array): ToolResult {
  try {
    return fromBinary(ToolResultSchema, bytes);
  } catch (e: unknown) {
    throw toolCallContextUnavailableError(toolCallId, e);
  }
}

/**
 * Checks that `value` is a time a store can keep: epoch milliseconds as a
 * safe integer.
 *
 * @throws RangeError otherwise.
 */
export function assertEpochMs(name: string, value: number): void {
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(`${name} must be epoch milliseconds as a safe integer, got ${value}`);
  }
}

/**
 * Checks the arguments of a lease call: a non-empty holder and a duration in
 * whole, positive milliseconds.
 *
 * @throws RangeError otherwise.
 */
export function assertLease(holder: string, leaseMs: number): void {
  if (holder === '') {
    throw new RangeError('a publication lease needs a holder');
  }
  if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0) {
    throw new RangeError(`leaseMs must be a positive integer, got ${leaseMs}`);
  }
}

/**
 * Reads the row a claim found, `claimed` (the caller holds the lease now)
 * or `published`, into its answer. A row that does not decode fails the
 * claim, and a lease just taken on it is given back first (`release`): a
 * record nobody can publish keeps no lease.
 *
 * @throws AgentHooksError TOOL_CALL_CONTEXT_UNAVAILABLE, from {@link fromParkedCallRow}.
 */
export async function claimAnswer(
  state: 'claimed' | 'published',
  row: ParkedCallRow,
  release: () => Promise<void>,
): Promise<PublicationClaim> {
  let record: ParkedCallRecord;
  try {
    record = fromParkedCallRow(row);
  } catch (e: unknown) {
    if (state === 'claimed') await release();
    throw e;
  }
  if (state === 'claimed') return { state: 'claimed', record };
  return {
    state: 'published',
    finalResult: record.finalResult as ToolResult,
    publishedAt: record.publishedAt ?? 0,
  };
}

function decodeChain(text: string): string[] {
  const chain: unknown = JSON.parse(text);
  if (
    !Array.isArray(chain) ||
    chain.length === 0 ||
    !chain.every((id): id is string => typeof id === 'string' && id !== '')
  ) {
    throw new Error(`the stored chain is not a list of operation ids: ${text}`);
  }
  return chain;
}
