/**
 * @module The AI SDK adapter's tool wrapper in-process: the real
 * `generateText` loop of `ai` on a scripted model (a LanguageModelV3: no
 * network, no weights), connected by the adapter to one real sidecar, whose
 * controls are webhooks on one real receiver. Each test registers its hooks
 * on its own operation.
 */
import { create } from '@bufbuild/protobuf';
import { type Client, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { generateText, jsonSchema, type ModelMessage, stepCountIs, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema, ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  AgentHooks,
  createAgentHooks,
  type HandleFunction,
  mockReply,
} from '../../integrations/ts/src/index.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const INPUT_SCHEMA = jsonSchema<{ city: string }>({
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
});
/** How long a handler call waits for the other one; far below --handler-timeout (10 s). */
const BARRIER_MS = 5_000;

/** A LanguageModelV3 whose first step calls `get_weather` once per id of `calls`, then answers "Done.". */
class ScriptedModel {
  readonly specificationVersion = 'v3';
  readonly provider = 'scripted';
  readonly modelId = 'scripted-weather';
  readonly supportedUrls = {};
  /** The prompt of each call, as the model got it. */
  readonly prompts: ModelMessage[][] = [];

  constructor(private readonly calls: readonly string[]) {}

  async doGenerate(options: { prompt: ModelMessage[] }) {
    this.prompts.push(options.prompt);
    if (this.prompts.length === 1) {
      return {
        content: this.calls.map((toolCallId) => ({
          type: 'tool-call' as const,
          toolCallId,
          toolName: 'get_weather',
          input: JSON.stringify({ city: 'Paris' }),
        })),
        finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
        usage: USAGE,
        warnings: [],
      };
    }
    return {
      content: [{ type: 'text' as const, text: 'Done.' }],
      finishReason: { unified: 'stop' as const, raw: 'stop' },
      usage: USAGE,
      warnings: [],
    };
  }

  doStream(): never {
    throw new Error('the scripted model does not stream');
  }

  /** The tool results the model read at its second call. */
  toolResults(): unknown[] {
    return (this.prompts[1] ?? [])
      .filter((m) => m.role === 'tool')
      .flatMap((m) => (m.content as { output: { value: unknown } }[]).map((p) => p.output.value));
  }
}

describe('the AI SDK adapter, on tools', () => {
  let sidecar: SidecarProcess;
  let receiver: Receiver;
  let client: Client<typeof HookService>;

  beforeAll(async () => {
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    sidecar = await startSidecar({ http: false });
    client = createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
  }, 60_000);

  afterAll(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
  });

  const register = (operationId: string, hooks: Hook[]) =>
    client.registerHooks({ operationId, hooks }, { timeoutMs: 10_000 });

  /** Runs generateText on `model` with `tools`, through hooks on `operationId`. */
  async function run(
    operationId: string,
    model: ScriptedModel,
    tools: Parameters<AgentHooks['tools']>[0],
    handle?: HandleFunction,
  ) {
    const hooks = await createAgentHooks({
      target: sidecar.grpc,
      operationId,
      userId: 'user-1',
      identifier: 'weather',
      handle,
    });
    return hooks.run(() =>
      generateText({
        model: hooks.model(model as unknown as Parameters<AgentHooks['model']>[0]),
        tools: hooks.tools(tools),
        prepareStep: hooks.prepareStep,
        onStepFinish: hooks.onStepFinish,
        stopWhen: stepCountIs(3),
        prompt: 'What is the weather in Paris?',
      }),
    );
  }

  it('runs an async generator tool to its end: the result control judges its last value, the model reads that', async () => {
    const op = 'op-ai-tools-generator';
    await register(op, [
      create(HookSchema, {
        id: 'check-result',
        type: HookType.AFTER_TOOL_CALL,
        webhook: {
          url: `${receiver.url}/result/${op}`,
          responseHandling: ResponseHandling.TOOL_CALL,
        },
      }),
    ]);
    const model = new ScriptedModel(['call_1']);
    const yielded: string[] = [];
    const result = await run(op, model, {
      get_weather: tool({
        description: 'The weather in a city, as it comes in.',
        inputSchema: INPUT_SCHEMA,
        async *execute({ city }) {
          for (const part of ['looking', `sunny in ${city}`]) {
            yielded.push(part);
            yield part;
          }
        },
      }),
    });
    expect(result.text).toBe('Done.');
    expect(yielded).toEqual(['looking', 'sunny in Paris']);
    const judged = receiver.requests
      .filter((r) => r.path === `/result/${op}`)
      .map((r) => (r.json as { result: { content: string } }).result.content);
    expect(judged).toEqual(['sunny in Paris']);
    expect(model.toolResults()).toEqual(['sunny in Paris']);
  });

  it('serves local handler calls concurrently: both tool calls of a step reach the handler at once, and both get its mock', async () => {
    const op = 'op-ai-tools-concurrent';
    await register(op, [
      create(HookSchema, { id: 'mock-weather', type: HookType.BEFORE_TOOL_CALL, handler: true }),
    ]);
    let arrived = 0;
    let bothArrived = () => {};
    const both = new Promise<void>((resolve) => {
      bothArrived = resolve;
    });
    let met = 0;
    const handle: HandleFunction = async () => {
      arrived += 1;
      if (arrived === 2) bothArrived();
      let timer: NodeJS.Timeout | undefined;
      const waited = await Promise.race([
        both.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), BARRIER_MS);
        }),
      ]);
      clearTimeout(timer);
      if (waited) met += 1;
      return mockReply('mocked weather');
    };
    let toolRuns = 0;
    const model = new ScriptedModel(['call_1', 'call_2']);
    await run(
      op,
      model,
      {
        get_weather: tool({
          description: 'The weather in a city.',
          inputSchema: INPUT_SCHEMA,
          execute: async ({ city }) => {
            toolRuns += 1;
            return `sunny in ${city}`;
          },
        }),
      },
      handle,
    );
    expect(met).toBe(2);
    expect(toolRuns).toBe(0);
    expect(model.toolResults()).toEqual(['mocked weather', 'mocked weather']);
  });

  it('refuses a tool without execute (provider-executed or client-side): its calls could not be decided', () => {
    const hooks = new AgentHooks({ target: sidecar.grpc, userId: 'user-1' });
    expect(() =>
      hooks.tools({
        web_search: tool({ description: 'Runs at the provider.', inputSchema: INPUT_SCHEMA }),
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'UNDECIDABLE_TOOL',
        message: expect.stringContaining('tool "web_search" has no execute'),
      }),
    );
  });
});
