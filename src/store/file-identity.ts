/**
 * @module Which file is at a path: its device and inode, compared to tell a
 * file still at its path from one removed or replaced there (the database,
 * its `-wal` file, the lock file).
 */
import { type BigIntStats, statSync } from 'node:fs';

/** Where a file is: its device and inode, as bigints (an inode number may pass 2^53). */
export interface FileIdentity {
  readonly dev: bigint;
  readonly ino: bigint;
}

/**
 * Stats `path` (one `stat` call of a few microseconds; no file is opened), or
 * undefined when nothing is there.
 *
 * @throws the file-system error for anything but a missing entry.
 */
export function statPath(path: string): BigIntStats | undefined {
  return statSync(path, { bigint: true, throwIfNoEntry: false });
}

/** Whether `found` is the file `expected` names. */
export function sameFile(found: FileIdentity, expected: FileIdentity): boolean {
  return found.ino === expected.ino && found.dev === expected.dev;
}
