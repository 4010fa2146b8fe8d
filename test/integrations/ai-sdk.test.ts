/**
 * @module End-to-end: the Vercel AI SDK adapter (integrations/ts) runs the
 * real `generateText` loop of `ai` on a scripted model, in a child process
 * (`integrations/ts/test/canonical.mjs`), against one real sidecar and one
 * real receiver; each scenario registers its hooks on its own operation.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusedUrl } from '../support/receiver.js';
import { REPO_ROOT } from '../support/sidecar.js';
import {
  awaitedPayloads,
  DENY_REASON,
  type Harness,
  MOCK_CONTENT,
  notifications,
  PAYLOAD_MAX_OUTPUT_TOKENS,
  REDACTED,
  REWRITTEN_CITY,
  runRunner,
  type Scenario,
  startHarness,
  toolContext,
  until,
} from './runner-harness.js';

const RUNNER = join(REPO_ROOT, 'integrations', 'ts', 'test', 'canonical.mjs');

describe('Vercel AI SDK adapter', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness();
  });

  afterAll(async () => {
    await harness?.close();
  });

  async function run(operationId: string, scenario: Scenario) {
    await harness.register(operationId, scenario);
    const mode = scenario === 'mock' ? 'mock' : 'canonical';
    const exit = await runRunner(
      process.execPath,
      [
        RUNNER,
        '--target',
        harness.sidecar.grpc,
        '--operation-id',
        operationId,
        '--trace',
        '--scenario',
        mode,
      ],
      REPO_ROOT,
    );
    expect(exit.stderr).toBe('');
    expect(exit.code).toBe(0);
    return exit.line;
  }

  it('runs the canonical scenario and sends each event with the spec fields, in order', async () => {
    const op = 'op-ai-canonical';
    const line = await run(op, 'canonical');
    expect(line).toMatchObject({ final: 'It is sunny in Paris.', toolRuns: 1 });
    await until(() => harness.requests(op).length === 7, 'seven notifications');
    const { awaited, beforeToolCall } = notifications(harness.requests(op));
    expect(awaited).toEqual(awaitedPayloads(op, { content: 'sunny in Paris', success: true }));
    expect(beforeToolCall).toEqual([
      {
        ...toolContext(op, { city: 'Paris' }),
        hookId: 'events-beforeToolCall',
        hookType: 'beforeToolCall',
      },
    ]);
  });

  it('a denying control: the tool never runs and the model gets the blocked result', async () => {
    const line = await run('op-ai-deny', 'deny');
    expect(line?.toolRuns).toBe(0);
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain(DENY_REASON);
  });

  it('an allowing control: the tool runs once with the original arguments', async () => {
    const line = await run('op-ai-allow', 'allow');
    expect(line).toMatchObject({ toolRuns: 1, toolArgs: [{ city: 'Paris' }] });
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain('sunny in Paris');
  });

  it("a local handler's mock: the tool never runs and the mock is its result", async () => {
    const op = 'op-ai-mock';
    const line = await run(op, 'mock');
    expect(line?.toolRuns).toBe(0);
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain(MOCK_CONTENT);
    const { awaited } = notifications(harness.requests(op));
    expect(awaited[1]).toMatchObject({ mocked: true, result: { content: MOCK_CONTENT } });
  });

  it('a beforeToolCall modifying hook rewrites the argument the tool gets', async () => {
    const line = await run('op-ai-rewrite', 'rewrite');
    expect(line).toMatchObject({ toolRuns: 1, toolArgs: [{ city: REWRITTEN_CITY }] });
  });

  it('a transformContext hook redacts: the model never sees the original text', async () => {
    const line = await run('op-ai-redact', 'redact');
    expect(line?.toolRuns).toBe(1);
    const seen = JSON.stringify(line?.modelInputs);
    expect(seen).toContain(REDACTED);
    expect(seen).not.toContain('Paris');
  });

  it('a beforeProviderPayload hook changes the provider call options the model gets', async () => {
    const line = await run('op-ai-payload', 'payload');
    expect(line).toMatchObject({ final: 'It is sunny in Paris.', toolRuns: 1 });
    expect(line?.maxOutputTokens).toEqual([PAYLOAD_MAX_OUTPUT_TOKENS, PAYLOAD_MAX_OUTPUT_TOKENS]);
    // The prompt went through the hook as JSON and back, and still reads the same.
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain('sunny in Paris');
  });

  it('a shouldStopAfterTurn hook stops the loop after the tool step', async () => {
    const line = await run('op-ai-stop', 'stop');
    expect(line).toMatchObject({ final: '', toolRuns: 1 });
    expect(line?.modelInputs).toHaveLength(1);
  });

  it('a modifying hook that must answer fails: the tool does not run, the run fails', async () => {
    const op = 'op-ai-blocked';
    await harness.register(op, 'blocked');
    const exit = await runRunner(
      process.execPath,
      [RUNNER, '--target', harness.sidecar.grpc, '--operation-id', op, '--trace'],
      REPO_ROOT,
    );
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toContain('agenthooks: Modify beforeToolCall blocked by hook policy-down');
    expect(exit.line).toMatchObject({ toolRuns: 0 });
    await until(
      () =>
        harness.requests(op).some((r) => (r.json as { hookType?: string }).hookType === 'onError'),
      'onError',
    );
    const { awaited } = notifications(harness.requests(op));
    expect(awaited.slice(-2)).toMatchObject([
      { hookType: 'onComplete', reason: 'error', status: 'error', operationId: op },
      { hookType: 'onError', reason: 'error', status: 'error', operationId: op },
    ]);
    expect((awaited.at(-1) as { errorMessage: string }).errorMessage).toContain('policy-down');
  });

  it('sidecar down: the tool does not run and the run fails naming agenthooks', async () => {
    const down = new URL(await refusedUrl()).host;
    const exit = await runRunner(
      process.execPath,
      [RUNNER, '--target', down, '--operation-id', 'op-ai-down', '--trace'],
      REPO_ROOT,
    );
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toMatch(/agenthooks/);
    expect(exit.stdout).not.toContain('toolRuns":1');
  });
});
