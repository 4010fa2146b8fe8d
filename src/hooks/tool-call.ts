/**
 * @module Request checks shared by the tool-call RPCs: the tool-call context
 * a decision needs, and the operation chain whose caller hooks apply.
 */
import { Executor, type ToolCallContext } from '../../gen/agenthooks/v1/events_pb.js';
import { InvalidArgumentError } from '../errors.js';

/** Reason of a tool-call context that lacks a required field. */
export const TOOL_CALL_CONTEXT_INVALID = 'TOOL_CALL_CONTEXT_INVALID';
/** Reason of an operation chain with an empty entry. */
export const OPERATION_CHAIN_INVALID = 'OPERATION_CHAIN_INVALID';

const REQUIRED_STRINGS = ['toolCallId', 'operationId', 'identifier', 'apiName'] as const;

/**
 * Checks the required fields of a tool-call context: `toolCallId`,
 * `operationId`, `identifier`, `apiName` and `executor`.
 *
 * @throws InvalidArgumentError naming the first missing field under `path`.
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
  if (context.executor !== Executor.SERVER && context.executor !== Executor.CLIENT) {
    throw new InvalidArgumentError(
      `${path}.executor`,
      TOOL_CALL_CONTEXT_INVALID,
      'executor must be EXECUTOR_SERVER or EXECUTOR_CLIENT',
    );
  }
}

/**
 * Returns the operations whose caller hooks apply, oldest first: the
 * request's chain when it names one, else the call's own operation.
 *
 * @throws InvalidArgumentError for an empty entry.
 */
export function resolveChain(
  requested: readonly string[],
  context: ToolCallContext,
  path = 'operationChain',
): string[] {
  requested.forEach((id, i) => {
    if (id === '') {
      throw new InvalidArgumentError(
        `${path}[${i}]`,
        OPERATION_CHAIN_INVALID,
        'operation ids in a chain cannot be empty',
      );
    }
  });
  return requested.length > 0 ? [...requested] : [context.operationId];
}
