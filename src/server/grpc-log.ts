/**
 * @module Routes grpc-js's own log lines (`E Failed to add metadata entry
 * ...`, `E No address added ...`), which it writes as plain text through
 * `console.error`, to the sidecar's JSON logger, with secrets removed from
 * the text: grpc-js quotes a refused header's value, a token included.
 */
import * as grpc from '@grpc/grpc-js';
import { type Logger, type LogLevel, libraryLine } from '../log.js';

/** Variables with which an operator chooses grpc-js's verbosity; they win over `--log-level`. */
const GRPC_VERBOSITY_VARS = ['GRPC_NODE_VERBOSITY', 'GRPC_VERBOSITY'];

/**
 * Installs `logger` as grpc-js's logger, process-wide. grpc-js's severity is
 * kept (`error`, `info`, `debug`); its verbosity follows `level` (debug
 * lines at `debug`, otherwise errors only) unless `GRPC_VERBOSITY` or
 * `GRPC_NODE_VERBOSITY` is set.
 *
 * @example routeGrpcLogs(logger, config.logLevel);
 */
export function routeGrpcLogs(
  logger: Logger,
  level: LogLevel,
  env: Readonly<Record<string, string | undefined>> = process.env,
): void {
  const grpcLogger = logger.child({ source: 'grpc-js' });
  const to = (severity: LogLevel) =>
    function grpcToLogger(...args: unknown[]) {
      const { msg, fields } = libraryLine(args);
      grpcLogger[severity](msg, fields);
    };
  grpc.setLogger({ error: to('error'), info: to('info'), debug: to('debug') });
  if (!GRPC_VERBOSITY_VARS.some((name) => (env[name] ?? '') !== '')) {
    grpc.setLogVerbosity(level === 'debug' ? grpc.logVerbosity.DEBUG : grpc.logVerbosity.ERROR);
  }
}
