/**
 * @module Turns any of the 16 hook events into the exact JSON object a webhook
 * receiver written for the reference system gets (before `hookId`, `hookType`,
 * projection and `body` are applied by the payload builder).
 *
 * The mapping reads the protobuf descriptors, so a field added to an event in
 * the `.proto` reaches receivers without code here. The rules, in the order
 * they apply to each field (see `PayloadRule` in `payload_options.proto`):
 * - `local_only` fields (`finalState`) are never written;
 * - `inline` message fields (the tool-call context) are spread into the parent;
 * - implicit-presence scalars are always written, zero values included;
 * - `optional` scalars and message fields are written when set, and
 *   `always_present` ones are written empty when unset;
 * - repeated fields are written when not empty, or always when `always_present`;
 * - enums are written as upstream literals (`EXECUTOR_SERVER` is `server`);
 * - `google.protobuf.Struct`/`Value`/`ListValue` are written as plain JSON.
 */
import {
  create,
  type DescEnum,
  type DescField,
  type DescMessage,
  getOption,
  hasOption,
  type JsonObject,
  type JsonValue,
  type Message,
  toJson,
} from '@bufbuild/protobuf';
import {
  type HookEvent,
  HookEventSchema,
  HookType,
  HookTypeSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { type PayloadRule, payload } from '../../gen/agenthooks/v1/payload_options_pb.js';

/** Well-known types whose canonical proto3 JSON is already the plain JSON a receiver expects. */
const PLAIN_JSON_TYPES = new Set([
  'google.protobuf.Struct',
  'google.protobuf.Value',
  'google.protobuf.ListValue',
]);

const literalCache = new WeakMap<DescEnum, Map<number, string>>();

/**
 * Returns the upstream literal of an enum value: the value name without the
 * enum's prefix, in lower camel case (`HOOK_TYPE_BEFORE_TOOL_CALL` is
 * `beforeToolCall`). Returns `undefined` for the zero value and unknown numbers.
 *
 * @example enumLiteral(ExecutorSchema, Executor.SERVER) // 'server'
 */
export function enumLiteral(desc: DescEnum, value: number): string | undefined {
  let literals = literalCache.get(desc);
  if (literals === undefined) {
    literals = new Map();
    for (const v of desc.values) {
      if (v.number === 0) continue;
      // `localName` is the value name with the shared prefix already removed.
      const words = v.localName.toLowerCase().split('_');
      literals.set(
        v.number,
        words.map((w, i) => (i === 0 ? w : w.charAt(0).toUpperCase() + w.slice(1))).join(''),
      );
    }
    literalCache.set(desc, literals);
  }
  return literals.get(value);
}

/** Returns the upstream literal of a hook type, such as `beforeToolCall`. */
export function hookTypeLiteral(type: HookType): string {
  const literal = enumLiteral(HookTypeSchema, type);
  if (literal === undefined) throw new RangeError(`not a hook type: ${type}`);
  return literal;
}

const typeByLiteral = new Map<string, HookType>(
  HookTypeSchema.values
    .filter((v) => v.number !== HookType.UNSPECIFIED)
    .map((v) => [hookTypeLiteral(v.number), v.number]),
);

/** Returns the hook type of an upstream literal such as `afterStep`, or `undefined`. */
export function hookTypeFromLiteral(literal: string): HookType | undefined {
  return typeByLiteral.get(literal);
}

/** The event case of a {@link HookEvent} that is set: its message descriptor and value. */
export interface EventCase {
  /** Hook type of the set case; its number equals the oneof field number. */
  readonly type: HookType;
  /** Descriptor of the event message. */
  readonly desc: DescMessage;
  /** The event message. */
  readonly message: Message;
}

/** Returns the set case of a {@link HookEvent}, or `undefined` when none is set. */
export function eventCase(event: HookEvent): EventCase | undefined {
  const set = event.event;
  if (set.case === undefined) return undefined;
  const field = HookEventSchema.field[set.case];
  // Every case of the oneof is a message field whose number is its HookType value.
  return { type: field.number as HookType, desc: field.message as DescMessage, message: set.value };
}

/**
 * Returns the reference JSON of a hook event and its hook type literal. The
 * object is freshly built and owned by the caller.
 *
 * @throws RangeError when no event case is set.
 * @example
 * const { hookType, json } = eventToReferenceJson(event);
 * // hookType: 'afterToolCall', json: { toolCallId: 'call_1', ..., mocked: false, result: {...} }
 */
export function eventToReferenceJson(event: HookEvent): { hookType: string; json: JsonObject } {
  const c = eventCase(event);
  if (c === undefined) throw new RangeError('hook event has no event set');
  return { hookType: hookTypeLiteral(c.type), json: messageToReferenceJson(c.desc, c.message) };
}

/** Returns the reference JSON of any event-shaped message, following the module's rules. */
export function messageToReferenceJson(desc: DescMessage, message: Message): JsonObject {
  const out: JsonObject = {};
  writeFields(desc, message, out);
  return out;
}

/** Payload rules by field: decoding a field option costs more than the rest of a field's mapping. */
const ruleCache = new WeakMap<DescField, PayloadRule | null>();

function ruleOf(field: DescField): PayloadRule | undefined {
  let rule = ruleCache.get(field);
  if (rule === undefined) {
    rule = hasOption(field, payload) ? getOption(field, payload) : null;
    ruleCache.set(field, rule);
  }
  return rule ?? undefined;
}

function writeFields(desc: DescMessage, message: Message, out: JsonObject): void {
  // Generated messages keep each field under its localName; this is the one
  // place that reads them reflectively.
  const values = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const rule = ruleOf(field);
    if (rule?.localOnly) continue;
    const value = values[field.localName];
    switch (field.fieldKind) {
      case 'scalar':
        if (value === undefined) continue; // an unset `optional` scalar
        out[field.jsonName] = scalarJson(value);
        break;
      case 'enum': {
        if (value === undefined) continue;
        const literal = enumLiteral(field.enum, value as number);
        if (literal !== undefined) out[field.jsonName] = literal;
        break;
      }
      case 'message':
        if (value === undefined) {
          if (rule?.alwaysPresent) out[field.jsonName] = emptyJson(field.message);
        } else if (rule?.inline) {
          writeFields(field.message, value as Message, out);
        } else {
          out[field.jsonName] = messageJson(field.message, value);
        }
        break;
      case 'list': {
        const list = value as unknown[];
        if (list.length === 0 && !rule?.alwaysPresent) continue;
        out[field.jsonName] = list.map((item): JsonValue => {
          if (field.listKind === 'message') return messageJson(field.message, item);
          if (field.listKind === 'enum') return enumLiteral(field.enum, item as number) ?? null;
          return scalarJson(item);
        });
        break;
      }
      case 'map': {
        const map = value as Record<string, unknown>;
        const obj: JsonObject = {};
        for (const [k, v] of Object.entries(map)) {
          if (field.mapKind === 'message') obj[k] = messageJson(field.message, v);
          else if (field.mapKind === 'enum') obj[k] = enumLiteral(field.enum, v as number) ?? null;
          else obj[k] = scalarJson(v);
        }
        if (Object.keys(obj).length > 0 || rule?.alwaysPresent) out[field.jsonName] = obj;
        break;
      }
    }
  }
}

function messageJson(desc: DescMessage, value: unknown): JsonValue {
  if (desc.typeName === 'google.protobuf.Struct') {
    // protobuf-es represents Struct fields as plain JSON objects already.
    return value as JsonObject;
  }
  if (PLAIN_JSON_TYPES.has(desc.typeName)) {
    return toJson(desc, value as Message);
  }
  return messageToReferenceJson(desc, value as Message);
}

function emptyJson(desc: DescMessage): JsonValue {
  if (desc.typeName === 'google.protobuf.Struct') return {};
  if (desc.typeName === 'google.protobuf.ListValue') return [];
  if (desc.typeName === 'google.protobuf.Value') return null;
  return messageToReferenceJson(desc, create(desc));
}

function scalarJson(value: unknown): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      // JSON has no NaN or Infinity; JSON.stringify would write null too.
      return Number.isFinite(value) ? value : null;
    case 'bigint':
      // No event field is 64-bit; kept a number so JSON never carries int64 strings.
      return Number(value);
    default:
      // bytes: base64, as proto3 JSON writes them.
      return value instanceof Uint8Array ? Buffer.from(value).toString('base64') : null;
  }
}
