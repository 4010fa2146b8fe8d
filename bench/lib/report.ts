/**
 * @module What a bench run reports: the machine it ran on, the table of
 * medians with min–max across rounds (plain text for the terminal, Markdown
 * for BENCHMARKS.md) and the targets.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, release } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../test/support/sidecar.js';
import type { MetricDef, Scenario } from './scenarios.js';
import type { Spread } from './stats.js';
import type { Target } from './targets.js';

/** Kibibytes per GiB. */
const KIB_PER_GIB = 1024 ** 2;

/** The machine a run measured. */
export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly ramGiB: number;
  readonly node: string;
  readonly kernel: string;
  readonly grpcJs: string;
  readonly undici: string;
}

function packageVersion(name: string): string {
  try {
    const pkg = JSON.parse(
      readFileSync(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8'),
    ) as { version: string };
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

/** Reads nproc, the CPU model (from /proc/cpuinfo), RAM (MemTotal), Node and library versions. */
export function describeMachine(): Machine {
  let cpuModel = 'unknown';
  let ramGiB = 0;
  try {
    const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown';
    const meminfo = readFileSync('/proc/meminfo', 'utf8');
    const kib = Number(/^MemTotal:\s+(\d+) kB/m.exec(meminfo)?.[1] ?? 0);
    ramGiB = kib / KIB_PER_GIB;
  } catch {
    ramGiB = 0;
  }
  return {
    nproc: availableParallelism(),
    cpuModel,
    ramGiB: Math.round(ramGiB * 10) / 10,
    node: process.version,
    kernel: release(),
    grpcJs: packageVersion('@grpc/grpc-js'),
    undici: packageVersion('undici'),
  };
}

/** One row of the results table. */
export interface Row {
  readonly scenario: Scenario;
  readonly metric: MetricDef;
  readonly spread: Spread | undefined;
}

/** Formats a number with the metric's decimals (`-` for a missing one). */
export function fmt(value: number | undefined, digits: number): string {
  if (value === undefined || Number.isNaN(value)) return '-';
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function rangeOf(row: Row): string {
  if (row.spread === undefined) return '-';
  return `${fmt(row.spread.min, row.metric.digits)}–${fmt(row.spread.max, row.metric.digits)}`;
}

/** The results as an aligned plain-text table. */
export function textTable(rows: readonly Row[]): string {
  const cells = rows.map((r) => [
    r.scenario.id,
    `${r.metric.label} (${r.metric.unit})`,
    fmt(r.spread?.median, r.metric.digits),
    rangeOf(r),
  ]);
  const header = ['scenario', 'metric', 'median', 'min–max'];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const line = (c: readonly string[]) =>
    c.map((v, i) => (i >= 2 ? v.padStart(widths[i] ?? 0) : v.padEnd(widths[i] ?? 0))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** The targets as plain text. */
export function textTargets(targets: readonly Target[]): string {
  return targets
    .map(
      (t) =>
        `${t.pass ? 'PASS' : 'MISS'}  ${t.description}: ${fmt(t.value, t.digits)} ${t.cmp} ${fmt(t.limit, t.digits)} ${t.unit}`,
    )
    .join('\n');
}

/** The results as a Markdown table, one row per metric. */
export function markdownTable(rows: readonly Row[], rounds: number): string {
  const lines = [
    `| scenario | metric | median | min–max (${rounds} rounds) |`,
    '| --- | --- | ---: | ---: |',
  ];
  let last = '';
  for (const r of rows) {
    const name = r.scenario.id === last ? '' : `\`${r.scenario.id}\`: ${r.scenario.title}`;
    last = r.scenario.id;
    lines.push(
      `| ${name} | ${r.metric.label} (${r.metric.unit}) | ${fmt(r.spread?.median, r.metric.digits)} | ${rangeOf(r)} |`,
    );
  }
  return lines.join('\n');
}

/** The targets as a Markdown table. */
export function markdownTargets(targets: readonly Target[]): string {
  const lines = [
    '| target | measured (median) | limit | limit from | result |',
    '| --- | ---: | ---: | --- | --- |',
  ];
  for (const t of targets) {
    lines.push(
      `| ${t.description} | ${fmt(t.value, t.digits)} ${t.unit} | ${t.cmp} ${fmt(t.limit, t.digits)} ${t.unit} | ${t.formula} | ${t.pass ? 'pass' : '**miss**'} |`,
    );
  }
  return lines.join('\n');
}

/** The machine as a Markdown list. */
export function markdownMachine(m: Machine): string {
  return [
    `- nproc: ${m.nproc}`,
    `- CPU: ${m.cpuModel} (/proc/cpuinfo model name)`,
    `- RAM: ${m.ramGiB} GiB (MemTotal)`,
    `- Node: ${m.node}, kernel ${m.kernel}`,
    `- @grpc/grpc-js ${m.grpcJs}, undici ${m.undici}`,
  ].join('\n');
}
