/** @module Unit tests of environment hooks (`AGENT_HOOK_WEBHOOK_*`, upstream contract §2). */
import { create, type MessageInitShape, toJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType, HookTypeSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  type Hook,
  HookSchema,
  OnError,
  ResponseHandling,
  type WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { hookTypeLiteral } from '../../src/delivery/event-json.js';
import { AgentHooksError } from '../../src/errors.js';
import {
  ENV_HOOK_ID_PREFIX,
  ENV_VARS,
  type EnvironmentHooks,
  environmentHooks,
  INVALID_ENVIRONMENT,
} from '../../src/hooks/environment-hooks.js';

/** Distinctive values, so a leak into a message or the hooks is easy to spot. */
const URL = 'https://hooks.example/ingress-5f2c';
const TOKEN = 'synthetic-secret-9d41';

type Env = Record<string, string | undefined>;

/** A valid notification environment on `beforeToolCall`. */
const base: Env = {
  [ENV_VARS.URL]: URL,
  [ENV_VARS.TOKEN]: TOKEN,
  [ENV_VARS.EVENTS]: 'beforeToolCall',
};

function hooksOf(result: EnvironmentHooks): readonly Hook[] {
  if (!result.ok) throw result.error;
  return result.hooks;
}

function errorOf(result: EnvironmentHooks): AgentHooksError {
  if (result.ok) throw new Error('expected an invalid environment');
  return result.error;
}

/** The webhook every environment hook has, with its response handling and onError. */
function webhook(
  responseHandling: ResponseHandling,
  onError: OnError,
  url = URL,
): MessageInitShape<typeof WebhookSchema> {
  return {
    url,
    delivery: Delivery.FETCH,
    fallback: Fallback.UNSPECIFIED,
    headers: { Authorization: 'Bearer ${AGENT_HOOK_WEBHOOK_TOKEN}' },
    allowedEnvVars: ['AGENT_HOOK_WEBHOOK_TOKEN'],
    responseHandling,
    onError,
  };
}

describe('environmentHooks', () => {
  describe('when the feature is off', () => {
    it.each([
      ['nothing set', {}],
      ['a valid token alone', { [ENV_VARS.TOKEN]: TOKEN }],
      ['valid events alone', { [ENV_VARS.EVENTS]: 'afterStep, onComplete' }],
      [
        'toolCall and block with a control event',
        {
          [ENV_VARS.EVENTS]: 'beforeToolCall',
          [ENV_VARS.RESPONSE_HANDLING]: 'toolCall',
          [ENV_VARS.ON_ERROR]: 'block',
        },
      ],
      [
        'the defaults written out',
        { [ENV_VARS.RESPONSE_HANDLING]: 'ignore', [ENV_VARS.ON_ERROR]: 'continue' },
      ],
    ] satisfies [string, Env][])(
      'returns no hooks without AGENT_HOOK_WEBHOOK_URL and with %s',
      (_, env) => {
        expect(environmentHooks(env)).toEqual({ ok: true, hooks: [] });
      },
    );
  });

  describe('invalid environments', () => {
    const P = 'Invalid Agent Hook environment: ';
    it.each([
      // Without a URL the other four are checked too, as the reference's schema does.
      {
        name: 'an empty URL (set, and not a URL)',
        env: { [ENV_VARS.URL]: '', [ENV_VARS.TOKEN]: TOKEN, [ENV_VARS.EVENTS]: 'beforeToolCall' },
        message: `${P}AGENT_HOOK_WEBHOOK_URL`,
        variables: 'AGENT_HOOK_WEBHOOK_URL',
      },
      {
        name: 'an empty URL and invalid others, reported together',
        env: { [ENV_VARS.URL]: '', [ENV_VARS.TOKEN]: ' ', [ENV_VARS.ON_ERROR]: 'explode' },
        message: `${P}AGENT_HOOK_WEBHOOK_ON_ERROR, AGENT_HOOK_WEBHOOK_TOKEN, AGENT_HOOK_WEBHOOK_URL`,
        variables: 'AGENT_HOOK_WEBHOOK_ON_ERROR,AGENT_HOOK_WEBHOOK_TOKEN,AGENT_HOOK_WEBHOOK_URL',
      },
      {
        name: 'the removed toolResult mode',
        env: { [ENV_VARS.RESPONSE_HANDLING]: 'toolResult' },
        message: `${P}AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING`,
        variables: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
      },
      {
        name: 'block with the default response handling',
        env: { [ENV_VARS.ON_ERROR]: 'block' },
        message:
          'AGENT_HOOK_WEBHOOK_ON_ERROR=block requires AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
        variables: 'AGENT_HOOK_WEBHOOK_ON_ERROR,AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
      },
      {
        name: 'toolCall without events',
        env: { [ENV_VARS.RESPONSE_HANDLING]: 'toolCall' },
        message:
          'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall requires beforeToolCall or afterToolCall in AGENT_HOOK_WEBHOOK_EVENTS',
        variables: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING,AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'an unknown event',
        env: { [ENV_VARS.EVENTS]: 'afterStep,nope' },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS.1`,
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'events with no entry',
        env: { [ENV_VARS.EVENTS]: '' },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS`,
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'a blank token',
        env: { [ENV_VARS.TOKEN]: '  ' },
        message: `${P}AGENT_HOOK_WEBHOOK_TOKEN`,
        variables: 'AGENT_HOOK_WEBHOOK_TOKEN',
      },
      {
        name: 'a missing token',
        env: { ...base, [ENV_VARS.TOKEN]: undefined },
        message: 'AGENT_HOOK_WEBHOOK_URL requires non-empty AGENT_HOOK_WEBHOOK_TOKEN',
        variables: 'AGENT_HOOK_WEBHOOK_TOKEN',
      },
      {
        name: 'a blank token',
        env: { ...base, [ENV_VARS.TOKEN]: ' \t ' },
        message: `${P}AGENT_HOOK_WEBHOOK_TOKEN`,
        variables: 'AGENT_HOOK_WEBHOOK_TOKEN',
      },
      {
        name: 'an empty token',
        env: { ...base, [ENV_VARS.TOKEN]: '' },
        message: `${P}AGENT_HOOK_WEBHOOK_TOKEN`,
        variables: 'AGENT_HOOK_WEBHOOK_TOKEN',
      },
      {
        name: 'missing events',
        env: { ...base, [ENV_VARS.EVENTS]: undefined },
        message: 'AGENT_HOOK_WEBHOOK_URL requires non-empty AGENT_HOOK_WEBHOOK_EVENTS',
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'events with no entry',
        env: { ...base, [ENV_VARS.EVENTS]: ' , ,' },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS`,
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'the `...` event (the index is in the coalesced list)',
        env: { ...base, [ENV_VARS.EVENTS]: 'beforeToolCall, beforeToolCall,...' },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS.1`,
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'two unknown events and a wrongly cased one',
        env: { ...base, [ENV_VARS.EVENTS]: 'nope,afterStep,BeforeToolCall' },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS.0, AGENT_HOOK_WEBHOOK_EVENTS.2`,
        variables: 'AGENT_HOOK_WEBHOOK_EVENTS',
      },
      ...['toolResult', 'toolCallAndResult', 'ToolCall', 'none', ''].map((mode) => ({
        name: `response handling ${JSON.stringify(mode)} (removed or unknown)`,
        env: { ...base, [ENV_VARS.RESPONSE_HANDLING]: mode },
        message: `${P}AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING`,
        variables: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
      })),
      {
        name: 'toolCall without beforeToolCall or afterToolCall',
        env: {
          ...base,
          [ENV_VARS.EVENTS]: 'onToolCallError,onComplete',
          [ENV_VARS.RESPONSE_HANDLING]: 'toolCall',
        },
        message:
          'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall requires beforeToolCall or afterToolCall in AGENT_HOOK_WEBHOOK_EVENTS',
        variables: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING,AGENT_HOOK_WEBHOOK_EVENTS',
      },
      {
        name: 'block with the default response handling',
        env: { ...base, [ENV_VARS.ON_ERROR]: 'block' },
        message:
          'AGENT_HOOK_WEBHOOK_ON_ERROR=block requires AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
        variables: 'AGENT_HOOK_WEBHOOK_ON_ERROR,AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
      },
      {
        name: 'block with ignore',
        env: { ...base, [ENV_VARS.ON_ERROR]: 'block', [ENV_VARS.RESPONSE_HANDLING]: 'ignore' },
        message:
          'AGENT_HOOK_WEBHOOK_ON_ERROR=block requires AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
        variables: 'AGENT_HOOK_WEBHOOK_ON_ERROR,AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
      },
      {
        name: 'an unknown onError',
        env: { ...base, [ENV_VARS.ON_ERROR]: 'fail' },
        message: `${P}AGENT_HOOK_WEBHOOK_ON_ERROR`,
        variables: 'AGENT_HOOK_WEBHOOK_ON_ERROR',
      },
      ...[
        'ftp://hooks.example/x',
        '//hooks.example/x',
        'https://user:synthetic-secret-9d41@hooks.example/x',
        'https://synthetic-secret-9d41@hooks.example/x',
        'hooks.example/x',
        '/api\\hooks',
        ' ',
      ].map((url) => ({
        name: `the URL ${JSON.stringify(url)}`,
        env: { ...base, [ENV_VARS.URL]: url },
        message: `${P}AGENT_HOOK_WEBHOOK_URL`,
        variables: 'AGENT_HOOK_WEBHOOK_URL',
      })),
      {
        name: 'several malformed variables, reported together in schema order',
        env: {
          [ENV_VARS.URL]: 'mailto:synthetic-secret-9d41',
          [ENV_VARS.TOKEN]: ' ',
          [ENV_VARS.EVENTS]: 'afterStep,synthetic-secret-9d41',
          [ENV_VARS.RESPONSE_HANDLING]: 'toolResult',
          [ENV_VARS.ON_ERROR]: 'block',
        },
        message: `${P}AGENT_HOOK_WEBHOOK_EVENTS.1, AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING, AGENT_HOOK_WEBHOOK_TOKEN, AGENT_HOOK_WEBHOOK_URL`,
        variables:
          'AGENT_HOOK_WEBHOOK_EVENTS,AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING,AGENT_HOOK_WEBHOOK_TOKEN,AGENT_HOOK_WEBHOOK_URL',
      },
    ] satisfies { name: string; env: Env; message: string; variables: string }[])(
      'refuses $name',
      ({ env, message, variables }) => {
        const error = errorOf(environmentHooks(env));
        expect(error).toBeInstanceOf(AgentHooksError);
        expect(error.kind).toBe('failed_precondition');
        expect(error.reason).toBe(INVALID_ENVIRONMENT);
        expect(error.message).toBe(message);
        expect(error.metadata).toEqual({ variables });
        // Values never reach the message or metadata: only names and indexes do.
        const told = `${error.message} ${JSON.stringify(error.metadata)}`;
        expect(told).not.toContain(TOKEN);
        expect(told).not.toContain('hooks.example');
      },
    );
  });

  describe('generated hooks', () => {
    it('makes one notification per event by default, ids from the event literal', () => {
      const hooks = hooksOf(environmentHooks(base));
      expect(hooks).toEqual([
        create(HookSchema, {
          id: 'server-env-webhook:beforeToolCall',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: webhook(ResponseHandling.IGNORE, OnError.CONTINUE),
        }),
      ]);
      const [hook] = hooks;
      expect(hook?.matcher).toBeUndefined();
      expect(hook?.handler).toBe(false);
      expect(hook?.webhook?.timeout).toBeUndefined();
      expect(hook?.webhook?.body).toBeUndefined();
      expect(hook?.webhook?.eventFields).toBeUndefined();
    });

    it('trims, drops empty entries and coalesces duplicates in first-seen order', () => {
      const hooks = hooksOf(
        environmentHooks({
          ...base,
          [ENV_VARS.EVENTS]:
            ' onComplete ,,beforeToolCall, afterToolCall, onComplete,beforeToolCall,',
        }),
      );
      expect(hooks.map((h) => h.id)).toEqual([
        'server-env-webhook:onComplete',
        'server-env-webhook:beforeToolCall',
        'server-env-webhook:afterToolCall',
      ]);
      expect(hooks.map((h) => h.type)).toEqual([
        HookType.ON_COMPLETE,
        HookType.BEFORE_TOOL_CALL,
        HookType.AFTER_TOOL_CALL,
      ]);
    });

    it('makes beforeToolCall and afterToolCall controls with toolCall and block, others notifications', () => {
      const hooks = hooksOf(
        environmentHooks({
          ...base,
          [ENV_VARS.EVENTS]: 'beforeToolCall, afterToolCall, onToolCallError,beforeToolCall',
          [ENV_VARS.RESPONSE_HANDLING]: 'toolCall',
          [ENV_VARS.ON_ERROR]: 'block',
        }),
      );
      expect(hooks).toEqual([
        create(HookSchema, {
          id: 'server-env-webhook:beforeToolCall',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: webhook(ResponseHandling.TOOL_CALL, OnError.BLOCK),
        }),
        create(HookSchema, {
          id: 'server-env-webhook:afterToolCall',
          type: HookType.AFTER_TOOL_CALL,
          webhook: webhook(ResponseHandling.TOOL_CALL, OnError.BLOCK),
        }),
        create(HookSchema, {
          id: 'server-env-webhook:onToolCallError',
          type: HookType.ON_TOOL_CALL_ERROR,
          webhook: webhook(ResponseHandling.IGNORE, OnError.CONTINUE),
        }),
      ]);
    });

    it.each([
      ['afterToolCall', [HookType.AFTER_TOOL_CALL]],
      ['beforeToolCall,afterToolCall', [HookType.BEFORE_TOOL_CALL, HookType.AFTER_TOOL_CALL]],
    ])('accepts toolCall with %s only, continuing on error by default', (events, controls) => {
      const hooks = hooksOf(
        environmentHooks({
          ...base,
          [ENV_VARS.EVENTS]: `${events},afterStep`,
          [ENV_VARS.RESPONSE_HANDLING]: 'toolCall',
        }),
      );
      expect(
        hooks.filter((h) => h.webhook?.responseHandling === ResponseHandling.TOOL_CALL),
      ).toHaveLength(controls.length);
      for (const hook of hooks) {
        const control = controls.includes(hook.type);
        expect(hook.webhook?.responseHandling).toBe(
          control ? ResponseHandling.TOOL_CALL : ResponseHandling.IGNORE,
        );
        expect(hook.webhook?.onError).toBe(OnError.CONTINUE);
      }
    });

    it('accepts every one of the 16 hook types', () => {
      const literals = HookTypeSchema.values
        .filter((v) => v.number !== HookType.UNSPECIFIED)
        .map((v) => hookTypeLiteral(v.number));
      expect(literals).toHaveLength(16);
      const hooks = hooksOf(environmentHooks({ ...base, [ENV_VARS.EVENTS]: literals.join(',') }));
      expect(hooks.map((h) => h.id)).toEqual(literals.map((l) => `${ENV_HOOK_ID_PREFIX}${l}`));
    });

    it('keeps an application-relative URL as written', () => {
      const [hook] = hooksOf(environmentHooks({ ...base, [ENV_VARS.URL]: '/api/agent/hooks' }));
      expect(hook?.webhook).toEqual(
        create(HookSchema, {
          webhook: webhook(ResponseHandling.IGNORE, OnError.CONTINUE, '/api/agent/hooks'),
        }).webhook,
      );
    });

    it('never puts the token in a hook, only the template', () => {
      const hooks = hooksOf(
        environmentHooks({
          ...base,
          [ENV_VARS.EVENTS]: 'beforeToolCall,afterToolCall,onError',
          [ENV_VARS.RESPONSE_HANDLING]: 'toolCall',
        }),
      );
      const json = hooks.map((h) => toJsonString(HookSchema, h)).join('\n');
      expect(json).not.toContain(TOKEN);
      expect(json).toContain('Bearer ${AGENT_HOOK_WEBHOOK_TOKEN}');
    });

    it('returns frozen hooks, so a shared snapshot cannot be edited', () => {
      const hooks = hooksOf(environmentHooks(base));
      expect(Object.isFrozen(hooks)).toBe(true);
      expect(Object.isFrozen(hooks[0])).toBe(true);
      expect(Object.isFrozen(hooks[0]?.webhook?.headers)).toBe(true);
      expect(Object.isFrozen(hooks[0]?.webhook?.allowedEnvVars)).toBe(true);
    });
  });
});
