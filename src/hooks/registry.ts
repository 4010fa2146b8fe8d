/**
 * @module The caller hooks of each operation: validated as a batch,
 * committed to the store before a registration answers, and read back
 * through a bounded cache. Store failures propagate; they are never read as
 * "no hooks".
 */
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import type { HookStore, OperationHooks } from '../store/store.js';
import { validateHooks, validateOperationId } from './validate.js';

/** Operations whose hooks are kept in memory; older entries are read again from the store. */
export const HOOK_CACHE_OPERATIONS = 10_000;

/** Registers, lists and drops caller hooks, with the store as the source of truth. */
export class HookRegistry {
  readonly #store: HookStore;
  readonly #cache = new Map<string, OperationHooks>();

  /** Creates a registry over a store. */
  constructor(store: HookStore) {
    this.#store = store;
  }

  /**
   * Validates the whole batch, then appends it after the operation's hooks,
   * committed before this resolves. Resolves to the operation's hook count.
   *
   * @throws InvalidArgumentError naming the first invalid field; nothing is stored then.
   * @throws StoreUnavailableError when the store cannot commit.
   */
  async register(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
  ): Promise<number> {
    validateOperationId(operationId);
    validateHooks(hooks);
    this.#cache.delete(operationId);
    try {
      return await this.#store.appendHooks(operationId, parentOperationId || undefined, hooks);
    } finally {
      this.#cache.delete(operationId);
    }
  }

  /** Returns the operation's hooks in registration order; empty for an unknown operation. */
  async hooksOf(operationId: string): Promise<OperationHooks> {
    const cached = this.#cache.get(operationId);
    if (cached !== undefined) {
      // Refresh recency so busy operations stay cached.
      this.#cache.delete(operationId);
      this.#cache.set(operationId, cached);
      return cached;
    }
    const loaded = await this.#store.listHooks(operationId);
    this.#cache.set(operationId, loaded);
    if (this.#cache.size > HOOK_CACHE_OPERATIONS) {
      const oldest = this.#cache.keys().next().value;
      if (oldest !== undefined) this.#cache.delete(oldest);
    }
    return loaded;
  }

  /** Forgets the cached hooks of an operation; with `purge`, deletes its stored hooks too. */
  async unregister(operationId: string, purge: boolean): Promise<number> {
    validateOperationId(operationId);
    this.#cache.delete(operationId);
    if (!purge) return 0;
    try {
      return await this.#store.deleteHooks(operationId);
    } finally {
      this.#cache.delete(operationId);
    }
  }
}
