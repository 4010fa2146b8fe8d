/**
 * The Value check of binary requests: a `google.protobuf.Value` without a
 * kind, or with a NaN or infinite number, is found wherever it is, and named
 * by its JSON path; a request without one passes.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import type * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import {
  DecideToolCallRequestSchema,
  DecideToolResultRequestSchema,
  DispatchRequestSchema,
  ModifyRequestSchema,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  holdsValues,
  VALUE_NOT_FINITE,
  VALUE_WITHOUT_KIND,
  valueProblem,
} from '../../src/server/value-kinds.js';
import { type LoaderObject, packageDefinition } from '../support/grpc-client.js';

/** A request of `method` encoded by protobufjs (proto-loader), which writes any Value it is given. */
function encode(method: string, request: LoaderObject): Uint8Array {
  const service = packageDefinition['agenthooks.v1.HookService'] as protoLoader.ServiceDefinition;
  return (service[method] as protoLoader.MethodDefinition<object, object>).requestSerialize(
    request,
  );
}

const CONTEXT = { toolCallId: 'c1', identifier: 'fs', apiName: 'write', operationId: 'op' };

function result(request: LoaderObject): Uint8Array {
  return encode('DecideToolResult', {
    event: { context: CONTEXT, result: { content: 'x', success: false, ...request } },
  });
}

describe('valueProblem', () => {
  it('finds a Value with no kind in a result error', () => {
    expect(valueProblem(DecideToolResultRequestSchema, result({ error: {} }))).toEqual({
      field: 'event.result.error',
      problem: VALUE_WITHOUT_KIND,
    });
  });

  it('finds NaN and infinite numbers', () => {
    for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(
        valueProblem(DecideToolResultRequestSchema, result({ error: { numberValue: n } })),
      ).toEqual({ field: 'event.result.error', problem: VALUE_NOT_FINITE });
    }
  });

  it('names a kindless item of a list and a kindless entry of a struct by their path', () => {
    const bytes = result({
      error: {
        listValue: { values: [{ stringValue: 'a' }, { structValue: { fields: { code: {} } } }] },
      },
    });
    expect(valueProblem(DecideToolResultRequestSchema, bytes)).toEqual({
      field: 'event.result.error[1].code',
      problem: VALUE_WITHOUT_KIND,
    });
    const state = result({
      state: { fields: { ok: { boolValue: true }, n: { numberValue: NaN } } },
    });
    expect(valueProblem(DecideToolResultRequestSchema, state)?.field).toBe('event.result.state.n');
  });

  it('finds a kindless Value inside arguments, which protobuf-es would read as null', () => {
    const bytes = encode('DecideToolCall', {
      event: {
        context: { ...CONTEXT, args: { fields: { path: { stringValue: '/tmp' }, mode: {} } } },
      },
    });
    expect(valueProblem(DecideToolCallRequestSchema, bytes)).toEqual({
      field: 'event.context.args.mode',
      problem: VALUE_WITHOUT_KIND,
    });
  });

  it('names the event case and the list index on the way to a Value', () => {
    const dispatch = encode('Dispatch', {
      event: { afterStep: { operationId: 'op', userId: 'u', toolsResult: {} } },
    });
    expect(valueProblem(DispatchRequestSchema, dispatch)?.field).toBe(
      'event.afterStep.toolsResult',
    );
    const hook = (id: string, body: LoaderObject) => ({
      id,
      type: 'HOOK_TYPE_AFTER_STEP',
      webhook: { url: 'http://127.0.0.1:9/x', body },
    });
    const register = encode('RegisterHooks', {
      operationId: 'op',
      hooks: [hook('a', { fields: { k: { stringValue: 'v' } } }), hook('b', { fields: { k: {} } })],
    });
    expect(valueProblem(RegisterHooksRequestSchema, register)?.field).toBe(
      'hooks[1].webhook.body.k',
    );
  });

  it('passes every Value with a kind, and requests of types that hold none', () => {
    const message = create(DecideToolResultRequestSchema, {
      event: {
        context: { toolCallId: 'c1', args: { a: [1, 'b', null, { c: true }], d: {} } },
        result: { error: { kind: { case: 'stringValue', value: 'boom' } }, state: { s: 1.5 } },
      },
    });
    expect(
      valueProblem(DecideToolResultRequestSchema, toBinary(DecideToolResultRequestSchema, message)),
    ).toBeUndefined();
    expect(holdsValues(ModifyRequestSchema)).toBe(false);
    expect(holdsValues(DecideToolCallRequestSchema)).toBe(true);
  });

  it('leaves bytes that do not decode to the decoder', () => {
    expect(valueProblem(DecideToolResultRequestSchema, Uint8Array.of(0x0a, 0x05, 0x0a))).toBe(
      undefined,
    );
  });
});
