/**
 * @module A store that opens after the sidecar started: the shared
 * PostgreSQL store of a sidecar whose database was unreachable at start.
 * Until it opens, every call fails `UNAVAILABLE` (`STORE_UNAVAILABLE`) at
 * once, without touching the network, and only `ping()` (which the store
 * health check runs on each interval while NOT_SERVING) tries to open it,
 * one attempt at a time; once open, every call goes to the opened store.
 * An open that fails in a way that cannot clear by itself, or still fails
 * past the deadline, is given up: the owner is told, and stops the process.
 */

import type { ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, StoreUnavailableError } from '../errors.js';
import type { Logger } from '../log.js';
import type {
  AppendHooksOptions,
  DecisionQuery,
  DecisionRow,
  DecisionStore,
  ExpireResult,
  HookStore,
  NewParkedCall,
  OperationHooks,
  OperationState,
  ParkedCallRecord,
  ParkOutcome,
  ParkStore,
  PublicationClaim,
  PublishOutcome,
  RetentionStore,
  UserRecord,
  UserStore,
} from './store.js';

/** Every store interface a deferred store stands in for. */
export type DeferrableStore = HookStore & UserStore & ParkStore & RetentionStore & DecisionStore;

/**
 * Reasons of an open that may succeed later by itself: the server
 * unreachable, starting, out of connections, its migration lock held, or
 * read-only (a standby during a failover, `default_transaction_read_only`):
 * the migration's statements need a writable primary.
 */
const RETRYABLE_OPEN_REASONS: ReadonlySet<string> = new Set([
  'STORE_UNAVAILABLE',
  'STORE_LOCKED',
  'STORE_READ_ONLY',
]);

/**
 * Returns true when an open failed in a way that may clear by itself, so
 * trying again later makes sense; false for a failure no retry fixes (a
 * schema newer than the code, a bug).
 *
 * @example isRetryableOpenError(storeUnavailableError('STORE_UNAVAILABLE', 'open', 'ECONNREFUSED', e)) // true
 */
export function isRetryableOpenError(e: unknown): boolean {
  return e instanceof AgentHooksError && RETRYABLE_OPEN_REASONS.has(e.reason);
}

/** Options of a {@link DeferredStore}. */
export interface DeferredStoreOptions<S extends DeferrableStore> {
  /** Opens the store; rejects with a domain error. */
  readonly open: () => Promise<S>;
  /**
   * Epoch milliseconds after which a failed attempt gives up; undefined
   * retries until the store opens.
   */
  readonly deadlineMs?: number | undefined;
  /**
   * Called once when the open is given up, with the last error: it failed in
   * a way no retry fixes, or still failed past the deadline.
   */
  readonly onGiveUp: (e: unknown) => void;
  readonly logger: Logger;
  /** Clock, for tests. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * Stands in for a store that could not be opened yet; see the module comment.
 *
 * @example
 * const store = new DeferredStore({ open: () => openPostgresStore(url), onGiveUp: stop, logger });
 * await store.ping(); // tries to open it; rejects with STORE_UNAVAILABLE until it opens
 */
export class DeferredStore<S extends DeferrableStore = DeferrableStore> implements DeferrableStore {
  readonly #options: DeferredStoreOptions<S>;
  #store: S | undefined;
  #opening: Promise<S> | undefined;
  #closed = false;
  #gaveUp = false;

  constructor(options: DeferredStoreOptions<S>) {
    this.#options = options;
  }

  /** True once the store opened. */
  get opened(): boolean {
    return this.#store !== undefined;
  }

  /**
   * Opens the store if it is not open yet (joining an attempt under way),
   * then pings it. Rejects with the open's error while it cannot be opened.
   */
  async ping(): Promise<void> {
    const store = this.#store ?? (await this.#open());
    await store.ping();
  }

  async quickCheck(): Promise<void> {
    await this.#opened('check the store').quickCheck();
  }

  appendHooks(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
    options?: AppendHooksOptions,
  ): Promise<number> {
    return this.#call('append hooks', (s) =>
      s.appendHooks(operationId, parentOperationId, hooks, options),
    );
  }

  listHooks(operationId: string): Promise<OperationHooks> {
    return this.#call('list hooks', (s) => s.listHooks(operationId));
  }

  deleteHooks(operationId: string, plugin?: string): Promise<number> {
    return this.#call('delete hooks', (s) => s.deleteHooks(operationId, plugin));
  }

  lookupUserEmail(userId: string): Promise<string | null> {
    return this.#call('look up a user', (s) => s.lookupUserEmail(userId));
  }

  upsertUsers(users: readonly UserRecord[]): Promise<number> {
    return this.#call('import users', (s) => s.upsertUsers(users));
  }

  markOperationCompleted(operationId: string, at: number): Promise<void> {
    return this.#call('complete the operation', (s) => s.markOperationCompleted(operationId, at));
  }

  operationState(operationIds: readonly string[]): Promise<Map<string, OperationState>> {
    return this.#call('read operation states', (s) => s.operationState(operationIds));
  }

  parkCall(record: NewParkedCall): Promise<ParkOutcome> {
    return this.#call('park the call', (s) => s.parkCall(record));
  }

  getParkedCall(toolCallId: string): Promise<ParkedCallRecord | undefined> {
    return this.#call('read the parked call', (s) => s.getParkedCall(toolCallId));
  }

  listParkedCalls(operationId: string, limit: number): Promise<ParkedCallRecord[]> {
    return this.#call('list parked calls', (s) => s.listParkedCalls(operationId, limit));
  }

  publishResult(
    toolCallId: string,
    result: ToolResult,
    publishedAt: number,
  ): Promise<PublishOutcome> {
    return this.#call('publish the result', (s) =>
      s.publishResult(toolCallId, result, publishedAt),
    );
  }

  claimPublication(
    toolCallId: string,
    holder: string,
    leaseMs: number,
    replacing?: string,
  ): Promise<PublicationClaim | undefined> {
    return this.#call('claim the publication', (s) =>
      s.claimPublication(toolCallId, holder, leaseMs, replacing),
    );
  }

  renewPublication(toolCallId: string, holder: string, leaseMs: number): Promise<boolean> {
    return this.#call('renew the publication lease', (s) =>
      s.renewPublication(toolCallId, holder, leaseMs),
    );
  }

  releasePublication(toolCallId: string, holder: string): Promise<void> {
    return this.#call('release the publication lease', (s) =>
      s.releasePublication(toolCallId, holder),
    );
  }

  expireBefore(cutoff: number, batchSize: number, tombstoneCutoff?: number): Promise<ExpireResult> {
    return this.#call('expire operations', (s) =>
      s.expireBefore(cutoff, batchSize, tombstoneCutoff),
    );
  }

  appendDecisions(rows: readonly DecisionRow[]): Promise<void> {
    return this.#call('write decision audit entries', (s) => s.appendDecisions(rows));
  }

  listDecisions(query: DecisionQuery): Promise<DecisionRow[]> {
    return this.#call('list decision audit entries', (s) => s.listDecisions(query));
  }

  /** Closes the opened store, after an open under way settles; later calls fail `STORE_CLOSED`. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#opening?.catch(() => undefined);
    await this.#store?.close();
  }

  /** Runs `fn` on the opened store; rejects at once while it is not open. */
  async #call<T>(action: string, fn: (store: S) => Promise<T>): Promise<T> {
    return fn(this.#opened(action));
  }

  #opened(action: string): S {
    if (this.#closed) {
      throw new StoreUnavailableError('STORE_CLOSED', `cannot ${action}: the store is closed`);
    }
    if (this.#store === undefined) {
      throw new StoreUnavailableError(
        'STORE_UNAVAILABLE',
        `cannot ${action}: the PostgreSQL store is not open yet`,
      );
    }
    return this.#store;
  }

  /** One attempt to open the store at a time; gives up as the options say. */
  #open(): Promise<S> {
    if (this.#closed) {
      return Promise.reject(
        new StoreUnavailableError('STORE_CLOSED', 'cannot open the store: it is closed'),
      );
    }
    this.#opening ??= (async () => {
      try {
        const store = await this.#options.open();
        if (this.#closed) {
          await store.close();
          throw new StoreUnavailableError('STORE_CLOSED', 'cannot open the store: it is closed');
        }
        this.#store = store;
        this.#options.logger.info('the PostgreSQL store opened');
        return store;
      } catch (e: unknown) {
        const now = (this.#options.now ?? Date.now)();
        const late = this.#options.deadlineMs !== undefined && now >= this.#options.deadlineMs;
        if (!this.#closed && !this.#gaveUp && (late || !isRetryableOpenError(e))) {
          this.#gaveUp = true;
          this.#options.onGiveUp(e);
        }
        throw e;
      } finally {
        this.#opening = undefined;
      }
    })();
    return this.#opening;
  }
}
