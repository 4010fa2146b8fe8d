#!/usr/bin/env node
/**
 * @module The `agenthooks` command: `agenthooks serve [options]` runs the
 * sidecar until SIGTERM or SIGINT, then drains and exits 0;
 * `agenthooks users import FILE.jsonl [--db PATH]` fills the user directory
 * of email enrichment.
 */
import { rmSync } from 'node:fs';
import { type App, openApp } from './app.js';
import { OPTIONS, parseServeConfig, serveHelp } from './config/config.js';
import { didYouMean } from './config/did-you-mean.js';
import { AgentHooksError } from './errors.js';
import { applyHeapPolicy } from './heap-policy.js';
import { createLogger, routeProcessOutput } from './log.js';
import { routeGrpcLogs } from './server/grpc-log.js';
import { createServer, readTransportSecurity } from './server/server.js';
import { startTracing, type Tracing } from './tracing/tracing.js';
import { runUsersCommand } from './users/import.js';
import { packageVersion } from './version.js';

const USAGE = `Usage: agenthooks <command> [options]

Commands:
  serve      run the sidecar (agenthooks serve --help lists its options)
  users      import FILE.jsonl: fill the users table that webhook userEmail comes from
  version    print the version (also --version)
  help       print this help (also --help, -h)
`;

/** Commands `agenthooks` takes, for "did you mean". */
const COMMANDS = ['serve', 'users', 'version', 'help'];

/** The line after a usage error that says where the full help is. */
const SERVE_HINT = "Run 'agenthooks serve --help' to list every option.";

/**
 * Removes `Object.prototype.__proto__`, as `node --disable-proto=delete`
 * does. protobuf-es builds a `Struct`, and every map, by assignment
 * (`json[key] = value`); with the accessor in place, a member named
 * `__proto__` (a tool argument, a result's state) set the object's
 * prototype instead of becoming a key, so a control's receiver never saw it
 * while the runtime's tool did. Without the accessor it is a key like any
 * other, as `JSON.parse` makes it in the reference system. Object literals
 * (`{ __proto__: null }`) and `Object.setPrototypeOf`, which the bundled
 * code uses, do not depend on it.
 */
export function withoutProtoAccessor(): void {
  Reflect.deleteProperty(Object.prototype, '__proto__');
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--version' || command === 'version') {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'users') {
    return runUsersCommand(rest, process.env, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
    });
  }
  if (command !== 'serve') {
    // Usage errors end with what was wrong, so it is the last line a user sees.
    const what =
      command === undefined
        ? 'agenthooks: a command is required'
        : `agenthooks: unknown command '${command}'${didYouMean(command, COMMANDS, '')}`;
    process.stderr.write(`${USAGE}\n${what}\n`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(serveHelp());
    return 0;
  }
  let config: ReturnType<typeof parseServeConfig>;
  try {
    config = parseServeConfig(rest, process.env);
  } catch (e: unknown) {
    process.stderr.write(`agenthooks serve: ${serveErrorText(rest, e)}\n${SERVE_HINT}\n`);
    return 2;
  }
  withoutProtoAccessor();
  // A flag given on the node command line wins over the sidecar's policy.
  if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) applyHeapPolicy();
  const logger = createLogger({ level: config.logLevel });
  // From here on stderr holds only JSON lines: grpc-js, console.* (connect-node,
  // the QStash SDK) and process warnings go through the logger, redacted.
  routeGrpcLogs(logger, config.logLevel);
  routeProcessOutput(logger);
  // Signals are taken from the start: one that arrives while the sidecar starts
  // is acted on once it has started, instead of killing it without a drain.
  let requested: string | undefined;
  let onSignal: (signal: string) => void = (signal) => {
    requested ??= signal;
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  // The app gives up (its store could not be opened in time): kept until it has started.
  let fatal = false;
  let onFatal: () => void = () => {
    fatal = true;
  };
  let app: App | undefined;
  let server: ReturnType<typeof createServer> | undefined;
  let tracing: Tracing | undefined;
  // Only an SQLite file is created by a start, and only the file this start
  // made is removed when it fails (not one another sidecar made meanwhile);
  // a PostgreSQL database is never removed.
  let createdDb: string | undefined;
  const onStoreCreated = () => {
    createdDb = config.dbPath;
  };
  try {
    // Security material first, so a bad token, certificate or group fails before the store opens.
    const security = readTransportSecurity(config);
    // The standard OTEL_* variables of the process environment; the SDK loads only when they ask.
    tracing = await startTracing(process.env, logger);
    app = await openApp(config, logger, {
      onFatal: () => onFatal(),
      tracing,
      lockStore: true,
      onStoreCreated,
    });
    if (tracing !== undefined) logger.info('tracing on', { exporter: 'otlp' });
    server = createServer(app, config, security);
    const addresses = await server.listen();
    logger.info('listening', { ...addresses });
  } catch (e: unknown) {
    const reason = e instanceof AgentHooksError ? e.reason : undefined;
    logger.error('failed to start', { reason, err: e });
    await server?.shutdown(Date.now());
    await app?.close(Date.now());
    // An app that was never built cannot end the tracer it would have owned.
    if (app === undefined) await tracing?.shutdown().catch(() => undefined);
    // A start that failed leaves no database behind that it created itself.
    if (createdDb !== undefined) removeCreatedDatabase(createdDb, logger);
    return 1;
  }
  const started = { app, server };
  process.on('SIGHUP', () => {
    logger.info('signal received', { signal: 'SIGHUP' });
    started.app.reloadConfiguration();
  });
  return new Promise<number>((resolve) => {
    let code: number | undefined;
    const stop = (exitCode: number) => {
      if (code !== undefined) return;
      code = exitCode;
      shutdown(started, config.shutdownGraceMs, logger).then(
        () => resolve(exitCode),
        (e: unknown) => {
          logger.error('shutdown failed', { err: e });
          resolve(1);
        },
      );
    };
    onSignal = (signal: string) => {
      logger.info('signal received', { signal });
      stop(0);
    };
    // The app logged why; the platform sees a failed process.
    onFatal = () => stop(1);
    if (fatal) onFatal();
    else if (requested !== undefined) onSignal(requested);
  });
}

/** Removes a database file (with its WAL and shared-memory files) that a failed start created. */
function removeCreatedDatabase(path: string, logger: ReturnType<typeof createLogger>): void {
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      rmSync(`${path}${suffix}`, { force: true });
    } catch (e: unknown) {
      logger.warn('could not remove the database a failed start created', { path, err: e });
    }
  }
}

/**
 * Drains the listeners, then the app's background work, both bound by the
 * same deadline (`--shutdown-grace` from now), then closes the app. The
 * background scope closes only once the calls ended: a call that ends during
 * the drain still starts its notifications (an allowed call's
 * `beforeToolCall`, a publication's `afterToolCall`), and they are sent.
 */
async function shutdown(
  { app, server }: { app: App; server: ReturnType<typeof createServer> },
  graceMs: number,
  logger: ReturnType<typeof createLogger>,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  logger.info('draining', { graceMs });
  await server.shutdown(deadline);
  await app.background.close(deadline);
  await app.close(deadline);
  logger.info('stopped');
}

/**
 * The message of a `serve` usage error: for an unknown flag, the flag and
 * the nearest known one; otherwise the config's own message.
 */
function serveErrorText(args: readonly string[], e: unknown): string {
  // Only a command line the parser could not read is searched for an unknown option.
  if ((e as { field?: unknown }).field !== 'args') return (e as Error).message;
  const known = new Set(OPTIONS.map((o) => o.flag));
  for (const arg of args) {
    if (arg === '--') break;
    if (!arg.startsWith('--')) continue;
    const name = arg.slice(2).split('=', 1)[0] ?? '';
    if (!known.has(name)) {
      return `unknown option '--${name}'${didYouMean(name, [...known], '--')}`;
    }
  }
  return (e as Error).message;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`agenthooks: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
