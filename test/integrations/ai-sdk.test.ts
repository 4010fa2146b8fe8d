/**
 * @module End-to-end: the Vercel AI SDK adapter (integrations/ts) runs the
 * real `generateText` loop of `ai` on a scripted model, in a child process
 * (`integrations/ts/test/canonical.mjs`), against one real sidecar and one
 * real receiver; each scenario registers its hooks on its own operation.
 * Besides the scenarios every adapter shows, the AI SDK maps
 * `beforeProviderPayload` and `shouldStopAfterTurn`.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/sidecar.js';
import {
  adapterScenarios,
  awaitedPayloads,
  ensureAiSdkBuilt,
  type Harness,
  notifications,
  PAYLOAD_MAX_OUTPUT_TOKENS,
  runRunner,
  startHarness,
  until,
} from './runner-harness.js';

const RUNNER = join(REPO_ROOT, 'integrations', 'ts', 'test', 'canonical.mjs');

describe('Vercel AI SDK adapter', () => {
  let harness: Harness;

  beforeAll(async () => {
    await ensureAiSdkBuilt();
    harness = await startHarness();
  }, 150_000);

  afterAll(async () => {
    await harness?.close();
  });

  /** Runs the runner with `streamText` (`--stream`, or `--stream-bare` without an `onError`) on `op`. */
  const runStreaming = (op: string, flag: '--stream' | '--stream-bare') =>
    runRunner(
      process.execPath,
      [RUNNER, '--target', harness.sidecar.grpc, '--operation-id', op, flag],
      REPO_ROOT,
    );

  const { run } = adapterScenarios('ai', () => ({
    harness,
    runner: { file: process.execPath, prefix: [RUNNER], cwd: REPO_ROOT },
  }));

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

  it('streamText without an onError: a modifying hook that fails after a step still fails the run, never "done"', async () => {
    const op = 'op-ai-stream-blocked';
    await harness.register(op, 'context-blocked');
    const exit = await runStreaming(op, '--stream-bare');
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toContain(
      'agenthooks: Modify transformContext blocked by hook context-policy-down',
    );
    await until(
      () =>
        harness.requests(op).some((r) => (r.json as { hookType?: string }).hookType === 'onError'),
      'onError',
    );
    const { awaited } = notifications(harness.requests(op));
    expect(awaited.filter((p) => (p as { hookType: string }).hookType === 'onComplete')).toEqual([
      expect.objectContaining({ reason: 'error' }),
    ]);
  });

  it('streamText: the same events, decisions and final text as generateText', async () => {
    const op = 'op-ai-stream';
    await harness.register(op, 'canonical');
    const exit = await runStreaming(op, '--stream');
    expect(exit.stderr).toBe('');
    expect(exit.line).toEqual({ final: 'It is sunny in Paris.', toolRuns: 1 });
    await until(() => harness.requests(op).length === 7, 'seven notifications');
    const { awaited } = notifications(harness.requests(op));
    expect(awaited).toEqual(awaitedPayloads(op, { content: 'sunny in Paris', success: true }));
  });
});
