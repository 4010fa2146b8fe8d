/**
 * The operator plugins file on the real sidecar: its modifying hooks run for
 * every operation after the operation's own hooks, a changed file takes
 * effect without a restart (watched, and on SIGHUP), an invalid one fails
 * every `Modify` call closed with `INVALID_PLUGINS` while lifecycle calls go
 * on, and nothing of it is stored.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookOutcomeStatus, HookSource } from '../../gen/agenthooks/v1/decisions_pb.js';
import { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

let receiver: Receiver;
let sidecar: SidecarProcess;
let dir: string;
let pluginsFile: string;
let generation = 1;

const msg = (text: string) => ({ role: 'user', content: text });

/** A plugins file with one plugin whose transformContext hook posts to the receiver's `path`. */
function redactor(path: string, id = 'redact', url = `${receiver.url}${path}`) {
  return {
    plugins: [
      {
        name: 'privacy',
        hooks: [
          {
            id,
            point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
            webhook: { url, onError: 'ON_ERROR_BLOCK' },
          },
        ],
      },
    ],
  };
}

/** Replaces the plugins file atomically and waits until the sidecar loaded it. */
async function writePlugins(content: unknown): Promise<Record<string, unknown>> {
  const tmp = `${pluginsFile}.tmp`;
  writeFileSync(tmp, typeof content === 'string' ? content : JSON.stringify(content));
  renameSync(tmp, pluginsFile);
  generation += 1;
  const want = generation;
  return sidecar.waitForLog((l) => l.msg === 'plugins reloaded' && l.generation === want);
}

function client() {
  return createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
}

function transformContext(operationId: string, text: string) {
  return client().modify({
    operationId,
    point: ModifyPoint.TRANSFORM_CONTEXT,
    contextJson: JSON.stringify({ messages: [msg(text)], iteration: 1 }),
  });
}

function pathsSince(start: number): string[] {
  return receiver.requests.slice(start).map((r) => r.path);
}

beforeAll(async () => {
  receiver = await startReceiver({
    answer: (req, res) => {
      const body = req.json as { messages?: { content: string }[] };
      const messages = (body.messages ?? []).map((m) => ({
        ...m,
        content: req.path.startsWith('/own')
          ? `${m.content} [own]`
          : m.content.replaceAll(/\d{4,}/g, '[redacted]'),
      }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ messages }));
    },
  });
  dir = mkdtempSync(join(tmpdir(), 'agenthooks-plugins-e2e-'));
  pluginsFile = join(dir, 'plugins.json');
  writeFileSync(pluginsFile, JSON.stringify(redactor('/plugin-v1')));
  sidecar = await startSidecar({ args: ['--plugins-file', pluginsFile] });
  await sidecar.waitForLog((l) => l.msg === 'plugins reloaded' && l.generation === 1);
});

afterAll(async () => {
  await killSidecar(sidecar);
  await receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the operator plugins file', () => {
  it("runs its hooks after the operation's own, each seeing the value the previous one left", async () => {
    await client().registerHooks({
      operationId: 'op-own',
      hooks: [
        {
          id: 'own',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          webhook: { url: `${receiver.url}/own` },
        },
      ],
    });
    const start = receiver.requests.length;
    const answer = await transformContext('op-own', 'card 4111111111111111');
    expect(pathsSince(start)).toEqual(['/own', '/plugin-v1']);
    const pluginRequest = receiver.requests[start + 1]?.json;
    expect(pluginRequest).toMatchObject({
      messages: [msg('card 4111111111111111 [own]')],
      iteration: 1,
      operationId: 'op-own',
      hookId: 'redact',
      point: 'transformContext',
      plugin: 'privacy',
    });
    expect(answer.outcome.case).toBe('resultJson');
    expect(JSON.parse(answer.outcome.value as string)).toEqual({
      messages: [msg('card [redacted] [own]')],
    });
    expect(
      answer.outcomes.map((o) => [o.hookId, o.source, o.operationId, o.plugin, o.status]),
    ).toEqual([
      ['own', HookSource.CALLER, 'op-own', '', HookOutcomeStatus.DELIVERED],
      ['redact', HookSource.OPERATOR, '', 'privacy', HookOutcomeStatus.DELIVERED],
    ]);
  });

  it('runs for an operation that registered nothing, and is never stored with it', async () => {
    const start = receiver.requests.length;
    const answer = await transformContext('op-unregistered', 'call 5551234');
    expect(pathsSince(start)).toEqual(['/plugin-v1']);
    expect(JSON.parse(answer.outcome.value as string)).toEqual({
      messages: [msg('call [redacted]')],
    });
    const own = await client().listHooks({ operationId: 'op-own' });
    expect(own.hooks.map((h) => h.id)).toEqual(['own']);
    const none = await client().listHooks({ operationId: 'op-unregistered' });
    expect(none.hooks).toEqual([]);
  });

  it('takes a changed file without a restart, and reloads it on SIGHUP', async () => {
    const line = await writePlugins(redactor('/plugin-v2', 'redact-v2'));
    expect(line).toMatchObject({ cause: 'file', valid: true, plugins: 1, hooks: 1 });
    let start = receiver.requests.length;
    const answer = await transformContext('op-unregistered', 'pin 123456');
    expect(pathsSince(start)).toEqual(['/plugin-v2']);
    expect(answer.outcomes.map((o) => o.hookId)).toEqual(['redact-v2']);

    generation += 1;
    const want = generation;
    sidecar.kill('SIGHUP');
    const reloaded = await sidecar.waitForLog(
      (l) => l.msg === 'plugins reloaded' && l.generation === want,
    );
    expect(reloaded).toMatchObject({ cause: 'signal', valid: true });
    start = receiver.requests.length;
    await transformContext('op-unregistered', 'again');
    expect(pathsSince(start)).toEqual(['/plugin-v2']);
  });

  it('fails every Modify call with INVALID_PLUGINS while the file is invalid, the same over every protocol', async () => {
    const line = await writePlugins(redactor('', 'redact', 'ftp://nowhere'));
    expect(line).toMatchObject({ valid: false, reason: 'INVALID_PLUGINS' });
    const start = receiver.requests.length;
    const http = `http://${sidecar.http}`;
    const transports = [
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
      createConnectTransport({ baseUrl: http, httpVersion: '1.1' }),
      createConnectTransport({ baseUrl: http, httpVersion: '1.1', useBinaryFormat: true }),
      createGrpcWebTransport({ baseUrl: http, httpVersion: '1.1' }),
    ];
    const answers = [];
    for (const transport of transports) {
      const e = await createClient(HookService, transport)
        .modify({
          operationId: 'op-own',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          contextJson: JSON.stringify({ messages: [msg('card 4111')], iteration: 2 }),
        })
        .then(
          () => undefined,
          (err: unknown) => ConnectError.from(err),
        );
      const [info] = e?.findDetails(ErrorInfoSchema) ?? [];
      answers.push({
        code: e?.code,
        message: e?.rawMessage,
        reason: info?.reason,
        metadata: info?.metadata,
      });
    }
    // The same answer over gRPC, Connect JSON, Connect binary and gRPC-Web.
    for (const answer of answers) {
      expect(answer).toEqual({
        code: Code.FailedPrecondition,
        message: expect.stringContaining(
          `plugins file ${pluginsFile} is invalid at plugins[0].hooks[0].webhook.url`,
        ),
        reason: 'INVALID_PLUGINS',
        metadata: expect.objectContaining({
          pluginsFile,
          field: 'plugins[0].hooks[0].webhook.url',
          rule: 'INVALID_WEBHOOK_URL',
        }),
      });
      expect(answer.message).toBe(answers[0]?.message);
    }
    // Not even the operation's own hook ran: the call fails whole.
    expect(pathsSince(start)).toEqual([]);
    // Lifecycle hooks are not the plugins' business.
    const dispatched = await client().dispatch({
      event: {
        event: { case: 'afterStep', value: { operationId: 'op-own', userId: 'u-1' } },
      },
    });
    expect(dispatched.outcomes).toEqual([]);
    const metrics = await fetch(`http://${sidecar.http}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^agenthooks_plugins_valid 0$/m);

    await writePlugins(redactor('/plugin-v3'));
    const fixed = await transformContext('op-own', 'card 4111');
    expect(fixed.outcomes.map((o) => o.hookId)).toEqual(['own', 'redact']);
    const after = await fetch(`http://${sidecar.http}/metrics`).then((r) => r.text());
    expect(after).toMatch(/^agenthooks_plugins_valid 1$/m);
  });

  it('keeps failing closed on a file that is not JSON', async () => {
    const line = await writePlugins('{"plugins": [');
    expect(line).toMatchObject({ valid: false, reason: 'INVALID_PLUGINS' });
    expect(String(line.error)).toContain('is not JSON');
    const e = await transformContext('op-own', 'x').then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(e?.findDetails(ErrorInfoSchema)[0]?.reason).toBe('INVALID_PLUGINS');
  });
});

describe('the operator plugins file and the signing secrets of the environment file', () => {
  const SECRET = 'whsec_yWlUhzLwPm3so5jT3GCimELRfDLXNer2Qsyrrgg8doI=';

  it('checks the plugins again when the environment declares or removes their secret', async () => {
    const signedDir = mkdtempSync(join(tmpdir(), 'agenthooks-plugins-env-'));
    const envFile = join(signedDir, 'agenthooks.env');
    const signedPlugins = join(signedDir, 'plugins.json');
    writeFileSync(envFile, '');
    const plugin = redactor('/signed');
    const hook = plugin.plugins[0]?.hooks[0] as { webhook: Record<string, unknown> };
    hook.webhook.signingSecret = 'PLUG';
    writeFileSync(signedPlugins, JSON.stringify(plugin));
    const signed = await startSidecar({
      args: ['--plugins-file', signedPlugins, '--hooks-env-file', envFile],
    });
    const replaceEnv = (text: string) => {
      writeFileSync(`${envFile}.tmp`, text);
      renameSync(`${envFile}.tmp`, envFile);
    };
    const modify = () =>
      createClient(HookService, createGrpcTransport({ baseUrl: `http://${signed.grpc}` }))
        .modify({
          operationId: 'op-signed',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          contextJson: JSON.stringify({ messages: [msg('pin 123456')], iteration: 1 }),
        })
        .then(
          (answer) => answer.outcomes.map((o) => o.hookId),
          (err: unknown) => ConnectError.from(err).findDetails(ErrorInfoSchema)[0]?.reason,
        );
    try {
      const first = await signed.waitForLog((l) => l.msg === 'plugins reloaded');
      expect(first).toMatchObject({ valid: false, reason: 'INVALID_PLUGINS' });
      expect(await modify()).toBe('INVALID_PLUGINS');

      replaceEnv(
        `AGENTHOOKS_SIGNING_SECRET_PLUG=${SECRET}\nAGENTHOOKS_SIGNING_ORIGINS_PLUG=${receiver.url}\n`,
      );
      const declared = await signed.waitForLog(
        (l) => l.msg === 'plugins reloaded' && l.cause === 'environment' && l.valid === true,
      );
      expect(declared).toMatchObject({ plugins: 1, hooks: 1 });
      const start = receiver.requests.length;
      expect(await modify()).toEqual(['redact']);
      const sent = receiver.requests.slice(start);
      expect(sent.map((r) => r.path)).toEqual(['/signed']);
      expect(sent[0]?.headers['webhook-signature']).toMatch(/^v1,/);

      replaceEnv('');
      await signed.waitForLog(
        (l) => l.msg === 'plugins reloaded' && l.cause === 'environment' && l.valid === false,
      );
      expect(await modify()).toBe('INVALID_PLUGINS');
    } finally {
      await killSidecar(signed);
      rmSync(signedDir, { recursive: true, force: true });
    }
  });
});
