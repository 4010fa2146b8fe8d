/**
 * @module Validation of caller hooks, as `RegisterHooks` takes them and as
 * they are restored from the store. The rules and messages are those of the
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
 */
import type { DescEnum } from '@bufbuild/protobuf';
import { HookType, HookTypeSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  DeliverySchema,
  FallbackSchema,
  type Hook,
  OnError,
  OnErrorSchema,
  ResponseHandling,
  ResponseHandlingSchema,
  type Webhook,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import type { DestinationPolicy } from '../delivery/destination.js';
import { InvalidArgumentError } from '../errors.js';
import { checkMatcher } from './matcher.js';

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
  /** `type` is unspecified or not a known hook type. */
  HOOK_TYPE_REQUIRED: 'HOOK_TYPE_REQUIRED',
  /** The hook has neither a handler nor a webhook. */
  HOOK_TARGET_REQUIRED: 'HOOK_TARGET_REQUIRED',
  /** A matcher is set on a hook type other than the three tool events. */
  MATCHER_NOT_ALLOWED: 'MATCHER_NOT_ALLOWED',
  /** The matcher does not compile as a JavaScript regular expression. */
  INVALID_MATCHER: 'INVALID_MATCHER',
  /** The matcher is valid JavaScript but needs backtracking (a backreference or lookaround). */
  MATCHER_NOT_LINEAR: 'MATCHER_NOT_LINEAR',
  /** The matcher is longer than the limit (default 1,024 characters). */
  MATCHER_TOO_LONG: 'MATCHER_TOO_LONG',
  /** The webhook URL is not HTTP(S) or an application-relative path, or has credentials. */
  INVALID_WEBHOOK_URL: 'INVALID_WEBHOOK_URL',
  /** The webhook URL's host is a denied address or name (unspecified, link-local, cloud metadata, `--webhook-deny`). */
  WEBHOOK_DESTINATION_DENIED: 'WEBHOOK_DESTINATION_DENIED',
  /** The webhook timeout is not in (0, 2147483.647] seconds. */
  INVALID_WEBHOOK_TIMEOUT: 'INVALID_WEBHOOK_TIMEOUT',
  /** A webhook header name is not an HTTP token. */
  INVALID_HEADER_NAME: 'INVALID_HEADER_NAME',
  /** A webhook header name is one agenthooks or the transport owns. */
  FORBIDDEN_HEADER: 'FORBIDDEN_HEADER',
  /** A webhook header value contains CR, LF or NUL. */
  INVALID_HEADER_VALUE: 'INVALID_HEADER_VALUE',
  /** The webhook has more headers than the limit (default 64). */
  TOO_MANY_HEADERS: 'TOO_MANY_HEADERS',
  /** A header's name and value together are larger than the limit (default 8 KiB, UTF-8). */
  HEADER_TOO_LARGE: 'HEADER_TOO_LARGE',
  /** An `allowedEnvVars` entry is not an environment variable name. */
  INVALID_ENV_VAR_NAME: 'INVALID_ENV_VAR_NAME',
  /** An `allowedEnvVars` entry is not in the operator's `--caller-env-allowlist`. */
  ENV_VAR_NOT_ALLOWED: 'ENV_VAR_NOT_ALLOWED',
  /** The operation would have more hooks than `--max-hooks-per-operation`. */
  TOO_MANY_HOOKS: 'TOO_MANY_HOOKS',
  /** A control hook uses QStash delivery. */
  CONTROL_REQUIRES_FETCH: 'CONTROL_REQUIRES_FETCH',
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
} as const;

/** One of the {@link REASON} values. */
export type ValidationReason = (typeof REASON)[keyof typeof REASON];

/** Messages; the upstream wording where the reference system has one. */
const MESSAGE = {
  HOOK_ID_REQUIRED: 'Hook id is required',
  HOOK_ID_RESERVED: 'Hook ids starting with server-env-webhook: are reserved for environment hooks',
  HOOK_TYPE_REQUIRED: 'Hook type is required',
  HOOK_TARGET_REQUIRED: 'A hook requires a handler or webhook',
  MATCHER_NOT_ALLOWED: 'Matchers are only supported for tool events',
  INVALID_MATCHER: 'Invalid hook matcher regular expression',
  INVALID_WEBHOOK_URL:
    'Webhook URL must be HTTP(S) or an application-relative path without credentials',
  INVALID_WEBHOOK_TIMEOUT: 'Webhook timeout must be a positive number of seconds up to 2147483.647',
  INVALID_HEADER_NAME: 'Invalid webhook header name',
  INVALID_HEADER_VALUE: 'Webhook header values cannot contain CR, LF or NUL',
  INVALID_ENV_VAR_NAME: 'Invalid allowedEnvVars entry',
  ENV_VAR_NOT_ALLOWED:
    'allowedEnvVars may only name variables the operator allows (--caller-env-allowlist)',
  WEBHOOK_DESTINATION_DENIED:
    'Webhook URL points at a denied destination (unspecified, link-local, cloud metadata or --webhook-deny)',
  CONTROL_REQUIRES_FETCH: 'toolCall response handling requires fetch delivery',
  CONTROL_PAYLOAD_OVERRIDE: 'Control hooks cannot filter or override the event payload',
  CONTROL_TYPE_NOT_ALLOWED: 'toolCall response handling requires beforeToolCall or afterToolCall',
  CONTROL_HANDLER_NOT_ALLOWED: 'Control hooks cannot have a handler',
  BLOCK_REQUIRES_CONTROL: 'onError:block requires toolCall response handling',
  OPERATION_ID_REQUIRED: 'operationId is required',
} as const;

/**
 * Prefix of the ids of environment hooks (`AGENT_HOOK_WEBHOOK_*`). Caller
 * hooks with such an id are refused; the reference system drops them silently.
 */
export const RESERVED_HOOK_ID_PREFIX = 'server-env-webhook:';

/** Largest webhook timeout in seconds: the largest `setTimeout` delay, 2^31 - 1 ms. */
const MAX_WEBHOOK_TIMEOUT_SECONDS = 2_147_483.647;

/** Size limits on one caller hook, beyond the reference system's rules. */
export interface HookLimits {
  /** Longest matcher, in UTF-16 code units (JavaScript string length). */
  readonly maxMatcherLength: number;
  /** Most headers one webhook may set. */
  readonly maxHeaders: number;
  /** Largest header, its name and value together, in UTF-8 bytes. */
  readonly maxHeaderBytes: number;
}

/** Default {@link HookLimits}: 1,024-character matchers, 64 headers of at most 8 KiB each. */
export const DEFAULT_HOOK_LIMITS: HookLimits = Object.freeze({
  maxMatcherLength: 1_024,
  maxHeaders: 64,
  maxHeaderBytes: 8_192,
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
}

/** Hook types that take a matcher (upstream `agentHook.ts`). */
const MATCHER_TYPES: ReadonlySet<HookType> = new Set([
  HookType.BEFORE_TOOL_CALL,
  HookType.AFTER_TOOL_CALL,
  HookType.ON_TOOL_CALL_ERROR,
]);

/** Hook types that can be controls. */
const CONTROL_TYPES: ReadonlySet<HookType> = new Set([
  HookType.BEFORE_TOOL_CALL,
  HookType.AFTER_TOOL_CALL,
]);

/** An HTTP field name is a `token` (RFC 9110 §5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Header names a webhook may not set, as the reference system refuses them at
 * send time (upstream contract §4.1): they belong to the HTTP transport, to
 * the browser-only `Sec-` space, or to QStash's own `Upstash-` options.
 */
const FORBIDDEN_HEADER_NAME =
  /^(?:host|content-length|connection|transfer-encoding|trailer|upgrade|proxy-.*|sec-.*|upstash-.*)$/i;

/** CR, LF and NUL would split or truncate a header line. */
const HEADER_VALUE_FORBIDDEN_CHARS = /[\r\n\0]/;

/** An environment variable name, as `allowedEnvVars` takes it (upstream `agentHook.ts`). */
const ENV_VAR_NAME = /^[A-Z_]\w*$/i;

/** Returns the numbers an enum defines, its zero value included. */
function knownNumbers(desc: DescEnum): ReadonlySet<number> {
  return new Set(desc.values.map((v) => v.number));
}

const KNOWN_HOOK_TYPES = knownNumbers(HookTypeSchema);

/** Webhook enum fields checked for undefined numbers, in check order. */
const WEBHOOK_ENUMS = [
  { field: 'delivery', known: knownNumbers(DeliverySchema) },
  { field: 'fallback', known: knownNumbers(FallbackSchema) },
  { field: 'responseHandling', known: knownNumbers(ResponseHandlingSchema) },
  { field: 'onError', known: knownNumbers(OnErrorSchema) },
] as const satisfies readonly { field: keyof Webhook; known: ReadonlySet<number> }[];

/**
 * Returns true when a webhook may not set a header of this name: one of
 * `host, content-length, connection, transfer-encoding, trailer, upgrade`, or
 * any `proxy-*`, `sec-*` or `upstash-*` name, in any case.
 *
 * @example
 * isForbiddenHeaderName('Upstash-Retries'); // true
 * isForbiddenHeaderName('Authorization'); // false
 */
export function isForbiddenHeaderName(name: string): boolean {
  return FORBIDDEN_HEADER_NAME.test(name);
}

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
 * Checks one hook, with the rules in this order: `id`, `type`, a handler or
 * webhook, `matcher` (tool events only, length, syntax, linear-time),
 * webhook `url` (then its destination), `timeout`, `headers` (count, then
 * each name, value and size), `allowedEnvVars` (every name, then the
 * allowlist), the control rules (`toolCall` response handling),
 * `onError: block`, and finally undefined enum numbers.
 *
 * @param path JSON path of the hook in the request, used in `field`.
 * @param options The operator's policy; see {@link ValidationOptions}.
 * @throws InvalidArgumentError naming the first offending field.
 * @example
 * validateHook(restoredHook, 'hook'); // field is e.g. 'hook.webhook.url'
 */
export function validateHook(hook: Hook, path = 'hook', options: ValidationOptions = {}): void {
  const limits = { ...DEFAULT_HOOK_LIMITS, ...options.limits };
  if (hook.id === '') {
    throw new InvalidArgumentError(`${path}.id`, REASON.HOOK_ID_REQUIRED, MESSAGE.HOOK_ID_REQUIRED);
  }
  if (hook.id.startsWith(RESERVED_HOOK_ID_PREFIX)) {
    throw new InvalidArgumentError(`${path}.id`, REASON.HOOK_ID_RESERVED, MESSAGE.HOOK_ID_RESERVED);
  }
  if (hook.type === HookType.UNSPECIFIED || !KNOWN_HOOK_TYPES.has(hook.type)) {
    throw new InvalidArgumentError(
      `${path}.type`,
      REASON.HOOK_TYPE_REQUIRED,
      MESSAGE.HOOK_TYPE_REQUIRED,
    );
  }
  if (!hook.handler && hook.webhook === undefined) {
    throw new InvalidArgumentError(path, REASON.HOOK_TARGET_REQUIRED, MESSAGE.HOOK_TARGET_REQUIRED);
  }
  if (hook.matcher !== undefined) {
    // Even '' and '*' are refused off tool events, as upstream does.
    if (!MATCHER_TYPES.has(hook.type)) {
      throw new InvalidArgumentError(
        `${path}.matcher`,
        REASON.MATCHER_NOT_ALLOWED,
        MESSAGE.MATCHER_NOT_ALLOWED,
      );
    }
    if (hook.matcher.length > limits.maxMatcherLength) {
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

/** Checks the webhook part of `hook`; `hookPath` is the hook's JSON path. */
function validateWebhook(
  hook: Hook,
  webhook: Webhook,
  hookPath: string,
  options: ValidationOptions,
  limits: HookLimits,
): void {
  const path = `${hookPath}.webhook`;
  if (!isValidWebhookUrl(webhook.url)) {
    throw new InvalidArgumentError(
      `${path}.url`,
      REASON.INVALID_WEBHOOK_URL,
      MESSAGE.INVALID_WEBHOOK_URL,
    );
  }
  // An application-relative URL's host is only known at send time, where the sender checks it.
  if (options.destinations !== undefined && !webhook.url.startsWith('/')) {
    const host = new URL(webhook.url).hostname;
    if (!options.destinations.check(host).allowed) {
      throw new InvalidArgumentError(
        `${path}.url`,
        REASON.WEBHOOK_DESTINATION_DENIED,
        MESSAGE.WEBHOOK_DESTINATION_DENIED,
      );
    }
  }

  const timeout = webhook.timeout;
  if (
    timeout !== undefined &&
    !(Number.isFinite(timeout) && timeout > 0 && timeout <= MAX_WEBHOOK_TIMEOUT_SECONDS)
  ) {
    throw new InvalidArgumentError(
      `${path}.timeout`,
      REASON.INVALID_WEBHOOK_TIMEOUT,
      MESSAGE.INVALID_WEBHOOK_TIMEOUT,
    );
  }

  const headers = Object.entries(webhook.headers);
  if (headers.length > limits.maxHeaders) {
    throw new InvalidArgumentError(
      `${path}.headers`,
      REASON.TOO_MANY_HEADERS,
      `A webhook can set at most ${limits.maxHeaders} headers`,
    );
  }
  for (const [name, value] of headers) {
    const field = `${path}.headers[${JSON.stringify(name)}]`;
    if (!HEADER_NAME.test(name)) {
      throw new InvalidArgumentError(
        field,
        REASON.INVALID_HEADER_NAME,
        MESSAGE.INVALID_HEADER_NAME,
      );
    }
    if (isForbiddenHeaderName(name)) {
      throw new InvalidArgumentError(
        field,
        REASON.FORBIDDEN_HEADER,
        `Webhook header ${name} is not allowed`,
      );
    }
    // `${VAR}` templates stay: they resolve at send time (upstream contract §4.1).
    if (HEADER_VALUE_FORBIDDEN_CHARS.test(value)) {
      throw new InvalidArgumentError(
        field,
        REASON.INVALID_HEADER_VALUE,
        MESSAGE.INVALID_HEADER_VALUE,
      );
    }
    if (
      Buffer.byteLength(name, 'utf8') + Buffer.byteLength(value, 'utf8') >
      limits.maxHeaderBytes
    ) {
      throw new InvalidArgumentError(
        field,
        REASON.HEADER_TOO_LARGE,
        `A webhook header's name and value can be at most ${limits.maxHeaderBytes} bytes`,
      );
    }
  }

  webhook.allowedEnvVars.forEach((name, i) => {
    if (!ENV_VAR_NAME.test(name)) {
      throw new InvalidArgumentError(
        `${path}.allowedEnvVars[${i}]`,
        REASON.INVALID_ENV_VAR_NAME,
        MESSAGE.INVALID_ENV_VAR_NAME,
      );
    }
  });
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
  if (control) {
    if (webhook.delivery === Delivery.QSTASH) {
      throw new InvalidArgumentError(
        `${path}.delivery`,
        REASON.CONTROL_REQUIRES_FETCH,
        MESSAGE.CONTROL_REQUIRES_FETCH,
      );
    }
    // Presence, not content: even an empty projection or body is refused.
    if (webhook.eventFields !== undefined || webhook.body !== undefined) {
      throw new InvalidArgumentError(
        `${path}.${webhook.eventFields !== undefined ? 'eventFields' : 'body'}`,
        REASON.CONTROL_PAYLOAD_OVERRIDE,
        MESSAGE.CONTROL_PAYLOAD_OVERRIDE,
      );
    }
    if (!CONTROL_TYPES.has(hook.type)) {
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

/**
 * Returns true for a non-empty URL without backslashes that is either an
 * application-relative path (`/` but not `//`) or an absolute `http:`/`https:`
 * URL without username or password (upstream `agentHook.ts`). Environment
 * hooks use the same rule.
 */
export function isValidWebhookUrl(url: string): boolean {
  if (url === '' || url.includes('\\')) return false;
  if (url.startsWith('/')) return !url.startsWith('//');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (e: unknown) {
    // Only a TypeError ("Invalid URL") means the string does not parse.
    if (e instanceof TypeError) return false;
    throw e;
  }
  return (
    (parsed.protocol === 'http:' || parsed.protocol === 'https:') &&
    parsed.username === '' &&
    parsed.password === ''
  );
}
