/**
 * @module User email enrichment of webhook payloads (upstream contract §5
 * steps 6–8): `userEmail` is looked up in a {@link UserDirectory} for the
 * user that {@link emailLookupUserId} names, through one cache per
 * dispatcher.
 *
 * The cache holds at most {@link EMAIL_CACHE_MAX_ENTRIES} users for
 * {@link EMAIL_CACHE_TTL_MS} from insertion. It keeps the pending lookup, so
 * concurrent payloads of one user share one directory query; misses and
 * failures are cached like hits (the field is omitted and delivery goes on);
 * when full, the oldest *inserted* entry is evicted first (a hit does not
 * refresh it). A waiter that is cancelled gets `undefined` and sends nothing;
 * the shared lookup goes on for the other waiters.
 */
import type { JsonObject } from '@bufbuild/protobuf';
import type { HookEvent } from '../../gen/agenthooks/v1/events_pb.js';
import type { Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError } from '../errors.js';
import { extend } from '../extend.js';
import { type Logger, silentLogger } from '../log.js';
import type { UserDirectory } from '../users/directory.js';
import { emailLookupUserId } from './payload.js';

/** Most users the cache holds (upstream: 1,000). */
export const EMAIL_CACHE_MAX_ENTRIES = 1_000;

/** How long a cached lookup, hit, miss or failure, is used, in milliseconds (upstream: 5 minutes). */
export const EMAIL_CACHE_TTL_MS = 5 * 60 * 1_000;

/** Payload key that carries the looked-up address. */
const USER_EMAIL_KEY = 'userEmail';

/** Log message of a failed lookup (upstream: `Failed to resolve webhook user email`). */
const LOOKUP_FAILED_MESSAGE = 'failed to resolve webhook user email';

/** Options of an {@link EmailEnricher}. */
export interface EmailEnricherOptions {
  /** Where emails are looked up. The enricher never closes it. */
  readonly directory: UserDirectory;
  /** Where failed lookups are logged (never with an email address). Default: silent. */
  readonly logger?: Logger | undefined;
  /** Clock of the cache, in milliseconds. Default `Date.now`; tests inject their own. */
  readonly now?: (() => number) | undefined;
  /** Most users cached. Default {@link EMAIL_CACHE_MAX_ENTRIES}. */
  readonly maxEntries?: number | undefined;
  /** How long a lookup is cached, in milliseconds. Default {@link EMAIL_CACHE_TTL_MS}. */
  readonly ttlMs?: number | undefined;
}

/** One cached lookup: the shared promise, its value once settled, and when it stops being used. */
interface CacheEntry {
  /** Resolves to the email or null (miss or failure); never rejects. */
  readonly email: Promise<string | null>;
  /** The email or null once `email` settled; `undefined` while it is pending. */
  value: string | null | undefined;
  readonly expiresAt: number;
}

/**
 * Adds `userEmail` to webhook payloads. Create one per dispatcher and share it
 * by every notification and control it sends.
 *
 * @example
 * const enricher = new EmailEnricher({ directory, logger });
 * const payload = await enricher.enrich(event, buildWebhookPayload(event, hook.id, hook.webhook), hook.webhook, signal);
 * if (payload === undefined) return cancelled; // the signal aborted: send nothing
 */
export class EmailEnricher {
  readonly #directory: UserDirectory;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  /** Insertion-ordered: the first key is the oldest inserted entry. */
  readonly #cache = new Map<string, CacheEntry>();

  /**
   * Creates an enricher with an empty cache.
   *
   * @throws RangeError when `maxEntries` is not a positive integer or `ttlMs` is negative.
   */
  constructor(options: EmailEnricherOptions) {
    this.#directory = options.directory;
    this.#logger = options.logger ?? silentLogger;
    this.#now = options.now ?? Date.now;
    this.#maxEntries = options.maxEntries ?? EMAIL_CACHE_MAX_ENTRIES;
    this.#ttlMs = options.ttlMs ?? EMAIL_CACHE_TTL_MS;
    if (!Number.isSafeInteger(this.#maxEntries) || this.#maxEntries < 1) {
      throw new RangeError(`maxEntries must be a positive integer, got ${this.#maxEntries}`);
    }
    if (!Number.isFinite(this.#ttlMs) || this.#ttlMs < 0) {
      throw new RangeError(`ttlMs must be a non-negative number, got ${this.#ttlMs}`);
    }
  }

  /** How many users the cache holds now, pending lookups included. */
  get size(): number {
    return this.#cache.size;
  }

  /**
   * Enriches a built payload: when {@link emailLookupUserId} names a user
   * (no `eventFields` or one listing `userEmail`; `payload.userId` when the
   * key exists, else the event's; an invalid explicit id means no lookup)
   * and the directory has an email for it, returns a copy with `userEmail`
   * set. Otherwise returns `payload` itself, unchanged: no lookup, a miss or
   * a failed lookup (logged) all omit the field.
   *
   * Returns `undefined` when `signal` is aborted before or while waiting: the
   * caller then sends nothing (a control reports `cancelled`). Other waiters
   * of the same lookup are unaffected. Never rejects.
   *
   * @param event The event the payload was built from.
   * @param payload What `buildWebhookPayload` returned; never modified.
   * @param webhook The hook's webhook; a control passes `undefined`.
   * @param signal Cancels this waiter only.
   */
  async enrich(
    event: HookEvent,
    payload: JsonObject,
    webhook: Webhook | undefined,
    signal?: AbortSignal,
  ): Promise<JsonObject | undefined> {
    if (signal?.aborted === true) return undefined;
    const userId = emailLookupUserId(event, payload, webhook);
    if (userId === undefined) return payload;
    // A settled lookup is read as is: no promise or listener per payload.
    const settled = this.#entry(userId).value;
    const email = settled !== undefined ? settled : await this.lookupEmail(userId, signal);
    if (email === undefined) return undefined;
    if (email === null) return payload;
    return extend(payload, { [USER_EMAIL_KEY]: email });
  }

  /**
   * The user's email through the cache: a string, `null` for a miss or a
   * failure, or `undefined` when `signal` aborted before or while waiting
   * (the shared lookup goes on). Never rejects.
   */
  async lookupEmail(userId: string, signal?: AbortSignal): Promise<string | null | undefined> {
    if (signal?.aborted === true) return undefined;
    const entry = this.#entry(userId);
    if (entry.value !== undefined) return entry.value;
    const { email } = entry;
    if (signal === undefined) return email;
    return new Promise<string | null | undefined>((resolve) => {
      const onAbort = () => resolve(undefined);
      signal.addEventListener('abort', onAbort, { once: true });
      void email.then((value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      });
    });
  }

  /** The cached lookup of `userId`, started and inserted when absent or expired. */
  #entry(userId: string): CacheEntry {
    const now = this.#now();
    const entry = this.#cache.get(userId);
    if (entry !== undefined && now < entry.expiresAt) return entry;
    // An expired entry is re-inserted, so it becomes the newest.
    if (entry !== undefined) this.#cache.delete(userId);
    while (this.#cache.size >= this.#maxEntries) {
      const oldest = this.#cache.keys().next();
      if (oldest.done === true) break;
      this.#cache.delete(oldest.value);
    }
    const created: CacheEntry = {
      email: this.#query(userId).then((email) => {
        created.value = email;
        return email;
      }),
      value: undefined,
      expiresAt: now + this.#ttlMs,
    };
    this.#cache.set(userId, created);
    return created;
  }

  /** One directory query; a failure is logged and resolves to null. */
  #query(userId: string): Promise<string | null> {
    let pending: Promise<string | null>;
    try {
      pending = this.#directory.lookupEmail(userId);
    } catch (e: unknown) {
      pending = Promise.reject(e);
    }
    return pending.then(
      (email) => (typeof email === 'string' && email !== '' ? email : null),
      (e: unknown) => {
        // The error's reason or code only: a driver message could quote data.
        this.#logger.warn(LOOKUP_FAILED_MESSAGE, { userId, reason: failureReason(e) });
        return null;
      },
    );
  }
}

/** A stable word for a lookup failure: the domain reason, else the error code or name. */
function failureReason(e: unknown): string | undefined {
  if (e instanceof AgentHooksError) return e.reason;
  if (!(e instanceof Error)) return undefined;
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' ? code : e.name;
}
