/**
 * @module Structured logs: one JSON object per line on stderr (pino), with
 * `level`, `time`, `msg` and the fields given; lines about an operation or a
 * hook carry `operationId` and `hookId`. Header values, tokens, passwords
 * and URL query strings are redacted wherever they appear under a known key,
 * and payload bodies are never logged above debug level.
 *
 * Text written by libraries (grpc-js's logger, `console.*`, process
 * warnings) goes through the same logger ({@link routeProcessOutput}), with
 * anything after a credential-looking word removed from its message
 * ({@link redactSecretsInText}), so stderr holds only JSON lines.
 */
import { format } from 'node:util';
import { type Logger as PinoLogger, pino } from 'pino';

/** Log levels, least severe first. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/** A log level name. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Structured fields of a log line; keys are lowerCamelCase (`operationId`, `hookId`). */
export type LogFields = Record<string, unknown>;

/** Writes structured log lines. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Returns a logger that adds `fields` to every line. */
  child(fields: LogFields): Logger;
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Lowest level written. Default `info`. */
  readonly level?: LogLevel;
  /** Where lines go. Default: stderr, written synchronously so no line is lost at exit. */
  readonly write?: (line: string) => void;
}

/** What is replaced in every line. */
export const REDACTED = '[redacted]';

/**
 * Keys whose values are secrets or may hold them, at the top level and one
 * level down (pino's redaction paths): headers and their values, tokens,
 * passwords, connection strings.
 */
const REDACT_PATHS = [
  'headers',
  'authorization',
  'token',
  'password',
  'secret',
  'cookie',
  'usersPostgresUrl',
  '*.headers',
  '*.authorization',
  '*.token',
  '*.password',
  '*.secret',
  '*.cookie',
];

/** Keys whose values are URLs: logged without their query string or credentials. */
const URL_KEYS = ['url', 'destination', 'target'];

/**
 * Creates a JSON-lines logger.
 *
 * @example createLogger({ level: 'debug' }).info('listening', { address: '127.0.0.1:50051' });
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const write = options.write;
  const destination =
    write === undefined
      ? pino.destination({ fd: 2, sync: true })
      : { write: (line: string) => write(line) };
  const base = pino(
    {
      level: options.level ?? 'info',
      base: null,
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: REDACTED },
      serializers: {
        err: serializeError,
        ...Object.fromEntries(URL_KEYS.map((k) => [k, stripUrl])),
      },
    },
    destination,
  );
  return wrap(base);
}

function wrap(log: PinoLogger<never>): Logger {
  return {
    debug: (msg, fields) => log.debug(fields ?? {}, msg),
    info: (msg, fields) => log.info(fields ?? {}, msg),
    warn: (msg, fields) => log.warn(fields ?? {}, msg),
    error: (msg, fields) => log.error(fields ?? {}, msg),
    child: (fields) => wrap(log.child(fields)),
  };
}

/** A logger that writes nothing, for tests of modules that take one. */
export const silentLogger: Logger = createLogger({ write: () => {} });

/** Keeps an error's name, message, code and reason (and its cause's), never its extra properties. */
function serializeError(value: unknown, depth = 0): unknown {
  if (!(value instanceof Error)) return value;
  const { name, message } = value;
  const code = (value as { code?: unknown }).code;
  const reason = (value as { reason?: unknown }).reason;
  const cause =
    depth < 3 && value.cause !== undefined ? serializeError(value.cause, depth + 1) : undefined;
  return { name, message: stripUrlsInText(message), code, reason, cause };
}

/** A URL without credentials and query string; anything else unchanged. */
function stripUrl(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    const url = new URL(value);
    url.username = '';
    url.password = '';
    url.search = url.search === '' ? '' : `?${REDACTED}`;
    return url.href;
  } catch {
    return value;
  }
}

/** Query strings and credentials of URLs inside free text, such as an error message. */
function stripUrlsInText(text: string): string {
  return text.replace(/\bhttps?:\/\/[^\s'"]+/g, (url) => String(stripUrl(url)));
}

/**
 * Words after which a library's message may quote a secret: a header name
 * (`authorization`, `cookie`, `x-api-key`), an auth scheme or a credential.
 */
const SECRET_WORDS =
  /(?:proxy-)?authorization|bearer|basic\s|cookie|api[-_]?key|password|passwd|secret|token/i;

/** grpc-js quotes the value of a metadata entry it refuses: `metadata entry <key>: <value>`. */
const METADATA_ENTRY = /metadata entry [^\s:]*:/i;

/**
 * Removes what may be a secret from free text written by a library: the rest
 * of the text after a credential-looking word (`authorization`, `Bearer`,
 * `cookie`, `token`, ...) and after grpc-js's `metadata entry <key>:`, which
 * quotes a refused header's value whatever its name. URLs lose their query
 * strings and credentials.
 *
 * @example redactSecretsInText('Failed to add metadata entry authorization: Bearer\tabc')
 * // 'Failed to add metadata entry authorization: [redacted]'
 */
export function redactSecretsInText(text: string): string {
  const entry = METADATA_ENTRY.exec(text) ?? SECRET_WORDS.exec(text);
  const kept =
    entry === null ? text : `${text.slice(0, entry.index + entry[0].length)} ${REDACTED}`;
  return stripUrlsInText(kept);
}

/**
 * Formats a library's log call (`console.error('x %s', a, err)` style) as a
 * redacted message, with the first `Error` among the arguments as `err`.
 */
export function libraryLine(args: readonly unknown[]): { msg: string; fields: LogFields } {
  const err = args.find((a) => a instanceof Error);
  const rest = args.filter((a) => a !== err);
  const msg = redactSecretsInText(format(...rest));
  return { msg, fields: err === undefined ? {} : { err } };
}

/** What {@link routeProcessOutput} replaced, to put back. */
type ConsoleMethods = Pick<Console, 'debug' | 'info' | 'log' | 'warn' | 'error'>;

/**
 * Routes what libraries write to the console, and process warnings, through
 * `logger` as JSON lines with {@link redactSecretsInText} applied: connect-node's
 * `console.error` about a failed handler, the QStash SDK's `console.*`
 * output, and warnings such as `MaxListenersExceededWarning` (whose default
 * printer writes plain text). Call it once, at start-up of `serve`; returns
 * the function that restores the console and the default warning printer.
 */
export function routeProcessOutput(logger: Logger): () => void {
  const library = logger.child({ source: 'console' });
  const saved: ConsoleMethods = {
    debug: console.debug,
    info: console.info,
    log: console.log,
    warn: console.warn,
    error: console.error,
  };
  const to = (level: LogLevel) =>
    function consoleToLogger(...args: unknown[]) {
      const { msg, fields } = libraryLine(args);
      library[level](msg, fields);
    };
  console.debug = to('debug');
  console.info = to('info');
  console.log = to('info');
  console.warn = to('warn');
  console.error = to('error');
  const defaultPrinters = process.listeners('warning');
  // Node's default printer writes warnings as plain text on stderr.
  process.removeAllListeners('warning');
  const onWarning = (warning: Error) => {
    logger.warn(redactSecretsInText(warning.message), {
      source: 'process',
      warning: warning.name,
      code: (warning as { code?: unknown }).code,
    });
  };
  process.on('warning', onWarning);
  return function restoreProcessOutput() {
    Object.assign(console, saved);
    process.off('warning', onWarning);
    for (const printer of defaultPrinters) process.on('warning', printer);
  };
}
