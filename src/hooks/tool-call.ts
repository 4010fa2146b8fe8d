/**
 * @module Request checks shared by the tool-call RPCs: the tool-call context
 * a decision needs, and the operation chain whose caller hooks apply.
 */
import { Executor, type ToolCallContext } from '../../gen/agenthooks/v1/events_pb.js';
import { InvalidArgumentError } from '../errors.js';
import {
  checkIdentifier,
  MAX_OPERATION_ID_BYTES,
  MAX_TOOL_CALL_ID_BYTES,
  REASON,
} from './validate.js';

/** Reason of a tool-call context that lacks a required field. */
export const TOOL_CALL_CONTEXT_INVALID = 'TOOL_CALL_CONTEXT_INVALID';
/** Reason of a tool-result request or `afterToolCall` event without its result. */
export const TOOL_RESULT_REQUIRED = 'TOOL_RESULT_REQUIRED';
/** Reason of an operation chain with an empty entry. */
export const OPERATION_CHAIN_INVALID = 'OPERATION_CHAIN_INVALID';
/** Reason of a tool `identifier` or `apiName` longer than {@link MAX_TOOL_NAME_BYTES}. */
export const IDENTIFIER_TOO_LONG = 'IDENTIFIER_TOO_LONG';

/**
 * Longest tool `identifier` and `apiName`, in UTF-8 bytes. Matchers run on
 * `${identifier}/${apiName}`, and a search costs up to the matcher's program
 * size per character, so this bounds the cost of a decision.
 */
export const MAX_TOOL_NAME_BYTES = 256;

/**
 * Checks the length of a tool `identifier` or `apiName`.
 *
 * @throws InvalidArgumentError with reason `IDENTIFIER_TOO_LONG` naming `field`.
 * @example
 * checkToolName(context.identifier, 'event.context.identifier');
 */
export function checkToolName(name: string, field: string): void {
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long names need counting.
  if (name.length * 3 <= MAX_TOOL_NAME_BYTES) return;
  if (Buffer.byteLength(name, 'utf8') > MAX_TOOL_NAME_BYTES) {
    throw new InvalidArgumentError(
      field,
      IDENTIFIER_TOO_LONG,
      `${field.slice(field.lastIndexOf('.') + 1)} is longer than ${MAX_TOOL_NAME_BYTES} bytes`,
    );
  }
}

const REQUIRED_STRINGS = ['toolCallId', 'operationId', 'identifier', 'apiName'] as const;

/**
 * Checks the required fields of a tool-call context: `toolCallId`,
 * `operationId`, `identifier`, `apiName` and `executor` (a value the
 * sidecar knows); then the length of the tool name ({@link MAX_TOOL_NAME_BYTES})
 * and the sizes of `toolCallId` and `operationId` (at most 256 bytes each).
 *
 * @throws InvalidArgumentError naming the first missing, invalid or too long field under `path`.
 */
export function validateToolCallContext(
  context: ToolCallContext | undefined,
  path: string,
): asserts context is ToolCallContext {
  if (context === undefined) {
    throw new InvalidArgumentError(
      path,
      TOOL_CALL_CONTEXT_INVALID,
      'a tool-call context is required',
    );
  }
  for (const name of REQUIRED_STRINGS) {
    if (context[name] === '') {
      throw new InvalidArgumentError(
        `${path}.${name}`,
        TOOL_CALL_CONTEXT_INVALID,
        `${name} is required`,
      );
    }
  }
  checkToolName(context.identifier, `${path}.identifier`);
  checkToolName(context.apiName, `${path}.apiName`);
  if (context.executor !== Executor.SERVER && context.executor !== Executor.CLIENT) {
    throw new InvalidArgumentError(
      `${path}.executor`,
      TOOL_CALL_CONTEXT_INVALID,
      'executor must be EXECUTOR_SERVER or EXECUTOR_CLIENT',
    );
  }
  checkToolCallId(context.toolCallId, `${path}.toolCallId`);
  checkIdentifier(
    context.operationId,
    `${path}.operationId`,
    REASON.OPERATION_ID_TOO_LONG,
    MAX_OPERATION_ID_BYTES,
    'An operation id',
  );
  if (context.parentOperationId !== undefined) {
    checkIdentifier(
      context.parentOperationId,
      `${path}.parentOperationId`,
      REASON.OPERATION_ID_TOO_LONG,
      MAX_OPERATION_ID_BYTES,
      'An operation id',
    );
  }
}

/**
 * Checks the size of a tool call id: at most 256 bytes in UTF-8.
 *
 * @throws InvalidArgumentError `TOOL_CALL_ID_TOO_LONG` naming `field`.
 */
export function checkToolCallId(id: string, field: string): void {
  checkIdentifier(
    id,
    field,
    REASON.TOOL_CALL_ID_TOO_LONG,
    MAX_TOOL_CALL_ID_BYTES,
    'A tool call id',
  );
}

/**
 * Most operations a request's chain may name. Each is looked up for its hooks
 * and kept in the audit record; an unbounded chain (300,000 entries fit in a
 * message) held the event loop for seconds.
 */
export const MAX_OPERATION_CHAIN = 128;

/**
 * Refuses a chain longer than {@link MAX_OPERATION_CHAIN}.
 *
 * @throws InvalidArgumentError `OPERATION_CHAIN_INVALID` naming `path`.
 */
export function checkChainLength(chain: readonly string[], path = 'operationChain'): void {
  if (chain.length > MAX_OPERATION_CHAIN) {
    throw new InvalidArgumentError(
      path,
      OPERATION_CHAIN_INVALID,
      `an operation chain names at most ${MAX_OPERATION_CHAIN} operations, not ${chain.length}`,
    );
  }
}

/**
 * Returns the operations whose caller hooks apply, oldest first: the
 * request's chain when it names one, else the call's own operation.
 *
 * @throws InvalidArgumentError for more than {@link MAX_OPERATION_CHAIN}
 *   entries, an empty entry, or one over 256 bytes.
 */
export function resolveChain(
  requested: readonly string[],
  context: ToolCallContext,
  path = 'operationChain',
): string[] {
  checkChainLength(requested, path);
  requested.forEach((id, i) => {
    if (id === '') {
      throw new InvalidArgumentError(
        `${path}[${i}]`,
        OPERATION_CHAIN_INVALID,
        'operation ids in a chain cannot be empty',
      );
    }
    checkIdentifier(
      id,
      `${path}[${i}]`,
      REASON.OPERATION_ID_TOO_LONG,
      MAX_OPERATION_ID_BYTES,
      'An operation id',
    );
  });
  return requested.length > 0 ? [...requested] : [context.operationId];
}
