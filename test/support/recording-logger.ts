/**
 * @module A logger for tests that keeps its lines and resolves waiters on
 * the first matching line, and helpers for tests of watched config files.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { AgentHooksError } from '../../src/errors.js';
import type { LogFields, Logger } from '../../src/log.js';

/** A line written to the {@link recordingLogger}. */
export interface Line {
  readonly level: string;
  readonly msg: string;
  readonly fields: LogFields;
}

/**
 * A logger that keeps its lines and resolves waiters on the first line (past
 * or future) that matches, so tests wait on events, not on sleeps.
 */
export function recordingLogger(reloadedMessage = 'environment reloaded') {
  const lines: Line[] = [];
  const waiters: { match: (l: Line) => boolean; resolve: (l: Line) => void }[] = [];
  const write =
    (level: string) =>
    (msg: string, fields: LogFields = {}): void => {
      const line = { level, msg, fields };
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    };
  const logger: Logger = {
    debug: write('debug'),
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: () => logger,
  };
  const waitFor = (match: (l: Line) => boolean): Promise<Line> => {
    const seen = lines.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => waiters.push({ match, resolve }));
  };
  /** Resolves with the `reloadedMessage` line of `generation`. */
  const reloaded = (generation: number) =>
    waitFor((l) => l.msg === reloadedMessage && l.fields.generation === generation);
  return { logger, lines, waitFor, reloaded };
}

/** Replaces `path` atomically, as editors and config tools do: write a temp file, rename it. */
export function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

export function errorOf(fn: () => unknown): AgentHooksError {
  try {
    fn();
  } catch (e: unknown) {
    if (e instanceof AgentHooksError) return e;
    throw e;
  }
  throw new Error('expected an AgentHooksError');
}
