/**
 * The Grafana dashboard and the alert rules read metrics the sidecar
 * exports: after a scripted run against a real sidecar, `/metrics` has a
 * series matching every metric selector of every dashboard query and
 * every alert expression (names and label matchers, parsed from the PromQL,
 * not listed by hand).
 */
import { readFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';
import { runScript, SCRIPTED_RUN_ARGS, scriptReceiver } from './scripted-run.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'agenthooks-dashboard.json');
const RULES = join(ROOT, 'deploy', 'prometheus', 'prometheus-rules.yaml');

/** Words of PromQL that are not metric names. */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
  // Aggregation operators, which may be followed by `by (...)` before their `(`.
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
]);
/** Keywords followed by a parenthesised list of label names. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

/** One label matcher of a selector. */
interface Matcher {
  readonly label: string;
  readonly op: '=' | '!=' | '=~' | '!~';
  readonly value: string;
}

/** A metric selector: `name{label op "value", ...}`. */
interface Selector {
  readonly name: string;
  readonly matchers: readonly Matcher[];
}

/**
 * Returns the metric selectors of a PromQL expression: identifiers that are
 * not functions (followed by `(`), keywords, label lists (`by (...)`),
 * numbers or durations, with their `{...}` matchers.
 */
function selectorsOf(expr: string): Selector[] {
  const selectors: Selector[] = [];
  let i = 0;
  const skipSpace = () => {
    while (i < expr.length && /\s/.test(expr[i] as string)) i++;
  };
  while (i < expr.length) {
    const c = expr[i] as string;
    if (c === '"' || c === "'") {
      i = endOfString(expr, i);
    } else if (c === '[') {
      i = expr.indexOf(']', i) + 1;
    } else if (/[0-9.]/.test(c)) {
      while (i < expr.length && /[0-9a-zA-Z.]/.test(expr[i] as string)) i++;
    } else if (/[a-zA-Z_:]/.test(c)) {
      const start = i;
      while (i < expr.length && /[a-zA-Z0-9_:]/.test(expr[i] as string)) i++;
      const word = expr.slice(start, i);
      skipSpace();
      if (LABEL_LISTS.has(word) && expr[i] === '(') {
        i = expr.indexOf(')', i) + 1;
      } else if (expr[i] === '(' || KEYWORDS.has(word.toLowerCase())) {
        // A function or aggregation, or a keyword.
      } else if (expr[i] === '{') {
        const end = endOfBraces(expr, i);
        selectors.push({ name: word, matchers: matchersOf(expr.slice(i + 1, end - 1)) });
        i = end;
      } else {
        selectors.push({ name: word, matchers: [] });
      }
    } else {
      i++;
    }
  }
  return selectors;
}

function endOfString(text: string, start: number): number {
  const quote = text[start];
  let i = start + 1;
  while (i < text.length && text[i] !== quote) i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}

function endOfBraces(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length && text[i] !== '}') {
    i = text[i] === '"' ? endOfString(text, i) : i + 1;
  }
  return i + 1;
}

function matchersOf(text: string): Matcher[] {
  const matchers: Matcher[] = [];
  const re = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?/gy;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    matchers.push({ label: m[1] as string, op: m[2] as Matcher['op'], value: m[3] as string });
  }
  return matchers;
}

/** One series of the Prometheus text format. */
interface Series {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

function parseExposition(text: string): Series[] {
  const series: Series[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = l[2] as string;
    }
    series.push({ name: m[1] as string, labels });
  }
  return series;
}

/** Whether `series` matches `selector`; matchers on labels Prometheus adds (`job`, `instance`) or on dashboard variables pass. */
function matches(series: Series, selector: Selector): boolean {
  if (series.name !== selector.name) return false;
  return selector.matchers.every((m) => {
    if (m.label === 'job' || m.label === 'instance' || m.value.includes('$')) return true;
    const value = series.labels[m.label] ?? '';
    const re = new RegExp(`^(?:${m.value})$`);
    switch (m.op) {
      case '=':
        return value === m.value;
      case '!=':
        return value !== m.value;
      case '=~':
        return re.test(value);
      default:
        return !re.test(value);
    }
  });
}

/** How long the audit sinks may take to write and count. */
const SCRAPE_DEADLINE_MS = 10_000;

/** The selectors of `queries` that no series matches, and queries reading no metric of ours. */
function missingSeries(queries: readonly string[], series: readonly Series[]): string[] {
  const missing: string[] = [];
  for (const query of queries) {
    const selectors = selectorsOf(query);
    if (!selectors.some((s) => s.name.startsWith('agenthooks_'))) {
      missing.push(`no metric: ${query}`);
    }
    for (const selector of selectors) {
      if (!series.some((s) => matches(s, selector))) {
        missing.push(`${selector.name}${JSON.stringify(selector.matchers)} in ${query}`);
      }
    }
  }
  return missing;
}

/** A loopback port that nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Every PromQL expression of the dashboard's panels. */
function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

/** Every expression of the PrometheusRule's rules. */
function ruleExpressions(): string[] {
  const manifest = parseYaml(readFileSync(RULES, 'utf8')) as {
    spec: { groups: { rules: { expr: string }[] }[] };
  };
  return manifest.spec.groups.flatMap((g) => g.rules.map((r) => String(r.expr)));
}

describe('the PromQL selector parser', () => {
  it('finds metric names and matchers, not functions, keywords, label lists or durations', () => {
    expect(
      selectorsOf(
        'histogram_quantile(0.99, sum by (le, method) (rate(a_bucket{job=~"$job", code!="OK"}[$__rate_interval]))) / ignoring(x) group_left b > 0.5 and on (i) c_total',
      ),
    ).toEqual([
      {
        name: 'a_bucket',
        matchers: [
          { label: 'job', op: '=~', value: '$job' },
          { label: 'code', op: '!=', value: 'OK' },
        ],
      },
      { name: 'b', matchers: [] },
      { name: 'c_total', matchers: [] },
    ]);
  });
});

describe('the dashboard and the alert rules', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('query only series that a sidecar exports after a scripted run', async () => {
    receiver = await startReceiver();
    scriptReceiver(receiver, 'not allowed');
    // The audit log's store sink writes; its HTTP sink posts to a closed port,
    // and a buffer of one entry drops the oldest: every audit series has data.
    sidecar = await startSidecar({
      args: [
        ...SCRIPTED_RUN_ARGS,
        '--audit-store',
        '--audit-http',
        `http://127.0.0.1:${await closedPort()}/audit`,
        '--audit-buffer',
        '1',
      ],
    });
    await runScript(sidecar.grpc, receiver, { denyReason: 'not allowed' });

    const queries = [...dashboardQueries(), ...ruleExpressions()];
    expect(queries.length).toBeGreaterThan(15);
    // The audit sinks write off the decision path: poll until their series are there.
    const deadline = Date.now() + SCRAPE_DEADLINE_MS;
    let missing: string[] = [];
    do {
      const text = await (await fetch(`http://${sidecar.http}/metrics`)).text();
      missing = missingSeries(queries, parseExposition(text));
      if (missing.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } while (Date.now() < deadline);
    expect(missing).toEqual([]);
  });
});
