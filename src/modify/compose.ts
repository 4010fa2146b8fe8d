/**
 * @module How the results of the modifying hooks of one point occurrence
 * compose (the HookBus points of `hookbus-hooks.md`). The hooks run in
 * registration order; a {@link Composition} holds the context the next
 * hook sees and the result composed so far, and takes each hook's result
 * whole or not at all, so a failed hook never leaves part of its value.
 *
 * The rules, per point:
 * - Replacing values chain: a hook sees the context as the hooks before it
 *   left it (`messages`, `systemPrompt`, `args`, `payload`; `afterToolCall`'s
 *   `content` and `isError` become the next hook's `result` and `isError`),
 *   and the last value returned is the result's.
 * - `{}` (or no result at all: a 204, an empty body) is "no change"; a
 *   member that is `null` is treated as absent, except inside `headers` and
 *   `metadata`; members a point does not define are ignored.
 * - `beforeToolCall` with `content`, or `isError: true`, ends the chain: later
 *   hooks do not run and the tool is not executed (`isError: false` alone
 *   does not end it).
 * - `shouldStopAfterTurn` `stop: true`, and `beforeCompact` `cancel: true`
 *   or a `summary`, end the chain.
 * - `afterToolCall` `terminate: true` is kept once a hook returned it, even
 *   if a later hook overrides `content`.
 * - `beforeProviderRequest` `headers` and `metadata` merge key by key in
 *   order, last wins, and a `null` value stays in the result: it tells the
 *   runtime to remove the key; its scalars are last-wins; the context each
 *   hook sees is the runtime's, unchanged.
 * - `getSteeringMessages` and `getFollowUpMessages`: every hook sees the same
 *   context, and the messages they return are concatenated in order.
 * - `afterProviderResponse` only observes: its results are not read.
 *
 * Values stay raw JSON text (`raw-json.ts`): a history of megabytes is
 * carried, not parsed into objects, and large integers survive unchanged.
 * The composed result is at most {@link MODIFY_RESULT_MAX_BYTES}: a hook's
 * result that would pass it is refused whole ({@link ResultTooLargeError}).
 */
import { extend } from '../extend.js';
import {
  arrayElements,
  arrayText,
  type JsonKind,
  kindOf,
  objectMembers,
  objectText,
  type RawJson,
  RawJsonError,
  splitObject,
} from './raw-json.js';

/** The twelve modifying points, in the order `hookbus-hooks.md` lists them. */
export const MODIFY_POINTS = [
  'beforeAgentStart',
  'beforeToolCall',
  'afterToolCall',
  'prepareNextTurn',
  'transformContext',
  'beforeProviderRequest',
  'beforeProviderPayload',
  'afterProviderResponse',
  'shouldStopAfterTurn',
  'getSteeringMessages',
  'getFollowUpMessages',
  'beforeCompact',
] as const;

/** One of the twelve modifying points. */
export type ModifyPoint = (typeof MODIFY_POINTS)[number];

/**
 * The JSON type a result member must have. `count` is a non-negative
 * integer, `duration` a non-negative number; `stringPatch` is an object
 * whose values are strings or `null`, `patch` an object of any values.
 */
type MemberType =
  | 'array'
  | 'object'
  | 'string'
  | 'boolean'
  | 'count'
  | 'duration'
  | 'stringPatch'
  | 'patch';

interface PointRule {
  /** How results combine: replacing values, concatenated messages, or not read. */
  readonly mode: 'replace' | 'concat' | 'observe';
  /** Context members the point requires, with their types (others are carried unread). */
  readonly context?: Readonly<Record<string, MemberType>>;
  /** The result members the point reads, with their types. */
  readonly result: Readonly<Record<string, MemberType>>;
  /** Result members that replace a context member for the hooks after: result name -> context name. */
  readonly chains?: Readonly<Record<string, string>>;
  /** Members that stay `true` once a hook returned `true`. */
  readonly sticky?: readonly string[];
  /** Whether a hook's result (already checked) ends the chain. */
  readonly ends?: (result: ReadonlyMap<string, RawJson>) => boolean;
}

const MESSAGES: Readonly<Record<string, MemberType>> = { messages: 'array' };

/** The points whose hooks a matcher may select by the tool's name. */
export const TOOL_POINTS: ReadonlySet<ModifyPoint> = new Set(['beforeToolCall', 'afterToolCall']);

/** The tool points' context: `toolCall` (with a string `name`, which matchers test) and `args`. */
const TOOL_CONTEXT: Readonly<Record<string, MemberType>> = { toolCall: 'object', args: 'object' };

/** The rules of each point; `README.md` and the proto repeat them for users. */
export const POINT_RULES: Readonly<Record<ModifyPoint, PointRule>> = {
  beforeAgentStart: {
    mode: 'replace',
    context: { messages: 'array', systemPrompt: 'string' },
    result: { messages: 'array', systemPrompt: 'string' },
    chains: { messages: 'messages', systemPrompt: 'systemPrompt' },
  },
  beforeToolCall: {
    mode: 'replace',
    context: TOOL_CONTEXT,
    result: { content: 'string', isError: 'boolean', args: 'object' },
    chains: { args: 'args' },
    ends: (r) => r.has('content') || r.get('isError') === 'true',
  },
  afterToolCall: {
    mode: 'replace',
    context: extend(TOOL_CONTEXT, { result: 'string' as const, isError: 'boolean' as const }),
    result: { content: 'string', isError: 'boolean', terminate: 'boolean' },
    chains: { content: 'result', isError: 'isError' },
    sticky: ['terminate'],
  },
  prepareNextTurn: {
    mode: 'replace',
    context: MESSAGES,
    result: MESSAGES,
    chains: { messages: 'messages' },
  },
  transformContext: {
    mode: 'replace',
    context: MESSAGES,
    result: MESSAGES,
    chains: { messages: 'messages' },
  },
  beforeProviderRequest: {
    mode: 'replace',
    result: {
      headers: 'stringPatch',
      timeoutMs: 'duration',
      maxRetries: 'count',
      cacheRetention: 'string',
      metadata: 'patch',
      transport: 'string',
    },
  },
  beforeProviderPayload: {
    mode: 'replace',
    context: { payload: 'object' },
    result: { payload: 'object' },
    chains: { payload: 'payload' },
  },
  afterProviderResponse: { mode: 'observe', result: {} },
  shouldStopAfterTurn: {
    mode: 'replace',
    context: MESSAGES,
    result: { stop: 'boolean' },
    ends: (r) => r.get('stop') === 'true',
  },
  getSteeringMessages: { mode: 'concat', context: MESSAGES, result: MESSAGES },
  getFollowUpMessages: { mode: 'concat', context: MESSAGES, result: MESSAGES },
  beforeCompact: {
    mode: 'replace',
    context: MESSAGES,
    result: { cancel: 'boolean', summary: 'string' },
    ends: (r) => r.get('cancel') === 'true' || r.has('summary'),
  },
};

/** JSON of the wrong shape, naming the member at fault (`messages`, `headers.x-id`), or `''` for the whole. */
abstract class ShapeError extends Error {
  constructor(
    readonly member: string,
    message: string,
  ) {
    super(message);
  }
}

/** A hook's result that is not JSON, not an object, or has a member of the wrong type. */
export class ResultShapeError extends ShapeError {
  override readonly name = 'ResultShapeError';
}

/** A point's context that is not a JSON object, or lacks a member its rules read. */
export class ContextShapeError extends ShapeError {
  override readonly name = 'ContextShapeError';
}

/**
 * Largest composed result, in UTF-8 bytes: the bound of one webhook's
 * answer. Concatenated messages and key-by-key patches grow with every hook;
 * past this the call fails rather than answer a result built in part.
 */
export const MODIFY_RESULT_MAX_BYTES = 16 * 1024 * 1024;

/** A hook's result that would make the composed result larger than its bound. */
export class ResultTooLargeError extends Error {
  override readonly name = 'ResultTooLargeError';
  constructor(
    /** The size the composed result would have, in UTF-8 bytes. */
    readonly bytes: number,
    /** The bound, in UTF-8 bytes. */
    readonly limit: number,
  ) {
    super(`the composed result would be ${bytes} bytes, over the limit of ${limit}`);
  }
}

/** Bytes of `text` in UTF-8. */
function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Bytes of a member `"name":value` written by `objectText`, given the value's bytes. */
function memberBytes(name: string, valueBytes: number): number {
  return utf8Bytes(JSON.stringify(name)) + 1 + valueBytes;
}

/** Bytes of an object or array of `count` parts together `partBytes` long: brackets and commas. */
function containerBytes(partBytes: number, count: number): number {
  return 2 + partBytes + Math.max(count - 1, 0);
}

/** What `{"messages":` and the closing `}` add around the concatenated array. */
const CONCAT_WRAPPER_BYTES = memberBytes('messages', 0) + 2;

const KIND_OF_TYPE: Readonly<Record<MemberType, JsonKind>> = {
  array: 'array',
  object: 'object',
  string: 'string',
  boolean: 'boolean',
  count: 'number',
  duration: 'number',
  stringPatch: 'object',
  patch: 'object',
};

const TYPE_NAME: Readonly<Record<MemberType, string>> = {
  array: 'an array',
  object: 'an object',
  string: 'a string',
  boolean: 'a boolean',
  count: 'a non-negative integer',
  duration: 'a non-negative number',
  stringPatch: 'an object of strings or nulls',
  patch: 'an object',
};

/** Checks one member against its type; returns the patch's members for the patch types. */
function checkMember(
  name: string,
  value: RawJson,
  type: MemberType,
): Map<string, RawJson> | undefined {
  const kind = kindOf(value);
  const wrong = () =>
    new ResultShapeError(name, `${name} must be ${TYPE_NAME[type]}, got ${describe(value, kind)}`);
  if (kind !== KIND_OF_TYPE[type]) throw wrong();
  if (type === 'count' || type === 'duration') {
    const n = Number(value);
    if (!(n >= 0) || !Number.isFinite(n) || (type === 'count' && !Number.isInteger(n))) {
      throw wrong();
    }
  }
  if (type !== 'stringPatch' && type !== 'patch') return undefined;
  const members = objectMembers(value);
  if (type === 'stringPatch') {
    for (const [key, v] of members) {
      const k = kindOf(v);
      if (k !== 'string' && k !== 'null') {
        throw new ResultShapeError(
          `${name}.${key}`,
          `${name}.${key} must be a string or null, got ${describe(v, k)}`,
        );
      }
    }
  }
  return members;
}

function describe(value: RawJson, kind: JsonKind): string {
  if (kind === 'array' || kind === 'object') return `an ${kind}`;
  if (kind === 'string') return 'a string';
  return value.length <= 32 ? value : `a ${kind}`;
}

/** Text of nothing but JSON's whitespace (space, tab, LF, CR): an empty answer. */
const JSON_BLANK = /^[ \t\n\r]*$/;

/**
 * Reads a hook's result: `undefined` or blank text is "no change" (no
 * members); otherwise it must be a JSON object.
 *
 * @throws ResultShapeError when the text is not JSON or not an object.
 */
export function resultMembers(text: string | undefined): Map<string, RawJson> {
  if (text === undefined || JSON_BLANK.test(text)) return new Map();
  try {
    return objectMembers(text);
  } catch (e: unknown) {
    if (e instanceof RawJsonError)
      throw new ResultShapeError('', `the result is not a JSON object (${e.message})`);
    throw e;
  }
}

/**
 * Reads a point's context: a JSON object with the members the point requires
 * (`messages`, `toolCall` with a string `name`, ...) of the right types.
 *
 * @throws ContextShapeError naming the member at fault.
 */
export function contextMembers(
  point: ModifyPoint,
  text: string,
): { members: Map<string, RawJson>; repeated: boolean } {
  let members: Map<string, RawJson>;
  let repeated: boolean;
  try {
    ({ members, repeated } = splitObject(text));
  } catch (e: unknown) {
    if (e instanceof RawJsonError) {
      throw new ContextShapeError('', `the context is not a JSON object (${e.message})`);
    }
    throw e;
  }
  for (const [name, type] of Object.entries(POINT_RULES[point].context ?? {})) {
    const value = members.get(name);
    if (value === undefined) {
      throw new ContextShapeError(name, `${point} needs ${name} in its context`);
    }
    try {
      checkMember(name, value, type);
    } catch (e: unknown) {
      if (e instanceof ResultShapeError) throw new ContextShapeError(e.member, e.message);
      throw e;
    }
  }
  const toolCall = members.get('toolCall');
  if (TOOL_POINTS.has(point) && toolCall !== undefined) {
    const name = objectMembers(toolCall).get('name');
    if (name === undefined || kindOf(name) !== 'string') {
      throw new ContextShapeError('toolCall.name', 'toolCall.name must be a string');
    }
  }
  return { members, repeated };
}

/**
 * The composition of one point occurrence: feed it each hook's result in
 * registration order while {@link Composition.ended} is false; read
 * {@link Composition.context} before each hook and the composed
 * {@link Composition.result} at the end.
 *
 * @example
 * const c = new Composition('transformContext', '{"messages":[],"iteration":1}');
 * c.apply('{"messages":[{"role":"user","content":"hi"}]}');
 * c.result(); // '{"messages":[{"role":"user","content":"hi"}]}'
 */
export class Composition {
  readonly point: ModifyPoint;
  readonly #rule: PointRule;
  readonly #context: Map<string, RawJson>;
  readonly #composed = new Map<string, RawJson>();
  readonly #patches = new Map<string, Map<string, RawJson>>();
  readonly #concatenated: RawJson[] = [];
  readonly #maxResultBytes: number;
  /** UTF-8 bytes of the concatenated elements, each with one comma. */
  #concatenatedBytes = 0;
  /** UTF-8 bytes of each member the result holds now, patches included. */
  #resultBytes = new Map<string, number>();
  /** UTF-8 bytes of each merged patch's `"key":value` entries. */
  readonly #patchBytes = new Map<string, Map<string, number>>();
  #ended = false;
  /**
   * The context as it arrived, without the whitespace around it, while no
   * hook has changed it and no member name repeats in it: a webhook's body
   * is then this text with members added before its closing brace, rather
   * than a copy written member by member (a history can be megabytes).
   */
  #arrived: string | undefined;

  /**
   * @param context The point's context as a JSON object.
   * @param maxResultBytes The bound of {@link Composition.result}, in UTF-8 bytes.
   * @throws ContextShapeError when `context` is not a JSON object, or lacks
   *   a member the point requires or has it with the wrong type.
   */
  constructor(point: ModifyPoint, context: string, maxResultBytes = MODIFY_RESULT_MAX_BYTES) {
    this.point = point;
    this.#maxResultBytes = maxResultBytes;
    this.#rule = POINT_RULES[point];
    const { members, repeated } = contextMembers(point, context);
    this.#context = members;
    // A checked object: what trim() removes is JSON whitespace around it.
    this.#arrived = repeated ? undefined : context.trim();
  }

  /** The tool's name on the tool points (`toolCall.name`), which matchers test. */
  get toolName(): string | undefined {
    const toolCall = this.#context.get('toolCall');
    if (toolCall === undefined) return undefined;
    return JSON.parse(objectMembers(toolCall).get('name') ?? 'null') as string;
  }

  /** True once a hook's result ended the chain: later hooks must not run. */
  get ended(): boolean {
    return this.#ended;
  }

  /** The context the next hook sees, as a JSON object. */
  context(): RawJson {
    return objectText(this.#context);
  }

  /**
   * The context the next hook sees with `extra` members after it (replacing
   * any of the same name), as a JSON object: a webhook's body, written
   * without reading the context again.
   */
  contextWith(extra: Readonly<Record<string, RawJson>>): RawJson {
    const names = Object.keys(extra);
    const arrived = this.#arrived;
    if (arrived !== undefined && !names.some((name) => this.#context.has(name))) {
      // The same members in the same order as below: the context's, then the extra ones.
      let text = arrived.slice(0, -1);
      let comma = this.#context.size > 0;
      for (const name of names) {
        text += `${comma ? ',' : ''}${JSON.stringify(name)}:${extra[name]}`;
        comma = true;
      }
      return `${text}}`;
    }
    const members = new Map(this.#context);
    for (const [name, value] of Object.entries(extra)) {
      members.delete(name);
      members.set(name, value);
    }
    return objectText(members);
  }

  /**
   * Applies one hook's result, whole or not at all.
   *
   * @param result The hook's answer: JSON object text, or `undefined` or
   *   blank for "no change".
   * @throws ResultShapeError when the result is not a JSON object or a
   *   member has the wrong type; nothing of it is applied then.
   * @throws ResultTooLargeError when the composed result would pass its
   *   bound; nothing of it is applied then.
   */
  apply(result: string | undefined): void {
    if (this.#ended) throw new Error(`${this.point}: the chain already ended`);
    if (this.#rule.mode === 'observe') return;
    const checked = new Map<string, RawJson>();
    const patches = new Map<string, Map<string, RawJson>>();
    for (const [name, value] of resultMembers(result)) {
      const type = this.#rule.result[name];
      if (type === undefined || value === 'null') continue;
      const patch = checkMember(name, value, type);
      if (patch !== undefined) patches.set(name, patch);
      checked.set(name, value);
    }
    // Checked whole: now commit.
    if (this.#rule.mode === 'concat') {
      const messages = checked.get('messages');
      if (messages === undefined) return;
      const elements = arrayElements(messages);
      let added = 0;
      for (const m of elements) added += utf8Bytes(m) + 1;
      const total = this.#concatenatedBytes + added;
      // The elements with a comma each, less the last one's.
      this.#checkSize(CONCAT_WRAPPER_BYTES + total + 1);
      // A loop, not push(...elements): a spread passes each element as an
      // argument, and an answer of ~150,000 messages overflows the stack.
      for (const m of elements) this.#concatenated.push(m);
      this.#concatenatedBytes = total;
      return;
    }
    const sizes = this.#replacedSizes(checked, patches);
    for (const [name, value] of checked) {
      const patch = patches.get(name);
      if (patch !== undefined) {
        const merged = this.#patches.get(name) ?? new Map<string, RawJson>();
        const bytes = this.#patchBytes.get(name) ?? new Map<string, number>();
        // Last wins; a `null` stays, so that the runtime removes the key.
        for (const [key, v] of patch) {
          merged.delete(key);
          merged.set(key, v);
          bytes.set(key, memberBytes(key, utf8Bytes(v)));
        }
        this.#patches.set(name, merged);
        this.#patchBytes.set(name, bytes);
        continue;
      }
      if (this.#rule.sticky?.includes(name) && this.#composed.get(name) === 'true') continue;
      this.#composed.set(name, value);
      const contextName = this.#rule.chains?.[name];
      if (contextName !== undefined) {
        this.#context.set(contextName, value);
        this.#arrived = undefined;
      }
    }
    this.#resultBytes = sizes;
    if (this.#rule.ends?.(checked) === true) this.#ended = true;
  }

  /**
   * The bytes of each result member once `checked` is applied, on a point
   * whose results replace and merge.
   *
   * @throws ResultTooLargeError when the result would pass its bound.
   */
  #replacedSizes(
    checked: ReadonlyMap<string, RawJson>,
    patches: ReadonlyMap<string, ReadonlyMap<string, RawJson>>,
  ): Map<string, number> {
    const sizes = new Map(this.#resultBytes);
    for (const [name, value] of checked) {
      const patch = patches.get(name);
      if (patch !== undefined) {
        const had = this.#patchBytes.get(name);
        let bytes = 0;
        let count = had?.size ?? 0;
        for (const entry of had?.values() ?? []) bytes += entry;
        for (const [key, v] of patch) {
          const old = had?.get(key);
          if (old === undefined) count += 1;
          else bytes -= old;
          bytes += memberBytes(key, utf8Bytes(v));
        }
        sizes.set(name, containerBytes(bytes, count));
        continue;
      }
      if (this.#rule.sticky?.includes(name) && this.#composed.get(name) === 'true') continue;
      sizes.set(name, utf8Bytes(value));
    }
    let members = 0;
    for (const [name, bytes] of sizes) members += memberBytes(name, bytes);
    this.#checkSize(containerBytes(members, sizes.size));
    return sizes;
  }

  /** @throws ResultTooLargeError when `bytes` is over the bound. */
  #checkSize(bytes: number): void {
    if (bytes > this.#maxResultBytes) throw new ResultTooLargeError(bytes, this.#maxResultBytes);
  }

  /** The composed result, as a JSON object: the members some hook set. */
  result(): RawJson {
    if (this.#rule.mode === 'concat') {
      return this.#concatenated.length === 0
        ? '{}'
        : objectText(new Map([['messages', arrayText(this.#concatenated)]]));
    }
    const out = new Map<string, RawJson>();
    for (const name of Object.keys(this.#rule.result)) {
      const patch = this.#patches.get(name);
      const value = patch !== undefined ? objectText(patch) : this.#composed.get(name);
      if (value !== undefined) out.set(name, value);
    }
    return objectText(out);
  }
}
