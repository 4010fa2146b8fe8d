/**
 * @module Which check the store health monitor runs when: the quick check on
 * the interval while healthy, the full check (a write probe) first, while
 * unhealthy and right after a failed call; on fake timers and fake checks.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { StoreHealthMonitor } from '../../src/store/health-monitor.js';

const INTERVAL_MS = 1_000;

/** A fake store: each check resolves or rejects as the test sets it, and is counted. */
function fakeChecks() {
  const state = {
    quick: undefined as Error | undefined,
    full: undefined as Error | undefined,
    /** While set, the quick check waits for it. */
    gate: undefined as Promise<void> | undefined,
    calls: [] as Array<'quick' | 'full'>,
  };
  return {
    state,
    quickCheck: async () => {
      state.calls.push('quick');
      await state.gate;
      if (state.quick !== undefined) throw state.quick;
    },
    ping: async () => {
      state.calls.push('full');
      if (state.full !== undefined) throw state.full;
    },
  };
}

describe('StoreHealthMonitor', () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ write: (line) => lines.push(JSON.parse(line)) });
  const monitors: StoreHealthMonitor[] = [];

  beforeEach(() => {
    vi.useFakeTimers();
    lines.length = 0;
  });
  afterEach(() => {
    for (const monitor of monitors.splice(0)) monitor.stop();
    vi.useRealTimers();
  });

  function start(checks: ReturnType<typeof fakeChecks>, changes: boolean[]): StoreHealthMonitor {
    const monitor = new StoreHealthMonitor({
      quickCheck: checks.quickCheck,
      ping: checks.ping,
      onChange: (healthy) => changes.push(healthy),
      logger,
      intervalMs: INTERVAL_MS,
    });
    monitors.push(monitor);
    return monitor;
  }

  it('runs the full check at the first interval, then only the quick check while healthy', async () => {
    const checks = fakeChecks();
    const changes: boolean[] = [];
    start(checks, changes);

    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 4);

    expect(checks.state.calls).toEqual(['full', 'quick', 'quick', 'quick']);
    expect(changes).toEqual([]);
  });

  it('starts unhealthy when told (a store still opening) and runs the full check each interval until it passes', async () => {
    const checks = fakeChecks();
    const changes: boolean[] = [];
    checks.state.full = new StoreUnavailableError('STORE_UNAVAILABLE', 'not open yet');
    const monitor = new StoreHealthMonitor({
      quickCheck: checks.quickCheck,
      ping: checks.ping,
      onChange: (healthy) => changes.push(healthy),
      logger,
      intervalMs: INTERVAL_MS,
      healthy: false,
    });
    monitors.push(monitor);
    expect(monitor.healthy).toBe(false);

    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);
    expect(changes).toEqual([]);
    checks.state.full = undefined;
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);

    expect(checks.state.calls).toEqual(['full', 'full', 'full', 'quick']);
    expect(changes).toEqual([true]);
    expect(monitor.healthy).toBe(true);
  });

  it('turns unhealthy when the quick check fails, then runs the full check each interval until it passes', async () => {
    const checks = fakeChecks();
    const changes: boolean[] = [];
    const monitor = start(checks, changes);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    const lost = new StoreUnavailableError('STORE_FILE_MISSING', 'the file was removed');
    checks.state.quick = lost;
    checks.state.full = lost;

    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(monitor.healthy).toBe(false);
    expect(changes).toEqual([false]);
    checks.state.full = new StoreUnavailableError('STORE_FILE_REPLACED', 'not agenthooks');
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);
    checks.state.quick = undefined;
    checks.state.full = undefined;
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);

    expect(checks.state.calls).toEqual(['full', 'quick', 'full', 'full', 'full', 'quick']);
    expect(changes).toEqual([false, true]);
    expect(monitor.healthy).toBe(true);
    // One line per change of state, and one when the cause changed meanwhile.
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['error', 'store cannot be written; health NOT_SERVING'],
      ['warn', 'store still cannot be written'],
      ['info', 'store recovered; health SERVING'],
    ]);
  });

  it('runs the full check at once after a failed call, and not again for more failures while unhealthy', async () => {
    const checks = fakeChecks();
    const changes: boolean[] = [];
    const monitor = start(checks, changes);
    checks.state.full = new StoreUnavailableError('STORE_FULL', 'database or disk is full');

    await monitor.check();
    await monitor.check();
    await monitor.check();

    expect(checks.state.calls).toEqual(['full']);
    expect(changes).toEqual([false]);
  });

  it('runs a full check asked for during a quick one right after it', async () => {
    const checks = fakeChecks();
    const changes: boolean[] = [];
    const monitor = start(checks, changes);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    let release: () => void = () => {};
    checks.state.gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    checks.state.full = new StoreUnavailableError('STORE_FULL', 'database or disk is full');

    const checked = monitor.check();
    release();
    await checked;

    expect(checks.state.calls).toEqual(['full', 'quick', 'full']);
    expect(changes).toEqual([false]);
  });

  it('stops checking after stop()', async () => {
    const checks = fakeChecks();
    const monitor = start(checks, []);
    monitor.stop();

    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 3);

    expect(checks.state.calls).toEqual([]);
  });
});
