import { create, type JsonObject } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import {
  AfterCallAgentEventSchema,
  AfterHumanInterventionEventSchema,
  AfterStepEventSchema,
  Executor,
  ExecutorSchema,
  HookEventSchema,
  HookType,
  HookTypeSchema,
  HumanAction,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import {
  enumLiteral,
  eventToReferenceJson,
  hookTypeFromLiteral,
  hookTypeLiteral,
} from '../../src/delivery/event-json.js';
import { loadEventFixtures } from '../support/fixtures.js';

const fixtures = loadEventFixtures();

/** The payload a notification hook receives, without projection or body. */
function receiverJson(event: Parameters<typeof eventToReferenceJson>[0], hookId: string) {
  const { hookType, json } = eventToReferenceJson(event);
  return { ...json, hookId, hookType } as JsonObject;
}

describe('eventToReferenceJson against the hand-written fixtures', () => {
  it('has a full and a minimal fixture for each of the 16 hook types', () => {
    const types = HookTypeSchema.values.filter((v) => v.number !== 0).map((v) => v.number);
    const expected = types.flatMap((t) => [
      `${hookTypeLiteral(t)}.full.json`,
      `${hookTypeLiteral(t)}.minimal.json`,
    ]);
    expect(fixtures.map((f) => f.file).sort()).toEqual(expected.sort());
  });

  for (const fixture of fixtures) {
    it(`maps ${fixture.file} to the reference JSON`, () => {
      // Compared as parsed JSON: key order is not part of the contract.
      const got = JSON.parse(JSON.stringify(receiverJson(fixture.event, fixture.hookId)));
      expect(got).toEqual(fixture.payload);
      expect(eventToReferenceJson(fixture.event).hookType).toBe(fixture.hookType);
    });
  }

  it('never writes finalState, even when the event carries it', () => {
    const withState = fixtures.filter((f) => JSON.stringify(f.eventJson).includes('finalState'));
    expect(withState.length).toBeGreaterThanOrEqual(4);
    for (const f of withState) {
      expect(Object.keys(eventToReferenceJson(f.event).json)).not.toContain('finalState');
    }
  });
});

describe('presence rules', () => {
  it('writes an optional field that is set to its zero value', () => {
    const event = create(HookEventSchema, {
      event: {
        case: 'onComplete',
        value: { operationId: 'op', cost: 0, content: '', thinking: false, stepIndex: 0 },
      },
    });
    const { json } = eventToReferenceJson(event);
    expect(json).toMatchObject({ cost: 0, content: '', thinking: false, stepIndex: 0 });
    expect(json).not.toHaveProperty('duration');
    expect(json).not.toHaveProperty('steps');
  });

  it('writes implicit zero values that upstream always sends', () => {
    const step = eventToReferenceJson(
      create(HookEventSchema, { event: { case: 'beforeStep', value: {} } }),
    ).json;
    expect(step).toEqual({ agentId: '', operationId: '', userId: '', stepIndex: 0, steps: 0 });
    const agent = eventToReferenceJson(
      create(HookEventSchema, {
        event: { case: 'afterCallAgent', value: create(AfterCallAgentEventSchema) },
      }),
    ).json;
    expect(agent).toEqual({ agentId: '', operationId: '', subOperationId: '', success: false });
  });

  it('writes an unset always-present result as its empty form', () => {
    const { json } = eventToReferenceJson(
      create(HookEventSchema, {
        event: {
          case: 'afterToolCall',
          value: { context: { executor: Executor.CLIENT }, mocked: true },
        },
      }),
    );
    expect(json.result).toEqual({ content: '', success: false });
    expect(json.args).toEqual({});
    expect(json.executor).toBe('client');
    expect(json.mocked).toBe(true);
  });

  it('writes a blocked tool result with its error string and state object', () => {
    const result = create(ToolResultSchema, {
      content: 'Blocked by beforeToolCall hook.',
      success: false,
      error: { kind: { case: 'stringValue', value: 'hook_denied' } },
      state: { type: 'blocked', reason: 'Blocked by beforeToolCall hook.' },
      executionTime: 0,
    });
    const { json } = eventToReferenceJson(
      create(HookEventSchema, {
        event: { case: 'afterToolCall', value: { context: { executor: Executor.SERVER }, result } },
      }),
    );
    expect(json.result).toEqual({
      content: 'Blocked by beforeToolCall hook.',
      success: false,
      error: 'hook_denied',
      state: { type: 'blocked', reason: 'Blocked by beforeToolCall hook.' },
      executionTime: 0,
    });
  });

  it('spells lastLLMContent as upstream', () => {
    const { json } = eventToReferenceJson(
      create(HookEventSchema, {
        event: {
          case: 'afterStep',
          value: create(AfterStepEventSchema, { lastLlmContent: 'x' }),
        },
      }),
    );
    expect(json.lastLLMContent).toBe('x');
    expect(json).not.toHaveProperty('lastLlmContent');
  });

  it('refuses an event with no case set', () => {
    expect(() => eventToReferenceJson(create(HookEventSchema))).toThrow(RangeError);
  });
});

describe('enum literals', () => {
  it('turns every hook type into its upstream literal and back', () => {
    const literals = HookTypeSchema.values
      .filter((v) => v.number !== 0)
      .map((v) => hookTypeLiteral(v.number));
    expect(literals).toEqual([
      'beforeStep',
      'afterStep',
      'onComplete',
      'onError',
      'beforeToolCall',
      'afterToolCall',
      'onToolCallError',
      'beforeHumanIntervention',
      'afterHumanIntervention',
      'onStopByHumanIntervention',
      'beforeCompact',
      'afterCompact',
      'onCompactError',
      'beforeCallAgent',
      'afterCallAgent',
      'onCallAgentError',
    ]);
    for (const literal of literals) {
      expect(hookTypeLiteral(hookTypeFromLiteral(literal) as HookType)).toBe(literal);
    }
    expect(hookTypeFromLiteral('nope')).toBeUndefined();
    expect(() => hookTypeLiteral(HookType.UNSPECIFIED)).toThrow(RangeError);
  });

  it('writes multi-word values in lower camel case and leaves the zero value out', () => {
    expect(enumLiteral(ExecutorSchema, Executor.SERVER)).toBe('server');
    expect(enumLiteral(ExecutorSchema, Executor.UNSPECIFIED)).toBeUndefined();
    const { json } = eventToReferenceJson(
      create(HookEventSchema, {
        event: {
          case: 'afterHumanIntervention',
          value: create(AfterHumanInterventionEventSchema, {
            action: HumanAction.REJECT_AND_CONTINUE,
          }),
        },
      }),
    );
    expect(json.action).toBe('rejectAndContinue');
  });
});
