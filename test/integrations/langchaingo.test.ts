/**
 * @module End-to-end: the langchaingo adapter (integrations/go) runs the real
 * agent executor of langchaingo (an OpenAI-functions agent) on a scripted
 * model, in a child process (`cmd/canonical`, built once per file), against
 * one real sidecar and one real receiver; each scenario registers its hooks
 * on its own operation. The adapter's own Go tests (message conversion) run
 * here too.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/sidecar.js';
import { adapterScenarios, type Harness, runRunner, startHarness } from './runner-harness.js';

const MODULE = join(REPO_ROOT, 'integrations', 'go');

describe('langchaingo adapter', () => {
  let harness: Harness;
  let dir: string;
  let runner: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-langchaingo-'));
    runner = join(dir, 'canonical');
    // Built once; scripts/install-client-tools.sh warms the build cache.
    await promisify(execFile)('go', ['build', '-o', runner, './cmd/canonical'], {
      cwd: MODULE,
      timeout: 120_000,
    });
    harness = await startHarness();
  }, 150_000);

  afterAll(async () => {
    await harness?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  adapterScenarios('lcg', () => ({ harness, runner: { file: runner, prefix: [], cwd: MODULE } }));

  it('serves local handler calls concurrently: two model calls at once both reach the transformContext handler', async () => {
    const op = 'op-lcg-concurrent';
    await harness.register(op, 'context-handler');
    const exit = await runRunner(
      runner,
      ['--target', harness.sidecar.grpc, '--operation-id', op, '--scenario', 'concurrent'],
      MODULE,
    );
    expect(exit.stderr).toBe('');
    expect(exit.stdout.trim()).toBe('{"met":2}');
  });

  it("passes the adapter's Go tests (go test)", async () => {
    const { stdout } = await promisify(execFile)('go', ['test', '-count=1', '.'], {
      cwd: MODULE,
      timeout: 120_000,
    });
    expect(stdout).toMatch(/^ok\s/m);
  }, 150_000);
});
