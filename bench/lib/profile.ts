/**
 * @module Summarises V8 `.cpuprofile` files (written by `node --cpu-prof`):
 * where the busy time goes by area (our code, each npm package, Node core,
 * GC), the top functions by self time, and the inclusive time of our own
 * functions, as Markdown. Per-operation figures divide by the operations the
 * profiled process served, so a sidecar profile can be set against its
 * baseline's.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A node of a V8 CPU profile. */
export interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
    readonly columnNumber: number;
  };
  readonly children?: readonly number[];
}

/** A V8 CPU profile, as `--cpu-prof` writes it. */
export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  /** Microseconds between consecutive samples. */
  readonly timeDeltas: readonly number[];
}

/** Pseudo-functions V8 records that are not JavaScript. */
const IDLE = '(idle)';
const ROOT = '(root)';
const GC = '(garbage collector)';
const PROGRAM = '(program)';

/** Microseconds per millisecond. */
const US_PER_MS = 1000;

/** Time of one function (or area), in microseconds. */
export interface Weighted {
  readonly name: string;
  readonly location: string;
  readonly area: string;
  readonly us: number;
}

/** The aggregates of one profile. */
export interface ProfileSummary {
  /** Wall time the profile covers, in µs. */
  readonly totalUs: number;
  /** Time not idle, in µs. */
  readonly busyUs: number;
  /** Self time by area, largest first. */
  readonly areas: Weighted[];
  /** Self time by function, largest first. */
  readonly selfByFunction: Weighted[];
  /** Inclusive time by function (each counted once per sample), largest first. */
  readonly inclusiveByFunction: Weighted[];
}

/** Where a script URL points, shortened: `src/hooks/control.js`, `@grpc/grpc-js/build/src/server.js`, `node:internal/...`. */
export function shortLocation(url: string, repoRoot: string): string {
  if (url === '') return '';
  if (url.startsWith('node:')) return url;
  let path = url;
  if (url.startsWith('file://')) {
    try {
      path = fileURLToPath(url);
    } catch {
      path = url;
    }
  }
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) return path.slice(nm + '/node_modules/'.length);
  const rel = relative(repoRoot, path);
  if (rel.startsWith('..')) return path;
  return rel.startsWith('dist/') ? rel.slice('dist/'.length) : rel;
}

/** The area of a location: `agenthooks src/<dir>`, `gen`, an npm package, `node core`, GC, native. */
export function areaOf(name: string, location: string): string {
  if (location === '') {
    if (name === GC) return 'GC';
    if (name === IDLE) return 'idle';
    if (name === PROGRAM) return '(program): native, V8, not attributed';
    return `native: ${name}`;
  }
  if (location.startsWith('node:')) {
    const parts = location.slice('node:'.length).split('/');
    return parts[0] === 'internal' && parts.length > 2
      ? `node core: ${parts[1]}`
      : `node core: ${parts.at(-1) ?? location}`;
  }
  if (location.startsWith('src/')) {
    const parts = location.split('/');
    return parts.length > 2 ? `agenthooks src/${parts[1]}` : 'agenthooks src';
  }
  if (location.startsWith('gen/')) return 'agenthooks gen (generated)';
  if (location.startsWith('bench/')) return 'bench';
  if (location.startsWith('/') || location.includes('://')) return `other: ${location}`;
  const parts = location.split('/');
  return location.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? location);
}

function sortDesc(map: Map<string, Weighted>): Weighted[] {
  return [...map.values()].sort((a, b) => b.us - a.us);
}

/** Source maps of built files, by location (`src/x.js`); undefined when there is none. */
const sourceMaps = new Map<string, SourceMap | undefined>();

/**
 * Maps a location in a built file of ours (`src/...js`, `gen/...js`, 0-based
 * line and column) to its TypeScript source through the file's source map;
 * answers `file.js:line` (1-based) when there is no map.
 */
export function sourceLocation(
  file: string,
  line: number,
  column: number,
  repoRoot: string,
): string {
  if (!/^(src|gen|bench)\/.*\.js$/.test(file)) return `${file}:${line + 1}`;
  if (!sourceMaps.has(file)) {
    const path = join(repoRoot, 'dist', `${file}.map`);
    sourceMaps.set(
      file,
      existsSync(path) ? new SourceMap(JSON.parse(readFileSync(path, 'utf8'))) : undefined,
    );
  }
  const map = sourceMaps.get(file);
  const entry = map?.findEntry(line, column) as
    | { originalSource?: string; originalLine?: number }
    | undefined;
  if (entry?.originalSource === undefined || entry.originalLine === undefined) {
    return `${file}:${line + 1}`;
  }
  // The source as the map names it, relative to the map: a module of ours
  // (`src/hooks/control.ts`) or, in the bundle, a dependency's file
  // (`undici/lib/dispatcher/client.js`).
  const original = shortLocation(
    resolve(join(repoRoot, 'dist', dirname(file)), entry.originalSource),
    repoRoot,
  );
  return `${original}:${entry.originalLine + 1}`;
}

/** A span of a profile to keep, on its own clock (CLOCK_MONOTONIC microseconds). */
export interface SampleWindow {
  readonly fromUs: number;
  readonly toUs: number;
}

/**
 * Aggregates a CPU profile; with `window`, only the samples taken in it
 * (such as the timed part of a scenario, without start-up and warm-up).
 */
export function summariseProfile(
  profile: CpuProfile,
  repoRoot: string,
  window?: SampleWindow,
): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const keyOf = new Map<number, Weighted>();
  for (const node of profile.nodes) {
    const name = node.callFrame.functionName || '(anonymous)';
    const file = shortLocation(node.callFrame.url, repoRoot);
    const { lineNumber, columnNumber } = node.callFrame;
    const location = file === '' ? '' : sourceLocation(file, lineNumber, columnNumber, repoRoot);
    // The area of the source the location maps to (the bundle holds every module).
    const source = location === '' ? '' : location.replace(/:\d+$/, '');
    keyOf.set(node.id, { name, location, area: areaOf(name, source), us: 0 });
  }
  const self = new Map<string, Weighted>();
  const inclusive = new Map<string, Weighted>();
  const areas = new Map<string, Weighted>();
  const add = (map: Map<string, Weighted>, key: string, w: Weighted, us: number) => {
    const prev = map.get(key);
    map.set(key, { ...w, us: (prev?.us ?? 0) + us });
  };
  let totalUs = 0;
  let idleUs = 0;
  const { samples, timeDeltas } = profile;
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += timeDeltas[i] ?? 0;
    // A sample lasts until the next one.
    const us = timeDeltas[i + 1] ?? 0;
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue;
    totalUs += us;
    const id = samples[i] as number;
    const w = keyOf.get(id);
    if (w === undefined) continue;
    if (w.name === IDLE) {
      idleUs += us;
      continue;
    }
    add(self, `${w.name}@${w.location}`, w, us);
    add(areas, w.area, { name: w.area, location: '', area: w.area, us: 0 }, us);
    const seen = new Set<string>();
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const f = keyOf.get(n);
      if (f === undefined || f.name === ROOT) continue;
      const key = `${f.name}@${f.location}`;
      if (seen.has(key)) continue;
      seen.add(key);
      add(inclusive, key, f, us);
    }
  }
  return {
    totalUs,
    busyUs: totalUs - idleUs,
    areas: sortDesc(areas),
    selfByFunction: sortDesc(self),
    inclusiveByFunction: sortDesc(inclusive),
  };
}

/** A profiled process and the operations it served while profiled. */
export interface ProfiledProcess {
  readonly label: string;
  readonly summary: ProfileSummary;
  /** Operations (calls, events) it served in the profiled span; 0 when not counted. */
  readonly ops: number;
}

const ms = (us: number) => (us / US_PER_MS).toFixed(1);
const pct = (us: number, of: number) => (of === 0 ? '-' : `${((100 * us) / of).toFixed(1)}%`);
const perOp = (us: number, ops: number) => (ops === 0 ? '-' : (us / ops).toFixed(1));
const cell = (text: string) => text.replaceAll('|', '\\|');

/** Rows of each table of {@link profileMarkdown}. */
const TOP_FUNCTIONS = 25;
const TOP_AREAS = 18;
const TOP_OWN = 20;

/**
 * Renders Markdown for a profiled process and, when given, the baseline it
 * is compared with: busy time and per-operation cost, self time by area
 * side by side, top self-time functions, and our own code's inclusive time.
 */
export function profileMarkdown(
  subject: ProfiledProcess,
  baseline: ProfiledProcess | undefined,
): string {
  const s = subject.summary;
  const lines: string[] = [];
  const cols = baseline === undefined ? [subject] : [subject, baseline];
  lines.push(`| | ${cols.map((c) => cell(c.label)).join(' | ')} |`);
  lines.push(`| --- |${cols.map(() => ' ---: |').join('')}`);
  lines.push(`| operations in the timed span | ${cols.map((c) => c.ops).join(' | ')} |`);
  lines.push(`| sampled wall time (ms) | ${cols.map((c) => ms(c.summary.totalUs)).join(' | ')} |`);
  lines.push(`| busy, not idle (ms) | ${cols.map((c) => ms(c.summary.busyUs)).join(' | ')} |`);
  lines.push(
    `| busy CPU per operation (µs) | ${cols.map((c) => perOp(c.summary.busyUs, c.ops)).join(' | ')} |`,
  );
  lines.push('');
  lines.push('### Self time by area');
  lines.push('');
  const baseAreas = new Map((baseline?.summary.areas ?? []).map((a) => [a.area, a.us]));
  const areaNames = [
    ...new Set([
      ...s.areas.map((a) => a.area),
      ...(baseline?.summary.areas ?? []).map((a) => a.area),
    ]),
  ];
  const subjectAreas = new Map(s.areas.map((a) => [a.area, a.us]));
  areaNames.sort(
    (a, b) =>
      (subjectAreas.get(b) ?? 0) / Math.max(1, subject.ops) -
      (subjectAreas.get(a) ?? 0) / Math.max(1, subject.ops),
  );
  if (baseline === undefined) {
    lines.push('| area | ms | % of busy | µs per op |');
    lines.push('| --- | ---: | ---: | ---: |');
  } else {
    lines.push(
      `| area | ${cell(subject.label)} µs/op | % of busy | ${cell(baseline.label)} µs/op | difference µs/op |`,
    );
    lines.push('| --- | ---: | ---: | ---: | ---: |');
  }
  for (const area of areaNames.slice(0, TOP_AREAS)) {
    const us = subjectAreas.get(area) ?? 0;
    if (baseline === undefined) {
      lines.push(
        `| ${cell(area)} | ${ms(us)} | ${pct(us, s.busyUs)} | ${perOp(us, subject.ops)} |`,
      );
    } else {
      const b = baseAreas.get(area) ?? 0;
      const diff =
        subject.ops === 0 || baseline.ops === 0
          ? '-'
          : (us / subject.ops - b / baseline.ops).toFixed(1);
      lines.push(
        `| ${cell(area)} | ${perOp(us, subject.ops)} | ${pct(us, s.busyUs)} | ${perOp(b, baseline.ops)} | ${diff} |`,
      );
    }
  }
  lines.push('');
  lines.push(`### Top ${TOP_FUNCTIONS} functions by self time (${cell(subject.label)})`);
  lines.push('');
  lines.push('| function | location | self ms | % of busy | µs per op |');
  lines.push('| --- | --- | ---: | ---: | ---: |');
  for (const f of s.selfByFunction.slice(0, TOP_FUNCTIONS)) {
    lines.push(
      `| ${cell(f.name)} | ${cell(f.location || '(native)')} | ${ms(f.us)} | ${pct(f.us, s.busyUs)} | ${perOp(f.us, subject.ops)} |`,
    );
  }
  const own = s.inclusiveByFunction.filter((f) => f.location.startsWith('src/'));
  if (own.length > 0) {
    lines.push('');
    lines.push(`### agenthooks code by inclusive time (self + callees, ${cell(subject.label)})`);
    lines.push('');
    lines.push('| function | location | inclusive ms | % of busy | µs per op |');
    lines.push('| --- | --- | ---: | ---: | ---: |');
    for (const f of own.slice(0, TOP_OWN)) {
      lines.push(
        `| ${cell(f.name)} | ${cell(f.location)} | ${ms(f.us)} | ${pct(f.us, s.busyUs)} | ${perOp(f.us, subject.ops)} |`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
