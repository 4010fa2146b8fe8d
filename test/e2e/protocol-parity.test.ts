/**
 * Every protocol gives the same answer: for each unary RPC an invalid
 * request is sent over gRPC (to grpc-js), Connect JSON, Connect binary and
 * gRPC-Web (to connect-node on the HTTP port), and all four must answer the
 * same code, message, `ErrorInfo.reason` and `BadRequest` field path.
 * Undecodable bytes and bad JSON get INVALID_ARGUMENT (`MALFORMED_REQUEST`) everywhere; a store
 * fault answers UNAVAILABLE everywhere and is logged once per call, while
 * client errors leave no log line; a call whose deadline passes answers, and
 * is counted as, DEADLINE_EXCEEDED everywhere.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { request as httpRequest } from 'node:http';
import * as http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import {
  create,
  fromBinary,
  fromJson,
  type JsonValue,
  toBinary,
  toJsonString,
} from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient, type Transport } from '@connectrpc/connect';
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { Fallback, ModifyPoint, ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DecideToolCallRequestSchema,
  DispatchRequestSchema,
  DispatchStreamRequestSchema,
  DispatchStreamResponseSchema,
  HandleRequestSchema,
  HookService,
  ListHooksRequestSchema,
  ParkKind,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import {
  type ConnectErrorDetail,
  connectErrorDetails,
  readConnectError,
} from '../support/connect-errors.js';
import { errorInfoOf } from '../support/grpc-client.js';
import { eventually, metric } from '../support/observe.js';
import { startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** One protocol's answer, reduced to what must be equal. */
interface Answer {
  readonly code: string;
  readonly message: string;
  readonly reason: string | undefined;
  readonly fields: string[];
}

type Protocol = 'grpc' | 'connect-json' | 'connect-binary' | 'grpc-web';
const PROTOCOLS: readonly Protocol[] = ['grpc', 'connect-json', 'connect-binary', 'grpc-web'];

function transportFor(protocol: Protocol, sidecar: SidecarProcess): Transport {
  const http = `http://${sidecar.http}`;
  switch (protocol) {
    case 'grpc':
      return createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` });
    case 'connect-json':
      // connect-node's client sends binary unless told otherwise.
      return createConnectTransport({ baseUrl: http, httpVersion: '1.1', useBinaryFormat: false });
    case 'connect-binary':
      return createConnectTransport({ baseUrl: http, httpVersion: '1.1', useBinaryFormat: true });
    case 'grpc-web':
      return createGrpcWebTransport({ baseUrl: http, httpVersion: '1.1' });
  }
}

function answerOf(e: unknown): Answer {
  const answer = readConnectError(e);
  return Object.assign({}, answer, { code: Code[answer.code] ?? String(answer.code) });
}

type HookClient = ReturnType<typeof createClient<typeof HookService>>;

/** A signing secret the parity sidecar declares, bound to an origin no hook below uses. */
const SIGNING_ENV = {
  AGENTHOOKS_SIGNING_SECRET_OTHER: 'whsec_yWlUhzLwPm3so5jT3GCimELRfDLXNer2Qsyrrgg8doI=',
  AGENTHOOKS_SIGNING_ORIGINS_OTHER: 'https://other.example',
};

/** A notification webhook that names the signing secret `name`. */
function signedHook(name: string) {
  return {
    id: 'h1',
    type: HookType.ON_COMPLETE,
    webhook: { url: 'https://hooks.example.com/x', signingSecret: name },
  };
}

/**
 * One invalid request per unary RPC, with the field it names where there is
 * one, and the reason where the case is about one.
 */
const INVALID_CALLS: readonly {
  readonly rpc: string;
  readonly call: (client: HookClient) => Promise<unknown>;
  readonly field?: string;
  readonly reason?: string;
  /** The gRPC code's name when it is not InvalidArgument. */
  readonly code?: string;
}[] = [
  {
    rpc: 'RegisterHooks (undeclared signing secret)',
    field: 'hooks[0].webhook.signingSecret',
    reason: 'UNDECLARED_SIGNING_SECRET',
    call: (c) => c.registerHooks({ operationId: 'parity-op', hooks: [signedHook('NOPE')] }),
  },
  {
    // The error quotes the name; unclipped, 40 KB of it overflowed gRPC's trailers
    // and the grpc-js client waited for an answer that never came.
    rpc: 'RegisterHooks (a 40 KB undeclared signing secret name, quoted in the error)',
    field: 'hooks[0].webhook.signingSecret',
    reason: 'UNDECLARED_SIGNING_SECRET',
    call: (c) =>
      c.registerHooks(
        { operationId: 'parity-op', hooks: [signedHook('N'.repeat(40_000))] },
        { timeoutMs: 5_000 },
      ),
  },
  {
    rpc: 'RegisterHooks (signing secret not bound to the origin)',
    field: 'hooks[0].webhook.signingSecret',
    reason: 'SIGNING_SECRET_NOT_BOUND',
    call: (c) => c.registerHooks({ operationId: 'parity-op', hooks: [signedHook('OTHER')] }),
  },
  {
    rpc: 'RegisterHooks (URL that is not HTTP(S))',
    field: 'hooks[0].webhook.url',
    call: (c) =>
      c.registerHooks({
        operationId: 'parity-op',
        hooks: [{ id: 'h1', type: HookType.ON_COMPLETE, webhook: { url: 'ftp://example.com/x' } }],
      }),
  },
  {
    rpc: 'RegisterHooks (no operation id)',
    call: (c) => c.registerHooks({ hooks: [] }),
  },
  {
    rpc: 'RegisterHooks (type and point together)',
    field: 'hooks[0].point',
    call: (c) =>
      c.registerHooks({
        operationId: 'parity-op',
        hooks: [
          {
            id: 'h1',
            type: HookType.AFTER_STEP,
            point: ModifyPoint.TRANSFORM_CONTEXT,
            webhook: { url: 'http://127.0.0.1:9/x' },
          },
        ],
      }),
  },
  { rpc: 'UnregisterHooks', call: (c) => c.unregisterHooks({}) },
  {
    rpc: 'UnregisterHooks (plugin name too long)',
    field: 'plugin',
    call: (c) => c.unregisterHooks({ operationId: 'parity-op', plugin: 'p'.repeat(257) }),
  },
  {
    rpc: 'Modify (no point)',
    field: 'point',
    call: (c) => c.modify({ operationId: 'parity-op', contextJson: '{"messages":[]}' }),
  },
  {
    rpc: 'Modify (context not a JSON object)',
    field: 'contextJson',
    call: (c) =>
      c.modify({
        operationId: 'parity-op',
        point: ModifyPoint.TRANSFORM_CONTEXT,
        contextJson: '{"messages":',
      }),
  },
  {
    rpc: 'Modify (context without messages)',
    field: 'contextJson',
    call: (c) =>
      c.modify({
        operationId: 'parity-op',
        point: ModifyPoint.TRANSFORM_CONTEXT,
        contextJson: '{"iteration":1}',
      }),
  },
  { rpc: 'ListHooks', call: (c) => c.listHooks({}) },
  { rpc: 'Dispatch (no event)', call: (c) => c.dispatch({}) },
  {
    rpc: 'Dispatch (beforeToolCall)',
    call: (c) =>
      c.dispatch({
        event: {
          event: {
            case: 'beforeToolCall',
            value: { context: toolContext() },
          },
        },
      }),
  },
  {
    rpc: 'Dispatch (afterStep without userId)',
    field: 'event.afterStep.userId',
    call: (c) =>
      c.dispatch({ event: { event: { case: 'afterStep', value: { operationId: 'parity-op' } } } }),
  },
  {
    rpc: 'Dispatch (afterToolCall without executor)',
    field: 'event.afterToolCall.context.executor',
    call: (c) =>
      c.dispatch({
        event: {
          event: {
            case: 'afterToolCall',
            value: {
              context: { ...toolContext(), executor: Executor.UNSPECIFIED },
              result: { content: 'ok' },
            },
          },
        },
      }),
  },
  {
    rpc: 'DecideToolCall (no executor)',
    call: (c) =>
      c.decideToolCall({
        event: { context: { ...toolContext(), executor: Executor.UNSPECIFIED } },
      }),
  },
  {
    rpc: 'DecideToolResult (no result)',
    call: (c) => c.decideToolResult({ event: { context: toolContext() } }),
  },
  {
    rpc: 'DecideToolCall (a parent operation id over 256 bytes)',
    field: 'event.context.parentOperationId',
    reason: 'OPERATION_ID_TOO_LONG',
    call: (c) =>
      c.decideToolCall({
        event: { context: { ...toolContext(), parentOperationId: 'p'.repeat(257) } },
      }),
  },
  {
    rpc: 'DecideToolCall (a chain of 129 operations)',
    field: 'operationChain',
    reason: 'OPERATION_CHAIN_INVALID',
    call: (c) =>
      c.decideToolCall({
        event: { context: toolContext() },
        operationChain: Array.from({ length: 129 }, (_, i) => `chain-${i}`),
      }),
  },
  {
    rpc: 'PublishDeferredResult (a chain of 129 operations)',
    field: 'operationChain',
    reason: 'OPERATION_CHAIN_INVALID',
    call: (c) =>
      c.publishDeferredResult({
        toolCallId: 'tc-chain',
        result: { content: 'ok' },
        operationChain: Array.from({ length: 129 }, (_, i) => `chain-${i}`),
      }),
  },
  { rpc: 'ParkToolCall (no kind)', call: (c) => c.parkToolCall({ context: toolContext() }) },
  { rpc: 'PublishDeferredResult', call: (c) => c.publishDeferredResult({}) },
  { rpc: 'CompleteOperation', call: (c) => c.completeOperation({}) },
  {
    rpc: 'ListDecisions (page size over 1000)',
    field: 'pageSize',
    reason: 'PAGE_SIZE_OUT_OF_RANGE',
    call: (c) => c.listDecisions({ pageSize: 1001 }),
  },
  {
    rpc: 'ListDecisions (page token of no page)',
    field: 'pageToken',
    reason: 'INVALID_PAGE_TOKEN',
    call: (c) => c.listDecisions({ pageToken: 'eyJ0IjoxfQ' }),
  },
  {
    rpc: 'ListHooks (operation id holding U+0000)',
    field: 'operationId',
    reason: 'ID_INVALID_CHARACTER',
    call: (c) => c.listHooks({ operationId: 'parity\u0000op' }),
  },
  {
    rpc: 'RegisterHooks (hook id holding U+0000)',
    field: 'hooks[0].id',
    reason: 'ID_INVALID_CHARACTER',
    call: (c) =>
      c.registerHooks({
        operationId: 'parity-op',
        hooks: [{ id: 'h\u00001', type: HookType.ON_COMPLETE, webhook: { url: '/hook' } }],
      }),
  },
  {
    rpc: 'PublishDeferredResult (tool call id holding U+0000)',
    field: 'toolCallId',
    reason: 'ID_INVALID_CHARACTER',
    call: (c) => c.publishDeferredResult({ toolCallId: 'call\u00001', result: { content: 'x' } }),
  },
  {
    rpc: 'ListDecisions (store sink off)',
    reason: 'AUDIT_STORE_DISABLED',
    code: 'FailedPrecondition',
    call: (c) => c.listDecisions({}),
  },
];

function toolContext() {
  return {
    operationId: 'parity-op',
    toolCallId: 'call-1',
    identifier: 'search',
    apiName: 'query',
    executor: Executor.SERVER,
    args: {},
  };
}

async function answersOver(
  sidecar: SidecarProcess,
  call: (client: HookClient) => Promise<unknown>,
  protocols: readonly Protocol[] = PROTOCOLS,
): Promise<Record<Protocol, Answer>> {
  const out = {} as Record<Protocol, Answer>;
  for (const protocol of protocols) {
    const client = createClient(HookService, transportFor(protocol, sidecar));
    try {
      await call(client);
      throw new Error(`${protocol}: the call succeeded`);
    } catch (e: unknown) {
      if (!(e instanceof ConnectError)) throw e;
      out[protocol] = answerOf(e);
    }
  }
  return out;
}

/** POSTs raw bytes to the HTTP listener; resolves with status, headers and body. */
function post(
  address: string,
  path: string,
  contentType: string,
  body: Uint8Array,
  headers: Record<string, string> = {},
  bodyAfterMs?: number,
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}> {
  const [host, port] = address.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host,
        port: Number(port),
        method: 'POST',
        path,
        headers: {
          'content-type': contentType,
          ...(bodyAfterMs === undefined ? {} : { 'content-length': String(body.byteLength) }),
          ...headers,
        },
      },
      (res) => {
        readResponse(res).then(resolve, reject);
      },
    );
    req.on('error', reject);
    if (bodyAfterMs === undefined) {
      req.end(body);
      return;
    }
    // The headers now, the body later: a client on a slow link.
    req.flushHeaders();
    setTimeout(() => req.end(body), bodyAfterMs);
  });
}

/** A response's status, headers and whole body. */
function readResponse(res: IncomingMessage): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () =>
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
    );
    res.on('error', reject);
  });
}

/** Wraps a message in a gRPC(-Web) envelope: flag byte, 4-byte big-endian length. */
function envelope(data: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

/** The grpc-status of a gRPC-Web response (trailers in the body, or in the headers). */
function grpcWebStatus(response: {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}): number {
  return Number(grpcWebField(response, 'grpc-status'));
}

/** A trailer of a gRPC-Web response (in the body's trailer frame, or in the headers). */
function grpcWebField(
  response: { headers: Record<string, string | string[] | undefined>; body: Buffer },
  name: string,
): string {
  const inHeader = response.headers[name];
  if (typeof inHeader === 'string') return inHeader;
  let at = 0;
  while (at + 5 <= response.body.length) {
    const flags = response.body[at] as number;
    const length = response.body.readUInt32BE(at + 1);
    const data = response.body.subarray(at + 5, at + 5 + length);
    if ((flags & 0x80) !== 0) {
      const match = new RegExp(`^${name}:\\s*(.*?)\\s*$`, 'im').exec(data.toString('utf8'));
      if (match?.[1] !== undefined) return match[1];
    }
    at += 5 + length;
  }
  throw new Error(`no ${name} in the gRPC-Web response`);
}

/** Sends raw bytes as a ListHooks request over grpc-js and returns the status code. */
function grpcRawStatus(
  address: string,
  bytes: Buffer,
  path = LIST_HOOKS_PATH,
): Promise<grpc.ServiceError> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      (err) => {
        client.close();
        if (err === null) reject(new Error('the call succeeded'));
        else resolve(err);
      },
    );
  });
}

/**
 * Sends one raw gRPC frame to `path` over HTTP/2 (so that it may be
 * compressed, or corrupt) and answers its status, message and `ErrorInfo`.
 */
async function grpcRawCall(
  address: string,
  path: string,
  frame: Buffer,
  headers: Record<string, string>,
  first?: Buffer,
): Promise<{ code: string; message: string; reason?: string; limit?: string }> {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => undefined);
  try {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    stream.on('error', () => undefined);
    let status: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => {
      status = { ...status, ...h };
    });
    stream.on('trailers', (t) => {
      status = { ...status, ...t };
    });
    stream.resume();
    if (first !== undefined) {
      // A stream's first message, and its first answer, before the frame under test.
      stream.write(first);
      await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    }
    stream.end(frame);
    await new Promise<void>((resolve) => stream.on('close', () => resolve()));
    return statusOf(status);
  } finally {
    session.close();
  }
}

/** A registration of one `onComplete` webhook on `operationId`, for the deadline tests. */
function registration(operationId: string) {
  return create(RegisterHooksRequestSchema, {
    operationId,
    hooks: [{ id: 'h', type: HookType.ON_COMPLETE, webhook: { url: 'http://127.0.0.1:9/x' } }],
  });
}

/** The gRPC status in a call's trailers (or trailers-only headers), with its ErrorInfo's reason. */
function statusOf(status: http2.IncomingHttpHeaders): {
  code: string;
  message: string;
  reason?: string;
  limit?: string;
} {
  const bin = status['grpc-status-details-bin'];
  const info =
    typeof bin === 'string'
      ? fromBinary(StatusSchema, Buffer.from(bin, 'base64'))
          .details.map((d) => anyUnpack(d, ErrorInfoSchema))
          .find((i) => i !== undefined)
      : undefined;
  return {
    code: String(status['grpc-status']),
    message: decodeURIComponent(String(status['grpc-message'] ?? '')),
    reason: info?.reason,
    limit: info?.metadata.limit,
  };
}

/**
 * Opens a gRPC call to `path` and sends no message: answers the status the
 * server ends it with (its trailers-only response), in the shape of
 * {@link grpcRawCall}.
 */
async function grpcHeadersOnly(
  address: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ code: string; message: string; reason?: string; limit?: string }> {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => undefined);
  try {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    stream.on('error', () => undefined);
    const status = await new Promise<http2.IncomingHttpHeaders>((resolve) =>
      stream.once('response', resolve),
    );
    return statusOf(status);
  } finally {
    session.destroy();
  }
}

/** A gRPC-Web answer in the shape {@link grpcRawCall} answers. */
function webAnswer(response: {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}): { code: string; message: string; reason?: string; limit?: string } {
  const info = fromBinary(
    StatusSchema,
    Buffer.from(grpcWebField(response, 'grpc-status-details-bin'), 'base64'),
  )
    .details.map((d) => anyUnpack(d, ErrorInfoSchema))
    .find((i) => i !== undefined);
  return {
    code: grpcWebField(response, 'grpc-status'),
    message: decodeURIComponent(grpcWebField(response, 'grpc-message')),
    reason: info?.reason,
    limit: info?.metadata.limit,
  };
}

/** Posts `bytes` to `path` as Connect binary and expects the gRPC error's answer: 400, same message. */
async function expectConnectBinaryAnswer(
  sidecar: SidecarProcess,
  path: string,
  bytes: Uint8Array,
  grpcErr: grpc.ServiceError,
): Promise<void> {
  const binary = await post(sidecar.http as string, path, 'application/proto', bytes);
  expect(binary.status).toBe(400);
  const binaryJson = JSON.parse(binary.body.toString('utf8')) as { code: string; message: string };
  expect(binaryJson.code).toBe('invalid_argument');
  expect(binaryJson.message).toBe(grpcErr.details);
}

/** Posts `bytes` as Connect JSON; answers the HTTP status, Connect code and ErrorInfo reason. */
async function connectJsonError(
  sidecar: SidecarProcess,
  path: string,
  bytes: Uint8Array,
): Promise<{ status: number; code: string; reason: string | undefined }> {
  const answer = await post(sidecar.http as string, path, 'application/json', bytes);
  const body = JSON.parse(answer.body.toString('utf8')) as {
    code: string;
    details?: { type: string; value: string }[];
  };
  return {
    status: answer.status,
    code: body.code,
    reason: connectErrorDetails(body.details).reason,
  };
}

/** Expects JSON `bytes` refused as MALFORMED_REQUEST over Connect, and INVALID_ARGUMENT over gRPC-Web. */
async function expectMalformedJson(
  sidecar: SidecarProcess,
  path: string,
  bytes: Uint8Array,
): Promise<void> {
  expect(await connectJsonError(sidecar, path, bytes)).toEqual({
    status: 400,
    code: 'invalid_argument',
    reason: 'MALFORMED_REQUEST',
  });
  const web = await post(
    sidecar.http as string,
    path,
    'application/grpc-web+json',
    envelope(bytes),
  );
  expect(grpcWebStatus(web)).toBe(grpc.status.INVALID_ARGUMENT);
}

/**
 * Opens `grpc.health.v1.Health/Watch` as a Connect JSON stream with `body`
 * (its enveloped request); answers the HTTP status and the first response
 * frame's JSON, then hangs up.
 */
async function firstStreamFrame(
  sidecar: SidecarProcess,
  body: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; message: unknown }> {
  const controller = new AbortController();
  const res = await fetch(`http://${sidecar.http}/grpc.health.v1.Health/Watch`, {
    method: 'POST',
    headers: {
      'content-type': 'application/connect+json',
      'connect-protocol-version': '1',
      ...headers,
    },
    body,
    signal: controller.signal,
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let bytes = Buffer.alloc(0);
  while (bytes.length < 5 || bytes.length < 5 + bytes.readUInt32BE(1)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended after ${bytes.length} bytes`);
    bytes = Buffer.concat([bytes, value]);
  }
  controller.abort();
  const message: unknown = JSON.parse(bytes.subarray(5, 5 + bytes.readUInt32BE(1)).toString());
  return { status: res.status, message };
}

/** Bytes that no protobuf decoder accepts: field 1, length-delimited, length cut short. */
const MALFORMED = new Uint8Array([0x0a, 0xff, 0xff]);
const LIST_HOOKS_PATH = '/agenthooks.v1.HookService/ListHooks';
const REGISTER_HOOKS_PATH = '/agenthooks.v1.HookService/RegisterHooks';
const DISPATCH_STREAM_PATH = '/agenthooks.v1.HookService/DispatchStream';
const HANDLE_PATH = '/agenthooks.v1.HookService/Handle';
/** A small --max-message-bytes for the oversize test. */
const MAX_BYTES = 65_536;

describe('protocol parity', () => {
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    sidecar = await startSidecar({ env: SIGNING_ENV });
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  for (const { rpc, call, field, reason, code } of INVALID_CALLS) {
    it(`answers an invalid ${rpc} the same over gRPC, Connect JSON and binary, gRPC-Web`, async () => {
      const answers = await answersOver(sidecar, call);
      const grpcAnswer = answers.grpc;
      expect(grpcAnswer.code).toBe(code ?? 'InvalidArgument');
      expect(grpcAnswer.reason).toMatch(/^[A-Z0-9_]+$/);
      expect(grpcAnswer.message).not.toBe('internal error');
      if (field !== undefined) expect(grpcAnswer.fields).toEqual([field]);
      if (reason !== undefined) expect(grpcAnswer.reason).toBe(reason);
      for (const protocol of PROTOCOLS) expect(answers[protocol], protocol).toEqual(grpcAnswer);
    });
  }

  it('answers undecodable bytes INVALID_ARGUMENT with MALFORMED_REQUEST on every transport', async () => {
    const grpcErr = await grpcRawStatus(sidecar.grpc, Buffer.from(MALFORMED));
    expect(grpcErr.code).toBe(grpc.status.INVALID_ARGUMENT);

    await expectConnectBinaryAnswer(sidecar, LIST_HOOKS_PATH, MALFORMED, grpcErr);

    const web = await post(
      sidecar.http as string,
      LIST_HOOKS_PATH,
      'application/grpc-web+proto',
      envelope(MALFORMED),
    );
    expect(grpcWebStatus(web)).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('refuses large arguments with invalid UTF-8 as MALFORMED_REQUEST, over gRPC as over Connect', async () => {
    // Over 16 KiB, the gRPC edge checks the arguments on the wire instead of decoding them.
    const content = 'x'.repeat(20_000);
    const bytes = Buffer.from(
      toBinary(
        DecideToolCallRequestSchema,
        create(DecideToolCallRequestSchema, {
          event: {
            context: {
              toolCallId: 'call-1',
              identifier: 'fs',
              apiName: 'write',
              operationId: 'op-malformed-args',
              executor: Executor.SERVER,
              args: { content },
            },
          },
        }),
      ),
    );
    bytes[bytes.indexOf('xxxx') + 10] = 0xff;
    const path = '/agenthooks.v1.HookService/DecideToolCall';
    const grpcErr = await grpcRawStatus(sidecar.grpc, bytes, path);
    expect(grpcErr.code).toBe(grpc.status.INVALID_ARGUMENT);
    await expectConnectBinaryAnswer(sidecar, path, bytes, grpcErr);
    expect(grpcErr.details).toContain('not a valid agenthooks.v1.DecideToolCallRequest');
  });

  it('answers bad JSON INVALID_ARGUMENT with MALFORMED_REQUEST over Connect and gRPC-Web', async () => {
    const bad = new TextEncoder().encode('{"operationId": ');
    await expectMalformedJson(sidecar, LIST_HOOKS_PATH, bad);
  });

  it('refuses JSON that is not UTF-8 with MALFORMED_REQUEST over Connect and gRPC-Web, storing nothing', async () => {
    // {"operationId":"utf-\xff"}: decoded leniently, the byte became U+FFFD.
    const bad = Buffer.concat([
      Buffer.from('{"operationId":"utf-'),
      Buffer.from([0xff]),
      Buffer.from(
        '","hooks":[{"id":"h1","type":"HOOK_TYPE_ON_COMPLETE","webhook":{"url":"https://hooks.example.com/x"}}]}',
      ),
    ]);
    await expectMalformedJson(sidecar, '/agenthooks.v1.HookService/RegisterHooks', bad);
    const answer = await post(
      sidecar.http as string,
      '/agenthooks.v1.HookService/RegisterHooks',
      'application/json',
      bad,
    );
    expect(JSON.parse(answer.body.toString('utf8'))).toMatchObject({
      message:
        'the request is not a valid agenthooks.v1.RegisterHooksRequest message: the JSON is not valid UTF-8',
    });
    const client = createClient(HookService, transportFor('grpc', sidecar));
    const listed = await client.listHooks({ operationId: 'utf-\ufffd' });
    expect(listed.hooks).toEqual([]);
  });

  it('reads a Connect JSON stream whose frame length is not UTF-8, and refuses its messages as unary ones', async () => {
    // 130 characters of service name: the frame's length byte, 0x8f, is not UTF-8 on its own.
    const long = await firstStreamFrame(
      sidecar,
      envelope(Buffer.from(`{"service":"${'x'.repeat(130)}"}`)),
    );
    expect(long).toEqual({ status: 200, message: { status: 'SERVICE_UNKNOWN' } });
    const notUtf8 = Buffer.concat([
      Buffer.from('{"service":"utf-'),
      Buffer.from([0xff]),
      Buffer.from('"}'),
    ]);
    const refusals = [
      { body: envelope(notUtf8), problem: 'the JSON is not valid UTF-8' },
      // The same bytes compressed: checked after connect decompresses them.
      {
        body: envelope(gzipSync(notUtf8), 1),
        headers: { 'connect-content-encoding': 'gzip' },
        problem: 'the JSON is not valid UTF-8',
      },
      { body: envelope(Buffer.from('{"nope":1}')), problem: 'nope' },
    ];
    for (const { body, headers, problem } of refusals) {
      const answer = await firstStreamFrame(sidecar, body, headers);
      expect(answer.status).toBe(200);
      const end = answer.message as { error?: { code: string; message: string; details?: never } };
      expect(end.error?.code).toBe('invalid_argument');
      expect(end.error?.message).toContain(problem);
      expect(connectErrorDetails(end.error?.details).reason).toBe('MALFORMED_REQUEST');
    }
  });

  it('refuses JSON that is not UTF-8 whatever its compression, headers or frame flags', async () => {
    const path = '/agenthooks.v1.HookService/ListHooks';
    const notUtf8 = Buffer.concat([
      Buffer.from('{"operationId":"utf-'),
      Buffer.from([0xfe]),
      Buffer.from('"}'),
    ]);
    const cases: { contentType: string; headers?: Record<string, string>; body: Buffer }[] = [
      {
        contentType: 'application/json',
        headers: { 'content-encoding': 'gzip' },
        body: gzipSync(notUtf8),
      },
      // A header connect does not read for this protocol.
      {
        contentType: 'application/json',
        headers: { 'connect-content-encoding': 'gzip' },
        body: notUtf8,
      },
      {
        contentType: 'application/grpc-web+json',
        headers: { 'content-encoding': 'gzip' },
        body: envelope(notUtf8),
      },
      {
        contentType: 'application/grpc-web+json',
        headers: { 'grpc-encoding': 'gzip' },
        body: envelope(gzipSync(notUtf8), 1),
      },
      // gRPC-Web has no end-stream flag in requests: connect reads the frame as a message.
      { contentType: 'application/grpc-web+json', body: envelope(notUtf8, 2) },
      { contentType: 'Application/GRPC-Web+json', body: envelope(notUtf8) },
    ];
    for (const { contentType, headers, body } of cases) {
      const label = `${contentType} ${JSON.stringify(headers ?? {})}`;
      const answer = await post(sidecar.http as string, path, contentType, body, headers);
      if (contentType.toLowerCase().startsWith('application/grpc-web')) {
        expect(grpcWebStatus(answer), label).toBe(grpc.status.INVALID_ARGUMENT);
        expect(decodeURIComponent(grpcWebField(answer, 'grpc-message')), label).toContain(
          'not a valid agenthooks.v1.ListHooksRequest message: the JSON is not valid UTF-8',
        );
        continue;
      }
      expect(answer.status, label).toBe(400);
      const json = JSON.parse(answer.body.toString('utf8')) as {
        message: string;
        details?: { type: string; value: string }[];
      };
      expect(json.message, label).toBe(
        'the request is not a valid agenthooks.v1.ListHooksRequest message: the JSON is not valid UTF-8',
      );
      expect(connectErrorDetails(json.details).reason, label).toBe('MALFORMED_REQUEST');
    }
  });

  it('guards a decode error connect compresses or that is long, on every HTTP protocol', async () => {
    const path = '/agenthooks.v1.HookService/ListHooks';
    const guarded = 'the request is not a valid agenthooks.v1.ListHooksRequest message';
    // The error quotes the key: over 1 KiB, connect compresses it for a client that accepts it.
    const long = Buffer.from(`{"${'k'.repeat(1200)}":1}`);
    const huge = Buffer.from(`{"${'k'.repeat(100_000)}":1}`);
    const unary: { body: Buffer; headers: Record<string, string> }[] = [
      { body: long, headers: { 'accept-encoding': 'gzip' } },
      { body: long, headers: { 'accept-encoding': 'br' } },
      { body: huge, headers: {} },
    ];
    for (const { body, headers } of unary) {
      const label = `${body.length} ${JSON.stringify(headers)}`;
      const answer = await post(sidecar.http as string, path, 'application/json', body, headers);
      expect(answer.status, label).toBe(400);
      expect(answer.headers['content-encoding'], label).toBeUndefined();
      const json = JSON.parse(answer.body.toString('utf8')) as {
        message: string;
        details?: { type: string; value: string }[];
      };
      expect(json.message.startsWith(guarded), label).toBe(true);
      expect(json.message.length, label).toBeLessThan(600);
      expect(connectErrorDetails(json.details).reason, label).toBe('MALFORMED_REQUEST');
    }
    for (const { body, headers } of [
      { body: long, headers: { 'grpc-accept-encoding': 'gzip' } },
      { body: huge, headers: {} },
    ]) {
      const label = `gRPC-Web ${body.length}`;
      const answer = await post(
        sidecar.http as string,
        path,
        'application/grpc-web+json',
        envelope(body),
        headers,
      );
      expect(grpcWebStatus(answer), label).toBe(grpc.status.INVALID_ARGUMENT);
      const message = decodeURIComponent(grpcWebField(answer, 'grpc-message'));
      expect(message.startsWith(guarded), label).toBe(true);
      expect(message.length, label).toBeLessThan(600);
    }
    const streamed = await firstStreamFrame(
      sidecar,
      envelope(Buffer.from(`{"${'k'.repeat(1200)}":1}`)),
      { 'connect-accept-encoding': 'gzip' },
    );
    const end = streamed.message as { error?: { message: string; details?: never } };
    expect(
      end.error?.message.startsWith(
        'the request is not a valid grpc.health.v1.HealthCheckRequest message',
      ),
    ).toBe(true);
    expect(connectErrorDetails(end.error?.details).reason).toBe('MALFORMED_REQUEST');
  });

  it('guards a compressed decode error with a --max-message-bytes past what zlib bounds', async () => {
    // 8x this is past the largest Buffer: an unbounded bound made zlib refuse to decompress.
    const large = await startSidecar({ args: ['--max-message-bytes', '600000000'] });
    try {
      const answer = await post(
        large.http as string,
        '/agenthooks.v1.HookService/ListHooks',
        'application/json',
        Buffer.from(`{"${'k'.repeat(1200)}":1}`),
        { 'accept-encoding': 'gzip' },
      );
      expect(answer.status).toBe(400);
      expect(answer.headers['content-encoding']).toBeUndefined();
      const json = JSON.parse(answer.body.toString('utf8')) as {
        details?: { type: string; value: string }[];
      };
      expect(connectErrorDetails(json.details).reason).toBe('MALFORMED_REQUEST');
    } finally {
      await killSidecar(large);
    }
  });

  it('refuses a JSON escape of a lone surrogate on every HTTP protocol, and keeps a pair', async () => {
    const path = '/agenthooks.v1.HookService/ListHooks';
    const problem = 'the JSON escapes a lone surrogate (\\uD800-\\uDFFF), which is not Unicode';
    const postJson = (to: string, body: string) =>
      post(sidecar.http as string, to, 'application/json', Buffer.from(body));
    // A string field refuses it, but arguments (a Struct) did not: protobuf-es
    // stored each as U+FFFD, so two different arguments would land on one.
    const decide = `/agenthooks.v1.HookService/DecideToolCall`;
    const cases = [
      { args: { path: '\ud800' }, field: 'event.context.args.path' },
      { args: { list: ['ok', 'x\udfff'] }, field: 'event.context.args.list[1]' },
      // A backslash, then "ud83d" as text: the lone escape after it only looks paired.
      { args: { path: '\\ud83d\udc00' }, field: 'event.context.args.path' },
      // The key, named with U+FFFD: the lone surrogate cannot be sent back either.
      { args: { '\udc00': 1 }, field: 'event.context.args.\ufffd' },
    ];
    for (const { args, field } of cases) {
      const body = JSON.stringify({
        event: { context: { ...toolContext(), executor: 'EXECUTOR_SERVER', args } },
      });
      const answer = await postJson(decide, body);
      expect(answer.status, body).toBe(400);
      const json = JSON.parse(answer.body.toString('utf8')) as {
        message: string;
        details?: { type: string; value: string }[];
      };
      expect(json.message, body).toBe(
        `the request is not a valid agenthooks.v1.DecideToolCallRequest message: ${field}: ${problem}`,
      );
      expect(connectErrorDetails(json.details), body).toEqual({
        reason: 'MALFORMED_REQUEST',
        fields: [field],
      });
    }
    // A key too: connect's own error would quote it, and percent-encoding it in a
    // gRPC-Web trailer threw, leaving the call without an answer.
    const web = await post(
      sidecar.http as string,
      path,
      'application/grpc-web+json',
      envelope(Buffer.from('{"\\ud800":1}')),
    );
    expect(grpcWebStatus(web)).toBe(grpc.status.INVALID_ARGUMENT);
    expect(decodeURIComponent(grpcWebField(web, 'grpc-message'))).toContain(problem);
    const streamed = await firstStreamFrame(
      sidecar,
      envelope(Buffer.from('{"service":"\\udc00"}')),
    );
    const end = streamed.message as { error?: { message: string; details?: never } };
    expect(end.error?.message).toContain(problem);
    expect(connectErrorDetails(end.error?.details).reason).toBe('MALFORMED_REQUEST');
    // A pair is one character; an escaped backslash before "ud800" is plain text.
    for (const body of [
      '{"operationId":"op-\\ud83d\\ude00"}',
      '{"operationId":"op-\\\\ud800"}',
      '{"operationId":"op-\\\\ud83d\\\\ude00"}',
    ]) {
      const answer = await postJson(path, body);
      expect(answer.status, body).toBe(200);
    }
    // The pair reads back as the character a binary client sends.
    const client = createClient(HookService, transportFor('grpc', sidecar));
    await client.registerHooks({
      operationId: 'op-\u{1f600}',
      hooks: [{ id: 'h1', type: HookType.ON_COMPLETE, webhook: { url: 'http://127.0.0.1:9/x' } }],
    });
    const listed = await postJson(path, '{"operationId":"op-\\ud83d\\ude00"}');
    expect(JSON.parse(listed.body.toString('utf8'))).toMatchObject({ hooks: [{ id: 'h1' }] });
  });

  it('refuses arguments nested deeper over JSON than binary takes, and keeps what it accepts readable', async () => {
    const nested = (levels: number): JsonValue => {
      let v: JsonValue = { leaf: 1 };
      for (let i = 1; i < levels; i += 1) v = { a: v };
      return v;
    };
    const parkBody = (toolCallId: string, levels: number) =>
      new TextEncoder().encode(
        JSON.stringify({
          context: {
            ...toolContext(),
            executor: 'EXECUTOR_SERVER',
            toolCallId,
            args: nested(levels),
          },
          kind: 'PARK_KIND_HUMAN_APPROVAL',
        }),
      );
    const park = (toolCallId: string, levels: number) =>
      post(
        sidecar.http as string,
        '/agenthooks.v1.HookService/ParkToolCall',
        'application/json',
        parkBody(toolCallId, levels),
      );
    // Binary refuses 60 levels. JSON took up to 97, and a call parked that
    // deep could not be read back from the store: its repeat failed.
    expect(
      await connectJsonError(
        sidecar,
        '/agenthooks.v1.HookService/ParkToolCall',
        parkBody('deep-60', 60),
      ),
    ).toEqual({ status: 400, code: 'invalid_argument', reason: 'MALFORMED_REQUEST' });
    const grpcAnswer = await answersOver(
      sidecar,
      (c) =>
        c.parkToolCall({
          context: { ...toolContext(), toolCallId: 'deep-60-grpc', args: nested(60) as never },
          kind: ParkKind.HUMAN_APPROVAL,
        }),
      ['grpc'],
    );
    expect(grpcAnswer.grpc.reason).toBe('MALFORMED_REQUEST');
    const first = await park('deep-45', 45);
    expect(first.status, first.body.toString('utf8')).toBe(200);
    const again = await park('deep-45', 45);
    expect(again.status, again.body.toString('utf8')).toBe(200);
  });

  it('logged none of the client errors above', () => {
    const failures = sidecar.logs.filter((l) => l.level === 'error' || l.level === 'warn');
    expect(failures).toEqual([]);
  });
});

describe('protocol parity of an oversize request', () => {
  it('answers RESOURCE_EXHAUSTED on every transport past --max-message-bytes', async () => {
    const sidecar = await startSidecar({ args: ['--max-message-bytes', String(MAX_BYTES)] });
    try {
      const big = { operationId: 'x'.repeat(MAX_BYTES * 2) };
      const tooLarge = `the request message is larger than --max-message-bytes (${MAX_BYTES} bytes)`;
      const counted = () =>
        metric(sidecar, 'agenthooks_rpc_calls_total{method="ListHooks",code="RESOURCE_EXHAUSTED"}');
      const before = await counted();
      // grpc-js refuses these itself, plain and by what a gzip message decompresses to;
      // the answer is still ours, as over every other protocol.
      const bytes = toBinary(ListHooksRequestSchema, create(ListHooksRequestSchema, big));
      for (const [name, frame, headers] of [
        ['plain', envelope(bytes), {}],
        ['gzip', envelope(gzipSync(bytes), 1), { 'grpc-encoding': 'gzip' }],
      ] as const) {
        const answer = await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, frame, headers);
        expect(answer, name).toEqual({
          code: String(grpc.status.RESOURCE_EXHAUSTED),
          message: tooLarge,
          reason: 'MESSAGE_TOO_LARGE',
          limit: String(MAX_BYTES),
        });
      }
      const grpcAnswer = await answersOver(sidecar, (c) => c.listHooks(big), ['grpc']);
      expect(grpcAnswer.grpc).toMatchObject({
        code: 'ResourceExhausted',
        message: tooLarge,
        reason: 'MESSAGE_TOO_LARGE',
      });
      // Raw requests over HTTP/1.1: the answer comes before the body is read, and a
      // client library may report that as a broken upload rather than the status.
      const http = sidecar.http as string;
      const json = new TextEncoder().encode(JSON.stringify(big));
      // Plain, and compressed to little on the wire: the bound is on what it decompresses to.
      for (const [type, body, headers] of [
        ['application/proto', bytes, {}],
        ['application/json', json, {}],
        ['application/json', gzipSync(json), { 'content-encoding': 'gzip' }],
      ] as const) {
        const answer = await post(http, LIST_HOOKS_PATH, type, body, headers);
        expect(answer.status, type).toBe(429);
        const error = JSON.parse(answer.body.toString('utf8')) as {
          code: string;
          message: string;
          details?: never;
        };
        expect(error.code, type).toBe('resource_exhausted');
        expect(error.message, type).toBe(tooLarge);
        expect(connectErrorDetails(error.details).reason, type).toBe('MESSAGE_TOO_LARGE');
      }
      const web = await post(http, LIST_HOOKS_PATH, 'application/grpc-web+proto', envelope(bytes));
      expect(grpcWebStatus(web)).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(decodeURIComponent(grpcWebField(web, 'grpc-message'))).toBe(tooLarge);
      // Each refusal is counted under the code its client got, over gRPC as over HTTP.
      expect((await counted()) - before).toBe(7);
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('answers a refused message in the middle of a stream as at its start: ours, with its reason', async () => {
    const sidecar = await startSidecar({ args: ['--max-message-bytes', String(MAX_BYTES)] });
    try {
      const path = '/agenthooks.v1.HookService/DispatchStream';
      // Acked at once (an event without its event: EVENT_FIELD_REQUIRED), so the
      // stream's headers are out before the frame under test.
      const first = envelope(
        Buffer.from(
          toBinary(
            DispatchStreamRequestSchema,
            create(DispatchStreamRequestSchema, { eventId: 'e1' }),
          ),
        ),
      );
      const big = envelope(Buffer.alloc(MAX_BYTES * 2, 0x20));
      expect(await grpcRawCall(sidecar.grpc, path, big, {}, first)).toEqual({
        code: String(grpc.status.RESOURCE_EXHAUSTED),
        message: `the request message is larger than --max-message-bytes (${MAX_BYTES} bytes)`,
        reason: 'MESSAGE_TOO_LARGE',
        limit: String(MAX_BYTES),
      });
      const garbage = envelope(Buffer.from('this is not gzip'), 1);
      expect(
        await grpcRawCall(sidecar.grpc, path, garbage, { 'grpc-encoding': 'gzip' }, first),
      ).toMatchObject({ code: String(grpc.status.INVALID_ARGUMENT), reason: 'MALFORMED_REQUEST' });
      // Each stream counted once, under the code its client got.
      const series = (code: string) =>
        `agenthooks_rpc_calls_total{method="DispatchStream",code="${code}"}`;
      const counts = () =>
        Promise.all(
          ['RESOURCE_EXHAUSTED', 'INVALID_ARGUMENT', 'OK', 'CANCELLED'].map((c) =>
            metric(sidecar, series(c)),
          ),
        );
      expect(await eventually(counts, ([r, i]) => r === 1 && i === 1)).toEqual([1, 1, 0, 0]);
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('counts each refusal grpc-js makes once, under its code, and only on the service it meters', async () => {
    const sidecar = await startSidecar({ args: ['--max-message-bytes', '4096'] });
    try {
      const series = (method: string, code: string) =>
        `agenthooks_rpc_calls_total{method="${method}",code="${code}"}`;
      const counts = async () => [
        await metric(sidecar, series('ListHooks', 'RESOURCE_EXHAUSTED')),
        await metric(sidecar, series('ListHooks', 'INVALID_ARGUMENT')),
        await metric(sidecar, series('Check', 'RESOURCE_EXHAUSTED')),
      ];
      // One frame each, its end of stream with it: grpc-js refuses the message,
      // then reports the call's end as a call with no message, which is no answer.
      const frame = envelope(Buffer.alloc(5000, 0x20));
      for (let i = 0; i < 5; i++) {
        const answer = await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, frame, {});
        expect(answer.reason).toBe('MESSAGE_TOO_LARGE');
        const health = await grpcRawCall(sidecar.grpc, '/grpc.health.v1.Health/Check', frame, {});
        expect(health.reason).toBe('MESSAGE_TOO_LARGE');
      }
      // Health is not metered (a probe's calls are not counted), refused or not.
      expect(await counts()).toEqual([5, 0, 0]);
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('answers a body that does not decompress INVALID_ARGUMENT (MALFORMED_REQUEST) on every protocol', async () => {
    const sidecar = await startSidecar();
    try {
      const http = sidecar.http as string;
      const garbage = Buffer.from('this is not gzip');
      const problem = `the request is not a valid ${ListHooksRequestSchema.typeName} message: the message does not decompress`;
      for (const type of ['application/proto', 'application/json']) {
        const answer = await post(http, LIST_HOOKS_PATH, type, garbage, {
          'content-encoding': 'gzip',
        });
        expect(answer.status, type).toBe(400);
        const error = JSON.parse(answer.body.toString('utf8')) as {
          code: string;
          message: string;
          details?: never;
        };
        expect(error, type).toMatchObject({ code: 'invalid_argument', message: problem });
        expect(connectErrorDetails(error.details).reason, type).toBe('MALFORMED_REQUEST');
      }
      const web = await post(
        http,
        LIST_HOOKS_PATH,
        'application/grpc-web+proto',
        envelope(garbage, 1),
        { 'grpc-encoding': 'gzip' },
      );
      expect(grpcWebStatus(web)).toBe(grpc.status.INVALID_ARGUMENT);
      expect(decodeURIComponent(grpcWebField(web, 'grpc-message'))).toBe(problem);
      // Native gRPC too: grpc-js's own answer would be INTERNAL, as if the sidecar had failed.
      const counted = () =>
        metric(sidecar, 'agenthooks_rpc_calls_total{method="ListHooks",code="INVALID_ARGUMENT"}');
      const before = await counted();
      const native = await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, envelope(garbage, 1), {
        'grpc-encoding': 'gzip',
      });
      expect(native).toEqual({
        code: String(grpc.status.INVALID_ARGUMENT),
        message: problem,
        reason: 'MALFORMED_REQUEST',
        limit: undefined,
      });
      expect((await counted()) - before).toBe(1);
      expect(sidecar.logs.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      await killSidecar(sidecar);
    }
  });
});

describe('protocol parity of a request framed wrong', () => {
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    sidecar = await startSidecar();
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  const message = envelope(toBinary(ListHooksRequestSchema, create(ListHooksRequestSchema, {})));
  const malformed = (problem: string) => ({
    code: String(grpc.status.INVALID_ARGUMENT),
    message: `the request is not a valid ${ListHooksRequestSchema.typeName} message: ${problem}`,
    reason: 'MALFORMED_REQUEST',
    limit: undefined,
  });

  it('answers a timeout header that is not a timeout INVALID_ARGUMENT (INVALID_TIMEOUT) everywhere, grpc-js and connect alike', async () => {
    const expected = {
      code: String(grpc.status.INVALID_ARGUMENT),
      message: 'grpc-timeout: not a timeout: "abc"',
      reason: 'INVALID_TIMEOUT',
      limit: undefined,
    };
    expect(
      await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, message, { 'grpc-timeout': 'abc' }),
    ).toEqual(expected);
    const http = sidecar.http as string;
    const web = await post(http, LIST_HOOKS_PATH, 'application/grpc-web+proto', message, {
      'grpc-timeout': 'abc',
    });
    expect(webAnswer(web)).toEqual(expected);
    // Connect, JSON and binary alike.
    for (const [type, body] of [
      ['application/json', Buffer.from('{}')],
      ['application/proto', new Uint8Array(0)],
    ] as const) {
      const connect = await post(http, LIST_HOOKS_PATH, type, body, {
        'connect-timeout-ms': 'abc',
      });
      expect(connect.status, type).toBe(400);
      const error = JSON.parse(connect.body.toString('utf8')) as {
        code: string;
        message: string;
        details?: never;
      };
      expect(error, type).toMatchObject({
        code: 'invalid_argument',
        message: 'connect-timeout-ms: not a timeout: "abc"',
      });
      expect(connectErrorDetails(error.details).reason, type).toBe('INVALID_TIMEOUT');
    }
  });

  it('answers Health/Check of an unknown service NOT_FOUND (SERVICE_NOT_FOUND) the same everywhere', async () => {
    const answers: Partial<Record<Protocol, Answer>> = {};
    for (const protocol of PROTOCOLS) {
      const health = createClient(Health, transportFor(protocol, sidecar));
      answers[protocol] = await health
        .check({ service: 'nope' })
        .then(() => ({ code: 'OK', message: '', reason: undefined, fields: [] }), answerOf);
    }
    expect(answers).toEqual(
      Object.fromEntries(
        PROTOCOLS.map((p) => [
          p,
          {
            code: 'NotFound',
            message: 'unknown service nope',
            reason: 'SERVICE_NOT_FOUND',
            fields: [],
          },
        ]),
      ),
    );
  });

  it('answers a unary call without its message, or with two, INVALID_ARGUMENT (MALFORMED_REQUEST) everywhere', async () => {
    const http = sidecar.http as string;
    for (const [problem, body] of [
      ['the request has no message', Buffer.alloc(0)],
      ['the request has more than one message', Buffer.concat([message, message])],
    ] as const) {
      expect(await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, body, {}), problem).toEqual(
        malformed(problem),
      );
      const web = await post(http, LIST_HOOKS_PATH, 'application/grpc-web+proto', body);
      expect(webAnswer(web), problem).toEqual(malformed(problem));
    }
  });

  it('answers a gRPC-Web envelope cut short, or compressed without an encoding, INVALID_ARGUMENT, not INTERNAL', async () => {
    const http = sidecar.http as string;
    const counted = () =>
      metric(sidecar, 'agenthooks_rpc_calls_total{method="ListHooks",code="INVALID_ARGUMENT"}');
    const before = await counted();
    const cut = message.subarray(0, message.length - 1);
    const short = Buffer.concat([Buffer.from([0, 0, 0, 0, 9]), Buffer.from('ab')]);
    for (const body of [cut, short]) {
      const web = await post(http, LIST_HOOKS_PATH, 'application/grpc-web+proto', body);
      expect(webAnswer(web)).toEqual(malformed('the message envelope is incomplete'));
    }
    const flagged = Buffer.from(message);
    flagged[0] = 1;
    const web = await post(http, LIST_HOOKS_PATH, 'application/grpc-web+proto', flagged);
    expect(webAnswer(web)).toEqual(
      malformed('the message is compressed, but the request names no encoding'),
    );
    expect((await counted()) - before).toBe(3);
    expect(sidecar.logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('refuses a message flagged compressed with no encoding named over gRPC as over gRPC-Web, unary and streamed', async () => {
    const problem = 'the message is compressed, but the request names no encoding';
    const counted = () =>
      metric(sidecar, 'agenthooks_rpc_calls_total{method="ListHooks",code="INVALID_ARGUMENT"}');
    const before = await counted();
    const flagged = Buffer.from(message);
    flagged[0] = 1;
    expect(await grpcRawCall(sidecar.grpc, LIST_HOOKS_PATH, flagged, {})).toEqual(
      malformed(problem),
    );
    const web = await post(
      sidecar.http as string,
      LIST_HOOKS_PATH,
      'application/grpc-web+proto',
      flagged,
    );
    expect(webAnswer(web)).toEqual(malformed(problem));
    expect((await counted()) - before).toBe(2);
    // A stream's message: the stream ends with the same refusal, nothing acked.
    const event = envelope(
      toBinary(DispatchStreamRequestSchema, create(DispatchStreamRequestSchema, { eventId: 'e1' })),
      1,
    );
    expect(await grpcRawCall(sidecar.grpc, DISPATCH_STREAM_PATH, event, {})).toEqual({
      code: String(grpc.status.INVALID_ARGUMENT),
      message: `the request is not a valid ${DispatchStreamRequestSchema.typeName} message: ${problem}`,
      reason: 'MALFORMED_REQUEST',
      limit: undefined,
    });
  });
});

describe('protocol parity of a bidi stream on the HTTP listener', () => {
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    sidecar = await startSidecar();
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  const message = (rpc: string) =>
    `agenthooks.v1.HookService.${rpc} is a bidirectional stream, served over native gRPC on the gRPC listener only`;

  it('answers DispatchStream and Handle UNIMPLEMENTED (UNIMPLEMENTED) over gRPC-Web and Connect, naming the gRPC listener', async () => {
    const http = sidecar.http as string;
    const bodies = {
      DispatchStream: toBinary(
        DispatchStreamRequestSchema,
        create(DispatchStreamRequestSchema, { eventId: 'e1' }),
      ),
      Handle: toBinary(
        HandleRequestSchema,
        create(HandleRequestSchema, {
          message: { case: 'attach', value: { operationIds: ['http-op'] } },
        }),
      ),
    };
    for (const [rpc, bytes] of Object.entries(bodies)) {
      const path = `/agenthooks.v1.HookService/${rpc}`;
      for (const type of ['application/grpc-web+proto', 'application/grpc-web+json']) {
        const body = type.endsWith('json') ? Buffer.from('{}') : bytes;
        const web = await post(http, path, type, envelope(body));
        expect(web.status, `${rpc} ${type}`).toBe(200);
        expect(webAnswer(web), `${rpc} ${type}`).toEqual({
          code: String(grpc.status.UNIMPLEMENTED),
          message: message(rpc),
          reason: 'UNIMPLEMENTED',
          limit: undefined,
        });
      }
      for (const type of ['application/connect+proto', 'application/connect+json']) {
        const body = type.endsWith('json') ? Buffer.from('{}') : bytes;
        const connect = await post(http, path, type, envelope(body), {
          'connect-protocol-version': '1',
        });
        expect(connect.status, `${rpc} ${type}`).toBe(200);
        // The end-stream message: flag 2, then its JSON.
        expect(connect.body[0], `${rpc} ${type}`).toBe(2);
        const end = JSON.parse(connect.body.subarray(5).toString('utf8')) as {
          error: { code: string; message: string; details?: ConnectErrorDetail[] };
        };
        expect(end.error.code, `${rpc} ${type}`).toBe('unimplemented');
        expect(end.error.message, `${rpc} ${type}`).toBe(message(rpc));
        expect(connectErrorDetails(end.error.details).reason, `${rpc} ${type}`).toBe(
          'UNIMPLEMENTED',
        );
      }
      expect(
        await metric(sidecar, `agenthooks_rpc_calls_total{method="${rpc}",code="UNIMPLEMENTED"}`),
        rpc,
      ).toBe(4);
    }
  });
});

describe('protocol parity of a server-side fault', () => {
  it('answers UNAVAILABLE the same everywhere while the store is locked, and logs each call once with its cause', async () => {
    const sidecar = await startSidecar({
      args: ['--db-busy-timeout', '0', '--store-check-interval', '3600'],
    });
    const lock = new Database(sidecar.db);
    try {
      lock.exec('BEGIN IMMEDIATE');
      // A valid hook: only the store can fail this call.
      const register = (c: HookClient) =>
        c.registerHooks({
          operationId: 'fault-op',
          hooks: [
            { id: 'h1', type: HookType.ON_COMPLETE, webhook: { url: 'http://127.0.0.1:9/hook' } },
          ],
        });
      const answers = await answersOver(sidecar, register);
      expect(answers.grpc.code).toBe('Unavailable');
      expect(answers.grpc.reason).toBe('STORE_LOCKED');
      for (const protocol of PROTOCOLS) expect(answers[protocol], protocol).toEqual(answers.grpc);
      const logged = sidecar.logs.filter((l) => l.msg === 'rpc failed');
      expect(logged).toHaveLength(PROTOCOLS.length);
      for (const line of logged) {
        expect(line.rpc).toBe('agenthooks.v1.HookService/RegisterHooks');
        expect(line.code).toBe('UNAVAILABLE');
        expect(line.err).toBeDefined();
      }
    } finally {
      lock.exec('ROLLBACK');
      lock.close();
      await killSidecar(sidecar);
    }
  });
});

/**
 * The deadline each protocol carries, sent as a header so that the client does
 * not enforce it itself: the server's deadline ends the call, and its answer
 * reaches the client.
 */
const DEADLINE_HEADER: Record<Protocol, Record<string, string>> = {
  grpc: { 'grpc-timeout': '300m' },
  'connect-json': { 'connect-timeout-ms': '300' },
  'connect-binary': { 'connect-timeout-ms': '300' },
  'grpc-web': { 'grpc-timeout': '300m' },
};

/** Registers one control webhook of `type` for `operationId`, posting to `receiverUrl`/control. */
async function registerControl(
  client: HookClient,
  operationId: string,
  id: string,
  type: HookType,
  receiverUrl: string,
): Promise<void> {
  await client.registerHooks({
    operationId,
    hooks: [
      {
        id,
        type,
        webhook: { url: `${receiverUrl}/control`, responseHandling: ResponseHandling.TOOL_CALL },
      },
    ],
  });
}

/**
 * One DecideToolCall on `operationId` over each protocol, with that
 * protocol's `headers`: the decision's outcome (`allow`, ...) or the error's
 * code name (`DeadlineExceeded`), by protocol.
 */
async function decideOnEveryProtocol(
  sidecar: SidecarProcess,
  operationId: string,
  headers: Record<Protocol, Record<string, string>>,
): Promise<Partial<Record<Protocol, string>>> {
  const answers: Partial<Record<Protocol, string>> = {};
  for (const protocol of PROTOCOLS) {
    const caller = createClient(HookService, transportFor(protocol, sidecar));
    const context = { ...toolContext(), operationId, toolCallId: `${operationId}-${protocol}` };
    try {
      const res = await caller.decideToolCall(
        { event: { context } },
        { headers: headers[protocol] },
      );
      answers[protocol] = res.decision?.outcome.case ?? 'none';
    } catch (e: unknown) {
      answers[protocol] = Code[ConnectError.from(e).code] ?? 'unknown';
    }
  }
  return answers;
}

/** The same answer by every protocol. */
function onEveryProtocol(answer: string): Record<Protocol, string> {
  return Object.fromEntries(PROTOCOLS.map((p) => [p, answer])) as Record<Protocol, string>;
}

describe('protocol parity of a deadline', () => {
  // 30 days: past the 2^31 - 1 ms a Node timer holds. Uncut, the call ended
  // after 1 ms: DEADLINE_EXCEEDED over gRPC, CANCELLED over Connect.
  const LONG_DEADLINE: Record<Protocol, Record<string, string>> = {
    grpc: { 'grpc-timeout': '720H' },
    'connect-json': { 'connect-timeout-ms': '2592000000' },
    'connect-binary': { 'connect-timeout-ms': '2592000000' },
    'grpc-web': { 'grpc-timeout': '720H' },
  };

  it('lets a call with a deadline longer than a timer holds run to its answer everywhere', async () => {
    const receiver = await startReceiver({
      answer: { json: { decision: 'allow' }, delayMs: 100 },
    });
    const sidecar = await startSidecar();
    try {
      const client = createClient(HookService, transportFor('grpc', sidecar));
      await registerControl(client, 'long-op', 'slow', HookType.BEFORE_TOOL_CALL, receiver.url);
      expect(await decideOnEveryProtocol(sidecar, 'long-op', LONG_DEADLINE)).toEqual(
        onEveryProtocol('allow'),
      );
      // grpc-js also reads a space before the unit.
      const spaced = await createClient(HookService, transportFor('grpc', sidecar)).decideToolCall(
        { event: { context: { ...toolContext(), operationId: 'long-op', toolCallId: 'long-sp' } } },
        { headers: { 'grpc-timeout': '720 H' } },
      );
      expect(spaced.decision?.outcome.case).toBe('allow');
    } finally {
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('runs no call whose deadline passed while its body was on the way, on any protocol', async () => {
    const sidecar = await startSidecar();
    try {
      const http = sidecar.http as string;
      // The deadline is 100 ms; the body comes 500 ms after the headers.
      const json = await post(
        http,
        REGISTER_HOOKS_PATH,
        'application/json',
        new TextEncoder().encode(
          toJsonString(RegisterHooksRequestSchema, registration('late-json')),
        ),
        { 'connect-timeout-ms': '100' },
        500,
      );
      expect(json.status).toBe(504);
      expect(JSON.parse(json.body.toString('utf8'))).toMatchObject({
        code: 'deadline_exceeded',
      });
      const web = await post(
        http,
        REGISTER_HOOKS_PATH,
        'application/grpc-web+proto',
        envelope(toBinary(RegisterHooksRequestSchema, registration('late-web'))),
        { 'grpc-timeout': '100m' },
        500,
      );
      const LATE = {
        code: String(grpc.status.DEADLINE_EXCEEDED),
        message: 'the call’s deadline passed before its request arrived',
        reason: 'DEADLINE_EXCEEDED',
        limit: undefined,
      };
      expect(webAnswer(web)).toEqual(LATE);
      // Native gRPC: the headers, and no message before the deadline; grpc-js ends the
      // call itself, with the guard's status.
      expect(
        await grpcHeadersOnly(sidecar.grpc, REGISTER_HOOKS_PATH, { 'grpc-timeout': '100m' }),
      ).toEqual(LATE);
      const client = createClient(HookService, transportFor('grpc', sidecar));
      for (const operationId of ['late-json', 'late-web']) {
        expect((await client.listHooks({ operationId })).hooks, operationId).toEqual([]);
      }
      // Each counted once, under the code its client got.
      expect(
        await metric(
          sidecar,
          'agenthooks_rpc_calls_total{method="RegisterHooks",code="DEADLINE_EXCEEDED"}',
        ),
      ).toBe(3);
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('answers a decision whose control outlasts its deadline DEADLINE_EXCEEDED everywhere, and counts it so', async () => {
    const held: ServerResponse[] = [];
    const receiver = await startReceiver({ answer: (_req, res) => held.push(res) });
    const sidecar = await startSidecar();
    try {
      const client = createClient(HookService, transportFor('grpc', sidecar));
      await registerControl(client, 'slow-op', 'slow', HookType.BEFORE_TOOL_CALL, receiver.url);
      expect(await decideOnEveryProtocol(sidecar, 'slow-op', DEADLINE_HEADER)).toEqual(
        onEveryProtocol('DeadlineExceeded'),
      );
      const series = (code: string) =>
        `agenthooks_rpc_calls_total{method="DecideToolCall",code="${code}"}`;
      // The last call's count may land just after its client gave up.
      const counts = await eventually(
        async () => [
          await metric(sidecar, series('DEADLINE_EXCEEDED')),
          await metric(sidecar, series('CANCELLED')),
        ],
        ([exceeded, cancelled]) => (exceeded ?? 0) + (cancelled ?? 0) >= PROTOCOLS.length,
      );
      expect(counts).toEqual([PROTOCOLS.length, 0]);
    } finally {
      for (const res of held.splice(0)) res.destroy();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('answers a publication that waits past its deadline DEADLINE_EXCEEDED everywhere, and counts it so', async () => {
    const held: ServerResponse[] = [];
    const receiver = await startReceiver({ answer: (_req, res) => held.push(res) });
    const sidecar = await startSidecar();
    try {
      const client = createClient(HookService, transportFor('grpc', sidecar));
      await registerControl(client, 'deadline-op', 'guard', HookType.AFTER_TOOL_CALL, receiver.url);
      const context = { ...toolContext(), operationId: 'deadline-op', toolCallId: 'call-wait' };
      await client.parkToolCall({ context, kind: ParkKind.HUMAN_APPROVAL });
      const request = { toolCallId: 'call-wait', result: { content: 'first' } };
      // The first publication waits on its control, which the receiver holds.
      const first = client.publishDeferredResult(request);
      while (receiver.requests.length === 0) await new Promise(setImmediate);

      const codes: Partial<Record<Protocol, string>> = {};
      for (const protocol of PROTOCOLS) {
        const duplicate = createClient(HookService, transportFor(protocol, sidecar));
        try {
          await duplicate.publishDeferredResult(request, { headers: DEADLINE_HEADER[protocol] });
          codes[protocol] = 'OK';
        } catch (e: unknown) {
          codes[protocol] = Code[ConnectError.from(e).code];
        }
      }

      expect(codes).toEqual({
        grpc: 'DeadlineExceeded',
        'connect-json': 'DeadlineExceeded',
        'connect-binary': 'DeadlineExceeded',
        'grpc-web': 'DeadlineExceeded',
      });
      // The server's own count: grpc-js answers the gRPC client itself, so only the
      // metric shows how the sidecar classed that call.
      const series = (code: string) =>
        `agenthooks_rpc_calls_total{method="PublishDeferredResult",code="${code}"}`;
      const metrics = await (await fetch(`http://${sidecar.http}/metrics`)).text();
      const count = (code: string) =>
        Number(
          metrics
            .split('\n')
            .find((l) => l.startsWith(`${series(code)} `))
            ?.split(' ')[1] ?? 0,
        );
      expect([count('DEADLINE_EXCEEDED'), count('CANCELLED')]).toEqual([PROTOCOLS.length, 0]);
      for (const res of held.splice(0)) res.end(JSON.stringify({ decision: 'allow' }));
      expect(await first).toMatchObject({ published: true });
    } finally {
      for (const res of held.splice(0)) res.destroy();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

describe('protocol parity of a deadline that ends a running method', () => {
  /** What every protocol answers a call whose deadline passed while its method ran. */
  const CUT_OFF: Answer = {
    code: 'DeadlineExceeded',
    message: 'the call’s deadline passed before it was answered',
    reason: 'DEADLINE_EXCEEDED',
    fields: [],
  };

  it('answers a Dispatch, a CompleteOperation and a Modify whose critical hooks outlast the deadline DEADLINE_EXCEEDED everywhere, and counts them so', async () => {
    const held: ServerResponse[] = [];
    const receiver = await startReceiver({ answer: (_req, res) => held.push(res) });
    const sidecar = await startSidecar();
    try {
      const client = createClient(HookService, transportFor('grpc', sidecar));
      const webhook = { url: `${receiver.url}/hook`, fallback: Fallback.NONE };
      const answers = {
        Dispatch: {} as Partial<Record<Protocol, Answer | 'OK'>>,
        Modify: {} as Partial<Record<Protocol, Answer | 'OK'>>,
        CompleteOperation: {} as Partial<Record<Protocol, Answer | 'OK'>>,
      };
      const outcome = (call: Promise<unknown>) => call.then(() => 'OK' as const, answerOf);
      for (const protocol of PROTOCOLS) {
        // An operation per protocol: CompleteOperation ends it.
        const operationId = `cut-${protocol}`;
        await client.registerHooks({
          operationId,
          hooks: [
            { id: 'step', type: HookType.AFTER_STEP, webhook },
            { id: 'done', type: HookType.ON_COMPLETE, webhook },
            { id: 'ctx', point: ModifyPoint.TRANSFORM_CONTEXT, webhook },
          ],
        });
        const caller = createClient(HookService, transportFor(protocol, sidecar));
        const headers = DEADLINE_HEADER[protocol];
        const step = { operationId, agentId: 'a', userId: 'u', stepIndex: 0 };
        answers.Dispatch[protocol] = await outcome(
          caller.dispatch({ event: { event: { case: 'afterStep', value: step } } }, { headers }),
        );
        answers.Modify[protocol] = await outcome(
          caller.modify(
            { operationId, point: ModifyPoint.TRANSFORM_CONTEXT, contextJson: '{"messages":[]}' },
            { headers },
          ),
        );
        answers.CompleteOperation[protocol] = await outcome(
          caller.completeOperation({ event: { operationId, reason: 'done' } }, { headers }),
        );
      }
      const everywhere = Object.fromEntries(PROTOCOLS.map((p) => [p, CUT_OFF]));
      expect(answers).toEqual({
        Dispatch: everywhere,
        Modify: everywhere,
        CompleteOperation: everywhere,
      });
      for (const rpc of ['Dispatch', 'Modify', 'CompleteOperation']) {
        const series = (code: string) =>
          `agenthooks_rpc_calls_total{method="${rpc}",code="${code}"}`;
        // The last call's count may land just after its client gave up.
        const counts = await eventually(
          async () => [
            await metric(sidecar, series('DEADLINE_EXCEEDED')),
            await metric(sidecar, series('OK')),
            await metric(sidecar, series('CANCELLED')),
          ],
          ([exceeded]) => (exceeded ?? 0) >= PROTOCOLS.length,
        );
        expect(counts, rpc).toEqual([PROTOCOLS.length, 0, 0]);
      }
    } finally {
      for (const res of held.splice(0)) res.destroy();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });

  it('runs no call whose deadline had passed when it arrived (a timeout of 0), on any protocol', async () => {
    const sidecar = await startSidecar();
    try {
      const expired = {
        code: String(grpc.status.DEADLINE_EXCEEDED),
        message: 'the call’s deadline passed before its request arrived',
        reason: 'DEADLINE_EXCEEDED',
        limit: undefined,
      };
      for (const timeout of ['0S', '0n']) {
        const operationId = `zero-grpc-${timeout}`;
        expect(
          await grpcRawCall(
            sidecar.grpc,
            REGISTER_HOOKS_PATH,
            envelope(toBinary(RegisterHooksRequestSchema, registration(operationId))),
            { 'grpc-timeout': timeout },
          ),
          timeout,
        ).toEqual(expired);
      }
      const web = await post(
        sidecar.http as string,
        REGISTER_HOOKS_PATH,
        'application/grpc-web+proto',
        envelope(toBinary(RegisterHooksRequestSchema, registration('zero-web'))),
        { 'grpc-timeout': '0S' },
      );
      expect(webAnswer(web)).toEqual(expired);
      // Nor does a stream start: DispatchStream and Handle end at once.
      const streamed = envelope(
        toBinary(
          DispatchStreamRequestSchema,
          fromJson(DispatchStreamRequestSchema, {
            eventId: 'e1',
            event: {
              afterStep: { operationId: 'zero-stream', agentId: 'a', userId: 'u', stepIndex: 0 },
            },
          }),
        ),
      );
      const attach = envelope(
        toBinary(
          HandleRequestSchema,
          create(HandleRequestSchema, {
            message: { case: 'attach', value: { operationIds: ['zero-stream'] } },
          }),
        ),
      );
      for (const [path, frame] of [
        [DISPATCH_STREAM_PATH, streamed],
        [HANDLE_PATH, attach],
      ] as const) {
        expect(
          await grpcRawCall(sidecar.grpc, path, frame, { 'grpc-timeout': '0S' }),
          path,
        ).toEqual(expired);
      }
      const client = createClient(HookService, transportFor('grpc', sidecar));
      for (const operationId of ['zero-grpc-0S', 'zero-grpc-0n', 'zero-web']) {
        expect((await client.listHooks({ operationId })).hooks, operationId).toEqual([]);
      }
      expect(
        await metric(
          sidecar,
          'agenthooks_rpc_calls_total{method="RegisterHooks",code="DEADLINE_EXCEEDED"}',
        ),
      ).toBe(3);
    } finally {
      await killSidecar(sidecar);
    }
  });
});

describe('protocol parity of a request over --max-message-nodes', () => {
  /** A small bound, so that requests past it stay small. */
  const LIMIT = 1000;
  const DISPATCH_PATH = '/agenthooks.v1.HookService/Dispatch';
  const STREAM_PATH = '/agenthooks.v1.HookService/DispatchStream';
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    sidecar = await startSidecar({ args: ['--max-message-nodes', String(LIMIT)] });
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  /** An afterStep whose tools result is a list of `n` nulls: about n nodes. */
  const afterStep = (n: number) => ({
    afterStep: { operationId: 'op-nodes', userId: 'u', toolsResult: Array(n).fill(null) },
  });
  const dispatchOf = (n: number) => fromJson(DispatchRequestSchema, { event: afterStep(n) });
  const streamEventOf = (eventId: string, n: number) =>
    toBinary(
      DispatchStreamRequestSchema,
      fromJson(DispatchStreamRequestSchema, { eventId, event: afterStep(n) }),
    );
  /** A tool call whose arguments have `n` members: about 2n nodes. */
  const decideOf = (n: number) =>
    fromJson(DecideToolCallRequestSchema, {
      event: {
        context: {
          toolCallId: 'call-nodes',
          identifier: 'fs',
          apiName: 'write',
          operationId: 'op-nodes',
          executor: 'EXECUTOR_SERVER',
          args: Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i])),
        },
      },
    });
  const calls = {
    'a list of 1500 nulls': (c: HookClient) => c.dispatch(dispatchOf(1500)),
    'arguments of 600 members': (c: HookClient) => c.decideToolCall(decideOf(600)),
  };

  for (const [name, call] of Object.entries(calls)) {
    it(`refuses ${name} RESOURCE_EXHAUSTED (MESSAGE_TOO_COMPLEX) the same on every transport`, async () => {
      const answers = await answersOver(sidecar, call);
      expect(answers.grpc).toMatchObject({
        code: 'ResourceExhausted',
        reason: 'MESSAGE_TOO_COMPLEX',
      });
      expect(answers.grpc.message).toContain(`more than ${LIMIT} values`);
      for (const protocol of PROTOCOLS) expect(answers[protocol], protocol).toEqual(answers.grpc);
    });
  }

  it('takes requests under the bound on every transport', async () => {
    for (const protocol of PROTOCOLS) {
      const client = createClient(HookService, transportFor(protocol, sidecar));
      await expect(client.dispatch(dispatchOf(400)), protocol).resolves.toBeDefined();
      const decision = await client.decideToolCall(decideOf(200));
      expect(decision.decision?.outcome.case, protocol).toBe('allow');
    }
  });

  it('counts a typed message once over JSON as over binary, however many fields it has', async () => {
    // An attachment is one node; its JSON has three members.
    const withAttachments = (n: number) =>
      fromJson(DispatchRequestSchema, {
        event: {
          beforeStep: {
            operationId: 'op-nodes',
            userId: 'u',
            attachments: Array.from({ length: n }, (_, i) => ({
              type: 'ATTACHMENT_TYPE_IMAGE',
              fetchUrl: `https://example.com/${i}.png`,
              mimeType: 'image/png',
            })),
          },
        },
      });
    for (const protocol of PROTOCOLS) {
      const client = createClient(HookService, transportFor(protocol, sidecar));
      await expect(client.dispatch(withAttachments(990)), protocol).resolves.toBeDefined();
    }
    const answers = await answersOver(sidecar, (c) => c.dispatch(withAttachments(1010)));
    expect(answers.grpc.reason).toBe('MESSAGE_TOO_COMPLEX');
    for (const protocol of PROTOCOLS) expect(answers[protocol], protocol).toEqual(answers.grpc);
  });

  it('refuses a compressed message by what it decompresses to, on every HTTP framing', async () => {
    const http = sidecar.http as string;
    const binary = toBinary(DispatchRequestSchema, dispatchOf(5000));
    const json = new TextEncoder().encode(toJsonString(DispatchRequestSchema, dispatchOf(5000)));
    expect(gzipSync(binary).length).toBeLessThan(LIMIT);
    for (const [type, body] of [
      ['application/proto', binary],
      ['application/json', json],
    ] as const) {
      const answer = await post(http, DISPATCH_PATH, type, gzipSync(body), {
        'content-encoding': 'gzip',
      });
      expect(answer.status, type).toBe(429);
      const error = JSON.parse(answer.body.toString('utf8')) as { code: string; message: string };
      expect(error.code, type).toBe('resource_exhausted');
      expect(error.message, type).toContain('--max-message-nodes');
    }
    const web = await post(
      http,
      DISPATCH_PATH,
      'application/grpc-web+proto',
      envelope(gzipSync(binary), 1),
      { 'grpc-encoding': 'gzip' },
    );
    expect(grpcWebStatus(web)).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(decodeURIComponent(grpcWebField(web, 'grpc-message'))).toContain('--max-message-nodes');
  });

  it('counts JSON behind a byte order mark, which the UTF-8 decoder drops', async () => {
    const json = new TextEncoder().encode(toJsonString(DispatchRequestSchema, dispatchOf(1500)));
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json]);
    const answer = await post(sidecar.http as string, DISPATCH_PATH, 'application/json', body);
    expect(answer.status).toBe(429);
    expect(JSON.parse(answer.body.toString('utf8'))).toMatchObject({ code: 'resource_exhausted' });
    // Under the bound, the same request behind a BOM is taken, as before.
    const under = new TextEncoder().encode(toJsonString(DispatchRequestSchema, dispatchOf(400)));
    const taken = await post(
      sidecar.http as string,
      DISPATCH_PATH,
      'application/json',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), under]),
    );
    expect(taken.status).toBe(200);
  });

  it('ends a DispatchStream at its first event over the bound, after the acks before it', async () => {
    // Native gRPC only: the HTTP/1.1 listener serves no bidi stream (connect answers 505).
    const events = [streamEventOf('e-1', 10), streamEventOf('e-2', 1500), streamEventOf('e-3', 10)];
    const client = new grpc.Client(sidecar.grpc, grpc.credentials.createInsecure());
    try {
      const call = client.makeBidiStreamRequest(
        STREAM_PATH,
        (bytes: Buffer) => bytes,
        (bytes: Buffer) => fromBinary(DispatchStreamResponseSchema, bytes),
      );
      const acks: string[] = [];
      call.on('data', (ack: { eventId: string }) => acks.push(ack.eventId));
      const failed = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
      for (const event of events) call.write(Buffer.from(event));
      call.end();
      const err = await failed;
      expect(acks).toEqual(['e-1']);
      expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(errorInfoOf(err)?.reason).toBe('MESSAGE_TOO_COMPLEX');
    } finally {
      client.close();
    }
  });

  it('answers an envelope declared past --max-message-bytes from its header, holding none of its body', async () => {
    const [host, port] = (sidecar.http as string).split(':') as [string, string];
    const head = Buffer.alloc(5);
    head.writeUInt32BE(0xffff_ffff, 1);
    const req = httpRequest({
      host,
      port: Number(port),
      method: 'POST',
      path: DISPATCH_PATH,
      headers: { 'content-type': 'application/grpc-web+proto' },
    });
    try {
      // The body never ends: the answer must come without it.
      const answered = new Promise<IncomingMessage>((resolve, reject) => {
        req.on('response', resolve);
        req.on('error', reject);
      }).then(readResponse);
      req.write(head);
      req.write(Buffer.alloc(256 * 1024));
      const res = await answered;
      expect(res.status).toBe(200);
      expect(grpcWebStatus(res)).toBe(grpc.status.RESOURCE_EXHAUSTED);
    } finally {
      req.destroy();
    }
  });

  it('counts every refusal as a call answered RESOURCE_EXHAUSTED, over HTTP as over gRPC', async () => {
    const series = 'agenthooks_rpc_calls_total{method="Dispatch",code="RESOURCE_EXHAUSTED"}';
    const before = await metric(sidecar, series);
    for (const protocol of PROTOCOLS) {
      const client = createClient(HookService, transportFor(protocol, sidecar));
      await expect(client.dispatch(dispatchOf(1500)), protocol).rejects.toThrow(ConnectError);
    }
    expect((await metric(sidecar, series)) - before).toBe(PROTOCOLS.length);
  });

  it('logged none of the refusals as a failure of its own', () => {
    expect(sidecar.logs.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
  });
});
