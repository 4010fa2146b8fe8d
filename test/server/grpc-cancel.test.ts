/**
 * How the grpc-js adapter (`src/server/grpc.ts`) tells a handler why its
 * call ended: a real grpc-js server and client on 127.0.0.1, a handler that
 * waits for its signal and keeps the reason.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
} from '../../gen/grpc/health/v1/health_pb.js';
import { createLogger } from '../../src/log.js';
import { type AnyServiceImpl, addService } from '../../src/server/grpc.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A server whose `Check` waits for its signal and hands the abort reason to `reasons`. */
async function waitingServer(): Promise<{ port: number; reasons: Promise<unknown>[] }> {
  const reasons: Promise<unknown>[] = [];
  const server = new grpc.Server();
  const impl: AnyServiceImpl = {
    check: (_request: unknown, ctx: HandlerContext) => {
      const reason = new Promise<unknown>((resolve) => {
        ctx.signal.addEventListener('abort', () => resolve(ctx.signal.reason), { once: true });
      });
      reasons.push(reason);
      return reason.then(() => ({}));
    },
    list: () => ({}),
    watch: async function* () {},
  };
  addService(server, Health, impl, { logger: createLogger({ write: () => undefined }) });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err === null ? resolve(bound) : reject(err),
    );
  });
  cleanups.push(() => server.forceShutdown());
  return { port, reasons };
}

/** Calls `Check` on `port`; resolves with the status code the client got. */
function check(
  port: number,
  options: grpc.CallOptions,
  started?: (call: grpc.ClientUnaryCall) => void,
): Promise<number> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  cleanups.push(() => client.close());
  return new Promise((resolve) => {
    const call = client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      (value: object) =>
        Buffer.from(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, value))),
      (bytes: Buffer) => fromBinary(HealthCheckResponseSchema, bytes),
      {},
      new grpc.Metadata(),
      options,
      (err) => resolve(err?.code ?? grpc.status.OK),
    );
    started?.(call);
  });
}

/** Resolves once the server has started its first `Check`. */
async function handlerStarted(reasons: readonly Promise<unknown>[]): Promise<void> {
  while (reasons.length === 0) await new Promise(setImmediate);
}

describe('the grpc-js adapter’s abort reasons', () => {
  it('aborts a handler whose deadline passed with DEADLINE_EXCEEDED, as Connect does', async () => {
    const { port, reasons } = await waitingServer();
    const code = check(port, { deadline: Date.now() + 200 });

    await handlerStarted(reasons);
    const reason = await reasons[0];

    expect(await code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(reason).toBeInstanceOf(ConnectError);
    expect((reason as ConnectError).code).toBe(Code.DeadlineExceeded);
  });

  it('aborts a handler whose client cancelled, long before its deadline, with CANCELLED', async () => {
    const { port, reasons } = await waitingServer();
    let call: grpc.ClientUnaryCall | undefined;
    const code = check(port, { deadline: Date.now() + 60_000 }, (c) => {
      call = c;
    });
    await handlerStarted(reasons);
    call?.cancel();

    const reason = await reasons[0];

    expect(await code).toBe(grpc.status.CANCELLED);
    expect(reason).toBeInstanceOf(ConnectError);
    expect((reason as ConnectError).code).toBe(Code.Canceled);
  });
});
