/**
 * @module Finds where a JSON request breaks strict decoding: the first key
 * its message does not define, a field given twice (as `onError` and
 * `on_error`), an enum name its enum does not define, or a value of the
 * wrong JSON type (a number for a string), as a JSON (camelCase) field path
 * such as `hooks[0].webhook.onError`. protobuf-es refuses all of them but
 * names only a type or a proto field (`cannot decode enum
 * agenthooks.v1.OnError from JSON: "ON_ERROR_BLOKC"`, `cannot decode field
 * agenthooks.v1.RegisterHooksRequest.operation_id from JSON: 5`), so the
 * HTTP edge asks this module for the field to name.
 */
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonValue,
  ScalarType,
} from '@bufbuild/protobuf';

/** A key or enum name that strict JSON decoding refuses, and where it is. */
export interface JsonFieldProblem {
  /** JSON path of the offending field, such as `hooks[0].webhook.onError`. */
  readonly field: string;
  /** What is wrong, such as `unknown field` or `unknown enum value "ON_ERROR_BLOKC"`. */
  readonly problem: string;
}

/** Well-known types have their own JSON forms (a Struct holds any key): not walked. */
const WKT_PREFIX = 'google.protobuf.';

/**
 * Returns the first unknown key or enum name in `json` read as `desc`, in
 * document order, or `undefined` when there is none (the JSON is then bad
 * in some other way, which protobuf-es's own message describes).
 *
 * @example
 * findJsonFieldProblem(RegisterHooksRequestSchema, { operationId: 'o', webhok: {} });
 * // { field: 'webhok', problem: 'unknown field' }
 */
export function findJsonFieldProblem(
  desc: DescMessage,
  json: unknown,
  path = '',
): JsonFieldProblem | undefined {
  if (desc.typeName.startsWith(WKT_PREFIX)) return undefined;
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const seen = new Map<DescField, string>();
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    const at = path === '' ? key : `${path}.${key}`;
    if (field === undefined) {
      // An extension key (`[pkg.ext]`) is the registry's business, not a typo.
      if (key.startsWith('[')) continue;
      return { field: at, problem: 'unknown field' };
    }
    const fieldAt = path === '' ? field.jsonName : `${path}.${field.jsonName}`;
    const twice = seen.get(field);
    if (twice !== undefined) {
      return { field: fieldAt, problem: `given twice, as ${twice} and as ${key}` };
    }
    seen.set(field, key);
    const found = inField(field, value, fieldAt);
    if (found !== undefined) return found;
  }
  return undefined;
}

function inField(field: DescField, value: unknown, at: string): JsonFieldProblem | undefined {
  // `null` is a field's default, whatever its type.
  if (value === null) return undefined;
  switch (field.fieldKind) {
    case 'scalar':
      return inScalar(field.scalar, value, at);
    case 'enum':
      return inEnum(field.enum, value, at);
    case 'message':
      return inMessage(field.message, value, at);
    case 'list': {
      if (!Array.isArray(value)) return wrongType(at, 'an array', value);
      for (const [i, item] of value.entries()) {
        const itemAt = `${at}[${i}]`;
        const found =
          field.listKind === 'enum'
            ? inEnum(field.enum, item, itemAt)
            : field.listKind === 'message'
              ? inMessage(field.message, item, itemAt)
              : inScalar(field.scalar, item, itemAt);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    case 'map': {
      if (!isObject(value)) return wrongType(at, 'an object', value);
      for (const [key, item] of Object.entries(value)) {
        const itemAt = `${at}[${JSON.stringify(key)}]`;
        const found =
          field.mapKind === 'enum'
            ? inEnum(field.enum, item, itemAt)
            : field.mapKind === 'message'
              ? inMessage(field.message, item, itemAt)
              : inScalar(field.scalar, item, itemAt);
        if (found !== undefined) return found;
      }
      return undefined;
    }
  }
}

/**
 * A value of a message type: an object, unless its type has a JSON form of
 * its own (a Timestamp's RFC 3339 text, a Duration's `1.5s`, a Struct):
 * then that form, as protobuf-es reads it.
 */
function inMessage(desc: DescMessage, value: unknown, at: string): JsonFieldProblem | undefined {
  if (desc.typeName.startsWith(WKT_PREFIX)) {
    try {
      fromJson(desc, value as JsonValue);
      return undefined;
    } catch (e: unknown) {
      return { field: at, problem: `not a valid ${desc.typeName}: ${(e as Error).message}` };
    }
  }
  if (!isObject(value)) return wrongType(at, 'an object', value);
  return findJsonFieldProblem(desc, value, at);
}

function inEnum(desc: DescEnum, value: unknown, at: string): JsonFieldProblem | undefined {
  if (typeof value === 'number') {
    return Number.isInteger(value) ? undefined : wrongType(at, 'an enum name', value);
  }
  if (typeof value !== 'string') return wrongType(at, 'an enum name', value);
  if (desc.values.some((v) => v.name === value)) return undefined;
  return { field: at, problem: `unknown ${desc.typeName} value ${JSON.stringify(value)}` };
}

/**
 * A scalar whose JSON type is not one proto3 JSON reads for it. Values of
 * the right type that are still refused (out of range, bad base64) keep
 * protobuf-es's own message.
 */
function inScalar(scalar: ScalarType, value: unknown, at: string): JsonFieldProblem | undefined {
  switch (scalar) {
    case ScalarType.STRING:
      return typeof value === 'string' ? undefined : wrongType(at, 'a string', value);
    case ScalarType.BYTES:
      return typeof value === 'string' ? undefined : wrongType(at, 'a base64 string', value);
    case ScalarType.BOOL:
      return typeof value === 'boolean' ? undefined : wrongType(at, 'true or false', value);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return typeof value === 'number' || (typeof value === 'string' && isNumberText(value))
        ? undefined
        : wrongType(at, 'a number', value);
    default:
      // The integer types, 32- and 64-bit, as numbers or their text.
      if (typeof value === 'number' || (typeof value === 'string' && isNumberText(value))) {
        if (typeof value === 'number' && !Number.isInteger(value)) {
          return wrongType(at, 'an integer', value);
        }
        return outOfRange(scalar, Number(value), at);
      }
      return wrongType(at, 'an integer', value);
  }
}

/** Bounds of the 32-bit integer types; 64-bit ones are protobuf-es's to judge. */
const INT32_RANGE: readonly [number, number] = [-(2 ** 31), 2 ** 31 - 1];
const UINT32_RANGE: readonly [number, number] = [0, 2 ** 32 - 1];

/** A 32-bit integer that does not fit its type. */
function outOfRange(scalar: ScalarType, n: number, at: string): JsonFieldProblem | undefined {
  let range: readonly [number, number] | undefined;
  let name = '';
  switch (scalar) {
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      range = INT32_RANGE;
      name = 'a 32-bit integer';
      break;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      range = UINT32_RANGE;
      name = 'an unsigned 32-bit integer';
      break;
    default:
      return undefined;
  }
  if (Number.isInteger(n) && n >= range[0] && n <= range[1]) return undefined;
  return {
    field: at,
    problem: `expected ${name}, got ${Number.isFinite(n) ? n : 'a non-finite number'}`,
  };
}

/**
 * A number as proto3 JSON may write it in a string: its text, or one of
 * the special values (whether it fits its field is protobuf-es's to judge).
 */
function isNumberText(text: string): boolean {
  if (text === 'NaN' || text === 'Infinity' || text === '-Infinity') return true;
  return text !== '' && text.trim() === text && Number.isFinite(Number(text));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The problem of a value of the wrong JSON type: what was expected, and what came. */
function wrongType(at: string, expected: string, value: unknown): JsonFieldProblem {
  return { field: at, problem: `expected ${expected}, got ${jsonTypeOf(value)}` };
}

/** What a JSON value is, as a problem names it. */
function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'object':
      return 'an object';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'a boolean';
    case 'number':
      return Number.isInteger(value) ? 'an integer' : 'a number with a fraction';
    default:
      return typeof value;
  }
}
