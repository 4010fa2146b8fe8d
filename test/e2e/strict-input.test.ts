/**
 * A typo does not fail open. Over Connect JSON and gRPC-Web JSON an unknown
 * field or enum name is refused with INVALID_ARGUMENT (`MALFORMED_REQUEST`)
 * naming the field, and nothing is stored; over binary protobuf an unknown
 * field is still accepted (forward compatibility), but an enum number the
 * sidecar does not know is refused at validation on every transport.
 */
import { gzipSync } from 'node:zlib';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, createClient, type Transport } from '@connectrpc/connect';
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type OnError, ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  HookService,
  RegisterHooksRequestSchema,
  RegisterHooksResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  type ConnectErrorAnswer,
  connectErrorDetails,
  readConnectError,
} from '../support/connect-errors.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const REGISTER_PATH = '/agenthooks.v1.HookService/RegisterHooks';

/** A RegisterHooks body in Connect JSON whose only hook's webhook has `webhook` merged in. */
function registerJson(operationId: string, hook: Record<string, unknown>): string {
  return JSON.stringify({
    operationId,
    hooks: [{ id: 'guard', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', ...hook }],
  });
}

/** A control webhook as Connect JSON, with `onError` as given. */
function control(onError: unknown): Record<string, unknown> {
  return {
    webhook: {
      url: 'http://127.0.0.1:9/guard',
      responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
      onError,
    },
  };
}

/** The Connect JSON error body and its ErrorInfo reason. */
interface ConnectAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly reason: string | undefined;
  readonly fields: string[];
}

async function postConnectJson(
  sidecar: SidecarProcess,
  body: string,
  gzip = false,
  path = REGISTER_PATH,
): Promise<ConnectAnswer> {
  const res = await fetch(`http://${sidecar.http}${path}`, {
    method: 'POST',
    headers: gzip
      ? { 'content-type': 'application/json', 'content-encoding': 'gzip' }
      : { 'content-type': 'application/json' },
    body: gzip ? gzipSync(body) : body,
  });
  const json = (await res.json()) as {
    code: string;
    message: string;
    details?: { type: string; value: string }[];
  };
  return {
    status: res.status,
    code: json.code,
    message: json.message,
    ...connectErrorDetails(json.details),
  };
}

/** Wraps a message in a gRPC(-Web) envelope: flag byte, 4-byte big-endian length. */
function envelope(data: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

/** POSTs a gRPC-Web JSON request and returns the status and message of its trailer. */
async function postGrpcWebJson(
  sidecar: SidecarProcess,
  body: string,
): Promise<{ status: string | undefined; message: string; details: boolean }> {
  const res = await fetch(`http://${sidecar.http}${REGISTER_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/grpc-web+json' },
    body: envelope(Buffer.from(body)),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  // The answer is a single trailer frame: flag, length, HTTP/1-style header lines.
  const text = bytes.subarray(5).toString('utf8');
  return {
    status: /^grpc-status:\s*(\d+)/im.exec(text)?.[1],
    message: decodeURIComponent(/^grpc-message:\s*(.*?)\s*$/im.exec(text)?.[1] ?? ''),
    details: /^grpc-status-details-bin:/im.test(text),
  };
}

async function refusal(call: Promise<unknown>): Promise<ConnectErrorAnswer> {
  try {
    await call;
  } catch (e: unknown) {
    return readConnectError(e);
  }
  throw new Error('the call succeeded');
}

/** Sends raw bytes as a RegisterHooks request over grpc-js; resolves with the response bytes. */
function grpcRaw(address: string, bytes: Buffer): Promise<Buffer> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      REGISTER_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      (err, value) => {
        client.close();
        if (err !== null || value === undefined) reject(err ?? new Error('no response'));
        else resolve(value);
      },
    );
  });
}

/** Field 999, varint, value 1: a field this sidecar has never heard of. */
const UNKNOWN_FIELD = Buffer.from([0xb8, 0x3e, 0x01]);

describe('strict input', () => {
  let sidecar: SidecarProcess;
  let transports: Record<string, Transport>;

  beforeAll(async () => {
    sidecar = await startSidecar();
    const http = `http://${sidecar.http}`;
    transports = {
      grpc: createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
      'connect-binary': createConnectTransport({
        baseUrl: http,
        httpVersion: '1.1',
        useBinaryFormat: true,
      }),
      'connect-json': createConnectTransport({
        baseUrl: http,
        httpVersion: '1.1',
        useBinaryFormat: false,
      }),
      'grpc-web': createGrpcWebTransport({ baseUrl: http, httpVersion: '1.1' }),
    };
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  const hookClient = () => createClient(HookService, transports.grpc as Transport);

  it('refuses a misspelt onError name over Connect JSON, naming the field, and stores nothing', async () => {
    const answer = await postConnectJson(
      sidecar,
      registerJson('op-typo', control('ON_ERROR_BLOKC')),
    );
    expect(answer).toMatchObject({
      status: 400,
      code: 'invalid_argument',
      reason: 'MALFORMED_REQUEST',
    });
    expect(answer.message).toBe(
      'the request is not a valid agenthooks.v1.RegisterHooksRequest message: ' +
        'hooks[0].webhook.onError: unknown agenthooks.v1.OnError value "ON_ERROR_BLOKC"',
    );
    expect(answer.fields).toEqual(['hooks[0].webhook.onError']);
    expect((await hookClient().listHooks({ operationId: 'op-typo' })).hooks).toEqual([]);
  });

  it('names the field of a misspelt enum in gzip-compressed JSON as in plain JSON', async () => {
    const body = registerJson('op-gzip', control('ON_ERROR_BLOKC'));
    const plain = await postConnectJson(sidecar, body);
    const gzipped = await postConnectJson(sidecar, body, true);
    expect(gzipped).toEqual(plain);
    expect(gzipped.fields).toEqual(['hooks[0].webhook.onError']);
    expect((await hookClient().listHooks({ operationId: 'op-gzip' })).hooks).toEqual([]);
  });

  it('refuses an unknown field over Connect JSON, naming it, and stores nothing', async () => {
    const answer = await postConnectJson(
      sidecar,
      registerJson('op-unknown', { webhok: { url: 'http://127.0.0.1:9/x' }, handler: true }),
    );
    expect(answer).toMatchObject({
      status: 400,
      code: 'invalid_argument',
      reason: 'MALFORMED_REQUEST',
    });
    expect(answer.message).toContain('hooks[0].webhok: unknown field');
    expect(answer.fields).toEqual(['hooks[0].webhok']);
    expect((await hookClient().listHooks({ operationId: 'op-unknown' })).hooks).toEqual([]);
  });

  it('names the field of a value of the wrong JSON type, or of a field given twice', async () => {
    const hook = { id: 'h', type: 'HOOK_TYPE_ON_COMPLETE' };
    const webhook = { url: 'http://127.0.0.1:9/x' };
    for (const [body, field, problem] of [
      [{ operationId: 5, hooks: [] }, 'operationId', 'expected a string, got an integer'],
      [{ operationId: 'op-types', hooks: 'x' }, 'hooks', 'expected an array, got a string'],
      [
        { operationId: 'op-types', hooks: [{ ...hook, webhook: { ...webhook, timeout: 'abc' } }] },
        'hooks[0].webhook.timeout',
        'expected a number, got a string',
      ],
      [
        { operationId: 'op-types', hooks: [{ ...hook, webhook: { ...webhook, onError: 2.5 } }] },
        'hooks[0].webhook.onError',
        'expected an enum name, got a number with a fraction',
      ],
      [
        { operationId: 'op-types', hooks: [{ ...hook, webhook: { ...webhook, onError: true } }] },
        'hooks[0].webhook.onError',
        'expected an enum name, got a boolean',
      ],
      [
        { operationId: 'op-types', hooks: [{ ...hook, webhook: 'http://127.0.0.1:9/x' }] },
        'hooks[0].webhook',
        'expected an object, got a string',
      ],
      [
        {
          operationId: 'op-types',
          hooks: [
            {
              ...hook,
              webhook: { ...webhook, onError: 'ON_ERROR_BLOCK', on_error: 'ON_ERROR_BLOCK' },
            },
          ],
        },
        'hooks[0].webhook.onError',
        'given twice, as onError and as on_error',
      ],
    ] as const) {
      const answer = await postConnectJson(sidecar, JSON.stringify(body));
      expect(answer, field).toMatchObject({
        status: 400,
        code: 'invalid_argument',
        reason: 'MALFORMED_REQUEST',
        message: `the request is not a valid agenthooks.v1.RegisterHooksRequest message: ${field}: ${problem}`,
        fields: [field],
      });
    }
    expect((await hookClient().listHooks({ operationId: 'op-types' })).hooks).toEqual([]);
  });

  it('names the field of a well-known type it cannot read, or of a 32-bit integer out of range', async () => {
    const list = '/agenthooks.v1.HookService/ListDecisions';
    for (const [body, field, problem] of [
      [{ startTime: '0000-12-31T23:59:59Z' }, 'startTime', 'not a valid google.protobuf.Timestamp'],
      [{ endTime: 'yesterday' }, 'endTime', 'not a valid google.protobuf.Timestamp'],
      [{ pageSize: 4294967296 }, 'pageSize', 'expected a 32-bit integer, got 4294967296'],
      [{ pageSize: '-2147483649' }, 'pageSize', 'expected a 32-bit integer, got -2147483649'],
    ] as const) {
      const answer = await postConnectJson(sidecar, JSON.stringify(body), false, list);
      expect(answer, field).toMatchObject({
        status: 400,
        code: 'invalid_argument',
        reason: 'MALFORMED_REQUEST',
        fields: [field],
      });
      expect(answer.message).toContain(`${field}: ${problem}`);
    }
  });

  it('answers the same over gRPC-Web JSON', async () => {
    const body = registerJson('op-web', control('ON_ERROR_BLOKC'));
    const connect = await postConnectJson(sidecar, body);
    const web = await postGrpcWebJson(sidecar, body);
    expect(web).toEqual({
      status: String(Code.InvalidArgument),
      message: connect.message,
      details: true,
    });
    expect((await hookClient().listHooks({ operationId: 'op-web' })).hooks).toEqual([]);
  });

  it('still accepts the well-spelt request over Connect JSON', async () => {
    const answer = await fetch(`http://${sidecar.http}${REGISTER_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: registerJson('op-ok', control('ON_ERROR_BLOCK')),
    });
    expect(answer.status).toBe(200);
    expect((await hookClient().listHooks({ operationId: 'op-ok' })).hooks).toHaveLength(1);
  });

  it('refuses an onError number it does not know on every transport, with the field path', async () => {
    for (const [name, transport] of Object.entries(transports)) {
      const operationId = `op-enum-${name}`;
      const answer = await refusal(
        createClient(HookService, transport).registerHooks({
          operationId,
          hooks: [
            {
              id: 'guard',
              type: HookType.BEFORE_TOOL_CALL,
              webhook: {
                url: 'http://127.0.0.1:9/guard',
                responseHandling: ResponseHandling.TOOL_CALL,
                onError: 99 as OnError,
              },
            },
          ],
        }),
      );
      expect(answer, name).toMatchObject({
        code: Code.InvalidArgument,
        reason: 'INVALID_ENUM_VALUE',
        fields: ['hooks[0].webhook.onError'],
      });
      expect((await hookClient().listHooks({ operationId })).hooks, name).toEqual([]);
    }
  });

  it('refuses an executor number it does not know in decisions and dispatches', async () => {
    const context = {
      operationId: 'op-exec',
      toolCallId: 'call-1',
      identifier: 'search',
      apiName: 'query',
      executor: 99 as Executor,
    };
    const decide = await refusal(hookClient().decideToolCall({ event: { context } }));
    expect(decide).toMatchObject({
      code: Code.InvalidArgument,
      fields: ['event.context.executor'],
    });
    const dispatch = await refusal(
      hookClient().dispatch({
        event: { event: { case: 'afterToolCall', value: { context } } },
      }),
    );
    expect(dispatch).toMatchObject({
      code: Code.InvalidArgument,
      reason: 'INVALID_ENUM_VALUE',
      fields: ['event.afterToolCall.context.executor'],
    });
  });

  it('accepts unknown binary fields over gRPC and Connect', async () => {
    const request = (operationId: string) =>
      Buffer.concat([
        toBinary(
          RegisterHooksRequestSchema,
          create(RegisterHooksRequestSchema, {
            operationId,
            hooks: [
              { id: 'h', type: HookType.ON_COMPLETE, webhook: { url: 'http://127.0.0.1:9/h' } },
            ],
          }),
        ),
        UNKNOWN_FIELD,
      ]);
    const viaGrpc = fromBinary(
      RegisterHooksResponseSchema,
      await grpcRaw(sidecar.grpc, request('op-fwd-grpc')),
    );
    expect(viaGrpc.hookCount).toBe(1);

    const viaConnect = await fetch(`http://${sidecar.http}${REGISTER_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/proto' },
      body: request('op-fwd-connect'),
    });
    expect(viaConnect.status).toBe(200);
    expect(
      fromBinary(RegisterHooksResponseSchema, new Uint8Array(await viaConnect.arrayBuffer()))
        .hookCount,
    ).toBe(1);
    for (const operationId of ['op-fwd-grpc', 'op-fwd-connect']) {
      expect((await hookClient().listHooks({ operationId })).hooks.map((h) => h.id)).toEqual(['h']);
    }
  });

  it('logged none of the client errors above', () => {
    const failures = sidecar.logs.filter((l) => l.level === 'error' || l.level === 'warn');
    expect(failures).toEqual([]);
  });
});
