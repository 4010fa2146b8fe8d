/**
 * @module The AI SDK adapter used as the README shows it, with types: CI's
 * `tsc --noEmit` checks that a typed tool set, `generateText` and
 * `streamText` accept what the adapter hands them (nothing here runs; the
 * README snippet itself runs in readme-snippets.test.ts).
 */
import { generateText, jsonSchema, type LanguageModel, stepCountIs, streamText, tool } from 'ai';
import { createAgentHooks } from '../../integrations/ts/src/index.js';

const tools = {
  get_weather: tool({
    inputSchema: jsonSchema<{ city: string }>({
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
    }),
    execute: async ({ city }) => `sunny in ${city}`,
  }),
};

/** Runs one generation and one streamed generation through the adapter. */
export async function typedUsage(model: Exclude<LanguageModel, string>): Promise<string[]> {
  const hooks = await createAgentHooks({
    target: '127.0.0.1:50051',
    userId: 'user-1',
    agentId: 'agent-1',
    identifier: 'weather',
  });
  const result = await hooks.run(() =>
    generateText({
      model: hooks.model(model),
      tools: hooks.tools(tools),
      prepareStep: hooks.prepareStep,
      onStepFinish: hooks.onStepFinish,
      stopWhen: [stepCountIs(5), hooks.stopWhen],
      prompt: 'What is the weather in Paris?',
    }),
  );
  const streamed = await hooks.run(async () => ({
    text: await streamText({
      model: hooks.model(model),
      tools: hooks.tools(tools),
      prepareStep: hooks.prepareStep,
      onStepFinish: hooks.onStepFinish,
      prompt: 'What is the weather in Paris?',
    }).text,
  }));
  return [result.text, streamed.text];
}
