/**
 * @module How far V8's old space may grow past the live heap before a full
 * GC. A sidecar shares its pod's memory with the runtime, so it keeps the
 * heap well under V8's own growth (up to 4x the live size: under a streamed
 * load of 100,000 events that took RSS up by about 90 MB). Too little room
 * costs CPU instead: at 25% a live heap of 20 MB left 5 MB, and a decision
 * load ran a full GC every second or so (c=64 CPU per call 1.82x the
 * floor's; 1.23-1.46x at 40%). With the bundled build 40% keeps RSS under
 * 150 MiB at 10,000 operations (BENCHMARKS.md).
 *
 * A percentage of a small live heap is little room, though, when request
 * bytes held outside it (Buffers) count toward V8's limit too: at 40% of
 * the 15 MB of a quiet sidecar, 6 MB, and 1 MB requests at c=8 started a
 * full GC every 6 calls (35 in 200 calls, against the floor's 7-10 with
 * V8's own growth; 18 with this policy). So after each full GC the room is also at least
 * {@link EXTERNAL_ROOM_FACTOR} times the bytes then held outside the heap,
 * up to {@link MAX_EXTERNAL_ROOM_BYTES}: a sidecar holding no large requests
 * keeps the room below (three times was too much for the `rss-10k` row: 149
 * MiB against 142).
 *
 * And 40% of the 20-25 MB live heap of a sidecar under a steady decision
 * load is 8-10 MB of room: a full GC every second or two, whose pause (about
 * 7.5 ms) an open loop at 80% of the sidecar's maximum turns into a p99 of
 * 29-49 ms (the floor's: 8-20). So the room asked for is at least
 * {@link MIN_ROOM_BYTES} too, which a heap of 30 MB and more has from 40%
 * anyway (a heap under 4 MB gets V8's largest growth instead, and V8 applies
 * the percent to its old space only, so the room is a little under it).
 * 16 MB bought no tail measurable over 12 and cost the `rss-10k` row 5 MiB
 * more (BENCHMARKS.md, "The room under the heap").
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';

/** The old space's room past the live heap, in percent of it, for a large heap. */
export const HEAP_GROWING_PERCENT = 40;

/** The room past the live heap is at least this many times the bytes held outside it. */
export const EXTERNAL_ROOM_FACTOR = 2;

/** The most room the bytes held outside the heap ask for. */
export const MAX_EXTERNAL_ROOM_BYTES = 24 * 1024 * 1024;

/** The least room past the live heap the policy asks for (see the module's comment). */
export const MIN_ROOM_BYTES = 12 * 1024 * 1024;

/** V8's own largest growth (a factor of 4), which the policy never passes. */
const MAX_GROWING_PERCENT = 300;

/**
 * The growing percent for a live heap of `liveBytes` while `externalBytes`
 * are held outside it: {@link HEAP_GROWING_PERCENT}, or more when that leaves
 * less room than {@link MIN_ROOM_BYTES} or than the external bytes ask for,
 * never more than V8's own largest growth.
 *
 * @example growingPercentFor(15 * 2 ** 20, 8 * 2 ** 20) // 107: 16 MB of room past 15 MB
 */
export function growingPercentFor(liveBytes: number, externalBytes: number): number {
  const external = Number.isFinite(externalBytes) && externalBytes > 0 ? externalBytes : 0;
  const room = Math.max(
    MIN_ROOM_BYTES,
    Math.min(MAX_EXTERNAL_ROOM_BYTES, EXTERNAL_ROOM_FACTOR * external),
  );
  if (!(liveBytes > 0)) return HEAP_GROWING_PERCENT;
  const forRoom = Math.ceil((room / liveBytes) * 100);
  return Math.min(MAX_GROWING_PERCENT, Math.max(HEAP_GROWING_PERCENT, forRoom));
}

/** The percent for the heap as it is now. */
function percentNow(): number {
  const heap = getHeapStatistics();
  return growingPercentFor(heap.used_heap_size, heap.external_memory);
}

/**
 * Applies the policy now and after each full GC. V8 reads the flag when it
 * sets the next limit, at the end of a full GC, and the observer hears of a
 * GC after it ended: the percent a GC leads to applies from the one after.
 * The live size read is the whole heap's (new space and code included),
 * which V8's old-space factor is not applied to: the room is a little under
 * what the percent says. Answers a function that stops following the heap.
 */
export function applyHeapPolicy(): () => void {
  let current = percentNow();
  setFlagsFromString(`--heap-growing-percent=${current}`);
  const observer = new PerformanceObserver((list) => {
    const major = list.getEntries().some((entry) => {
      const detail = (entry as { readonly detail?: { readonly kind?: number } | null }).detail;
      return detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR;
    });
    if (!major) return;
    const next = percentNow();
    if (next === current) return;
    current = next;
    setFlagsFromString(`--heap-growing-percent=${current}`);
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => observer.disconnect();
}
