/**
 * @module User email enrichment (upstream contract §5 steps 6–8): who is
 * looked up, and the per-dispatcher cache (shared pending lookups, TTL,
 * insertion-order eviction, cached misses and failures, cancelled waiters).
 */
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { type HookEvent, HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { type Webhook, WebhookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  EMAIL_CACHE_MAX_ENTRIES,
  EMAIL_CACHE_TTL_MS,
  EmailEnricher,
} from '../../src/delivery/email.js';
import { buildWebhookPayload } from '../../src/delivery/payload.js';
import { createLogger } from '../../src/log.js';
import type { UserDirectory } from '../../src/users/directory.js';

const HOOK_ID = 'audit';

/** A directory that records every query and answers from a map, or as a test decides. */
class FakeDirectory implements UserDirectory {
  readonly queries: string[] = [];
  readonly emails = new Map<string, string | null>();
  /** When set, queries wait for `release()`. */
  #gate: { promise: Promise<void>; release: () => void } | undefined;
  /** When set, every query rejects with it. */
  failure: Error | undefined;

  hold(): void {
    let release = () => {};
    const promise = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.#gate = { promise, release };
  }

  release(): void {
    this.#gate?.release();
    this.#gate = undefined;
  }

  async lookupEmail(userId: string): Promise<string | null> {
    this.queries.push(userId);
    await this.#gate?.promise;
    if (this.failure !== undefined) throw this.failure;
    return this.emails.get(userId) ?? null;
  }

  async close(): Promise<void> {}
}

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

/** An `onComplete` event of `userId`. */
function onComplete(userId = 'user_1'): HookEvent {
  return create(HookEventSchema, {
    event: {
      case: 'onComplete',
      value: { agentId: 'agt_1', operationId: 'op_1', userId, reason: 'done' },
    },
  });
}

function webhook(init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
  return create(WebhookSchema, { url: 'https://hooks.example/in', ...init });
}

function setup(options: { maxEntries?: number } = {}) {
  const directory = new FakeDirectory();
  directory.emails.set('user_1', 'ada@example.com');
  directory.emails.set('user_2', 'grace@example.com');
  const clock = manualClock();
  const lines: string[] = [];
  const enricher = new EmailEnricher({
    directory,
    now: clock.now,
    logger: createLogger({ write: (line) => lines.push(line) }),
    ...options,
  });
  return { directory, clock, enricher, lines };
}

/** Builds the payload of `event` for `hook` and enriches it. */
async function enrich(
  enricher: EmailEnricher,
  event: HookEvent,
  hook: Webhook | undefined = webhook(),
  signal?: AbortSignal,
): Promise<JsonObject | undefined> {
  return enricher.enrich(event, buildWebhookPayload(event, HOOK_ID, hook), hook, signal);
}

describe('EmailEnricher.enrich', () => {
  it('sets userEmail on a copy from the event user, leaving the built payload untouched', async () => {
    const { enricher, directory } = setup();
    const event = onComplete();
    const hook = webhook();
    const payload = buildWebhookPayload(event, HOOK_ID, hook);
    const enriched = await enricher.enrich(event, payload, hook);
    expect(enriched).toEqual({ ...payload, userEmail: 'ada@example.com' });
    expect(payload).not.toHaveProperty('userEmail');
    expect(directory.queries).toEqual(['user_1']);
  });

  it('makes one directory query for 100 concurrent events of one user', async () => {
    const { enricher, directory } = setup();
    directory.hold();
    const pending = Array.from({ length: 100 }, () => enrich(enricher, onComplete()));
    directory.release();
    const results = await Promise.all(pending);
    expect(directory.queries).toEqual(['user_1']);
    for (const result of results) expect(result?.userEmail).toBe('ada@example.com');
  });

  it('serves a cached hit until the TTL ends, then queries again', async () => {
    const { enricher, directory, clock } = setup();
    await enrich(enricher, onComplete());
    clock.advance(EMAIL_CACHE_TTL_MS - 1);
    await enrich(enricher, onComplete());
    expect(directory.queries).toEqual(['user_1']);
    directory.emails.set('user_1', 'ada@new.example.com');
    clock.advance(1);
    expect((await enrich(enricher, onComplete()))?.userEmail).toBe('ada@new.example.com');
    expect(directory.queries).toEqual(['user_1', 'user_1']);
  });

  it('evicts the oldest inserted user when the 1,001st arrives; a hit does not refresh it', async () => {
    const { enricher, directory } = setup();
    expect(EMAIL_CACHE_MAX_ENTRIES).toBe(1_000);
    for (let i = 0; i < 1_000; i++) await enricher.lookupEmail(`u${i}`);
    expect(enricher.size).toBe(1_000);
    // A hit on the oldest entry does not move it.
    await enricher.lookupEmail('u0');
    expect(directory.queries).toHaveLength(1_000);
    await enricher.lookupEmail('u1000');
    expect(enricher.size).toBe(1_000);
    expect(directory.queries).toHaveLength(1_001);
    // u1 is still cached; u0 was evicted and is queried again.
    await enricher.lookupEmail('u1');
    expect(directory.queries).toHaveLength(1_001);
    await enricher.lookupEmail('u0');
    expect(directory.queries.at(-1)).toBe('u0');
    expect(directory.queries).toHaveLength(1_002);
  });

  it('caches a miss and omits the field', async () => {
    const { enricher, directory } = setup();
    const event = onComplete('nobody');
    const hook = webhook();
    const payload = buildWebhookPayload(event, HOOK_ID, hook);
    expect(await enricher.enrich(event, payload, hook)).toBe(payload);
    expect(await enricher.enrich(event, payload, hook)).not.toHaveProperty('userEmail');
    expect(directory.queries).toEqual(['nobody']);
  });

  it('caches a failure, omits the field and logs it without any email', async () => {
    const { enricher, directory, lines } = setup();
    directory.failure = Object.assign(new Error('secret ada@example.com leaked'), {
      code: 'ECONNREFUSED',
    });
    const first = await enrich(enricher, onComplete());
    const second = await enrich(enricher, onComplete());
    expect(first).not.toHaveProperty('userEmail');
    expect(second).not.toHaveProperty('userEmail');
    expect(directory.queries).toEqual(['user_1']);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'failed to resolve webhook user email',
        userId: 'user_1',
        reason: 'ECONNREFUSED',
      }),
    ]);
    expect(lines.join('')).not.toContain('@example.com');
  });

  it('treats a directory that throws synchronously as a cached failure', async () => {
    const directory: UserDirectory = {
      lookupEmail: () => {
        throw new Error('boom');
      },
      close: async () => undefined,
    };
    const enricher = new EmailEnricher({ directory });
    expect(await enrich(enricher, onComplete())).not.toHaveProperty('userEmail');
  });

  it('returns undefined to a cancelled waiter while the others still get the email', async () => {
    const { enricher, directory } = setup();
    directory.hold();
    const controller = new AbortController();
    const cancelled = enrich(enricher, onComplete(), webhook(), controller.signal);
    const others = [enrich(enricher, onComplete()), enrich(enricher, onComplete())];
    controller.abort();
    expect(await cancelled).toBeUndefined();
    directory.release();
    for (const result of await Promise.all(others)) {
      expect(result?.userEmail).toBe('ada@example.com');
    }
    expect(directory.queries).toEqual(['user_1']);
  });

  it('returns undefined for a signal aborted before the call, without a query', async () => {
    const { enricher, directory } = setup();
    expect(await enrich(enricher, onComplete(), webhook(), AbortSignal.abort())).toBeUndefined();
    expect(directory.queries).toEqual([]);
  });

  it('makes no lookup when eventFields does not list userEmail', async () => {
    const { enricher, directory } = setup();
    const result = await enrich(
      enricher,
      onComplete(),
      webhook({ eventFields: { names: ['userId'] } }),
    );
    expect(result).toEqual({ userId: 'user_1', hookId: HOOK_ID, hookType: 'onComplete' });
    expect(directory.queries).toEqual([]);
  });

  it('looks up when eventFields lists userEmail, even without userId', async () => {
    const { enricher, directory } = setup();
    const result = await enrich(
      enricher,
      onComplete(),
      webhook({ eventFields: { names: ['reason', 'userEmail'] } }),
    );
    expect(result).toEqual({
      reason: 'done',
      hookId: HOOK_ID,
      hookType: 'onComplete',
      userEmail: 'ada@example.com',
    });
    expect(directory.queries).toEqual(['user_1']);
  });

  it("looks up the body's userId override instead of the event's", async () => {
    const { enricher, directory } = setup();
    const result = await enrich(enricher, onComplete(), webhook({ body: { userId: 'user_2' } }));
    expect(result).toMatchObject({ userId: 'user_2', userEmail: 'grace@example.com' });
    expect(directory.queries).toEqual(['user_2']);
  });

  it.each([
    ['null', null],
    ['empty', ''],
    ['a number', 42],
  ])('makes no lookup and no fallback for an explicit %s body userId', async (_name, userId) => {
    const { enricher, directory } = setup();
    const result = await enrich(enricher, onComplete(), webhook({ body: { userId } }));
    expect(result).not.toHaveProperty('userEmail');
    expect(result).toMatchObject({ userId });
    expect(directory.queries).toEqual([]);
  });

  it('enriches a control payload (no webhook projection) from the event user', async () => {
    const { enricher } = setup();
    const event = onComplete();
    const payload = buildWebhookPayload(event, HOOK_ID, undefined, { control: true });
    expect(await enricher.enrich(event, payload, undefined)).toMatchObject({
      userEmail: 'ada@example.com',
    });
  });

  it('refuses a cache size that is not a positive integer', () => {
    expect(() => new EmailEnricher({ directory: new FakeDirectory(), maxEntries: 0 })).toThrow(
      RangeError,
    );
  });
});
