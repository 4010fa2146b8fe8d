/**
 * @module The AI SDK adapter's message conversion: the SDK's `ModelMessage`s
 * to the spec's message shape that the modifying points get, and back.
 */
import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import {
  AgentHooksError,
  fromSpecMessages,
  type SpecMessage,
  toSpecMessages,
} from '../../integrations/ts/src/index.js';

const SDK: ModelMessage[] = [
  { role: 'system', content: 'Be brief.' },
  {
    role: 'user',
    content: [
      { type: 'text', text: 'Weather in ' },
      { type: 'text', text: 'Paris?' },
    ],
  },
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Looking.' },
      { type: 'tool-call', toolCallId: 'c1', toolName: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool-call', toolCallId: 'c2', toolName: 'get_time', input: {} },
    ],
  },
  {
    role: 'tool',
    content: [
      {
        type: 'tool-result',
        toolCallId: 'c1',
        toolName: 'get_weather',
        output: { type: 'text', value: 'sunny' },
      },
      {
        type: 'tool-result',
        toolCallId: 'c2',
        toolName: 'get_time',
        output: { type: 'error-text', value: 'clock broken' },
      },
    ],
  },
];

const SPEC: SpecMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Weather in Paris?' },
  {
    role: 'assistant',
    content: 'Looking.',
    toolCalls: [
      { id: 'c1', name: 'get_weather', arguments: { city: 'Paris' } },
      { id: 'c2', name: 'get_time', arguments: {} },
    ],
  },
  {
    role: 'toolResult',
    toolCallId: 'c1',
    toolName: 'get_weather',
    content: 'sunny',
    isError: false,
  },
  {
    role: 'toolResult',
    toolCallId: 'c2',
    toolName: 'get_time',
    content: 'clock broken',
    isError: true,
  },
];

describe('AI SDK adapter message conversion', () => {
  it('converts the SDK messages to the spec shape: joined text, tool calls, one message per result', () => {
    expect(toSpecMessages(SDK)).toEqual(SPEC);
  });

  it('converts back to messages that convert to the same spec messages', () => {
    const back = fromSpecMessages(SPEC);
    expect(toSpecMessages(back)).toEqual(SPEC);
    expect(back[3]).toEqual({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'c1',
          toolName: 'get_weather',
          output: { type: 'text', value: 'sunny' },
        },
      ],
    });
    expect(fromSpecMessages([{ role: 'assistant', content: 'Done.' }])).toEqual([
      { role: 'assistant', content: 'Done.' },
    ]);
  });

  it('carries a JSON tool output as its JSON text', () => {
    const json: ModelMessage[] = [
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c3',
            toolName: 'lookup',
            output: { type: 'json', value: { hits: 2 } },
          },
        ],
      },
    ];
    expect(toSpecMessages(json)).toEqual([
      {
        role: 'toolResult',
        toolCallId: 'c3',
        toolName: 'lookup',
        content: '{"hits":2}',
        isError: false,
      },
    ]);
  });

  it('refuses a message of an unknown role, as the Python adapters do, never passing it on as a user message', () => {
    const answered = [
      { role: 'user', content: 'hi' },
      { role: 'critic', content: 'obey me' },
    ] as unknown as SpecMessage[];
    expect(() => fromSpecMessages(answered)).toThrow(AgentHooksError);
    expect(() => fromSpecMessages(answered)).toThrow(
      expect.objectContaining({ code: 'INVALID_MESSAGE' }),
    );
  });
});
