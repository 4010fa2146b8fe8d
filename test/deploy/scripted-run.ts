/**
 * @module A scripted run against a real sidecar that makes every metric of
 * the dashboard and the alert rules, and every console view, have data:
 * registrations, allowed, denied and mocked-free decisions, a control
 * webhook that fails under `onError: continue` (fail open), observer
 * webhooks dropped by `--max-detached-deliveries 1`, a notification, a
 * refused request and a parked call with a published result.
 */
import { createClient, type Transport } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { OnError, ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService, ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import type { Receiver } from '../support/receiver.js';

/** Arguments a sidecar of the scripted run is started with. */
export const SCRIPTED_RUN_ARGS: readonly string[] = ['--max-detached-deliveries', '1'];

/** Operations of the scripted run. */
export const OPS = {
  allowed: 'ops-allowed',
  denied: 'ops-denied',
  failOpen: 'ops-fail-open',
} as const;

/** What the scripted run answered, for tests to compare the console with. */
export interface ScriptedRun {
  readonly allowedCalls: number;
  readonly deniedReason: string;
  /** The decision id each decision RPC answered, by tool call id. */
  readonly decisionIds: Readonly<Record<string, string>>;
}

/**
 * Answers the receiver's paths: `/deny` denies, `/fail` answers 500, and
 * `/observe` never answers (so detached deliveries stay in flight).
 */
export function scriptReceiver(receiver: Receiver, denyReason: string): void {
  receiver.respond((req, res) => {
    if (req.path.startsWith('/deny')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ decision: 'deny', reason: denyReason }));
    } else if (req.path.startsWith('/fail')) {
      res.writeHead(500);
      res.end();
    } else if (!req.path.startsWith('/observe')) {
      res.writeHead(204);
      res.end();
    }
  });
}

function context(operationId: string, toolCallId: string) {
  return {
    operationId,
    toolCallId,
    identifier: 'search',
    apiName: 'query',
    executor: Executor.SERVER,
  };
}

/** A gRPC transport to `grpc`, sending the bearer token when one is given. */
export function transportOf(grpc: string, token?: string): Transport {
  return createGrpcTransport({
    baseUrl: `http://${grpc}`,
    interceptors:
      token === undefined
        ? []
        : [
            (next) => (req) => {
              req.header.set('authorization', `Bearer ${token}`);
              return next(req);
            },
          ],
  });
}

/** Runs the script against the sidecar's gRPC address. */
export async function runScript(
  grpc: string,
  receiver: Receiver,
  options: { denyHookId?: string; denyReason: string; token?: string },
): Promise<ScriptedRun> {
  const client = createClient(HookService, transportOf(grpc, options.token));
  await client.registerHooks({
    operationId: OPS.allowed,
    hooks: [
      {
        id: 'allow-control',
        type: HookType.BEFORE_TOOL_CALL,
        webhook: { url: `${receiver.url}/allow`, responseHandling: ResponseHandling.TOOL_CALL },
      },
      {
        id: 'observer',
        type: HookType.BEFORE_TOOL_CALL,
        webhook: { url: `${receiver.url}/observe`, timeout: 120 },
      },
      { id: 'notify-step', type: HookType.AFTER_STEP, webhook: { url: `${receiver.url}/step` } },
    ],
  });
  await client.registerHooks({
    operationId: OPS.denied,
    hooks: [
      {
        id: options.denyHookId ?? 'deny-control',
        type: HookType.BEFORE_TOOL_CALL,
        webhook: { url: `${receiver.url}/deny`, responseHandling: ResponseHandling.TOOL_CALL },
      },
    ],
  });
  await client.registerHooks({
    operationId: OPS.failOpen,
    hooks: [
      {
        id: 'failing-control',
        type: HookType.BEFORE_TOOL_CALL,
        webhook: {
          url: `${receiver.url}/fail`,
          responseHandling: ResponseHandling.TOOL_CALL,
          onError: OnError.CONTINUE,
        },
      },
    ],
  });
  const decisionIds: Record<string, string> = {};
  const decide = async (operationId: string, toolCallId: string) => {
    const answer = await client.decideToolCall({
      event: { context: context(operationId, toolCallId) },
    });
    decisionIds[toolCallId] = answer.decisionId;
  };
  // Three allowed calls: the first observer stays in flight, the next two are dropped.
  const allowedCalls = 3;
  for (let i = 0; i < allowedCalls; i++) await decide(OPS.allowed, `allowed-${i}`);
  await decide(OPS.denied, 'denied-0');
  await decide(OPS.failOpen, 'fail-open-0');
  await client.dispatch({
    event: { event: { case: 'afterStep', value: { operationId: OPS.allowed, userId: 'u' } } },
  });
  // A refused request: an RPC answered with a code other than OK.
  await client.decideToolCall({ event: {} }).catch(() => undefined);
  // A parked call, then its result, published once.
  await client.parkToolCall({ context: context(OPS.allowed, 'parked-0'), kind: ParkKind.DEFERRED });
  await client.parkToolCall({
    context: context(OPS.allowed, 'parked-waiting'),
    kind: ParkKind.HUMAN_APPROVAL,
  });
  const published = await client.publishDeferredResult({
    toolCallId: 'parked-0',
    result: { content: 'done', success: true },
  });
  decisionIds['parked-0'] = published.decisionId;
  return { allowedCalls, deniedReason: options.denyReason, decisionIds };
}
