/**
 * @module The operator's plugins (`--plugins-file`): modifying hooks that run
 * for every operation, after the operation's own hooks, read from a JSON file
 * (typically a mounted ConfigMap). They are never stored. The file is re-read
 * when it changes (watched) and on SIGHUP, as the env file is. A configured
 * file that is missing, unreadable, not of the documented shape, or that
 * holds a hook breaking a registration rule makes the plugins invalid: every
 * `Modify` call fails with `INVALID_PLUGINS` until it is fixed. The previous,
 * valid plugins are never kept in its place, so an operator's redactor cannot
 * silently stop running.
 *
 * The file:
 * ```json
 * { "plugins": [
 *   { "name": "privacy",
 *     "hooks": [{ "id": "redact", "point": "MODIFY_POINT_TRANSFORM_CONTEXT",
 *                 "webhook": { "url": "http://redactor.internal/redact" } }] } ] }
 * ```
 * Each hook is a `Hook` in proto JSON, as `RegisterHooks` takes it over
 * Connect JSON; its `plugin` is the plugin's `name`.
 */
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema, ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import { AgentHooksError, InvalidArgumentError } from '../errors.js';
import { checkMatcherBudget } from '../hooks/registry.js';
import {
  checkIdentifier,
  MAX_PLUGIN_NAME_BYTES,
  REASON,
  type ValidationOptions,
  validateHook,
} from '../hooks/validate.js';
import type { Logger } from '../log.js';
import { type FileRead, FileSnapshots, type ReloadCause } from './watched-file.js';

/** Largest plugins file read, in bytes; Kubernetes caps a ConfigMap at 1 MiB. */
export const MAX_PLUGINS_FILE_BYTES = 1024 * 1024;

/** `ErrorInfo.reason` of every `Modify` call while the plugins file cannot be used. */
export const INVALID_PLUGINS = 'INVALID_PLUGINS';

/** Log message of every reload. */
const RELOADED = 'plugins reloaded';

/** The operator's plugins of one read, or why the file cannot be used. */
export type PluginHooks =
  | { readonly ok: true; readonly plugins: number; readonly hooks: readonly Hook[] }
  | { readonly ok: false; readonly error: AgentHooksError };

/** One computed set of operator plugins. Snapshots are frozen and never change. */
export interface PluginsSnapshot {
  /** 1 for the first load, then one more per reload. */
  readonly generation: number;
  readonly hooks: PluginHooks;
}

/** Options of {@link OperatorPlugins}. */
export interface OperatorPluginsOptions {
  /** The plugins file. Default: none, and no operator plugins. */
  readonly pluginsFile?: string;
  /** Receives one line per reload and watcher problems; never a header value. */
  readonly logger: Logger;
  /**
   * The registration rules' policy: destinations and size limits. Header
   * templates may name any variable, as the operator's environment hooks may.
   */
  readonly validation?: Omit<ValidationOptions, 'callerEnvAllowlist'>;
  /** Most hooks the file may hold, all plugins together (`--max-hooks-per-operation`). */
  readonly maxHooks: number;
  /** Reloads when the file changes. Default true; it never keeps the process alive. */
  readonly watch?: boolean;
  /** Called after every load (the first one included), for metrics. */
  readonly onReload?: (snapshot: PluginsSnapshot) => void;
}

/**
 * The operator's plugins.
 *
 * @example
 * const plugins = new OperatorPlugins({ pluginsFile, logger, maxHooks: 1_000 });
 * process.on('SIGHUP', () => plugins.reload('signal'));
 * const hooks = plugins.hooksOrThrow(); // run after the operation's own hooks
 * // on shutdown:
 * plugins.close();
 */
export class OperatorPlugins {
  readonly #pluginsFile: string | undefined;
  readonly #logger: Logger;
  readonly #validation: ValidationOptions;
  readonly #maxHooks: number;
  readonly #onReload: ((snapshot: PluginsSnapshot) => void) | undefined;
  readonly #snapshots: FileSnapshots<PluginsSnapshot>;

  /**
   * Loads the plugins (generation 1, cause `start`) and, unless `watch` is
   * false, starts watching the file's directory. Never throws for an unusable
   * file: the snapshot is invalid instead.
   */
  constructor(o: OperatorPluginsOptions) {
    this.#pluginsFile = o.pluginsFile;
    this.#logger = o.logger;
    this.#validation = { ...o.validation };
    this.#maxHooks = o.maxHooks;
    this.#onReload = o.onReload;
    this.#snapshots = new FileSnapshots({
      path: o.pluginsFile,
      label: 'plugins file',
      logKey: 'pluginsFile',
      logger: o.logger,
      watch: o.watch,
      load: (cause, generation, read) => this.#load(cause, generation, read),
    });
  }

  /** Returns the current snapshot; it changes only on reload. */
  current(): PluginsSnapshot {
    return this.#snapshots.current();
  }

  /** Reads the file again and replaces the snapshot. Logs one `plugins reloaded` line. Never throws. */
  reload(cause: ReloadCause): PluginsSnapshot {
    return this.#snapshots.reload(cause);
  }

  /**
   * Returns the operator's hooks, in file order; empty without a plugins file.
   *
   * @throws AgentHooksError with reason `INVALID_PLUGINS` while the file cannot be used.
   */
  hooksOrThrow(): readonly Hook[] {
    const { hooks } = this.#snapshots.current();
    if (!hooks.ok) throw hooks.error;
    return hooks.hooks;
  }

  /** Stops watching the file. The snapshot stays readable and `reload()` still works. */
  close(): void {
    this.#snapshots.close();
  }

  #load(cause: ReloadCause, generation: number, read: FileRead | undefined): PluginsSnapshot {
    const hooks: PluginHooks =
      read === undefined ? { ok: true, plugins: 0, hooks: [] } : this.#parse(read);
    const snapshot: PluginsSnapshot = Object.freeze({ generation, hooks });
    // Without a plugins file there is nothing to report.
    if (this.#pluginsFile !== undefined) {
      // An invalid file fails every call: an error, not a routine line.
      (hooks.ok ? this.#logger.info : this.#logger.error).call(this.#logger, RELOADED, {
        generation,
        cause,
        valid: hooks.ok,
        plugins: hooks.ok ? hooks.plugins : 0,
        hooks: hooks.ok ? hooks.hooks.length : 0,
        ...(hooks.ok ? {} : { reason: hooks.error.reason, error: hooks.error.message }),
      });
    }
    this.#onReload?.(snapshot);
    return snapshot;
  }

  /** Returns the hooks of a read file, or why it cannot be used. */
  #parse(read: FileRead): PluginHooks {
    const name = this.#pluginsFile as string;
    const fail = (what: string, cause?: unknown, metadata: Record<string, string> = {}) => ({
      ok: false as const,
      error: new AgentHooksError(
        'failed_precondition',
        INVALID_PLUGINS,
        `Invalid operator plugins: plugins file ${name} ${what}`,
        { cause, metadata: { pluginsFile: name, ...metadata } },
      ),
    });
    switch (read.kind) {
      case 'missing':
        return fail('does not exist');
      case 'error':
        return fail(`cannot be read (${read.code})`, read.cause);
      case 'ok':
        break;
    }
    if (read.bytes.length > MAX_PLUGINS_FILE_BYTES) {
      return fail(`is larger than ${MAX_PLUGINS_FILE_BYTES} bytes`);
    }
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(read.bytes));
    } catch (e: unknown) {
      return fail(`is not JSON: ${e instanceof Error ? e.message : String(e)}`, e);
    }
    try {
      const plugins = parsePlugins(json, this.#validation);
      const hooks = plugins.flatMap((p) => p.hooks);
      if (hooks.length > this.#maxHooks) {
        throw new InvalidArgumentError(
          'plugins',
          REASON.TOO_MANY_HOOKS,
          `The plugins may have at most ${this.#maxHooks} hooks together (the file has ${hooks.length})`,
        );
      }
      checkMatcherBudget([], hooks, 'plugins');
      return { ok: true, plugins: plugins.length, hooks: Object.freeze(hooks) };
    } catch (e: unknown) {
      // A hook naming a signing secret while the declaration is invalid.
      if (e instanceof AgentHooksError && e.kind === 'failed_precondition') {
        return fail(`cannot be checked: ${e.message}`, e, { rule: e.reason });
      }
      if (!(e instanceof InvalidArgumentError)) throw e;
      // A shape error names no rule; a registration rule's reason is its `rule`.
      const metadata: Record<string, string> = {};
      if (e.field !== '') metadata.field = e.field;
      if (e.reason !== INVALID_PLUGINS) metadata.rule = e.reason;
      return fail(`is invalid${e.field === '' ? '' : ` at ${e.field}`}: ${e.message}`, e, metadata);
    }
  }
}

/** One plugin of the file, its hooks carrying its name. */
interface Plugin {
  readonly name: string;
  readonly hooks: Hook[];
}

/** A shape error of the file at `field`. */
function shapeError(field: string, message: string, cause?: unknown): InvalidArgumentError {
  return new InvalidArgumentError(field, INVALID_PLUGINS, message, { cause });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Refuses members of `value` other than `known`, so that a typo is not silently ignored. */
function checkMembers(value: Record<string, unknown>, known: readonly string[], at: string): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw shapeError(
        at === '' ? key : `${at}.${key}`,
        `unknown member ${JSON.stringify(key)} (expected ${known.join(', ')})`,
      );
    }
  }
}

/**
 * Reads the file's JSON: `{ "plugins": [{ "name", "hooks": [Hook, ...] }, ...] }`.
 * Each hook must be a modifying hook with a webhook, and follows the
 * registration rules.
 *
 * @throws InvalidArgumentError naming the first offending field, such as `plugins[0].hooks[1].webhook.url`.
 */
function parsePlugins(json: unknown, validation: ValidationOptions): Plugin[] {
  if (!isObject(json)) throw shapeError('', 'the file must hold a JSON object');
  checkMembers(json, ['plugins'], '');
  const list = json.plugins;
  if (!Array.isArray(list)) throw shapeError('plugins', 'plugins must be an array');
  const names = new Set<string>();
  return list.map((entry: unknown, i): Plugin => {
    const at = `plugins[${i}]`;
    if (!isObject(entry)) throw shapeError(at, 'a plugin must be an object with name and hooks');
    checkMembers(entry, ['name', 'hooks'], at);
    const { name, hooks } = entry;
    if (typeof name !== 'string' || name === '') {
      throw shapeError(`${at}.name`, 'a plugin needs a non-empty name');
    }
    checkIdentifier(
      name,
      `${at}.name`,
      REASON.PLUGIN_NAME_TOO_LONG,
      MAX_PLUGIN_NAME_BYTES,
      'A plugin name',
    );
    if (names.has(name))
      throw shapeError(`${at}.name`, `plugin ${JSON.stringify(name)} is listed twice`);
    names.add(name);
    if (!Array.isArray(hooks)) throw shapeError(`${at}.hooks`, 'hooks must be an array');
    return {
      name,
      hooks: hooks.map((h: unknown, j) => pluginHook(h, name, `${at}.hooks[${j}]`, validation)),
    };
  });
}

/**
 * A proto JSON decoding message without the value it quotes: the file may
 * hold secrets (a token typed where a header map goes), and the message
 * reaches every `Modify` caller and the log.
 *
 * @example
 * withoutValue('cannot decode field agenthooks.v1.Webhook.headers from JSON: expected object, got "Bearer x"')
 * // 'cannot decode field agenthooks.v1.Webhook.headers from JSON: expected object'
 */
function withoutValue(message: string): string {
  return message
    .replace(/, got [\s\S]*$/, '')
    .replace(/(from JSON): "[\s\S]*"$/, '$1: a value it does not define');
}

/** Decodes and checks one hook of plugin `name`. */
function pluginHook(json: unknown, name: string, at: string, validation: ValidationOptions): Hook {
  if (!isObject(json)) throw shapeError(at, 'a hook must be an object');
  let hook: Hook;
  try {
    hook = fromJson(HookSchema, json as JsonValue);
  } catch (e: unknown) {
    throw shapeError(at, withoutValue(e instanceof Error ? e.message : String(e)), e);
  }
  if (hook.type !== HookType.UNSPECIFIED) {
    throw shapeError(
      `${at}.type`,
      'an operator plugin holds modifying hooks (point); lifecycle hooks for every operation are environment hooks (AGENT_HOOK_WEBHOOK_*)',
    );
  }
  if (hook.point === ModifyPoint.UNSPECIFIED) {
    throw shapeError(`${at}.point`, 'a point is required');
  }
  if (hook.plugin !== '' && hook.plugin !== name) {
    throw shapeError(
      `${at}.plugin`,
      `a hook of plugin ${JSON.stringify(name)} cannot name another plugin`,
    );
  }
  hook.plugin = name;
  validateHook(hook, at, validation);
  if (hook.handler) {
    throw shapeError(
      `${at}.handler`,
      "an operator plugin's hook is a webhook; handlers serve an operation's own hooks",
    );
  }
  return hook;
}
