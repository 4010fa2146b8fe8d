/**
 * @module `ListDecisions`: one page of the decision audit log kept in the
 * store, newest first, with an opaque page token bound to the filters.
 */
import { createHash } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import {
  DecisionOutcome,
  type DecisionRecord,
  DecisionRecordSchema,
  type ListDecisionsRequest,
} from '../../gen/agenthooks/v1/audit_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import { validateOperationId } from '../hooks/validate.js';
import type { DecisionQuery, DecisionStore } from '../store/store.js';

/** Entries of a page when the request asks for none. */
export const DEFAULT_PAGE_SIZE = 100;
/** Most entries of a page. */
export const MAX_PAGE_SIZE = 1_000;
/**
 * Most bytes of encoded records a page holds, unless its first record alone
 * is larger (a page holds at least one), each record counted with
 * {@link RECORD_FRAMING_BYTES}: 4 MiB, what a gRPC client receives by
 * default, less room for the token. Records that keep payloads
 * (`--audit-payloads`) can be as large as a request; without this bound one
 * page of 1,000 of them was loaded and sent at once.
 */
export const MAX_PAGE_BYTES = 4 * 1024 * 1024 - 1024;
/** A record's tag and length in the response, at most (a length under 2^28). */
const RECORD_FRAMING_BYTES = 5;

/** Latest time a Timestamp may hold (9999-12-31T23:59:59Z), in seconds. */
const MAX_TIMESTAMP_SECONDS = 253_402_300_799n;
/** Earliest (0001-01-01T00:00:00Z), in seconds. */
const MIN_TIMESTAMP_SECONDS = -62_135_596_800n;

/** One page of {@link listDecisions}. */
export interface DecisionPage {
  readonly decisions: DecisionRecord[];
  readonly nextPageToken: string;
}

/**
 * Answers one page of the audit log.
 *
 * @throws AgentHooksError FAILED_PRECONDITION `AUDIT_STORE_DISABLED` when
 *   `store` is undefined (the store sink is off).
 * @throws InvalidArgumentError naming the field: `operationId`, `pageSize`
 *   (`PAGE_SIZE_OUT_OF_RANGE`), `startTime`/`endTime`
 *   (`INVALID_TIME_RANGE`), `pageToken` (`INVALID_PAGE_TOKEN`), `outcome`.
 */
export async function listDecisions(
  store: DecisionStore | undefined,
  request: ListDecisionsRequest,
): Promise<DecisionPage> {
  const query = checkedQuery(request);
  if (store === undefined) {
    throw new AgentHooksError(
      'failed_precondition',
      'AUDIT_STORE_DISABLED',
      'the decision audit log is not kept in the store: start the sidecar with --audit-store',
    );
  }
  // One more than the page: tells whether a next page exists.
  const rows = await store.listDecisions(
    extend(query, { limit: query.limit + 1, maxBytes: MAX_PAGE_BYTES }),
  );
  const page = pageOf(rows, query.limit);
  const last = page.at(-1);
  return {
    decisions: page.map((row) => fromBinary(DecisionRecordSchema, row.record)),
    nextPageToken:
      rows.length > page.length && last !== undefined
        ? encodeToken(last.time, last.decisionId, filterKey(request))
        : '',
  };
}

/** The first rows within `limit` entries and {@link MAX_PAGE_BYTES} (at least one row). */
function pageOf<T extends { readonly record: Uint8Array }>(rows: readonly T[], limit: number): T[] {
  let bytes = 0;
  let end = 0;
  while (end < rows.length && end < limit) {
    bytes += (rows[end] as T).record.byteLength + RECORD_FRAMING_BYTES;
    if (end > 0 && bytes > MAX_PAGE_BYTES) break;
    end += 1;
  }
  return rows.slice(0, end);
}

/** Validates the whole request into a store query. */
function checkedQuery(request: ListDecisionsRequest): DecisionQuery {
  if (request.operationId !== '') validateOperationId(request.operationId, 'operationId');
  const size = request.pageSize;
  if (size < 0 || size > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError(
      'pageSize',
      'PAGE_SIZE_OUT_OF_RANGE',
      `pageSize must be 0 (for ${DEFAULT_PAGE_SIZE}) to ${MAX_PAGE_SIZE}, got ${size}`,
    );
  }
  if (DecisionOutcome[request.outcome] === undefined) {
    throw new InvalidArgumentError(
      'outcome',
      'INVALID_ENUM_VALUE',
      `outcome ${request.outcome} is not a DecisionOutcome`,
    );
  }
  const from = timeMs(request.startTime, 'startTime');
  const to = timeMs(request.endTime, 'endTime');
  const { startTime, endTime } = request;
  if (
    startTime !== undefined &&
    endTime !== undefined &&
    (endTime.seconds < startTime.seconds ||
      (endTime.seconds === startTime.seconds && endTime.nanos <= startTime.nanos))
  ) {
    throw new InvalidArgumentError(
      'endTime',
      'INVALID_TIME_RANGE',
      'endTime must be after startTime',
    );
  }
  const query: {
    operationId?: string;
    from?: number;
    to?: number;
    outcome?: number;
    before?: { time: number; decisionId: string };
    limit: number;
  } = { limit: size === 0 ? DEFAULT_PAGE_SIZE : size };
  if (request.operationId !== '') query.operationId = request.operationId;
  if (from !== undefined) query.from = from;
  if (to !== undefined) query.to = to;
  if (request.outcome !== DecisionOutcome.UNSPECIFIED) query.outcome = request.outcome;
  if (request.pageToken !== '') {
    query.before = decodeToken(request.pageToken, filterKey(request));
  }
  return query;
}

/**
 * A Timestamp in epoch milliseconds, rounded up, or undefined when unset.
 * Records carry whole milliseconds, so rounding up keeps both bounds exact:
 * a record is at or after a start, and before an end, exactly when its
 * millisecond is at or after the start's, and before the end's, rounded up.
 */
function timeMs(t: Timestamp | undefined, field: string): number | undefined {
  if (t === undefined) return undefined;
  if (
    t.seconds < MIN_TIMESTAMP_SECONDS ||
    t.seconds > MAX_TIMESTAMP_SECONDS ||
    t.nanos < 0 ||
    t.nanos > 999_999_999
  ) {
    throw new InvalidArgumentError(
      field,
      'INVALID_TIME_RANGE',
      `${field} is not a valid timestamp (years 1 to 9999, nanos 0 to 999999999)`,
    );
  }
  return Number(t.seconds) * 1000 + Math.ceil(t.nanos / 1e6);
}

/** Identifies the filters a token belongs to. */
function filterKey(request: ListDecisionsRequest): string {
  const text = JSON.stringify([
    request.operationId,
    request.startTime === undefined
      ? null
      : `${request.startTime.seconds}.${request.startTime.nanos}`,
    request.endTime === undefined ? null : `${request.endTime.seconds}.${request.endTime.nanos}`,
    request.outcome,
  ]);
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}

function encodeToken(time: number, decisionId: string, filters: string): string {
  return Buffer.from(JSON.stringify({ t: time, i: decisionId, f: filters })).toString('base64url');
}

/**
 * What a decision id is made of (`audit/decision-id.ts`: a UUID in lower-case
 * hex): a token's id is checked against it before it reaches a query, so a
 * forged token (the token is not signed) cannot carry what a store's text
 * column refuses, such as U+0000.
 */
const DECISION_ID_TEXT = /^[0-9a-f-]{1,64}$/;

function decodeToken(token: string, filters: string): { time: number; decisionId: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const p = parsed as { t?: unknown; i?: unknown; f?: unknown } | undefined;
  if (
    p === undefined ||
    p === null ||
    typeof p !== 'object' ||
    !Number.isSafeInteger(p.t) ||
    typeof p.i !== 'string' ||
    !DECISION_ID_TEXT.test(p.i) ||
    p.f !== filters
  ) {
    throw new InvalidArgumentError(
      'pageToken',
      'INVALID_PAGE_TOKEN',
      'pageToken is not a token this sidecar issued for the same filters',
    );
  }
  return { time: p.t as number, decisionId: p.i };
}
