/**
 * @module An agent runtime in TypeScript that runs one whole operation against
 * the agenthooks sidecar.
 *
 * It uses the generated code in `gen/` with Connect's gRPC transport (native
 * gRPC over HTTP/2, not the Connect protocol), and does what a runtime does:
 *
 * 0. registers a hook with an invalid webhook URL, on purpose, and prints the
 *    ErrorInfo reason and the BadRequest field violations of the error it
 *    gets;
 * 1. registers the operation's hooks: a webhook control that the receiver
 *    answers (it denies fs/deleteFile), a local handler that mocks web/search,
 *    and notification webhooks for the steps, the tool results and the
 *    completion;
 * 2. serves the local handler over the Handle stream, in its own task, and
 *    opens the operation's DispatchStream for the events it does not wait for;
 * 3. dispatches beforeStep, decides three tool calls (fs/readFile is allowed
 *    and runs on the client, so its result arrives later: the call is parked;
 *    fs/deleteFile is denied; web/search is mocked), sends the afterToolCall
 *    notifications of the denied and the mocked call on the stream, waits for
 *    their acks and dispatches afterStep;
 * 4. publishes the parked call's result;
 * 5. runs a small agent loop with a scripted model, shaped by modifying hooks
 *    (hookbus-hooks.md) that it registers on the operation: at
 *    transformContext a webhook redacts the card number in the user's
 *    message, at beforeToolCall a local handler clamps the search tool's
 *    `limit`, and at shouldStopAfterTurn a webhook (a turn budget) stops the
 *    loop after its second turn. Each iteration calls Modify at the three
 *    points and applies what it answers; a `blocked` answer applies nothing
 *    and ends the run with an error;
 * 6. completes the operation.
 *
 * As the spec's producers do, it awaits the step events (Dispatch) and the
 * terminal ones (CompleteOperation), and does not wait for the tool events:
 * they go on the stream, which keeps their order, so the receiver sees them in
 * order.
 *
 * It prints one JSON line per step and exits 1 on any error.
 *
 * Environment: AGENTHOOKS_ADDRESS (host:port or unix:/path, default
 * 127.0.0.1:50051), RECEIVER_URL (the webhook receiver, default
 * http://127.0.0.1:9000) and AGENTHOOKS_OPERATION_ID (default op-example).
 *
 * ```sh
 * npm run build && npx tsc -p examples/ts && node dist/examples/examples/ts/runtime.js
 * ```
 */
import * as net from 'node:net';
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import {
  type Client,
  type Code,
  ConnectError,
  createClient,
  type Transport,
} from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { type HookOutcome, HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  Executor,
  type HookEvent,
  HookEventSchema,
  HookType,
  type ToolCallContext,
  ToolCallContextSchema,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import {
  type Hook,
  HookSchema,
  ModifyPoint,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  type DispatchStreamRequestSchema,
  type HandleRequestSchema,
  type HandlerCall,
  type HandlerReplySchema,
  HookService,
  ParkKind,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  type BadRequest_FieldViolation,
  BadRequestSchema,
  ErrorInfoSchema,
} from '../../gen/google/rpc/error_details_pb.js';

const ADDRESS = process.env.AGENTHOOKS_ADDRESS || '127.0.0.1:50051';
const RECEIVER_URL = (process.env.RECEIVER_URL || 'http://127.0.0.1:9000').replace(/\/+$/, '');
const OPERATION_ID = process.env.AGENTHOOKS_OPERATION_ID || 'op-example';
const AGENT_ID = 'agent-example';
const USER_ID = 'user-example';
/** Every call gets a deadline: a sidecar that does not answer is an error, never an allow. */
const TIMEOUT_MS = 10_000;

const SEARCH_RESULT = '{"results":[{"title":"agenthooks","url":"https://example.com/agenthooks"}]}';
const READ_RESULT = '- [x] write the examples\n- [ ] ship v1\n';

/** The agent loop's first message: the receiver's redactor removes the card number. */
const PROMPT = 'Find the agenthooks docs. My card is 4111 1111 1111 1111 if a page asks for it.';
/** The largest `limit` the search tool takes; the clamp-limit handler enforces it. */
const SEARCH_LIMIT_MAX = 10;

/** The search tool's arguments. */
interface SearchArgs extends JsonObject {
  query: string;
  limit: number;
}

/**
 * The scripted model: its assistant turn at each iteration, with the search it
 * calls (or none). It would search twice and then answer; the turn budget
 * stops it first.
 */
const SCRIPT: readonly { text: string; search?: SearchArgs }[] = [
  { text: 'Let me search for it.', search: { query: 'agenthooks sidecar', limit: 50 } },
  {
    text: 'Let me look for the modifying hooks too.',
    search: { query: 'agenthooks modifying hooks', limit: 5 },
  },
  { text: 'done: the docs are at https://example.com/agenthooks.' },
];

type HookClient = Client<typeof HookService>;
type HandleRequestInit = MessageInitShape<typeof HandleRequestSchema>;

/** Prints one JSON line. */
function emit(step: string, details: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ step, ...details }));
}

/** Formats hook outcomes as `hookId:status`, such as `steps-before:delivered`. */
function outcomes(items: readonly HookOutcome[]): string[] {
  return items.map((o) => `${o.hookId}:${HookOutcomeStatus[o.status].toLowerCase()}`);
}

/** The spec's name of a modifying point, such as `beforeToolCall`. */
function pointName(point: ModifyPoint): string {
  return ModifyPoint[point].toLowerCase().replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/**
 * Creates a native gRPC transport (HTTP/2) to `host:port` or `unix:/path`;
 * for a unix socket the HTTP/2 session runs over the socket.
 */
function grpcTransport(address: string): Transport {
  if (address.startsWith('unix:')) {
    const path = address.replace(/^unix:(\/\/)?/, '');
    return createGrpcTransport({
      baseUrl: 'http://localhost',
      nodeOptions: { createConnection: () => net.connect(path) },
    });
  }
  return createGrpcTransport({ baseUrl: `http://${address}` });
}

/** One tool call of the model's step. */
interface ToolCall {
  readonly context: ToolCallContext;
  /** True when the tool runs elsewhere and its result arrives later (parked). */
  readonly deferred: boolean;
}

function toolName(call: ToolCall): string {
  return `${call.context.identifier}/${call.context.apiName}`;
}

function toolCall(
  name: string,
  identifier: string,
  apiName: string,
  args: JsonObject,
  callIndex: number,
  executor: Executor,
  deferred = false,
): ToolCall {
  const context = create(ToolCallContextSchema, {
    toolCallId: `${OPERATION_ID}-call-${name}`,
    assistantMessageId: `${OPERATION_ID}-msg-1`,
    identifier,
    apiName,
    args,
    callIndex,
    stepIndex: 0,
    operationId: OPERATION_ID,
    executor,
    agentId: AGENT_ID,
    userId: USER_ID,
  });
  return { context, deferred };
}

function hooks(): Hook[] {
  const notify = (id: string, type: HookType) =>
    create(HookSchema, { id, type, webhook: { url: `${RECEIVER_URL}/events` } });
  return [
    // A control: the receiver's {"decision": "deny"} blocks the call; if the
    // receiver fails, the call is blocked too (onError: block).
    create(HookSchema, {
      id: 'deny-delete',
      type: HookType.BEFORE_TOOL_CALL,
      webhook: {
        url: `${RECEIVER_URL}/control`,
        responseHandling: ResponseHandling.TOOL_CALL,
        onError: OnError.BLOCK,
      },
    }),
    // A local handler, served over the Handle stream below.
    create(HookSchema, {
      id: 'mock-search',
      type: HookType.BEFORE_TOOL_CALL,
      matcher: '^web/search$',
      handler: true,
    }),
    notify('steps-before', HookType.BEFORE_STEP),
    notify('steps-after', HookType.AFTER_STEP),
    notify('tool-results', HookType.AFTER_TOOL_CALL),
    notify('completed', HookType.ON_COMPLETE),
  ];
}

/** The agent loop's modifying hooks, one per point, each in its plugin. */
function modifyingHooks(): Hook[] {
  return [
    // A webhook: a card number must not reach the model, so if the redactor
    // fails the answer is `blocked` (onError: block) and the runtime stops.
    create(HookSchema, {
      id: 'redact-card',
      point: ModifyPoint.TRANSFORM_CONTEXT,
      plugin: 'privacy',
      webhook: { url: `${RECEIVER_URL}/redact`, onError: OnError.BLOCK },
    }),
    // A local handler, served over the Handle stream: the runtime knows its
    // tools' limits, and checks them with no HTTP round trip per tool call.
    create(HookSchema, {
      id: 'clamp-limit',
      point: ModifyPoint.BEFORE_TOOL_CALL,
      plugin: 'limits',
      matcher: '^search$',
      handler: true,
    }),
    // A webhook, not a handler: the turn budget is the operator's policy, kept in
    // one service for runtimes in every language and changed without redeploying
    // them; as a handler the runtime would only ask itself. A budget that cannot
    // be checked stops the run (onError: block) rather than let it go on unmetered.
    create(HookSchema, {
      id: 'turn-budget',
      point: ModifyPoint.SHOULD_STOP_AFTER_TURN,
      plugin: 'budget',
      webhook: { url: `${RECEIVER_URL}/stop`, onError: OnError.BLOCK },
    }),
  ];
}

/** The requests of a stream, written by the runtime and read by the transport. */
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
      if (item !== undefined) {
        yield item;
      } else if (this.#closed) {
        return;
      } else {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
      }
    }
  }
}

/** Rejects after the timeout, naming what did not happen. */
function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Serves the runtime's local handlers over the Handle stream, in its own
 * task. Dispatch and DecideToolCall wait for the handler's reply, so the
 * stream is read while those calls are pending.
 */
class HandlerStream {
  readonly #outbox = new Outbox<HandleRequestInit>();
  readonly #abort = new AbortController();
  readonly #attached: Promise<void>;
  readonly #served: Promise<void>;

  constructor(client: HookClient, operationIds: string[]) {
    this.#outbox.push({ message: { case: 'attach', value: { operationIds } } });
    let attached = () => {};
    this.#attached = new Promise<void>((resolve) => {
      attached = resolve;
    });
    this.#served = (async () => {
      const responses = client.handle(this.#outbox, { signal: this.#abort.signal });
      for await (const response of responses) {
        const m = response.message;
        if (m.case === 'attached') {
          emit('Handle.attached', { operationIds: m.value.operationIds });
          attached();
        } else if (m.case === 'call') {
          this.#outbox.push({ message: { case: 'reply', value: this.#run(m.value) } });
        } else if (m.case === 'replaced') {
          emit('Handle.replaced', { operationIds: m.value.operationIds });
        }
      }
    })();
    // waitAttached() and close() report a failed stream; until then it is no unhandled rejection.
    this.#served.catch(() => {});
  }

  /** The handler: mocks web/search, runs the modifying handler, and is done with anything else. */
  #run(call: HandlerCall): MessageInitShape<typeof HandlerReplySchema> {
    if (call.point !== ModifyPoint.UNSPECIFIED) return this.#modify(call);
    const event = call.event?.event;
    if (event?.case === 'beforeToolCall' && event.value.context !== undefined) {
      const tool = `${event.value.context.identifier}/${event.value.context.apiName}`;
      if (call.hookId === 'mock-search' && tool === 'web/search') {
        emit('Handle.call', { hookId: call.hookId, tool, reply: 'mock' });
        return {
          callId: call.callId,
          outcome: {
            case: 'mock',
            value: { result: { content: SEARCH_RESULT, success: true } },
          },
        };
      }
    }
    emit('Handle.call', { hookId: call.hookId, event: event?.case, reply: 'done' });
    return { callId: call.callId, outcome: { case: 'done', value: {} } };
  }

  /**
   * The modifying handler: clamps the search tool's `limit`, and changes
   * nothing else. It gets the point's context as the hooks before it left it,
   * and replies `modified` with its result, or `done` for no change.
   */
  #modify(call: HandlerCall): MessageInitShape<typeof HandlerReplySchema> {
    const point = pointName(call.point);
    if (call.hookId === 'clamp-limit') {
      const { args } = JSON.parse(call.contextJson) as { args: JsonObject };
      const limit = args.limit;
      if (typeof limit === 'number' && Number.isInteger(limit) && limit > SEARCH_LIMIT_MAX) {
        emit('Handle.call', { hookId: call.hookId, point, reply: 'modified' });
        // The other arguments stay as the model wrote them.
        const resultJson = JSON.stringify({ args: { ...args, limit: SEARCH_LIMIT_MAX } });
        return { callId: call.callId, outcome: { case: 'modified', value: { resultJson } } };
      }
    }
    emit('Handle.call', { hookId: call.hookId, point, reply: 'done' });
    return { callId: call.callId, outcome: { case: 'done', value: {} } };
  }

  async waitAttached(): Promise<void> {
    await within(
      Promise.race([
        this.#attached,
        this.#served.then(() => {
          throw new Error('the Handle stream ended before it was attached');
        }),
      ]),
      'the sidecar did not confirm the Handle attachment',
    );
  }

  /** Half-closes the stream and waits until the sidecar ended it. */
  async close(): Promise<void> {
    this.#outbox.close();
    await within(this.#served, 'the Handle stream did not end');
  }

  /** Cancels the stream, as a runtime does when the operation failed. */
  abort(): void {
    this.#abort.abort();
  }
}

/**
 * Reads the ErrorInfo reason and the BadRequest field violations of an error
 * from the sidecar. They are in the google.rpc.Status of the call's trailers
 * (grpc-status-details-bin), which Connect decodes into the error's details.
 */
function errorDetails(e: unknown): {
  code: Code;
  reason: string;
  violations: BadRequest_FieldViolation[];
} {
  const err = ConnectError.from(e);
  const [info] = err.findDetails(ErrorInfoSchema);
  const violations = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  return { code: err.code, reason: info?.reason ?? '', violations };
}

/** Registers a hook with an invalid webhook URL, on purpose, and prints what the error says. */
async function registerInvalidHook(client: HookClient): Promise<void> {
  const invalid = create(HookSchema, {
    id: 'invalid-url',
    type: HookType.AFTER_STEP,
    webhook: { url: 'ftp://example.com/hook' },
  });
  try {
    await client.registerHooks(
      { operationId: OPERATION_ID, hooks: [invalid] },
      { timeoutMs: TIMEOUT_MS },
    );
  } catch (e) {
    const { code, reason, violations } = errorDetails(e);
    const fields = violations.map((v) => ({ field: v.field, description: v.description }));
    emit('RegisterHooks.refused', { code, reason, fields });
    return;
  }
  throw new Error('the sidecar registered a hook with an invalid webhook URL');
}

/**
 * Sends the events a runtime does not wait for on the operation's
 * DispatchStream. `notify` returns at once; the acks are read in their own
 * task. The stream keeps one operation's events in order, but not with
 * Dispatch calls: `flush` waits for the acks of the events sent so far.
 */
class Notifier {
  readonly #outbox = new Outbox<MessageInitShape<typeof DispatchStreamRequestSchema>>();
  readonly #abort = new AbortController();
  readonly #read: Promise<void>;
  #sent = 0;
  #acked = 0;
  /** Wakes `flush` on each ack. */
  #progress: () => void = () => {};

  constructor(client: HookClient) {
    // The stream lives as long as the operation, so it has no deadline.
    const acks = client.dispatchStream(this.#outbox, { signal: this.#abort.signal });
    this.#read = (async () => {
      for await (const ack of acks) {
        if (ack.error !== undefined) {
          // A failed notification is logged; the operation goes on.
          const error = `${ack.error.reason}: ${ack.error.message}`;
          emit('DispatchStream.ack', { eventId: ack.eventId, error });
        } else {
          emit('DispatchStream.ack', { eventId: ack.eventId, outcomes: outcomes(ack.outcomes) });
        }
        this.#acked += 1;
        this.#progress();
      }
    })();
    // flush() and close() report a failed stream; until then it is no unhandled rejection.
    this.#read.catch(() => {});
  }

  notify(event: HookEvent, details: Record<string, unknown> = {}): void {
    this.#sent += 1;
    const eventId = `event-${this.#sent}`;
    emit('DispatchStream.send', { eventId, event: event.event.case, ...details });
    this.#outbox.push({ eventId, event });
  }

  /** Waits until every event sent so far is acknowledged. */
  async flush(): Promise<void> {
    const sent = this.#sent;
    const acked = new Promise<void>((resolve) => {
      this.#progress = () => {
        if (this.#acked >= sent) resolve();
      };
      this.#progress();
    });
    const ended = this.#read.then(() => {
      if (this.#acked < sent) {
        throw new Error('the DispatchStream ended before every event was acknowledged');
      }
    });
    await within(Promise.race([acked, ended]), 'the sidecar did not acknowledge the notifications');
  }

  /** Half-closes the stream and waits until the sidecar ended it, every event acknowledged. */
  async close(): Promise<void> {
    this.#outbox.close();
    await within(this.#read, 'the DispatchStream did not end');
    await this.flush();
  }

  /** Cancels the stream, as a runtime does when the operation failed. */
  abort(): void {
    this.#abort.abort();
  }
}

class Runtime {
  readonly #client: HookClient;
  readonly #notifier: Notifier;

  constructor(client: HookClient, notifier: Notifier) {
    this.#client = client;
    this.#notifier = notifier;
  }

  /** Dispatches an event the runtime awaits (beforeStep, afterStep). */
  async dispatch(event: HookEvent): Promise<void> {
    const res = await this.#client.dispatch({ event }, { timeoutMs: TIMEOUT_MS });
    emit('Dispatch', { event: event.event.case, outcomes: outcomes(res.outcomes) });
  }

  /** Notifies the tool's result without waiting, as the spec's producers do. */
  afterToolCall(call: ToolCall, result: ToolResult | undefined, mocked: boolean): void {
    const event = create(HookEventSchema, {
      event: { case: 'afterToolCall', value: { context: call.context, mocked, result } },
    });
    this.#notifier.notify(event, { tool: toolName(call) });
  }

  /** Asks the sidecar before the tool runs, and does what the decision says. */
  async decide(call: ToolCall): Promise<void> {
    const tool = toolName(call);
    const res = await this.#client.decideToolCall(
      { event: { context: call.context } },
      { timeoutMs: TIMEOUT_MS },
    );
    const outcome = res.decision?.outcome;
    switch (outcome?.case) {
      case 'deny':
        // The tool does not run; the blocked result is what the runtime stores,
        // and its afterToolCall notification still goes out (mocked: false).
        emit('DecideToolCall', { tool, decision: 'deny', reason: outcome.value.reason });
        this.afterToolCall(call, outcome.value.blockedResult, false);
        return;
      case 'mock':
        // The tool does not run; the handler's result stands in for it.
        emit('DecideToolCall', { tool, decision: 'mock', hookId: outcome.value.hookId });
        this.afterToolCall(call, outcome.value.result, true);
        return;
      case 'allow': {
        emit('DecideToolCall', { tool, decision: 'allow' });
        if (!call.deferred)
          throw new Error(`${tool} would run here; this example runs no tool itself`);
        // The client runs the tool; its result arrives later. Park the call so
        // that the publication works on any sidecar, after any restart.
        const parked = await this.#client.parkToolCall(
          { context: call.context, kind: ParkKind.DEFERRED },
          { timeoutMs: TIMEOUT_MS },
        );
        emit('ParkToolCall', { toolCallId: call.context.toolCallId, created: parked.created });
        return;
      }
      default:
        throw new Error('DecideToolCall answered without a decision');
    }
  }

  /**
   * Hands the sidecar the parked call's result: it runs the result controls
   * and publishes it once (and sends its afterToolCall notification).
   */
  async publish(call: ToolCall, result: ToolResult): Promise<void> {
    const res = await this.#client.publishDeferredResult(
      { toolCallId: call.context.toolCallId, result },
      { timeoutMs: TIMEOUT_MS },
    );
    emit('PublishDeferredResult', {
      toolCallId: call.context.toolCallId,
      published: res.published,
      content: res.finalResult?.content,
    });
  }
}

/** A hook with onError: block failed: the runtime applies nothing of the call. */
class ModifyBlockedError extends Error {
  override readonly name = 'ModifyBlockedError';
}

/** The search tool: as many results as `limit` asks for. */
function search(args: SearchArgs): string {
  return `${args.limit} results for ${args.query}`;
}

/** The result members the loop reads, as the sidecar composed them. */
interface ModifyResult {
  readonly messages?: JsonObject[];
  readonly args?: SearchArgs;
  readonly content?: string;
  readonly isError?: boolean;
  readonly stop?: boolean;
}

/**
 * A small agent loop with a scripted model, shaped by the operation's
 * modifying hooks. Each iteration calls Modify at transformContext and uses
 * the messages it answers from then on, takes the scripted model's turn,
 * calls Modify at beforeToolCall for the turn's tool call and runs the tool
 * with the arguments it answers, then calls Modify at shouldStopAfterTurn and
 * stops when told. The contexts are JSON objects named as hookbus-hooks.md
 * names them.
 */
class AgentLoop {
  readonly #client: HookClient;
  #messages: JsonObject[];
  #ids = 0;

  constructor(client: HookClient) {
    this.#client = client;
    this.#messages = [this.#message({ role: 'user', content: PROMPT })];
  }

  #message(fields: JsonObject): JsonObject {
    this.#ids += 1;
    return { id: `${OPERATION_ID}-loop-${this.#ids}`, ...fields };
  }

  /**
   * Runs the point's hooks and answers their composed result. A `blocked`
   * answer throws ModifyBlockedError: the caller applies nothing (fail closed).
   */
  async modify(
    point: ModifyPoint,
    context: JsonObject & { iteration: number },
  ): Promise<ModifyResult> {
    const res = await this.#client.modify(
      { operationId: OPERATION_ID, point, contextJson: JSON.stringify(context) },
      { timeoutMs: TIMEOUT_MS },
    );
    const name = pointName(point);
    const { iteration } = context;
    const outcome = res.outcome;
    if (outcome.case === 'blocked') {
      const { hookId, errorCode, message } = outcome.value;
      emit('Modify.blocked', { point: name, iteration, hookId, errorCode, message });
      throw new ModifyBlockedError(`${name} blocked by ${hookId}: ${message}`);
    }
    if (outcome.case !== 'resultJson') throw new Error('Modify answered without a result');
    const result = JSON.parse(outcome.value) as ModifyResult;
    const details =
      point === ModifyPoint.SHOULD_STOP_AFTER_TURN ? { stop: result.stop ?? false } : {};
    const changed = Object.keys(result).sort();
    emit('Modify', {
      point: name,
      iteration,
      changed,
      ...details,
      outcomes: outcomes(res.outcomes),
    });
    return result;
  }

  async run(): Promise<void> {
    for (const [index, turn] of SCRIPT.entries()) {
      const iteration = index + 1;
      const transformed = await this.modify(ModifyPoint.TRANSFORM_CONTEXT, {
        messages: this.#messages,
        iteration,
      });
      // The hooks' messages replace the runtime's: the card number is gone for good.
      this.#messages = transformed.messages ?? this.#messages;

      const assistant = this.#message({ role: 'assistant', content: turn.text });
      this.#messages.push(assistant);
      if (turn.search !== undefined) {
        const call = { id: `${OPERATION_ID}-loop-call-${iteration}`, name: 'search' };
        assistant.toolCalls = [{ ...call, arguments: turn.search }];
        this.#messages.push(await this.#callTool(call, turn.search, iteration));
      }

      const stop = await this.modify(ModifyPoint.SHOULD_STOP_AFTER_TURN, {
        messages: this.#messages,
        iteration,
        hadToolCalls: turn.search !== undefined,
      });
      if (stop.stop === true) {
        emit('AgentLoop.stopped', { iteration, by: 'shouldStopAfterTurn' });
        return;
      }
      if (turn.search === undefined) {
        emit('AgentLoop.stopped', { iteration, by: 'noToolCalls' });
        return;
      }
    }
    throw new Error('the scripted model has no more turns');
  }

  /** Runs a tool call as the beforeToolCall hooks say, and answers its result message. */
  async #callTool(
    call: { id: string; name: string },
    args: SearchArgs,
    iteration: number,
  ): Promise<JsonObject> {
    const before = await this.modify(ModifyPoint.BEFORE_TOOL_CALL, {
      toolCall: call,
      args,
      iteration,
    });
    let content: string;
    let isError = false;
    if (before.content !== undefined || before.isError === true) {
      // A hook answered in the tool's place: the tool must not run.
      content = before.content ?? '';
      isError = before.isError ?? false;
      emit('Tool.skipped', { name: call.name, content, isError });
    } else {
      const rewritten = before.args ?? args;
      content = search(rewritten);
      emit('Tool', { name: call.name, limit: rewritten.limit, content });
    }
    return this.#message({
      role: 'toolResult',
      toolCallId: call.id,
      toolName: call.name,
      content,
      isError,
    });
  }
}

async function main(): Promise<void> {
  const client = createClient(HookService, grpcTransport(ADDRESS));
  await registerInvalidHook(client);

  const registered = await client.registerHooks(
    { operationId: OPERATION_ID, hooks: hooks() },
    { timeoutMs: TIMEOUT_MS },
  );
  emit('RegisterHooks', { operationId: OPERATION_ID, hookCount: registered.hookCount });

  const handlers = new HandlerStream(client, [OPERATION_ID]);
  let notifier: Notifier | undefined;
  try {
    await handlers.waitAttached();
    notifier = new Notifier(client);
    const runtime = new Runtime(client, notifier);

    const step = {
      agentId: AGENT_ID,
      operationId: OPERATION_ID,
      userId: USER_ID,
      stepIndex: 0,
      stepType: 'call_tool',
    };
    await runtime.dispatch(create(HookEventSchema, { event: { case: 'beforeStep', value: step } }));

    const read = toolCall(
      'read',
      'fs',
      'readFile',
      { path: 'notes/todo.md' },
      0,
      Executor.CLIENT,
      true,
    );
    const remove = toolCall(
      'delete',
      'fs',
      'deleteFile',
      { path: 'notes/todo.md' },
      1,
      Executor.SERVER,
    );
    const search = toolCall(
      'search',
      'web',
      'search',
      { query: 'agenthooks sidecar' },
      2,
      Executor.SERVER,
    );
    for (const call of [read, remove, search]) await runtime.decide(call);

    // The step's notifications reach the receivers before its afterStep.
    await notifier.flush();
    await runtime.dispatch(
      create(HookEventSchema, {
        event: {
          case: 'afterStep',
          value: { ...step, steps: 1, toolCalls: 3, totalToolCalls: 3 },
        },
      }),
    );

    await runtime.publish(
      read,
      create(ToolResultSchema, { content: READ_RESULT, success: true, executionTime: 12 }),
    );
    await notifier.close();

    const withLoop = await client.registerHooks(
      { operationId: OPERATION_ID, hooks: modifyingHooks() },
      { timeoutMs: TIMEOUT_MS },
    );
    emit('RegisterHooks', { operationId: OPERATION_ID, hookCount: withLoop.hookCount });
    await new AgentLoop(client).run();

    const done = await client.completeOperation(
      {
        event: {
          agentId: AGENT_ID,
          operationId: OPERATION_ID,
          userId: USER_ID,
          reason: 'done',
          status: 'done',
          totalSteps: 1,
          totalToolCalls: 3,
        },
      },
      { timeoutMs: TIMEOUT_MS },
    );
    emit('CompleteOperation', {
      reason: 'done',
      handlersDropped: done.handlersDropped,
      outcomes: outcomes(done.outcomes),
    });
    await handlers.close();
  } catch (e) {
    notifier?.abort();
    handlers.abort();
    throw e;
  }
}

main().catch((e: unknown) => {
  console.error(`agenthooks example failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
});
