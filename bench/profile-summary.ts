/**
 * @module Prints the Markdown summary of a `.cpuprofile` (see
 * `lib/profile.ts`), optionally side by side with a baseline's.
 *
 * Usage: `node dist/bench/profile-summary.js SUBJECT.cpuprofile [--ops N]
 * [--baseline BASE.cpuprofile --baseline-ops N]`
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/support/sidecar.js';
import { type CpuProfile, profileMarkdown, summariseProfile } from './lib/profile.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    ops: { type: 'string', default: '0' },
    baseline: { type: 'string' },
    'baseline-ops': { type: 'string', default: '0' },
  },
});
const [subjectPath] = positionals;
if (subjectPath === undefined) {
  process.stderr.write(
    'usage: profile-summary SUBJECT.cpuprofile [--ops N] [--baseline BASE.cpuprofile --baseline-ops N]\n',
  );
  process.exit(2);
}
const load = (path: string) =>
  summariseProfile(JSON.parse(readFileSync(path, 'utf8')) as CpuProfile, REPO_ROOT);
const baselinePath = values.baseline;
process.stdout.write(
  profileMarkdown(
    { label: 'subject', summary: load(subjectPath), ops: Number(values.ops) },
    baselinePath === undefined
      ? undefined
      : { label: 'baseline', summary: load(baselinePath), ops: Number(values['baseline-ops']) },
  ),
);
