/**
 * @module A small structured logger: one JSON object per line on stderr, with
 * `level`, `time`, `msg` and the fields given. Header values, tokens and
 * payload bodies are never passed to it.
 */

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
  /** Where lines go. Default: process.stderr. */
  readonly write?: (line: string) => void;
}

/**
 * Creates a JSON-lines logger.
 *
 * @example createLogger({ level: 'debug' }).info('listening', { address: '127.0.0.1:50051' });
 */
export function createLogger(options: LoggerOptions = {}, bound: LogFields = {}): Logger {
  const min = LOG_LEVELS.indexOf(options.level ?? 'info');
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    const line = { level, time: new Date().toISOString(), msg, ...bound, ...fields };
    write(`${JSON.stringify(line, errorReplacer)}\n`);
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (fields) => createLogger(options, { ...bound, ...fields }),
  };
}

/** A logger that writes nothing, for tests of modules that take one. */
export const silentLogger: Logger = createLogger({ write: () => {} });

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    const { name, message } = value;
    const code = (value as { code?: unknown }).code;
    const reason = (value as { reason?: unknown }).reason;
    return { name, message, code, reason, cause: value.cause };
  }
  return value;
}
