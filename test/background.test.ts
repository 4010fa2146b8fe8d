/**
 * BackgroundScope: detached tasks are bounded in count and bytes, a task
 * past a bound is not started but counted and logged at most once per
 * interval, and each task runs under its own signal, aborted at the deadline.
 */
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type BackgroundDropReason,
  BackgroundScope,
  DROP_LOG_INTERVAL_MS,
} from '../src/background.js';
import { createLogger } from '../src/log.js';

/** A logger that keeps its lines, parsed. */
function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ write: (line) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

/** A task that runs until its signal aborts or `release()` is called. */
function heldTask() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const signals: AbortSignal[] = [];
  const task = (signal: AbortSignal) => {
    signals.push(signal);
    return new Promise<void>((resolve) => {
      signal.addEventListener('abort', () => resolve(), { once: true });
      void released.then(resolve);
    });
  };
  return { task, release, signals };
}

function recordingObserver() {
  const dropped: BackgroundDropReason[] = [];
  const inFlight: [number, number][] = [];
  return {
    dropped,
    inFlight,
    observer: {
      dropped: (reason: BackgroundDropReason) => dropped.push(reason),
      inFlight: (tasks: number, bytes: number) => inFlight.push([tasks, bytes]),
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('BackgroundScope bounds', () => {
  it('does not start a task past maxTasks, reports max_tasks and counts it', async () => {
    const { logger } = recordingLogger();
    const { observer, dropped, inFlight } = recordingObserver();
    const scope = new BackgroundScope(logger, { maxTasks: 2 }, observer);
    const held = heldTask();
    expect(scope.run('a', held.task)).toEqual({ started: true });
    expect(scope.run('b', held.task)).toEqual({ started: true });
    let thirdRan = false;
    const third = scope.run('c', async () => {
      thirdRan = true;
    });
    expect(third).toEqual({ started: false, reason: 'max_tasks' });
    expect(thirdRan).toBe(false);
    expect(dropped).toEqual(['max_tasks']);
    expect(scope.size).toBe(2);
    held.release();
    await scope.close(Date.now());
    expect(inFlight.at(-1)).toEqual([0, 0]);
    // Room again once the held tasks settled.
    expect(scope.run('d', async () => undefined)).toEqual({ started: true });
  });

  it('does not start a task whose bytes would pass maxBytes, and frees them when tasks settle', async () => {
    const { logger } = recordingLogger();
    const { observer, dropped } = recordingObserver();
    const scope = new BackgroundScope(logger, { maxTasks: 10, maxBytes: 1000 }, observer);
    const held = heldTask();
    expect(scope.run('a', held.task, { bytes: 600 }).started).toBe(true);
    expect(scope.bytes).toBe(600);
    expect(scope.run('b', held.task, { bytes: 500 })).toEqual({
      started: false,
      reason: 'max_bytes',
    });
    expect(scope.run('c', held.task, { bytes: 400 }).started).toBe(true);
    expect(scope.bytes).toBe(1000);
    expect(dropped).toEqual(['max_bytes']);
    held.release();
    await scope.close(Date.now() + 1000);
    expect(scope.bytes).toBe(0);
  });

  it('logs the first drop at once, then at most one line per interval with the count since', async () => {
    vi.useFakeTimers();
    const { logger, lines } = recordingLogger();
    const scope = new BackgroundScope(logger, { maxTasks: 1 });
    const held = heldTask();
    scope.run('a', held.task);
    const drops = () =>
      lines.filter((l) => l.msg === 'detached deliveries dropped: too many in flight');
    for (let i = 0; i < 5; i++) scope.run('b', held.task);
    expect(drops()).toHaveLength(1);
    expect(drops()[0]).toMatchObject({
      level: 'warn',
      dropped: 1,
      droppedMaxTasks: 1,
      maxTasks: 1,
    });
    vi.advanceTimersByTime(DROP_LOG_INTERVAL_MS - 1);
    for (let i = 0; i < 3; i++) scope.run('b', held.task);
    expect(drops()).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(drops()).toHaveLength(2);
    expect(drops()[1]).toMatchObject({ dropped: 7, droppedMaxTasks: 7, tasks: 1 });
    // A quiet interval ends the window: the next drop is logged at once.
    vi.advanceTimersByTime(DROP_LOG_INTERVAL_MS);
    expect(drops()).toHaveLength(2);
    scope.run('b', held.task);
    expect(drops()).toHaveLength(3);
    expect(drops()[2]).toMatchObject({ dropped: 1 });
    held.release();
    vi.useRealTimers();
    await scope.close(Date.now());
  });

  it('logs drops not yet logged when it closes', async () => {
    vi.useFakeTimers();
    const { logger, lines } = recordingLogger();
    const scope = new BackgroundScope(logger, { maxTasks: 1 });
    const held = heldTask();
    scope.run('a', held.task);
    scope.run('b', held.task);
    scope.run('b', held.task);
    held.release();
    vi.useRealTimers();
    await scope.close(Date.now());
    const drops = lines.filter((l) => l.msg === 'detached deliveries dropped: too many in flight');
    expect(drops.map((l) => l.dropped)).toEqual([1, 1]);
  });
});

describe('BackgroundScope signals', () => {
  it('runs each task under its own signal and aborts them all at the deadline', async () => {
    const { logger } = recordingLogger();
    const scope = new BackgroundScope(logger, { maxTasks: 100 });
    const held = heldTask();
    for (let i = 0; i < 50; i++) scope.run('task', held.task);
    expect(new Set(held.signals).size).toBe(50);
    // Each signal carries only its own task's listener: none collects one per task.
    expect(Math.max(...held.signals.map((s) => getEventListeners(s, 'abort').length))).toBe(1);
    await scope.close(Date.now());
    expect(held.signals.every((s) => s.aborted)).toBe(true);
    expect(held.signals[0]?.reason).toMatchObject({ code: 'BACKGROUND_ABORTED' });
    expect(scope.size).toBe(0);
  });

  it('starts a task after close with an aborted signal', async () => {
    const { logger } = recordingLogger();
    const scope = new BackgroundScope(logger);
    await scope.close(Date.now());
    const held = heldTask();
    expect(scope.run('late', held.task).started).toBe(true);
    expect(held.signals[0]?.aborted).toBe(true);
  });
});
