/**
 * @module The gRPC listener's bounds on calls, from a raw HTTP/2 client: the
 * calls one connection may have open at once (advertised in the server's
 * SETTINGS, `--max-streams-per-connection`), and the time a unary call's
 * request message has to arrive (`--request-timeout`): a call that sends its
 * headers and part of its message is ended with DEADLINE_EXCEEDED,
 * `REQUEST_TIMEOUT`, instead of being held with its connection for good.
 */
import * as http2 from 'node:http2';
import { fromBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { metric } from '../support/observe.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** gRPC status DEADLINE_EXCEEDED. */
const DEADLINE_EXCEEDED = '4';

/** Checks a trailers-only answer: DEADLINE_EXCEEDED with ErrorInfo REQUEST_TIMEOUT (limit 1 s). */
function expectRequestTimeout(headers: http2.IncomingHttpHeaders): void {
  expect(headers['grpc-status']).toBe(DEADLINE_EXCEEDED);
  const bin = headers['grpc-status-details-bin'];
  expect(typeof bin).toBe('string');
  const status = fromBinary(StatusSchema, Buffer.from(bin as string, 'base64'));
  const info = status.details
    .map((d) => anyUnpack(d, ErrorInfoSchema))
    .find((i) => i !== undefined);
  expect(info).toMatchObject({ reason: 'REQUEST_TIMEOUT', metadata: { limit: '1' } });
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
    // A frame that declares 1,000 bytes, then 10 of them, and nothing more.
    const frame = Buffer.alloc(5 + 10);
    frame.writeUInt32BE(1_000, 1);
    const ended = await unfinishedCall(frame);
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
    const ended = await unfinishedCall(Buffer.alloc(5));
    expectRequestTimeout(ended.headers);
  });

  /** Starts a DecideToolCall, writes `bytes` and keeps its side open; resolves when the stream closed. */
  async function unfinishedCall(
    bytes: Buffer,
  ): Promise<{ headers: http2.IncomingHttpHeaders; rstCode: number | undefined }> {
    const session = http2.connect(`http://${sidecar.grpc}`);
    session.on('error', () => undefined);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/agenthooks.v1.HookService/DecideToolCall',
        'content-type': 'application/grpc',
        te: 'trailers',
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
      await new Promise<void>((resolve) => stream.on('close', () => resolve()));
      return { headers, rstCode: stream.rstCode };
    } finally {
      session.close();
    }
  }
});
