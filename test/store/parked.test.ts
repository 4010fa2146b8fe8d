/**
 * @module Parked calls and deferred-result placeholders (migration 003 and
 * the ParkStore of the SQLite store), on real files in a temporary folder.
 */
import { rmSync, symlinkSync } from 'node:fs';
import { equals, toBinary, toJson, toJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import {
  ToolCallContextSchema,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { lockPathOf } from '../../src/store/sqlite-lock.js';
import { assertFreshBuild, useStoreChildren } from './child.js';
import { parkedCall, toolCallContext, toolResult, useTempStore, webhookHook } from './helpers.js';

/** The message every undecodable parked call is reported with (upstream wording). */
const CONTEXT_UNAVAILABLE_MESSAGE =
  'Cannot evaluate afterToolCall: tool call context is unavailable';
/** Concurrent publications of one placeholder in the exactly-once tests. */
const CONCURRENT_PUBLICATIONS = 50;

describe('ParkStore (SQLite)', () => {
  const temp = useTempStore();

  describe('parkCall', () => {
    it('creates the record and resolves to it with created true', async () => {
      const store = temp.open();
      const record = parkedCall('call-1', ['op-1', 'op-2'], 1_234);

      const outcome = await store.parkCall(record);

      expect(outcome.created).toBe(true);
      expect(outcome.record).toEqual(record);
      expect(await store.getParkedCall('call-1')).toEqual(record);
    });

    it('finds a call parked after a read that found the file empty (the count it skips reads by)', async () => {
      const store = temp.open();
      expect(await store.getParkedCall('call-1')).toBeUndefined();

      await store.parkCall(parkedCall('call-1', ['op-1'], 1_000));

      expect(await store.getParkedCall('call-1')).toMatchObject({ toolCallId: 'call-1' });
      expect(await store.getParkedCall('call-2')).toBeUndefined();
    });

    it('finds a call parked by an earlier process when it opens the file', async () => {
      const first = temp.open();
      await first.parkCall(parkedCall('call-1', ['op-1'], 1_000));
      first.close();

      const store = temp.open();
      expect(await store.getParkedCall('call-1')).toMatchObject({ toolCallId: 'call-1' });
    });

    it('is idempotent: a second park resolves to the first record with created false', async () => {
      const store = temp.open();
      const first = parkedCall('call-1', ['op-1'], 1_000);
      await store.parkCall(first);
      const second = {
        ...parkedCall('call-1', ['op-9', 'op-8'], 2_000),
        kind: ParkKind.HUMAN_APPROVAL,
      };
      second.context.apiName = 'delete_repository';

      const outcome = await store.parkCall(second);

      expect(outcome.created).toBe(false);
      expect(outcome.record).toEqual(first);
      expect(outcome.record.context.apiName).toBe('create_issue');
      const raw = temp.raw();
      expect(raw.prepare('SELECT count(*) AS n FROM parked_calls').get()).toEqual({ n: 1 });
      // The second park created no operation either.
      expect(
        raw.prepare("SELECT id FROM operations WHERE id LIKE 'op-%' ORDER BY id").all(),
      ).toEqual([{ id: 'op-1' }]);
    });

    it('creates the missing operation rows of the chain and links the call to each', async () => {
      const store = temp.open();
      await store.appendHooks('op-2', 'parent-2', [webhookHook('a')]);
      await store.markOperationCompleted('op-3', 500);

      await store.parkCall(parkedCall('call-1', ['op-1', 'op-2', 'op-3', 'op-2'], 1_000));

      const raw = temp.raw();
      expect(
        raw.prepare('SELECT id, parent_id, status, created_at FROM operations ORDER BY id').all(),
      ).toEqual([
        { id: 'op-1', parent_id: null, status: 'active', created_at: 1_000 },
        { id: 'op-2', parent_id: 'parent-2', status: 'active', created_at: expect.any(Number) },
        { id: 'op-3', parent_id: null, status: 'completed', created_at: 500 },
      ]);
      expect(
        raw
          .prepare('SELECT operation_id, tool_call_id FROM parked_call_operations ORDER BY 1')
          .all(),
      ).toEqual([
        { operation_id: 'op-1', tool_call_id: 'call-1' },
        { operation_id: 'op-2', tool_call_id: 'call-1' },
        { operation_id: 'op-3', tool_call_id: 'call-1' },
      ]);
      // The chain keeps its order and its repeats.
      expect((await store.getParkedCall('call-1'))?.chain).toEqual([
        'op-1',
        'op-2',
        'op-3',
        'op-2',
      ]);
      expect((await store.listHooks('op-2')).hooks.map((h) => h.id)).toEqual(['a']);
    });

    it('links the call to its own operation when the chain does not name it', async () => {
      const store = temp.open();
      const record = { ...parkedCall('call-1', ['op-2']), operationId: 'op-1' };
      record.context.operationId = 'op-1';

      await store.parkCall(record);

      expect(
        temp.raw().prepare('SELECT operation_id FROM parked_call_operations ORDER BY 1').all(),
      ).toEqual([{ operation_id: 'op-1' }, { operation_id: 'op-2' }]);
    });

    it('stores the context and chain as columns another connection can read at once', async () => {
      const store = temp.open();
      const record = parkedCall('call-1', ['op-1', 'op-2']);

      await store.parkCall(record);

      const row = temp
        .raw()
        .prepare(
          'SELECT operation_id, chain, kind, context, parked_at, final_result FROM parked_calls',
        )
        .get() as Record<string, unknown>;
      expect(row).toEqual({
        operation_id: 'op-1',
        chain: '["op-1","op-2"]',
        kind: ParkKind.DEFERRED,
        context: Buffer.from(toBinary(ToolCallContextSchema, record.context)),
        parked_at: 1_000,
        final_result: null,
      });
    });

    it('keeps what JSON could not: a NaN argument round-trips through protobuf binary', async () => {
      const store = temp.open();
      const record = parkedCall('call-1');
      record.context.args = { score: Number.NaN };
      expect(() => toJsonString(ToolCallContextSchema, record.context)).toThrow();

      await store.parkCall(record);

      const stored = await store.getParkedCall('call-1');
      expect(stored?.context.args).toEqual({ score: Number.NaN });
    });

    it('rejects a malformed record with a RangeError and stores nothing', async () => {
      const store = temp.open();
      const mismatched = parkedCall('call-1');
      mismatched.context.toolCallId = 'call-2';

      await expect(store.parkCall({ ...parkedCall('call-1'), chain: [] })).rejects.toThrow(
        RangeError,
      );
      await expect(
        store.parkCall({ ...parkedCall('call-1'), chain: ['op-1', ''] }),
      ).rejects.toThrow(RangeError);
      await expect(
        store.parkCall({ ...parkedCall('call-1'), kind: ParkKind.UNSPECIFIED }),
      ).rejects.toThrow(RangeError);
      await expect(store.parkCall(mismatched)).rejects.toThrow(RangeError);
      await expect(store.parkCall({ ...parkedCall('call-1'), parkedAt: 1.5 })).rejects.toThrow(
        RangeError,
      );
      expect(temp.raw().prepare('SELECT count(*) AS n FROM parked_calls').get()).toEqual({ n: 0 });
    });
  });

  describe('getParkedCall', () => {
    it('resolves to undefined for a call that was never parked', async () => {
      const store = temp.open();

      expect(await store.getParkedCall('never-parked')).toBeUndefined();
    });

    it('finds a call another store on the file parked after this one counted none', async () => {
      const reader = openSqliteStore(temp.path());
      const writer = openSqliteStore(temp.path());
      try {
        // The reader counts no parked call in the file...
        expect(await reader.getParkedCall('call-elsewhere')).toBeUndefined();
        // ...and another connection (another sidecar's, in production) parks one.
        const record = parkedCall('call-elsewhere', ['op-a']);
        await writer.parkCall(record);

        expect(await reader.getParkedCall('call-elsewhere')).toEqual(record);
      } finally {
        await reader.close();
        await writer.close();
      }
    });

    it('finds a call parked by a second sidecar the serving lock did not keep out', async () => {
      // Each holds "the" lock: one through a symlink (another lock file), one
      // started after the first one's lock file was removed.
      const serving = openSqliteStore(temp.path(), { lockWaitMs: 0 });
      const link = `${temp.path()}-link`;
      symlinkSync(temp.path(), link);
      const viaLink = openSqliteStore(link, { lockWaitMs: 0 });
      try {
        expect([serving.locked, viaLink.locked]).toEqual([true, true]);
        expect(await serving.getParkedCall('call-link')).toBeUndefined();
        await viaLink.parkCall(parkedCall('call-link', ['op-a']));
        expect(await serving.getParkedCall('call-link')).toMatchObject({ toolCallId: 'call-link' });

        rmSync(lockPathOf(temp.path()));
        const second = openSqliteStore(temp.path(), { lockWaitMs: 0 });
        try {
          expect(second.locked).toBe(true);
          await second.parkCall(parkedCall('call-second', ['op-b']));
          expect(await serving.getParkedCall('call-second')).toMatchObject({
            toolCallId: 'call-second',
          });
        } finally {
          await second.close();
        }
      } finally {
        await viaLink.close();
        await serving.close();
        rmSync(link, { force: true });
      }
    });

    it('keeps the record across a reopen of the file', async () => {
      const first = openSqliteStore(temp.path());
      const record = parkedCall('call-1', ['op-1', 'op-2']);
      await first.parkCall(record);
      await first.publishResult('call-1', toolResult('done'), 2_000);
      await first.close();

      const stored = await temp.open().getParkedCall('call-1');

      expect(stored).toEqual({ ...record, finalResult: toolResult('done'), publishedAt: 2_000 });
    });

    it.each([
      ['is not protobuf', Buffer.from([0x0a, 0x05, 0x61])],
      ['is empty', Buffer.alloc(0)],
      [
        'is the context of another call',
        Buffer.from(toBinary(ToolCallContextSchema, toolCallContext('call-2'))),
      ],
    ])(
      'rejects with TOOL_CALL_CONTEXT_UNAVAILABLE when the stored context %s',
      async (_case, bytes) => {
        const store = temp.open();
        await store.parkCall(parkedCall('call-1'));
        temp.raw().prepare('UPDATE parked_calls SET context = ?').run(bytes);

        const rejection = store.getParkedCall('call-1');

        await expect(rejection).rejects.toMatchObject({
          kind: 'failed_precondition',
          reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE',
          message: CONTEXT_UNAVAILABLE_MESSAGE,
          metadata: { toolCallId: 'call-1' },
        });
        await expect(rejection).rejects.toHaveProperty('cause');
      },
    );

    it.each([
      ['an object', '{"op": 1}'],
      ['an empty list', '[]'],
      ['a list with a number', '["op-1", 2]'],
    ])(
      'rejects with TOOL_CALL_CONTEXT_UNAVAILABLE when the stored chain is %s',
      async (_case, chain) => {
        const store = temp.open();
        await store.parkCall(parkedCall('call-1'));
        temp.raw().prepare('UPDATE parked_calls SET chain = ?').run(chain);

        await expect(store.getParkedCall('call-1')).rejects.toMatchObject({
          reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE',
          message: CONTEXT_UNAVAILABLE_MESSAGE,
        });
      },
    );

    it('rejects with TOOL_CALL_CONTEXT_UNAVAILABLE when the stored final result does not decode', async () => {
      const store = temp.open();
      await store.parkCall(parkedCall('call-1'));
      await store.publishResult('call-1', toolResult('done'), 2_000);
      temp
        .raw()
        .prepare('UPDATE parked_calls SET final_result = ?')
        .run(Buffer.from([0xff]));

      await expect(store.getParkedCall('call-1')).rejects.toMatchObject({
        reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE',
        message: CONTEXT_UNAVAILABLE_MESSAGE,
      });
      // A duplicate publication needs the first result: it fails closed too.
      await expect(store.publishResult('call-1', toolResult('again'), 3_000)).rejects.toMatchObject(
        { reason: 'TOOL_CALL_CONTEXT_UNAVAILABLE' },
      );
    });
  });

  describe('publishResult', () => {
    it('publishes once: the first call writes, later calls get the first result', async () => {
      const store = temp.open();
      await store.parkCall(parkedCall('call-1'));
      const first = toolResult('first');

      expect(await store.publishResult('call-1', first, 2_000)).toEqual({
        published: true,
        finalResult: first,
        publishedAt: 2_000,
      });
      const again = await store.publishResult('call-1', toolResult('second', false), 3_000);

      expect(again.published).toBe(false);
      expect(again.publishedAt).toBe(2_000);
      expect(equals(ToolResultSchema, again.finalResult, first)).toBe(true);
      expect(await store.getParkedCall('call-1')).toMatchObject({
        finalResult: first,
        publishedAt: 2_000,
      });
      expect(temp.raw().prepare('SELECT final_result FROM parked_calls').get()).toEqual({
        final_result: Buffer.from(toBinary(ToolResultSchema, first)),
      });
    });

    it('rejects with PARKED_CALL_NOT_FOUND (not_found) when no record exists, and writes nothing', async () => {
      const store = temp.open();

      await expect(
        store.publishResult('never-parked', toolResult('x'), 2_000),
      ).rejects.toMatchObject({
        kind: 'not_found',
        reason: 'PARKED_CALL_NOT_FOUND',
        metadata: { toolCallId: 'never-parked' },
      });
      expect(await store.getParkedCall('never-parked')).toBeUndefined();
    });

    it(`publishes exactly once under ${CONCURRENT_PUBLICATIONS} concurrent calls across two store instances`, async () => {
      const one = temp.open();
      const two = temp.open();
      await one.parkCall(parkedCall('call-1'));
      const results = Array.from({ length: CONCURRENT_PUBLICATIONS }, (_, i) =>
        toolResult(`result ${i}`),
      );

      const outcomes = await Promise.all(
        results.map((result, i) =>
          (i % 2 === 0 ? one : two).publishResult('call-1', result, 2_000 + i),
        ),
      );

      const winners = outcomes.filter((o) => o.published);
      expect(winners).toHaveLength(1);
      const final = winners[0]?.finalResult as ToolResult;
      for (const outcome of outcomes) {
        expect(equals(ToolResultSchema, outcome.finalResult, final)).toBe(true);
      }
      expect((await two.getParkedCall('call-1'))?.finalResult).toEqual(final);
    });

    describe('across processes', () => {
      const children = useStoreChildren();
      /** Processes racing for one placeholder, each sending its share of the publications. */
      const PROCESSES = 4;

      it(`publishes exactly once when ${PROCESSES} processes race ${CONCURRENT_PUBLICATIONS} publications`, async () => {
        assertFreshBuild();
        const store = temp.open();
        await store.parkCall(parkedCall('call-1'));
        const racers = await Promise.all(Array.from({ length: PROCESSES }, () => children.spawn()));
        await Promise.all(
          racers.map((racer) =>
            racer.call('open', { path: temp.path(), options: { busyTimeoutMs: 10_000 } }),
          ),
        );

        // Every command is written before any answer is awaited, so the
        // processes' write transactions contend for the lock.
        const outcomes = await Promise.all(
          Array.from({ length: CONCURRENT_PUBLICATIONS }, (_, i) =>
            (racers[i % PROCESSES] ?? racers[0])?.call<{
              published: boolean;
              finalResult: unknown;
            }>('publish', {
              toolCallId: 'call-1',
              result: toJson(ToolResultSchema, toolResult(`result ${i}`)),
              publishedAt: 2_000 + i,
            }),
          ),
        );

        expect(outcomes.filter((o) => o?.published)).toHaveLength(1);
        const stored = await store.getParkedCall('call-1');
        const storedJson = toJson(ToolResultSchema, stored?.finalResult as ToolResult);
        for (const outcome of outcomes) {
          expect(outcome?.finalResult).toEqual(storedJson);
        }
      });
    });
  });
});
