/**
 * @module Environment hooks: the five `AGENT_HOOK_WEBHOOK_*` variables of the
 * sidecar's effective environment, parsed into one webhook hook per listed
 * event (upstream contract §2). The parse is pure and recomputed by the
 * caller whenever the environment changes; the hooks are never persisted.
 *
 * The checks, their order and their messages are the reference system's:
 * first every variable's own format (all failures reported together, as
 * field paths, never values), then the cross-variable rules. As there, all
 * five are checked whether or not `AGENT_HOOK_WEBHOOK_URL` is set: only an
 * unset URL turns the feature off, and only once the others are valid
 * (an empty URL is set, and invalid; `ON_ERROR=block` without `toolCall`
 * fails with or without a URL). A half-configured environment never means
 * "no hooks".
 */
import { create } from '@bufbuild/protobuf';
import type { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  type Hook,
  HookSchema,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { hookTypeFromLiteral, hookTypeLiteral } from '../delivery/event-json.js';
import { checkSigningRegistration, signingSecrets } from '../delivery/signing.js';
import { isValidWebhookUrl } from '../delivery/webhook-rules.js';
import {
  type AgentHooksError,
  INVALID_ENVIRONMENT,
  invalidEnvironment,
  VARIABLES_METADATA_KEY,
} from '../errors.js';
import { CONTROL_HOOK_TYPES, RESERVED_HOOK_ID_PREFIX } from './validate.js';

/**
 * Prefix of every environment hook id; the full id is
 * `server-env-webhook:<event>`, such as `server-env-webhook:beforeToolCall`.
 * Caller hooks may not use it (see `validate.ts`).
 */
export const ENV_HOOK_ID_PREFIX = RESERVED_HOOK_ID_PREFIX;

// The environment's error lives in `errors.ts`, so that delivery (signing secrets) builds it too.
export { INVALID_ENVIRONMENT, invalidEnvironment, VARIABLES_METADATA_KEY };

/**
 * The five environment variables, by role. `ENV_VARS.TOKEN` is also the one
 * variable the generated header template may read.
 *
 * @example env[ENV_VARS.URL] // the webhook URL, or undefined when the feature is off
 */
export const ENV_VARS = {
  /** Webhook URL; setting it turns environment hooks on (an empty value is set, and invalid). */
  URL: 'AGENT_HOOK_WEBHOOK_URL',
  /** Bearer token, required and non-blank when the URL is set. */
  TOKEN: 'AGENT_HOOK_WEBHOOK_TOKEN',
  /** Comma-separated hook type literals, required when the URL is set. */
  EVENTS: 'AGENT_HOOK_WEBHOOK_EVENTS',
  /** `ignore` (default) or `toolCall`. */
  RESPONSE_HANDLING: 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING',
  /** `continue` (default) or `block`; `block` requires `toolCall`. */
  ON_ERROR: 'AGENT_HOOK_WEBHOOK_ON_ERROR',
} as const;

/**
 * agenthooks' own variable beside the five: the name of the declared
 * signing secret that signs every environment hook (`delivery/signing.ts`),
 * held to the registration rule. Unset: the `DEFAULT` secret signs where it
 * is bound.
 */
export const ENV_SIGNING_SECRET_VAR = 'AGENT_HOOK_WEBHOOK_SIGNING_SECRET';

/**
 * Variables in the order the reference schema declares (and so reports)
 * them; a format failure lists its field paths in this order.
 */
const SCHEMA_ORDER = [
  ENV_VARS.EVENTS,
  ENV_VARS.ON_ERROR,
  ENV_VARS.RESPONSE_HANDLING,
  ENV_VARS.TOKEN,
  ENV_VARS.URL,
] as const;

/** Accepted `AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING` values; `toolResult` and `toolCallAndResult` were removed upstream. */
const RESPONSE_HANDLING_VALUES = ['ignore', 'toolCall'] as const;
type ResponseHandlingMode = (typeof RESPONSE_HANDLING_VALUES)[number];
const DEFAULT_RESPONSE_HANDLING: ResponseHandlingMode = 'ignore';

/** Accepted `AGENT_HOOK_WEBHOOK_ON_ERROR` values. */
const ON_ERROR_VALUES = ['continue', 'block'] as const;
type OnErrorMode = (typeof ON_ERROR_VALUES)[number];
const DEFAULT_ON_ERROR: OnErrorMode = 'continue';

/** The `Authorization` template; the token is resolved at send time, never stored here. */
const AUTHORIZATION_TEMPLATE = `Bearer \${${ENV_VARS.TOKEN}}`;

/** Upstream messages (`packages/env/src/agentHook.ts`). */
const MESSAGE = {
  INVALID_PREFIX: 'Invalid Agent Hook environment: ',
  TOKEN_REQUIRED: `${ENV_VARS.URL} requires non-empty ${ENV_VARS.TOKEN}`,
  EVENTS_REQUIRED: `${ENV_VARS.URL} requires non-empty ${ENV_VARS.EVENTS}`,
  BLOCK_REQUIRES_TOOL_CALL: `${ENV_VARS.ON_ERROR}=block requires ${ENV_VARS.RESPONSE_HANDLING}=toolCall`,
  TOOL_CALL_REQUIRES_EVENT: `${ENV_VARS.RESPONSE_HANDLING}=toolCall requires beforeToolCall or afterToolCall in ${ENV_VARS.EVENTS}`,
} as const;

/**
 * The environment hooks of one environment: the hooks, or the error every
 * hook resolution must fail with (never an empty list in its place).
 */
export type EnvironmentHooks =
  | { readonly ok: true; readonly hooks: readonly Hook[] }
  | { readonly ok: false; readonly error: AgentHooksError };

/**
 * Parses the `AGENT_HOOK_WEBHOOK_*` variables of `env` into environment
 * hooks, one per event of `AGENT_HOOK_WEBHOOK_EVENTS` in its order, with ids
 * `server-env-webhook:<event>`. Never throws: an invalid environment is an
 * `ok: false` result carrying an `INVALID_ENVIRONMENT` error
 * (`failed_precondition`) whose `metadata.variables` names the variables at
 * fault. Messages name variables (and, for events, list indexes), never values.
 *
 * @example
 * const r = environmentHooks({
 *   AGENT_HOOK_WEBHOOK_URL: 'https://hooks.example/ingress',
 *   AGENT_HOOK_WEBHOOK_TOKEN: 'secret',
 *   AGENT_HOOK_WEBHOOK_EVENTS: 'beforeToolCall, onComplete',
 *   AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING: 'toolCall',
 * });
 * // r.ok === true; r.hooks.map((h) => h.id):
 * // ['server-env-webhook:beforeToolCall', 'server-env-webhook:onComplete']
 */
export function environmentHooks(
  env: Readonly<Record<string, string | undefined>>,
): EnvironmentHooks {
  // A malformed signing declaration fails every hook resolution: no
  // delivery can tell whether it must be signed.
  const secrets = signingSecrets(env);
  if (!secrets.ok) return { ok: false, error: secrets.error };
  const url = env[ENV_VARS.URL];

  const token = env[ENV_VARS.TOKEN];
  const eventsText = env[ENV_VARS.EVENTS];
  const responseHandling = env[ENV_VARS.RESPONSE_HANDLING];
  const onError = env[ENV_VARS.ON_ERROR];
  const events = eventsText === undefined ? undefined : splitEvents(eventsText);

  // Each variable's own format first, every failure at once, as the
  // reference schema reports them: field paths joined by ', '.
  const paths = new Map<string, string[]>(SCHEMA_ORDER.map((name) => [name, []]));
  const fail = (name: string, path: string = name): void => {
    paths.get(name)?.push(path);
  };
  const types: HookType[] = [];
  if (events !== undefined) {
    if (events.length === 0) fail(ENV_VARS.EVENTS);
    events.forEach((literal, i) => {
      const type = hookTypeFromLiteral(literal);
      // The path indexes the trimmed, coalesced list, as the reference schema's does.
      if (type === undefined) fail(ENV_VARS.EVENTS, `${ENV_VARS.EVENTS}.${i}`);
      else types.push(type);
    });
  }
  if (onError !== undefined && !isOneOf(ON_ERROR_VALUES, onError)) fail(ENV_VARS.ON_ERROR);
  if (responseHandling !== undefined && !isOneOf(RESPONSE_HANDLING_VALUES, responseHandling)) {
    fail(ENV_VARS.RESPONSE_HANDLING);
  }
  if (token !== undefined && token.trim() === '') fail(ENV_VARS.TOKEN);
  if (url !== undefined && !isValidWebhookUrl(url)) fail(ENV_VARS.URL);
  const failed = [...paths].filter(([, p]) => p.length > 0);
  if (failed.length > 0) {
    return invalid(
      `${MESSAGE.INVALID_PREFIX}${failed.flatMap(([, p]) => p).join(', ')}`,
      failed.map(([name]) => name),
    );
  }

  if (url !== undefined) {
    if (token === undefined) return invalid(MESSAGE.TOKEN_REQUIRED, [ENV_VARS.TOKEN]);
    if (events === undefined) return invalid(MESSAGE.EVENTS_REQUIRED, [ENV_VARS.EVENTS]);
  }
  const mode = (responseHandling ?? DEFAULT_RESPONSE_HANDLING) as ResponseHandlingMode;
  const onErrorMode = (onError ?? DEFAULT_ON_ERROR) as OnErrorMode;
  if (onErrorMode === 'block' && mode !== 'toolCall') {
    return invalid(MESSAGE.BLOCK_REQUIRES_TOOL_CALL, [
      ENV_VARS.ON_ERROR,
      ENV_VARS.RESPONSE_HANDLING,
    ]);
  }
  if (mode === 'toolCall' && !types.some((t) => CONTROL_HOOK_TYPES.has(t))) {
    return invalid(MESSAGE.TOOL_CALL_REQUIRES_EVENT, [ENV_VARS.RESPONSE_HANDLING, ENV_VARS.EVENTS]);
  }
  // The feature is off, and the four others are valid.
  if (url === undefined) return { ok: true, hooks: Object.freeze([]) };

  const signingSecret = env[ENV_SIGNING_SECRET_VAR] ?? '';
  const unsigned = checkSigningRegistration({ url, signingSecret }, env);
  if (unsigned !== undefined) {
    return invalid(`${MESSAGE.INVALID_PREFIX}${ENV_SIGNING_SECRET_VAR}: ${unsigned.message}`, [
      ENV_SIGNING_SECRET_VAR,
    ]);
  }

  const hooks = types.map((type) => {
    const control = mode === 'toolCall' && CONTROL_HOOK_TYPES.has(type);
    return deepFreeze(
      create(HookSchema, {
        id: `${ENV_HOOK_ID_PREFIX}${hookTypeLiteral(type)}`,
        type,
        webhook: {
          url,
          delivery: Delivery.FETCH,
          headers: { Authorization: AUTHORIZATION_TEMPLATE },
          allowedEnvVars: [ENV_VARS.TOKEN],
          responseHandling: control ? ResponseHandling.TOOL_CALL : ResponseHandling.IGNORE,
          onError: control && onErrorMode === 'block' ? OnError.BLOCK : OnError.CONTINUE,
          signingSecret,
        },
      }),
    );
  });
  return { ok: true, hooks: Object.freeze(hooks) };
}

function invalid(message: string, variables: readonly string[]): EnvironmentHooks {
  return { ok: false, error: invalidEnvironment(message, variables) };
}

/** Splits `AGENT_HOOK_WEBHOOK_EVENTS`: entries trimmed, empties dropped, duplicates coalesced in first-seen order. */
function splitEvents(text: string): string[] {
  return [
    ...new Set(
      text
        .split(',')
        .map((e) => e.trim())
        .filter((e) => e !== ''),
    ),
  ];
}

function isOneOf<T extends string>(values: readonly T[], value: string): value is T {
  return (values as readonly string[]).includes(value);
}

/** Freezes a generated hook and everything it holds, so a shared snapshot cannot be edited. */
function deepFreeze<T extends object>(value: T): T {
  for (const v of Object.values(value)) {
    if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) deepFreeze(v);
  }
  return Object.freeze(value);
}
