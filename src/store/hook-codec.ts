/**
 * @module Converts caller hooks between their domain messages and the columns
 * a store keeps: the hook as canonical proto3 JSON (header templates as the
 * caller gave them), plus its id, type and plugin copied out for queries.
 * Backend-neutral, so that the SQLite and the PostgreSQL store read and write
 * hooks by one rule.
 */
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import { type Hook, HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';

/** A hook ready to insert: its canonical proto3 JSON and the columns copied from it. */
export interface HookRow {
  readonly hookId: string;
  readonly hookType: number;
  /** The hook's `plugin`, empty when it has none. */
  readonly plugin: string;
  readonly config: string;
}

/** A `hooks` row as read back. */
export interface StoredHookRow {
  readonly seq: number;
  readonly hook_id: string;
  readonly hook_type: number;
  readonly config: string;
}

/** Serialises one hook to its row, templates as given (`toJsonString` resolves nothing). */
export function toHookRow(hook: Hook, index: number): HookRow {
  let config: string;
  try {
    config = toJsonString(HookSchema, hook);
  } catch (e: unknown) {
    // Binary protobuf can carry what JSON cannot, such as a NaN in a `body` Struct.
    throw new InvalidArgumentError(
      `hooks[${index}]`,
      'HOOK_NOT_SERIALIZABLE',
      `hook ${index} cannot be stored as JSON: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
  return { hookId: hook.id, hookType: hook.type, plugin: hook.plugin, config };
}

/**
 * Parses one stored row. A row that does not parse, or whose JSON disagrees
 * with its `hook_id`/`hook_type` columns, fails the whole read: skipping it
 * would silently drop a hook, which could be a control.
 */
export function fromHookRow(operationId: string, row: StoredHookRow): Hook {
  let hook: Hook;
  try {
    hook = fromJsonString(HookSchema, row.config);
  } catch (e: unknown) {
    throw corruptHook(operationId, row.seq, e);
  }
  if (hook.id !== row.hook_id || hook.type !== row.hook_type) {
    throw corruptHook(
      operationId,
      row.seq,
      new Error(
        `config has id ${JSON.stringify(hook.id)} and type ${hook.type}, the row has id ${JSON.stringify(row.hook_id)} and type ${row.hook_type}`,
      ),
    );
  }
  return hook;
}

/** The `STORED_HOOK_CORRUPT` error of row `seq` of the operation. */
function corruptHook(operationId: string, seq: number, cause: unknown): AgentHooksError {
  return new AgentHooksError(
    'failed_precondition',
    'STORED_HOOK_CORRUPT',
    `stored hook ${seq} of operation ${operationId} is corrupt`,
    { cause },
  );
}
