/**
 * @module Audit masks: JSON pointers (RFC 6901) naming members that are
 * removed from a decision's recorded payload before any sink sees it, such
 * as `/args/password` or `/result/content`.
 */
import { INVALID_FLAG, InvalidArgumentError } from '../errors.js';

/** A parsed JSON pointer: its reference tokens, unescaped. */
export type Pointer = readonly string[];

/**
 * Parses a JSON pointer such as `/args/api~1key` (`~1` is `/`, `~0` is `~`).
 * The empty pointer (the whole document) is refused: it would mask
 * everything, which `--audit-payloads` off already does.
 *
 * @throws InvalidArgumentError naming `flag` when `text` is not a pointer.
 */
export function parsePointer(text: string, flag: string): Pointer {
  if (!text.startsWith('/') || /~[^01]|~$/.test(text)) {
    throw new InvalidArgumentError(
      flag,
      INVALID_FLAG,
      `--${flag} takes JSON pointers such as /args/password (RFC 6901), got ${JSON.stringify(text)}`,
    );
  }
  return text
    .slice(1)
    .split('/')
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/**
 * Removes what each pointer names from `doc`, in place: an object member is
 * deleted; an array element is replaced by `null`, so that the indexes of
 * the others keep their meaning. A pointer that names nothing is ignored.
 * A token `*` matches every member or element at its level (a pointer
 * cannot name a member called `*` then; none of ours needs to).
 */
export function applyMasks(doc: unknown, masks: readonly Pointer[]): void {
  for (const pointer of masks) removeAt(doc, pointer, 0);
}

function removeAt(node: unknown, pointer: Pointer, at: number): void {
  if (node === null || typeof node !== 'object') return;
  const token = pointer[at] as string;
  const last = at === pointer.length - 1;
  const keys: string[] =
    token === '*' ? Object.keys(node) : Object.hasOwn(node, token) ? [token] : [];
  for (const key of keys) {
    if (!last) {
      removeAt((node as Record<string, unknown>)[key], pointer, at + 1);
    } else if (Array.isArray(node)) {
      node[Number(key)] = null;
    } else {
      delete (node as Record<string, unknown>)[key];
    }
  }
}
