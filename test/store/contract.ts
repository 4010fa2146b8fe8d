/**
 * @module The behaviour every store backend shares, as one vitest suite over
 * the store interfaces; `sqlite-contract.test.ts` and
 * `postgres-contract.test.ts` run it on a fresh database per test. Backend
 * specifics (files, locks, servers) stay in each backend's own tests.
 */
import { create, equals, toBinary, toJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType, ToolCallContextSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema, ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../../src/errors.js';
import type {
  DecisionQuery,
  DecisionStore,
  HookStore,
  ParkStore,
  RetentionStore,
  UserStore,
} from '../../src/store/store.js';
import { controlHook, parkedCall, toolResult, webhookHook } from './helpers.js';

/** Every store interface, as both backends implement them. */
export type ContractStore = HookStore & UserStore & ParkStore & RetentionStore & DecisionStore;

/** What a backend gives the suite; every method works on the current test's fresh database. */
export interface StoreBackend {
  /** Opens a store on the test's database; it is closed after the test. */
  open(): Promise<ContractStore>;
  /** Runs SQL statements (no parameters) on the test's database, outside the store. */
  exec(sql: string): Promise<void>;
  /** An SQL literal of the bytes written in hex (`X'ff'`, `'\xff'::bytea`). */
  bytesLiteral(hex: string): string;
  /** The backend's name of one of the store's tables (`hooks`, `agenthooks_hooks`). */
  table(name: 'hooks' | 'parked_calls'): string;
}

/** Concurrent publications of one placeholder in the exactly-once test. */
const CONCURRENT_PUBLICATIONS = 20;

/** A lease no test outlives, in milliseconds. */
const LONG_LEASE_MS = 60_000;
/** A lease the takeover test waits out, in milliseconds. */
const SHORT_LEASE_MS = 100;
/** How long the takeover test may poll for the short lease to lapse, in milliseconds. */
const TAKEOVER_DEADLINE_MS = 5_000;

/** Cutoff of the retention tests: rows stamped before it are old. */
const CUTOFF = 10_000;
/** An instant before {@link CUTOFF}. */
const OLD = 1_000;

/** Resolves to what `promise` rejects with, failing the test when it resolves. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (e: unknown) {
    return e;
  }
  throw new Error('expected the call to reject');
}

/** A modifying hook of `point`, registered by `plugin`. */
function modifyHook(id: string, point: ModifyPoint, plugin: string): Hook {
  return create(HookSchema, {
    id,
    point,
    plugin,
    webhook: { url: `https://hooks.example.com/modify/${id}` },
  });
}

/**
 * Declares the contract suite for one backend.
 *
 * @example describeStoreContract('SQLite', () => backend);
 */
export function describeStoreContract(name: string, backend: StoreBackend): void {
  describe(`store contract (${name})`, () => {
    describe('hooks', () => {
      it('keeps registration order across appends, resolves to the running count and keeps the first parent', async () => {
        const store = await backend.open();

        expect(
          await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')]),
        ).toBe(2);
        expect(await store.appendHooks('op-1', 'parent-1', [controlHook('c')])).toBe(3);
        expect(await store.appendHooks('op-2', undefined, [webhookHook('x')])).toBe(1);
        expect(
          await store.appendHooks('op-1', 'parent-2', [webhookHook('d'), webhookHook('a')]),
        ).toBe(5);

        const listed = await store.listHooks('op-1');
        expect(listed.hooks.map((h) => h.id)).toEqual(['a', 'b', 'c', 'd', 'a']);
        expect(listed.known).toBe(true);
        expect(listed.parentOperationId).toBe('parent-1');
        expect(await store.listHooks('op-2')).toMatchObject({ known: true });
        expect((await store.listHooks('op-2')).parentOperationId).toBeUndefined();
      });

      it('answers an unknown operation with no hooks and known false, and an empty append makes it known', async () => {
        const store = await backend.open();

        expect(await store.listHooks('never')).toEqual({ hooks: [], known: false });
        expect(await store.appendHooks('empty', '', [])).toBe(0);
        expect(await store.listHooks('empty')).toEqual({ hooks: [], known: true });
      });

      it('returns every field as registered, modifying points and plugins included', async () => {
        const store = await backend.open();
        const given = [
          webhookHook('notify', HookType.ON_COMPLETE),
          controlHook('guard'),
          modifyHook('rewrite', ModifyPoint.BEFORE_TOOL_CALL, 'acme'),
          modifyHook('plain', ModifyPoint.AFTER_TOOL_CALL, ''),
        ];
        await store.appendHooks('op-1', undefined, given);

        const { hooks } = await store.listHooks('op-1');

        expect(hooks.map((h, i) => equals(HookSchema, h, given[i] ?? create(HookSchema)))).toEqual([
          true,
          true,
          true,
          true,
        ]);
        expect(hooks[2]).toMatchObject({ point: ModifyPoint.BEFORE_TOOL_CALL, plugin: 'acme' });
      });

      it('refuses an append over the hook limit with TOO_MANY_HOOKS, storing nothing of it', async () => {
        const store = await backend.open();
        await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')], {
          maxHooks: 3,
        });

        const error = await rejectionOf(
          store.appendHooks('op-1', undefined, [webhookHook('c'), webhookHook('d')], {
            maxHooks: 3,
          }),
        );

        expect(error).toMatchObject({
          kind: 'invalid_argument',
          reason: 'TOO_MANY_HOOKS',
          field: 'hooks',
          message: 'An operation can have at most 3 hooks (it has 2, this request adds 2)',
        });
        expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
        expect(
          await store.appendHooks('op-1', undefined, [webhookHook('c')], { maxHooks: 3 }),
        ).toBe(3);
      });

      it('hands the stored matchers to checkMatchers in the append, which may refuse it whole', async () => {
        const store = await backend.open();
        const matching = (id: string, matcher: string) =>
          create(HookSchema, {
            id,
            type: HookType.BEFORE_TOOL_CALL,
            matcher,
            webhook: { url: 'https://hooks.example.com/x' },
          });
        await store.appendHooks('op-1', undefined, [
          matching('a', 'fs__.*'),
          matching('b', 'fs__.*'),
          matching('c', 'web__fetch'),
          webhookHook('d'),
        ]);
        const seen: string[][] = [];
        await store.appendHooks('op-1', undefined, [webhookHook('e')], {
          checkMatchers: (stored) => {
            seen.push([...stored].sort());
          },
        });
        expect(seen).toEqual([['fs__.*', 'web__fetch']]);

        const refusal = new InvalidArgumentError('hooks', 'MATCHER_BUDGET_EXCEEDED', 'over budget');
        const error = await rejectionOf(
          store.appendHooks('op-1', undefined, [matching('f', 'x'), webhookHook('g')], {
            checkMatchers: () => {
              throw refusal;
            },
          }),
        );
        expect(error).toBe(refusal);
        expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual([
          'a',
          'b',
          'c',
          'd',
          'e',
        ]);
        const unknown: string[][] = [];
        await store.appendHooks('op-new', undefined, [webhookHook('h')], {
          checkMatchers: (stored) => {
            unknown.push([...stored]);
          },
        });
        expect(unknown).toEqual([[]]);
      });

      it('refuses an append over the config-bytes limit, stores nothing of it, and counts stored hooks', async () => {
        const store = await backend.open();
        await store.appendHooks('op-1', undefined, [webhookHook('a')]);
        // Exactly the stored hook and one more of the same size: the second fits, a third not.
        const limit = bytesOf(webhookHook('a')) + bytesOf(webhookHook('b'));

        expect(
          await store.appendHooks('op-1', undefined, [webhookHook('b')], {
            maxConfigBytes: limit,
          }),
        ).toBe(2);
        const error = await rejectionOf(
          store.appendHooks('op-1', undefined, [webhookHook('c')], { maxConfigBytes: limit }),
        );

        expect(error).toMatchObject({ reason: 'HOOK_CONFIG_TOO_LARGE', kind: 'invalid_argument' });
        expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
        // Without a limit the same append is stored.
        expect(await store.appendHooks('op-1', undefined, [webhookHook('c')])).toBe(3);
      });

      it('deletes all hooks, or only one plugin keeping the others in order, and keeps the operation', async () => {
        const store = await backend.open();
        await store.appendHooks('op-1', 'parent-1', [
          modifyHook('m1', ModifyPoint.BEFORE_TOOL_CALL, 'acme'),
          webhookHook('w1'),
          modifyHook('m2', ModifyPoint.AFTER_TOOL_CALL, 'other'),
          modifyHook('m3', ModifyPoint.AFTER_TOOL_CALL, 'acme'),
          webhookHook('w2'),
        ]);

        expect(await store.deleteHooks('op-1', 'acme')).toBe(2);
        expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['w1', 'm2', 'w2']);
        expect(await store.deleteHooks('op-1', 'missing')).toBe(0);
        expect(await store.deleteHooks('op-1')).toBe(3);
        expect(await store.listHooks('op-1')).toEqual({
          hooks: [],
          known: true,
          parentOperationId: 'parent-1',
        });
        expect(await store.deleteHooks('never')).toBe(0);
        // Appends after a delete come after it in order.
        await store.appendHooks('op-1', undefined, [webhookHook('n')]);
        expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['n']);
      });

      it('fails the whole read with STORED_HOOK_CORRUPT when a stored hook does not decode', async () => {
        const store = await backend.open();
        await store.appendHooks('op-1', undefined, [webhookHook('a'), webhookHook('b')]);
        await backend.exec(
          `UPDATE ${backend.table('hooks')} SET config = '{not json' WHERE hook_id = 'b'`,
        );

        const error = await rejectionOf(store.listHooks('op-1'));

        expect(error).toBeInstanceOf(AgentHooksError);
        expect(error).toMatchObject({ reason: 'STORED_HOOK_CORRUPT', kind: 'failed_precondition' });
      });
    });

    describe('parked calls', () => {
      it('parks once per tool call id: a second park resolves to the first record', async () => {
        const store = await backend.open();
        const first = parkedCall('call-1', ['op-1', 'op-2'], 1_234);

        const created = await store.parkCall(first);
        const again = await store.parkCall(parkedCall('call-1', ['op-9'], 9_999));

        expect(created).toEqual({ record: first, created: true });
        expect(again).toEqual({ record: first, created: false });
        expect(await store.getParkedCall('call-1')).toEqual(first);
        expect(await store.getParkedCall('call-2')).toBeUndefined();
        const states = await store.operationState(['op-1', 'op-2', 'op-9']);
        expect([...states.values()]).toEqual(['active', 'active', 'unknown']);
      });

      it('parks concurrently once: exactly one of many parks of one id creates it', async () => {
        const store = await backend.open();

        const outcomes = await Promise.all(
          Array.from({ length: 10 }, (_, i) => store.parkCall(parkedCall('call-1', ['op-1'], i))),
        );

        expect(outcomes.filter((o) => o.created)).toHaveLength(1);
        const winner = outcomes.find((o) => o.created)?.record;
        expect(outcomes.every((o) => equalsRecord(o.record, winner))).toBe(true);
      });

      it('publishes exactly once under concurrent publications, every caller seeing the first result', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));

        const outcomes = await Promise.all(
          Array.from({ length: CONCURRENT_PUBLICATIONS }, (_, i) =>
            store.publishResult('call-1', toolResult(`result-${i}`), 2_000 + i),
          ),
        );

        const published = outcomes.filter((o) => o.published);
        expect(published).toHaveLength(1);
        const first = published[0]?.finalResult;
        expect(first).toBeDefined();
        expect(outcomes.every((o) => o.finalResult.content === first?.content)).toBe(true);
        const stored = await store.getParkedCall('call-1');
        expect(stored?.finalResult?.content).toBe(first?.content);
        expect(stored?.publishedAt).toBe(2_000 + Number(first?.content.slice('result-'.length)));
      });

      it("lists an operation's parked calls, the most recently parked first, up to the limit", async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-a', ['op-1'], 1_000));
        await store.parkCall(parkedCall('call-b', ['op-1', 'op-2'], 3_000));
        await store.parkCall(parkedCall('call-c', ['op-1'], 2_000));
        await store.parkCall(parkedCall('call-other', ['op-2'], 4_000));
        await store.publishResult('call-a', toolResult('done'), 5_000);

        const listed = await store.listParkedCalls('op-1', 10);
        expect(listed.map((c) => c.toolCallId)).toEqual(['call-b', 'call-c', 'call-a']);
        expect(listed[0]?.chain).toEqual(['op-1', 'op-2']);
        expect(listed[2]?.finalResult?.content).toBe('done');
        expect(listed[2]?.publishedAt).toBe(5_000);
        expect((await store.listParkedCalls('op-1', 2)).map((c) => c.toolCallId)).toEqual([
          'call-b',
          'call-c',
        ]);
        expect(await store.listParkedCalls('op-unknown', 10)).toEqual([]);
      });

      it('rejects a publication without a parked record with PARKED_CALL_NOT_FOUND', async () => {
        const store = await backend.open();

        const error = await rejectionOf(store.publishResult('nope', toolResult('x'), 1));

        expect(error).toMatchObject({ reason: 'PARKED_CALL_NOT_FOUND', kind: 'not_found' });
      });

      it('refuses to park a new call on an expired operation, writing nothing', async () => {
        const store = await backend.open();
        await store.markOperationCompleted('gone', OLD);
        await store.expireBefore(CUTOFF, 10);

        const error = await rejectionOf(store.parkCall(parkedCall('call-1', ['gone'])));

        expect(error).toMatchObject({ reason: 'OPERATION_EXPIRED' });
        expect(await store.getParkedCall('call-1')).toBeUndefined();
      });

      it('fails a read with TOOL_CALL_CONTEXT_UNAVAILABLE when the stored context does not decode', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        await backend.exec(
          `UPDATE ${backend.table('parked_calls')} SET context = ${backend.bytesLiteral('ffffffff')} WHERE tool_call_id = 'call-1'`,
        );

        const error = await rejectionOf(store.getParkedCall('call-1'));

        expect(error).toMatchObject({
          reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE',
          message: 'Cannot evaluate afterToolCall: tool call context is unavailable',
          metadata: { toolCallId: 'call-1' },
        });
      });

      it('fails a read when the stored context is of another tool call', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        const other = toBinary(ToolCallContextSchema, parkedCall('call-2').context);
        await backend.exec(
          `UPDATE ${backend.table('parked_calls')} SET context = ${backend.bytesLiteral(Buffer.from(other).toString('hex'))} WHERE tool_call_id = 'call-1'`,
        );

        const error = await rejectionOf(store.getParkedCall('call-1'));

        expect(error).toMatchObject({ reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE' });
      });
    });

    describe('publication lease', () => {
      it('gives the lease to one holder; another sees it held until it expires', async () => {
        const store = await backend.open();
        const record = parkedCall('call-1');
        await store.parkCall(record);

        const first = await store.claimPublication('call-1', 'pod-a/1', LONG_LEASE_MS);
        const second = await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS);

        expect(first?.state).toBe('claimed');
        expect(first?.state === 'claimed' && equalsRecord(first.record, record)).toBe(true);
        expect(second?.state).toBe('held');
        const expiresInMs = second?.state === 'held' ? second.expiresInMs : -1;
        expect(expiresInMs).toBeGreaterThan(0);
        expect(expiresInMs).toBeLessThanOrEqual(LONG_LEASE_MS);
        expect(await store.claimPublication('never-parked', 'pod-a/2', LONG_LEASE_MS)).toBe(
          undefined,
        );
      });

      it('gives the lease to exactly one of many concurrent claims', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));

        const claims = await Promise.all(
          Array.from({ length: CONCURRENT_PUBLICATIONS }, (_, i) =>
            store.claimPublication('call-1', `pod/${i}`, LONG_LEASE_MS),
          ),
        );

        expect(claims.filter((c) => c?.state === 'claimed')).toHaveLength(1);
        expect(claims.filter((c) => c?.state === 'held')).toHaveLength(CONCURRENT_PUBLICATIONS - 1);
      });

      it('answers published with the first result once the placeholder is filled, and ends the lease', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        await store.claimPublication('call-1', 'pod-a/1', LONG_LEASE_MS);

        await store.publishResult('call-1', toolResult('first'), 2_000);

        const claim = await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS);
        expect(claim?.state).toBe('published');
        expect(claim?.state === 'published' && claim.finalResult.content).toBe('first');
        expect(await store.renewPublication('call-1', 'pod-a/1', LONG_LEASE_MS)).toBe(false);
      });

      it('lets another holder take the lease over once it expires, and the old holder cannot renew or release it', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        expect((await store.claimPublication('call-1', 'dead/1', SHORT_LEASE_MS))?.state).toBe(
          'claimed',
        );

        // Poll as a waiting duplicate does, within a deadline, until the lease lapses.
        const deadline = Date.now() + TAKEOVER_DEADLINE_MS;
        let claim = await store.claimPublication('call-1', 'live/1', LONG_LEASE_MS);
        while (claim?.state === 'held' && Date.now() < deadline) {
          await new Promise((resolve) =>
            setTimeout(resolve, Math.min(claim?.state === 'held' ? claim.expiresInMs + 1 : 10, 50)),
          );
          claim = await store.claimPublication('call-1', 'live/1', LONG_LEASE_MS);
        }

        expect(claim?.state).toBe('claimed');
        expect(await store.renewPublication('call-1', 'dead/1', LONG_LEASE_MS)).toBe(false);
        await store.releasePublication('call-1', 'dead/1');
        expect((await store.claimPublication('call-1', 'other/1', LONG_LEASE_MS))?.state).toBe(
          'held',
        );
      });

      it('takes a running lease when replacing exactly its holder, and names the holder of a held one', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        await store.claimPublication('call-1', 'gone/1', LONG_LEASE_MS);

        const other = await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS, 'pod-x/1');
        const replaced = await store.claimPublication('call-1', 'pod-b/2', LONG_LEASE_MS, 'gone/1');

        expect(other).toMatchObject({ state: 'held', holder: 'gone/1' });
        expect(replaced?.state).toBe('claimed');
        expect(await store.claimPublication('call-1', 'pod-c/1', LONG_LEASE_MS)).toMatchObject({
          state: 'held',
          holder: 'pod-b/2',
        });
      });

      it('frees the lease at once on release, so a later call claims it without waiting', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        await store.claimPublication('call-1', 'pod-a/1', LONG_LEASE_MS);

        await store.releasePublication('call-1', 'pod-a/1');

        expect((await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS))?.state).toBe(
          'claimed',
        );
      });

      it('extends the lease on renewal by its holder', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        await store.claimPublication('call-1', 'pod-a/1', SHORT_LEASE_MS);

        expect(await store.renewPublication('call-1', 'pod-a/1', LONG_LEASE_MS)).toBe(true);

        const other = await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS);
        expect(other?.state).toBe('held');
        expect(other?.state === 'held' && other.expiresInMs).toBeGreaterThan(SHORT_LEASE_MS);
      });

      it('keeps no lease on a record that does not decode', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));
        const good = Buffer.from(
          toBinary(ToolCallContextSchema, parkedCall('call-1').context),
        ).toString('hex');
        const table = backend.table('parked_calls');
        await backend.exec(
          `UPDATE ${table} SET context = ${backend.bytesLiteral('ffffffff')} WHERE tool_call_id = 'call-1'`,
        );

        const error = await rejectionOf(store.claimPublication('call-1', 'pod-a/1', LONG_LEASE_MS));

        expect(error).toMatchObject({ reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE' });
        await backend.exec(
          `UPDATE ${table} SET context = ${backend.bytesLiteral(good)} WHERE tool_call_id = 'call-1'`,
        );
        expect((await store.claimPublication('call-1', 'pod-b/1', LONG_LEASE_MS))?.state).toBe(
          'claimed',
        );
      });

      it('rejects an empty holder or a lease that is not a positive integer with RangeError', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1'));

        for (const call of [
          () => store.claimPublication('call-1', '', LONG_LEASE_MS),
          () => store.claimPublication('call-1', 'pod-a/1', 0),
          () => store.renewPublication('call-1', 'pod-a/1', 1.5),
        ]) {
          expect(await rejectionOf(call())).toBeInstanceOf(RangeError);
        }
      });
    });

    describe('lifecycle and retention', () => {
      it('reports active, completed, expired and unknown operations, one entry per id', async () => {
        const store = await backend.open();
        await store.appendHooks('active', undefined, [webhookHook('a')]);
        await store.appendHooks('done', undefined, [webhookHook('a')]);
        await store.markOperationCompleted('done', CUTOFF + 1);
        await store.markOperationCompleted('gone', OLD);
        await store.expireBefore(CUTOFF, 10);

        const states = await store.operationState(['active', 'done', 'gone', 'never', 'active']);

        expect([...states]).toEqual([
          ['active', 'active'],
          ['done', 'completed'],
          ['gone', 'expired'],
          ['never', 'unknown'],
        ]);
        expect(await store.operationState([])).toEqual(new Map());
      });

      it('moves completion forward only, keeps the parent, and never revives a tombstone', async () => {
        const store = await backend.open();
        await store.appendHooks('op-1', 'parent-1', [webhookHook('a')]);
        await store.markOperationCompleted('op-1', 5_000);
        await store.markOperationCompleted('op-1', OLD);

        // Completed at 5_000 (not moved back to 1_000): a cutoff between keeps it.
        expect((await store.expireBefore(3_000, 10)).operations).toEqual([]);
        expect((await store.expireBefore(6_000, 10)).operations).toEqual(['op-1']);
        await store.markOperationCompleted('op-1', 7_000);

        expect((await store.operationState(['op-1'])).get('op-1')).toBe('expired');
        expect(await rejectionOf(store.listHooks('op-1'))).toMatchObject({
          reason: 'OPERATION_EXPIRED',
          kind: 'failed_precondition',
        });
        expect(
          await rejectionOf(store.appendHooks('op-1', undefined, [webhookHook('b')])),
        ).toMatchObject({ reason: 'OPERATION_EXPIRED' });
      });

      it('expires in batches, oldest first, and tells when a batch came back full', async () => {
        const store = await backend.open();
        for (const [id, at] of [
          ['op-c', 300],
          ['op-a', 100],
          ['op-b', 200],
        ] as const) {
          await store.appendHooks(id, undefined, [webhookHook('h')]);
          await store.markOperationCompleted(id, at);
        }

        const first = await store.expireBefore(CUTOFF, 2);
        const second = await store.expireBefore(CUTOFF, 2);
        const third = await store.expireBefore(CUTOFF, 2);

        expect(first).toEqual({
          operations: ['op-a', 'op-b'],
          parkedCalls: 0,
          tombstones: 0,
          decisions: 0,
        });
        expect(second).toEqual({
          operations: ['op-c'],
          parkedCalls: 0,
          tombstones: 0,
          decisions: 0,
        });
        expect(third).toEqual({ operations: [], parkedCalls: 0, tombstones: 0, decisions: 0 });
      });

      it('keeps an operation a waiting parked call needs, and deletes published calls before the cutoff', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('waiting', ['op-w'], OLD));
        await store.parkCall(parkedCall('done', ['op-d'], OLD));
        await store.publishResult('done', toolResult('ok'), OLD + 1);
        await store.markOperationCompleted('op-w', OLD);
        await store.markOperationCompleted('op-d', OLD);

        const result = await store.expireBefore(CUTOFF, 10);

        expect(result).toEqual({
          operations: ['op-d'],
          parkedCalls: 1,
          tombstones: 0,
          decisions: 0,
        });
        expect(await store.getParkedCall('done')).toBeUndefined();
        expect(await store.getParkedCall('waiting')).toMatchObject({ toolCallId: 'waiting' });
        expect((await store.operationState(['op-w'])).get('op-w')).toBe('completed');
      });

      it('passes over operations waiting parked calls hold, so that a full batch of them never starves the rest', async () => {
        const store = await backend.open();
        // Parked operations, completed first: each keeps a call waiting.
        for (const id of ['op-w1', 'op-w2', 'op-w3']) {
          await store.parkCall(parkedCall(`call-${id}`, [id], OLD));
          await store.markOperationCompleted(id, OLD);
        }
        await store.markOperationCompleted('op-free', OLD + 1);

        expect((await store.expireBefore(CUTOFF, 2)).operations).toEqual(['op-free']);
        expect((await store.operationState(['op-w1'])).get('op-w1')).toBe('completed');
      });

      it('deletes tombstones older than the tombstone cutoff in batches, only when asked', async () => {
        const store = await backend.open();
        for (const id of ['t-1', 't-2', 't-3']) {
          await store.markOperationCompleted(id, OLD);
        }
        await store.expireBefore(CUTOFF, 10);
        const later = Date.now() + 60_000;

        expect((await store.expireBefore(CUTOFF, 10)).tombstones).toBe(0);
        expect((await store.expireBefore(CUTOFF, 2, later)).tombstones).toBe(2);
        expect((await store.expireBefore(CUTOFF, 2, later)).tombstones).toBe(1);
        expect((await store.expireBefore(CUTOFF, 2, later)).tombstones).toBe(0);
        const states = await store.operationState(['t-1', 't-2', 't-3']);
        expect([...states.values()]).toEqual(['unknown', 'unknown', 'unknown']);
        // Unknown now: a new registration starts afresh.
        expect(await store.appendHooks('t-1', undefined, [webhookHook('a')])).toBe(1);
      });

      it('keeps a tombstone that a remaining parked call names', async () => {
        const store = await backend.open();
        await store.parkCall(parkedCall('call-1', ['op-1'], OLD));
        await store.markOperationCompleted('op-1', OLD);
        // Published after the cutoff: the call outlives its operation.
        await store.publishResult('call-1', toolResult('ok'), CUTOFF + 1);
        await store.expireBefore(CUTOFF, 10);
        const later = Date.now() + 60_000;

        expect((await store.expireBefore(CUTOFF, 10, later)).tombstones).toBe(0);
        expect((await store.operationState(['op-1'])).get('op-1')).toBe('expired');
        // Published calls go first, so the tombstone they held goes in the same batch.
        expect(await store.expireBefore(CUTOFF + 2, 10, later)).toEqual({
          operations: [],
          parkedCalls: 1,
          tombstones: 1,
          decisions: 0,
        });
      });

      it('rejects out-of-range arguments with RangeError', async () => {
        const store = await backend.open();

        await expect(store.expireBefore(1.5, 10)).rejects.toThrow(RangeError);
        await expect(store.expireBefore(1, 0)).rejects.toThrow(RangeError);
        await expect(store.markOperationCompleted('op-1', Number.NaN)).rejects.toThrow(RangeError);
        await expect(store.publishResult('c', toolResult('x'), 0.5)).rejects.toThrow(RangeError);
      });
    });

    describe('users', () => {
      it('upserts users, the last record of an id winning, and looks up their emails', async () => {
        const store = await backend.open();

        expect(
          await store.upsertUsers([
            { id: 'user_1', email: 'old@example.com' },
            { id: '007', email: 'bond@example.com' },
            { id: 'user_2', email: null },
            { id: 'user_1', email: 'ada@example.com' },
          ]),
        ).toBe(4);

        expect(await store.lookupUserEmail('user_1')).toBe('ada@example.com');
        expect(await store.lookupUserEmail('007')).toBe('bond@example.com');
        expect(await store.lookupUserEmail('user_2')).toBeNull();
        expect(await store.lookupUserEmail('nobody')).toBeNull();
        await store.upsertUsers([{ id: '007', email: null }]);
        expect(await store.lookupUserEmail('007')).toBeNull();
      });
    });

    describe('decision audit entries', () => {
      const row = (decisionId: string, time: number, operationId: string, outcome = 1) => ({
        decisionId,
        time,
        operationId,
        outcome,
        record: new Uint8Array([time % 256, outcome, 0, 255]),
      });

      it('appends a batch, skips ids already stored, and lists newest first with filters', async () => {
        const store = await backend.open();
        await store.appendDecisions([
          row('0001-a', 1_000, 'op-1'),
          row('0002-b', 2_000, 'op-2', 2),
          row('0003-c', 2_000, 'op-1', 2),
        ]);
        // A retried batch: the stored id keeps its first row.
        await store.appendDecisions([row('0003-c', 9_000, 'op-9'), row('0004-d', 3_000, 'op-1')]);
        await store.appendDecisions([]);

        const all = await store.listDecisions({ limit: 10 });
        expect(all.map((r) => r.decisionId)).toEqual(['0004-d', '0003-c', '0002-b', '0001-a']);
        expect(all[1]).toMatchObject({ decisionId: '0003-c', time: 2_000, operationId: 'op-1' });
        expect(all[1]?.outcome).toBe(2);
        expect(Buffer.from(all[1]?.record ?? [])).toEqual(Buffer.from([208, 2, 0, 255]));
        const ids = async (q: Partial<DecisionQuery>) =>
          (await store.listDecisions(Object.assign({ limit: 10 }, q))).map((r) => r.decisionId);
        expect(await ids({ operationId: 'op-1' })).toEqual(['0004-d', '0003-c', '0001-a']);
        expect(await ids({ outcome: 2 })).toEqual(['0003-c', '0002-b']);
        expect(await ids({ from: 2_000, to: 3_000 })).toEqual(['0003-c', '0002-b']);
        expect(await ids({ limit: 2 })).toEqual(['0004-d', '0003-c']);
        // The next page: older than the last row of the previous one, ties broken by id.
        expect(await ids({ before: { time: 2_000, decisionId: '0003-c' } })).toEqual([
          '0002-b',
          '0001-a',
        ]);
        await store.close();
      });

      it("stops the rows by their records' bytes: those that fit, and at most two more", async () => {
        const store = await backend.open();
        const sized = (id: string, time: number, bytes: number) => ({
          decisionId: id,
          time,
          operationId: 'op-1',
          outcome: 1,
          record: new Uint8Array(bytes).fill(7),
        });
        // Newest first: e (400), d (300), c (300), b (100), a (100).
        await store.appendDecisions([
          sized('a', 1, 100),
          sized('b', 2, 100),
          sized('c', 3, 300),
          sized('d', 4, 300),
          sized('e', 5, 400),
        ]);
        const ids = async (maxBytes: number, limit = 10) =>
          (await store.listDecisions({ limit, maxBytes })).map((r) => r.decisionId);
        // A row is answered while the rows before it, all but the last, hold at most maxBytes.
        expect(await ids(10_000)).toEqual(['e', 'd', 'c', 'b', 'a']);
        expect(await ids(699)).toEqual(['e', 'd', 'c']);
        expect(await ids(700)).toEqual(['e', 'd', 'c', 'b']);
        expect(await ids(999)).toEqual(['e', 'd', 'c', 'b']);
        expect(await ids(1_000)).toEqual(['e', 'd', 'c', 'b', 'a']);
        // The first row comes whatever its size, and the one after it too.
        expect(await ids(0)).toEqual(['e', 'd']);
        expect(await ids(1_000, 2)).toEqual(['e', 'd']);
        await store.close();
      });

      it('deletes entries older than the retention cutoff, in batches', async () => {
        const store = await backend.open();
        await store.appendDecisions([
          row('a', 1_000, 'op-1'),
          row('b', 1_001, 'op-1'),
          row('c', 1_002, 'op-1'),
          row('d', 5_000, 'op-1'),
        ]);
        expect((await store.expireBefore(1_500, 2)).decisions).toBe(2);
        expect((await store.expireBefore(1_500, 2)).decisions).toBe(1);
        expect((await store.expireBefore(1_500, 2)).decisions).toBe(0);
        expect((await store.listDecisions({ limit: 10 })).map((r) => r.decisionId)).toEqual(['d']);
        await store.close();
      });
    });

    describe('close', () => {
      it('fails every call after close with STORE_CLOSED; closing twice is a no-op', async () => {
        const store = await backend.open();
        await store.close();
        await store.close();

        expect(await rejectionOf(store.listHooks('op-1'))).toMatchObject({
          reason: 'STORE_CLOSED',
        });
        expect(
          await rejectionOf(store.appendHooks('op-1', undefined, [webhookHook('a')])),
        ).toMatchObject({ reason: 'STORE_CLOSED' });
      });
    });
  });
}

/** The bytes a hook counts for under the config-size limit: its canonical JSON in UTF-8. */
function bytesOf(hook: Hook): number {
  return Buffer.byteLength(toJsonString(HookSchema, hook), 'utf8');
}

function equalsRecord(a: unknown, b: unknown): boolean {
  return JSON.stringify(a, bigintSafe) === JSON.stringify(b, bigintSafe);
}

function bigintSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}
