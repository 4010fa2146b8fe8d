/**
 * @module Structured logs: one JSON object per line on stderr (pino), with
 * `level`, `time`, `msg` and the fields given; lines about an operation or a
 * hook carry `operationId` and `hookId`. Header values, tokens, passwords
 * and URL query strings are redacted wherever they appear under a known key,
 * and payload bodies are never logged above debug level.
 */
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
