/**
 * @module agenthooks for the Vercel AI SDK (`ai` 6.0.x): one {@link AgentHooks}
 * per run connects `generateText` / `streamText` to the agenthooks sidecar,
 * thin over the generated client (compiled into this package).
 *
 * - `hooks.tools(tools)` wraps a tool set: each tool's `execute` is decided by
 *   the sidecar (DecideToolCall: allow runs it, deny gives the model the
 *   blocked result, a local handler's mock gives it the mock), its result is
 *   checked (DecideToolResult), the `beforeToolCall` modifying hooks may
 *   rewrite its arguments or answer in its place, and `afterToolCall` (or
 *   `onToolCallError`) is dispatched; an async generator `execute` runs to
 *   its end and only its last value is checked and handed on; a tool without
 *   `execute` is refused;
 * - `hooks.prepareStep` dispatches `beforeStep` and runs the
 *   `transformContext` modifying hooks on the step's messages;
 *   `hooks.onStepFinish` dispatches `afterStep`; `hooks.stopWhen` asks the
 *   `shouldStopAfterTurn` hooks;
 * - `hooks.model(model)` wraps the model: it numbers each response's tool
 *   calls (`callIndex`) and runs the `beforeProviderPayload` hooks on the
 *   provider call options;
 * - `hooks.run(fn)` runs the generation and completes the operation
 *   (`onComplete`, with `onError` when it failed).
 *
 * Fail closed: a sidecar that is unreachable or answers an error fails the
 * run (the tool does not run) with an error naming agenthooks. With
 * `failOpenNotifications` a failed event is logged and the run goes on;
 * decisions and modifying hooks always fail closed.
 *
 * The mapping of the SDK's ids to the spec's fields is {@link AgentHooks.toolContext}
 * and the step events; the README's "Framework adapters: field mapping" lists it.
 */
import { randomUUID } from 'node:crypto';
import * as net from 'node:net';
import { create, type JsonObject, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { type Client, createClient, type Transport } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  type LanguageModel,
  type LanguageModelMiddleware,
  type ModelMessage,
  type StepResult,
  type ToolSet,
  wrapLanguageModel,
} from 'ai';
import {
  Executor,
  type HookEvent,
  HookEventSchema,
  type ToolCallContext,
  ToolCallContextSchema,
  type ToolResult,
  ToolResultSchema,
} from '../../../gen/agenthooks/v1/events_pb.js';
import { ModifyPoint } from '../../../gen/agenthooks/v1/hooks_pb.js';
import {
  type HandleRequestSchema,
  type HandlerCall,
  type HandlerReplySchema,
  HookService,
} from '../../../gen/agenthooks/v1/service_pb.js';

export type { HandlerCall };
export { ModifyPoint };

/** The toolset identifier when `identifier` is not set. */
export const DEFAULT_IDENTIFIER = 'default';
/** The bound of each call to the sidecar when `timeoutMs` is not set. */
export const DEFAULT_TIMEOUT_MS = 10_000;

/** A local handler's reply, without its call id (the adapter sets it). */
export type HandlerReply = Omit<MessageInitShape<typeof HandlerReplySchema>, 'callId'>;

/**
 * Serves one call of a local handler (a hook registered with `handler: true`).
 * Calls are served concurrently, each answered when its promise settles.
 */
export type HandleFunction = (
  call: HandlerCall,
) => HandlerReply | undefined | Promise<HandlerReply | undefined>;

/** What the user supplies; `target` and `userId` are required. */
export interface AgentHooksOptions {
  /** The sidecar's gRPC address: `host:port` or `unix:/path`. */
  readonly target: string;
  /** The run's operation id; default a fresh UUID. */
  readonly operationId?: string;
  /**
   * `userId`, required: the step and terminal events must carry one (the
   * sidecar refuses them without), so the constructor refuses options without it.
   */
  readonly userId: string;
  /** `agentId`: omitted where optional when not set, `""` on step and terminal events. */
  readonly agentId?: string;
  /** The toolset's identifier (matchers test `identifier/apiName`); default `default`. */
  readonly identifier?: string;
  /** Bound of each call to the sidecar; default 10 s. */
  readonly timeoutMs?: number;
  /** Log a failed event and go on; decisions and modifying hooks always fail closed. */
  readonly failOpenNotifications?: boolean;
  /** Serves the operation's local handlers over a Handle stream attached before the run. */
  readonly handle?: HandleFunction;
  /** Logs failed events under `failOpenNotifications`; default `console.warn`. */
  readonly log?: (message: string) => void;
}

/**
 * A message in the spec's shape (hookbus-hooks.md), as the modifying points get
 * and answer it. From the SDK's `ModelMessage`: `system` and `user` keep their
 * role with their text as `content`; `assistant` has its text as `content` and
 * its tool calls as `toolCalls` (`{id, name, arguments}`); each tool result of
 * a `tool` message becomes a `toolResult` message (`toolCallId`, `toolName`,
 * `content`, `isError`). Parts other than text, tool calls and tool results
 * (files, images, reasoning) are not carried.
 */
export interface SpecMessage {
  role: 'system' | 'user' | 'assistant' | 'toolResult';
  content: string;
  toolCalls?: { id: string; name: string; arguments: JsonValue }[];
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
}

type HookClient = Client<typeof HookService>;

/** Stable codes of {@link AgentHooksError}: match on `code`, not on the message. */
export type AgentHooksErrorCode =
  /** A call to the sidecar failed: unreachable, deadline, or an error answer (see `cause`). */
  | 'SIDECAR_CALL_FAILED'
  /** A modifying hook with `onError: block` failed: nothing of the point applies. */
  | 'HOOK_BLOCKED'
  /** The sidecar answered without a decision or a result. */
  | 'NO_DECISION'
  /** A tool ran for a tool call the wrapped model never returned (`hooks.model()` missing). */
  | 'UNKNOWN_TOOL_CALL'
  /** The options are incomplete, or the Handle stream could not be attached. */
  | 'SETUP_FAILED'
  /** The Handle stream ended during the run: the local handlers would be skipped. */
  | 'HANDLE_FAILED'
  /** `hooks.tools()` got a tool whose calls agenthooks cannot decide (no `execute`). */
  | 'UNDECIDABLE_TOOL'
  /** A modifying hook answered a message the adapter cannot convert (an unknown role). */
  | 'INVALID_MESSAGE';

/**
 * An error of the adapter: the sidecar failed, or a hook blocked the run. Its
 * message names agenthooks; the run must not go on as if the call was allowed.
 *
 * @example
 * try { await hooks.run(() => generateText({ ... })); }
 * catch (e) { if (e instanceof Error && 'code' in e && e.code === 'HOOK_BLOCKED') ... }
 */
export class AgentHooksError extends Error {
  override readonly name = 'AgentHooksError';
  readonly code: AgentHooksErrorCode;

  constructor(code: AgentHooksErrorCode, message: string, options?: { cause?: unknown }) {
    super(`agenthooks: ${message}`, options);
    this.code = code;
  }
}

function transport(address: string): Transport {
  if (address.startsWith('unix:')) {
    const path = address.replace(/^unix:(\/\/)?/, '');
    return createGrpcTransport({
      baseUrl: 'http://localhost',
      nodeOptions: { createConnection: () => net.connect(path) },
    });
  }
  return createGrpcTransport({ baseUrl: `http://${address}` });
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Text of the SDK's content (a string or parts). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p): p is { type: 'text'; text: string } => p?.type === 'text')
    .map((p) => p.text)
    .join('');
}

/** The SDK's tool output as text, and whether it is an error. */
function outputText(output: { type: string; value?: unknown }): {
  content: string;
  isError: boolean;
} {
  const isError = output.type === 'error-text' || output.type === 'error-json';
  const value = output.value;
  return { content: typeof value === 'string' ? value : JSON.stringify(value ?? null), isError };
}

/** Converts the SDK's messages to the spec's shape. */
export function toSpecMessages(messages: readonly ModelMessage[]): SpecMessage[] {
  const out: SpecMessage[] = [];
  for (const m of messages) {
    if (m.role === 'system') out.push({ role: 'system', content: m.content });
    else if (m.role === 'user') out.push({ role: 'user', content: textOf(m.content) });
    else if (m.role === 'assistant') {
      const spec: SpecMessage = { role: 'assistant', content: textOf(m.content) };
      if (Array.isArray(m.content)) {
        const calls = m.content
          .filter((p) => p.type === 'tool-call')
          .map((p) => ({ id: p.toolCallId, name: p.toolName, arguments: p.input as JsonValue }));
        if (calls.length > 0) spec.toolCalls = calls;
      }
      out.push(spec);
    } else if (m.role === 'tool') {
      for (const p of m.content) {
        if (p.type !== 'tool-result') continue;
        const { content, isError } = outputText(p.output as { type: string; value?: unknown });
        out.push({
          role: 'toolResult',
          toolCallId: p.toolCallId,
          toolName: p.toolName,
          content,
          isError,
        });
      }
    }
  }
  return out;
}

/**
 * Converts messages in the spec's shape back to the SDK's. A message of
 * another role than `system`, `user`, `assistant` or `toolResult` throws
 * `INVALID_MESSAGE`: what a hook meant by it is unknown, so it is not passed
 * on as a user's.
 */
export function fromSpecMessages(messages: readonly SpecMessage[]): ModelMessage[] {
  return messages.map((m): ModelMessage => {
    switch (m.role) {
      case 'user':
        return { role: 'user', content: m.content };
      case 'system':
        return { role: 'system', content: m.content };
      case 'assistant': {
        const calls = (m.toolCalls ?? []).map((c) => ({
          type: 'tool-call' as const,
          toolCallId: c.id,
          toolName: c.name,
          input: c.arguments,
        }));
        if (calls.length === 0) return { role: 'assistant', content: m.content };
        const text = m.content === '' ? [] : [{ type: 'text' as const, text: m.content }];
        return { role: 'assistant', content: [...text, ...calls] };
      }
      case 'toolResult':
        return {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: m.toolCallId ?? '',
              toolName: m.toolName ?? '',
              output: m.isError
                ? { type: 'error-text', value: m.content }
                : { type: 'text', value: m.content },
            },
          ],
        };
      default:
        throw new AgentHooksError(
          'INVALID_MESSAGE',
          `transformContext answered a message of role ${JSON.stringify((m as { role: unknown }).role)}`,
        );
    }
  });
}

/** The outbox of a client stream. */
class Outbox<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #wake: (() => void) | undefined;
  #closed = false;

  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) yield item;
      else if (this.#closed) return;
      else {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
      }
    }
  }
}

/** Serves local handlers over the Handle stream until closed. */
class HandleStream {
  readonly #outbox = new Outbox<MessageInitShape<typeof HandleRequestSchema>>();
  readonly #abort = new AbortController();
  readonly attached: Promise<void>;
  readonly #served: Promise<void>;
  #closing = false;
  /** Why the stream ended, when this side did not close it. */
  failure: Error | undefined;

  constructor(client: HookClient, operationId: string, fn: HandleFunction) {
    this.#outbox.push({ message: { case: 'attach', value: { operationIds: [operationId] } } });
    let attached = () => {};
    const confirmed = new Promise<void>((resolve) => {
      attached = resolve;
    });
    this.#served = (async () => {
      for await (const res of client.handle(this.#outbox, { signal: this.#abort.signal })) {
        const m = res.message;
        if (m.case === 'attached') attached();
        // Each call is answered when it completes, not in turn: a slow call must not hold
        // back the calls of concurrent tool calls past the sidecar's --handler-timeout.
        else if (m.case === 'call') void this.#answer(fn, m.value);
      }
    })();
    // An end this side did not ask for: the operation's handlers would be skipped.
    this.#served.then(
      () => {
        if (!this.#closing) this.failure ??= new Error('the Handle stream ended');
      },
      (e: unknown) => {
        if (!this.#closing) this.failure ??= e instanceof Error ? e : new Error(String(e));
      },
    );
    this.attached = Promise.race([
      confirmed,
      this.#served.then(() => {
        throw new Error('the Handle stream ended before it was attached');
      }),
    ]);
  }

  /** Serves one call and queues its reply; never rejects (a throwing handler is an error reply). */
  async #answer(fn: HandleFunction, call: HandlerCall): Promise<void> {
    let reply: HandlerReply | undefined;
    try {
      reply = await fn(call);
    } catch (e) {
      reply = { outcome: { case: 'error', value: { message: message(e) } } };
    }
    const outcome = reply?.outcome ?? { case: 'done', value: {} };
    this.#outbox.push({ message: { case: 'reply', value: { callId: call.callId, outcome } } });
  }

  async close(): Promise<void> {
    this.#closing = true;
    this.#outbox.close();
    const timer = setTimeout(() => this.#abort.abort(), 2_000);
    await this.#served.catch(() => {});
    clearTimeout(timer);
  }
}

/**
 * A tool's final output. An `execute` that is an async generator (its
 * yields are preliminary outputs, the last one the final output the model
 * reads) is run to its end here, and only the last value is answered: the
 * result controls (DecideToolResult) judge it before the SDK, or anyone
 * streaming the preliminary outputs, sees any of it.
 */
async function finalOutput(output: unknown): Promise<unknown> {
  const value = await output;
  if (value === null || typeof value !== 'object' || !(Symbol.asyncIterator in value)) {
    return value;
  }
  let last: unknown;
  for await (const part of value as AsyncIterable<unknown>) last = part;
  return last;
}

/** Answers a `beforeToolCall` handler call with a mock result. */
export function mockReply(content: string): HandlerReply {
  return { outcome: { case: 'mock', value: { result: { content, success: true } } } };
}

/** Creates the hooks of one run; attaches the Handle stream when `handle` is set. */
export async function createAgentHooks(options: AgentHooksOptions): Promise<AgentHooks> {
  if (!options.target) throw new AgentHooksError('SETUP_FAILED', 'the target option is required');
  const hooks = new AgentHooks(options);
  await hooks.attach();
  return hooks;
}

/** Connects one run of the AI SDK to the sidecar. Make one per run. */
export class AgentHooks {
  readonly operationId: string;
  readonly #options: AgentHooksOptions;
  readonly #identifier: string;
  readonly #timeoutMs: number;
  readonly #client: HookClient;
  #handle: HandleStream | undefined;
  /** The step being run: the last `prepareStep`'s step number. */
  #step = 0;
  #steps = 0;
  #totalToolCalls = 0;
  /** Tool call id -> position among its response's tool calls, from the model wrapper. */
  readonly #callIndex = new Map<string, number>();
  /** The first failed event that a callback could not throw (the SDK ignores callback errors). */
  #failure: Error | undefined;
  #completed = false;

  constructor(options: AgentHooksOptions) {
    if (!options.userId) {
      throw new AgentHooksError(
        'SETUP_FAILED',
        'userId is required: the step and terminal events carry it, and the sidecar refuses them without',
      );
    }
    this.#options = options;
    this.operationId = options.operationId || randomUUID();
    this.#identifier = options.identifier || DEFAULT_IDENTIFIER;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#client = createClient(HookService, transport(options.target));
  }

  /** Attaches the Handle stream when a `handle` function is set. */
  async attach(): Promise<void> {
    if (this.#options.handle === undefined || this.#handle !== undefined) return;
    this.#handle = new HandleStream(this.#client, this.operationId, this.#options.handle);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no attachment within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
    });
    try {
      await Promise.race([this.#handle.attached, timeout]);
    } catch (e) {
      await this.close();
      throw new AgentHooksError('SETUP_FAILED', `Handle: ${message(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the Handle stream. */
  async close(): Promise<void> {
    const handle = this.#handle;
    this.#handle = undefined;
    await handle?.close();
  }

  #optional(): { agentId?: string; userId?: string } {
    const ids: { agentId?: string; userId?: string } = {};
    if (this.#options.agentId) ids.agentId = this.#options.agentId;
    if (this.#options.userId) ids.userId = this.#options.userId;
    return ids;
  }

  #ids(): { agentId: string; userId: string; operationId: string } {
    return {
      agentId: this.#options.agentId ?? '',
      userId: this.#options.userId ?? '',
      operationId: this.operationId,
    };
  }

  #throwIfFailed(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }

  /**
   * Throws when an answer shows this run's local handler lost mid-call
   * (outcome error code `handler_detached`): the answer was made without it.
   * Read from the answer itself, so it does not depend on when the stream's
   * end is seen.
   */
  #checkOutcomes(outcomes: readonly { errorCode: string; hookId: string }[]): void {
    if (this.#handle === undefined) return;
    const lost = outcomes.find((o) => o.errorCode === 'handler_detached');
    if (lost !== undefined) {
      throw new AgentHooksError(
        'HANDLE_FAILED',
        `Handle stream failed: hook ${lost.hookId} lost its handler mid-call`,
      );
    }
  }

  /**
   * Throws when the Handle stream ended while the run goes on: the sidecar
   * would skip the operation's local handlers (a handler's mock, a modifying
   * handler's rewrite) and the call would go on without them.
   */
  #checkHandlers(): void {
    const failure = this.#handle?.failure;
    if (failure !== undefined) {
      throw new AgentHooksError('HANDLE_FAILED', `Handle stream failed: ${failure.message}`, {
        cause: failure,
      });
    }
  }

  /** A failed event: logged under failOpenNotifications, else kept and thrown. */
  #notifyFailed(what: string, cause: unknown): void {
    const error = new AgentHooksError('SIDECAR_CALL_FAILED', `${what}: ${message(cause)}`, {
      cause,
    });
    if (this.#options.failOpenNotifications) {
      (this.#options.log ?? console.warn)(`${error.message} (ignored: failOpenNotifications)`);
      return;
    }
    this.#failure ??= error;
    throw error;
  }

  /** Dispatches one event, awaited, so that receivers see the events in order. */
  async #dispatch(event: HookEvent): Promise<void> {
    try {
      this.#checkHandlers();
      await this.#client.dispatch({ event }, { timeoutMs: this.#timeoutMs });
    } catch (e) {
      this.#notifyFailed(`Dispatch ${event.event.case}`, e);
    }
  }

  /**
   * Runs one point's modifying hooks and answers their composed result; fails
   * closed. A failure is also kept, as a tool's is: the SDK may swallow what
   * its callbacks throw (`streamText` ends the stream and resolves), so
   * `run()` and the next step throw it.
   */
  async modify<R extends object>(point: ModifyPoint, context: JsonObject): Promise<Partial<R>> {
    try {
      return await this.#modify<R>(point, context);
    } catch (e) {
      if (e instanceof AgentHooksError) this.#failure ??= e;
      throw e;
    }
  }

  async #modify<R extends object>(point: ModifyPoint, context: JsonObject): Promise<Partial<R>> {
    const name = ModifyPoint[point]
      .toLowerCase()
      .replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    this.#checkHandlers();
    let res: Awaited<ReturnType<HookClient['modify']>>;
    try {
      res = await this.#client.modify(
        { operationId: this.operationId, point, contextJson: JSON.stringify(context) },
        { timeoutMs: this.#timeoutMs },
      );
    } catch (e) {
      throw new AgentHooksError('SIDECAR_CALL_FAILED', `Modify ${name}: ${message(e)}`, {
        cause: e,
      });
    }
    // A stream that broke while the sidecar answered may have had its handlers skipped.
    this.#checkHandlers();
    this.#checkOutcomes(res.outcomes);
    const outcome = res.outcome;
    if (outcome.case === 'blocked') {
      throw new AgentHooksError(
        'HOOK_BLOCKED',
        `Modify ${name} blocked by hook ${outcome.value.hookId}: ${outcome.value.message}`,
      );
    }
    if (outcome.case !== 'resultJson') {
      throw new AgentHooksError('NO_DECISION', `Modify ${name} answered without a result`);
    }
    return JSON.parse(outcome.value) as Partial<R>;
  }

  /**
   * `prepareStep`: dispatches `beforeStep` and runs the `transformContext`
   * hooks on the step's messages; the model gets the messages they answer.
   */
  readonly prepareStep = async (options: {
    stepNumber: number;
    messages: ModelMessage[];
  }): Promise<{ messages?: ModelMessage[] }> => {
    this.#throwIfFailed();
    this.#step = options.stepNumber;
    const stepIndex = options.stepNumber;
    await this.#dispatch(
      create(HookEventSchema, {
        event: { case: 'beforeStep', value: { ...this.#ids(), stepIndex, steps: stepIndex } },
      }),
    );
    const result = await this.modify<{ messages: SpecMessage[] }>(ModifyPoint.TRANSFORM_CONTEXT, {
      messages: toSpecMessages(options.messages) as unknown as JsonValue[],
      iteration: stepIndex + 1,
    });
    return result.messages === undefined ? {} : { messages: fromSpecMessages(result.messages) };
  };

  /** `onStepFinish`: dispatches `afterStep`. */
  readonly onStepFinish = async (step: {
    text: string;
    toolCalls: readonly unknown[];
  }): Promise<void> => {
    const stepIndex = this.#step;
    this.#steps = stepIndex + 1;
    this.#totalToolCalls += step.toolCalls.length;
    const value: MessageInitShape<typeof HookEventSchema>['event'] = {
      case: 'afterStep',
      value: {
        ...this.#ids(),
        stepIndex,
        steps: stepIndex + 1,
        toolCalls: step.toolCalls.length,
        totalToolCalls: this.#totalToolCalls,
      },
    };
    if (step.text !== '') value.value.content = step.text;
    await this.#dispatch(create(HookEventSchema, { event: value }));
  };

  /**
   * A stop condition for `stopWhen`: asks the `shouldStopAfterTurn` hooks
   * after each step (combine it with a step count: `[stepCountIs(5), hooks.stopWhen]`).
   */
  readonly stopWhen = async ({
    steps,
  }: {
    steps: readonly { toolCalls: readonly unknown[]; response: { messages: ModelMessage[] } }[];
  }): Promise<boolean> => {
    const last = steps[steps.length - 1];
    const messages = last === undefined ? [] : toSpecMessages(last.response.messages);
    const result = await this.modify<{ stop: boolean }>(ModifyPoint.SHOULD_STOP_AFTER_TURN, {
      messages: messages as unknown as JsonValue[],
      iteration: steps.length,
      hadToolCalls: (last?.toolCalls.length ?? 0) > 0,
    });
    return result.stop === true;
  };

  /**
   * Wraps the model: numbers each response's tool calls (`callIndex`) and
   * runs the `beforeProviderPayload` hooks on the provider call options
   * (`payload`: the options as JSON, without the abort signal).
   */
  model(model: Exclude<LanguageModel, string>): Exclude<LanguageModel, string> {
    const record = (content: readonly { type: string; toolCallId?: string }[]) => {
      let index = 0;
      for (const part of content) {
        if (part.type === 'tool-call' && part.toolCallId !== undefined) {
          this.#callIndex.set(part.toolCallId, index);
          index += 1;
        }
      }
    };
    const middleware: LanguageModelMiddleware = {
      specificationVersion: 'v3',
      transformParams: async ({ params, model: inner }) => {
        const { abortSignal, ...payload } = params;
        const result = await this.modify<{ payload: JsonObject }>(
          ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
          { model: inner.modelId, payload: JSON.parse(JSON.stringify(payload)) as JsonObject },
        );
        if (result.payload === undefined) return params;
        return Object.assign({}, result.payload, { abortSignal }) as unknown as typeof params;
      },
      wrapGenerate: async ({ doGenerate }) => {
        const result = await doGenerate();
        record(result.content);
        return result;
      },
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        let index = 0;
        const numbered = result.stream.pipeThrough(
          new TransformStream({
            transform: (part, controller) => {
              if (part.type === 'tool-call') {
                this.#callIndex.set(part.toolCallId, index);
                index += 1;
              }
              controller.enqueue(part);
            },
          }),
        );
        return Object.assign({}, result, { stream: numbered });
      },
    };
    return wrapLanguageModel({
      model: model as Parameters<typeof wrapLanguageModel>[0]['model'],
      middleware,
    });
  }

  /** The spec's tool-call context of one of the SDK's tool calls (the mapping). */
  toolContext(toolCallId: string, apiName: string, args: JsonObject): ToolCallContext {
    const callIndex = this.#callIndex.get(toolCallId);
    if (callIndex === undefined) {
      throw new AgentHooksError(
        'UNKNOWN_TOOL_CALL',
        `tool call ${toolCallId} of ${apiName} was not in a response of hooks.model(): wrap the model`,
      );
    }
    const stepIndex = this.#step;
    return create(ToolCallContextSchema, {
      toolCallId,
      assistantMessageId: `${this.operationId}:assistant:${stepIndex}`,
      identifier: this.#identifier,
      apiName,
      args,
      callIndex,
      stepIndex,
      operationId: this.operationId,
      executor: Executor.SERVER,
      ...this.#optional(),
    });
  }

  /**
   * Wraps a tool set: each tool's `execute` is decided by the sidecar. A tool
   * without `execute` (a provider-executed tool, such as a provider's web
   * search, or one the application runs itself) never reaches the adapter, so
   * its calls could not be decided: it is refused (`UNDECIDABLE_TOOL`).
   */
  tools<T extends ToolSet>(tools: T): T {
    const wrapped: Record<string, unknown> = {};
    for (const [name, tool] of Object.entries(tools)) {
      const execute = tool.execute;
      if (execute === undefined) {
        throw new AgentHooksError(
          'UNDECIDABLE_TOOL',
          `tool ${JSON.stringify(name)} has no execute (a provider-executed or client-side tool), ` +
            'so agenthooks cannot decide its calls; remove it from the tools',
        );
      }
      wrapped[name] = Object.assign({}, tool, {
        execute: (input: unknown, options: Parameters<typeof execute>[1]) =>
          this.#execute(name, input, options, execute).catch((e: unknown) => {
            // The SDK turns a tool's error into a result the model sees and goes
            // on; an agenthooks failure must end the run instead: the next
            // prepareStep (or run()) throws it.
            if (e instanceof AgentHooksError) this.#failure ??= e;
            throw e;
          }),
      });
    }
    return wrapped as T;
  }

  async #execute(
    name: string,
    input: unknown,
    options: { toolCallId: string },
    execute: (input: never, options: never) => unknown,
  ): Promise<unknown> {
    this.#throwIfFailed();
    this.#checkHandlers();
    const { toolCallId } = options;
    const tool = `${this.#identifier}/${name}`;
    let args = (
      input !== null && typeof input === 'object' ? input : { input: input ?? null }
    ) as JsonObject;
    const before = await this.modify<{ content: string; isError: boolean; args: JsonObject }>(
      ModifyPoint.BEFORE_TOOL_CALL,
      { toolCall: { id: toolCallId, name }, args, iteration: this.#step + 1 },
    );
    if (before.args !== undefined) args = before.args;
    const context = this.toolContext(toolCallId, name, args);

    // The controls run for every call, a modifying hook's answer included.
    let decision: Awaited<ReturnType<HookClient['decideToolCall']>>;
    try {
      decision = await this.#client.decideToolCall(
        { event: { context } },
        { timeoutMs: this.#timeoutMs },
      );
    } catch (e) {
      throw new AgentHooksError('SIDECAR_CALL_FAILED', `DecideToolCall ${tool}: ${message(e)}`, {
        cause: e,
      });
    }
    this.#checkHandlers();
    this.#checkOutcomes(decision.outcomes);
    const outcome = decision.decision?.outcome;
    if (outcome?.case === 'deny') {
      const blocked = outcome.value.blockedResult ?? create(ToolResultSchema, {});
      await this.#afterToolCall(context, blocked, false);
      return blocked.content;
    }
    if (outcome?.case !== 'allow' && outcome?.case !== 'mock') {
      throw new AgentHooksError(
        'NO_DECISION',
        `DecideToolCall ${tool} answered without a decision`,
      );
    }

    // What stands in for the tool: a local handler's mock, else a
    // `beforeToolCall` modifying hook's answer; either is a mocked result.
    let stand: ToolResult | undefined;
    if (outcome.case === 'mock') {
      stand = outcome.value.result ?? create(ToolResultSchema, {});
    } else if (before.content !== undefined || before.isError === true) {
      stand = create(ToolResultSchema, {
        content: before.content ?? '',
        success: before.isError !== true,
      });
    }
    const mocked = stand !== undefined;
    let result: ToolResult;
    let output: unknown;
    if (stand === undefined) {
      const toolInput = before.args === undefined ? input : (args as unknown);
      try {
        output = await finalOutput(execute(toolInput as never, options as never));
      } catch (e) {
        await this.#dispatch(
          create(HookEventSchema, {
            event: { case: 'onToolCallError', value: { context, error: message(e) } },
          }),
        );
        throw e;
      }
      const content = typeof output === 'string' ? output : JSON.stringify(output ?? null);
      result = create(ToolResultSchema, { content, success: true });
    } else {
      result = stand;
      output = stand.content;
    }

    // The result controls see every result the model would read, a mock's too.
    let checked: Awaited<ReturnType<HookClient['decideToolResult']>>;
    try {
      checked = await this.#client.decideToolResult(
        { event: { context, result, mocked } },
        { timeoutMs: this.#timeoutMs },
      );
    } catch (e) {
      throw new AgentHooksError('SIDECAR_CALL_FAILED', `DecideToolResult ${tool}: ${message(e)}`, {
        cause: e,
      });
    }
    this.#checkOutcomes(checked.outcomes);
    const after = checked.decision?.outcome;
    if (after?.case === 'deny') {
      const blocked = after.value.blockedResult ?? create(ToolResultSchema, {});
      await this.#afterToolCall(context, blocked, mocked);
      return blocked.content;
    }
    if (after?.case !== 'allow') {
      throw new AgentHooksError(
        'NO_DECISION',
        `DecideToolResult ${tool} answered without a decision`,
      );
    }
    await this.#afterToolCall(context, result, mocked);
    return output;
  }

  async #afterToolCall(context: ToolCallContext, result: ToolResult, mocked: boolean) {
    await this.#dispatch(
      create(HookEventSchema, {
        event: { case: 'afterToolCall', value: { context, mocked, result } },
      }),
    );
  }

  /**
   * Completes the operation once: `onComplete` with reason `done`, or with
   * reason `error` (then `onError`) when `error` is given.
   */
  async complete(final: { text?: string; error?: unknown } = {}): Promise<void> {
    if (this.#completed) return;
    this.#completed = true;
    const failed = final.error !== undefined;
    const event: MessageInitShape<typeof HookEventSchema>['event'] = {
      case: 'onComplete',
      value: {
        ...this.#ids(),
        reason: failed ? 'error' : 'done',
        status: failed ? 'error' : 'done',
        steps: this.#steps,
        toolCalls: this.#totalToolCalls,
        errorMessage: failed ? message(final.error) : '',
      },
    };
    if (!failed && final.text) event.value.lastAssistantContent = final.text;
    try {
      await this.#client.completeOperation({ event: event.value }, { timeoutMs: this.#timeoutMs });
    } catch (e) {
      this.#notifyFailed('CompleteOperation', e);
    }
  }

  /**
   * Runs a generation and completes the operation: `onComplete` (done) when
   * it succeeds, `onComplete` and `onError` (error) when it throws (the error
   * is rethrown). A failed event the SDK's callbacks could not throw fails
   * the run here. Ends the Handle stream.
   */
  async run<R extends { text: string }>(generate: () => PromiseLike<R>): Promise<R> {
    try {
      let result: R;
      try {
        result = await generate();
        this.#throwIfFailed();
      } catch (e) {
        try {
          await this.complete({ error: e });
        } catch {
          // The run's own error is the one to report.
        }
        throw e;
      }
      await this.complete({ text: result.text });
      return result;
    } finally {
      await this.close();
    }
  }
}

/** The step type `onStepFinish` reads, for callers that wrap it. */
export type StepFinish = Pick<StepResult<ToolSet>, 'text' | 'toolCalls'>;
