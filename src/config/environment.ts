/**
 * @module The sidecar's effective environment: its process environment
 * overlaid by an optional env file (`--hooks-env-file`, typically a mounted
 * ConfigMap or Secret), and the environment hooks parsed from it. The
 * snapshot is recomputed on {@link EffectiveEnvironment.reload} only: at
 * start, when the file changes (watched), and on demand (SIGHUP, wired by
 * `main`). A configured env file that cannot be used makes the environment
 * invalid: every hook resolution fails with `INVALID_ENVIRONMENT` until it is
 * fixed, and so does a name the sidecar would not read (a misspelt
 * `AGENT_HOOK_WEBHOOK_*`, an `AGENTHOOKS_*` setting in the env file). The
 * previous, good policy is never kept in its place.
 */
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { SIGNING_ORIGINS_PREFIX, SIGNING_SECRET_PREFIX } from '../delivery/signing.js';
import { OWN_VARIABLE_PREFIX } from '../delivery/webhook.js';
import { isEnvVarName } from '../delivery/webhook-rules.js';
import { AgentHooksError } from '../errors.js';
import { extend } from '../extend.js';
import {
  ENV_SIGNING_SECRET_VAR,
  ENV_VARS,
  type EnvironmentHooks,
  environmentHooks,
  invalidEnvironment,
} from '../hooks/environment-hooks.js';
import type { Logger } from '../log.js';
import { AUDIT_HTTP_AUTHORIZATION_VAR } from './config.js';
import { didYouMean } from './did-you-mean.js';
import { type FileRead, FileSnapshots, type ReloadCause } from './watched-file.js';

export type { ReloadCause } from './watched-file.js';

/** Largest env file read, in bytes; Kubernetes caps a ConfigMap or Secret at 1 MiB. */
export const MAX_ENV_FILE_BYTES = 1024 * 1024;

/** `ErrorInfo.reason` of a line {@link parseEnvFile} cannot read. */
export const INVALID_ENV_FILE = 'INVALID_ENV_FILE';

/** Log message of every reload. */
const RELOADED = 'environment reloaded';

/** Prefix of the environment hooks' variables; a name under it that none has is refused. */
const ENV_HOOK_PREFIX = 'AGENT_HOOK_WEBHOOK_';

/** Every `AGENT_HOOK_WEBHOOK_*` variable the sidecar reads. */
const ENV_HOOK_VARIABLES: readonly string[] = [...Object.values(ENV_VARS), ENV_SIGNING_SECRET_VAR];

/** The `AGENTHOOKS_*` variables read from the effective environment, so an env file may set them. */
const FILE_OWN_VARIABLES: readonly string[] = [AUDIT_HTTP_AUTHORIZATION_VAR];
const FILE_OWN_PREFIXES: readonly string[] = [SIGNING_SECRET_PREFIX, SIGNING_ORIGINS_PREFIX];

/** Optional `export ` before a variable, as shells write it. */
const EXPORT_PREFIX = /^export\s+/;

/** The byte order mark some editors write first. */
const BOM = '\uFEFF';

/** Escapes of a double-quoted value; any other backslash is kept as written. */
const DOUBLE_QUOTE_ESCAPES: Readonly<Record<string, string>> = { n: '\n', '"': '"', '\\': '\\' };

/** One computed effective environment. Snapshots are frozen and never change. */
export interface EnvironmentSnapshot {
  /** 1 for the first load, then one more per reload. */
  readonly generation: number;
  /**
   * Process environment overlaid by the env file (the file wins). While the
   * env file cannot be used, the process environment alone.
   */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Environment hooks of `env`, or the `INVALID_ENVIRONMENT` error. */
  readonly hooks: EnvironmentHooks;
  /** Set when the configured env file is missing, unreadable or unparsable; also `hooks.error`. */
  readonly fileError?: AgentHooksError;
}

/** Options of an {@link EffectiveEnvironment}. */
export interface EffectiveEnvironmentOptions {
  /** The process environment, read again at each reload (usually `process.env`). */
  readonly processEnv: Readonly<Record<string, string | undefined>>;
  /** Env file overlaid on the process environment. Default: none. */
  readonly envFile?: string;
  /** Receives one line per reload and watcher problems; never a variable's value. */
  readonly logger: Logger;
  /** Reloads when the env file changes. Default true; it never keeps the process alive. */
  readonly watch?: boolean;
  /** Called after every load (the first one included), for metrics. */
  readonly onReload?: (snapshot: EnvironmentSnapshot) => void;
}

/**
 * The sidecar's effective environment and its environment hooks.
 *
 * @example
 * const environment = new EffectiveEnvironment({ processEnv: process.env, envFile, logger });
 * process.on('SIGHUP', () => environment.reload('signal'));
 * const deps = { environmentHooks: () => environment.hooksOrThrow(), ... };
 * // on shutdown:
 * environment.close();
 */
export class EffectiveEnvironment {
  readonly #processEnv: Readonly<Record<string, string | undefined>>;
  /** The env file as configured, for messages. */
  readonly #envFile: string | undefined;
  readonly #logger: Logger;
  readonly #onReload: ((snapshot: EnvironmentSnapshot) => void) | undefined;
  readonly #snapshots: FileSnapshots<EnvironmentSnapshot>;

  /**
   * Loads the environment (generation 1, cause `start`) and, unless `watch`
   * is false, starts watching the env file's directory. Never throws for an
   * unusable env file: the snapshot is invalid instead.
   */
  constructor(o: EffectiveEnvironmentOptions) {
    this.#processEnv = o.processEnv;
    this.#envFile = o.envFile;
    this.#logger = o.logger;
    this.#onReload = o.onReload;
    this.#snapshots = new FileSnapshots({
      path: o.envFile,
      label: 'env file',
      logKey: 'envFile',
      logger: o.logger,
      watch: o.watch,
      load: (cause, generation, read) => this.#load(cause, generation, read),
    });
  }

  /** Returns the current snapshot; it changes only on reload. */
  current(): EnvironmentSnapshot {
    return this.#snapshots.current();
  }

  /**
   * Reads the process environment and the env file again and replaces the
   * snapshot, whether or not anything changed. Logs one `environment
   * reloaded` line. Never throws.
   */
  reload(cause: ReloadCause): EnvironmentSnapshot {
    return this.#snapshots.reload(cause);
  }

  /**
   * Returns the current environment hooks.
   *
   * @throws AgentHooksError with reason `INVALID_ENVIRONMENT` while the environment is invalid.
   */
  hooksOrThrow(): readonly Hook[] {
    const { hooks } = this.#snapshots.current();
    if (!hooks.ok) throw hooks.error;
    return hooks.hooks;
  }

  /** Stops watching the env file. The snapshot stays readable and `reload()` still works. */
  close(): void {
    this.#snapshots.close();
  }

  /** Computes a snapshot from the process environment and one read of the env file. */
  #load(cause: ReloadCause, generation: number, read: FileRead | undefined): EnvironmentSnapshot {
    let fileEnv: Record<string, string> = {};
    let fileError: AgentHooksError | undefined;
    if (read !== undefined) {
      const parsed = this.#parse(read);
      if (parsed instanceof AgentHooksError) fileError = parsed;
      else fileEnv = parsed;
    }
    const env = Object.freeze(extend(this.#processEnv, { ...fileEnv }));
    const error = fileError ?? this.#unreadName(fileEnv, env);
    const hooks: EnvironmentHooks =
      error === undefined ? environmentHooks(env) : { ok: false, error };
    const snapshot: EnvironmentSnapshot = Object.freeze(
      fileError === undefined ? { generation, env, hooks } : { generation, env, hooks, fileError },
    );
    // An invalid environment fails every call: an error, not a routine line.
    (hooks.ok ? this.#logger.info : this.#logger.error).call(this.#logger, RELOADED, {
      generation,
      cause,
      valid: hooks.ok,
      hooks: hooks.ok ? hooks.hooks.length : 0,
      ...(hooks.ok ? {} : { reason: hooks.error.reason, error: hooks.error.message }),
    });
    this.#onReload?.(snapshot);
    return snapshot;
  }

  /**
   * Returns why the environment holds a name the sidecar would not read, or
   * undefined: ignored, a misspelt `AGENT_HOOK_WEBHOOK_ONERROR=block` or an
   * env file's `AGENTHOOKS_AUTH_TOKN` would leave its setting off. Checked:
   * an `AGENT_HOOK_WEBHOOK_*` name none of the six has, in the process
   * environment or the env file; and an `AGENTHOOKS_*` name in the env file
   * but those read from the effective environment (the signing secrets and
   * origins, the audit sink's `Authorization`). Messages name, never quote.
   */
  #unreadName(
    fileEnv: Readonly<Record<string, string>>,
    env: Readonly<Record<string, string | undefined>>,
  ): AgentHooksError | undefined {
    const misspelt = Object.keys(env)
      .filter((name) => name.startsWith(ENV_HOOK_PREFIX) && !ENV_HOOK_VARIABLES.includes(name))
      .sort();
    const first = misspelt[0];
    if (first !== undefined) {
      const where = Object.hasOwn(fileEnv, first)
        ? `env file ${this.#envFile}`
        : 'the process environment';
      return invalidEnvironment(
        `Invalid Agent Hook environment: unknown variable ${first} in ${where}${didYouMean(first, ENV_HOOK_VARIABLES, '')}`,
        misspelt,
      );
    }
    const own = Object.keys(fileEnv)
      .filter(
        (name) =>
          name.startsWith(OWN_VARIABLE_PREFIX) &&
          !FILE_OWN_VARIABLES.includes(name) &&
          !FILE_OWN_PREFIXES.some((p) => name.startsWith(p)),
      )
      .sort();
    if (own[0] !== undefined) {
      return invalidEnvironment(
        `Invalid Agent Hook environment: env file ${this.#envFile} sets ${own[0]}, which it cannot: the sidecar's own settings (${OWN_VARIABLE_PREFIX}*) are read from its process environment or flags only; the env file may hold ${SIGNING_SECRET_PREFIX}<NAME>, ${SIGNING_ORIGINS_PREFIX}<NAME> and ${AUDIT_HTTP_AUTHORIZATION_VAR}`,
        own,
        { metadata: { envFile: this.#envFile as string } },
      );
    }
    return undefined;
  }

  /** Returns the variables of a read env file, or why it cannot be used. */
  #parse(read: FileRead): Record<string, string> | AgentHooksError {
    const name = this.#envFile as string;
    const metadata = { envFile: name };
    const fail = (what: string, cause?: unknown, extra: Record<string, string> = {}) =>
      invalidEnvironment(`Invalid Agent Hook environment: env file ${name} ${what}`, [], {
        cause,
        metadata: extend(metadata, { ...extra }),
      });
    switch (read.kind) {
      case 'missing':
        return fail('does not exist');
      case 'error':
        return fail(`cannot be read (${read.code})`, read.cause);
      case 'ok':
        break;
    }
    if (read.bytes.length > MAX_ENV_FILE_BYTES) {
      return fail(`is larger than ${MAX_ENV_FILE_BYTES} bytes`);
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(read.bytes);
    } catch (e: unknown) {
      return fail('cannot be parsed: not UTF-8', e);
    }
    try {
      return parseEnvFile(text);
    } catch (e: unknown) {
      if (!(e instanceof AgentHooksError)) throw e;
      return fail(`cannot be parsed: ${e.message}`, e, e.metadata);
    }
  }
}

/**
 * Parses an env file: one `KEY=VALUE` per line, in the subset of shell and
 * dotenv syntax that Kubernetes users write.
 * - Blank lines and lines starting with `#` are skipped; `export ` before a
 *   key is allowed; spaces around `=` are allowed.
 * - Keys match `^[A-Za-z_][A-Za-z0-9_]*$`.
 * - `'single quoted'` values are literal; `"double quoted"` values take the
 *   escapes `\n`, `\"` and `\\` (any other backslash stays as written);
 *   after the closing quote only spaces or a `#` comment may follow. Quoted
 *   values end on their line.
 * - Unquoted values are the rest of the line, trimmed; a `#` in them is kept.
 * - A later line wins over an earlier one with the same key.
 *
 * @throws AgentHooksError with reason `INVALID_ENV_FILE` naming the first bad
 *   line by number (also `metadata.line`); never its content.
 * @example
 * parseEnvFile('# hooks\nexport AGENT_HOOK_WEBHOOK_EVENTS="beforeToolCall"\nA=\' x \'\n');
 * // { AGENT_HOOK_WEBHOOK_EVENTS: 'beforeToolCall', A: ' x ' }
 */
export function parseEnvFile(text: string): Record<string, string> {
  const vars = new Map<string, string>();
  const body = text.startsWith(BOM) ? text.slice(BOM.length) : text;
  for (const [i, raw] of body.split(/\r?\n/).entries()) {
    const lineNumber = i + 1;
    const line = raw.trimStart();
    if (line === '' || line.startsWith('#')) continue;
    const assignment = line.replace(EXPORT_PREFIX, '');
    const eq = assignment.indexOf('=');
    if (eq < 0) throw syntaxError(lineNumber, 'expected KEY=VALUE');
    const key = assignment.slice(0, eq).trimEnd();
    // The names a header template can read: the `allowedEnvVars` rule.
    if (!isEnvVarName(key)) throw syntaxError(lineNumber, 'invalid variable name');
    vars.set(key, parseValue(assignment.slice(eq + 1).trimStart(), lineNumber));
  }
  // `fromEntries` defines own properties, so even a `__proto__` key stays data.
  return Object.fromEntries(vars);
}

/** Parses what follows `=`, leading spaces already removed. */
function parseValue(rest: string, lineNumber: number): string {
  const quote = rest[0];
  if (quote === "'") {
    const end = rest.indexOf("'", 1);
    if (end < 0) throw syntaxError(lineNumber, 'unterminated single-quoted value');
    checkAfterQuote(rest.slice(end + 1), lineNumber);
    return rest.slice(1, end);
  }
  if (quote === '"') {
    let value = '';
    for (let i = 1; i < rest.length; i++) {
      const c = rest[i] as string;
      if (c === '"') {
        checkAfterQuote(rest.slice(i + 1), lineNumber);
        return value;
      }
      if (c === '\\' && i + 1 < rest.length) {
        const next = rest[++i] as string;
        value += DOUBLE_QUOTE_ESCAPES[next] ?? `\\${next}`;
      } else {
        value += c;
      }
    }
    throw syntaxError(lineNumber, 'unterminated double-quoted value');
  }
  return rest.trimEnd();
}

function checkAfterQuote(after: string, lineNumber: number): void {
  const tail = after.trimStart();
  if (tail !== '' && !tail.startsWith('#')) {
    throw syntaxError(lineNumber, 'unexpected text after the closing quote');
  }
}

function syntaxError(lineNumber: number, what: string): AgentHooksError {
  return new AgentHooksError('invalid_argument', INVALID_ENV_FILE, `line ${lineNumber}: ${what}`, {
    metadata: { line: String(lineNumber) },
  });
}
