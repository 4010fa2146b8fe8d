/**
 * Signed webhooks on the real sidecar: secrets declared in a mounted env
 * file, hooks naming them, and receivers that verify with the
 * `standardwebhooks` libraries (npm here, PyPI through a Python script over
 * the captured requests). A mixed run (notification, control, modifying
 * hook, QStash publish and fetch fallback after a QStash failure) verifies;
 * a replay minutes later and a tampered body do not; during rotation both
 * secrets verify; a hook for an undeclared or unbound secret is refused,
 * and fails at delivery once its declaration goes; no secret reaches the
 * database file, a log line or `/metrics`.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type * as http from 'node:http';
import { dirname, join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  HookSchema,
  ModifyPoint,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { type FakeQStash, startFakeQStash } from '../delivery/qstash-server.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/receiver.js';
import {
  killSidecar,
  REPO_ROOT,
  type SidecarProcess,
  startSidecar,
  tempDbPath,
  withTimeout,
} from '../support/sidecar.js';

const OLD = `whsec_${randomBytes(32).toString('base64')}`;
const NEW = `whsec_${randomBytes(32).toString('base64')}`;
const QSTASH_TOKEN = 'qstash-e2e-token';
const VENV_PYTHON = join(REPO_ROOT, '.venv', 'bin', 'python');
const VERIFIER = join(REPO_ROOT, 'test', 'e2e', 'python', 'verify_webhooks.py');

let sidecar: SidecarProcess;
let receiver: Receiver;
let qstash: FakeQStash;
let envFile: string;
let generation = 1;

/** The three Standard Webhooks headers of a captured request. */
function signed(req: ReceivedRequest): Record<string, string> {
  return {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  };
}

/**
 * The README's TypeScript receiver: verify the raw body with the three
 * `webhook-*` headers; throws on a bad signature or a stale timestamp.
 */
function verify(secret: string, req: { body: string; headers: Record<string, string> }): unknown {
  return new StandardWebhook(secret).verify(req.body, req.headers);
}

function verifies(secret: string, req: ReceivedRequest): boolean {
  try {
    verify(secret, { body: req.body, headers: signed(req) });
    return true;
  } catch {
    return false;
  }
}

/** Writes the env file and waits until the sidecar loaded it (SIGHUP). */
async function declare(lines: readonly string[]): Promise<void> {
  writeFileSync(envFile, `${[`QSTASH_TOKEN=${QSTASH_TOKEN}`, ...lines].join('\n')}\n`);
  sidecar.kill('SIGHUP');
  generation += 1;
  const want = generation;
  // The file watcher may reload too: wait for any reload at or past this one.
  await withTimeout(
    sidecar.waitForLog((l) => l.msg === 'environment reloaded' && (l.generation as number) >= want),
    10_000,
    'the sidecar did not reload its environment',
  );
  generation = Math.max(
    generation,
    ...sidecar.logs
      .filter((l) => l.msg === 'environment reloaded')
      .map((l) => l.generation as number),
  );
}

function client() {
  return createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
}

beforeAll(async () => {
  receiver = await startReceiver({
    answer: (req: ReceivedRequest, res: http.ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.path.endsWith('/control')) res.end(JSON.stringify({ decision: 'allow' }));
      else if (req.path.endsWith('/modify'))
        res.end(JSON.stringify({ messages: [{ role: 'user', content: 'redacted' }] }));
      else res.end('{}');
    },
  });
  qstash = await startFakeQStash(QSTASH_TOKEN);
  const db = tempDbPath();
  // Beside the database, as a mounted Secret would be; the database check skips it.
  envFile = join(dirname(db), 'signing.env');
  writeFileSync(
    envFile,
    [
      `QSTASH_TOKEN=${QSTASH_TOKEN}`,
      `AGENTHOOKS_SIGNING_SECRET_RECEIVER=${OLD}`,
      `AGENTHOOKS_SIGNING_ORIGINS_RECEIVER=${receiver.url}`,
      '',
    ].join('\n'),
  );
  sidecar = await startSidecar({
    db,
    args: ['--qstash-url', qstash.url, '--hooks-env-file', envFile],
  });
}, 30_000);

afterAll(async () => {
  await killSidecar(sidecar);
  await receiver?.close();
  await qstash?.close();
});

const context = (operationId: string, toolCallId: string) => ({
  operationId,
  toolCallId,
  identifier: 'search',
  apiName: 'query',
  executor: Executor.SERVER,
  stepIndex: 0,
  callIndex: 0,
  assistantMessageId: 'msg-1',
  userId: 'u',
});

/** Registers a notification, a control, a modifying hook and a QStash notification, all signed. */
async function registerMixed(operationId: string): Promise<void> {
  const url = (path: string) => `${receiver.url}/${operationId}${path}`;
  await client().registerHooks({
    operationId,
    hooks: [
      create(HookSchema, {
        id: 'notify',
        type: HookType.AFTER_TOOL_CALL,
        webhook: { url: url('/notify'), signingSecret: 'RECEIVER' },
      }),
      create(HookSchema, {
        id: 'queued',
        type: HookType.AFTER_TOOL_CALL,
        webhook: {
          url: url('/queued'),
          signingSecret: 'RECEIVER',
          delivery: Delivery.QSTASH,
          fallback: Fallback.FETCH,
        },
      }),
      create(HookSchema, {
        id: 'control',
        type: HookType.BEFORE_TOOL_CALL,
        webhook: {
          url: url('/control'),
          signingSecret: 'RECEIVER',
          responseHandling: ResponseHandling.TOOL_CALL,
        },
      }),
      create(HookSchema, {
        id: 'modify',
        point: ModifyPoint.TRANSFORM_CONTEXT,
        webhook: { url: url('/modify'), signingSecret: 'RECEIVER' },
      }),
    ],
  });
}

/** Runs one decision, one afterToolCall dispatch and one Modify on `operationId`. */
async function runMixed(operationId: string, toolCallId: string) {
  const decision = await client().decideToolCall({
    event: { context: context(operationId, toolCallId) },
  });
  expect(decision.decision?.outcome.case).toBe('allow');
  const dispatched = await client().dispatch({
    event: {
      event: {
        case: 'afterToolCall',
        value: { context: context(operationId, toolCallId), result: { content: 'ok' } },
      },
    },
  });
  const modified = await client().modify({
    operationId,
    point: ModifyPoint.TRANSFORM_CONTEXT,
    contextJson: '{"messages":[{"role":"user","content":"card 4111"}]}',
  });
  return { decision, dispatched, modified };
}

function requestsOf(operationId: string): ReceivedRequest[] {
  return receiver.requests.filter((r) => r.path.startsWith(`/${operationId}/`));
}

function reasonOf(e: unknown): string | undefined {
  if (!(e instanceof ConnectError)) return undefined;
  return e.findDetails(ErrorInfoSchema)[0]?.reason;
}

describe('signed webhooks', () => {
  it('refuses a hook naming an undeclared secret or a secret bound to another origin', async () => {
    for (const [url, name, reason] of [
      [`${receiver.url}/x`, 'NOPE', 'UNDECLARED_SIGNING_SECRET'],
      ['http://127.0.0.2:9/x', 'RECEIVER', 'SIGNING_SECRET_NOT_BOUND'],
    ] as const) {
      const e = await client()
        .registerHooks({
          operationId: 'op-refused',
          hooks: [
            create(HookSchema, {
              id: 'h',
              type: HookType.AFTER_STEP,
              webhook: { url, signingSecret: name },
            }),
          ],
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(e).toBeInstanceOf(ConnectError);
      expect((e as ConnectError).code).toBe(Code.InvalidArgument);
      expect(reasonOf(e)).toBe(reason);
      expect((e as ConnectError).rawMessage).toContain('signingSecret');
    }
  });

  it('signs every delivery of a mixed run; receivers in TS and Python verify, replays and tampering fail', async () => {
    const op = 'op-mixed';
    await registerMixed(op);
    // The first publish fails: the notification goes by the fetch fallback.
    qstash.behaviour = { kind: 'status', status: 503 };
    const { dispatched, modified } = await runMixed(op, 'call-1');
    expect(dispatched.outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['notify', HookOutcomeStatus.DELIVERED],
      ['queued', HookOutcomeStatus.DELIVERED],
    ]);
    expect(modified.outcome.case).toBe('resultJson');
    // A second run through an accepting QStash, which forwards the message.
    qstash.behaviour = { kind: 'accept' };
    await client().dispatch({
      event: {
        event: {
          case: 'afterToolCall',
          value: { context: context(op, 'call-2'), result: { content: 'ok' } },
        },
      },
    });
    await receiver.waitForRequests(6);
    const requests = requestsOf(op);
    expect(requests.map((r) => r.path.slice(op.length + 2)).sort()).toEqual(
      ['control', 'modify', 'notify', 'notify', 'queued', 'queued'].sort(),
    );
    expect(qstash.violations).toEqual([]);
    // The failed publish and its fallback are one message: one webhook-id.
    const failedPublishId = qstash.publishes[0]?.forwarded['webhook-id'];
    const fallback = requests.find(
      (r) => r.path.endsWith('/queued') && r.headers['webhook-id'] === failedPublishId,
    );
    expect(fallback).toBeDefined();
    const ids = new Set(requests.map((r) => r.headers['webhook-id']));
    expect(ids.size).toBe(requests.length);

    for (const req of requests) {
      expect(verifies(OLD, req), req.path).toBe(true);
      expect(verifies(NEW, req), req.path).toBe(false);
    }
    const [sample] = requests;
    if (sample === undefined) throw new Error('no request');
    // A tampered body fails.
    expect(() =>
      verify(OLD, { body: sample.body.replace('}', ',"x":1}'), headers: signed(sample) }),
    ).toThrow();
    // The same request replayed ten minutes later fails on its timestamp.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 10 * 60 * 1000);
      expect(() => verify(OLD, { body: sample.body, headers: signed(sample) })).toThrow(
        /timestamp/i,
      );
    } finally {
      vi.useRealTimers();
    }

    // The Python receiver, over the same captured requests.
    expect(existsSync(VENV_PYTHON), 'no .venv: run scripts/install-client-tools.sh').toBe(true);
    const cases = [
      ...requests.map((r) => ({ body: r.body, headers: signed(r), secret: 'OLD' })),
      ...requests.map((r) => ({ body: r.body, headers: signed(r), secret: 'NEW' })),
      { body: sample.body.replace('}', ',"x":1}'), headers: signed(sample), secret: 'OLD' },
      { body: sample.body, headers: signed(sample), secret: 'OLD', shiftSeconds: 600 },
    ];
    const python = spawnSync(VENV_PYTHON, [VERIFIER], {
      input: JSON.stringify(cases),
      env: { OLD, NEW, PYTHONDONTWRITEBYTECODE: '1' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(python.status, python.stderr).toBe(0);
    const results = JSON.parse(python.stdout) as string[];
    expect(results).toEqual([
      ...requests.map(() => 'ok'),
      ...requests.map(() => 'WebhookVerificationError'),
      'WebhookVerificationError',
      'WebhookVerificationError',
    ]);
  }, 30_000);

  it('verifies with both secrets during rotation, then only the new one', async () => {
    const op = 'op-rotate';
    await registerMixed(op);
    await declare([
      `AGENTHOOKS_SIGNING_SECRET_RECEIVER=${OLD} ${NEW}`,
      `AGENTHOOKS_SIGNING_ORIGINS_RECEIVER=${receiver.url}`,
    ]);
    const before = receiver.count();
    await runMixed(op, 'call-r1');
    await receiver.waitForRequests(before + 4);
    const rotating = requestsOf(op);
    expect(rotating.length).toBeGreaterThanOrEqual(3);
    for (const req of rotating) {
      expect(String(req.headers['webhook-signature']).split(' ')).toHaveLength(2);
      expect(verifies(OLD, req)).toBe(true);
      expect(verifies(NEW, req)).toBe(true);
    }
    await declare([
      `AGENTHOOKS_SIGNING_SECRET_RECEIVER=${NEW}`,
      `AGENTHOOKS_SIGNING_ORIGINS_RECEIVER=${receiver.url}`,
    ]);
    const seen = new Set(rotating);
    await runMixed(op, 'call-r2');
    await withTimeout(
      (async () => {
        while (requestsOf(op).filter((r) => !seen.has(r)).length < 4) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })(),
      10_000,
      'the rotated requests did not arrive',
    );
    for (const req of requestsOf(op).filter((r) => !seen.has(r))) {
      expect(verifies(NEW, req)).toBe(true);
      expect(verifies(OLD, req)).toBe(false);
    }
  }, 30_000);

  it('fails a hook whose secret is no longer declared instead of sending it unsigned', async () => {
    const op = 'op-gone';
    await client().registerHooks({
      operationId: op,
      hooks: [
        create(HookSchema, {
          id: 'notify',
          type: HookType.AFTER_TOOL_CALL,
          webhook: { url: `${receiver.url}/${op}/notify`, signingSecret: 'RECEIVER' },
        }),
      ],
    });
    await declare([]);
    const dispatched = await client().dispatch({
      event: {
        event: {
          case: 'afterToolCall',
          value: { context: context(op, 'call-g'), result: { content: 'ok' } },
        },
      },
    });
    expect(dispatched.outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['notify', HookOutcomeStatus.FAILED],
    ]);
    expect(dispatched.outcomes[0]?.errorCode).toBe('configuration');
    expect(dispatched.outcomes[0]?.message).toContain('signing secret');
    expect(requestsOf(op)).toEqual([]);
  });

  it('keeps every secret out of the database file, the log and /metrics', async () => {
    const metrics = await (await fetch(`http://${sidecar.http}/metrics`)).text();
    const files = readdirSync(sidecar.dir)
      .filter((f) => f.startsWith('agenthooks.db'))
      .map((f) => readFileSync(join(sidecar.dir, f)));
    const logs = JSON.stringify(sidecar.logs);
    expect(files.length).toBeGreaterThan(0);
    expect(logs).toContain('environment reloaded');
    for (const secret of [OLD, NEW]) {
      const bare = secret.slice('whsec_'.length);
      for (const text of [metrics, logs, ...files.map((b) => b.toString('latin1'))]) {
        expect(text).not.toContain(bare);
      }
      // The decoded key bytes are not in the database either.
      const key = Buffer.from(bare, 'base64');
      for (const bytes of files) expect(bytes.includes(key)).toBe(false);
    }
  });
});
