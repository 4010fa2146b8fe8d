/**
 * @module The webhook payload builder: the JSON object a hook's receiver gets
 * for an event, built in the upstream order (upstream contract §5):
 * 1. the event's reference JSON, projected on `webhook.eventFields` when set;
 * 2. `hookId` and `hookType` added;
 * 3. `webhook.body` merged last and shallow (it wins on any overlap);
 * 4. for `afterToolCall` notifications, a skill's Work registration redacted;
 * 5. `finalState`, `userEmail` and `mock` removed.
 *
 * Controls get the authoritative event, `hookId` and `hookType` only.
 *
 * Email enrichment (§5 steps 6–8) is a separate, asynchronous step that runs
 * on the object this builder returns: it looks up the user that
 * {@link emailLookupUserId} names and, when an address is found, sets
 * `userEmail` on the payload. It runs after step 5, which removes any
 * `userEmail` the event or the body carried.
 */
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { HookEvent } from '../../gen/agenthooks/v1/events_pb.js';
import type { Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { extend } from '../extend.js';
import { eventToReferenceJson } from './event-json.js';

/** Hook type whose notifications get a redacted skill Work registration. */
const REDACTED_HOOK_TYPE = 'afterToolCall';

/** `workRegistration.type` of the registrations that are redacted. */
const REDACTED_WORK_TYPE = 'skill';

/** Payload keys no receiver ever gets, whatever the event or the body holds. */
const STRIPPED_KEYS = ['finalState', 'userEmail', 'mock'] as const;

/** Payload key a receiver selects with `eventFields` to ask for the user's email. */
const USER_EMAIL_FIELD = 'userEmail';

/** Options of {@link buildWebhookPayload}. */
export interface BuildWebhookPayloadOptions {
  /**
   * True for a control (`responseHandling: toolCall`): the payload is the
   * authoritative event with `hookId` and `hookType`, with no projection, no
   * body and no redaction. Default false.
   */
  readonly control?: boolean;
}

/**
 * Builds the JSON payload a webhook receives for an event. The returned object
 * is new; its nested values may be shared with `webhook.body`, so treat them as
 * read-only. Neither `event` nor `webhook` is modified.
 *
 * @param event The event, one of the 16 hook events.
 * @param hookId Id of the hook, sent as `hookId`.
 * @param webhook The hook's webhook; `undefined` sends the whole event.
 * @param options `control: true` for a control hook.
 * @throws RangeError when `event` has no event case set.
 * @example
 * buildWebhookPayload(event, 'audit', webhook)
 * // { toolCallId: 'call_1', ..., hookId: 'audit', hookType: 'afterToolCall', ...webhook.body }
 */
export function buildWebhookPayload(
  event: HookEvent,
  hookId: string,
  webhook: Webhook | undefined,
  options: BuildWebhookPayloadOptions = {},
): JsonObject {
  const { hookType, json } = eventToReferenceJson(event);
  let payload: JsonObject;
  if (options.control === true) {
    // The JSON is freshly built and ours: extended in place, in the reference key order.
    payload = json;
    payload.hookId = hookId;
    payload.hookType = hookType;
  } else {
    const names = webhook?.eventFields?.names;
    payload = extend(names === undefined ? json : project(json, names), {
      hookId,
      hookType,
      ...webhook?.body,
    });
    const result = payload.result;
    if (hookType === REDACTED_HOOK_TYPE && result !== undefined) {
      payload.result = redactSkillWork(result);
    }
  }
  for (const key of STRIPPED_KEYS) delete payload[key];
  return payload;
}

/**
 * Names the user whose email enrichment adds to a built payload, or returns
 * `undefined` when no lookup is made (upstream contract §5 step 6). The id is
 * `payload.userId` when the payload has that key (a `body` override
 * included), else the event's `userId`; an id that is not a non-empty string
 * means no lookup, with no fallback to the event's id. With `eventFields` set,
 * a lookup is made only when it lists `userEmail`.
 *
 * @param event The event the payload was built from.
 * @param payload The object {@link buildWebhookPayload} returned.
 * @param webhook The hook's webhook; a control passes `undefined`.
 */
export function emailLookupUserId(
  event: HookEvent,
  payload: JsonObject,
  webhook: Webhook | undefined,
): string | undefined {
  const names = webhook?.eventFields?.names;
  if (names !== undefined && !names.includes(USER_EMAIL_FIELD)) return undefined;
  const id = Object.hasOwn(payload, 'userId')
    ? payload.userId
    : eventToReferenceJson(event).json.userId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** Copies the listed keys that `json` has; names it does not have stay absent. */
function project(json: JsonObject, names: readonly string[]): JsonObject {
  const out: JsonObject = {};
  for (const name of names) {
    // Own keys only: a name such as `constructor` must not pick up a prototype member.
    const value = Object.hasOwn(json, name) ? json[name] : undefined;
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * Returns `result` with a skill's Work registration redacted: `args` dropped
 * and `data` set to null. Any other value, a task's registration included, is
 * returned as is. The input is never modified.
 */
function redactSkillWork(result: JsonValue): JsonValue {
  if (!isJsonObject(result)) return result;
  const work = result.workRegistration;
  if (!isJsonObject(work) || work.type !== REDACTED_WORK_TYPE) return result;
  const { args: _args, ...kept } = work;
  return extend(result, { workRegistration: extend(kept, { data: null }) });
}

function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
