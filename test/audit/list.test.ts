/**
 * @module `listDecisions` (`src/audit/list.ts`) over a real SQLite store: a
 * page stops at 4 MiB of encoded response, so a gRPC client on its default
 * receive limit (4 MiB) reads every page, and the pages hold every entry once.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import {
  DecisionRecordSchema,
  ListDecisionsRequestSchema,
  ListDecisionsResponseSchema,
} from '../../gen/agenthooks/v1/audit_pb.js';
import { listDecisions } from '../../src/audit/list.js';
import { useTempStore } from '../store/helpers.js';

/** What grpc-js receives by default. */
const GRPC_DEFAULT_RECEIVE = 4 * 1024 * 1024;

/** The decision id of row `i`. */
function idOf(i: number): string {
  return `0000000${i}-0000-7000-8000-000000000000`.slice(-36);
}

/** A stored row whose record encodes to exactly `bytes` bytes. */
function rowOf(i: number, bytes: number) {
  const decisionId = idOf(i);
  const record = (payload: number) =>
    toBinary(
      DecisionRecordSchema,
      create(DecisionRecordSchema, { decisionId, payloadJson: 'x'.repeat(payload) }),
    );
  // The payload's length prefix grows with it: step until the record is exactly `bytes`.
  let payload = Math.max(0, bytes - 50);
  while (record(payload).byteLength < bytes) payload += 1;
  while (record(payload).byteLength > bytes) payload -= 1;
  const encoded = record(payload);
  expect(encoded.byteLength).toBe(bytes);
  return { decisionId, time: 1_000 + i, operationId: 'op-1', outcome: 1, record: encoded };
}

describe('listDecisions pages', () => {
  const temp = useTempStore();

  it('keeps every page within a gRPC client default receive limit, and loses no entry', async () => {
    const store = temp.open();
    // Oldest first. Newest first, a page starts after the record over 4 MiB with two
    // records that sum to one byte under 4 MiB: their response, framed, is over it.
    const sizes = [100, 300, 2 * 1024 * 1024 - 1, 2 * 1024 * 1024, 4 * 1024 * 1024 + 10, 50];
    await store.appendDecisions(sizes.map((b, i) => rowOf(i, b)));
    const seen: string[] = [];
    let pageToken = '';
    for (let pages = 0; pages < 10; pages += 1) {
      const page = await listDecisions(
        store,
        create(ListDecisionsRequestSchema, { pageSize: 100, pageToken }),
      );
      const bytes = toBinary(
        ListDecisionsResponseSchema,
        create(ListDecisionsResponseSchema, page),
      ).byteLength;
      // Only a page of one record larger than the limit itself may pass it.
      if (page.decisions.length > 1) expect(bytes).toBeLessThanOrEqual(GRPC_DEFAULT_RECEIVE);
      seen.push(...page.decisions.map((d) => d.decisionId));
      if (page.nextPageToken === '') break;
      pageToken = page.nextPageToken;
    }
    expect(seen).toEqual(sizes.map((_, i) => idOf(i)).reverse());
  });
});
