/**
 * @module The nearest known name to a mistyped one, for the errors of the
 * command line, of the `AGENTHOOKS_*` variables and of the environment
 * hooks' `AGENT_HOOK_WEBHOOK_*` variables.
 */

/** `; did you mean --x?` for the candidate nearest to `name`, when one is near enough. */
export function didYouMean(name: string, candidates: readonly string[], prefix: string): string {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  // A third of the name may differ: `--grpc-lisen` finds `--grpc-listen`, `--x` finds nothing.
  const near =
    best !== undefined &&
    (bestDistance <= Math.max(1, Math.floor(name.length / 3)) || best.startsWith(name));
  return near ? `; did you mean '${prefix}${best}'?` : '';
}

/** Levenshtein distance between two short strings. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(
        Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution),
      );
    }
    previous = current;
  }
  return previous[b.length] as number;
}
