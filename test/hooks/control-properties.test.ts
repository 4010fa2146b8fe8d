/**
 * @module Property tests of the control path (upstream contract §3): the
 * response parser and the decision evaluator, over generated response bodies,
 * statuses and failures. The evaluator runs in process, with a fake sender
 * implementing `post` over real byte streams, and its answer is compared
 * with the contract's table written out independently here.
 */
import { Readable } from 'node:stream';
import { create } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DenyClassification } from '../../gen/agenthooks/v1/decisions_pb.js';
import { BeforeToolCallEventSchema, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  type Hook,
  HookSchema,
  OnError,
  ResponseHandling,
  type Webhook,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { parseControlResponse, RESPONSE_MAX_BYTES } from '../../src/delivery/control.js';
import {
  type DeliveryErrorCode,
  type DeliveryFailure,
  deliveryFailure,
  type WebhookResponse,
  type WebhookSender,
} from '../../src/delivery/webhook.js';
import {
  defaultDenyReason,
  evaluateControls,
  HOOK_CONTROL_ERROR,
} from '../../src/hooks/control.js';
import type { DispatchDeps } from '../../src/hooks/dispatch.js';
import type { HookRegistry } from '../../src/hooks/registry.js';
import { silentLogger } from '../../src/log.js';

/** Runs per property: bounded so the suite stays fast. */
const NUM_RUNS = 400;

/** Any JSON value, including objects with `decision`, `reason` and `__proto__` keys. */
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom('allow', 'deny', 'Allow', 'allow ', ''),
    fc.string({ maxLength: 8 }),
    fc.array(tie('value'), { maxLength: 3 }),
    tie('object'),
  ),
  object: fc.dictionary(
    fc.constantFrom('decision', 'reason', '__proto__', 'constructor', 'hookSpecificOutput', 'x'),
    tie('value'),
    { maxKeys: 4 },
  ),
})).value;

/** Response bodies: JSON text of any value, decision-shaped objects, and text that is not JSON. */
const body = fc.oneof(
  jsonValue.map((v) => JSON.stringify(v)),
  fc
    .record(
      {
        decision: fc.oneof(fc.constantFrom('allow', 'deny'), jsonValue),
        reason: fc.oneof(fc.string({ maxLength: 10 }), jsonValue),
      },
      { requiredKeys: [] },
    )
    .map((o) => JSON.stringify(o)),
  fc.constantFrom('', ' ', 'null', '{"decision":"allow"', '{"__proto__":{"decision":"allow"}}'),
  fc.string({ maxLength: 20 }),
);

describe('parseControlResponse', () => {
  it('yields allow only for a JSON object whose own decision is exactly "allow"', () => {
    fc.assert(
      fc.property(body, (text) => {
        const parsed = parseControlResponse(text);
        let value: unknown;
        let isJson = true;
        try {
          value = JSON.parse(text);
        } catch {
          isJson = false;
        }
        const ownAllow =
          isJson &&
          typeof value === 'object' &&
          value !== null &&
          !Array.isArray(value) &&
          Object.hasOwn(value, 'decision') &&
          (value as Record<string, unknown>).decision === 'allow';
        const isAllow = parsed.status === 'success' && parsed.decision.decision === 'allow';
        expect(isAllow).toBe(ownAllow);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('never throws, whatever the text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), body), (text) => {
        expect(['success', 'ignored', 'error']).toContain(parseControlResponse(text).status);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('refuses a body over the limit as response_too_large, whatever it holds', () => {
    const padded = `{"decision":"allow","pad":"${'x'.repeat(RESPONSE_MAX_BYTES)}"}`;
    expect(parseControlResponse(padded)).toEqual({ status: 'error', code: 'response_too_large' });
  });
});

/** How one control's receiver answers. */
type Answer =
  | { readonly kind: 'response'; readonly status: number; readonly body: string }
  | { readonly kind: 'failure'; readonly code: DeliveryErrorCode; readonly status?: number };

const answer: fc.Arbitrary<Answer> = fc.oneof(
  fc.record({
    kind: fc.constant('response' as const),
    status: fc.constantFrom(200, 201, 204, 299),
    body,
  }),
  fc.record({
    kind: fc.constant('failure' as const),
    code: fc.constant('http_error' as const),
    status: fc.constantFrom(302, 400, 500, 503),
  }),
  fc.record({
    kind: fc.constant('failure' as const),
    code: fc.constantFrom<DeliveryErrorCode>(
      'network_error',
      'timeout',
      'destination_denied',
      'configuration',
    ),
  }),
);

/** One generated control: its failure mode and its receiver's answer. */
interface GeneratedControl {
  readonly onError: OnError;
  readonly answer: Answer;
}

const controls = fc.array(
  fc.record({ onError: fc.constantFrom(OnError.CONTINUE, OnError.BLOCK), answer }),
  { maxLength: 5 },
);

/** The contract's table: what the evaluation of `list` must answer. */
function expected(
  list: readonly GeneratedControl[],
):
  | { decision: 'allow' }
  | { decision: 'deny'; index: number; reason: string; classification: DenyClassification } {
  for (const [index, control] of list.entries()) {
    const verdict = controlVerdict(control.answer);
    if (verdict.kind === 'deny') {
      return {
        decision: 'deny',
        index,
        reason: verdict.reason || defaultDenyReason(HookType.BEFORE_TOOL_CALL),
        classification: DenyClassification.HOOK_DENIED,
      };
    }
    if (verdict.kind === 'error' && control.onError === OnError.BLOCK) {
      return {
        decision: 'deny',
        index,
        reason: HOOK_CONTROL_ERROR,
        classification: DenyClassification.HOOK_CONTROL_ERROR,
      };
    }
  }
  return { decision: 'allow' };
}

/** One row of the table: allow/ignored go on, deny stops, a failure follows onError. */
function controlVerdict(
  a: Answer,
): { kind: 'next' } | { kind: 'deny'; reason: string } | { kind: 'error' } {
  if (a.kind === 'failure') return { kind: 'error' };
  const text = a.status === 204 ? '' : a.body;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'next' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { kind: 'next' };
  const record = value as Record<string, unknown>;
  if (!Object.hasOwn(record, 'decision')) return { kind: 'next' };
  if (record.decision === 'allow') return { kind: 'next' };
  if (record.decision !== 'deny') return { kind: 'error' };
  if (!Object.hasOwn(record, 'reason')) return { kind: 'deny', reason: '' };
  return typeof record.reason === 'string'
    ? { kind: 'deny', reason: record.reason }
    : { kind: 'error' };
}

/** A response body stream like undici's: iterable bytes with `dump()`. */
function responseBody(text: string): WebhookResponse['body'] {
  const stream = Readable.from(text === '' ? [] : [Buffer.from(text, 'utf8')]);
  return Object.assign(stream, {
    dump: async () => {
      stream.resume();
    },
  }) as unknown as WebhookResponse['body'];
}

/** A sender whose `post` answers each control's URL as generated. */
function fakeSender(answers: ReadonlyMap<string, Answer>): WebhookSender {
  const post = async (webhook: Webhook): Promise<WebhookResponse | DeliveryFailure> => {
    const startedAt = performance.now();
    const a = answers.get(webhook.url) as Answer;
    if (a.kind === 'failure') return deliveryFailure(a.code, startedAt, undefined, a.status);
    return {
      ok: true,
      status: a.status,
      headers: {},
      body: responseBody(a.body),
      startedAt,
      failure: () => deliveryFailure('network_error', startedAt),
    };
  };
  return { post } as unknown as WebhookSender;
}

describe('evaluateControls', () => {
  const event = create(BeforeToolCallEventSchema, {
    context: { operationId: 'op', toolCallId: 'call-1', identifier: 'fs', apiName: 'read' },
  });

  it("answers as the contract's table says, for every sequence of control answers", async () => {
    await fc.assert(
      fc.asyncProperty(controls, fc.boolean(), async (list, fromEnvironment) => {
        const answers = new Map<string, Answer>();
        const hooks: Hook[] = list.map((c, i) => {
          const url = `https://control-${i}.test/decide`;
          answers.set(url, c.answer);
          return create(HookSchema, {
            id: `c${i}`,
            type: HookType.BEFORE_TOOL_CALL,
            webhook: { url, responseHandling: ResponseHandling.TOOL_CALL, onError: c.onError },
          });
        });
        // The same table holds for caller hooks and for environment hooks.
        const registry = {
          hooksOf: async () => ({ hooks: fromEnvironment ? [] : hooks }),
        } as unknown as HookRegistry;
        const deps = {
          registry,
          sender: fakeSender(answers),
          logger: silentLogger,
          environmentHooks: () => (fromEnvironment ? hooks : []),
          handlers: undefined,
        } as unknown as DispatchDeps;
        const { decision, outcomes } = await evaluateControls(
          deps,
          { type: HookType.BEFORE_TOOL_CALL, event },
          ['op'],
          new AbortController().signal,
        );
        const want = expected(list);
        if (want.decision === 'allow') {
          expect(decision.outcome.case).toBe('allow');
          expect(outcomes).toHaveLength(list.length);
          return;
        }
        expect(decision.outcome.case).toBe('deny');
        const deny = decision.outcome.case === 'deny' ? decision.outcome.value : undefined;
        expect(deny?.reason).toBe(want.reason);
        expect(deny?.classification).toBe(want.classification);
        expect(deny?.hookId).toBe(`c${want.index}`);
        // Controls after the deciding one never ran.
        expect(outcomes).toHaveLength(want.index + 1);
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
