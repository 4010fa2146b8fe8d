/**
 * @module The audit log's stdout and HTTP sinks against real peers: a
 * non-blocking pipe to a child process that reads slowly (the stdout sink
 * writes each line exactly once and whole), and an HTTP receiver that refuses
 * large bodies with 413 or answers another 4xx (the sink splits, or drops and
 * counts, rather than sending the same batch forever).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { create } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { DecisionRecordSchema } from '../../gen/agenthooks/v1/audit_pb.js';
import { AuditLog, type AuditMetrics } from '../../src/audit/audit-log.js';
import { createLogger } from '../../src/log.js';
import { type ReceivedRequest, startReceiver } from '../support/receiver.js';

const logger = createLogger({ level: 'error', write: () => undefined });

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function record(i: number) {
  return create(DecisionRecordSchema, {
    decisionId: `dec_${String(i).padStart(6, '0')}`,
    operationId: 'op-sinks',
    // Some bulk, so that the batches outgrow a pipe's 64 KiB.
    reason: 'r'.repeat(200),
  });
}

/** Counts of what the sinks report, by sink. */
function countingMetrics() {
  const counts = { written: 0, dropped: 0, failed: 0 };
  const metrics: AuditMetrics = {
    auditWritten: (_sink, n) => {
      counts.written += n;
    },
    auditDropped: (_sink, n) => {
      counts.dropped += n;
    },
    auditFailed: () => {
      counts.failed += 1;
    },
    auditBuffered: () => undefined,
  };
  return { counts, metrics };
}

describe('the stdout sink', () => {
  it('writes every line once and whole through a full non-blocking pipe to a slow reader', async () => {
    // The reader takes nothing for 300 ms, so the pipe fills and refuses writes (EAGAIN).
    const child = spawn(
      process.execPath,
      [
        '-e',
        'setTimeout(() => { const out = []; process.stdin.on("data", (c) => out.push(c)); process.stdin.on("end", () => process.stdout.write(Buffer.concat(out))); }, 300)',
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    cleanups.push(() => child.kill());
    const chunks: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    const fd = (child.stdin as unknown as { _handle: { fd: number } })._handle.fd;
    const { counts, metrics } = countingMetrics();
    const audit = new AuditLog({ stdoutFd: fd, logger, metrics });
    const total = 2_000;
    for (let i = 0; i < total; i++) audit.record(record(i));
    await audit.flush();
    child.stdin.end();
    await once(child, 'exit');

    const lines = Buffer.concat(chunks).toString('utf8').split('\n');
    expect(lines.pop()).toBe('');
    const ids = lines.map((line) => (JSON.parse(line) as { decisionId: string }).decisionId);
    expect(ids).toEqual(Array.from({ length: total }, (_, i) => record(i).decisionId));
    expect(counts).toEqual({ written: total, dropped: 0, failed: 0 });
  });
});

/** The decision ids of an HTTP sink batch. */
function idsOf(req: ReceivedRequest): string[] {
  return (JSON.parse(gunzipSync(req.raw).toString('utf8')) as { decisionId: string }[]).map(
    (r) => r.decisionId,
  );
}

/** An HTTP sink on a receiver answering `answer`, with `total` entries recorded, then flushed. */
async function httpSink(total: number, answer: (ids: string[], res: ServerResponse) => void) {
  const receiver = await startReceiver({
    answer: (req, res) => answer(idsOf(req), res),
  });
  cleanups.push(() => receiver.close());
  const { counts, metrics } = countingMetrics();
  const lines: string[] = [];
  const audit = new AuditLog({
    httpUrl: `${receiver.url}/audit`,
    logger: createLogger({ level: 'warn', write: (line) => lines.push(line) }),
    metrics,
  });
  cleanups.push(() => audit.close(1_000));
  for (let i = 0; i < total; i++) audit.record(record(i));
  await audit.flush();
  const accepted = () =>
    receiver.requests.filter((_req, i) => statuses[i] === 200).flatMap((req) => idsOf(req));
  return { audit, counts, accepted, receiver, lines };
}

/** Status of each answer, in order, as the tests' answer functions wrote them. */
let statuses: number[] = [];
afterEach(() => {
  statuses = [];
});

function reply(res: ServerResponse, status: number) {
  statuses.push(status);
  res.writeHead(status).end();
}

describe('the HTTP sink', () => {
  it('splits a batch the endpoint finds too large (413) until it takes the parts, in order', async () => {
    const total = 40;
    // Takes at most 8 entries a request.
    const { counts, accepted } = await httpSink(total, (ids, res) =>
      reply(res, ids.length > 8 ? 413 : 200),
    );
    expect(accepted()).toEqual(Array.from({ length: total }, (_, i) => record(i).decisionId));
    expect(counts).toEqual({ written: total, dropped: 0, failed: 0 });
  });

  it('drops, and counts, what the endpoint refuses for good (400, or one entry still too large)', async () => {
    const refused = record(7).decisionId;
    const tooLarge = record(20).decisionId;
    const { counts, accepted } = await httpSink(30, (ids, res) => {
      if (ids.includes(tooLarge) || ids.length > 10) reply(res, 413);
      else reply(res, ids.includes(refused) ? 400 : 200);
    });
    const all = Array.from({ length: 30 }, (_, i) => record(i).decisionId);
    const got = accepted();
    // The part that holds the refused entry went as a whole; the oversized one alone.
    expect(got).not.toContain(refused);
    expect(got).not.toContain(tooLarge);
    expect(got).toContain(record(21).decisionId);
    expect(got).toEqual(all.filter((id) => got.includes(id)));
    expect(counts).toEqual({ written: got.length, dropped: 30 - got.length, failed: 0 });
  });

  it('does not send again the parts it sent when a later part fails, and retries only the rest', async () => {
    let failOnce = true;
    const { audit, counts, accepted } = await httpSink(20, (ids, res) => {
      if (ids.length > 5) return reply(res, 413);
      // The part from the 11th entry on fails once (the endpoint briefly down).
      if (ids[0] === record(10).decisionId && failOnce) {
        failOnce = false;
        return reply(res, 503);
      }
      reply(res, 200);
    });
    expect(counts).toEqual({ written: 10, dropped: 0, failed: 1 });
    await audit.flush();
    expect(accepted()).toEqual(Array.from({ length: 20 }, (_, i) => record(i).decisionId));
    expect(counts).toEqual({ written: 20, dropped: 0, failed: 1 });
  });

  it('bounds the requests of an endpoint that refuses every entry (413), logging the drops once', async () => {
    const { counts, receiver, lines } = await httpSink(1_000, (_ids, res) => reply(res, 413));
    // One attempt: at most 48 requests, some single entries dropped, the rest kept for later.
    expect(receiver.requests.length).toBe(48);
    expect(counts.written).toBe(0);
    expect(counts.dropped).toBeGreaterThan(0);
    expect(counts.failed).toBe(1);
    expect(lines.filter((l) => l.includes('refused decision audit entries'))).toHaveLength(1);
  });
});
