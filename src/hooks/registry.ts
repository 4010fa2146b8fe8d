/**
 * @module The caller hooks of each operation: validated as a batch against
 * the reference rules and the operator's policy, bounded per operation,
 * committed to the store before a registration answers, and read back
 * through a bounded cache. Store failures propagate; they are never read as
 * "no hooks".
 *
 * Hooks read back from the store are checked again against the schema rules
 * (`validateStoredHook`) as they enter the cache, once per load, so a
 * decision on a cached operation pays one map lookup. A row that an older
 * version wrote under looser rules, or that was changed on disk, makes every
 * call that would run the operation's hooks fail with `STORED_HOOK_INVALID`
 * (the upstream contract §1.7: restored hooks are re-validated, and a corrupt
 * one makes dispatch reject rather than being dropped). `ListHooks` still
 * lists them, and `UnregisterHooks` with `purge` removes them.
 */
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import { type HookStore, type OperationHooks, tooManyHooksError } from '../store/store.js';
import { LINEAR_REGEXP_LIMITS } from './linear-regexp.js';
import {
  MATCHER_BASE_COST,
  MATCHER_BUDGET_PER_OPERATION,
  MATCHER_REASON,
  matcherCost,
} from './matcher.js';
import {
  checkIdentifier,
  isReservedHookId,
  MAX_OPERATION_ID_BYTES,
  REASON,
  type ValidationOptions,
  validateHook,
  validateOperationId,
  validateStoredHook,
} from './validate.js';

/**
 * Default of `--hook-cache-size`: the estimated heap bytes of the hooks kept
 * in memory (8 MiB, about 4,000 operations of five webhooks each); the least
 * recently used operations beyond it are read again from the store.
 */
export const DEFAULT_HOOK_CACHE_BYTES = 8 * 1024 * 1024;

/**
 * Heap bytes of a cached hook beyond what {@link contentBytes} counts, and of
 * a cached operation beyond its hooks. Measured on Node 20: 10,000
 * operations of five plain webhooks (about 265 counted bytes each) held
 * 2,040 bytes of heap apiece.
 */
const HOOK_OVERHEAD_BYTES = 120;
const OPERATION_OVERHEAD_BYTES = 120;
/** Stale placements the eviction order may hold beyond twice the cached entries. */
const ORDER_SLACK = 1024;
/** Nesting past which {@link contentBytes} stops counting (hooks nest far less). */
const MAX_COUNTED_DEPTH = 16;

/** Default of `--max-hooks-per-operation`. */
export const DEFAULT_MAX_HOOKS_PER_OPERATION = 1_000;

/**
 * Most stored hook configuration per operation, in bytes: the serialized
 * JSON of its hooks, existing and new together (1 MiB, documented in the proto).
 */
export const MAX_OPERATION_CONFIG_BYTES = 1_048_576;

/**
 * The hooks of a registration batch that are registered: those without an
 * environment hook's id, each validated at its index in the request (so an
 * error's field names the hook the caller sent). The contract's `register()`
 * strips reserved ids before validating: a caller cannot use or replace an
 * environment hook, and a batch that holds a copy of one (as a list saved
 * with the environment hooks in it) registers the rest.
 *
 * @throws InvalidArgumentError naming the first invalid field of a kept hook.
 */
function withoutReservedIds(hooks: readonly Hook[], options: ValidationOptions): Hook[] {
  const kept: Hook[] = [];
  for (const [i, hook] of hooks.entries()) {
    if (isReservedHookId(hook.id)) continue;
    validateHook(hook, `hooks[${i}]`, options);
    kept.push(hook);
  }
  return kept;
}

/**
 * Reason of a call that would run an operation's hooks while one of its
 * stored hooks breaks a registration rule; see {@link storedHookInvalidError}.
 */
export const STORED_HOOK_INVALID = 'STORED_HOOK_INVALID';

/**
 * Checks one hook read back from the store; throws an InvalidArgumentError
 * naming the field under `path` and the rule's reason.
 */
export type StoredHookCheck = (hook: Hook, path: string) => void;

/** Options of a {@link HookRegistry}: the operator's policy for caller hooks. */
export interface RegistryOptions extends ValidationOptions {
  /** Most hooks one operation may have, existing and new together. Default 1,000. */
  readonly maxHooksPerOperation?: number;
  /**
   * Checks each hook as it is read back from the store into the cache.
   * Default {@link validateStoredHook}; a test passes a wrapper to count calls.
   */
  readonly checkStoredHook?: StoredHookCheck;
  /**
   * Estimated heap bytes the cached hooks may hold (see
   * {@link estimateCachedBytes}). Default {@link DEFAULT_HOOK_CACHE_BYTES}.
   */
  readonly cacheBytes?: number;
  /**
   * Whether an operation's hooks are kept in memory between calls. Default
   * true, which is fresh only while this registry is the store's one writer
   * (an embedded SQLite file). Over a store that other processes write (the
   * shared PostgreSQL store), pass false: every read goes to the store, so a
   * decision sees every registration committed before it began, on any pod.
   */
  readonly cache?: boolean;
}

/**
 * An operation's hooks as the cache keeps them: as stored, and the error of
 * the first one that breaks a registration rule, decided once at load.
 */
interface CachedOperation {
  readonly stored: OperationHooks;
  readonly invalid: AgentHooksError | undefined;
  /** The cache's insertion count when this entry last moved to the young end. */
  placed: number;
  /** Its estimated heap bytes ({@link estimateCachedBytes}). */
  readonly bytes: number;
}

/**
 * Estimates the heap bytes an operation's hooks take once decoded: the
 * characters of their strings, the bytes of their byte fields and 8 per
 * field, list item and number, plus a fixed cost per hook and per
 * operation. An estimate, not a measurement: it bounds the cache by what its
 * entries hold rather than by how many there are, for about half a
 * microsecond per hook (encoding a hook to measure it took 13).
 *
 * @example
 * estimateCachedBytes(stored.hooks); // about 2,000 for five plain webhooks
 */
export function estimateCachedBytes(hooks: readonly Hook[]): number {
  let bytes = OPERATION_OVERHEAD_BYTES;
  for (const hook of hooks) bytes += HOOK_OVERHEAD_BYTES + contentBytes(hook, 0);
  return bytes;
}

/** Counts the content of a decoded message: see {@link estimateCachedBytes}. */
function contentBytes(value: unknown, depth: number): number {
  if (typeof value === 'string') return value.length;
  if (typeof value !== 'object' || value === null) return 8;
  if (value instanceof Uint8Array) return value.byteLength;
  if (depth > MAX_COUNTED_DEPTH) return 0;
  let bytes = 0;
  if (Array.isArray(value)) {
    for (const item of value) bytes += 8 + contentBytes(item, depth + 1);
    return bytes;
  }
  for (const key in value) {
    bytes += 8 + contentBytes((value as Record<string, unknown>)[key], depth + 1);
  }
  return bytes;
}

/** Registers, lists and drops caller hooks, with the store as the source of truth. */
export class HookRegistry {
  readonly #store: HookStore;
  readonly #cache = new Map<string, CachedOperation>();
  /** Estimated bytes of the cached entries together. */
  #cachedBytes = 0;
  readonly #cacheBudget: number;
  /** Entries placed at the cache's young end so far: the age clock of `placed`. */
  #placements = 0;
  /**
   * Every placement in order (operation id and its `placed` stamp), oldest
   * from `#orderHead` on; a stamp that no longer matches its entry is stale.
   * Eviction reads it instead of the Map's first key: a Map whose oldest
   * entries were deleted keeps their slots until it is rebuilt, and finding
   * its first key scans them all (27% of a cache miss's CPU, profiled).
   */
  #orderIds: string[] = [];
  #orderStamps: number[] = [];
  #orderHead = 0;
  readonly #validation: ValidationOptions;
  readonly #maxHooks: number;
  readonly #checkStored: StoredHookCheck;
  readonly #caching: boolean;
  /**
   * The store's {@link HookStore.cacheGeneration} the cached entries were
   * read at: when it moves (the store reopened its file, a restored backup
   * perhaps), every entry is dropped.
   */
  #generation = 0;
  /** The registration in progress per operation, so that count checks and appends do not interleave. */
  readonly #registering = new Map<string, Promise<unknown>>();

  /**
   * Creates a registry over a store. Without options it is strict: no
   * variable may be named in `allowedEnvVars`, and the default limits apply.
   */
  constructor(store: HookStore, options: RegistryOptions = {}) {
    this.#store = store;
    const { maxHooksPerOperation, checkStoredHook, cache, cacheBytes, ...validation } = options;
    this.#caching = cache ?? true;
    this.#cacheBudget = cacheBytes ?? DEFAULT_HOOK_CACHE_BYTES;
    this.#checkStored = checkStoredHook ?? validateStoredHook;
    this.#validation = extend(validation, {
      callerEnvAllowlist: validation.callerEnvAllowlist ?? new Set(),
      // Without a declaration, no signing secret may be named.
      signingEnv: validation.signingEnv ?? noSigningSecrets,
    });
    this.#maxHooks = maxHooksPerOperation ?? DEFAULT_MAX_HOOKS_PER_OPERATION;
  }

  /**
   * Drops the hooks of the batch that carry an environment hook's id
   * (`server-env-webhook:`, see {@link withoutReservedIds}), validates the
   * rest of the batch, then appends it after the operation's hooks,
   * committed before this resolves. Resolves to the operation's hook count.
   * Registrations of one operation run one after another on this sidecar,
   * and the store checks the hook limit again under the operation's lock,
   * so the limit holds for concurrent calls on every process sharing it.
   *
   * @throws InvalidArgumentError naming the first invalid field, or
   *   `TOO_MANY_HOOKS` or `HOOK_CONFIG_TOO_LARGE` when the operation would
   *   exceed a limit; nothing is stored then.
   * @throws StoreUnavailableError when the store cannot commit.
   */
  async register(
    operationId: string,
    parentOperationId: string | undefined,
    requested: readonly Hook[],
  ): Promise<number> {
    validateOperationId(operationId);
    checkIdentifier(
      parentOperationId ?? '',
      'parentOperationId',
      REASON.OPERATION_ID_TOO_LONG,
      MAX_OPERATION_ID_BYTES,
      'An operation id',
    );
    const hooks = withoutReservedIds(requested, this.#validation);
    if (hooks.length > this.#maxHooks) throw this.#tooMany(0, hooks.length);
    const previous = this.#registering.get(operationId) ?? Promise.resolve();
    const run = previous.then(
      () => this.#append(operationId, parentOperationId, hooks),
      () => this.#append(operationId, parentOperationId, hooks),
    );
    this.#registering.set(operationId, run);
    try {
      return await run;
    } finally {
      if (this.#registering.get(operationId) === run) this.#registering.delete(operationId);
    }
  }

  /** Checks the operation's hook count, then appends; the caller serialises per operation. */
  async #append(
    operationId: string,
    parentOperationId: string | undefined,
    hooks: readonly Hook[],
  ): Promise<number> {
    this.#forget(operationId);
    const stored = (await this.#store.listHooks(operationId)).hooks;
    const existing = stored.length;
    if (existing + hooks.length > this.#maxHooks) throw this.#tooMany(existing, hooks.length);
    checkMatcherBudget(stored, hooks);
    try {
      // The store checks both limits again under the operation's lock: another
      // process may have appended since the read above.
      return await this.#store.appendHooks(operationId, parentOperationId || undefined, hooks, {
        maxConfigBytes: MAX_OPERATION_CONFIG_BYTES,
        maxHooks: this.#maxHooks,
        // Only a batch that adds a matcher can pass the budget.
        checkMatchers: hooks.some((h) => h.matcher !== undefined)
          ? (storedMatchers) => checkMatcherCosts(storedMatchers, hooks)
          : undefined,
      });
    } finally {
      this.#forget(operationId);
    }
  }

  #tooMany(existing: number, adding: number): InvalidArgumentError {
    return tooManyHooksError(this.#maxHooks, existing, adding);
  }

  /**
   * Returns the operation's hooks in registration order, to run them; empty
   * for an unknown operation.
   *
   * @throws AgentHooksError `STORED_HOOK_INVALID` when a stored hook of the
   *   operation breaks a registration rule: none of its hooks may run.
   * @throws AgentHooksError a store error, `OPERATION_EXPIRED` or `STORED_HOOK_CORRUPT`.
   */
  async hooksOf(operationId: string): Promise<OperationHooks> {
    const { stored, invalid } = this.#cached(operationId) ?? (await this.#load(operationId));
    if (invalid !== undefined) throw invalid;
    return stored;
  }

  /**
   * The operation's hooks when they are cached and valid, without waiting;
   * `undefined` when only {@link HookRegistry.hooksOf} can answer (the store
   * must be read, or it would throw).
   */
  cachedHooksOf(operationId: string): OperationHooks | undefined {
    let cached: CachedOperation | undefined;
    try {
      cached = this.#cached(operationId);
    } catch {
      return undefined; // the store cannot serve reads: hooksOf answers its error
    }
    return cached?.invalid === undefined ? cached?.stored : undefined;
  }

  /**
   * Returns the operation's hooks as stored, to list them, whether or not
   * they follow the registration rules (so that an operator can see a hook
   * that fails {@link HookRegistry.hooksOf}, and unregister it).
   *
   * @throws AgentHooksError a store error, `OPERATION_EXPIRED` or `STORED_HOOK_CORRUPT`.
   */
  async storedHooksOf(operationId: string): Promise<OperationHooks> {
    return (this.#cached(operationId) ?? (await this.#load(operationId))).stored;
  }

  /**
   * The operation's cached entry, if any. Nothing is answered from the cache
   * while the store cannot serve reads (this throws the store's error), nor
   * after it reopened its file: the rows there may differ.
   */
  #cached(operationId: string): CachedOperation | undefined {
    if (this.#cache.size === 0) return undefined;
    const generation = this.#store.cacheGeneration?.() ?? 0;
    if (generation !== this.#generation) {
      this.#dropAll();
      this.#generation = generation;
      return undefined;
    }
    const cached = this.#cache.get(operationId);
    // Refresh recency so busy operations stay cached, but only once an entry
    // has drifted into the older half: moving it on every hit would give the
    // Map a deleted slot per decision, and V8 then rebuilds the table and
    // promotes the garbage chain of its obsolete copies.
    if (cached !== undefined && this.#placements - cached.placed > this.#cache.size / 2) {
      this.#cache.delete(operationId);
      this.#place(operationId, cached);
    }
    return cached;
  }

  #place(operationId: string, entry: CachedOperation): void {
    entry.placed = ++this.#placements;
    this.#cache.set(operationId, entry);
    this.#orderIds.push(operationId);
    this.#orderStamps.push(entry.placed);
    // The whole arrays count: eviction only moves the head, and the slots it
    // passed would otherwise pile up (one per miss, with its id) for good.
    if (this.#orderIds.length > 2 * this.#cache.size + ORDER_SLACK) this.#compactOrder();
  }

  /** Rebuilds the placement order from the Map, which iterates in placement order. */
  #compactOrder(): void {
    this.#orderIds = [];
    this.#orderStamps = [];
    this.#orderHead = 0;
    for (const [id, entry] of this.#cache) {
      this.#orderIds.push(id);
      this.#orderStamps.push(entry.placed);
    }
  }

  /** Forgets the least recently placed entry; false when none is left. */
  #evictOldest(): boolean {
    while (this.#orderHead < this.#orderIds.length) {
      const id = this.#orderIds[this.#orderHead] as string;
      const stamp = this.#orderStamps[this.#orderHead] as number;
      this.#orderHead += 1;
      if (this.#cache.get(id)?.placed === stamp) {
        this.#forget(id);
        return true;
      }
    }
    return false;
  }

  /** Reads the operation from the store, checks each hook once, and caches the verdict (when caching). */
  async #load(operationId: string): Promise<CachedOperation> {
    const generation = this.#caching ? (this.#store.cacheGeneration?.() ?? 0) : 0;
    const stored = await this.#store.listHooks(operationId);
    let invalid: AgentHooksError | undefined;
    for (const [i, hook] of stored.hooks.entries()) {
      try {
        this.#checkStored(hook, `hooks[${i}]`);
      } catch (e: unknown) {
        if (!(e instanceof InvalidArgumentError)) throw e;
        invalid = storedHookInvalidError(operationId, hook.id, e);
        break;
      }
    }
    // Uncached, each call reads and checks the rows again: nothing here can go stale.
    if (!this.#caching) return { stored, invalid, placed: 0, bytes: 0 };
    // Read from a file the store has since reopened: answered, not kept.
    if (generation !== (this.#store.cacheGeneration?.() ?? 0)) {
      return { stored, invalid, placed: 0, bytes: 0 };
    }
    if (generation !== this.#generation) {
      this.#dropAll();
      this.#generation = generation;
    }
    const entry: CachedOperation = {
      stored,
      invalid,
      placed: 0,
      bytes: estimateCachedBytes(stored.hooks),
    };
    // A load that raced a registration of the same operation replaces its entry.
    this.#forget(operationId);
    this.#place(operationId, entry);
    this.#cachedBytes += entry.bytes;
    // The least recently placed go first; the entry just loaded always stays.
    while (this.#cachedBytes > this.#cacheBudget && this.#cache.size > 1) {
      if (!this.#evictOldest()) break;
    }
    return entry;
  }

  /** Drops every entry. */
  #dropAll(): void {
    this.#cache.clear();
    this.#cachedBytes = 0;
    this.#orderIds = [];
    this.#orderStamps = [];
    this.#orderHead = 0;
  }

  /** Drops one operation's entry, if cached, and its bytes. */
  #forget(operationId: string): void {
    const entry = this.#cache.get(operationId);
    if (entry === undefined) return;
    this.#cache.delete(operationId);
    this.#cachedBytes -= entry.bytes;
  }

  /** Estimated heap bytes of the hooks cached now. */
  get cachedBytes(): number {
    return this.#cachedBytes;
  }

  /** Placements the eviction order holds, stale ones included: at most about twice the entries. */
  get placementsHeld(): number {
    return this.#orderIds.length;
  }

  /** Forgets the cached hooks of operations (after they expired). */
  forget(operationIds: readonly string[]): void {
    for (const id of operationIds) this.#forget(id);
  }

  /** Forgets the cached hooks of an operation; with `purge`, deletes its stored hooks too. */
  async unregister(operationId: string, purge: boolean, plugin?: string): Promise<number> {
    validateOperationId(operationId);
    this.#forget(operationId);
    if (!purge) return 0;
    try {
      return await this.#store.deleteHooks(operationId, plugin);
    } finally {
      this.#forget(operationId);
    }
  }
}

/** The environment of a registry given no `signingEnv`: it declares no signing secret. */
function noSigningSecrets(): Readonly<Record<string, string | undefined>> {
  return NO_ENV;
}

const NO_ENV: Readonly<Record<string, string | undefined>> = Object.freeze({});

/**
 * Returns the error of a call that would run an operation's hooks while one
 * of its stored hooks breaks a registration rule: `failed_precondition`,
 * {@link STORED_HOOK_INVALID}, naming the operation, the hook and the rule
 * (the rule's reason, field and message), with the rule's error as `cause`.
 *
 * @example
 * throw storedHookInvalidError('op-1', 'guard', ruleError); // ruleError: hooks[0].webhook.eventFields
 */
export function storedHookInvalidError(
  operationId: string,
  hookId: string,
  rule: InvalidArgumentError,
): AgentHooksError {
  return new AgentHooksError(
    'failed_precondition',
    STORED_HOOK_INVALID,
    `stored hook ${JSON.stringify(hookId)} of operation ${JSON.stringify(operationId)} breaks the registration rule ${rule.reason} at ${rule.field}: ${rule.message}; none of the operation's hooks run until UnregisterHooks with purge removes them (register them again after)`,
    {
      cause: rule,
      metadata: { operationId, hookId, rule: rule.reason, field: rule.field },
    },
  );
}

/**
 * Refuses a registration whose matchers, with the operation's stored ones,
 * would cost one decision more than {@link MATCHER_BUDGET_PER_OPERATION}
 * (each distinct matcher counted once).
 *
 * @param field The list the error names (`hooks`, or `plugins` for the operator's file).
 * @throws InvalidArgumentError `MATCHER_BUDGET_EXCEEDED`.
 * @example
 * checkMatcherBudget(stored.hooks, request.hooks);
 */
export function checkMatcherBudget(
  stored: readonly Hook[],
  adding: readonly Hook[],
  field = 'hooks',
): void {
  const storedMatchers: string[] = [];
  for (const hook of stored) if (hook.matcher !== undefined) storedMatchers.push(hook.matcher);
  checkMatcherCosts(storedMatchers, adding, field);
}

/**
 * {@link checkMatcherBudget} on the stored hooks' matchers alone, as the
 * store reads them under the operation's lock.
 *
 * @throws InvalidArgumentError `MATCHER_BUDGET_EXCEEDED`.
 */
export function checkMatcherCosts(
  storedMatchers: readonly string[],
  adding: readonly Hook[],
  field = 'hooks',
): void {
  const costs = new Map<string, number>();
  const matchers = [...storedMatchers];
  for (const hook of adding) if (hook.matcher !== undefined) matchers.push(hook.matcher);
  for (const matcher of matchers) {
    if (costs.has(matcher)) continue;
    let cost: number;
    try {
      cost = matcherCost(matcher);
    } catch {
      // A stored matcher that newer limits refuse fails its operation's calls
      // (STORED_HOOK_INVALID) until purged; count it at the most a matcher may cost.
      cost = LINEAR_REGEXP_LIMITS.maxProgramSize + MATCHER_BASE_COST;
    }
    costs.set(matcher, cost);
  }
  let total = 0;
  for (const cost of costs.values()) total += cost;
  if (total > MATCHER_BUDGET_PER_OPERATION) {
    throw new InvalidArgumentError(
      field,
      MATCHER_REASON.MATCHER_BUDGET_EXCEEDED,
      `The matchers of an operation may cost at most ${MATCHER_BUDGET_PER_OPERATION} units together (each distinct matcher: its instructions plus ${MATCHER_BASE_COST}); this request would make ${total}`,
    );
  }
}
