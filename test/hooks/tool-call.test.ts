/** @module Unit tests of the tool-call context checks: required fields and tool name length. */
import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import {
  Executor,
  HookEventSchema,
  ToolCallContextSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import { routeOf } from '../../src/hooks/dispatch.js';
import {
  IDENTIFIER_TOO_LONG,
  MAX_TOOL_NAME_BYTES,
  validateToolCallContext,
} from '../../src/hooks/tool-call.js';

function context(identifier: string, apiName: string) {
  return create(ToolCallContextSchema, {
    toolCallId: 'call-1',
    operationId: 'op-1',
    identifier,
    apiName,
    executor: Executor.SERVER,
  });
}

const longest = 'x'.repeat(MAX_TOOL_NAME_BYTES);
// 'é' is two UTF-8 bytes: half as many characters are already over the limit.
const tooLongInBytes = 'é'.repeat(MAX_TOOL_NAME_BYTES / 2 + 1);

describe('validateToolCallContext', () => {
  it('accepts an identifier and apiName of the longest allowed length', () => {
    expect(() => validateToolCallContext(context(longest, longest), 'event.context')).not.toThrow();
  });

  it.each([
    ['identifier', context(`${longest}x`, 'search'), 'event.context.identifier'],
    ['identifier in UTF-8 bytes', context(tooLongInBytes, 'search'), 'event.context.identifier'],
    ['apiName', context('web', `${longest}x`), 'event.context.apiName'],
  ])('refuses a too long %s with IDENTIFIER_TOO_LONG', (_, ctx, field) => {
    expect(() => validateToolCallContext(ctx, 'event.context')).toThrow(
      expect.objectContaining({ reason: IDENTIFIER_TOO_LONG, field }),
    );
  });
});

describe('routeOf', () => {
  it('refuses a dispatched tool event whose tool name is too long', () => {
    const event = create(HookEventSchema, {
      event: { case: 'afterToolCall', value: { context: context('web', `${longest}x`) } },
    });
    expect(() => routeOf(event)).toThrow(
      expect.objectContaining({
        reason: IDENTIFIER_TOO_LONG,
        field: 'event.afterToolCall.context.apiName',
      }),
    );
  });

  it('routes a tool event with the longest allowed names', () => {
    const event = create(HookEventSchema, {
      event: { case: 'onToolCallError', value: { context: context(longest, longest) } },
    });
    expect(routeOf(event)).toMatchObject({ identifier: longest, apiName: longest });
  });
});
