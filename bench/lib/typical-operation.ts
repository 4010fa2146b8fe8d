/**
 * @module One typical operation, as a runtime drives it: register the five
 * hooks of {@link memoryHooks}, decide a few tool calls, complete. The store
 * size measurement (`bench/store-size.ts`) and the steady-load retention
 * test (`test/e2e/storage-growth.test.ts`) drive the very same calls, so the
 * bytes per operation the README quotes are those of the tested load.
 */
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { HookService, RegisterHooksRequestSchema } from '../../gen/agenthooks/v1/service_pb.js';
import { hookMethod } from './grpc-codec.js';
import { completeRequest, decideRequest, memoryHooks, withToolCallId } from './messages.js';

/** Tool calls decided per operation: a short run of a research agent. */
export const DECISIONS_PER_OPERATION = 3;
/** Controls among {@link memoryHooks} that every decision consults. */
const CONTROLS_PER_DECISION = 1;

/**
 * The calls of one operation, one method per phase, so that a caller can run
 * a phase for many operations before the next (a test that wants every
 * operation stored at once); each rejects on a failed or unexpected answer.
 */
export interface TypicalOperation {
  /** Registers the five hooks of {@link memoryHooks}. */
  register(operationId: string): Promise<void>;
  /**
   * Decides {@link DECISIONS_PER_OPERATION} tool calls, each allowed by the
   * one control; tool call ids are `n * DECISIONS_PER_OPERATION + i`, unique
   * when each operation has its own `n`.
   */
  decide(operationId: string, n: number): Promise<void>;
  /** Completes the operation (`reason: done`), which starts its retention. */
  complete(operationId: string): Promise<void>;
  /** All three phases of one operation, in order. */
  drive(operationId: string, n: number): Promise<void>;
}

/**
 * Returns the calls of typical operations on `client`, whose hooks point at
 * `receiverUrl` (a receiver that answers `{"decision":"allow"}`).
 *
 * @example
 * const operation = typicalOperation(client, receiver.url);
 * await operation.drive('op_1', 1);
 */
export function typicalOperation(client: grpc.Client, receiverUrl: string): TypicalOperation {
  const { registerHooks, decideToolCall, completeOperation } = HookService.method;
  const registerCall = hookMethod(client, registerHooks);
  const decideCall = hookMethod(client, decideToolCall);
  const completeCall = hookMethod(client, completeOperation);
  const hooks = memoryHooks(receiverUrl);
  const register = async (operationId: string): Promise<void> => {
    const { hookCount } = await registerCall(
      create(RegisterHooksRequestSchema, { operationId, hooks }),
    );
    if (hookCount !== hooks.length) {
      throw new Error(`${operationId} has ${hookCount} hooks, not ${hooks.length}`);
    }
  };
  const decide = async (operationId: string, n: number): Promise<void> => {
    for (let i = 0; i < DECISIONS_PER_OPERATION; i += 1) {
      const request = withToolCallId(decideRequest(operationId), n * DECISIONS_PER_OPERATION + i);
      const outcome = (await decideCall(request)).decision?.outcome;
      if (outcome?.case !== 'allow' || outcome.value.controlsConsulted !== CONTROLS_PER_DECISION) {
        throw new Error(`${operationId}: decision ${outcome?.case ?? 'missing'}, expected allow`);
      }
    }
  };
  const complete = async (operationId: string): Promise<void> => {
    await completeCall(completeRequest(operationId));
  };
  return {
    register,
    decide,
    complete,
    async drive(operationId, n) {
      await register(operationId);
      await decide(operationId, n);
      await complete(operationId);
    },
  };
}
