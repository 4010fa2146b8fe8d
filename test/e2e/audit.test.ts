/**
 * The decision audit log against the real sidecar process: one entry per
 * decision in every sink (the store through ListDecisions, stdout lines, the
 * HTTP sink's gzip batches), each matching its RPC's answer and decision id;
 * masks keep a field out of every sink and the database file; the store
 * sink's group commits survive a SIGKILL but for the last moments; an HTTP
 * sink that is down keeps at most its buffer, counted in the metrics.
 */
import { gunzipSync } from 'node:zlib';
import { create, fromJsonString, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DecisionKind,
  DecisionOutcome,
  type DecisionRecord,
  DecisionRecordSchema,
  ListDecisionsRequestSchema,
  type ListDecisionsResponse,
  ListDecisionsResponseSchema,
} from '../../gen/agenthooks/v1/audit_pb.js';
import { DenyClassification } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DecideToolCallRequestSchema,
  DecideToolCallResponseSchema,
  DecideToolResultRequestSchema,
  DecideToolResultResponseSchema,
  ModifyRequestSchema,
  ModifyResponseSchema,
  ParkToolCallRequestSchema,
  PublishDeferredResultRequestSchema,
  PublishDeferredResultResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { extend } from '../../src/extend.js';
import {
  type AnyClient,
  errorInfoOf,
  fromLoaderObject,
  hookClient,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { openHandlerStream } from '../support/handler-client.js';
import { eventually, metric } from '../support/observe.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar, tempDbPath } from '../support/sidecar.js';

/** A value that must reach no audit output: it is in the masked fields only. */
const SECRET = 'hunter2-audit-secret';

const CONTEXT = {
  assistantMessageId: 'msg_1',
  identifier: 'fs',
  apiName: 'readFile',
  callIndex: 0,
  stepIndex: 1,
  executor: Executor.SERVER,
};

/** What one RPC answered: its decision id and the outcome the audit entry must show. */
interface Answered {
  readonly decisionId: string;
  readonly kind: DecisionKind;
  readonly outcome: DecisionOutcome;
  readonly operationId: string;
  readonly reason?: string;
  readonly classification?: DenyClassification;
  readonly hookIds: readonly string[];
}

async function decideToolCall(
  client: AnyClient,
  operationId: string,
  toolCallId: string,
  args: JsonObject = { path: '/tmp/x', password: SECRET },
) {
  const req = create(DecideToolCallRequestSchema, {
    event: { context: extend(CONTEXT, { operationId, toolCallId, args }) },
  });
  const res = await unary(
    client,
    'DecideToolCall',
    toLoaderObject(DecideToolCallRequestSchema, req),
  );
  return fromLoaderObject(DecideToolCallResponseSchema, res);
}

async function decideToolResult(client: AnyClient, operationId: string, toolCallId: string) {
  const req = create(DecideToolResultRequestSchema, {
    event: {
      context: extend(CONTEXT, { operationId, toolCallId, args: { path: '/tmp/x' } }),
      mocked: false,
      result: { content: `the file says ${SECRET}`, success: true },
    },
  });
  const res = await unary(
    client,
    'DecideToolResult',
    toLoaderObject(DecideToolResultRequestSchema, req),
  );
  return fromLoaderObject(DecideToolResultResponseSchema, res);
}

async function modify(client: AnyClient, init: MessageInitShape<typeof ModifyRequestSchema>) {
  const req = create(ModifyRequestSchema, init);
  const res = await unary(client, 'Modify', toLoaderObject(ModifyRequestSchema, req));
  return fromLoaderObject(ModifyResponseSchema, res);
}

async function listDecisions(
  client: AnyClient,
  init: MessageInitShape<typeof ListDecisionsRequestSchema>,
): Promise<ListDecisionsResponse> {
  const req = create(ListDecisionsRequestSchema, init);
  const res = await unary(client, 'ListDecisions', toLoaderObject(ListDecisionsRequestSchema, req));
  return fromLoaderObject(ListDecisionsResponseSchema, res);
}

/** Every entry of the store's log (with the given filters), page after page. */
async function listAll(
  client: AnyClient,
  init: MessageInitShape<typeof ListDecisionsRequestSchema> = {},
  pageSize = 7,
): Promise<DecisionRecord[]> {
  const all: DecisionRecord[] = [];
  let pageToken = '';
  for (let pages = 0; pages < 100; pages += 1) {
    const page = await listDecisions(client, extend(init, { pageSize, pageToken }));
    all.push(...page.decisions);
    if (page.nextPageToken === '') return all;
    pageToken = page.nextPageToken;
  }
  throw new Error('more than 100 pages');
}

/** The decisions of the HTTP sink's batches, each batch a gzip JSON array. */
function httpEntries(receiver: Receiver, from = 0): DecisionRecord[] {
  return receiver.requests
    .slice(from)
    .filter((r) => r.method === 'POST' && r.headers['content-encoding'] === 'gzip')
    .flatMap((r) => JSON.parse(gunzipSync(r.raw).toString('utf8')) as unknown[])
    .map((o) => fromJsonString(DecisionRecordSchema, JSON.stringify(o)));
}

/**
 * Answers the HTTP sink's requests 200 from now on (the earlier ones failed)
 * and waits until `entries` arrived; answers them and the requests before.
 */
async function recover(
  sink: Receiver,
  entries: number,
): Promise<{ failed: number; delivered: DecisionRecord[] }> {
  const failed = sink.requests.length;
  sink.respond({ status: 200 });
  const delivered = await eventually(
    () => httpEntries(sink, failed),
    (e) => e.length >= entries,
  );
  return { failed, delivered };
}

/** The decisions written on stdout, one proto JSON object per line. */
function stdoutEntries(sidecar: SidecarProcess): DecisionRecord[] {
  return sidecar.output
    .filter((l) => l.startsWith('{'))
    .map((l) => fromJsonString(DecisionRecordSchema, l));
}

function expectMatches(entry: DecisionRecord | undefined, a: Answered): void {
  expect(entry, `an entry for ${a.decisionId}`).toBeDefined();
  if (entry === undefined) return;
  expect(entry.kind).toBe(a.kind);
  expect(entry.outcome).toBe(a.outcome);
  expect(entry.operationId).toBe(a.operationId);
  if (a.reason !== undefined) expect(entry.reason).toBe(a.reason);
  if (a.classification !== undefined) expect(entry.classification).toBe(a.classification);
  expect(entry.outcomes.map((o) => o.hookId)).toEqual(a.hookIds);
  expect(entry.time).toBeDefined();
}

describe('the decision audit log, in every sink', () => {
  let controls: Receiver;
  let auditSink: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;
  const answered: Answered[] = [];

  beforeAll(async () => {
    controls = await startReceiver();
    controls.respond((req, res) => {
      if (req.path === '/deny') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ decision: 'deny', reason: 'not that file' }));
      } else if (req.path === '/broken') {
        res.writeHead(500);
        res.end();
      } else if (req.path === '/redact') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ messages: [{ role: 'user', content: '[redacted]' }] }));
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ decision: 'allow' }));
      }
    });
    auditSink = await startReceiver({ answer: { status: 200 } });
    sidecar = await startSidecar({
      args: [
        '--audit-store',
        '--audit-stdout',
        '--audit-http',
        `${auditSink.url}/decisions`,
        '--audit-payloads',
        '--audit-mask',
        '/args/password',
        '--audit-mask',
        '/result/content',
        '--audit-mask',
        '/context/messages/*/content',
      ],
      env: { AGENTHOOKS_AUDIT_HTTP_AUTHORIZATION: 'Bearer audit-sink-token' },
    });
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await controls?.close();
    await auditSink?.close();
  });

  it('records 20 decisions of every kind once, each matching its answer and id', async () => {
    const control = (id: string, path: string, type: string, onError = 'ON_ERROR_CONTINUE') => ({
      id,
      type,
      webhook: {
        url: `${controls.url}${path}`,
        responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
        onError,
      },
    });
    const before = 'HOOK_TYPE_BEFORE_TOOL_CALL';
    const after = 'HOOK_TYPE_AFTER_TOOL_CALL';
    await unary(client, 'RegisterHooks', {
      operationId: 'op-allow',
      hooks: [control('allow-1', '/allow', before), control('allow-r', '/allow', after)],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-deny',
      hooks: [control('deny-1', '/deny', before), control('deny-r', '/deny', after)],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-error',
      hooks: [control('broken-1', '/broken', before, 'ON_ERROR_BLOCK')],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-mock',
      hooks: [{ id: 'mocker', type: before, handler: true }],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-modify',
      hooks: [
        {
          id: 'redactor',
          point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
          webhook: { url: `${controls.url}/redact` },
        },
      ],
    });
    const runtime = openHandlerStream(client);
    runtime.answer(() => ({ mock: { result: { content: '{"items":[]}', success: true } } }));
    await runtime.attach(['op-mock']);

    let n = 0;
    const call = () => `call_${++n}`;
    for (let i = 0; i < 4; i += 1) {
      const res = await decideToolCall(client, 'op-allow', call());
      expect(res.decision?.outcome.case).toBe('allow');
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.TOOL_CALL,
        outcome: DecisionOutcome.ALLOW,
        operationId: 'op-allow',
        hookIds: ['allow-1'],
      });
    }
    for (let i = 0; i < 3; i += 1) {
      const res = await decideToolCall(client, 'op-deny', call());
      expect(res.decision?.outcome.case).toBe('deny');
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.TOOL_CALL,
        outcome: DecisionOutcome.DENY,
        operationId: 'op-deny',
        reason: 'not that file',
        classification: DenyClassification.HOOK_DENIED,
        hookIds: ['deny-1'],
      });
    }
    for (let i = 0; i < 3; i += 1) {
      const res = await decideToolCall(client, 'op-error', call());
      expect(res.decision?.outcome.case).toBe('deny');
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.TOOL_CALL,
        outcome: DecisionOutcome.DENY,
        operationId: 'op-error',
        reason: 'hook_control_error',
        classification: DenyClassification.HOOK_CONTROL_ERROR,
        hookIds: ['broken-1'],
      });
    }
    for (let i = 0; i < 2; i += 1) {
      const res = await decideToolCall(client, 'op-mock', call());
      expect(res.decision?.outcome.case).toBe('mock');
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.TOOL_CALL,
        outcome: DecisionOutcome.MOCK,
        operationId: 'op-mock',
        hookIds: ['mocker'],
      });
    }
    for (const [op, outcome, hook] of [
      ['op-allow', DecisionOutcome.ALLOW, 'allow-r'],
      ['op-allow', DecisionOutcome.ALLOW, 'allow-r'],
      ['op-deny', DecisionOutcome.DENY, 'deny-r'],
      ['op-deny', DecisionOutcome.DENY, 'deny-r'],
    ] as const) {
      const res = await decideToolResult(client, op, call());
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.TOOL_RESULT,
        outcome,
        operationId: op,
        hookIds: [hook],
      });
    }
    for (let i = 0; i < 3; i += 1) {
      const res = await modify(client, {
        operationId: 'op-modify',
        point: ModifyPoint.TRANSFORM_CONTEXT,
        contextJson: JSON.stringify({ messages: [{ role: 'user', content: SECRET }] }),
      });
      expect(res.outcome.case).toBe('resultJson');
      answered.push({
        decisionId: res.decisionId,
        kind: DecisionKind.MODIFY,
        outcome: DecisionOutcome.MODIFIED,
        operationId: 'op-modify',
        hookIds: ['redactor'],
      });
    }
    // A published deferred result, and one duplicate that answers the same id.
    const parked = create(ParkToolCallRequestSchema, {
      context: extend(CONTEXT, {
        operationId: 'op-allow',
        toolCallId: 'call_deferred',
        args: { password: SECRET },
      }),
    });
    await unary(client, 'ParkToolCall', {
      ...toLoaderObject(ParkToolCallRequestSchema, parked),
      kind: 'PARK_KIND_DEFERRED',
    });
    const publish = async () => {
      const req = create(PublishDeferredResultRequestSchema, {
        toolCallId: 'call_deferred',
        result: { content: `late ${SECRET}`, success: true },
      });
      const res = await unary(
        client,
        'PublishDeferredResult',
        toLoaderObject(PublishDeferredResultRequestSchema, req),
      );
      return fromLoaderObject(PublishDeferredResultResponseSchema, res);
    };
    const first = await publish();
    const duplicate = await publish();
    expect(first.published).toBe(true);
    expect(duplicate.published).toBe(false);
    expect(duplicate.decisionId).toBe(first.decisionId);
    answered.push({
      decisionId: first.decisionId,
      kind: DecisionKind.PUBLICATION,
      outcome: DecisionOutcome.ALLOW,
      operationId: 'op-allow',
      hookIds: ['allow-r'],
    });
    runtime.cancel();

    expect(answered).toHaveLength(20);
    const ids = answered.map((a) => a.decisionId);
    expect(new Set(ids).size).toBe(20);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab]/);

    // The store: every decision once, newest first across pages.
    const stored = await eventually(
      () => listAll(client),
      (all) => all.length >= 20,
    );
    expect(stored.map((d) => d.decisionId).sort()).toEqual([...ids].sort());
    const times = stored.map((d) => Number(d.time?.seconds) * 1e9 + (d.time?.nanos ?? 0));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    for (const a of answered)
      expectMatches(
        stored.find((d) => d.decisionId === a.decisionId),
        a,
      );
    // stdout and the HTTP sink: the same 20 entries.
    const lines = await eventually(
      () => stdoutEntries(sidecar),
      (e) => e.length >= 20,
    );
    expect(lines.map((d) => d.decisionId).sort()).toEqual([...ids].sort());
    const batches = await eventually(
      () => httpEntries(auditSink),
      (e) => e.length >= 20,
    );
    expect(batches.map((d) => d.decisionId).sort()).toEqual([...ids].sort());
    for (const a of answered) {
      expectMatches(
        lines.find((d) => d.decisionId === a.decisionId),
        a,
      );
      expectMatches(
        batches.find((d) => d.decisionId === a.decisionId),
        a,
      );
    }
    const post = auditSink.requests.find((r) => r.method === 'POST');
    expect(post?.path).toBe('/decisions');
    expect(post?.headers.authorization).toBe('Bearer audit-sink-token');
    expect(post?.headers['content-type']).toBe('application/json');
  });

  it('records payloads with the masked fields removed from every sink and the file', async () => {
    const all = await listAll(client);
    const allowEntry = all.find(
      (d) => d.kind === DecisionKind.TOOL_CALL && d.operationId === 'op-allow',
    );
    expect(JSON.parse(allowEntry?.payloadJson ?? '{}')).toEqual({ args: { path: '/tmp/x' } });
    const resultEntry = all.find((d) => d.kind === DecisionKind.TOOL_RESULT);
    expect(JSON.parse(resultEntry?.payloadJson ?? '{}').result).toEqual({ success: true });
    const modifyEntry = all.find((d) => d.kind === DecisionKind.MODIFY);
    expect(JSON.parse(modifyEntry?.payloadJson ?? '{}')).toEqual({
      context: { messages: [{ role: 'user' }] },
      result: { messages: [{ role: 'user', content: '[redacted]' }] },
    });
    const outputs = [
      ...all.map((d) => d.payloadJson),
      sidecar.output.join('\n'),
      ...auditSink.requests.map((r) => gunzipSync(r.raw).toString('utf8')),
    ];
    for (const text of outputs) expect(text).not.toContain(SECRET);
    // The store's rows themselves, read from the file.
    const db = new Database(sidecar.db, { readonly: true });
    try {
      const rows = db.prepare('SELECT record FROM decisions').all() as { record: Buffer }[];
      expect(rows).toHaveLength(20);
      for (const row of rows) expect(row.record.includes(Buffer.from(SECRET))).toBe(false);
    } finally {
      db.close();
    }
  });

  it('filters by operation, outcome and time range', async () => {
    const denied = await listAll(client, { outcome: DecisionOutcome.DENY });
    expect(denied.map((d) => d.decisionId).sort()).toEqual(
      answered
        .filter((a) => a.outcome === DecisionOutcome.DENY)
        .map((a) => a.decisionId)
        .sort(),
    );
    const mine = await listAll(client, { operationId: 'op-mock' });
    expect(mine).toHaveLength(2);
    const newest = (await listDecisions(client, { pageSize: 1 })).decisions[0];
    const newestMs =
      Number(newest?.time?.seconds) * 1000 + Math.floor((newest?.time?.nanos ?? 0) / 1e6);
    const none = await listAll(client, { startTime: timestampFromMs(newestMs + 1) });
    expect(none).toEqual([]);
    const upToNewest = await listAll(client, { endTime: timestampFromMs(newestMs + 1) });
    expect(upToNewest).toHaveLength(20);
    // Half a millisecond after the newest record: a start there leaves it
    // out, an end there keeps it, and the range between is valid (and empty).
    const half = (ms: number) => {
      const t = timestampFromMs(ms);
      t.nanos += 500_000;
      return t;
    };
    expect(await listAll(client, { startTime: half(newestMs) })).toEqual([]);
    expect(await listAll(client, { endTime: half(newestMs) })).toHaveLength(20);
    const inMs = await listAll(client, {
      startTime: timestampFromMs(newestMs),
      endTime: half(newestMs),
    });
    expect(inMs.map((d) => d.decisionId)).toContain(newest?.decisionId);
    for (const d of inMs) {
      expect(Number(d.time?.seconds) * 1000 + Math.floor((d.time?.nanos ?? 0) / 1e6)).toBe(
        newestMs,
      );
    }
  });

  it('refuses a bad page size, page token or time range, naming the field', async () => {
    const cases: [MessageInitShape<typeof ListDecisionsRequestSchema>, string, string][] = [
      [{ pageSize: 1001 }, 'pageSize', 'PAGE_SIZE_OUT_OF_RANGE'],
      [{ pageSize: -1 }, 'pageSize', 'PAGE_SIZE_OUT_OF_RANGE'],
      [{ pageToken: 'not-a-token' }, 'pageToken', 'INVALID_PAGE_TOKEN'],
      [
        { startTime: timestampFromMs(2_000), endTime: timestampFromMs(1_000) },
        'endTime',
        'INVALID_TIME_RANGE',
      ],
    ];
    for (const [init, field, reason] of cases) {
      const err = (await listDecisions(client, init).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code, field).toBe(3);
      expect(errorInfoOf(err)?.reason).toBe(reason);
      expect(errorInfoOf(err)?.metadata.field).toBe(field);
    }
    // A token of other filters is refused too.
    const page = await listDecisions(client, { pageSize: 1 });
    const err = (await listDecisions(client, {
      pageSize: 1,
      pageToken: page.nextPageToken,
      operationId: 'op-deny',
    }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(errorInfoOf(err)?.reason).toBe('INVALID_PAGE_TOKEN');
    // Tokens are not signed: one forged with an id no decision has (U+0000, which
    // PostgreSQL's text refuses) is refused before it reaches a query.
    const claims = JSON.parse(Buffer.from(page.nextPageToken, 'base64url').toString('utf8')) as {
      i: string;
    };
    for (const i of ['a\u0000', 'not an id', '']) {
      const forged = Buffer.from(JSON.stringify({ ...claims, i })).toString('base64url');
      const refused = (await listDecisions(client, { pageSize: 1, pageToken: forged }).catch(
        (e: unknown) => e,
      )) as grpc.ServiceError;
      expect(errorInfoOf(refused)?.reason, JSON.stringify(i)).toBe('INVALID_PAGE_TOKEN');
    }
  });
});

describe('the store sink across a SIGKILL, and a sink that is down', () => {
  it('keeps every decision answered more than 50 ms before a SIGKILL', async () => {
    const db = tempDbPath();
    const first = await startSidecar({ db, args: ['--audit-store'] });
    const client = hookClient(first.grpc);
    const answers: { id: string; at: number }[] = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; i < 2_000 && !stop; i += 1) {
        try {
          const res = await decideToolCall(client, 'op-kill', `kill_${i}`, { i });
          answers.push({ id: res.decisionId, at: performance.now() });
        } catch {
          return;
        }
      }
    })();
    await eventually(
      () => answers.length,
      (n) => n >= 200,
    );
    first.kill('SIGKILL');
    const killedAt = performance.now();
    stop = true;
    await loop;
    await first.exited;
    client.close();
    const second = await startSidecar({ db, args: ['--audit-store'] });
    const reader = hookClient(second.grpc);
    try {
      const kept = new Set(
        (await listAll(reader, { operationId: 'op-kill' }, 1000)).map((d) => d.decisionId),
      );
      const old = answers.filter((a) => a.at < killedAt - 50);
      expect(old.length).toBeGreaterThan(150);
      expect(old.filter((a) => !kept.has(a.id))).toEqual([]);
    } finally {
      reader.close();
      await killSidecar(second);
      await first.stop();
    }
  });

  it('keeps deciding while another process holds the SQLite write lock, and writes the entries once it is free', async () => {
    // A busy timeout longer than the test: had the store sink waited for the
    // lock, it would have held the event loop, and every decision, that long.
    const sidecar = await startSidecar({
      args: ['--audit-store', '--db-busy-timeout', '60', '--store-check-interval', '3600'],
    });
    const client = hookClient(sidecar.grpc);
    const lock = new Database(sidecar.db);
    try {
      const ids = [(await decideToolCall(client, 'op-lock', 'lock_warm')).decisionId];
      lock.exec('BEGIN IMMEDIATE');
      for (let i = 0; i < 20; i += 1) {
        ids.push((await decideToolCall(client, 'op-lock', `lock_${i}`)).decisionId);
      }
      expect(
        await eventually(
          () => metric(sidecar, 'agenthooks_audit_write_failures_total{sink="store"}'),
          (v) => v > 0,
        ),
      ).toBeGreaterThan(0);
      // Still deciding while the lock is held.
      ids.push((await decideToolCall(client, 'op-lock', 'lock_after')).decisionId);
      lock.exec('COMMIT');
      const kept = await eventually(
        async () =>
          (await listAll(client, { operationId: 'op-lock' }, 100)).map((d) => d.decisionId),
        (k) => k.length >= ids.length,
      );
      expect(kept.toSorted()).toEqual(ids.toSorted());
    } finally {
      if (lock.inTransaction) lock.exec('ROLLBACK');
      lock.close();
      client.close();
      await killSidecar(sidecar);
    }
  });

  it('drops the oldest past --audit-buffer while the HTTP sink is down, counts them, and sends the rest', async () => {
    const sink = await startReceiver({ answer: { status: 503 } });
    const sidecar = await startSidecar({
      // The webhooks' destination policy guards callers' URLs, not the operator's sink.
      args: ['--audit-http', `${sink.url}/in`, '--audit-buffer', '5', '--webhook-deny', 'loopback'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 12; i += 1) {
        ids.push((await decideToolCall(client, 'op-down', `down_${i}`)).decisionId);
      }
      expect(
        await eventually(
          () => metric(sidecar, 'agenthooks_audit_entries_dropped_total{sink="http"}'),
          (v) => v >= 7,
        ),
      ).toBe(7);
      expect(
        await eventually(
          () => metric(sidecar, 'agenthooks_audit_write_failures_total{sink="http"}'),
          (v) => v > 0,
        ),
      ).toBeGreaterThan(0);
      const { delivered } = await recover(sink, 5);
      expect(delivered.map((d) => d.decisionId)).toEqual(ids.slice(7));
      expect(await metric(sidecar, 'agenthooks_audit_entries_written_total{sink="http"}')).toBe(5);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await sink.close();
    }
  });

  it('bounds the buffer by bytes too: large recorded payloads drop the oldest, and batches split by size', async () => {
    const sink = await startReceiver({ answer: { status: 503 } });
    // Each entry weighs about 1.6 MB by the estimate (four bytes a payload
    // character): 5,000,000 bytes hold three, and a batch (4 MiB) two.
    const sidecar = await startSidecar({
      args: [
        '--audit-http',
        `${sink.url}/in`,
        '--audit-payloads',
        '--audit-buffer-bytes',
        '5000000',
        '--webhook-deny',
        'loopback',
      ],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 8; i += 1) {
        const args = { blob: `${i}`.repeat(400_000) };
        ids.push((await decideToolCall(client, 'op-bytes', `bytes_${i}`, args)).decisionId);
      }
      expect(
        await eventually(
          () => metric(sidecar, 'agenthooks_audit_entries_dropped_total{sink="http"}'),
          (v) => v >= 5,
        ),
      ).toBe(5);
      const { failed, delivered } = await recover(sink, 3);
      expect(delivered.map((d) => d.decisionId)).toEqual(ids.slice(5));
      const batches = sink.requests.slice(failed).filter((r) => r.method === 'POST');
      expect(
        batches.map((r) => (JSON.parse(gunzipSync(r.raw).toString('utf8')) as []).length),
      ).toEqual([2, 1]);
      expect(await metric(sidecar, 'agenthooks_audit_entries_written_total{sink="http"}')).toBe(3);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await sink.close();
    }
  });

  it('cuts a ListDecisions page at 4 MiB of records, and the pages still hold every entry once', async () => {
    const sidecar = await startSidecar({
      args: ['--audit-store', '--audit-payloads', '--webhook-deny', 'loopback'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const ids: string[] = [];
      // About 0.9 MB a record (under the 1 MiB payload bound): four fit in a page of 4 MiB.
      for (let i = 0; i < 5; i += 1) {
        const args = { blob: `${i}`.repeat(900_000) };
        ids.push((await decideToolCall(client, 'op-pages', `pages_${i}`, args)).decisionId);
      }
      // Written in group commits after the answers: wait until all five are stored.
      await eventually(
        () => listAll(client, { operationId: 'op-pages' }, 100),
        (all) => all.length === ids.length,
      );
      const sizes: number[] = [];
      const seen: string[] = [];
      let pageToken = '';
      for (let pages = 0; pages < 10; pages += 1) {
        const page = await listDecisions(client, {
          operationId: 'op-pages',
          pageSize: 100,
          pageToken,
        });
        sizes.push(page.decisions.length);
        seen.push(...page.decisions.map((d) => d.decisionId));
        if (page.nextPageToken === '') break;
        pageToken = page.nextPageToken;
      }
      expect(sizes).toEqual([4, 1]);
      expect(seen).toEqual([...ids].reverse());
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });

  it('records a payload over 1 MiB as its size alone, so a stock client (4 MiB) pages through every entry', async () => {
    const sidecar = await startSidecar({
      args: ['--audit-store', '--audit-payloads', '--webhook-deny', 'loopback'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const small = await decideToolCall(client, 'op-huge', 'huge_0', { path: '/a' });
      const huge = await decideToolCall(client, 'op-huge', 'huge_1', {
        blob: 'x'.repeat(5 * 1024 * 1024),
      });
      const all = await eventually(
        () => listAll(client, { operationId: 'op-huge' }, 2),
        (entries) => entries.length === 2,
      );
      expect(all.map((d) => d.decisionId)).toEqual([huge.decisionId, small.decisionId]);
      const [hugeEntry, smallEntry] = all;
      expect(JSON.parse(hugeEntry?.payloadJson ?? '')).toEqual({
        truncated: true,
        bytes: 5 * 1024 * 1024 + '{"args":{"blob":""}}'.length,
      });
      expect(JSON.parse(smallEntry?.payloadJson ?? '')).toEqual({ args: { path: '/a' } });
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });

  it('counts an operation chain toward the byte bound, payloads off', async () => {
    const sink = await startReceiver({ answer: { status: 503 } });
    // A chain of 128 ids of 256 characters: about 130 KB an entry by the
    // estimate, so 300,000 bytes hold two of five.
    const sidecar = await startSidecar({
      args: ['--audit-http', `${sink.url}/in`, '--audit-buffer-bytes', '300000'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const chain = Array.from({ length: 128 }, (_, i) => `${i}`.padStart(256, 'c'));
      const ids: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        const req = create(DecideToolCallRequestSchema, {
          operationChain: chain,
          event: {
            context: extend(CONTEXT, { operationId: 'op-chain', toolCallId: `chain_${i}` }),
          },
        });
        const res = await unary(
          client,
          'DecideToolCall',
          toLoaderObject(DecideToolCallRequestSchema, req),
        );
        ids.push(fromLoaderObject(DecideToolCallResponseSchema, res).decisionId);
      }
      expect(
        await eventually(
          () => metric(sidecar, 'agenthooks_audit_entries_dropped_total{sink="http"}'),
          (v) => v >= 3,
        ),
      ).toBe(3);
      const { delivered } = await recover(sink, 2);
      expect(delivered.map((d) => d.decisionId)).toEqual(ids.slice(3));
      expect(delivered[0]?.operationChain).toEqual(chain);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await sink.close();
    }
  });

  it('answers FAILED_PRECONDITION (AUDIT_STORE_DISABLED) when the store sink is off', async () => {
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      const res = await decideToolCall(client, 'op-off', 'off_1');
      expect(res.decisionId).toMatch(/^[0-9a-f-]{36}$/);
      const err = (await listDecisions(client, {}).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code).toBe(9);
      expect(errorInfoOf(err)?.reason).toBe('AUDIT_STORE_DISABLED');
    } finally {
      client.close();
      await killSidecar(sidecar);
    }
  });
});
