/**
 * @module The app's shutdown against a store that does not answer (a frozen
 * PostgreSQL server, a query still waiting out its timeout): `close` ends at
 * its deadline, plus the store's least time, and says so, instead of waiting
 * for the store; a store that closes in time is closed as before.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { parseServeConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { openSqliteStore } from '../../src/store/sqlite.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** An app on a real SQLite file whose `close` never settles when `hang` is set. */
function appWith(hang: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-shutdown-'));
  dirs.push(dir);
  const path = join(dir, 'agenthooks.db');
  const real = openSqliteStore(path);
  let closed = false;
  const store = new Proxy(real, {
    get(target, prop) {
      if (prop === 'close') {
        return async () => {
          if (hang) return new Promise<void>(() => undefined);
          await target.close();
          closed = true;
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'warn',
    write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>),
  });
  const config = parseServeConfig(['--db', path], {});
  const app = createApp(config, logger, {
    store: { store, shared: false },
    processEnv: {},
    globalDispatcher: false,
  });
  return { app, logs, real, closed: () => closed };
}

describe('shutdown and the store', () => {
  it('ends at its deadline when the store does not close, and logs it', async () => {
    const { app, logs, real } = appWith(true);
    try {
      // Never settles without the bound: the test's own timeout would fail it.
      await app.close(Date.now());
      expect(logs.map((l) => l.msg)).toContain(
        'the store did not close before the shutdown deadline',
      );
    } finally {
      await real.close();
    }
  });

  it('closes a store that answers, and logs nothing about it', async () => {
    const { app, logs, closed } = appWith(false);
    await app.close(Date.now());
    expect(closed()).toBe(true);
    expect(logs.map((l) => l.msg)).not.toContain(
      'the store did not close before the shutdown deadline',
    );
  });
});
