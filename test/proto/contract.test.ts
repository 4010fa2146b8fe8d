import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { DecideToolResultRequestSchema } from '../../gen/agenthooks/v1/service_pb.js';

const PROTO_ROOT = join(import.meta.dirname, '..', '..', 'proto');

const RPCS = [
  'RegisterHooks',
  'UnregisterHooks',
  'ListHooks',
  'Dispatch',
  'DispatchStream',
  'DecideToolCall',
  'DecideToolResult',
  'ParkToolCall',
  'PublishDeferredResult',
  'CompleteOperation',
  'Handle',
  'Modify',
  'ListDecisions',
];

const EVENT_MESSAGES = [
  'BeforeStepEvent',
  'AfterStepEvent',
  'OnCompleteEvent',
  'OnErrorEvent',
  'BeforeToolCallEvent',
  'AfterToolCallEvent',
  'OnToolCallErrorEvent',
  'BeforeHumanInterventionEvent',
  'AfterHumanInterventionEvent',
  'OnStopByHumanInterventionEvent',
  'BeforeCompactEvent',
  'AfterCompactEvent',
  'OnCompactErrorEvent',
  'BeforeCallAgentEvent',
  'AfterCallAgentEvent',
  'OnCallAgentErrorEvent',
];

/** Name of a message type in proto-loader's descriptor, such as `DispatchRequest`. */
function typeName(def: protoLoader.MessageTypeDefinition<object, object> | undefined): unknown {
  return (def?.type as { name?: string } | undefined)?.name;
}

function load(): protoLoader.PackageDefinition {
  const files = readdirSync(join(PROTO_ROOT, 'agenthooks', 'v1')).map((f) =>
    join('agenthooks', 'v1', f),
  );
  return protoLoader.loadSync(files, { includeDirs: [PROTO_ROOT] });
}

describe('the .proto contract, read by @grpc/proto-loader', () => {
  it('defines HookService with every RPC of the public API and its streaming shape', () => {
    const def = load();
    const service = def['agenthooks.v1.HookService'] as protoLoader.ServiceDefinition;
    expect(service).toBeDefined();
    expect(Object.keys(service).sort()).toEqual([...RPCS].sort());
    for (const rpc of RPCS) {
      const method = service[rpc];
      expect(method?.path).toBe(`/agenthooks.v1.HookService/${rpc}`);
      const bidi = rpc === 'DispatchStream' || rpc === 'Handle';
      expect([rpc, method?.requestStream, method?.responseStream]).toEqual([rpc, bidi, bidi]);
      expect(typeName(method?.requestType)).toBe(`${rpc}Request`);
      expect(typeName(method?.responseType)).toBe(`${rpc}Response`);
    }
  });

  it('defines one message per hook event and a HookEvent oneof holding all 16', () => {
    const def = load();
    for (const name of EVENT_MESSAGES) {
      expect(def[`agenthooks.v1.${name}`], name).toBeDefined();
    }
    const hookEvent = def['agenthooks.v1.HookEvent'] as protoLoader.MessageTypeDefinition<
      object,
      object
    >;
    const type = hookEvent.type as { field: { typeName: string; number: number }[] };
    expect(type.field.map((f) => f.typeName)).toEqual(EVENT_MESSAGES);
    expect(type.field.map((f) => f.number)).toEqual(EVENT_MESSAGES.map((_, i) => i + 1));
  });

  it('numbers the HookType enum in the upstream order with an unspecified zero', () => {
    const def = load();
    const hookType = def['agenthooks.v1.HookType'] as protoLoader.EnumTypeDefinition;
    const values = (hookType.type as { value: { name: string; number: number }[] }).value;
    expect(values[0]).toMatchObject({ name: 'HOOK_TYPE_UNSPECIFIED', number: 0 });
    expect(values.slice(1).map((v) => v.number)).toEqual(EVENT_MESSAGES.map((_, i) => i + 1));
    expect(values.slice(1).map((v) => v.name)).toEqual(
      EVENT_MESSAGES.map(
        (m) =>
          `HOOK_TYPE_${m
            .replace(/Event$/, '')
            .replace(/([a-z])([A-Z])/g, '$1_$2')
            .toUpperCase()}`,
      ),
    );
  });

  it('encodes a request that protobuf-es decodes field for field (wire compatibility)', () => {
    const def = load();
    const service = def['agenthooks.v1.HookService'] as protoLoader.ServiceDefinition;
    const bytes = service.DecideToolResult?.requestSerialize({
      event: {
        context: {
          toolCallId: 'call_1',
          identifier: 'fs',
          apiName: 'readFile',
          args: { fields: { path: { stringValue: '/tmp/a' } } },
          callIndex: 2,
          executor: 'EXECUTOR_CLIENT',
          userId: 'u1',
        },
        mocked: true,
        result: { content: 'ok', success: true, executionTime: 1.5 },
      },
      operationChain: ['op_a', 'op_b'],
    });
    const decoded = fromBinary(DecideToolResultRequestSchema, bytes as Uint8Array);
    expect(decoded.operationChain).toEqual(['op_a', 'op_b']);
    expect(decoded.event?.mocked).toBe(true);
    expect(decoded.event?.context).toMatchObject({
      toolCallId: 'call_1',
      identifier: 'fs',
      apiName: 'readFile',
      args: { path: '/tmp/a' },
      callIndex: 2,
      executor: Executor.CLIENT,
      userId: 'u1',
    });
    expect(decoded.event?.result).toMatchObject({
      content: 'ok',
      success: true,
      executionTime: 1.5,
    });
  });
});
