/**
 * @module The gRPC listener's bounds on calls, from a raw HTTP/2 client: the
 * calls one connection may have open at once (advertised in the server's
 * SETTINGS, `--max-streams-per-connection`), and the time a unary call's
 * request message has to arrive (`--request-timeout`): a call that sends its
 * headers and part of its message is ended with DEADLINE_EXCEEDED,
 * `REQUEST_TIMEOUT`, instead of being held with its connection for good;
 * with a token configured, a call without it is refused at its headers,
 * before any of its message is read.
 */
import * as http2 from 'node:http2';
import { fromBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { Code, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { Health, HealthCheckResponse_ServingStatus } from '../../gen/grpc/health/v1/health_pb.js';
import { metric } from '../support/observe.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** gRPC status DEADLINE_EXCEEDED. */
const DEADLINE_EXCEEDED = '4';

/** gRPC status RESOURCE_EXHAUSTED. */
const RESOURCE_EXHAUSTED = '8';

/** gRPC status UNAUTHENTICATED. */
const UNAUTHENTICATED = '16';

/** The ErrorInfo of a trailers-only answer's `grpc-status-details-bin`. */
function errorInfoOf(headers: http2.IncomingHttpHeaders) {
  const bin = headers['grpc-status-details-bin'];
  expect(typeof bin).toBe('string');
  const status = fromBinary(StatusSchema, Buffer.from(bin as string, 'base64'));
  return status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find((i) => i !== undefined);
}

/** Checks a trailers-only answer: DEADLINE_EXCEEDED with ErrorInfo REQUEST_TIMEOUT (limit 1 s). */
function expectRequestTimeout(headers: http2.IncomingHttpHeaders): void {
  expect(headers['grpc-status']).toBe(DEADLINE_EXCEEDED);
  expect(errorInfoOf(headers)).toMatchObject({
    reason: 'REQUEST_TIMEOUT',
    metadata: { limit: '1' },
  });
}

/** A frame that declares 1,000 bytes, then 10 of them: a message that never completes. */
function partialFrame(): Buffer {
  const frame = Buffer.alloc(5 + 10);
  frame.writeUInt32BE(1_000, 1);
  return frame;
}

/**
 * Starts a call of `method` on `address` with `metadata`, writes `bytes` and
 * keeps its side open; resolves when the stream closed.
 */
async function unfinishedCall(
  address: string,
  bytes: Buffer,
  metadata: http2.OutgoingHttpHeaders = {},
  method = 'DecideToolCall',
  service = 'agenthooks.v1.HookService',
  untilStatus = false,
): Promise<{ headers: http2.IncomingHttpHeaders; rstCode: number | undefined }> {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => undefined);
  try {
    const stream = session.request({
      ':method': 'POST',
      ':path': `/${service}/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...metadata,
    });
    stream.on('error', () => undefined);
    stream.write(bytes);
    let headers: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => {
      headers = { ...headers, ...h };
    });
    stream.on('trailers', (t) => {
      headers = { ...headers, ...t };
    });
    stream.resume();
    await new Promise<void>((resolve) => {
      stream.on('close', () => resolve());
      // A status is the answer, whether or not the server also ends the stream.
      if (untilStatus) {
        stream.on('trailers', () => resolve());
        stream.on('response', (h) => {
          if (h['grpc-status'] !== undefined) resolve();
        });
      }
    });
    return { headers, rstCode: stream.rstCode };
  } finally {
    session.close();
  }
}

describe('gRPC call limits', () => {
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    sidecar = await startSidecar({
      args: [
        '--max-streams-per-connection',
        '7',
        '--handshake-timeout',
        '1',
        '--request-timeout',
        '1',
      ],
    });
  }, 60_000);

  afterAll(async () => {
    await killSidecar(sidecar);
  });

  it('advertises --max-streams-per-connection as SETTINGS_MAX_CONCURRENT_STREAMS', async () => {
    const session = http2.connect(`http://${sidecar.grpc}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve) =>
        session.once('remoteSettings', resolve),
      );
      expect(settings.maxConcurrentStreams).toBe(7);
    } finally {
      session.close();
    }
  });

  it('ends a unary call whose request message never completes: DEADLINE_EXCEEDED, REQUEST_TIMEOUT, counted, stream reset', async () => {
    const series = 'agenthooks_rpc_calls_total{method="DecideToolCall",code="DEADLINE_EXCEEDED"}';
    const before = await metric(sidecar, series);
    const ended = await unfinishedCall(sidecar.grpc, partialFrame());
    expectRequestTimeout(ended.headers);
    // The client kept its side open: the server reset the stream (NO_ERROR) to free it.
    expect(ended.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect((await metric(sidecar, series)) - before).toBe(1);

    // A whole call is answered as before.
    const client = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    const listed = await client.listHooks({ operationId: 'op-after-timeout' });
    expect(listed.hooks).toEqual([]);
  });

  it('ends a unary call whose whole message came but whose client never half-closes', async () => {
    // grpc-js runs a unary method only at the client's half-close.
    const ended = await unfinishedCall(sidecar.grpc, Buffer.alloc(5));
    expectRequestTimeout(ended.headers);
  });
});

describe('gRPC calls without the token', () => {
  const token = 'gate-token-0123456789';
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    // A request timeout far beyond the test's: only the token check can end these calls in time.
    sidecar = await startSidecar({
      args: ['--request-timeout', '600', '--health-listen', '127.0.0.1:0'],
      env: { AGENTHOOKS_AUTH_TOKEN: token },
    });
  }, 60_000);

  afterAll(async () => {
    await killSidecar(sidecar);
  });

  it('refuses a unary call at its headers, before its message is complete: UNAUTHENTICATED, counted, stream reset', async () => {
    const series = 'agenthooks_rpc_calls_total{method="DecideToolCall",code="UNAUTHENTICATED"}';
    const before = await metric(sidecar, series);
    for (const metadata of [{}, { authorization: 'Bearer wrong-token' }]) {
      const ended = await unfinishedCall(sidecar.grpc, partialFrame(), metadata);
      expect(ended.headers['grpc-status']).toBe(UNAUTHENTICATED);
      expect(errorInfoOf(ended.headers)).toMatchObject({ reason: 'UNAUTHENTICATED' });
      expect(ended.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    }
    expect((await metric(sidecar, series)) - before).toBe(2);
  });

  it('refuses a stream the client writes when it starts, before its first message is complete', async () => {
    const ended = await unfinishedCall(sidecar.grpc, partialFrame(), {}, 'DispatchStream');
    expect(ended.headers['grpc-status']).toBe(UNAUTHENTICATED);
    expect(errorInfoOf(ended.headers)).toMatchObject({ reason: 'UNAUTHENTICATED' });
  });

  it('holds a health-only listener request to a few KiB: a larger one is refused at its frame header', async () => {
    // A frame that declares 1 MiB (a HealthCheckRequest is a service name), then 10 bytes of it.
    const frame = Buffer.alloc(5 + 10);
    frame.writeUInt32BE(1024 * 1024, 1);
    const ended = await unfinishedCall(
      sidecar.health as string,
      frame,
      {},
      'Check',
      'grpc.health.v1.Health',
      true,
    );
    expect(ended.headers['grpc-status']).toBe(RESOURCE_EXHAUSTED);
    // With the reason and bound every refusal of a large request carries, not grpc-js's bare status.
    expect(errorInfoOf(ended.headers)).toMatchObject({
      reason: 'MESSAGE_TOO_LARGE',
      metadata: { limit: '4096' },
    });
    expect(decodeURIComponent(String(ended.headers['grpc-message']))).toBe(
      "the request message is larger than the health listener's bound (4096 bytes)",
    );
    // A probe's own request is answered as before.
    const health = createClient(
      Health,
      createGrpcTransport({ baseUrl: `http://${sidecar.health as string}` }),
    );
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it('answers calls that carry the token, and health without one', async () => {
    const transport = createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` });
    const client = createClient(HookService, transport);
    const listed = await client.listHooks(
      { operationId: 'op-with-token' },
      { headers: { authorization: `Bearer ${token}` } },
    );
    expect(listed.hooks).toEqual([]);
    await expect(client.listHooks({ operationId: 'op-without' })).rejects.toMatchObject({
      code: Code.Unauthenticated,
    });
    const health = createClient(Health, transport);
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });
});
