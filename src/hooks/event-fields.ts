/**
 * @module The required fields of each of the 16 events, as `Dispatch` and
 * `DispatchStream` check them before anything is delivered (upstream
 * contract §1.2-§1.6), so a receiver written for the reference system never
 * gets an event without a field it relies on.
 *
 * proto3 strings without `optional` are always written to the payload, so
 * "required" means one of two things. An identifier must be non-empty: the
 * operation, the user of a step or terminal event, the sub-agent of a
 * call-agent event, a compaction's message group, a pending tool's name. A
 * text may be empty, as upstream writes it: `agentId` of a step or terminal
 * event (§1.2: "may be `''`"), `errorMessage`, `reason`, `summary`,
 * `instruction` and the `error` texts. Enums (`executor`, `action`, an
 * attachment's `type`) must be set; the tool events need their context and
 * `afterToolCall` its result. The tool-call context is checked by the same
 * function as the decision RPCs', so its errors are theirs.
 *
 * Each failure is an {@link InvalidArgumentError} naming the field by its
 * JSON path under the request's `event`, such as
 * `event.afterHumanIntervention.action`.
 */
import type { DescEnum } from '@bufbuild/protobuf';
import {
  AttachmentTypeSchema,
  type HookEvent,
  HumanActionSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { InvalidArgumentError } from '../errors.js';
import { TOOL_RESULT_REQUIRED, validateToolCallContext } from './tool-call.js';
import {
  checkIdentifier,
  MAX_OPERATION_ID_BYTES,
  REASON,
  validateOperationId,
} from './validate.js';

/** Reason of an event that lacks a field its kind requires. */
export const EVENT_FIELD_REQUIRED = 'EVENT_FIELD_REQUIRED';

/** The event cases of a {@link HookEvent}. */
type EventCaseName = NonNullable<HookEvent['event']['case']>;

/**
 * Identifiers each event kind requires non-empty, besides `operationId`
 * (which every kind requires, and which sits in the context of tool events).
 */
const REQUIRED_IDS: Readonly<Record<EventCaseName, readonly string[]>> = {
  beforeStep: ['userId'],
  afterStep: ['userId'],
  onComplete: ['userId'],
  onError: ['userId'],
  beforeToolCall: [],
  afterToolCall: [],
  onToolCallError: [],
  beforeHumanIntervention: [],
  afterHumanIntervention: [],
  onStopByHumanIntervention: [],
  beforeCompact: [],
  afterCompact: ['groupId'],
  onCompactError: [],
  beforeCallAgent: ['agentId'],
  afterCallAgent: ['agentId', 'subOperationId'],
  onCallAgentError: ['agentId'],
};

/** Returns true when `value` is a number `desc` defines other than its zero value. */
function isKnownValue(desc: DescEnum, value: number): boolean {
  return value !== 0 && desc.values.some((v) => v.number === value);
}

/**
 * Checks that an enum field holds a value the contract defines: unset is
 * `EVENT_FIELD_REQUIRED`, a number the sidecar does not know is
 * `INVALID_ENUM_VALUE` (as for the webhook enums).
 */
function checkEnum(desc: DescEnum, value: number, field: string, name: string): void {
  if (value === 0) {
    throw new InvalidArgumentError(field, EVENT_FIELD_REQUIRED, `${name} is required`);
  }
  if (!isKnownValue(desc, value)) {
    throw new InvalidArgumentError(
      field,
      REASON.INVALID_ENUM_VALUE,
      `Unknown ${name} value ${value}`,
    );
  }
}

/**
 * Checks the fields an event's kind requires; see the module comment for
 * the rules and events.proto for the list of each kind.
 *
 * @param field JSON path of the event in the request, such as `event`.
 * @throws InvalidArgumentError naming the first missing or invalid field:
 *   `EVENT_REQUIRED` without an event, `OPERATION_ID_REQUIRED` for the
 *   operation, `TOOL_CALL_CONTEXT_INVALID` and `TOOL_RESULT_REQUIRED` as the
 *   decision RPCs answer them, else `EVENT_FIELD_REQUIRED`.
 * @example
 * validateEventFields(request.event); // throws for event.afterStep.userId when it is ''
 */
export function validateEventFields(event: HookEvent | undefined, field = 'event'): void {
  const set = event?.event;
  if (set?.case === undefined) {
    throw new InvalidArgumentError(field, 'EVENT_REQUIRED', 'an event is required');
  }
  const path = `${field}.${set.case}`;
  switch (set.case) {
    case 'beforeToolCall':
    case 'afterToolCall':
    case 'onToolCallError':
      validateToolCallContext(set.value.context, `${path}.context`);
      if (set.case === 'afterToolCall' && set.value.result === undefined) {
        // DecideToolResult's rule and message, at the event's path.
        throw new InvalidArgumentError(
          `${path}.result`,
          TOOL_RESULT_REQUIRED,
          'the tool result is required',
        );
      }
      return;
    default:
      validateOperationId(set.value.operationId, `${path}.operationId`);
  }
  const values = set.value as unknown as Readonly<Record<string, unknown>>;
  const parent = values.parentOperationId;
  if (typeof parent === 'string') {
    checkIdentifier(
      parent,
      `${path}.parentOperationId`,
      REASON.OPERATION_ID_TOO_LONG,
      MAX_OPERATION_ID_BYTES,
      'An operation id',
    );
  }
  for (const name of REQUIRED_IDS[set.case]) {
    if (values[name] === '') {
      throw new InvalidArgumentError(
        `${path}.${name}`,
        EVENT_FIELD_REQUIRED,
        `${name} is required`,
      );
    }
  }
  switch (set.case) {
    case 'beforeStep':
    case 'afterStep':
    case 'onComplete':
    case 'onError':
      set.value.attachments.forEach((a, i) => {
        checkEnum(AttachmentTypeSchema, a.type, `${path}.attachments[${i}].type`, 'type');
      });
      break;
    case 'beforeHumanIntervention':
      set.value.pendingTools.forEach((tool, i) => {
        for (const name of ['identifier', 'apiName'] as const) {
          if (tool[name] === '') {
            throw new InvalidArgumentError(
              `${path}.pendingTools[${i}].${name}`,
              EVENT_FIELD_REQUIRED,
              `${name} is required`,
            );
          }
        }
      });
      break;
    case 'afterHumanIntervention':
      checkEnum(HumanActionSchema, set.value.action, `${path}.action`, 'action');
      break;
    case 'afterCallAgent':
      // The child's operation id has the bound of every operation id an event names.
      checkIdentifier(
        set.value.subOperationId,
        `${path}.subOperationId`,
        REASON.OPERATION_ID_TOO_LONG,
        MAX_OPERATION_ID_BYTES,
        'An operation id',
      );
      break;
  }
}
