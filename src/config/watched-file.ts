/**
 * @module A configuration file the sidecar re-reads when it changes: the
 * env file (`--hooks-env-file`) and the operator plugins file (`--plugins-file`),
 * typically mounted from a ConfigMap or Secret. It watches the file's
 * directory, coalesces a burst of events into one read, and reports a read
 * only when the file's bytes or existence changed since the last read. While
 * the directory cannot be watched it polls, and watches again once it can.
 * {@link FileSnapshots} keeps the snapshot computed from the file's latest
 * read, numbered by generation, for both.
 */
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { extend } from '../extend.js';
import type { Logger } from '../log.js';

/** Quiet time after the last change event in the file's directory before the file is read. */
export const WATCHED_FILE_DEBOUNCE_MS = 50;

/**
 * Interval of the fallback check, used while the file's directory cannot be
 * watched (it does not exist yet, or the watch failed): each tick tries to
 * watch the directory again and compares the file with the last read.
 */
export const WATCHED_FILE_POLL_INTERVAL_MS = 1_000;

/** What one read of the file found. */
export type FileRead =
  | { readonly kind: 'ok'; readonly bytes: Buffer }
  | { readonly kind: 'missing' }
  | { readonly kind: 'error'; readonly code: string; readonly cause: unknown };

/** Options of a {@link WatchedFile}. */
export interface WatchedFileOptions {
  /** The file as configured, for log lines; read and watched as an absolute path. */
  readonly path: string;
  /** What the file is, in log lines (`env file`, `plugins file`). */
  readonly label: string;
  /** Field name of the file in log lines (`envFile`, `pluginsFile`). */
  readonly logKey: string;
  /** Receives watcher problems and unchanged-file lines; never the file's content. */
  readonly logger: Logger;
  /** Watches for changes. Default true; the watch never keeps the process alive. */
  readonly watch?: boolean;
  /** Called with a read whose bytes or existence differ from the last read. */
  readonly onChange: (read: FileRead) => void;
}

/**
 * A watched configuration file.
 *
 * @example
 * const file = new WatchedFile({ path, label: 'env file', logKey: 'envFile', logger,
 *   onChange: (read) => apply(read) });
 * apply(file.read()); // the first read
 * // on shutdown:
 * file.close();
 */
export class WatchedFile {
  readonly #configured: string;
  readonly #path: string;
  readonly #label: string;
  readonly #logKey: string;
  readonly #logger: Logger;
  readonly #onChange: (read: FileRead) => void;
  /** The last read, to tell a real change from a directory event. */
  #lastRead: FileRead | undefined;
  #watcher: FSWatcher | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  /** Starts watching the file's directory (unless `watch` is false); reads nothing yet. */
  constructor(o: WatchedFileOptions) {
    this.#configured = o.path;
    this.#path = resolve(o.path);
    this.#label = o.label;
    this.#logKey = o.logKey;
    this.#logger = o.logger;
    this.#onChange = o.onChange;
    // Watch before the first read, so a change right after it is not missed.
    if (o.watch !== false && !this.#watchDirectory()) this.#poll();
  }

  /** Reads the file's bytes now and remembers the read as the last one. Never throws. */
  read(): FileRead {
    let read: FileRead;
    try {
      read = { kind: 'ok', bytes: readFileSync(this.#path) };
    } catch (e: unknown) {
      const code = (e as NodeJS.ErrnoException).code ?? 'UNKNOWN';
      // A missing file or a missing directory on its path.
      read =
        code === 'ENOENT' || code === 'ENOTDIR'
          ? { kind: 'missing' }
          : { kind: 'error', code, cause: e };
    }
    this.#lastRead = read;
    return read;
  }

  /** Stops watching. `read()` still works. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#watcher?.close();
    this.#watcher = undefined;
    if (this.#pollTimer !== undefined) clearInterval(this.#pollTimer);
    this.#pollTimer = undefined;
  }

  /**
   * Watches the file's directory, not the file: Kubernetes updates a
   * ConfigMap or Secret volume by swapping a `..data` symlink there, and
   * editors save by rename, so the file's own inode may never change. Any
   * event schedules a read; only changed bytes (or existence) are reported.
   * Returns false, after a warning unless `quiet`, when the directory cannot
   * be watched (most often: it does not exist yet).
   */
  #watchDirectory(quiet = false): boolean {
    let watcher: FSWatcher;
    try {
      // `persistent: false`: the watch never keeps the process alive.
      watcher = watch(dirname(this.#path), { persistent: false }, () => this.#schedule());
    } catch (e: unknown) {
      if (!quiet) this.#warnPolling('directory cannot be watched; polling', e);
      return false;
    }
    watcher.on('error', (e: unknown) => {
      this.#warnPolling('directory watch failed; polling', e);
      watcher.close();
      if (this.#watcher === watcher) this.#watcher = undefined;
      this.#poll();
    });
    this.#watcher = watcher;
    return true;
  }

  #warnPolling(what: string, e: unknown): void {
    this.#logger.warn(`${this.#label} ${what}`, {
      [this.#logKey]: this.#configured,
      code: (e as NodeJS.ErrnoException).code,
      intervalMs: WATCHED_FILE_POLL_INTERVAL_MS,
    });
  }

  /**
   * Checks the file every {@link WATCHED_FILE_POLL_INTERVAL_MS} until its
   * directory can be watched again. Comparing with the last read (not with a
   * stat baseline taken later) leaves no window in which a change is missed.
   */
  #poll(): void {
    if (this.#pollTimer !== undefined || this.#closed) return;
    this.#pollTimer = setInterval(() => {
      if (this.#watchDirectory(true)) {
        clearInterval(this.#pollTimer);
        this.#pollTimer = undefined;
      }
      // After the watch is in place, so a change is seen by one or the other.
      this.#schedule();
    }, WATCHED_FILE_POLL_INTERVAL_MS);
    this.#pollTimer.unref();
  }

  /** Coalesces a burst of events into one read, {@link WATCHED_FILE_DEBOUNCE_MS} after the last. */
  #schedule(): void {
    if (this.#closed) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#check(), WATCHED_FILE_DEBOUNCE_MS);
    this.#timer.unref();
  }

  /** Reports a read when the file's bytes or existence changed since the last read. */
  #check(): void {
    this.#timer = undefined;
    if (this.#closed) return;
    const previous = this.#lastRead;
    const read = this.read();
    if (previous !== undefined && sameRead(read, previous)) {
      this.#logger.debug(`${this.#label} unchanged`, { [this.#logKey]: this.#configured });
      return;
    }
    this.#onChange(read);
  }
}

function sameRead(a: FileRead, b: FileRead): boolean {
  if (a.kind === 'ok' && b.kind === 'ok') return a.bytes.equals(b.bytes);
  if (a.kind === 'error' && b.kind === 'error') return a.code === b.code;
  return a.kind === b.kind;
}

/**
 * Why a snapshot was computed: `environment` when the effective environment
 * changed and the plugins, whose signing secrets it declares, were checked
 * against it again.
 */
export type ReloadCause = 'start' | 'file' | 'signal' | 'manual' | 'environment';

/**
 * Computes a snapshot from one read of the file (`undefined` when no file is
 * configured), for `generation` (1 for the first load, then one more per
 * reload). It must not throw: an unusable file is an invalid snapshot.
 */
export type SnapshotLoader<S> = (
  cause: ReloadCause,
  generation: number,
  read: FileRead | undefined,
) => S;

/** Options of {@link FileSnapshots}. */
export interface FileSnapshotsOptions<S> extends Omit<WatchedFileOptions, 'path' | 'onChange'> {
  /** The file; without one every snapshot is loaded from no read. */
  readonly path: string | undefined;
  readonly load: SnapshotLoader<S>;
}

/**
 * The snapshots of an optional watched configuration file: the first is
 * loaded at construction (cause `start`), a new one when the file changes
 * (`file`) and on {@link FileSnapshots.reload} (SIGHUP, or a test).
 *
 * @example
 * const snapshots = new FileSnapshots({ path, label: 'plugins file', logKey: 'pluginsFile',
 *   logger, load: (cause, generation, read) => parse(read) });
 * snapshots.current();
 */
export class FileSnapshots<S extends { readonly generation: number }> {
  readonly #file: WatchedFile | undefined;
  readonly #load: SnapshotLoader<S>;
  #snapshot: S;

  constructor(o: FileSnapshotsOptions<S>) {
    this.#load = o.load;
    const { path, load: _load, ...watched } = o;
    this.#file =
      path === undefined
        ? undefined
        : new WatchedFile(
            extend(watched, {
              path,
              onChange: (read: FileRead) => {
                this.#snapshot = this.#load('file', this.#snapshot.generation + 1, read);
              },
            }),
          );
    this.#snapshot = this.#load('start', 1, this.#file?.read());
  }

  /** The current snapshot; it changes only on a reload. */
  current(): S {
    return this.#snapshot;
  }

  /** Reads the file again and loads a new snapshot, whether or not anything changed. */
  reload(cause: ReloadCause): S {
    this.#snapshot = this.#load(cause, this.#snapshot.generation + 1, this.#file?.read());
    return this.#snapshot;
  }

  /** Stops watching the file. The snapshot stays readable and `reload()` still works. */
  close(): void {
    this.#file?.close();
  }
}
