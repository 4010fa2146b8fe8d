/**
 * The same scripted run through the four framework adapters (LangChain v1,
 * OpenAI Agents SDK, Vercel AI SDK, langchaingo), each on its own operation
 * of one sidecar, reaches one receiver with equal payloads: compared as
 * parsed JSON, in arrival order, after the operation id is replaced and the
 * ids the frameworks choose themselves are removed (FRAMEWORK_IDS).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/sidecar.js';
import {
  ensureAiSdkBuilt,
  type Harness,
  notifications,
  runRunner,
  startHarness,
  until,
} from './runner-harness.js';

/**
 * Members whose values each framework chooses: the assistant message's id
 * (LangChain's AIMessage id, the Agents SDK's response item id, or the
 * adapters' `<operationId>:assistant:<stepIndex>` where the framework has
 * none). Everything else must be equal.
 */
const FRAMEWORK_IDS = ['assistantMessageId'];

const PYTHON = join(REPO_ROOT, '.venv', 'bin', 'python');
/** The Python adapters of this checkout, whichever checkout the venv's editable install points to. */
const PYTHONPATH = join(REPO_ROOT, 'integrations', 'python');

/** The payloads of `operationId`'s run with the operation id replaced and FRAMEWORK_IDS removed. */
function normalised(payloads: readonly unknown[], operationId: string): unknown {
  const text = JSON.stringify(payloads).replaceAll(JSON.stringify(operationId), '"<operation>"');
  return JSON.parse(text, (key, value) => (FRAMEWORK_IDS.includes(key) ? undefined : value));
}

describe('the four framework adapters, one scripted run', () => {
  let harness: Harness;
  let dir: string;
  let goRunner: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-cross-adapter-'));
    goRunner = join(dir, 'canonical');
    await Promise.all([
      ensureAiSdkBuilt(),
      promisify(execFile)('go', ['build', '-o', goRunner, './cmd/canonical'], {
        cwd: join(REPO_ROOT, 'integrations', 'go'),
        timeout: 120_000,
      }),
    ]);
    harness = await startHarness();
  }, 150_000);

  afterAll(async () => {
    await harness?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('sends equal payloads, in the same order, from every adapter', async () => {
    const runners: Record<string, { file: string; args: string[]; cwd: string }> = {
      langchain: {
        file: PYTHON,
        args: ['integrations/python/tests/canonical.py', '--framework', 'langchain'],
        cwd: REPO_ROOT,
      },
      'openai-agents': {
        file: PYTHON,
        args: ['integrations/python/tests/canonical.py', '--framework', 'openai-agents'],
        cwd: REPO_ROOT,
      },
      'ai-sdk': {
        file: process.execPath,
        args: ['integrations/ts/test/canonical.mjs'],
        cwd: REPO_ROOT,
      },
      langchaingo: { file: goRunner, args: [], cwd: REPO_ROOT },
    };
    const names = Object.keys(runners);
    for (const name of names) await harness.register(`op-cross-${name}`, 'canonical');
    // The four runs at once: each on its own operation, so their orders stay apart.
    const exits = await Promise.all(
      names.map((name) => {
        const r = runners[name] as { file: string; args: string[]; cwd: string };
        const op = `op-cross-${name}`;
        return runRunner(
          r.file,
          [...r.args, '--target', harness.sidecar.grpc, '--operation-id', op],
          r.cwd,
          { PYTHONPATH },
        );
      }),
    );
    for (const [i, exit] of exits.entries()) {
      expect(exit.stderr, names[i]).toBe('');
      expect(exit.line, names[i]).toEqual({ final: 'It is sunny in Paris.', toolRuns: 1 });
    }
    const payloads: Record<string, unknown> = {};
    for (const name of names) {
      const op = `op-cross-${name}`;
      await until(() => harness.requests(op).length === 7, `${name}: seven notifications`);
      const { awaited, beforeToolCall } = notifications(harness.requests(op));
      payloads[name] = normalised([...beforeToolCall, ...awaited], op);
    }
    // Not vacuous: the run's payloads hold the scripted call and its result.
    expect(JSON.stringify(payloads.langchain)).toContain('call_weather_1');
    expect(JSON.stringify(payloads.langchain)).toContain('sunny in Paris');
    for (const name of names.slice(1)) expect(payloads[name], name).toEqual(payloads.langchain);
  }, 120_000);
});
