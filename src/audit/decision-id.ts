/**
 * @module Decision ids: UUIDs in the version 7 layout (the first 48 bits are
 * the decision's time in milliseconds), so that ids sort by time and a
 * reader can tell roughly when a decision was made from its id alone.
 */
import { createHash, randomUUID } from 'node:crypto';

/** Twelve hex digits of the time, split as a UUID's first two groups. */
function timeGroups(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}`;
}

/** The millisecond of the last id and its time groups with the version digit: decisions come several a millisecond under load. */
let lastMs = Number.NaN;
let lastPrefix = '';

/**
 * A new decision id for a decision made at `ms` (epoch milliseconds): the
 * time, then 74 random bits.
 *
 * @example newDecisionId(Date.now()) // '019ad2c1-7e4a-7f3b-9c1d-0a2b3c4d5e6f'
 */
export function newDecisionId(ms: number): string {
  if (ms !== lastMs) {
    lastPrefix = `${timeGroups(ms)}-7`;
    lastMs = ms;
  }
  // randomUUID(): xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx; keep what follows its version digit.
  return lastPrefix + randomUUID().slice(15);
}

/**
 * The decision id of a parked call's publication: derived from the tool
 * call id and the time it was published, both stored with the result, so
 * that every duplicate publication, on any sidecar sharing the store,
 * answers the id the publishing call answered.
 */
export function publicationDecisionId(toolCallId: string, publishedAt: number): string {
  const h = createHash('sha256').update(toolCallId).digest('hex');
  // Variant bits 10xx in the fourth group's first digit, as in every UUID.
  const variant = ((Number.parseInt(h[3] as string, 16) & 0x3) | 0x8).toString(16);
  return `${timeGroups(publishedAt)}-7${h.slice(0, 3)}-${variant}${h.slice(4, 7)}-${h.slice(7, 19)}`;
}
