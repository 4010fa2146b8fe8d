/** @module Unit tests of hook validation (upstream contract §1.7, §4.1). */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  Fallback,
  type Hook,
  HookSchema,
  ModifyPoint,
  ModifyPointSchema,
  OnError,
  ResponseHandling,
  type WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { checkToolCallId } from '../../src/hooks/tool-call.js';
import {
  isControlHook,
  REASON,
  validateHook,
  validateHooks,
  validateOperationId,
  validateStoredHook,
} from '../../src/hooks/validate.js';

type HookInit = MessageInitShape<typeof HookSchema>;

const HOOK_URL = 'https://hooks.example.com/agent';

/** A valid notification webhook hook on `afterStep`. */
const notification: HookInit = {
  id: 'notify',
  type: HookType.AFTER_STEP,
  webhook: { url: HOOK_URL },
};

/** The webhook of {@link control}. */
const controlWebhook = {
  url: HOOK_URL,
  responseHandling: ResponseHandling.TOOL_CALL,
  onError: OnError.BLOCK,
} satisfies MessageInitShape<typeof WebhookSchema>;

/** A valid control hook on `beforeToolCall`. */
const control = {
  id: 'gate',
  type: HookType.BEFORE_TOOL_CALL,
  matcher: '^fs/',
  webhook: controlWebhook,
} satisfies HookInit;

function hook(init: HookInit): Hook {
  return create(HookSchema, init);
}

/** Runs `fn` and returns the InvalidArgumentError it throws. */
function invalidArgument(fn: () => void): InvalidArgumentError {
  try {
    fn();
  } catch (e: unknown) {
    if (e instanceof InvalidArgumentError) return e;
    throw e;
  }
  throw new Error('expected an InvalidArgumentError, nothing was thrown');
}

interface InvalidCase {
  readonly name: string;
  readonly hook: HookInit;
  readonly field: string;
  readonly reason: string;
  readonly message: string;
}

// Literal `${VAR}` header templates, which agenthooks resolves at send time; not JS templates.
const BEARER_TEMPLATE = 'Bearer ${HOOK_TOKEN}';
const LOWER_CASE_TEMPLATE = '${lower_case}';
const BARE_TEMPLATE = '${TOKEN}';

const URL_MESSAGE =
  'Webhook URL must be HTTP(S) or an application-relative path without credentials';
const TIMEOUT_MESSAGE = 'Webhook timeout must be a positive number of seconds up to 2147483.647';

const invalidCases: InvalidCase[] = [
  {
    name: 'an empty id',
    hook: { ...notification, id: '' },
    field: 'hooks[0].id',
    reason: REASON.HOOK_ID_REQUIRED,
    message: 'Hook id is required',
  },
  {
    name: 'an id reserved for environment hooks',
    hook: { ...notification, id: 'server-env-webhook:0' },
    field: 'hooks[0].id',
    reason: REASON.HOOK_ID_RESERVED,
    message: 'Hook ids starting with server-env-webhook: are reserved for environment hooks',
  },
  {
    name: 'an unspecified type',
    hook: { ...notification, type: HookType.UNSPECIFIED },
    field: 'hooks[0].type',
    reason: REASON.HOOK_TYPE_REQUIRED,
    message: 'Hook type is required',
  },
  {
    name: 'an unknown type number',
    hook: { ...notification, type: 99 as HookType },
    field: 'hooks[0].type',
    reason: REASON.INVALID_ENUM_VALUE,
    message: 'Unknown hook type value 99',
  },
  {
    name: 'neither handler nor webhook',
    hook: { id: 'empty', type: HookType.AFTER_STEP },
    field: 'hooks[0]',
    reason: REASON.HOOK_TARGET_REQUIRED,
    message: 'A hook requires a handler or webhook',
  },
  ...['', '*', 'fs/readFile'].map(
    (matcher): InvalidCase => ({
      name: `matcher ${JSON.stringify(matcher)} on a non-tool event`,
      hook: { ...notification, matcher },
      field: 'hooks[0].matcher',
      reason: REASON.MATCHER_NOT_ALLOWED,
      message: 'Matchers are only supported for tool events',
    }),
  ),
  {
    name: 'a matcher that is not a regular expression',
    hook: { ...notification, type: HookType.ON_TOOL_CALL_ERROR, matcher: 'fs/(read' },
    field: 'hooks[0].matcher',
    reason: REASON.INVALID_MATCHER,
    message: 'Invalid hook matcher regular expression',
  },
  ...[
    '',
    'ftp://hooks.example.com/agent',
    'javascript:alert(1)',
    'hooks.example.com/agent',
    '//hooks.example.com/agent',
    'https://user:secret@hooks.example.com/agent',
    'https://user@hooks.example.com/agent',
    'https://hooks.example.com\\agent',
    '/api\\hook',
    'http://',
  ].map(
    (url): InvalidCase => ({
      name: `webhook url ${JSON.stringify(url)}`,
      hook: { ...notification, webhook: { url } },
      field: 'hooks[0].webhook.url',
      reason: REASON.INVALID_WEBHOOK_URL,
      message: URL_MESSAGE,
    }),
  ),
  ...[0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2_147_483.648].map(
    (timeout): InvalidCase => ({
      name: `webhook timeout ${timeout}`,
      hook: { ...notification, webhook: { url: HOOK_URL, timeout } },
      field: 'hooks[0].webhook.timeout',
      reason: REASON.INVALID_WEBHOOK_TIMEOUT,
      message: TIMEOUT_MESSAGE,
    }),
  ),
  ...['Bad Name', '', 'X-Caf\u00e9', 'X:Y'].map(
    (name): InvalidCase => ({
      name: `header name ${JSON.stringify(name)}`,
      hook: { ...notification, webhook: { url: HOOK_URL, headers: { [name]: 'v' } } },
      field: `hooks[0].webhook.headers[${JSON.stringify(name)}]`,
      reason: REASON.INVALID_HEADER_NAME,
      message: 'Invalid webhook header name',
    }),
  ),
  ...[
    'Host',
    'content-length',
    'Connection',
    'TRANSFER-ENCODING',
    'Trailer',
    'upgrade',
    'Proxy-Authorization',
    'sec-fetch-mode',
    'Upstash-Retries',
  ].map(
    (name): InvalidCase => ({
      name: `forbidden header ${name}`,
      hook: { ...notification, webhook: { url: HOOK_URL, headers: { [name]: 'v' } } },
      field: `hooks[0].webhook.headers[${JSON.stringify(name)}]`,
      reason: REASON.FORBIDDEN_HEADER,
      message: `Webhook header ${name} is not allowed`,
    }),
  ),
  ...['Bearer a\r\nX-Injected: 1', 'a\nb', 'a\rb', 'a\0b'].map(
    (value): InvalidCase => ({
      name: `header value ${JSON.stringify(value)}`,
      hook: { ...notification, webhook: { url: HOOK_URL, headers: { Authorization: value } } },
      field: 'hooks[0].webhook.headers["Authorization"]',
      reason: REASON.INVALID_HEADER_VALUE,
      message: 'Webhook header values cannot contain CR, LF or NUL',
    }),
  ),
  ...['a\x01b', 'a\x7fb', '\u20ac', '\ud800'].map(
    (value): InvalidCase => ({
      name: `header value ${JSON.stringify(value)}`,
      hook: { ...notification, webhook: { url: HOOK_URL, headers: { 'X-A': value } } },
      field: 'hooks[0].webhook.headers["X-A"]',
      reason: REASON.INVALID_HEADER_VALUE,
      message:
        'Webhook header values can only hold tabs and characters from U+0020 to U+00FF but DEL',
    }),
  ),
  {
    name: 'two header names that differ only in case',
    hook: { ...notification, webhook: { url: HOOK_URL, headers: { 'X-A': '1', 'x-a': '2' } } },
    field: 'hooks[0].webhook.headers["x-a"]',
    reason: REASON.DUPLICATE_HEADER,
    message: 'Webhook header x-a is set twice (header names are case-insensitive)',
  },
  ...[BARE_TEMPLATE, BEARER_TEMPLATE, '${', '${1TOKEN}', '${HOOK_TOKEN'].map(
    (value): InvalidCase => ({
      name: `header template ${JSON.stringify(value)} without a matching allowedEnvVars entry`,
      hook: { ...notification, webhook: { url: HOOK_URL, headers: { Authorization: value } } },
      field: 'hooks[0].webhook.headers["Authorization"]',
      reason: REASON.INVALID_HEADER_TEMPLATE,
      message:
        'Webhook header values can only use ${VAR} templates of variables listed in allowedEnvVars',
    }),
  ),
  ...['1TOKEN', 'HOOK-TOKEN', '', BARE_TEMPLATE].map(
    (name): InvalidCase => ({
      name: `allowedEnvVars entry ${JSON.stringify(name)}`,
      hook: { ...notification, webhook: { url: HOOK_URL, allowedEnvVars: ['HOOK_TOKEN', name] } },
      field: 'hooks[0].webhook.allowedEnvVars[1]',
      reason: REASON.INVALID_ENV_VAR_NAME,
      message: 'Invalid allowedEnvVars entry',
    }),
  ),
  {
    name: 'a control with qstash delivery',
    hook: { ...control, webhook: { ...controlWebhook, delivery: Delivery.QSTASH } },
    field: 'hooks[0].webhook.delivery',
    reason: REASON.CONTROL_REQUIRES_FETCH,
    message: 'toolCall response handling requires fetch delivery',
  },
  {
    name: 'a control with an empty eventFields projection',
    hook: { ...control, webhook: { ...controlWebhook, eventFields: { names: [] } } },
    field: 'hooks[0].webhook.eventFields',
    reason: REASON.CONTROL_PAYLOAD_OVERRIDE,
    message: 'Control hooks cannot filter or override the event payload',
  },
  {
    name: 'a control with an empty body',
    hook: { ...control, webhook: { ...controlWebhook, body: {} } },
    field: 'hooks[0].webhook.body',
    reason: REASON.CONTROL_PAYLOAD_OVERRIDE,
    message: 'Control hooks cannot filter or override the event payload',
  },
  ...[HookType.ON_TOOL_CALL_ERROR, HookType.BEFORE_STEP].map(
    (type): InvalidCase => ({
      name: `a control on hook type ${HookType[type]}`,
      hook: { ...control, matcher: undefined, type },
      field: 'hooks[0].type',
      reason: REASON.CONTROL_TYPE_NOT_ALLOWED,
      message: 'toolCall response handling requires beforeToolCall or afterToolCall',
    }),
  ),
  {
    name: 'a control with a handler',
    hook: { ...control, handler: true },
    field: 'hooks[0].handler',
    reason: REASON.CONTROL_HANDLER_NOT_ALLOWED,
    message: 'Control hooks cannot have a handler',
  },
  ...[ResponseHandling.UNSPECIFIED, ResponseHandling.IGNORE].map(
    (responseHandling): InvalidCase => ({
      name: `onError block with responseHandling ${ResponseHandling[responseHandling]}`,
      hook: {
        ...notification,
        webhook: { url: HOOK_URL, responseHandling, onError: OnError.BLOCK },
      },
      field: 'hooks[0].webhook.onError',
      reason: REASON.BLOCK_REQUIRES_CONTROL,
      message: 'onError:block requires toolCall response handling',
    }),
  ),
  ...(['delivery', 'fallback', 'responseHandling', 'onError'] as const).map(
    (field): InvalidCase => ({
      name: `an unknown ${field} number`,
      hook: { ...notification, webhook: { url: HOOK_URL, [field]: 7 } },
      field: `hooks[0].webhook.${field}`,
      reason: REASON.INVALID_ENUM_VALUE,
      message: `Unknown webhook ${field} value 7`,
    }),
  ),
];

describe('validateHooks', () => {
  it.each(invalidCases)('refuses $name', ({ hook: init, field, reason, message }) => {
    const error = invalidArgument(() => validateHooks([hook(init)]));
    expect({ field: error.field, reason: error.reason, message: error.message }).toEqual({
      field,
      reason,
      message,
    });
    expect(error.kind).toBe('invalid_argument');
    expect(error.metadata).toEqual({ field });
  });

  it('names the first invalid hook of the batch after valid ones', () => {
    const hooks = [notification, control, { ...notification, webhook: { url: 'ftp://x' } }];
    const error = invalidArgument(() => validateHooks(hooks.map(hook)));
    expect(error.field).toBe('hooks[2].webhook.url');
    expect(error.reason).toBe(REASON.INVALID_WEBHOOK_URL);
  });

  it('stops at the first invalid hook when several are invalid', () => {
    const hooks = [notification, { ...notification, id: '' }, { ...notification, type: 0 }];
    const error = invalidArgument(() => validateHooks(hooks.map(hook)));
    expect(error.field).toBe('hooks[1].id');
  });

  it('prefixes fields with the given path', () => {
    const error = invalidArgument(() =>
      validateHooks([hook({ ...notification, id: '' })], 'request.hooks'),
    );
    expect(error.field).toBe('request.hooks[0].id');
  });

  it('applies the rules in order within one hook', () => {
    // Both the delivery and the body are wrong; delivery is checked first.
    const both = {
      ...control,
      webhook: { ...controlWebhook, delivery: Delivery.QSTASH, body: { a: 1 } },
    };
    expect(invalidArgument(() => validateHooks([hook(both)])).reason).toBe(
      REASON.CONTROL_REQUIRES_FETCH,
    );
    // No id and no target: the id is reported.
    const bare = { id: '', type: HookType.AFTER_STEP };
    expect(invalidArgument(() => validateHooks([hook(bare)])).field).toBe('hooks[0].id');
  });

  it('accepts an empty batch', () => {
    expect(() => validateHooks([])).not.toThrow();
  });

  const validCases: { name: string; hook: HookInit }[] = [
    { name: 'a notification webhook', hook: notification },
    { name: 'a beforeToolCall control with a matcher', hook: control },
    {
      name: 'an afterToolCall control with a matcher and explicit defaults',
      hook: {
        id: 'result-gate',
        type: HookType.AFTER_TOOL_CALL,
        matcher: '^fs/readFile$',
        webhook: {
          url: HOOK_URL,
          delivery: Delivery.FETCH,
          responseHandling: ResponseHandling.TOOL_CALL,
          onError: OnError.CONTINUE,
          timeout: 5,
        },
      },
    },
    {
      name: 'a handler-only hook',
      hook: { id: 'local', type: HookType.ON_COMPLETE, handler: true },
    },
    {
      name: 'a handler-only beforeToolCall hook with a matcher',
      hook: { id: 'mock', type: HookType.BEFORE_TOOL_CALL, matcher: '*', handler: true },
    },
    {
      name: 'a dual handler and webhook hook with payload options',
      hook: {
        id: 'dual',
        type: HookType.AFTER_TOOL_CALL,
        matcher: '',
        handler: true,
        webhook: {
          url: HOOK_URL,
          body: { source: 'agenthooks' },
          eventFields: { names: ['toolCallId', 'result'] },
        },
      },
    },
    {
      name: 'a qstash notification with fallback none',
      hook: {
        id: 'queued',
        type: HookType.ON_ERROR,
        webhook: { url: HOOK_URL, delivery: Delivery.QSTASH, fallback: Fallback.NONE },
      },
    },
    {
      name: 'a relative HOOK_URL',
      hook: { id: 'relative', type: HookType.BEFORE_STEP, webhook: { url: '/api/hook' } },
    },
    {
      name: 'a loopback http HOOK_URL with a port',
      hook: { ...notification, webhook: { url: 'http://127.0.0.1:8080/hook?x=1' } },
    },
    {
      name: 'an onToolCallError notification with a matcher',
      hook: { ...notification, type: HookType.ON_TOOL_CALL_ERROR, matcher: 'readFile' },
    },
    {
      name: 'headers with templates and allowed env vars',
      hook: {
        ...notification,
        webhook: {
          url: HOOK_URL,
          headers: { Authorization: BEARER_TEMPLATE, 'X-Trace_Id': LOWER_CASE_TEMPLATE },
          allowedEnvVars: ['HOOK_TOKEN', 'lower_case', '_PRIVATE'],
        },
      },
    },
    {
      name: 'the smallest timeout',
      hook: { ...notification, webhook: { url: HOOK_URL, timeout: 0.001 } },
    },
    {
      name: 'the largest timeout',
      hook: { ...notification, webhook: { url: HOOK_URL, timeout: 2_147_483.647 } },
    },
  ];

  it.each(validCases)('accepts $name', ({ hook: init }) => {
    expect(() => validateHooks([hook(init)])).not.toThrow();
  });

  it('accepts valid hooks of every kind in one batch', () => {
    expect(() => validateHooks(validCases.map((c) => hook(c.hook)))).not.toThrow();
  });
});

describe('validateHook', () => {
  it('names fields under the given path', () => {
    const error = invalidArgument(() =>
      validateHook(hook({ ...notification, webhook: { url: '' } })),
    );
    expect(error.field).toBe('hook.webhook.url');
  });
});

describe('validateStoredHook', () => {
  it.each(invalidCases)(
    'refuses $name in a stored hook, as registration does',
    ({ hook: init, field, reason, message }) => {
      const error = invalidArgument(() => validateStoredHook(hook(init), 'hooks[0]'));
      expect({ field: error.field, reason: error.reason, message: error.message }).toEqual({
        field,
        reason,
        message,
      });
    },
  );

  it('refuses a matcher that cannot run on the linear-time engine', () => {
    const error = invalidArgument(() =>
      validateStoredHook(hook({ ...control, matcher: '(?=fs)' }), 'hooks[0]'),
    );
    expect([error.field, error.reason]).toEqual(['hooks[0].matcher', REASON.MATCHER_NOT_LINEAR]);
  });

  it('applies no size limit and no operator policy, which registration applies', () => {
    const longId = 'h'.repeat(300);
    const headers = Object.fromEntries(
      Array.from({ length: 65 }, (_, i) => [`x-h${i}`, BEARER_TEMPLATE]),
    );
    const stored = [
      { ...notification, id: longId },
      { ...notification, webhook: { url: `${HOOK_URL}?pad=${'p'.repeat(9_000)}` } },
      { ...notification, webhook: { url: HOOK_URL, headers, allowedEnvVars: ['HOOK_TOKEN'] } },
      control,
      {
        ...notification,
        webhook: {
          url: HOOK_URL,
          headers: { authorization: BEARER_TEMPLATE },
          allowedEnvVars: ['HOOK_TOKEN'],
        },
      },
    ].map(hook);
    const policy = {
      callerEnvAllowlist: new Set<string>(),
      limits: { maxMatcherLength: 3 },
    };
    // Each is refused at registration, by a limit or by the variable allowlist.
    expect(
      stored.map((h) => invalidArgument(() => validateHook(h, 'hook', policy)).reason),
    ).toEqual([
      REASON.HOOK_ID_TOO_LONG,
      REASON.WEBHOOK_URL_TOO_LONG,
      REASON.TOO_MANY_HEADERS,
      REASON.MATCHER_TOO_LONG,
      REASON.ENV_VAR_NOT_ALLOWED,
    ]);
    for (const [i, h] of stored.entries()) {
      expect(() => validateStoredHook(h, `hooks[${i}]`)).not.toThrow();
    }
  });
});

describe('validateOperationId', () => {
  it('refuses an empty operation id', () => {
    const error = invalidArgument(() => validateOperationId(''));
    expect(error).toMatchObject({
      field: 'operationId',
      reason: REASON.OPERATION_ID_REQUIRED,
      message: 'operationId is required',
    });
  });

  it('names the given field', () => {
    expect(invalidArgument(() => validateOperationId('', 'parentOperationId')).field).toBe(
      'parentOperationId',
    );
  });

  it('accepts a non-empty operation id', () => {
    expect(() => validateOperationId('op_1')).not.toThrow();
  });

  it('refuses U+0000 anywhere in an identifier, which the PostgreSQL store cannot hold', () => {
    for (const id of ['\0', 'op\0', '\0op', 'o\0p']) {
      expect(invalidArgument(() => validateOperationId(id, 'operationChain[1]'))).toMatchObject({
        field: 'operationChain[1]',
        reason: REASON.ID_INVALID_CHARACTER,
        message: 'An operation id cannot contain U+0000',
      });
    }
    expect(invalidArgument(() => checkToolCallId('call\0', 'toolCallId'))).toMatchObject({
      field: 'toolCallId',
      reason: REASON.ID_INVALID_CHARACTER,
    });
    expect(
      invalidArgument(() =>
        validateHook(create(HookSchema, { ...notification, id: 'h\0' }), 'hooks[0]'),
      ),
    ).toMatchObject({ field: 'hooks[0].id', reason: REASON.ID_INVALID_CHARACTER });
  });
});

describe('isControlHook', () => {
  it('is true only for a webhook with toolCall response handling', () => {
    expect(isControlHook(hook(control))).toBe(true);
    expect(isControlHook(hook(notification))).toBe(false);
    expect(isControlHook(hook({ id: 'local', type: HookType.AFTER_STEP, handler: true }))).toBe(
      false,
    );
  });
});

describe('modifying hooks (point)', () => {
  const modifying = (init: Partial<HookInit>): HookInit =>
    ({
      id: 'shape',
      point: ModifyPoint.TRANSFORM_CONTEXT,
      webhook: { url: HOOK_URL },
      ...init,
    }) as HookInit;

  it('accepts a hook at each of the twelve points, with a plugin name, webhook or handler', () => {
    const points = ModifyPointSchema.values.map((v) => v.number).filter((n) => n !== 0);
    expect(points).toHaveLength(12);
    for (const point of points) {
      validateHook(hook(modifying({ point, plugin: 'redactor' })), 'hooks[0]');
      validateHook(hook(modifying({ point, webhook: undefined, handler: true })), 'hooks[0]');
    }
    validateHook(
      hook(modifying({ point: ModifyPoint.BEFORE_TOOL_CALL, matcher: '^search$' })),
      'hooks[0]',
    );
    validateHook(
      hook(
        modifying({
          point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
          webhook: { url: HOOK_URL, onError: OnError.BLOCK },
        }),
      ),
      'hooks[0]',
    );
    validateHook(
      hook(
        modifying({
          point: ModifyPoint.AFTER_PROVIDER_RESPONSE,
          webhook: { url: HOOK_URL, delivery: Delivery.QSTASH },
        }),
      ),
      'hooks[0]',
    );
  });

  const cases: InvalidCase[] = [
    {
      name: 'both type and point',
      hook: modifying({ type: HookType.AFTER_STEP }),
      field: 'hooks[0].point',
      reason: REASON.HOOK_KIND_CONFLICT,
      message:
        'A hook runs either on a lifecycle event (type) or at a modifying point (point), not both',
    },
    {
      name: 'a point this sidecar does not know',
      hook: modifying({ point: 99 as ModifyPoint }),
      field: 'hooks[0].point',
      reason: REASON.INVALID_ENUM_VALUE,
      message: 'Unknown modify point value 99',
    },
    {
      name: 'a matcher off the tool points',
      hook: modifying({ matcher: 'x' }),
      field: 'hooks[0].matcher',
      reason: REASON.MATCHER_NOT_ALLOWED,
      message: 'Matchers are only supported for tool events',
    },
    {
      name: 'a response handling',
      hook: modifying({ webhook: { url: HOOK_URL, responseHandling: ResponseHandling.IGNORE } }),
      field: 'hooks[0].webhook.responseHandling',
      reason: REASON.MODIFY_WEBHOOK_OPTION_NOT_ALLOWED,
      message: "A modifying hook's webhook cannot set responseHandling, eventFields or body",
    },
    {
      name: 'an event projection',
      hook: modifying({ webhook: { url: HOOK_URL, eventFields: { names: [] } } }),
      field: 'hooks[0].webhook.eventFields',
      reason: REASON.MODIFY_WEBHOOK_OPTION_NOT_ALLOWED,
      message: "A modifying hook's webhook cannot set responseHandling",
    },
    {
      name: 'a body',
      hook: modifying({ webhook: { url: HOOK_URL, body: {} } }),
      field: 'hooks[0].webhook.body',
      reason: REASON.MODIFY_WEBHOOK_OPTION_NOT_ALLOWED,
      message: "A modifying hook's webhook cannot set responseHandling",
    },
    {
      name: 'QStash on a point that returns a result',
      hook: modifying({ webhook: { url: HOOK_URL, delivery: Delivery.QSTASH } }),
      field: 'hooks[0].webhook.delivery',
      reason: REASON.MODIFY_DELIVERY_NOT_ALLOWED,
      message: 'QStash cannot return a result',
    },
    {
      name: 'onError: block on the observe-only point',
      hook: modifying({
        point: ModifyPoint.AFTER_PROVIDER_RESPONSE,
        webhook: { url: HOOK_URL, onError: OnError.BLOCK },
      }),
      field: 'hooks[0].webhook.onError',
      reason: REASON.BLOCK_REQUIRES_RESULT,
      message: 'onError: block needs a result to withhold',
    },
    {
      name: 'a plugin name over 256 bytes',
      hook: modifying({ plugin: 'é'.repeat(129) }),
      field: 'hooks[0].plugin',
      reason: REASON.PLUGIN_NAME_TOO_LONG,
      message: 'A plugin name can be at most 256 bytes (UTF-8)',
    },
  ];
  for (const c of cases) {
    it(`refuses ${c.name}`, () => {
      const e = invalidArgument(() => validateHook(hook(c.hook), 'hooks[0]'));
      expect(e.field).toBe(c.field);
      expect(e.reason).toBe(c.reason);
      expect(e.message).toContain(c.message);
    });
  }

  it('checks a stored modifying hook by the same schema rules, without the size limits', () => {
    validateStoredHook(hook(modifying({ plugin: 'é'.repeat(200) })), 'hooks[0]');
    const e = invalidArgument(() =>
      validateStoredHook(hook(modifying({ type: HookType.AFTER_STEP })), 'hooks[0]'),
    );
    expect(e.reason).toBe(REASON.HOOK_KIND_CONFLICT);
  });
});
