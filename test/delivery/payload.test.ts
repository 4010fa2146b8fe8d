/** @module Payload builder tests against hand-written payloads (upstream contract §5). */
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { Executor, type HookEvent, HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { type Webhook, WebhookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { buildWebhookPayload, emailLookupUserId } from '../../src/delivery/payload.js';

const HOOK_ID = 'audit';

/** An `afterToolCall` event whose result carries the given Work registration. */
function afterToolCall(workRegistration: JsonObject): HookEvent {
  return create(HookEventSchema, {
    event: {
      case: 'afterToolCall',
      value: {
        context: {
          toolCallId: 'call_1',
          assistantMessageId: 'msg_1',
          identifier: 'skills',
          apiName: 'run',
          args: { name: 'summarize' },
          callIndex: 0,
          stepIndex: 2,
          operationId: 'op_1',
          executor: Executor.SERVER,
          userId: 'user_1',
        },
        mocked: false,
        result: { content: 'done', success: true, workRegistration },
      },
    },
  });
}

/** The reference JSON of {@link afterToolCall}, without the result. */
const AFTER_TOOL_CALL_CONTEXT = {
  toolCallId: 'call_1',
  assistantMessageId: 'msg_1',
  identifier: 'skills',
  apiName: 'run',
  args: { name: 'summarize' },
  callIndex: 0,
  stepIndex: 2,
  operationId: 'op_1',
  executor: 'server',
  userId: 'user_1',
  mocked: false,
};

const SKILL_WORK = {
  type: 'skill',
  id: 'skill_1',
  args: { secret: 'input' },
  data: { body: 'skill output' },
};

const TASK_WORK = { type: 'task', id: 'task_1', args: { q: 1 }, data: { x: 2 } };

/** An `onComplete` event of user `user_1`, with local-only state set. */
function onComplete(): HookEvent {
  return create(HookEventSchema, {
    event: {
      case: 'onComplete',
      value: {
        agentId: 'agt_1',
        operationId: 'op_1',
        userId: 'user_1',
        reason: 'done',
        finalState: { messages: [] },
      },
    },
  });
}

function webhook(init: MessageInitShape<typeof WebhookSchema> = {}): Webhook {
  return create(WebhookSchema, { url: 'https://hooks.example/in', ...init });
}

describe('buildWebhookPayload', () => {
  it('sends the whole event with hookId and hookType when there is no projection or body', () => {
    expect(buildWebhookPayload(onComplete(), HOOK_ID, webhook())).toEqual({
      agentId: 'agt_1',
      operationId: 'op_1',
      userId: 'user_1',
      errorMessage: '',
      reason: 'done',
      hookId: HOOK_ID,
      hookType: 'onComplete',
    });
  });

  it('sends the whole event when the hook has no webhook', () => {
    expect(buildWebhookPayload(onComplete(), HOOK_ID, undefined)).toMatchObject({
      agentId: 'agt_1',
      hookId: HOOK_ID,
      hookType: 'onComplete',
    });
  });

  it('keeps only the listed fields the event has; absent names stay absent', () => {
    const payload = buildWebhookPayload(
      onComplete(),
      HOOK_ID,
      webhook({ eventFields: { names: ['operationId', 'noSuchField', 'constructor', 'reason'] } }),
    );
    expect(payload).toEqual({
      operationId: 'op_1',
      reason: 'done',
      hookId: HOOK_ID,
      hookType: 'onComplete',
    });
  });

  it('keeps no event field for an empty projection', () => {
    const payload = buildWebhookPayload(onComplete(), HOOK_ID, webhook({ eventFields: {} }));
    expect(payload).toEqual({ hookId: HOOK_ID, hookType: 'onComplete' });
  });

  it('merges the body last, overriding hookId, hookType and userId', () => {
    const payload = buildWebhookPayload(
      onComplete(),
      HOOK_ID,
      webhook({
        eventFields: { names: ['userId', 'reason'] },
        body: { hookId: 'other', hookType: 'custom', userId: 'user_2', team: 'ops' },
      }),
    );
    expect(payload).toEqual({
      userId: 'user_2',
      reason: 'done',
      hookId: 'other',
      hookType: 'custom',
      team: 'ops',
    });
  });

  it('removes finalState, userEmail and mock, even when the body sets them', () => {
    const payload = buildWebhookPayload(
      onComplete(),
      HOOK_ID,
      webhook({
        eventFields: { names: ['operationId', 'finalState', 'userEmail'] },
        body: { finalState: { a: 1 }, userEmail: 'x@example.com', mock: { content: 'm' }, k: 1 },
      }),
    );
    expect(payload).toEqual({ operationId: 'op_1', hookId: HOOK_ID, hookType: 'onComplete', k: 1 });
  });

  it("redacts a skill's Work registration in afterToolCall notifications", () => {
    const event = afterToolCall(SKILL_WORK);
    expect(buildWebhookPayload(event, HOOK_ID, webhook())).toEqual({
      ...AFTER_TOOL_CALL_CONTEXT,
      result: {
        content: 'done',
        success: true,
        workRegistration: { type: 'skill', id: 'skill_1', data: null },
      },
      hookId: HOOK_ID,
      hookType: 'afterToolCall',
    });
    // The event is not modified.
    const value = event.event.value as { result?: { workRegistration?: JsonObject } };
    expect(value.result?.workRegistration).toEqual(SKILL_WORK);
  });

  it("leaves a task's Work registration untouched", () => {
    expect(buildWebhookPayload(afterToolCall(TASK_WORK), HOOK_ID, webhook())).toEqual({
      ...AFTER_TOOL_CALL_CONTEXT,
      result: { content: 'done', success: true, workRegistration: TASK_WORK },
      hookId: HOOK_ID,
      hookType: 'afterToolCall',
    });
  });

  it('redacts a skill result set by the body without modifying the body', () => {
    const hook = webhook({ body: { result: { content: 'b', workRegistration: SKILL_WORK } } });
    const payload = buildWebhookPayload(afterToolCall(TASK_WORK), HOOK_ID, hook);
    expect(payload.result).toEqual({
      content: 'b',
      workRegistration: { type: 'skill', id: 'skill_1', data: null },
    });
    expect(hook.body).toEqual({ result: { content: 'b', workRegistration: SKILL_WORK } });
  });

  it('gives controls the authoritative event only: no projection, no body, no redaction', () => {
    const hook = webhook({
      eventFields: { names: ['toolCallId'] },
      body: { hookId: 'other', extra: true, result: 'forged' },
    });
    const payload = buildWebhookPayload(afterToolCall(SKILL_WORK), HOOK_ID, hook, {
      control: true,
    });
    expect(payload).toEqual({
      ...AFTER_TOOL_CALL_CONTEXT,
      result: { content: 'done', success: true, workRegistration: SKILL_WORK },
      hookId: HOOK_ID,
      hookType: 'afterToolCall',
    });
  });
});

describe('emailLookupUserId', () => {
  it("names the event's user when the payload has no userId key", () => {
    const hook = webhook({ eventFields: { names: ['reason', 'userEmail'] } });
    const event = onComplete();
    expect(emailLookupUserId(event, buildWebhookPayload(event, HOOK_ID, hook), hook)).toBe(
      'user_1',
    );
  });

  it("names the body's userId over the event's", () => {
    const hook = webhook({ body: { userId: 'user_2' } });
    const event = onComplete();
    expect(emailLookupUserId(event, buildWebhookPayload(event, HOOK_ID, hook), hook)).toBe(
      'user_2',
    );
  });

  it('names nobody for an invalid body userId, with no fallback to the event user', () => {
    for (const userId of [null, '', 42]) {
      const hook = webhook({ body: { userId } });
      const event = onComplete();
      const payload = buildWebhookPayload(event, HOOK_ID, hook);
      expect(emailLookupUserId(event, payload, hook)).toBeUndefined();
    }
  });

  it('names nobody when the projection does not list userEmail', () => {
    const hook = webhook({ eventFields: { names: ['userId'] } });
    const event = onComplete();
    const payload = buildWebhookPayload(event, HOOK_ID, hook);
    expect(emailLookupUserId(event, payload, hook)).toBeUndefined();
  });
});
