/**
 * @module The README's "Use agenthooks from the Vercel AI SDK" and "Use
 * agenthooks from langchaingo" snippets, extracted between their markers and
 * run as a user runs them: the AI SDK lines from a temporary project that
 * depends on `integrations/ts` by a `file:` path (npm links it, and the
 * package brings the generated client in its `dist/`), the langchaingo lines
 * in a temporary Go module that requires the adapter and the generated client
 * through the README's `replace` lines. Each runs on a scripted model against
 * a real sidecar, and fails naming agenthooks when the sidecar is down.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusedUrl } from '../support/receiver.js';
import { killSidecar, REPO_ROOT, type SidecarProcess, startSidecar } from '../support/sidecar.js';
import { ensureAiSdkBuilt, runRunner } from './runner-harness.js';

const execFileAsync = promisify(execFile);
const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
/** The address the README's snippets name; the tests put the sidecar's in its place. */
const README_TARGET = '127.0.0.1:50051';

/** The code block between `<!-- snippet:name -->` and `<!-- /snippet:name -->`. */
function snippet(name: string): string {
  const match = README.match(
    new RegExp(
      `<!-- snippet:${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\`\`\`\\n<!-- /snippet:${name} -->`,
    ),
  );
  if (!match?.[1]) throw new Error(`README has no snippet ${name}`);
  return match[1];
}

/** The scripted model and tool the AI SDK snippet uses (`model`, `tools`). */
const AI_SDK_PRELUDE = `
import { jsonSchema, tool } from 'ai';
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
let calls = 0;
const model = {
  specificationVersion: 'v3',
  provider: 'scripted',
  modelId: 'scripted',
  supportedUrls: {},
  async doGenerate() {
    calls += 1;
    if (calls === 1) {
      return {
        content: [{ type: 'tool-call', toolCallId: 'call_weather_1', toolName: 'get_weather', input: '{"city":"Paris"}' }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      };
    }
    return { content: [{ type: 'text', text: 'It is sunny in Paris.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
  },
  async doStream() { throw new Error('no streaming'); },
};
const tools = {
  get_weather: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }),
    execute: async ({ city }) => \`sunny in \${city}\`,
  }),
};
`;

/** The scripted model and tool the langchaingo snippet uses (`llm`, `weatherTool`, `ctx`). */
const GO_PRELUDE = `package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	agenthooks "agenthooks.local/langchaingo"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

type scripted struct{ calls int }

func (m *scripted) GenerateContent(_ context.Context, _ []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.calls++
	if m.calls == 1 {
		return &llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{{ID: "call_weather_1", Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: \`{"city":"Paris"}\`}}}}}}, nil
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "It is sunny in Paris."}}}, nil
}

func (m *scripted) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

type weather struct{}

func (weather) Name() string        { return "get_weather" }
func (weather) Description() string { return "The weather in a city." }
func (weather) Call(_ context.Context, input string) (string, error) {
	var args struct{ City string \`json:"city"\` }
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		return "", errors.New("bad input")
	}
	return "sunny in " + args.City, nil
}

func run(ctx context.Context, llm llms.Model, weatherTool tools.Tool) error {
`;

const GO_EPILOGUE = `	if err != nil {
		return err
	}
	fmt.Println(answer)
	return nil
}

func main() {
	if err := run(context.Background(), &scripted{}, weather{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`;

describe('README adapter snippets', () => {
  let sidecar: SidecarProcess;
  let dir: string;
  let down: string;

  beforeAll(async () => {
    await ensureAiSdkBuilt();
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-readme-adapters-'));
    sidecar = await startSidecar({ http: false });
    down = new URL(await refusedUrl()).host;
  }, 150_000);

  afterAll(async () => {
    await killSidecar(sidecar);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the AI SDK lines run from a project that depends on integrations/ts by path', async () => {
    const project = join(dir, 'ai-sdk-app');
    await execFileAsync('mkdir', ['-p', project]);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'readme-ai-sdk-app',
        private: true,
        type: 'module',
        dependencies: {
          '@agenthooks/ai-sdk': `file:${join(REPO_ROOT, 'integrations', 'ts')}`,
          ai: `file:${join(REPO_ROOT, 'node_modules', 'ai')}`,
        },
      }),
    );
    // Offline: a path dependency needs no registry.
    await execFileAsync(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', '--install-links=false'],
      { cwd: project, timeout: 60_000 },
    );
    expect(lstatSync(join(project, 'node_modules', '@agenthooks', 'ai-sdk')).isSymbolicLink()).toBe(
      true,
    );
    const main = (target: string) =>
      `${AI_SDK_PRELUDE}\n${snippet('ai-sdk').replace(README_TARGET, target)}\nconsole.log(JSON.stringify({ text: result.text }));\n`;

    writeFileSync(join(project, 'main.mjs'), main(sidecar.grpc));
    const ok = await runRunner(process.execPath, ['main.mjs'], project);
    expect(ok.stderr).toBe('');
    expect(JSON.parse(ok.stdout)).toEqual({ text: 'It is sunny in Paris.' });

    writeFileSync(join(project, 'down.mjs'), main(down));
    const failed = await runRunner(process.execPath, ['down.mjs'], project);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toMatch(/agenthooks: Dispatch beforeStep/);
  });

  it('the langchaingo lines build in a module with the README replace lines', async () => {
    const module = join(dir, 'langchaingo-app');
    await execFileAsync('mkdir', ['-p', module]);
    const gomod = snippet('langchaingo-gomod').replaceAll('../agenthooks/', `${REPO_ROOT}/`);
    writeFileSync(join(module, 'go.mod'), `module example.com/readme\n\ngo 1.26.0\n\n${gomod}`);
    // The adapter's go.sum holds every module's hash: no proxy, no checksum database.
    copyFileSync(join(REPO_ROOT, 'integrations', 'go', 'go.sum'), join(module, 'go.sum'));
    const body = snippet('langchaingo')
      .replace(README_TARGET, '"+os.Getenv("AGENTHOOKS_TARGET")+"')
      .split('\n')
      .map((l) => (l === '' ? l : `\t${l}`))
      .join('\n');
    writeFileSync(join(module, 'main.go'), `${GO_PRELUDE}${body}${GO_EPILOGUE}`);
    const env = { ...process.env, GOPROXY: 'off', GOFLAGS: '-mod=mod' };
    await execFileAsync('go', ['mod', 'tidy'], { cwd: module, env, timeout: 60_000 });
    await execFileAsync('go', ['build', '-o', 'app', '.'], { cwd: module, env, timeout: 120_000 });

    const app = join(module, 'app');
    const ok = await runRunner(app, [], module, { AGENTHOOKS_TARGET: sidecar.grpc });
    const failed = await runRunner(app, [], module, { AGENTHOOKS_TARGET: down });
    expect(ok.stderr).toBe('');
    expect(ok.stdout.trim()).toBe('It is sunny in Paris.');
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toMatch(/agenthooks: Dispatch beforeStep/);
  }, 180_000);
});
