/**
 * Reading a running sidecar's state from outside: one metric series, and
 * polling until a state holds.
 */
import type { SidecarProcess } from './sidecar.js';

/** The value of one metric series of the sidecar's `/metrics`, 0 when absent. */
export async function metric(sidecar: SidecarProcess, series: string): Promise<number> {
  const text = await (await fetch(`http://${sidecar.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/**
 * Polls `read` until `done` holds of its value, for up to 10 s, and returns
 * the last value read: the caller asserts on it, so a state never reached
 * fails with what was seen.
 */
export async function eventually<T>(
  read: () => Promise<T> | T,
  done: (v: T) => boolean,
): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}
