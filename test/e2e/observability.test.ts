import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { DecideToolCallRequestSchema } from '../../gen/agenthooks/v1/service_pb.js';
import { hookClient, toLoaderObject, unary } from '../support/grpc-client.js';
import { startReceiver } from '../support/receiver.js';
import { killSidecar, startSidecar } from '../support/sidecar.js';

/** Reads one sample of a Prometheus text exposition, e.g. `name{a="b"}`; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const body = line.slice(name.length + 1, line.indexOf('}'));
    const got = Object.fromEntries(
      [...body.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] as string, m[2] as string]),
    );
    if (wanted.every(([k, v]) => got[k] === v) && Object.keys(got).length === wanted.length) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return 0;
}

function decision(operationId: string) {
  return toLoaderObject(
    DecideToolCallRequestSchema,
    create(DecideToolCallRequestSchema, {
      event: {
        context: {
          toolCallId: `t-${operationId}`,
          assistantMessageId: 'm',
          identifier: 'fs',
          apiName: 'readFile',
          operationId,
          executor: Executor.SERVER,
        },
      },
    }),
  );
}

describe('metrics and logs', () => {
  it('counts 3 allows, 2 denies and 1 timeout let through by onError: continue, with their labels', async () => {
    const receiver = await startReceiver();
    receiver.respond((req, res) => {
      if (req.path === '/timeout') return; // never answers
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.path === '/deny' ? '{"decision":"deny","reason":"no"}' : '{"decision":"allow"}');
    });
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      const script = ['allow', 'allow', 'allow', 'deny', 'deny', 'timeout'];
      for (const [i, answer] of script.entries()) {
        const operationId = `op-metrics-${i}`;
        await unary(client, 'RegisterHooks', {
          operationId,
          hooks: [
            {
              id: `control-${answer}`,
              type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
              webhook: {
                url: `${receiver.url}/${answer}`,
                responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
                onError: 'ON_ERROR_CONTINUE',
                timeout: 0.2,
              },
            },
          ],
        });
        await unary(client, 'DecideToolCall', decision(operationId));
      }
      const text = await (await fetch(`http://${sidecar.http}/metrics`)).text();
      const phase = { phase: 'beforeToolCall' };
      expect(sample(text, 'agenthooks_decisions_total', { ...phase, outcome: 'allow' })).toBe(4);
      expect(sample(text, 'agenthooks_decisions_total', { ...phase, outcome: 'deny' })).toBe(2);
      expect(
        sample(text, 'agenthooks_control_errors_allowed_total', {
          hook_type: 'beforeToolCall',
          code: 'timeout',
        }),
      ).toBe(1);
      const outcome = (o: string) =>
        sample(text, 'agenthooks_hook_outcomes_total', {
          hook_type: 'beforeToolCall',
          source: 'caller',
          outcome: o,
        });
      expect([outcome('allowed'), outcome('denied'), outcome('failed')]).toEqual([3, 2, 1]);
      expect(
        sample(text, 'agenthooks_webhook_results_total', { kind: 'control', code: 'ok' }),
      ).toBe(5);
      expect(
        sample(text, 'agenthooks_webhook_results_total', { kind: 'control', code: 'timeout' }),
      ).toBe(1);
      expect(
        sample(text, 'agenthooks_rpc_calls_total', { method: 'DecideToolCall', code: 'OK' }),
      ).toBe(6);
      expect(
        sample(text, 'agenthooks_rpc_calls_total', { method: 'RegisterHooks', code: 'OK' }),
      ).toBe(6);
      expect(text).toMatch(/^agenthooks_environment_valid 1$/m);
      expect(text).toMatch(
        /^agenthooks_store_operation_duration_seconds_count\{operation="appendHooks",result="ok"\} 6$/m,
      );
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('never logs a token, a header value or a query credential, and tags hook lines with operationId and hookId', async () => {
    const receiver = await startReceiver();
    receiver.respond((_req, res) => {
      res.writeHead(500);
      res.end('upstream said s3cr3t-body');
    });
    const secrets = ['env-tok-7f3a91', 'hdr-val-55b2c0', 'qry-cred-9e1d44'];
    const sidecar = await startSidecar({
      args: ['--log-level', 'debug', '--caller-env-allowlist', 'HOOK_SECRET'],
      env: {
        HOOK_SECRET: secrets[1] as string,
        AGENT_HOOK_WEBHOOK_URL: `${receiver.url}/env`,
        AGENT_HOOK_WEBHOOK_TOKEN: secrets[0] as string,
        AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
      },
    });
    const client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-logs',
        hooks: [
          {
            id: 'leaky',
            type: 'HOOK_TYPE_AFTER_STEP',
            webhook: {
              url: `${receiver.url}/hook?api_key=${secrets[2]}`,
              headers: { Authorization: 'Bearer ${HOOK_SECRET}' },
              allowedEnvVars: ['HOOK_SECRET'],
            },
          },
        ],
      });
      await unary(client, 'Dispatch', {
        event: { afterStep: { operationId: 'op-logs', userId: 'u' } },
      });
      const failure = await sidecar.waitForLog(
        (l) => String(l.msg).includes('webhook delivery failed') && l.hookId === 'leaky',
      );
      expect(failure).toMatchObject({
        operationId: 'op-logs',
        hookId: 'leaky',
        hookType: 'afterStep',
        code: 'http_error',
      });
      // Both deliveries reached the receiver with the resolved secrets.
      expect(receiver.requests.map((r) => r.headers.authorization)).toEqual([
        `Bearer ${secrets[1]}`,
        `Bearer ${secrets[0]}`,
      ]);
      sidecar.kill('SIGTERM');
      await sidecar.exited;
      const logs = JSON.stringify(sidecar.logs);
      for (const secret of [...secrets, 's3cr3t-body']) expect(logs).not.toContain(secret);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('counts modifying hooks and Modify webhooks, and logs a failed one at warn without its body', async () => {
    const receiver = await startReceiver();
    receiver.respond((req, res) => {
      if (req.path === '/ok') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
        return;
      }
      res.writeHead(500);
      res.end('modify said s3cr3t-answer');
    });
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-modify-metrics-'));
    const pluginsFile = join(dir, 'plugins.json');
    const plugin = {
      name: 'audit',
      hooks: [
        {
          id: 'op-hook',
          point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
          webhook: { url: `${receiver.url}/ok` },
        },
      ],
    };
    writeFileSync(pluginsFile, JSON.stringify({ plugins: [plugin] }));
    const sidecar = await startSidecar({ args: ['--plugins-file', pluginsFile] });
    const client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-modify-metrics',
        hooks: [
          {
            id: 'ok',
            point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
            webhook: { url: `${receiver.url}/ok` },
          },
          {
            id: 'failing',
            point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
            webhook: { url: `${receiver.url}/failing` },
          },
          { id: 'local-only', point: 'MODIFY_POINT_TRANSFORM_CONTEXT', handler: true },
          {
            id: 'tool',
            point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
            webhook: { url: `${receiver.url}/ok` },
          },
        ],
      });
      const contextJson = JSON.stringify({
        messages: [{ role: 'user', content: 's3cr3t-context' }],
      });
      for (let i = 0; i < 2; i++) {
        await unary(client, 'Modify', {
          operationId: 'op-modify-metrics',
          point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
          contextJson,
        });
      }
      await unary(client, 'Modify', {
        operationId: 'op-modify-metrics',
        point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
        contextJson: JSON.stringify({ toolCall: { id: 'c', name: 'search' }, args: {} }),
      });
      const text = await (await fetch(`http://${sidecar.http}/metrics`)).text();
      const outcome = (hookType: string, o: string, source = 'caller') =>
        sample(text, 'agenthooks_hook_outcomes_total', { hook_type: hookType, source, outcome: o });
      expect([
        outcome('modify:transformContext', 'delivered'),
        outcome('modify:transformContext', 'failed'),
        outcome('modify:transformContext', 'skipped'),
        outcome('modify:transformContext', 'delivered', 'operator'),
        outcome('modify:beforeToolCall', 'delivered'),
        outcome('beforeToolCall', 'delivered'),
      ]).toEqual([2, 2, 2, 2, 1, 0]);
      const result = (code: string) =>
        sample(text, 'agenthooks_webhook_results_total', { kind: 'modify', code });
      expect([result('ok'), result('http_error')]).toEqual([5, 2]);
      // Every line is read once the process has exited.
      sidecar.kill('SIGTERM');
      await sidecar.exited;
      const failures = sidecar.logs.filter((l) => l.hookId === 'failing');
      expect(failures).toHaveLength(2);
      expect(failures[0]).toMatchObject({
        level: 'warn',
        msg: 'webhook delivery failed (non-fatal)',
        operationId: 'op-modify-metrics',
        hookId: 'failing',
        point: 'transformContext',
        code: 'http_error',
        httpStatus: 500,
      });
      const logs = JSON.stringify(sidecar.logs);
      for (const secret of ['s3cr3t-answer', 's3cr3t-context']) expect(logs).not.toContain(secret);
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
