/**
 * `Dispatch` and `DispatchStream` check the fields each event kind requires
 * (upstream contract §1; the lists are on the event messages in
 * events.proto) before anything is delivered. Against the real sidecar
 * process and a real receiver on 127.0.0.1: for every dispatchable event
 * kind, an event without a required field is refused over gRPC and over
 * Connect JSON (where the field is really absent from the body) with the
 * same INVALID_ARGUMENT, message `<field path>: <message>`, `ErrorInfo.reason`
 * and `BadRequest` field, and the receiver gets nothing; on a stream the
 * event's ack carries that error and the stream goes on. Strings the contract
 * lets be empty (`agentId` of a step event, error texts, a summary) are
 * accepted and delivered with the empty string in the payload.
 */
import { create, fromJson, type JsonObject } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { Code, createClient } from '@connectrpc/connect';
import { createWritableIterable } from '@connectrpc/connect/protocol';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolResultRequestSchema,
  type DispatchStreamRequest,
  DispatchStreamRequestSchema,
  type DispatchStreamResponse,
  HookService,
  RegisterHooksRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { BadRequestSchema } from '../../gen/google/rpc/error_details_pb.js';
import { connectErrorDetails, readConnectError } from '../support/connect-errors.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const OP = 'op-dispatch-validation';

/** A tool-call context with every field the tool events require, as Connect JSON. */
const CONTEXT: JsonObject = {
  toolCallId: 'call_1',
  assistantMessageId: 'msg_1',
  identifier: 'search',
  apiName: 'query',
  args: { q: 'x' },
  callIndex: 0,
  stepIndex: 1,
  operationId: OP,
  executor: 'EXECUTOR_SERVER',
};

/** One valid event of each kind `Dispatch` takes (all but `beforeToolCall`), as Connect JSON. */
const VALID: Readonly<Record<string, JsonObject>> = {
  beforeStep: { agentId: 'agt_1', operationId: OP, userId: 'user_1', stepIndex: 0 },
  afterStep: { agentId: 'agt_1', operationId: OP, userId: 'user_1', stepIndex: 0 },
  onComplete: {
    agentId: 'agt_1',
    operationId: OP,
    userId: 'user_1',
    reason: 'done',
    attachments: [{ type: 'ATTACHMENT_TYPE_IMAGE', fetchUrl: 'https://files.example/1.png' }],
  },
  onError: { agentId: 'agt_1', operationId: OP, userId: 'user_1', reason: 'error' },
  afterToolCall: { context: CONTEXT, mocked: false, result: { content: 'ok', success: true } },
  onToolCallError: { context: CONTEXT, error: 'boom' },
  beforeHumanIntervention: {
    operationId: OP,
    pendingTools: [{ apiName: 'query', identifier: 'search' }],
    stepIndex: 2,
  },
  afterHumanIntervention: { action: 'HUMAN_ACTION_APPROVE', operationId: OP },
  onStopByHumanIntervention: { operationId: OP, rejectionReason: 'no' },
  beforeCompact: { messageCount: 3, operationId: OP, stepIndex: 1, tokenCount: 900 },
  afterCompact: {
    groupId: 'grp_1',
    messagesAfter: 1,
    messagesBefore: 3,
    operationId: OP,
    stepIndex: 1,
    summary: 'short',
  },
  onCompactError: { error: 'too long', operationId: OP, stepIndex: 1, tokenCount: 900 },
  beforeCallAgent: { agentId: 'agt_child', instruction: 'go', operationId: OP },
  afterCallAgent: {
    agentId: 'agt_child',
    operationId: OP,
    subOperationId: 'op_child',
    success: true,
  },
  onCallAgentError: { agentId: 'agt_child', error: 'failed', operationId: OP },
};

/** A fresh copy of the valid event of `kind`. */
function validOf(kind: string): JsonObject {
  const value = VALID[kind];
  if (value === undefined) throw new Error(`no valid ${kind} event`);
  return structuredClone(value);
}

/** A refused case: the kind, the JSON path (under the event message) removed, and the answer. */
interface MissingCase {
  readonly kind: string;
  /** Path of the removed field inside the event message, such as `context.executor`. */
  readonly remove: string;
  readonly reason: string;
  readonly message: string;
}

const MISSING: readonly MissingCase[] = [
  ...['beforeStep', 'afterStep', 'onComplete', 'onError'].map((kind) => ({
    kind,
    remove: 'userId',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'userId is required',
  })),
  {
    kind: 'afterStep',
    remove: 'operationId',
    reason: 'OPERATION_ID_REQUIRED',
    message: 'operationId is required',
  },
  {
    kind: 'onComplete',
    remove: 'attachments[0].type',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'type is required',
  },
  {
    kind: 'afterToolCall',
    remove: 'context.executor',
    reason: 'TOOL_CALL_CONTEXT_INVALID',
    message: 'executor must be EXECUTOR_SERVER or EXECUTOR_CLIENT',
  },
  {
    kind: 'afterToolCall',
    remove: 'context.identifier',
    reason: 'TOOL_CALL_CONTEXT_INVALID',
    message: 'identifier is required',
  },
  {
    kind: 'afterToolCall',
    remove: 'result',
    reason: 'TOOL_RESULT_REQUIRED',
    message: 'the tool result is required',
  },
  {
    kind: 'onToolCallError',
    remove: 'context',
    reason: 'TOOL_CALL_CONTEXT_INVALID',
    message: 'a tool-call context is required',
  },
  {
    kind: 'onToolCallError',
    remove: 'context.toolCallId',
    reason: 'TOOL_CALL_CONTEXT_INVALID',
    message: 'toolCallId is required',
  },
  {
    kind: 'beforeHumanIntervention',
    remove: 'pendingTools[0].identifier',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'identifier is required',
  },
  {
    kind: 'afterHumanIntervention',
    remove: 'action',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'action is required',
  },
  ...['onStopByHumanIntervention', 'beforeCompact', 'onCompactError'].map((kind) => ({
    kind,
    remove: 'operationId',
    reason: 'OPERATION_ID_REQUIRED',
    message: 'operationId is required',
  })),
  {
    kind: 'afterCompact',
    remove: 'groupId',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'groupId is required',
  },
  ...['beforeCallAgent', 'afterCallAgent', 'onCallAgentError'].map((kind) => ({
    kind,
    remove: 'agentId',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'agentId is required',
  })),
  {
    kind: 'afterCallAgent',
    remove: 'subOperationId',
    reason: 'EVENT_FIELD_REQUIRED',
    message: 'subOperationId is required',
  },
];

/**
 * Required strings that may be empty: the kind and the path of the field in
 * the event message. The payload has the field (its last part) at top level.
 */
const ALLOWED_EMPTY: readonly { kind: string; path: string }[] = [
  ...['beforeStep', 'afterStep', 'onComplete', 'onError'].map((kind) => ({
    kind,
    path: 'agentId',
  })),
  { kind: 'afterToolCall', path: 'context.assistantMessageId' },
  { kind: 'onToolCallError', path: 'error' },
  { kind: 'afterCompact', path: 'summary' },
  { kind: 'onCompactError', path: 'error' },
  { kind: 'beforeCallAgent', path: 'instruction' },
  { kind: 'onCallAgentError', path: 'error' },
];

/** The `HookType` enum name of an event kind, such as `HOOK_TYPE_AFTER_STEP`. */
function hookTypeName(kind: string): string {
  return `HOOK_TYPE_${kind.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** Splits `a.b[0].c` into `['a', 'b', 0, 'c']`. */
function pathParts(path: string): (string | number)[] {
  return path.split('.').flatMap((part) => {
    const m = /^(\w+)\[(\d+)\]$/.exec(part);
    return m ? [m[1] as string, Number(m[2])] : [part];
  });
}

/** The valid event of `kind` as Connect JSON, with the field at `remove` deleted. */
function eventWithout(kind: string, remove: string): JsonObject {
  const value = validOf(kind);
  const parts = pathParts(remove);
  let at: Record<string | number, unknown> = value;
  for (const part of parts.slice(0, -1)) at = at[part] as Record<string | number, unknown>;
  const last = parts[parts.length - 1] as string;
  expect(at, `${kind}.${remove}`).toHaveProperty(last);
  delete at[last];
  return { [kind]: value };
}

/** The JSON path of the removed field in a `DispatchRequest`. */
function fieldPath(c: MissingCase): string {
  return `event.${c.kind}.${c.remove}`;
}

/** An error answer, reduced to what both protocols must agree on. */
interface Answer {
  readonly code: Code;
  readonly message: string;
  readonly reason: string | undefined;
  readonly fields: string[];
}

const CONNECT_CODES: Readonly<Record<string, Code>> = { invalid_argument: Code.InvalidArgument };

describe('Dispatch validates the fields each event kind requires', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: ReturnType<typeof createClient<typeof HookService>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    sidecar = await startSidecar();
    client = createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
    await client.registerHooks(
      fromJson(RegisterHooksRequestSchema, {
        operationId: OP,
        hooks: Object.keys(VALID).map((kind) => ({
          id: `hook-${kind}`,
          type: hookTypeName(kind),
          webhook: { url: `${receiver.url}/${kind}` },
        })),
      }),
    );
  });
  afterAll(async () => {
    await killSidecar(sidecar);
    await receiver.close();
  });

  /** Dispatches over gRPC; resolves with the error answer, or throws when the call succeeded. */
  async function grpcRefusal(eventJson: JsonObject): Promise<Answer> {
    try {
      await client.dispatch({ event: fromJson(HookEventSchema, eventJson) });
    } catch (e: unknown) {
      return readConnectError(e);
    }
    throw new Error('the gRPC call succeeded');
  }

  /** POSTs a Dispatch request as Connect JSON; answers the HTTP status and the parsed body. */
  async function postConnectJson(
    eventJson: JsonObject,
  ): Promise<{ status: number; body: JsonObject }> {
    const res = await fetch(`http://${sidecar.http}/agenthooks.v1.HookService/Dispatch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ event: eventJson }),
    });
    return { status: res.status, body: (await res.json()) as JsonObject };
  }

  async function connectRefusal(eventJson: JsonObject): Promise<Answer> {
    const { status, body } = await postConnectJson(eventJson);
    expect(status).toBe(400);
    const details = (body.details ?? []) as { type: string; value: string }[];
    return {
      code: CONNECT_CODES[body.code as string] ?? Code.Unknown,
      message: body.message as string,
      ...connectErrorDetails(details),
    };
  }

  it.each(MISSING.map((c) => [fieldPath(c), c] as const))(
    'refuses a missing %s over gRPC and Connect JSON and delivers nothing',
    async (_name, c) => {
      const event = eventWithout(c.kind, c.remove);
      const before = receiver.requests.length;
      const expected: Answer = {
        code: Code.InvalidArgument,
        message: `${fieldPath(c)}: ${c.message}`,
        reason: c.reason,
        fields: [fieldPath(c)],
      };
      expect(await grpcRefusal(event)).toEqual(expected);
      expect(await connectRefusal(event)).toEqual(expected);
      // Dispatch awaits its webhooks, so a delivery would have arrived before the answer.
      expect(receiver.requests.length).toBe(before);
    },
  );

  it('refuses an afterToolCall without executor as DecideToolResult refuses its context', async () => {
    const { context, result } = VALID.afterToolCall as { context: JsonObject; result: JsonObject };
    const { executor: _, ...withoutExecutor } = context;
    let decision: Answer | undefined;
    try {
      await client.decideToolResult(
        fromJson(DecideToolResultRequestSchema, {
          event: { context: withoutExecutor, result },
        }),
      );
    } catch (e: unknown) {
      decision = readConnectError(e);
    }
    const dispatch = await grpcRefusal(eventWithout('afterToolCall', 'context.executor'));
    expect(decision).toEqual({
      code: Code.InvalidArgument,
      message: 'event.context.executor: executor must be EXECUTOR_SERVER or EXECUTOR_CLIENT',
      reason: 'TOOL_CALL_CONTEXT_INVALID',
      fields: ['event.context.executor'],
    });
    // The same error, at the event's path inside a DispatchRequest.
    const atEvent = (path: string | undefined) => path?.replace(/^event\./, 'event.afterToolCall.');
    expect(dispatch).toEqual({
      code: decision?.code,
      message: atEvent(decision?.message),
      reason: decision?.reason,
      fields: [atEvent(decision?.fields[0])],
    });
  });

  it.each(ALLOWED_EMPTY.map((c) => [`${c.kind}.${c.path}`, c] as const))(
    'accepts an empty %s over gRPC and Connect JSON and delivers it as an empty string',
    async (_name, c) => {
      const value = validOf(c.kind);
      const parts = c.path.split('.');
      const field = parts.pop() as string;
      let target = value;
      for (const part of parts) target = target[part] as JsonObject;
      expect(target[field], c.path).not.toBe('');
      target[field] = '';
      const before = receiver.requests.length;
      const { status, body } = await postConnectJson({ [c.kind]: value });
      expect(status).toBe(200);
      expect(body.outcomes).toEqual([
        expect.objectContaining({
          hookId: `hook-${c.kind}`,
          status: 'HOOK_OUTCOME_STATUS_DELIVERED',
        }),
      ]);
      const grpc = await client.dispatch({ event: fromJson(HookEventSchema, { [c.kind]: value }) });
      expect(grpc.outcomes).toHaveLength(1);
      const got = (await receiver.waitForRequests(before + 2)).slice(before);
      expect(got.map((r) => r.path)).toEqual([`/${c.kind}`, `/${c.kind}`]);
      for (const r of got) {
        expect(r.json).toMatchObject({ [field]: '', hookType: c.kind, operationId: OP });
      }
    },
  );

  /** Sends `events` on one DispatchStream, closes it, and answers every ack. */
  async function streamAcks(events: DispatchStreamRequest[]): Promise<DispatchStreamResponse[]> {
    const requests = createWritableIterable<DispatchStreamRequest>();
    const acks: DispatchStreamResponse[] = [];
    const reading = (async () => {
      for await (const ack of client.dispatchStream(requests)) acks.push(ack);
    })();
    for (const event of events) await requests.write(event);
    requests.close();
    await reading;
    return acks;
  }

  it('answers each invalid event of a DispatchStream in its ack and delivers only the valid ones', async () => {
    const before = receiver.requests.length;
    const acks = await streamAcks([
      ...MISSING.map((c) =>
        create(DispatchStreamRequestSchema, {
          eventId: fieldPath(c),
          event: fromJson(HookEventSchema, eventWithout(c.kind, c.remove)),
        }),
      ),
      create(DispatchStreamRequestSchema, {
        eventId: 'valid',
        event: fromJson(HookEventSchema, { afterStep: validOf('afterStep') }),
      }),
    ]);

    expect(acks.map((a) => a.eventId).sort()).toEqual([...MISSING.map(fieldPath), 'valid'].sort());
    const byId = new Map(acks.map((a) => [a.eventId, a]));
    for (const c of MISSING) {
      const ack = byId.get(fieldPath(c));
      expect(ack?.outcomes, fieldPath(c)).toEqual([]);
      expect(ack?.error, fieldPath(c)).toMatchObject({
        code: Code.InvalidArgument,
        reason: c.reason,
        message: `${fieldPath(c)}: ${c.message}`,
      });
      const details = ack?.error?.status?.details ?? [];
      const badRequest = details
        .map((d) => anyUnpack(d, BadRequestSchema))
        .find((b) => b !== undefined);
      expect(
        badRequest?.fieldViolations.map((v) => v.field),
        fieldPath(c),
      ).toEqual([fieldPath(c)]);
    }
    expect(byId.get('valid')?.error).toBeUndefined();
    expect(byId.get('valid')?.outcomes).toHaveLength(1);
    // The valid event's ack came after its delivery; nothing else was delivered.
    expect(receiver.requests.slice(before).map((r) => r.path)).toEqual(['/afterStep']);
  });

  it('acks an event without its required eventId with EVENT_FIELD_REQUIRED and delivers nothing', async () => {
    const before = receiver.requests.length;
    const acks = await streamAcks([
      create(DispatchStreamRequestSchema, {
        eventId: '',
        event: fromJson(HookEventSchema, { afterStep: validOf('afterStep') }),
      }),
    ]);
    expect(acks).toHaveLength(1);
    expect(acks[0]?.error).toMatchObject({
      code: Code.InvalidArgument,
      reason: 'EVENT_FIELD_REQUIRED',
      message: 'eventId: eventId is required',
    });
    expect(receiver.requests.length).toBe(before);
  });

  it('acks an event whose id holds U+0000 with ID_INVALID_CHARACTER, delivers nothing, and goes on', async () => {
    const before = receiver.requests.length;
    const acks = await streamAcks([
      create(DispatchStreamRequestSchema, {
        eventId: 'bad\0id',
        event: fromJson(HookEventSchema, { afterStep: validOf('afterStep') }),
      }),
      create(DispatchStreamRequestSchema, {
        eventId: 'after',
        event: fromJson(HookEventSchema, { afterStep: validOf('afterStep') }),
      }),
    ]);
    expect(acks.map((a) => a.eventId)).toEqual(['bad\0id', 'after']);
    expect(acks[0]?.error).toMatchObject({
      code: Code.InvalidArgument,
      reason: 'ID_INVALID_CHARACTER',
      message: 'eventId: An event id cannot contain U+0000',
    });
    expect(acks[1]?.error).toBeUndefined();
    expect(acks[1]?.outcomes).toHaveLength(1);
    expect(receiver.requests.slice(before).map((r) => r.path)).toEqual(['/afterStep']);
  });
});
