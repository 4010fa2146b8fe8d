/**
 * @module Finds where a JSON request breaks strict decoding: the first key
 * its message does not define, or the first enum name its enum does not
 * define, as a JSON (camelCase) field path such as `hooks[0].webhook.onError`.
 * protobuf-es refuses both but names only the enum type for an enum name
 * (`cannot decode enum agenthooks.v1.OnError from JSON: "ON_ERROR_BLOKC"`),
 * so the HTTP edge asks this module for the field to name.
 */
import type { DescEnum, DescField, DescMessage } from '@bufbuild/protobuf';

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
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    const at = path === '' ? key : `${path}.${key}`;
    if (field === undefined) {
      // An extension key (`[pkg.ext]`) is the registry's business, not a typo.
      if (key.startsWith('[')) continue;
      return { field: at, problem: 'unknown field' };
    }
    const found = inField(field, value, path === '' ? field.jsonName : `${path}.${field.jsonName}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

function inField(field: DescField, value: unknown, at: string): JsonFieldProblem | undefined {
  switch (field.fieldKind) {
    case 'enum':
      return inEnum(field.enum, value, at);
    case 'message':
      return findJsonFieldProblem(field.message, value, at);
    case 'list': {
      if (!Array.isArray(value)) return undefined;
      for (const [i, item] of value.entries()) {
        const found =
          field.listKind === 'enum'
            ? inEnum(field.enum, item, `${at}[${i}]`)
            : field.listKind === 'message'
              ? findJsonFieldProblem(field.message, item, `${at}[${i}]`)
              : undefined;
        if (found !== undefined) return found;
      }
      return undefined;
    }
    case 'map': {
      if (typeof value !== 'object' || value === null) return undefined;
      for (const [key, item] of Object.entries(value)) {
        const itemAt = `${at}[${JSON.stringify(key)}]`;
        const found =
          field.mapKind === 'enum'
            ? inEnum(field.enum, item, itemAt)
            : field.mapKind === 'message'
              ? findJsonFieldProblem(field.message, item, itemAt)
              : undefined;
        if (found !== undefined) return found;
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

function inEnum(desc: DescEnum, value: unknown, at: string): JsonFieldProblem | undefined {
  if (typeof value !== 'string' || desc.values.some((v) => v.name === value)) return undefined;
  return { field: at, problem: `unknown ${desc.typeName} value ${JSON.stringify(value)}` };
}
