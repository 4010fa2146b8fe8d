/**
 * @module The package's version, read from `package.json` beside `dist/`
 * (the bundle sits at `dist/src/main.js`, so the path is the same for the
 * bundle and for the compiled modules).
 */
import { readFileSync } from 'node:fs';

/** The `version` of package.json; `unknown` when it cannot be read. */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
