import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor, HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  DispatchRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  hookClient,
  toLoaderObject,
  toLoaderStruct,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import {
  killSidecar,
  MAIN_JS,
  type SidecarProcess,
  startSidecar,
  tempDbPath,
} from '../support/sidecar.js';

const CONTEXT = {
  toolCallId: 'call_skill',
  assistantMessageId: 'msg_7',
  identifier: 'skills',
  apiName: 'run',
  args: { name: 'summarise' },
  callIndex: 1,
  stepIndex: 4,
  operationId: 'op-payloads',
  executor: Executor.CLIENT,
  userId: 'user_1',
};

describe('webhook payloads as a reference receiver gets them', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;

  beforeAll(async () => {
    receiver = await startReceiver();
    receiver.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"decision":"allow"}');
    });
    const db = tempDbPath();
    const users = join(dirname(db), 'users.jsonl');
    writeFileSync(
      users,
      '{"id":"user_1","email":"one@example.com"}\n{"id":"user_2","email":"two@example.com"}\n{"id":"user_3","email":null}\n',
    );
    const imported = spawnSync(process.execPath, [MAIN_JS, 'users', 'import', users, '--db', db], {
      encoding: 'utf8',
    });
    expect(imported.status).toBe(0);
    sidecar = await startSidecar({ db });
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('projects, merges the body last, redacts skill Work data and adds the user email', async () => {
    const hook = (id: string, extra: Record<string, unknown> = {}) => ({
      id,
      type: 'HOOK_TYPE_AFTER_TOOL_CALL',
      webhook: { url: `${receiver.url}/${id}`, ...extra },
    });
    await unary(client, 'RegisterHooks', {
      operationId: CONTEXT.operationId,
      hooks: [
        hook('projected', {
          eventFields: { names: ['toolCallId', 'userId', 'notAField', 'userEmail'] },
        }),
        hook('no-email', { eventFields: { names: ['toolCallId'] } }),
        hook('body', {
          body: toLoaderStruct({
            hookId: 'custom-id',
            hookType: 'custom-type',
            userId: 'user_2',
            tenant: { id: 7 },
          }),
          eventFields: { names: ['apiName', 'userEmail'] },
        }),
        hook('invalid-user', {
          body: toLoaderStruct({ userId: null }),
          eventFields: { names: ['apiName', 'userEmail'] },
        }),
        hook('full'),
      ],
    });
    const event = create(HookEventSchema, {
      event: {
        case: 'afterToolCall',
        value: {
          context: CONTEXT,
          mocked: false,
          result: {
            content: 'summary',
            success: true,
            executionTime: 15,
            workRegistration: {
              type: 'skill',
              args: { secret: 'work input' },
              data: { big: 'blob' },
              id: 'w1',
            },
          },
        },
      },
    });
    const res = await unary<{ outcomes: unknown[] }>(
      client,
      'Dispatch',
      toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event })),
    );
    expect(res.outcomes).toHaveLength(5);
    const got = Object.fromEntries(receiver.requests.map((r) => [r.path, r.json]));
    expect(got['/projected']).toEqual({
      toolCallId: 'call_skill',
      userId: 'user_1',
      hookId: 'projected',
      hookType: 'afterToolCall',
      userEmail: 'one@example.com',
    });
    expect(got['/no-email']).toEqual({
      toolCallId: 'call_skill',
      hookId: 'no-email',
      hookType: 'afterToolCall',
    });
    expect(got['/body']).toEqual({
      apiName: 'run',
      hookId: 'custom-id',
      hookType: 'custom-type',
      userId: 'user_2',
      tenant: { id: 7 },
      userEmail: 'two@example.com',
    });
    expect(got['/invalid-user']).toEqual({
      apiName: 'run',
      hookId: 'invalid-user',
      hookType: 'afterToolCall',
      userId: null,
    });
    expect(got['/full']).toEqual({
      toolCallId: 'call_skill',
      assistantMessageId: 'msg_7',
      identifier: 'skills',
      apiName: 'run',
      args: { name: 'summarise' },
      callIndex: 1,
      stepIndex: 4,
      operationId: 'op-payloads',
      executor: 'client',
      userId: 'user_1',
      mocked: false,
      result: {
        content: 'summary',
        success: true,
        executionTime: 15,
        workRegistration: { type: 'skill', data: null, id: 'w1' },
      },
      hookId: 'full',
      hookType: 'afterToolCall',
      userEmail: 'one@example.com',
    });
  });

  it('sends controls a member named __proto__ of the arguments and of the result as the key it is, over gRPC and Connect', async () => {
    await unary(client, 'RegisterHooks', {
      operationId: 'op-proto-key',
      hooks: ['BEFORE', 'AFTER'].map((phase) => ({
        id: `policy-${phase.toLowerCase()}`,
        type: `HOOK_TYPE_${phase}_TOOL_CALL`,
        webhook: { url: `${receiver.url}/policy`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
      })),
    });
    // JSON.parse makes `__proto__` an own member, as a runtime's JSON does.
    const files = JSON.parse(
      '{"__proto__":{"/etc/cron.d/x":"* * * * * root sh"},"notes.txt":"hi"}',
    );
    const context = {
      toolCallId: 'call_proto',
      identifier: 'fs',
      apiName: 'writeFiles',
      operationId: 'op-proto-key',
      executor: 'EXECUTOR_SERVER',
    };
    const sent = '"files":{"__proto__":{"/etc/cron.d/x":"* * * * * root sh"},"notes.txt":"hi"}';
    let start = receiver.requests.length;
    await unary(client, 'DecideToolCall', {
      event: { context: { ...context, args: toLoaderStruct({ files }) } },
    });
    expect(receiver.requests.slice(start).map((r) => r.body.includes(sent))).toEqual([true]);

    start = receiver.requests.length;
    const state = JSON.parse('{"__proto__":{"leaked":"token"}}');
    await unary(client, 'DecideToolResult', {
      event: { context, result: { content: 'done', success: true, state: toLoaderStruct(state) } },
    });
    expect(receiver.requests.slice(start).map((r) => r.body)).toEqual([
      expect.stringContaining('"state":{"__proto__":{"leaked":"token"}}'),
    ]);

    // The same event as Connect JSON text.
    start = receiver.requests.length;
    const response = await fetch(
      `http://${sidecar.http}/agenthooks.v1.HookService/DecideToolCall`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"event":{"context":{"toolCallId":"call_proto_2","identifier":"fs","apiName":"writeFiles","operationId":"op-proto-key","executor":"EXECUTOR_SERVER","args":{${sent}}}}}`,
      },
    );
    expect(response.status).toBe(200);
    expect(receiver.requests.slice(start).map((r) => r.body.includes(sent))).toEqual([true]);
  });

  it('sends controls the authoritative event with the user email, no body and no projection', async () => {
    const start = receiver.requests.length;
    await unary(client, 'RegisterHooks', {
      operationId: 'op-control-email',
      hooks: [
        {
          id: 'policy',
          type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
          webhook: {
            url: `${receiver.url}/policy`,
            responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          },
        },
      ],
    });
    const req = create(DecideToolCallRequestSchema, {
      event: { context: { ...CONTEXT, operationId: 'op-control-email', userId: 'user_3' } },
    });
    await unary(client, 'DecideToolCall', toLoaderObject(DecideToolCallRequestSchema, req));
    const [policy] = receiver.requests.slice(start);
    // user_3 has no email: the field stays out, and the control still ran.
    expect(policy?.json).toEqual({
      toolCallId: 'call_skill',
      assistantMessageId: 'msg_7',
      identifier: 'skills',
      apiName: 'run',
      args: { name: 'summarise' },
      callIndex: 1,
      stepIndex: 4,
      operationId: 'op-control-email',
      executor: 'client',
      userId: 'user_3',
      hookId: 'policy',
      hookType: 'beforeToolCall',
    });
  });
});
