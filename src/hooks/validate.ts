/**
 * @module Validation of caller hooks, as `RegisterHooks` takes them
 * ({@link validateHooks}) and, with the schema rules only, as they are read
 * back from the store ({@link validateStoredHook}). The rules and messages are those of the
 * reference system's registration schema (upstream contract §1.7, §4.1), so a
 * hook the reference system refuses is refused here with the same message.
 * Each failure is an {@link InvalidArgumentError} naming the offending field
 * by its JSON (camelCase) path, such as `hooks[2].webhook.url`, with a stable
 * reason from {@link REASON}.
 *
 * On top of the reference rules, agenthooks applies the operator's policy
 * ({@link ValidationOptions}): which variables `allowedEnvVars` may name,
 * which destinations a webhook URL may have, and size limits on matchers and
 * headers. Matchers must also run on the linear-time engine.
 *
 * The webhook's own rules (URL, destination, timeout, headers, templates,
 * `allowedEnvVars` names, fetch delivery of controls) live in
 * `delivery/webhook-rules.ts`, which the sender applies again at send time.
 */
import type { DescEnum } from '@bufbuild/protobuf';
import { HookType, HookTypeSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  DeliverySchema,
  FallbackSchema,
  type Hook,
  ModifyPoint,
  ModifyPointSchema,
  OnError,
  OnErrorSchema,
  ResponseHandling,
  ResponseHandlingSchema,
  type Webhook,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import type { DestinationPolicy } from '../delivery/destination.js';
import { checkSigningRegistration } from '../delivery/signing.js';
import {
  checkControlDelivery,
  checkWebhook,
  DEFAULT_WEBHOOK_LIMITS,
  WEBHOOK_RULE_REASON,
  type WebhookLimits,
  webhookRuleError,
} from '../delivery/webhook-rules.js';
import { InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import { checkMatcher, MATCHER_REASON } from './matcher.js';

/**
 * `ErrorInfo.reason` of every validation failure. Reasons are stable; clients
 * match on them, not on the message.
 *
 * @example
 * if (hasReason(e, REASON.FORBIDDEN_HEADER)) { ... }
 */
export const REASON = {
  /** `id` is empty. */
  HOOK_ID_REQUIRED: 'HOOK_ID_REQUIRED',
  /** `id` starts with the prefix reserved for environment hooks. */
  HOOK_ID_RESERVED: 'HOOK_ID_RESERVED',
  /** An identifier contains U+0000 (see {@link checkIdentifier}). */
  ID_INVALID_CHARACTER: 'ID_INVALID_CHARACTER',
  /** `type` is unspecified or not a known hook type. */
  HOOK_TYPE_REQUIRED: 'HOOK_TYPE_REQUIRED',
  /** The hook has neither a handler nor a webhook. */
  HOOK_TARGET_REQUIRED: 'HOOK_TARGET_REQUIRED',
  /** A matcher is set on a hook type other than the three tool events. */
  MATCHER_NOT_ALLOWED: 'MATCHER_NOT_ALLOWED',
  /** The matcher is longer than the limit (default 1,024 characters). */
  MATCHER_TOO_LONG: 'MATCHER_TOO_LONG',
  /** The matcher does not compile, or needs backtracking; see `matcher.ts`. */
  ...MATCHER_REASON,
  /** The rules of the webhook itself; see `delivery/webhook-rules.ts`. */
  ...WEBHOOK_RULE_REASON,
  /** An `allowedEnvVars` entry is not in the operator's `--caller-env-allowlist`. */
  ENV_VAR_NOT_ALLOWED: 'ENV_VAR_NOT_ALLOWED',
  /** The operation would have more hooks than `--max-hooks-per-operation`. */
  TOO_MANY_HOOKS: 'TOO_MANY_HOOKS',
  /** A control hook sets `eventFields` or `body`. */
  CONTROL_PAYLOAD_OVERRIDE: 'CONTROL_PAYLOAD_OVERRIDE',
  /** A control hook is on a type other than `beforeToolCall` or `afterToolCall`. */
  CONTROL_TYPE_NOT_ALLOWED: 'CONTROL_TYPE_NOT_ALLOWED',
  /** A control hook also has a handler. */
  CONTROL_HANDLER_NOT_ALLOWED: 'CONTROL_HANDLER_NOT_ALLOWED',
  /** `onError: block` is set on a hook that is not a control. */
  BLOCK_REQUIRES_CONTROL: 'BLOCK_REQUIRES_CONTROL',
  /** A webhook enum field holds a number the contract does not define. */
  INVALID_ENUM_VALUE: 'INVALID_ENUM_VALUE',
  /** `operationId` is empty. */
  OPERATION_ID_REQUIRED: 'OPERATION_ID_REQUIRED',
  /** An operation id is longer than {@link MAX_OPERATION_ID_BYTES} (UTF-8). */
  OPERATION_ID_TOO_LONG: 'OPERATION_ID_TOO_LONG',
  /** A hook `id` is longer than {@link MAX_HOOK_ID_BYTES} (UTF-8). */
  HOOK_ID_TOO_LONG: 'HOOK_ID_TOO_LONG',
  /** A tool call id is longer than {@link MAX_TOOL_CALL_ID_BYTES} (UTF-8). */
  TOOL_CALL_ID_TOO_LONG: 'TOOL_CALL_ID_TOO_LONG',
  /** A `DispatchStream` event id is longer than {@link MAX_EVENT_ID_BYTES} (UTF-8). */
  EVENT_ID_TOO_LONG: 'EVENT_ID_TOO_LONG',
  /** A hook sets both `type` and `point`. */
  HOOK_KIND_CONFLICT: 'HOOK_KIND_CONFLICT',
  /** A modifying hook's webhook sets `responseHandling`, `eventFields` or `body`. */
  MODIFY_WEBHOOK_OPTION_NOT_ALLOWED: 'MODIFY_WEBHOOK_OPTION_NOT_ALLOWED',
  /** A modifying hook's webhook uses QStash on a point that returns a result. */
  MODIFY_DELIVERY_NOT_ALLOWED: 'MODIFY_DELIVERY_NOT_ALLOWED',
  /** `onError: block` on the observe-only `afterProviderResponse` point. */
  BLOCK_REQUIRES_RESULT: 'BLOCK_REQUIRES_RESULT',
  /** A hook's `plugin` is longer than {@link MAX_PLUGIN_NAME_BYTES} (UTF-8). */
  PLUGIN_NAME_TOO_LONG: 'PLUGIN_NAME_TOO_LONG',
} as const;

/** Longest operation id, in UTF-8 bytes, wherever one comes in (documented in the proto). */
export const MAX_OPERATION_ID_BYTES = 256;
/** Longest hook id, in UTF-8 bytes (documented in the proto). */
export const MAX_HOOK_ID_BYTES = 256;
/** Longest tool call id, in UTF-8 bytes (documented in the proto). */
export const MAX_TOOL_CALL_ID_BYTES = 256;
/** Longest `DispatchStream` event id, in UTF-8 bytes (documented in the proto). */
export const MAX_EVENT_ID_BYTES = 256;
/** Longest plugin name, in UTF-8 bytes (documented in the proto). */
export const MAX_PLUGIN_NAME_BYTES = 256;

/** One of the {@link REASON} values. */
export type ValidationReason = (typeof REASON)[keyof typeof REASON];

/** Messages; the upstream wording where the reference system has one. */
const MESSAGE = {
  HOOK_ID_REQUIRED: 'Hook id is required',
  HOOK_ID_RESERVED: 'Hook ids starting with server-env-webhook: are reserved for environment hooks',
  HOOK_TYPE_REQUIRED: 'Hook type is required',
  HOOK_TARGET_REQUIRED: 'A hook requires a handler or webhook',
  MATCHER_NOT_ALLOWED: 'Matchers are only supported for tool events',
  HOOK_KIND_CONFLICT:
    'A hook runs either on a lifecycle event (type) or at a modifying point (point), not both',
  MODIFY_WEBHOOK_OPTION_NOT_ALLOWED:
    "A modifying hook's webhook cannot set responseHandling, eventFields or body: its payload is the point's context and its answer is always read",
  MODIFY_DELIVERY_NOT_ALLOWED:
    'QStash cannot return a result: a modifying hook uses fetch, except on afterProviderResponse',
  BLOCK_REQUIRES_RESULT:
    'onError: block needs a result to withhold; afterProviderResponse only observes',
  ENV_VAR_NOT_ALLOWED:
    'allowedEnvVars may only name variables the operator allows (--caller-env-allowlist)',
  CONTROL_PAYLOAD_OVERRIDE: 'Control hooks cannot filter or override the event payload',
  CONTROL_TYPE_NOT_ALLOWED: 'toolCall response handling requires beforeToolCall or afterToolCall',
  CONTROL_HANDLER_NOT_ALLOWED: 'Control hooks cannot have a handler',
  BLOCK_REQUIRES_CONTROL: 'onError:block requires toolCall response handling',
  OPERATION_ID_REQUIRED: 'operationId is required',
} as const;

/**
 * Prefix of the ids of environment hooks (`AGENT_HOOK_WEBHOOK_*`). A caller
 * cannot use or replace one: `RegisterHooks` strips caller hooks with such an
 * id from its batch before validating the rest, as the reference system's
 * `register()` does (`HookRegistry.register`). Anywhere else (a stored row, a
 * plugin's hook, {@link validateHook}) such an id is refused.
 */
export const RESERVED_HOOK_ID_PREFIX = 'server-env-webhook:';

/** Whether `id` is an environment hook's (see {@link RESERVED_HOOK_ID_PREFIX}). */
export function isReservedHookId(id: string): boolean {
  return id.startsWith(RESERVED_HOOK_ID_PREFIX);
}

/** Size limits on one caller hook, beyond the reference system's rules. */
export interface HookLimits extends WebhookLimits {
  /** Longest matcher, in UTF-16 code units (JavaScript string length). */
  readonly maxMatcherLength: number;
}

/** Default {@link HookLimits}: 1,024-character matchers, 8 KiB URLs, 64 headers of at most 8 KiB each. */
export const DEFAULT_HOOK_LIMITS: HookLimits = Object.freeze({
  maxMatcherLength: 1_024,
  ...DEFAULT_WEBHOOK_LIMITS,
});

/**
 * The operator's policy for caller hooks, applied on top of the reference
 * rules. Environment hooks are the operator's own and are not checked
 * against it.
 */
export interface ValidationOptions {
  /**
   * Variables a caller's `allowedEnvVars` may name (`--caller-env-allowlist`).
   * Absent: any name (the reference behaviour); the registry passes an empty
   * set by default, so that no variable is allowed.
   */
  readonly callerEnvAllowlist?: ReadonlySet<string>;
  /**
   * Checked against the host of an absolute webhook URL: a denied IP literal
   * or host name is refused up front. Absent: not checked here (the sender
   * still checks every connection).
   */
  readonly destinations?: DestinationPolicy;
  /** Size limits; a missing field takes its {@link DEFAULT_HOOK_LIMITS} value. */
  readonly limits?: Partial<HookLimits>;
  /**
   * Reads the effective environment that declares the signing secrets
   * (`delivery/signing.ts`); a webhook's `signingSecret` must be declared
   * there and bound to its origin. Absent: not checked here (delivery still
   * checks it, and the registry passes an empty environment by default).
   */
  readonly signingEnv?: () => Readonly<Record<string, string | undefined>>;
}

/** Hook types that take a matcher (upstream `agentHook.ts`). */
const MATCHER_TYPES: ReadonlySet<HookType> = new Set([
  HookType.BEFORE_TOOL_CALL,
  HookType.AFTER_TOOL_CALL,
  HookType.ON_TOOL_CALL_ERROR,
]);

/** Hook types that can be controls (`toolCall` response handling). */
export const CONTROL_HOOK_TYPES: ReadonlySet<HookType> = new Set([
  HookType.BEFORE_TOOL_CALL,
  HookType.AFTER_TOOL_CALL,
]);

/** Returns the numbers an enum defines, its zero value included. */
function knownNumbers(desc: DescEnum): ReadonlySet<number> {
  return new Set(desc.values.map((v) => v.number));
}

/** Modifying points whose matcher tests the tool's name (`toolCall.name`). */
const MATCHER_POINTS: ReadonlySet<ModifyPoint> = new Set([
  ModifyPoint.BEFORE_TOOL_CALL,
  ModifyPoint.AFTER_TOOL_CALL,
]);

const KNOWN_MODIFY_POINTS = knownNumbers(ModifyPointSchema);

const KNOWN_HOOK_TYPES = knownNumbers(HookTypeSchema);

/** Webhook enum fields checked for undefined numbers, in check order. */
const WEBHOOK_ENUMS = [
  { field: 'delivery', known: knownNumbers(DeliverySchema) },
  { field: 'fallback', known: knownNumbers(FallbackSchema) },
  { field: 'responseHandling', known: knownNumbers(ResponseHandlingSchema) },
  { field: 'onError', known: knownNumbers(OnErrorSchema) },
] as const satisfies readonly { field: keyof Webhook; known: ReadonlySet<number> }[];

/**
 * Returns true when the hook is a control: a webhook with `toolCall` response
 * handling, whose response may decide the tool call.
 *
 * @example
 * isControlHook(hook) // true for { webhook: { responseHandling: TOOL_CALL, ... } }
 */
export function isControlHook(hook: Hook): boolean {
  return hook.webhook?.responseHandling === ResponseHandling.TOOL_CALL;
}

/**
 * Checks an operation id.
 *
 * @throws InvalidArgumentError with reason `OPERATION_ID_REQUIRED` when `id` is empty.
 * @example
 * validateOperationId(request.operationId);
 * validateOperationId(request.parentOperationId, 'parentOperationId');
 */
export function validateOperationId(id: string, field = 'operationId'): void {
  if (id === '') {
    throw new InvalidArgumentError(
      field,
      REASON.OPERATION_ID_REQUIRED,
      MESSAGE.OPERATION_ID_REQUIRED,
    );
  }
  checkIdentifier(
    id,
    field,
    REASON.OPERATION_ID_TOO_LONG,
    MAX_OPERATION_ID_BYTES,
    'An operation id',
  );
}

/**
 * Checks an identifier: at most `max` bytes in UTF-8, and no U+0000 (a
 * PostgreSQL `text` column cannot hold one, so the shared store would fail
 * the write; both stores refuse it, the same way). An empty one passes;
 * whether it may be empty is the caller's rule.
 *
 * @param what The identifier as the message names it, such as `A hook id`.
 * @throws InvalidArgumentError with `reason` when `id` is longer, or
 *   `ID_INVALID_CHARACTER` when it holds U+0000.
 * @example
 * checkIdentifier(parentId, 'parentOperationId', REASON.OPERATION_ID_TOO_LONG,
 *   MAX_OPERATION_ID_BYTES, 'An operation id');
 */
export function checkIdentifier(
  id: string,
  field: string,
  reason: ValidationReason,
  max: number,
  what: string,
): void {
  if (id.includes('\0')) {
    throw new InvalidArgumentError(
      field,
      REASON.ID_INVALID_CHARACTER,
      `${what} cannot contain U+0000`,
    );
  }
  checkIdentifierLength(id, field, reason, max, what);
}

/**
 * The length half of {@link checkIdentifier}: at most `max` bytes in UTF-8.
 *
 * @throws InvalidArgumentError with `reason` when `id` is longer.
 * @example
 * checkIdentifierLength(eventId, 'eventId', REASON.EVENT_ID_TOO_LONG, MAX_EVENT_ID_BYTES, 'An event id');
 */
export function checkIdentifierLength(
  id: string,
  field: string,
  reason: ValidationReason,
  max: number,
  what: string,
): void {
  // A UTF-8 byte is at least one UTF-16 unit, so a short string needs no count.
  if (id.length * 3 <= max) return;
  if (Buffer.byteLength(id, 'utf8') > max) {
    throw new InvalidArgumentError(field, reason, `${what} can be at most ${max} bytes (UTF-8)`);
  }
}

/**
 * Checks a whole batch of hooks before any of it is used, and throws for the
 * first invalid hook. Hooks are checked in order; see {@link validateHook}
 * for the rules.
 *
 * @param path JSON path of the list in the request, used in `field`.
 * @param options The operator's policy; see {@link ValidationOptions}.
 * @throws InvalidArgumentError naming the offending field, such as `hooks[2].webhook.url`.
 * @example
 * validateHooks(request.hooks); // throws for hooks[2] if only that one is invalid
 * validateHooks(request.hooks, 'hooks', { callerEnvAllowlist: new Set(['HOOK_TOKEN']) });
 */
export function validateHooks(
  hooks: readonly Hook[],
  path = 'hooks',
  options: ValidationOptions = {},
): void {
  for (const [i, hook] of hooks.entries()) validateHook(hook, `${path}[${i}]`, options);
}

/**
 * Checks one hook, with the rules in this order: `id` (set, at most
 * {@link MAX_HOOK_ID_BYTES}, not reserved), `type`, a handler or
 * webhook, `matcher` (tool events only, length, syntax, linear-time),
 * the webhook's own rules (`url` and its size, its destination, `timeout`, `headers`:
 * count, then each name, value, templates and size, `allowedEnvVars` names;
 * see `checkWebhook` in `delivery/webhook-rules.ts`), the operator's
 * variable allowlist, the control rules (`toolCall` response handling),
 * `onError: block`, and finally undefined enum numbers.
 *
 * @param path JSON path of the hook in the request, used in `field`.
 * @param options The operator's policy; see {@link ValidationOptions}.
 * @throws InvalidArgumentError naming the first offending field.
 * @example
 * validateHook(request.hooks[0], 'hooks[0]'); // field is e.g. 'hooks[0].webhook.url'
 */
export function validateHook(hook: Hook, path = 'hook', options: ValidationOptions = {}): void {
  checkHook(hook, path, options, extend(DEFAULT_HOOK_LIMITS, { ...options.limits }));
}

/**
 * Checks a hook read back from the store against the schema rules of
 * {@link validateHook}, the rules of the hook's own fields that a hook must
 * follow to run as the contract means it: `id` set and not reserved, `type`,
 * a handler or webhook, `matcher` (tool events only, syntax, linear-time and
 * within the engine's cost, as the decision compiles it), the webhook's URL
 * form, `timeout` range, `headers` (names, values, templates),
 * `allowedEnvVars` names, the control rules, `onError: block`, and enum
 * numbers. Not checked: the operator's policy (destinations, which delivery
 * checks at send time; the variable allowlist) and the size limits (id,
 * matcher, URL and header sizes, header count), so that a hook stored under
 * an earlier policy or larger limits still runs.
 *
 * @param path JSON path of the hook, used in `field`, such as `hooks[2]`.
 * @throws InvalidArgumentError naming the first offending field.
 * @example
 * validateStoredHook(stored.hooks[2], 'hooks[2]'); // field is e.g. 'hooks[2].webhook.url'
 */
export function validateStoredHook(hook: Hook, path = 'hook'): void {
  checkHook(hook, path, {}, undefined);
}

/**
 * The rules of {@link validateHook}; without `limits`, only the schema rules
 * (see {@link validateStoredHook}), as `options` is then empty.
 */
function checkHook(
  hook: Hook,
  path: string,
  options: ValidationOptions,
  limits: HookLimits | undefined,
): void {
  if (hook.id === '') {
    throw new InvalidArgumentError(`${path}.id`, REASON.HOOK_ID_REQUIRED, MESSAGE.HOOK_ID_REQUIRED);
  }
  if (limits !== undefined) {
    checkIdentifier(hook.id, `${path}.id`, REASON.HOOK_ID_TOO_LONG, MAX_HOOK_ID_BYTES, 'A hook id');
  }
  if (isReservedHookId(hook.id)) {
    throw new InvalidArgumentError(`${path}.id`, REASON.HOOK_ID_RESERVED, MESSAGE.HOOK_ID_RESERVED);
  }
  const modifying = hook.point !== ModifyPoint.UNSPECIFIED;
  if (modifying) {
    checkPoint(hook, path);
  } else if (hook.type === HookType.UNSPECIFIED) {
    throw new InvalidArgumentError(
      `${path}.type`,
      REASON.HOOK_TYPE_REQUIRED,
      MESSAGE.HOOK_TYPE_REQUIRED,
    );
  } else if (!KNOWN_HOOK_TYPES.has(hook.type)) {
    // A number this sidecar does not know (a newer client, or a typo): say so, not "required".
    throw new InvalidArgumentError(
      `${path}.type`,
      REASON.INVALID_ENUM_VALUE,
      `Unknown hook type value ${hook.type}`,
    );
  }
  if (limits !== undefined) {
    checkIdentifier(
      hook.plugin,
      `${path}.plugin`,
      REASON.PLUGIN_NAME_TOO_LONG,
      MAX_PLUGIN_NAME_BYTES,
      'A plugin name',
    );
  }
  if (!hook.handler && hook.webhook === undefined) {
    throw new InvalidArgumentError(path, REASON.HOOK_TARGET_REQUIRED, MESSAGE.HOOK_TARGET_REQUIRED);
  }
  if (hook.matcher !== undefined) {
    // Even '' and '*' are refused off tool events, as upstream does.
    if (modifying ? !MATCHER_POINTS.has(hook.point) : !MATCHER_TYPES.has(hook.type)) {
      throw new InvalidArgumentError(
        `${path}.matcher`,
        REASON.MATCHER_NOT_ALLOWED,
        MESSAGE.MATCHER_NOT_ALLOWED,
      );
    }
    if (limits !== undefined && hook.matcher.length > limits.maxMatcherLength) {
      throw new InvalidArgumentError(
        `${path}.matcher`,
        REASON.MATCHER_TOO_LONG,
        `Hook matcher is longer than ${limits.maxMatcherLength} characters`,
      );
    }
    try {
      checkMatcher(hook.matcher);
    } catch (e: unknown) {
      if (!(e instanceof InvalidArgumentError)) throw e;
      // Same reason and message, with the field's full path.
      throw new InvalidArgumentError(`${path}.matcher`, e.reason, e.message, { cause: e.cause });
    }
  }
  if (hook.webhook !== undefined) validateWebhook(hook, hook.webhook, path, options, limits);
}

/** Checks the kind of a modifying hook: `point` alone, and a point this sidecar knows. */
function checkPoint(hook: Hook, path: string): void {
  if (hook.type !== HookType.UNSPECIFIED) {
    throw new InvalidArgumentError(
      `${path}.point`,
      REASON.HOOK_KIND_CONFLICT,
      MESSAGE.HOOK_KIND_CONFLICT,
    );
  }
  if (!KNOWN_MODIFY_POINTS.has(hook.point)) {
    throw new InvalidArgumentError(
      `${path}.point`,
      REASON.INVALID_ENUM_VALUE,
      `Unknown modify point value ${hook.point}`,
    );
  }
}

/**
 * The webhook rules of a modifying hook: its payload is the point's context
 * and its answer is always read, so no response handling, projection or body;
 * fetch unless the point only observes; `onError: block` only where there is
 * a result to withhold.
 */
function checkModifyingWebhook(hook: Hook, webhook: Webhook, path: string): void {
  const option =
    webhook.responseHandling !== ResponseHandling.UNSPECIFIED
      ? 'responseHandling'
      : webhook.eventFields !== undefined
        ? 'eventFields'
        : webhook.body !== undefined
          ? 'body'
          : undefined;
  if (option !== undefined) {
    throw new InvalidArgumentError(
      `${path}.${option}`,
      REASON.MODIFY_WEBHOOK_OPTION_NOT_ALLOWED,
      MESSAGE.MODIFY_WEBHOOK_OPTION_NOT_ALLOWED,
    );
  }
  const observes = hook.point === ModifyPoint.AFTER_PROVIDER_RESPONSE;
  if (webhook.delivery === Delivery.QSTASH && !observes) {
    throw new InvalidArgumentError(
      `${path}.delivery`,
      REASON.MODIFY_DELIVERY_NOT_ALLOWED,
      MESSAGE.MODIFY_DELIVERY_NOT_ALLOWED,
    );
  }
  if (webhook.onError === OnError.BLOCK && observes) {
    throw new InvalidArgumentError(
      `${path}.onError`,
      REASON.BLOCK_REQUIRES_RESULT,
      MESSAGE.BLOCK_REQUIRES_RESULT,
    );
  }
}

/** Checks the webhook part of `hook`; `hookPath` is the hook's JSON path. */
function validateWebhook(
  hook: Hook,
  webhook: Webhook,
  hookPath: string,
  options: ValidationOptions,
  limits: HookLimits | undefined,
): void {
  const path = `${hookPath}.webhook`;
  const violation = checkWebhook(webhook, { destinations: options.destinations, limits });
  if (violation !== undefined) throw webhookRuleError(violation, path);
  // A caller could otherwise get any body signed with another receiver's key.
  if (options.signingEnv !== undefined) {
    const unsigned = checkSigningRegistration(webhook, options.signingEnv());
    if (unsigned !== undefined) throw webhookRuleError(unsigned, path);
  }

  // The operator's allowlist comes after the reference rule, so a malformed
  // name is reported as such wherever it is in the list.
  const allowlist = options.callerEnvAllowlist;
  if (allowlist !== undefined) {
    webhook.allowedEnvVars.forEach((name, i) => {
      if (!allowlist.has(name)) {
        throw new InvalidArgumentError(
          `${path}.allowedEnvVars[${i}]`,
          REASON.ENV_VAR_NOT_ALLOWED,
          MESSAGE.ENV_VAR_NOT_ALLOWED,
        );
      }
    });
  }

  const control = webhook.responseHandling === ResponseHandling.TOOL_CALL;
  if (hook.point !== ModifyPoint.UNSPECIFIED) {
    checkModifyingWebhook(hook, webhook, path);
  } else if (control) {
    const fetchOnly = checkControlDelivery(webhook);
    if (fetchOnly !== undefined) throw webhookRuleError(fetchOnly, path);
    // Presence, not content: even an empty projection or body is refused.
    if (webhook.eventFields !== undefined || webhook.body !== undefined) {
      throw new InvalidArgumentError(
        `${path}.${webhook.eventFields !== undefined ? 'eventFields' : 'body'}`,
        REASON.CONTROL_PAYLOAD_OVERRIDE,
        MESSAGE.CONTROL_PAYLOAD_OVERRIDE,
      );
    }
    if (!CONTROL_HOOK_TYPES.has(hook.type)) {
      // The hook's type is at fault, not a webhook field.
      throw new InvalidArgumentError(
        `${hookPath}.type`,
        REASON.CONTROL_TYPE_NOT_ALLOWED,
        MESSAGE.CONTROL_TYPE_NOT_ALLOWED,
      );
    }
    if (hook.handler) {
      throw new InvalidArgumentError(
        `${hookPath}.handler`,
        REASON.CONTROL_HANDLER_NOT_ALLOWED,
        MESSAGE.CONTROL_HANDLER_NOT_ALLOWED,
      );
    }
  } else if (webhook.onError === OnError.BLOCK) {
    throw new InvalidArgumentError(
      `${path}.onError`,
      REASON.BLOCK_REQUIRES_CONTROL,
      MESSAGE.BLOCK_REQUIRES_CONTROL,
    );
  }

  for (const { field, known } of WEBHOOK_ENUMS) {
    const value = webhook[field];
    if (!known.has(value)) {
      throw new InvalidArgumentError(
        `${path}.${field}`,
        REASON.INVALID_ENUM_VALUE,
        `Unknown webhook ${field} value ${value}`,
      );
    }
  }
}
