/**
 * @module `npm run bench`: measures agenthooks against the floor in one
 * reproducible run. Every scenario runs in interleaved rounds (round 1 runs
 * all scenarios, then round 2, ...); the run prints medians with min–max
 * across rounds, checks the targets and writes `bench/results/latest.json`.
 *
 * Usage: `npm run bench -- [--check] [--rounds N] [--quick] [--only a,b]
 * [--profile] [--profile-scenarios a,b] [--write-md]`
 * - `--check`: exit 1 when a target is missed or a scenario failed;
 * - `--rounds N`: rounds (default 3; at least 3 unless `--quick`);
 * - `--quick`: small loops and one round, to try the bench itself;
 * - `--only a,b`: run only these scenarios;
 * - `--profile`: after the rounds, run each scenario of a missed target
 *   once more with the sidecar (and its baseline) under `node --cpu-prof`,
 *   and write the summary to `bench/profiles/<scenario>.md`;
 * - `--profile-scenarios a,b`: profile these scenarios whatever the targets;
 * - `--write-md`: put the table, targets and machine into BENCHMARKS.md
 *   (between its `bench:results` markers) and the JSON into
 *   `bench/results/quoted.json`;
 * - `--sidecar-flags="FLAGS"`: the node flags of every sidecar, to try a
 *   runtime setting (default: the deployed flags of the image and `npm start`);
 * - `--soak [--soak-minutes 30] [--soak-rate 60]`: instead of the rounds, one
 *   sidecar under whole operations at a steady rate, reporting the RSS slope
 *   over the last 10 minutes and the peak (`bench/results/soak.json`);
 *   with `--check`, exit 1 when either misses its target.
 *
 * The load generators (ghz, vegeta) come from `scripts/install-bench-tools.sh`.
 */
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { HookOutcomeStatus } from '../gen/agenthooks/v1/decisions_pb.js';
import { HookType } from '../gen/agenthooks/v1/events_pb.js';
import { HookService, RegisterHooksRequestSchema } from '../gen/agenthooks/v1/service_pb.js';
import { killRemainingChildren, MAIN_JS, REPO_ROOT, withTimeout } from '../test/support/sidecar.js';
import { generatorsMissing } from './lib/generators.js';
import { createClient, hookMethod, waitForReady } from './lib/grpc-codec.js';
import {
  ALLOW_PATH,
  controlHook,
  decideRequest,
  NOTIFY_PATH,
  notificationHook,
  stepEvent,
} from './lib/messages.js';
import { DEFAULT_PAIRED, QUICK_PAIRED } from './lib/paired.js';
import { startBenchChild, startBenchSidecar } from './lib/processes.js';
import {
  type CpuProfile,
  type ProfiledProcess,
  profileMarkdown,
  summariseProfile,
} from './lib/profile.js';
import { ensurePythonVenv } from './lib/python.js';
import {
  describeMachine,
  type Machine,
  markdownMachine,
  markdownTable,
  markdownTargets,
  type Row,
  textTable,
  textTargets,
} from './lib/report.js';
import {
  DEFAULT_PARAMS,
  decideRequestBytes,
  EXTRA_SCENARIOS,
  type MeasuredWindow,
  type Params,
  QUICK_PARAMS,
  type RunContext,
  SCENARIOS,
  type Scenario,
  type ScenarioResult,
  streamRequestBytes,
  type WindowKind,
} from './lib/scenarios.js';
import { runSoak } from './lib/soak.js';
import { MS_PER_S, type Spread, spread } from './lib/stats.js';
import { stopStoreFixtures } from './lib/stores.js';
import { evaluateTargets, type Target } from './lib/targets.js';

/** Rounds of a normal run; fewer only with `--quick`. */
export const MIN_ROUNDS = 3;
/** How long a client may take to connect to a fresh sidecar. */
/** Node flags of the deployed sidecar (Dockerfile ENTRYPOINT, npm start). */
const DEPLOYED_NODE_FLAGS = '';

const CONNECT_TIMEOUT_MS = 10_000;
/** Longest one scenario run may take before the run gives up on it. */
const SCENARIO_TIMEOUT_MS = 240_000;
/** Sampling interval of profiled runs, in microseconds. */
const PROFILE_INTERVAL_US = 250;
/** A 1-minute load average above this at the start means something else is running. */
const BUSY_LOAD = 0.5;
/** Where results go. */
const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results');
const PROFILES_DIR = join(REPO_ROOT, 'bench', 'profiles');
const BENCHMARKS_MD = join(REPO_ROOT, 'BENCHMARKS.md');
const MD_START = '<!-- bench:results:start -->';
const MD_END = '<!-- bench:results:end -->';
/** Every scenario a run can name. */
const ALL_SCENARIOS = [...SCENARIOS, ...EXTRA_SCENARIOS];
/** Baselines that run a server child, whose profile a sidecar profile is set against. */
const PROFILABLE_BASELINES = new Set(['echo-unary', 'echo-bidi', 'python-echo']);

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/** One scenario's results across rounds. */
interface ScenarioResults {
  readonly title: string;
  readonly kind: string;
  readonly metrics: Record<string, { unit: string; label: string } & Partial<Spread>>;
  readonly notes: string[];
  readonly errors: string[];
}

/** Learns the control and notification payloads the sidecar POSTs, from the receiver. */
async function calibrate(receiverUrl: string): Promise<{ control: string; notify: string }> {
  const sidecar = await startBenchSidecar();
  const client = createClient(sidecar.grpc);
  try {
    await waitForReady(client, CONNECT_TIMEOUT_MS);
    const registerHooks = hookMethod(client, HookService.method.registerHooks);
    const decide = hookMethod(client, HookService.method.decideToolCall);
    const dispatch = hookMethod(client, HookService.method.dispatch);
    await registerHooks(
      create(RegisterHooksRequestSchema, {
        operationId: 'op_calibrate',
        hooks: [
          controlHook('policy', receiverUrl),
          notificationHook('step', HookType.AFTER_STEP, receiverUrl),
        ],
      }),
    );
    const response = await decide(decideRequest('op_calibrate'));
    if (response.decision?.outcome.case !== 'allow') {
      throw new Error(`calibration: expected allow, got ${JSON.stringify(response.decision)}`);
    }
    const dispatched = await dispatch(stepEvent('op_calibrate'));
    if (dispatched.outcomes[0]?.status !== HookOutcomeStatus.DELIVERED) {
      throw new Error(`calibration: expected a delivery, got ${JSON.stringify(dispatched)}`);
    }
    const last = async (path: string) => {
      const res = await fetch(`${receiverUrl}/last?path=${encodeURIComponent(path)}`);
      return res.ok ? res.text() : '';
    };
    return { control: await last(ALLOW_PATH), notify: await last(NOTIFY_PATH) };
  } finally {
    client.close();
    await sidecar.stop();
  }
}

/** Runs every scenario once per round, interleaved; answers their results. */
async function runRounds(
  scenarios: readonly Scenario[],
  rounds: number,
  ctx: RunContext,
): Promise<Map<string, { values: Map<string, number[]>; notes: Set<string>; errors: string[] }>> {
  const results = new Map<
    string,
    { values: Map<string, number[]>; notes: Set<string>; errors: string[] }
  >();
  for (const s of scenarios) {
    results.set(s.id, {
      values: new Map(s.metrics.map((m) => [m.key, []])),
      notes: new Set(),
      errors: [],
    });
  }
  for (let round = 1; round <= rounds; round++) {
    for (const scenario of scenarios) {
      const entry = results.get(scenario.id);
      if (entry === undefined || (scenario.firstRoundOnly === true && round > 1)) continue;
      const started = Date.now();
      try {
        const result = await withTimeout(
          scenario.run(ctx),
          SCENARIO_TIMEOUT_MS,
          `${scenario.id} did not finish`,
        );
        for (const m of scenario.metrics) {
          const value = result.metrics[m.key];
          if (value !== undefined && !Number.isNaN(value)) entry.values.get(m.key)?.push(value);
        }
        for (const note of result.notes) entry.notes.add(note);
        const shown = scenario.metrics
          .map((m) => `${m.key}=${result.metrics[m.key]?.toFixed(m.digits)}`)
          .join(' ');
        log(`round ${round}/${rounds} ${scenario.id}: ${shown} (${Date.now() - started} ms)`);
      } catch (e: unknown) {
        const message = e instanceof Error ? e.message : String(e);
        entry.errors.push(`round ${round}: ${message}`);
        log(`round ${round}/${rounds} ${scenario.id} FAILED: ${message}`);
      }
    }
  }
  return results;
}

/** Runs one scenario (and its baseline) under `--cpu-prof` and writes its summary. */
async function profileScenario(
  scenario: Scenario,
  ctx: RunContext,
  machine: Machine,
  missed: readonly Target[],
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-bench-prof-'));
  const flags = (sub: string) => [
    '--cpu-prof',
    `--cpu-prof-dir=${join(dir, sub)}`,
    `--cpu-prof-interval=${PROFILE_INTERVAL_US}`,
  ];
  const firstProfile = (sub: string): CpuProfile => {
    const files = readdirSync(join(dir, sub))
      .filter((f) => f.endsWith('.cpuprofile'))
      .sort();
    if (files[0] === undefined) throw new Error(`no profile written in ${sub}`);
    return JSON.parse(readFileSync(join(dir, sub, files[0]), 'utf8')) as CpuProfile;
  };
  try {
    const baseline = ALL_SCENARIOS.find((s) => s.id === scenario.baselineId);
    const lines: string[] = [];
    let baselineRun: { result: ScenarioResult; profile: CpuProfile } | undefined;
    if (scenario.paired) {
      // One run profiles both: the floor is this scenario's own baseline.
      log(`profiling ${scenario.id} (sidecar and floor)`);
    } else if (baseline !== undefined && PROFILABLE_BASELINES.has(baseline.id)) {
      log(`profiling baseline ${baseline.id}`);
      const result = await baseline.run({ ...ctx, baselineFlags: flags('baseline') });
      baselineRun = { result, profile: firstProfile('baseline') };
      lines.push(
        `- \`${baseline.id}\` under the profiler: ${metricText(baseline, result.metrics)}`,
      );
    }
    log(`profiling ${scenario.id}`);
    const result = await scenario.run({
      ...ctx,
      sidecarFlags: [...ctx.sidecarFlags, ...flags('sidecar'), '--heapsnapshot-signal=SIGUSR2'],
      baselineFlags: scenario.paired ? flags('baseline') : ctx.baselineFlags,
      heapSnapshot: true,
    });
    const profile = firstProfile('sidecar');
    if (scenario.paired) {
      baselineRun = {
        result: { ...result, windows: result.baselineWindows },
        profile: firstProfile('baseline'),
      };
    }
    lines.unshift(
      `- \`${scenario.id}\` under the profiler: ${metricText(scenario, result.metrics)}`,
    );
    // One section per timed span (c=1, c=64, stream), each against the baseline's same span.
    const windows = Object.entries(result.windows ?? {}) as [WindowKind, MeasuredWindow][];
    const sections: string[] = [];
    for (const [kind, window] of windows.length > 0 ? windows : [[undefined, undefined] as const]) {
      const subject: ProfiledProcess = {
        label: `${scenario.id} (sidecar)`,
        ops: window?.ops ?? result.ops,
        summary: summariseProfile(profile, REPO_ROOT, window),
      };
      const baseWindow = kind === undefined ? undefined : baselineRun?.result.windows?.[kind];
      const baseLabel = scenario.paired ? 'floor server' : `${baseline?.id} (echo server)`;
      const base: ProfiledProcess | undefined =
        baselineRun === undefined ||
        (baseline === undefined && !scenario.paired) ||
        (kind !== undefined && baseWindow === undefined)
          ? undefined
          : {
              label: baseLabel,
              ops: baseWindow?.ops ?? baselineRun.result.ops,
              summary: summariseProfile(baselineRun.profile, REPO_ROOT, baseWindow),
            };
      sections.push(
        `## ${kind === undefined ? 'Whole run' : `Timed part at ${kind}`}\n\n${profileMarkdown(subject, base)}`,
      );
    }
    const misses = missed.filter((t) => t.scenario === scenario.id);
    const text = [
      `# CPU profile: \`${scenario.id}\`, ${scenario.title}`,
      '',
      `Generated by \`npm run bench -- --profile\` on ${new Date().toISOString().slice(0, 10)}`,
      `(${machine.nproc} cores, ${machine.cpuModel}, Node ${machine.node}). The scenario ran once more`,
      `with the sidecar under \`node --cpu-prof --cpu-prof-interval=${PROFILE_INTERVAL_US}\` (µs)`,
      baselineRun === undefined
        ? 'and no baseline process to compare with.'
        : scenario.paired
          ? 'and the floor server likewise, in the same run.'
          : "and its baseline's echo server likewise.",
      'Only the samples of the timed part are kept (start-up and warm-up are left out);',
      'time is self time unless said, and "per op" divides by the operations of the timed part.',
      '',
      misses.length === 0
        ? 'Targets of this scenario: none missed in the run that wrote this file.'
        : `Missed in the run that wrote this file: ${misses.map((t) => `${t.description} (${t.value.toFixed(3)} ${t.cmp} ${t.limit.toFixed(3)} ${t.unit})`).join('; ')}.`,
      '',
      ...lines,
      '',
      ...sections,
      result.appendix ?? '',
    ].join('\n');
    mkdirSync(PROFILES_DIR, { recursive: true });
    const path = join(PROFILES_DIR, `${scenario.id}.md`);
    writeFileSync(path, text);
    formatForLint(path);
    return path;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Formats a file the bench writes and the repository commits, as `npm run lint` wants it. */
function formatForLint(path: string): void {
  execFileSync(join(REPO_ROOT, 'node_modules', '.bin', 'biome'), ['format', '--write', path], {
    stdio: 'ignore',
  });
}

function metricText(scenario: Scenario, metrics: Record<string, number>): string {
  return scenario.metrics
    .map((m) => `${m.label} ${metrics[m.key]?.toFixed(m.digits)} ${m.unit}`)
    .join(', ');
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      check: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      only: { type: 'string' },
      profile: { type: 'boolean', default: false },
      'profile-scenarios': { type: 'string' },
      'write-md': { type: 'boolean', default: false },
      'sidecar-flags': { type: 'string' },
      soak: { type: 'boolean', default: false },
      'soak-minutes': { type: 'string', default: '30' },
      'soak-rate': { type: 'string', default: '60' },
    },
  });
  // Extra node flags for every sidecar, to try a runtime setting (such as a heap flag).
  // By default the sidecar runs with the node flags its image and `npm start` use.
  const sidecarFlags = (values['sidecar-flags'] ?? DEPLOYED_NODE_FLAGS)
    .split(' ')
    .filter((f) => f !== '');
  if (values.soak) {
    const minutes = Number(values['soak-minutes']);
    const rate = Number(values['soak-rate']);
    if (!(minutes > 0) || !(rate > 0))
      throw new Error('--soak-minutes and --soak-rate must be > 0');
    const receiver = await startBenchChild('receiver.js');
    try {
      const ok = await runSoak({
        minutes,
        rate,
        receiverUrl: `http://${receiver.address}`,
        sidecarFlags,
        log,
      });
      return values.check && !ok ? 1 : 0;
    } finally {
      await receiver.stop();
    }
  }
  const startedAt = new Date();
  const rounds = Number(values.rounds ?? (values.quick ? 1 : MIN_ROUNDS));
  if (!Number.isInteger(rounds) || rounds < 1 || (rounds < MIN_ROUNDS && !values.quick)) {
    throw new Error(`--rounds must be an integer >= ${MIN_ROUNDS} (or use --quick)`);
  }
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run npm run build first`);
  const params: Params = values.quick ? QUICK_PARAMS : DEFAULT_PARAMS;
  const only = values.only?.split(',').filter((s) => s !== '');
  const scenarios =
    only === undefined ? SCENARIOS : ALL_SCENARIOS.filter((s) => only.includes(s.id));
  const unknown = (only ?? []).filter((id) => !ALL_SCENARIOS.some((s) => s.id === id));
  if (unknown.length > 0) throw new Error(`unknown scenarios: ${unknown.join(', ')}`);
  const missing = generatorsMissing();
  if (missing !== undefined) throw new Error(missing);
  const machine = describeMachine();
  const loadBefore = loadavg()[0] ?? 0;
  log(
    `${machine.nproc} cores, ${machine.cpuModel}, ${machine.ramGiB} GiB, Node ${machine.node}, load average ${loadBefore.toFixed(2)}`,
  );
  if (loadBefore > BUSY_LOAD) {
    log(`the machine is busy (load average ${loadBefore.toFixed(2)}): numbers will be noisy`);
  }

  const python = scenarios.some((s) => s.id.startsWith('python-'))
    ? ensurePythonVenv(log)
    : { ok: true as const };
  if (!python.ok) log(`Python client unavailable: ${python.reason}`);

  const receiver = await startBenchChild('receiver.js');
  const receiverUrl = `http://${receiver.address}`;
  try {
    const payloads = await calibrate(receiverUrl);
    log(
      `DecideToolCall request ${decideRequestBytes().length} B, DispatchStream request ${streamRequestBytes().length} B, control payload ${Buffer.byteLength(payloads.control)} B`,
    );
    const ctx: RunContext = {
      params,
      paired: values.quick ? QUICK_PAIRED : DEFAULT_PAIRED,
      receiverUrl,
      controlPayload: payloads.control,
      pythonUnavailable: python.ok ? undefined : python.reason,
      sidecarFlags,
      baselineFlags: [],
      log,
    };
    const raw = await runRounds(scenarios, rounds, ctx);

    const results: Record<string, ScenarioResults> = {};
    const rows: Row[] = [];
    for (const s of scenarios) {
      const entry = raw.get(s.id);
      const metrics: ScenarioResults['metrics'] = {};
      for (const m of s.metrics) {
        const v = entry?.values.get(m.key) ?? [];
        const sp = v.length > 0 ? spread(v) : undefined;
        metrics[m.key] = { unit: m.unit, label: m.label, ...sp };
        rows.push({ scenario: s, metric: m, spread: sp });
      }
      results[s.id] = {
        title: s.title,
        kind: s.kind,
        metrics,
        notes: [...(entry?.notes ?? [])],
        errors: entry?.errors ?? [],
      };
    }
    const medianOf = (scenario: string, metric: string) =>
      results[scenario]?.metrics[metric]?.median ?? Number.NaN;
    const targets = evaluateTargets(medianOf);
    const failed = Object.entries(results).filter(([, r]) => r.errors.length > 0);

    process.stdout.write(`\n${textTable(rows)}\n\n${textTargets(targets)}\n`);
    for (const [id, r] of Object.entries(results)) {
      for (const note of r.notes) process.stdout.write(`note: ${id}: ${note}\n`);
      for (const error of r.errors) process.stdout.write(`error: ${id}: ${error}\n`);
    }

    const missed = targets.filter((t) => !t.pass);
    const toProfile = new Set<string>(
      values['profile-scenarios']?.split(',').filter((s) => s !== '') ?? [],
    );
    if (values.profile) for (const t of missed) toProfile.add(t.scenario);
    const profiles: string[] = [];
    for (const id of toProfile) {
      const scenario = ALL_SCENARIOS.find((s) => s.id === id);
      if (scenario === undefined) throw new Error(`unknown scenario to profile: ${id}`);
      try {
        profiles.push(await profileScenario(scenario, ctx, machine, missed));
      } catch (e: unknown) {
        log(`profiling ${id} failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    for (const p of profiles) log(`wrote ${p}`);

    const durationS = (Date.now() - startedAt.getTime()) / MS_PER_S;
    const receiverStats = (await (await fetch(`${receiverUrl}/stats`)).json()) as unknown;
    const command = `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim();
    const json = {
      startedAt: startedAt.toISOString(),
      sidecarFlags,
      durationS,
      command,
      rounds,
      quick: values.quick,
      machine,
      loadAverage: { start: loadBefore, end: loadavg()[0] ?? 0 },
      receiverStats,
      python: python.ok ? 'bench/.venv (bench/requirements.txt)' : `unavailable: ${python.reason}`,
      sizes: {
        decideToolCallRequestBytes: decideRequestBytes().length,
        dispatchStreamRequestBytes: streamRequestBytes().length,
        controlPayloadBytes: Buffer.byteLength(payloads.control),
        notificationPayloadBytes: Buffer.byteLength(payloads.notify),
      },
      params,
      scenarios: results,
      targets,
      profiles: profiles.map((p) => p.slice(REPO_ROOT.length + 1)),
    };
    mkdirSync(RESULTS_DIR, { recursive: true });
    const latest = join(RESULTS_DIR, 'latest.json');
    writeFileSync(latest, `${JSON.stringify(json, null, 2)}\n`);
    log(`wrote ${latest} (${durationS.toFixed(0)} s)`);

    if (values['write-md']) {
      writeBenchmarksMd(
        rows,
        targets,
        machine,
        rounds,
        command,
        json.sizes,
        startedAt,
        json.loadAverage,
      );
      const quoted = join(RESULTS_DIR, 'quoted.json');
      copyFileSync(latest, quoted);
      formatForLint(quoted);
      log('updated BENCHMARKS.md and bench/results/quoted.json');
    }
    const ok = missed.length === 0 && failed.length === 0;
    if (values.check && !ok) {
      log(`check failed: ${missed.length} target(s) missed, ${failed.length} scenario(s) failed`);
      return 1;
    }
    return 0;
  } finally {
    await stopStoreFixtures();
    await receiver.stop();
  }
}

/** Replaces the generated part of BENCHMARKS.md (between its markers). */
function writeBenchmarksMd(
  rows: readonly Row[],
  targets: readonly Target[],
  machine: Machine,
  rounds: number,
  command: string,
  sizes: Record<string, number>,
  startedAt: Date,
  load: { start: number; end: number },
): void {
  const text = existsSync(BENCHMARKS_MD) ? readFileSync(BENCHMARKS_MD, 'utf8') : '';
  const start = text.indexOf(MD_START);
  const end = text.indexOf(MD_END);
  if (start < 0 || end < start) {
    log(`BENCHMARKS.md has no ${MD_START} ... ${MD_END} section; not updated`);
    return;
  }
  let python = '';
  try {
    python = execFileSync(join(REPO_ROOT, 'bench', '.venv', 'bin', 'python'), ['--version'])
      .toString()
      .trim();
  } catch {
    python = 'no Python';
  }
  const generated = [
    MD_START,
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC with \`${command}\`, ${rounds} interleaved rounds:`,
    '',
    markdownMachine(machine),
    `- ${python}, grpcio from bench/requirements.txt`,
    `- 1-minute load average ${load.start.toFixed(2)} at the start, ${load.end.toFixed(2)} at the end (the bench keeps both cores busy itself; above ${BUSY_LOAD} at the start, something else was running)`,
    `- messages: DecideToolCall request ${sizes.decideToolCallRequestBytes} B, DispatchStream request ${sizes.dispatchStreamRequestBytes} B, control webhook JSON ${sizes.controlPayloadBytes} B, notification webhook JSON ${sizes.notificationPayloadBytes} B`,
    '',
    '### Targets',
    '',
    markdownTargets(targets),
    '',
    '### All results',
    '',
    markdownTable(rows, rounds),
    MD_END,
  ].join('\n');
  writeFileSync(BENCHMARKS_MD, text.slice(0, start) + generated + text.slice(end + MD_END.length));
  formatForLint(BENCHMARKS_MD);
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    killRemainingChildren();
    process.exitCode = 2;
  },
);
