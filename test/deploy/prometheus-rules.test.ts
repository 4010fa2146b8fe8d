/**
 * The PrometheusRule of deploy/prometheus/ is valid for Prometheus: its
 * `spec` (a plain rules file) passes `promtool check rules`, and the alert
 * unit tests of prometheus-rules.promtool.yaml pass `promtool test rules`.
 * promtool comes from Debian's `prometheus` package, installed by
 * scripts/install-operator-tools.sh (called from .ci/run).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const RULES = join(ROOT, 'deploy', 'prometheus', 'prometheus-rules.yaml');
const UNIT_TESTS = join(import.meta.dirname, 'prometheus-rules.promtool.yaml');

/** The PrometheusRule manifest, parsed. */
interface PrometheusRule {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: { groups: { name: string; rules: { alert?: string; expr: string }[] }[] };
}

/** Runs promtool; a missing promtool fails with how to install it. */
async function promtool(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd, timeout: 20_000 });
    return stdout + stderr;
  } catch (e: unknown) {
    const err = e as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (err.code === 'ENOENT') {
      throw new Error('promtool is not installed: run scripts/install-operator-tools.sh');
    }
    throw new Error(`promtool ${args.join(' ')} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

describe('the PrometheusRule', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('is a monitoring.coreos.com/v1 PrometheusRule with the four alerts an on-call person needs', () => {
    const manifest = parseYaml(readFileSync(RULES, 'utf8')) as PrometheusRule;
    expect(manifest.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(manifest.kind).toBe('PrometheusRule');
    const alerts = manifest.spec.groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(alerts).toEqual(
      expect.arrayContaining([
        'AgenthooksStoreNotServing',
        'AgenthooksControlFailuresHigh',
        'AgenthooksFailOpenDecisions',
        'AgenthooksDeliveriesDropped',
      ]),
    );
  });

  it('passes promtool check rules and the alert unit tests', async () => {
    const manifest = parseYaml(readFileSync(RULES, 'utf8')) as PrometheusRule;
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-rules-'));
    // The spec of a PrometheusRule is a Prometheus rules file.
    writeFileSync(join(dir, 'rules.yaml'), stringifyYaml(manifest.spec));
    copyFileSync(UNIT_TESTS, join(dir, 'tests.yaml'));
    const checked = await promtool(['check', 'rules', 'rules.yaml'], dir);
    expect(checked).toContain(`SUCCESS: ${manifest.spec.groups[0]?.rules.length} rules found`);
    const tested = await promtool(['test', 'rules', 'tests.yaml'], dir);
    expect(tested).toContain('SUCCESS');
  });

  it('is refused by promtool when an expression is broken, so the check can fail', async () => {
    const manifest = parseYaml(readFileSync(RULES, 'utf8')) as PrometheusRule;
    const rule = manifest.spec.groups[0]?.rules[0];
    if (rule === undefined) throw new Error('no rule');
    rule.expr = `${rule.expr} ) ==`;
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-rules-'));
    writeFileSync(join(dir, 'rules.yaml'), stringifyYaml(manifest.spec));
    await expect(promtool(['check', 'rules', 'rules.yaml'], dir)).rejects.toThrow(/failed/);
  });
});
