/**
 * The canonical scenario of the framework adapters with the Vercel AI SDK:
 * `generateText` on a scripted model (a LanguageModelV3, spec v3: no network,
 * no weights) whose first step calls get_weather {"city":"Paris"} (id
 * call_weather_1) and whose second step answers "It is sunny in Paris.",
 * connected to the sidecar by the agenthooks adapter. It registers no hooks:
 * the caller registers them on the operation first.
 *
 * It prints one JSON line {"final":"<final text>","toolRuns":<n>} and exits 0,
 * or prints the error on stderr and exits 1. With --trace the line also holds
 * the tool's arguments (toolArgs) and the messages the model got at each step
 * (modelInputs: role and text) and their output limits (maxOutputTokens), and
 * a failed run prints it too, with `error` in place of `final`. Besides the
 * README's lines it asks the shouldStopAfterTurn hooks (hooks.stopWhen). With
 * --stream it runs streamText (the model streams the same script) instead of
 * generateText, with an onError that keeps the stream's error as the README
 * says; --stream-bare runs streamText without one. With --scenario mock it serves a
 * local handler that mocks every beforeToolCall call with "mocked weather".
 * --mock-bytes N makes the mock N bytes long. With --pause-after-attach it
 * prints {"attached":true} once its Handle
 * stream is attached and waits for a line on stdin before it runs.
 *
 *   npm run build:integrations   # builds the adapter into integrations/ts/dist
 *   node integrations/ts/test/canonical.mjs --target 127.0.0.1:PORT --operation-id ID
 */
import { parseArgs } from 'node:util';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { createAgentHooks, mockReply } from '../dist/integrations/ts/src/index.js';

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A LanguageModelV3 that answers from a script: a tool call, then text. */
class ScriptedModel {
  specificationVersion = 'v3';
  provider = 'scripted';
  modelId = 'scripted-weather';
  supportedUrls = {};
  /** The prompt of each call, as the model got it. */
  prompts = [];
  /** The output limit of each call. */
  maxOutputTokens = [];

  async doGenerate(options) {
    this.prompts.push(options.prompt);
    this.maxOutputTokens.push(options.maxOutputTokens ?? null);
    if (this.prompts.length === 1) {
      return {
        content: [
          {
            type: 'tool-call',
            toolCallId: 'call_weather_1',
            toolName: 'get_weather',
            input: JSON.stringify({ city: 'Paris' }),
          },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: USAGE,
        warnings: [],
      };
    }
    if (this.prompts.length === 2) {
      return {
        content: [{ type: 'text', text: 'It is sunny in Paris.' }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: USAGE,
        warnings: [],
      };
    }
    throw new Error('the scripted model has no more steps');
  }

  /** The same script as a stream of parts (for streamText). */
  async doStream(options) {
    const { content, finishReason, usage } = await this.doGenerate(options);
    const parts = [{ type: 'stream-start', warnings: [] }];
    for (const part of content) {
      if (part.type === 'text') {
        parts.push({ type: 'text-start', id: 'text-1' });
        parts.push({ type: 'text-delta', id: 'text-1', delta: part.text });
        parts.push({ type: 'text-end', id: 'text-1' });
      } else {
        parts.push(part);
      }
    }
    parts.push({ type: 'finish', finishReason, usage });
    return {
      stream: new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      }),
    };
  }
}

/** The model's prompt as the spec's messages: role and text (tool results as their text). */
function promptText(prompt) {
  return prompt.map((m) => {
    if (typeof m.content === 'string') return { role: m.role, content: m.content };
    const text = m.content
      .map((p) => {
        if (p.type === 'text') return p.text;
        if (p.type === 'tool-result') return String(p.output?.value ?? '');
        if (p.type === 'tool-call') return '';
        return '';
      })
      .join('');
    return { role: m.role, content: text };
  });
}

async function main() {
  const { values } = parseArgs({
    options: {
      target: { type: 'string' },
      'operation-id': { type: 'string' },
      scenario: { type: 'string', default: 'canonical' },
      trace: { type: 'boolean', default: false },
      stream: { type: 'boolean', default: false },
      'stream-bare': { type: 'boolean', default: false },
      'user-id': { type: 'string', default: 'user-1' },
      'pause-after-attach': { type: 'boolean', default: false },
      'mock-bytes': { type: 'string', default: '' },
    },
  });
  if (!values.target) throw new Error('--target is required');
  if (values.scenario !== 'canonical' && values.scenario !== 'mock') {
    throw new Error(`unknown --scenario ${values.scenario}`);
  }

  const hooks = await createAgentHooks({
    target: values.target,
    operationId: values['operation-id'],
    userId: values['user-id'],
    agentId: 'agent-1',
    identifier: 'weather',
    handle:
      values.scenario === 'mock'
        ? (call) =>
            call.event?.event.case === 'beforeToolCall'
              ? mockReply(
                  values['mock-bytes'] === ''
                    ? 'mocked weather'
                    : 'x'.repeat(Number(values['mock-bytes'])),
                )
              : undefined
        : undefined,
  });

  if (values['pause-after-attach']) {
    // For a test that breaks the connection now: go on at a line on stdin.
    console.log(JSON.stringify({ attached: true }));
    await new Promise((resolve) => process.stdin.once('data', resolve));
    process.stdin.pause();
  }

  const model = new ScriptedModel();
  const toolArgs = [];
  let toolRuns = 0;
  const tools = {
    get_weather: tool({
      description: 'The weather in a city.',
      inputSchema: jsonSchema({
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
      }),
      execute: async ({ city }) => {
        toolRuns += 1;
        toolArgs.push({ city });
        return `sunny in ${city}`;
      },
    }),
  };

  const trace = () => ({
    toolArgs,
    modelInputs: model.prompts.map(promptText),
    maxOutputTokens: model.maxOutputTokens,
  });
  let result;
  try {
    const settings = {
      model: hooks.model(model),
      tools: hooks.tools(tools),
      prepareStep: hooks.prepareStep,
      onStepFinish: hooks.onStepFinish,
      stopWhen: [stepCountIs(4), hooks.stopWhen],
      prompt: 'What is the weather in Paris?',
    };
    result = await hooks.run(async () => {
      if (values['stream-bare']) return { text: await streamText(settings).text };
      if (!values.stream) return generateText(settings);
      // streamText answers at once; the run ends when its text is complete.
      let failure;
      const stream = streamText({
        ...settings,
        onError: ({ error }) => {
          failure ??= error;
        },
      });
      const text = await stream.text;
      if (failure !== undefined) throw failure;
      return { text };
    });
  } catch (e) {
    if (values.trace) {
      const error = e instanceof Error ? e.message : String(e);
      console.log(JSON.stringify({ error, toolRuns, ...trace() }));
    }
    throw e;
  }
  const line = { final: result.text, toolRuns };
  console.log(JSON.stringify(values.trace ? { ...line, ...trace() } : line));
}

main().catch((e) => {
  console.error(`canonical (ai-sdk): ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
});
