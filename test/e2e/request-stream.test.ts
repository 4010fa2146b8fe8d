/**
 * The gRPC edge of a bidi stream, as a client sees it: a request the sidecar
 * cannot decode fails the stream with INVALID_ARGUMENT after the acks of the
 * requests before it, and a client that cancels mid-stream leaves a healthy
 * sidecar that logs no failure of its own.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DispatchStreamRequestSchema,
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { badRequestOf, errorInfoOf, hookClient, unary } from '../support/grpc-client.js';
import { startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const STREAM_PATH = '/agenthooks.v1.HookService/DispatchStream';

/** An afterStep event of `operationId`, encoded. */
function afterStepBytes(eventId: string, operationId: string): Buffer {
  return Buffer.from(
    toBinary(
      DispatchStreamRequestSchema,
      create(DispatchStreamRequestSchema, {
        eventId,
        event: { event: { case: 'afterStep', value: { operationId, userId: 'u', stepIndex: 1 } } },
      }),
    ),
  );
}

/** A field 1 (eventId) declared as 100 bytes long, with 3 present: not a message. */
const TRUNCATED = Buffer.from([0x0a, 0x64, 0x61, 0x62, 0x63]);

/** A raw bidi call: the client writes bytes and reads decoded acks. */
function rawStream(address: string) {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    STREAM_PATH,
    (bytes: Buffer) => bytes,
    (bytes: Buffer) => fromBinary(DispatchStreamResponseSchema, bytes),
  );
  const acks: DispatchStreamResponse[] = [];
  call.on('data', (ack: DispatchStreamResponse) => acks.push(ack));
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  const failed = new Promise<grpc.ServiceError | undefined>((resolve) => {
    call.on('error', resolve);
    call.on('end', () => resolve(undefined));
  });
  return { client, call, acks, status, failed };
}

describe('DispatchStream requests over gRPC', () => {
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    sidecar = await startSidecar();
  });
  afterAll(async () => {
    await killSidecar(sidecar);
  });

  it('acks the requests before one it cannot decode, then fails INVALID_ARGUMENT', async () => {
    // The operation has a webhook that answers late: its events are still in
    // flight when the undecodable request arrives, and are acked first anyway.
    const receiver = await startReceiver({ answer: { status: 204, delayMs: 200 } });
    const registrar = hookClient(sidecar.grpc);
    await unary(registrar, 'RegisterHooks', {
      operationId: 'op-raw',
      hooks: [
        { id: 'slow', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: `${receiver.url}/slow` } },
      ],
    });
    registrar.close();
    const { client, call, acks, failed } = rawStream(sidecar.grpc);
    try {
      call.write(afterStepBytes('e-1', 'op-raw'));
      call.write(afterStepBytes('e-2', 'op-raw'));
      call.write(TRUNCATED);
      call.write(afterStepBytes('e-3', 'op-raw'));
      call.end();
      const err = await failed;
      expect(acks.map((a) => a.eventId)).toEqual(['e-1', 'e-2']);
      expect(acks.every((a) => a.error === undefined)).toBe(true);
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err?.details).toContain(
        'the request is not a valid agenthooks.v1.DispatchStreamRequest message',
      );
      expect(errorInfoOf(err as grpc.ServiceError)?.reason).toBe('MALFORMED_REQUEST');
      expect(receiver.requests).toHaveLength(2);
    } finally {
      client.close();
      await receiver.close();
    }
  });

  it('ends the stream INVALID_ARGUMENT (EVENT_ID_TOO_LONG) at an event id over 256 bytes, after the acks before it', async () => {
    const { client, call, acks, failed } = rawStream(sidecar.grpc);
    try {
      call.write(afterStepBytes('i-1', 'op-long-id'));
      // 256 bytes is the limit: 128 two-byte characters pass, one more does not.
      call.write(afterStepBytes('é'.repeat(128), 'op-long-id'));
      call.write(afterStepBytes(`${'é'.repeat(128)}x`, 'op-long-id'));
      call.write(afterStepBytes('i-4', 'op-long-id'));
      call.end();
      const err = (await failed) as grpc.ServiceError;
      expect(acks.map((a) => a.eventId)).toEqual(['i-1', 'é'.repeat(128)]);
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe('eventId: An event id can be at most 256 bytes (UTF-8)');
      expect(errorInfoOf(err)?.reason).toBe('EVENT_ID_TOO_LONG');
      expect(badRequestOf(err)?.fieldViolations.map((v) => v.field)).toEqual(['eventId']);
    } finally {
      client.close();
    }
  });

  it('stays serving and logs no failure of its own when a client cancels mid-stream', async () => {
    const { client, call, acks, status } = rawStream(sidecar.grpc);
    const logsBefore = sidecar.logs.length;
    try {
      call.write(afterStepBytes('c-1', 'op-cancel'));
      await new Promise<void>((resolve) => {
        const poll = () => (acks.length > 0 ? resolve() : call.once('data', poll));
        poll();
      });
      call.cancel();
      expect((await status).code).toBe(grpc.status.CANCELLED);
    } finally {
      client.close();
    }
    // A call after the cancelled one answers, so the stream's end was handled.
    const probe = hookClient(sidecar.grpc);
    try {
      const listed = await unary<{ handlerAttached?: boolean }>(probe, 'ListHooks', {
        operationId: 'op-cancel',
      });
      expect(listed.handlerAttached ?? false).toBe(false);
    } finally {
      probe.close();
    }
    const errors = sidecar.logs.slice(logsBefore).filter((l) => l.level === 'error');
    expect(errors).toEqual([]);
  });
});
