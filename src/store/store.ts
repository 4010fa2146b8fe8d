/**
 * @module The store interfaces of agenthooks: where an operation's caller hooks,
 * its lifecycle and its parked tool calls are persisted. They are asynchronous
 * so that a shared PostgreSQL store can sit behind them later; the embedded
 * SQLite store is in `./sqlite.ts`. Every method rejects with an
 * `AgentHooksError` (a `StoreUnavailableError` when the store cannot be used);
 * a failure is never answered as "no hooks" or "not parked".
 */
import type { ToolCallContext, ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import type { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import { AgentHooksError, InvalidArgumentError, StoreUnavailableError } from '../errors.js';

/** An operation's persisted hooks and its parent, as {@link HookStore.listHooks} returns them. */
export interface OperationHooks {
  /** Hooks in registration order; empty for an unknown operation. */
  readonly hooks: Hook[];
  /**
   * False when the store has no record of the operation (never registered,
   * parked or completed, or its retention tombstone was removed): a decision
   * reports it in `unknown_operations`.
   */
  readonly known: boolean;
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
   *
   * @throws AgentHooksError `OPERATION_EXPIRED` when the operation is a
   *   retention tombstone: hooks added to it would never apply.
   */
  appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
    options?: AppendHooksOptions,
  ): Promise<number>;
  /**
   * The operation's hooks in registration order (empty for an unknown
   * operation). The hooks and the operation's state are read in one snapshot.
   *
   * @throws AgentHooksError `OPERATION_EXPIRED` when retention expired the
   *   operation: its hooks are gone, and "no hooks" would be a wrong answer.
   */
  listHooks(operationId: string): Promise<OperationHooks>;
  /**
   * Deletes the operation's hooks (purge), or only those of `plugin` when
   * given (the others keep their order); resolves to how many were deleted.
   */
  deleteHooks(operationId: string, plugin?: string): Promise<number>;
  /**
   * Checks that the store can be written now (for health): takes the write
   * lock and writes a probe that needs a fresh page, then rolls it back, so it
   * fails with `STORE_LOCKED`, `STORE_READ_ONLY`, `STORE_FULL`,
   * `STORE_CORRUPT` or `STORE_UNAVAILABLE` when a write would. After a write
   * failed for want of space or with an I/O error, the probe is committed
   * instead (only a commit reaches the disk), and the store stays failed until
   * one commits. A backend may repair its connection here (the SQLite store
   * reopens a connection stuck read-only or broken, and reopens a database
   * file restored at its path); other methods never do. Blocks for up to the
   * busy timeout, so it is not for every interval.
   */
  ping(): Promise<void>;
  /**
   * Checks cheaply, without a transaction, what `ping()` cannot see between
   * two pings: that the backing store is still the one opened (the SQLite
   * store compares the identity of its file, and of its `-wal` file, with the
   * one recorded at open) and that no write failed for want of space since
   * the last good ping. Fails with `STORE_FILE_MISSING` or
   * `STORE_FILE_REPLACED` (after which every call fails with that reason
   * until `ping()` reopens a restored file) or with the failed write's reason.
   */
  quickCheck(): Promise<void>;
  /**
   * For a store no other process writes (SQLite), whose rows a process may
   * keep in memory: a number that changes whenever the rows may have changed
   * under such a copy, because the store reopened its file (a backup put back
   * at the path, a connection replaced). Throws the error every read would
   * throw while the store cannot serve reads (its file lost, or closed), so
   * that no kept row is answered then either. Absent on a store that another
   * process may write (PostgreSQL): nothing read from it may be kept.
   */
  cacheGeneration?(): number;
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
 * - {@link STORE_FILE_MISSING} and {@link STORE_FILE_REPLACED}: the file is
 *   no longer the one opened.
 */
export type StoreErrorReason =
  | 'STORE_LOCKED'
  | 'STORE_READ_ONLY'
  | 'STORE_FULL'
  | 'STORE_CORRUPT'
  | 'STORE_UNAVAILABLE'
  | 'STORE_CLOSED'
  | 'STORE_NEWER_THAN_CODE'
  | typeof STORE_FILE_MISSING
  | typeof STORE_FILE_REPLACED;

/**
 * Returns the error of a store call the database could not serve:
 * `unavailable` with `reason`, the message `cannot <action>: <detail>`, and
 * the driver's error as `cause` (logged, never sent).
 *
 * @example throw storeUnavailableError('STORE_LOCKED', 'append hooks', 'database is locked', e);
 */
export function storeUnavailableError(
  reason: StoreErrorReason,
  action: string,
  detail: string,
  cause: unknown,
): StoreUnavailableError {
  return new StoreUnavailableError(reason, `cannot ${action}: ${detail}`, { cause });
}

/**
 * Returns the error of a store call that failed in a way no reason covers:
 * a bug in the store, which fails closed as `internal` (never as "no hooks").
 *
 * @example return storeInternalError('list hooks', e);
 */
export function storeInternalError(action: string, cause: unknown): AgentHooksError {
  return new AgentHooksError('internal', 'STORE_INTERNAL', `cannot ${action}: unexpected failure`, {
    cause,
  });
}

/**
 * Reason of every store call once the database file (or its `-wal` file) was
 * removed from its path while open: writes would go to a file that no restart
 * finds again, so the store fails closed until the file is back.
 */
export const STORE_FILE_MISSING = 'STORE_FILE_MISSING';
/**
 * Reason of every store call once another file took the database file's (or
 * its `-wal` file's) place while open, and while the file at the path is not
 * an agenthooks database the store can reopen.
 */
export const STORE_FILE_REPLACED = 'STORE_FILE_REPLACED';

/** Why a tool-call context or result stored with a parked call cannot be used. */
export const TOOL_CALL_CONTEXT_UNAVAILABLE = 'TOOL_CALL_CONTEXT_UNAVAILABLE';
/** Message of {@link TOOL_CALL_CONTEXT_UNAVAILABLE}, as upstream words it. */
export const TOOL_CALL_CONTEXT_UNAVAILABLE_MESSAGE =
  'Cannot evaluate afterToolCall: tool call context is unavailable';
/** Reason of a publication for a tool call that has no parked record. */
export const PARKED_CALL_NOT_FOUND = 'PARKED_CALL_NOT_FOUND';
/** Reason of a write or read for an operation that retention has expired. */
export const OPERATION_EXPIRED = 'OPERATION_EXPIRED';
/** Reason of an append after which an operation's stored hook configuration would be too large. */
export const HOOK_CONFIG_TOO_LARGE = 'HOOK_CONFIG_TOO_LARGE';

/** Options of {@link HookStore.appendHooks}. */
export interface AppendHooksOptions {
  /**
   * Most bytes of stored hook configuration (each hook's serialized JSON, in
   * UTF-8) the operation may have after the append, checked in the append's
   * own transaction. Absent: no limit. Hooks already stored count, whatever
   * limit they were stored under, but are never refused on their own.
   */
  readonly maxConfigBytes?: number;
  /**
   * Most hooks the operation may have after the append, checked in the
   * append's own transaction, under the lock that serialises the
   * operation's appends across processes (so concurrent registrations on
   * several pods never pass it together). Absent: no limit. Hooks already
   * stored count, but are never refused on their own.
   */
  readonly maxHooks?: number;
  /**
   * Checks the distinct matchers of the operation's stored hooks, read in
   * the append's own transaction under the same lock as `maxHooks` (so a
   * limit on them holds across processes too); throwing refuses the append,
   * and nothing is written. Absent: the matchers are not read.
   */
  readonly checkMatchers?: (stored: readonly string[]) => void;
}

/** Reason of an append after which an operation would have more hooks than allowed. */
export const TOO_MANY_HOOKS = 'TOO_MANY_HOOKS';

/**
 * Returns the error for an append over {@link AppendHooksOptions.maxHooks}:
 * `invalid_argument` on `hooks`, {@link TOO_MANY_HOOKS}.
 *
 * @example throw tooManyHooksError(1_000, 999, 2);
 */
export function tooManyHooksError(
  limit: number,
  existing: number,
  adding: number,
): InvalidArgumentError {
  return new InvalidArgumentError(
    'hooks',
    TOO_MANY_HOOKS,
    `An operation can have at most ${limit} hooks (it has ${existing}, this request adds ${adding})`,
  );
}

/**
 * Returns the error for an append over {@link AppendHooksOptions.maxConfigBytes}:
 * `invalid_argument` on `hooks`, {@link HOOK_CONFIG_TOO_LARGE}.
 *
 * @example throw hookConfigTooLargeError(1_048_576, 1_000_000, 60_000);
 */
export function hookConfigTooLargeError(
  limit: number,
  stored: number,
  adding: number,
): InvalidArgumentError {
  return new InvalidArgumentError(
    'hooks',
    HOOK_CONFIG_TOO_LARGE,
    `An operation can store at most ${limit} bytes of hook configuration (it has ${stored}, this request adds ${adding})`,
  );
}

/**
 * Returns the error for a parked call whose stored context, result or chain
 * does not decode: `failed_precondition`, {@link TOOL_CALL_CONTEXT_UNAVAILABLE},
 * with the decoding failure as `cause`.
 *
 * @example throw toolCallContextUnavailableError('call-1', e);
 */
export function toolCallContextUnavailableError(
  toolCallId: string,
  cause: unknown,
): AgentHooksError {
  return new AgentHooksError(
    'failed_precondition',
    TOOL_CALL_CONTEXT_UNAVAILABLE,
    TOOL_CALL_CONTEXT_UNAVAILABLE_MESSAGE,
    { cause, metadata: { toolCallId } },
  );
}

/**
 * Returns the error for a publication without a parked record:
 * `not_found`, {@link PARKED_CALL_NOT_FOUND}.
 *
 * @example throw parkedCallNotFoundError('call-1');
 */
export function parkedCallNotFoundError(toolCallId: string): AgentHooksError {
  return new AgentHooksError(
    'not_found',
    PARKED_CALL_NOT_FOUND,
    'no parked call has this tool call id',
    { metadata: { toolCallId } },
  );
}

/**
 * Returns the error for an operation that retention has expired:
 * `failed_precondition`, {@link OPERATION_EXPIRED}.
 *
 * @example throw operationExpiredError('op-1');
 */
export function operationExpiredError(operationId: string): AgentHooksError {
  return new AgentHooksError(
    'failed_precondition',
    OPERATION_EXPIRED,
    `operation ${operationId} has expired; its hooks are gone, so no decision can be made`,
    { metadata: { operationId } },
  );
}

/**
 * The durable record of a parked tool call (`ParkToolCall`): what a later
 * decision or publication needs on any restarted sidecar.
 */
export interface ParkedCallRecord {
  /** The call's native tool call id; the record's key. */
  readonly toolCallId: string;
  /** The operation that made the call. */
  readonly operationId: string;
  /** Operations whose caller hooks apply, oldest first (the call's operation first). */
  readonly chain: readonly string[];
  /** Why the call is parked; never `PARK_KIND_UNSPECIFIED`. */
  readonly kind: ParkKind;
  /** The call's context as it was when parked. */
  readonly context: ToolCallContext;
  /** When the call was parked, in epoch milliseconds. */
  readonly parkedAt: number;
  /** The first final result published into the placeholder; absent while the call waits. */
  readonly finalResult?: ToolResult;
  /** When {@link ParkedCallRecord.finalResult} was published, in epoch milliseconds. */
  readonly publishedAt?: number;
}

/** A record to park: a {@link ParkedCallRecord} without a result yet. */
export type NewParkedCall = Omit<ParkedCallRecord, 'finalResult' | 'publishedAt'>;

/** Answer of {@link ParkStore.parkCall}. */
export interface ParkOutcome {
  /** The stored record: the first one when the call was already parked. */
  readonly record: ParkedCallRecord;
  /** True when this call created the record. */
  readonly created: boolean;
}

/**
 * Answer of {@link ParkStore.claimPublication}, for a parked call that exists.
 * - `claimed`: the caller holds the publication lease now (it was free, or
 *   its holder's lease expired); it runs the result controls and publishes.
 * - `published`: the placeholder holds a final result; nobody may claim it.
 * - `held`: `holder`'s lease is still running; ask again later, at the
 *   latest after `expiresInMs` (or claim it `replacing` that holder, when
 *   the caller knows it died).
 */
export type PublicationClaim =
  | { readonly state: 'claimed'; readonly record: ParkedCallRecord }
  | { readonly state: 'published'; readonly finalResult: ToolResult; readonly publishedAt: number }
  | { readonly state: 'held'; readonly holder: string; readonly expiresInMs: number };

/** Answer of {@link ParkStore.publishResult}. */
export interface PublishOutcome {
  /** True for the one call that wrote the placeholder. */
  readonly published: boolean;
  /** The result in the placeholder: this call's, or the first one published. */
  readonly finalResult: ToolResult;
  /** When that result was published (epoch ms): this call's time, or the first's. */
  readonly publishedAt: number;
}

/**
 * Where an operation is in its life, as retention sees it.
 * - `active`: known, not completed.
 * - `completed`: completed; its hooks stay until retention expires it.
 * - `expired`: a tombstone; its hooks are gone and a decision must fail closed.
 * - `unknown`: the store has no row for it (no hooks, no park, no completion),
 *   or retention removed its tombstone.
 */
export type OperationState = 'active' | 'completed' | 'expired' | 'unknown';

/**
 * The lifecycle of operations: completion starts the retention clock, and a
 * decision checks that no operation of its chain has expired.
 *
 * @example
 * await ops.markOperationCompleted('op-1', Date.now());
 * (await ops.operationState(['op-1', 'op-2'])).get('op-2'); // 'unknown'
 */
export interface OperationLifecycleStore {
  /**
   * Marks the operation completed at `at` (epoch milliseconds), creating its
   * row when missing; a later completion moves `completed_at` forward. An
   * expired operation stays expired. Committed before it resolves.
   *
   * @throws RangeError when `at` is not a safe integer.
   */
  markOperationCompleted(operationId: string, at: number): Promise<void>;
  /**
   * The state of each operation, read in one snapshot; every id given is a
   * key of the map (`unknown` when the store has no row for it).
   */
  operationState(operationIds: readonly string[]): Promise<Map<string, OperationState>>;
}

/**
 * Persists parked tool calls and their deferred-result placeholders, and
 * (through {@link OperationLifecycleStore}) the state of their operations.
 *
 * @example
 * const { record, created } = await parks.parkCall({ toolCallId, operationId, chain, kind, context, parkedAt: Date.now() });
 * const { published, finalResult } = await parks.publishResult(toolCallId, result, Date.now());
 */
export interface ParkStore extends OperationLifecycleStore {
  /**
   * Inserts the record unless one exists for its tool call id, committed
   * before it resolves; creates the operation rows of the chain (and of
   * `operationId`) when missing. Resolves to the stored record (the first
   * one) and whether this call created it.
   *
   * @throws AgentHooksError `OPERATION_EXPIRED` when a new record names an
   *   expired operation (nothing is written).
   * @throws RangeError when the record is malformed: an empty id or chain
   *   entry, an unspecified kind, a context of another tool call id, or a
   *   time that is not a safe integer.
   */
  parkCall(record: NewParkedCall): Promise<ParkOutcome>;
  /**
   * The record, or undefined when the call was never parked (or its published
   * record was removed by retention).
   *
   * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE` (failed_precondition,
   *   message `Cannot evaluate afterToolCall: tool call context is unavailable`)
   *   when the stored context, result or chain does not decode.
   */
  getParkedCall(toolCallId: string): Promise<ParkedCallRecord | undefined>;
  /**
   * The operation's parked calls (made by it), waiting ones and published
   * ones, the most recently parked first, at most `limit` of them. For the
   * admin console: read-only, and never on a decision's path.
   *
   * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE` when a stored record does not decode.
   */
  listParkedCalls(operationId: string, limit: number): Promise<ParkedCallRecord[]>;
  /**
   * Publishes `result` into the empty placeholder, atomically: of all the
   * calls for one tool call id, across processes sharing the store, exactly
   * one resolves `{ published: true }`; the others resolve
   * `{ published: false }` with the first result. Committed before it resolves.
   *
   * @throws AgentHooksError `PARKED_CALL_NOT_FOUND` (not_found) when no record exists.
   * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE` when the first
   *   result is stored but does not decode.
   */
  publishResult(
    toolCallId: string,
    result: ToolResult,
    publishedAt: number,
  ): Promise<PublishOutcome>;
  /**
   * Takes the publication lease of a parked call whose placeholder is empty,
   * atomically across processes sharing the store: the lease is free, or its
   * holder's expired, and `holder` gets it for `leaseMs` milliseconds of the
   * store's clock (the database server's, for a shared store, so pods with
   * skewed clocks agree). Of concurrent claims exactly one is `claimed`.
   * Resolves to undefined when no record exists. The lease only decides who
   * runs the result controls; {@link ParkStore.publishResult} still writes
   * the placeholder once whoever calls it. With `replacing`, a running lease
   * of exactly that holder is taken too (the caller knows it died).
   *
   * @throws AgentHooksError `TOOL_CALL_CONTEXT_UNAVAILABLE` when the stored
   *   record or result does not decode (the lease is not kept then).
   * @throws RangeError when `holder` is empty or `leaseMs` is not a positive integer.
   */
  claimPublication(
    toolCallId: string,
    holder: string,
    leaseMs: number,
    replacing?: string,
  ): Promise<PublicationClaim | undefined>;
  /**
   * Extends the lease `holder` holds by `leaseMs` milliseconds from now;
   * resolves to false when it no longer holds it (it expired and another
   * holder claimed it, or the result is published).
   */
  renewPublication(toolCallId: string, holder: string, leaseMs: number): Promise<boolean>;
  /**
   * Gives up the lease `holder` holds, so that another call can claim it at
   * once (after a failed publication); does nothing when `holder` does not
   * hold it. A publication releases the lease by itself.
   */
  releasePublication(toolCallId: string, holder: string): Promise<void>;
}

/** Answer of one {@link RetentionStore.expireBefore} batch. */
export interface ExpireResult {
  /** Operations that became tombstones in this batch (drop them from caches). */
  readonly operations: string[];
  /** How many published parked calls this batch deleted. */
  readonly parkedCalls: number;
  /** How many tombstones this batch deleted (their operations are unknown from then on). */
  readonly tombstones: number;
  /** How many decision audit entries older than the cutoff this batch deleted. */
  readonly decisions: number;
}

/**
 * Removes what retention no longer needs to keep.
 *
 * @example
 * const now = Date.now();
 * const { operations } = await retention.expireBefore(now - SEVEN_DAYS_MS, 100, now - THIRTY_DAYS_MS);
 */
export interface RetentionStore {
  /**
   * Removes one small batch, in its own short write transaction: at most
   * `batchSize` completed operations with `completed_at < cutoff` and no
   * parked call still waiting on them (their hooks are deleted and the row
   * stays as an `expired` tombstone, stamped with the time of this call);
   * at most `batchSize` parked calls published before `cutoff`; and, when
   * `tombstoneCutoff` is given, at most `batchSize` tombstones that became
   * tombstones before it and that no remaining parked call names (the row
   * is deleted, so the operation is unknown from then on); and at most
   * `batchSize` decision audit entries made before `cutoff`. Without
   * `tombstoneCutoff`, tombstones are kept. Call it again while a batch
   * comes back full.
   *
   * @throws RangeError when `cutoff` or `tombstoneCutoff` is not a safe
   *   integer or `batchSize` is not a positive integer.
   */
  expireBefore(cutoff: number, batchSize: number, tombstoneCutoff?: number): Promise<ExpireResult>;
}

/** One decision audit entry as the store keeps it. */
export interface DecisionRow {
  /** The decision id (a time-ordered UUID). */
  readonly decisionId: string;
  /** Epoch milliseconds of the decision. */
  readonly time: number;
  /** The decision's operation. */
  readonly operationId: string;
  /** The `DecisionOutcome` number, for filtering. */
  readonly outcome: number;
  /** The whole `DecisionRecord`, encoded (binary protobuf). */
  readonly record: Uint8Array;
}

/** A filter and page of {@link DecisionStore.listDecisions}, newest first. */
export interface DecisionQuery {
  /** Only this operation's decisions, when set. */
  readonly operationId?: string;
  /** Only decisions at or after this time (epoch ms), when set. */
  readonly from?: number;
  /** Only decisions before this time (epoch ms), when set. */
  readonly to?: number;
  /** Only decisions with this outcome number, when set. */
  readonly outcome?: number;
  /** Only decisions older than this one, in (time, id) order: the previous page's last. */
  readonly before?: { readonly time: number; readonly decisionId: string };
  /** Most rows answered. */
  readonly limit: number;
  /**
   * When set, the rows stop by their records' bytes too: a row is answered
   * only while the records of the rows before it, all but the last one,
   * hold at most this many bytes. So the answer holds the rows whose records
   * fit (at least one), and one or two more, by which the caller knows that
   * more follow: never every row of a large log loaded at once.
   */
  readonly maxBytes?: number;
}

/**
 * Keeps the decision audit log (`--audit-store`).
 *
 * @example
 * await decisions.appendDecisions([row]);
 * const page = await decisions.listDecisions({ operationId: 'op-1', limit: 100 });
 */
export interface DecisionStore {
  /**
   * Inserts the rows in one transaction (a group commit), committed before
   * it resolves; a row whose decision id is stored already is skipped, so a
   * batch retried after an uncertain failure is not doubled.
   */
  appendDecisions(rows: readonly DecisionRow[]): Promise<void>;
  /** Rows matching the query, newest first (time, then decision id, descending). */
  listDecisions(query: DecisionQuery): Promise<DecisionRow[]>;
}
