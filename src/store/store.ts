/**
 * @module The store interface of agenthooks: where an operation's caller hooks
 * are persisted. It is asynchronous so that a shared PostgreSQL store can sit
 * behind it later; the embedded SQLite store is in `./sqlite.ts`. Every method
 * rejects with an `AgentHooksError` (a `StoreUnavailableError` when the store
 * cannot be used); a failure is never answered as "no hooks".
 */
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';

/** An operation's persisted hooks and its parent, as {@link HookStore.listHooks} returns them. */
export interface OperationHooks {
  /** Hooks in registration order; empty for an unknown operation. */
  readonly hooks: Hook[];
  /** Parent operation, when a registration named one. */
  readonly parentOperationId?: string;
}

/**
 * Persists the caller hooks of operations.
 *
 * @example
 * const count = await store.appendHooks('op-1', undefined, hooks);
 * const { hooks: stored } = await store.listHooks('op-1');
 */
export interface HookStore {
  /**
   * Appends hooks after the operation's existing ones, all or nothing, committed before it
   * resolves; creates the operation row if needed; keeps the first non-empty
   * parentOperationId. Resolves to the operation's hook count after the append.
   */
  appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
  ): Promise<number>;
  /** The operation's hooks in registration order (empty for an unknown operation). */
  listHooks(operationId: string): Promise<OperationHooks>;
  /** Deletes the operation's hooks (purge); resolves to how many were deleted. */
  deleteHooks(operationId: string): Promise<number>;
  /** Cheap check that the store can be read and written (for health). */
  ping(): Promise<void>;
  /** Closes the store; every later call rejects with `STORE_CLOSED`. Closing twice is a no-op. */
  close(): Promise<void>;
}

/** One user of the embedded user directory, as `agenthooks users import` writes it. */
export interface UserRecord {
  /** User id, as events carry it in `userId`; non-empty. */
  readonly id: string;
  /** The user's email address, or null for a user without one. */
  readonly email: string | null;
}

/**
 * The embedded user directory: the `users` table that email enrichment reads
 * `userEmail` from (upstream contract §5).
 *
 * @example
 * await users.upsertUsers([{ id: 'user_1', email: 'ada@example.com' }]);
 * await users.lookupUserEmail('user_1'); // 'ada@example.com'
 */
export interface UserStore {
  /** The user's email; null for an unknown user or a user stored without one. */
  lookupUserEmail(userId: string): Promise<string | null>;
  /**
   * Inserts or replaces users, all or nothing, committed before it resolves;
   * when `users` names an id twice, the last one wins. Resolves to how many
   * records were written.
   */
  upsertUsers(users: readonly UserRecord[]): Promise<number>;
}

/**
 * Reasons of the `StoreUnavailableError`s a {@link HookStore} raises, whatever
 * the backend; clients and the health check match on them.
 * - `STORE_LOCKED`: another connection holds the lock longer than the busy timeout.
 * - `STORE_READ_ONLY`: the store can be read but not written.
 * - `STORE_FULL`: the disk or the configured size limit is full.
 * - `STORE_CORRUPT`: the file is damaged or is not a database.
 * - `STORE_UNAVAILABLE`: the store cannot be opened, read or written (I/O, permissions).
 * - `STORE_CLOSED`: the store was closed.
 * - `STORE_NEWER_THAN_CODE`: the schema was written by a newer agenthooks.
 */
export type StoreErrorReason =
  | 'STORE_LOCKED'
  | 'STORE_READ_ONLY'
  | 'STORE_FULL'
  | 'STORE_CORRUPT'
  | 'STORE_UNAVAILABLE'
  | 'STORE_CLOSED'
  | 'STORE_NEWER_THAN_CODE';
