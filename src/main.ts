#!/usr/bin/env node
/**
 * @module The `agenthooks` command: `agenthooks serve [options]` runs the
 * sidecar until SIGTERM or SIGINT, then drains and exits 0;
 * `agenthooks users import FILE.jsonl [--db PATH]` fills the user directory
 * of email enrichment.
 */
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { type App, createApp } from './app.js';
import { parseServeConfig, serveHelp } from './config/config.js';
import { AgentHooksError } from './errors.js';
import { createLogger } from './log.js';
import { createServer, readTransportSecurity } from './server/server.js';
import { runUsersCommand } from './users/import.js';

/**
 * How far V8's old space may grow past the live heap before a full GC, in
 * percent. A sidecar shares its pod's memory with the runtime, so it favours
 * a small, steady heap over a few full GCs more: under a streamed load of
 * 100,000 events V8's default growth (up to 4x the live size) took RSS up by
 * about 90 MB, 25% by about 40 MB (the live heap is about 20 MB). A flag
 * given on the node command line wins.
 */
export const HEAP_GROWING_PERCENT = 25;

const USAGE = `Usage: agenthooks <command>

Commands:
  serve      run the sidecar (agenthooks serve --help lists its options)
  users      import FILE.jsonl: fill the users table that webhook userEmail comes from
  --version  print the version
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--version' || command === 'version') {
    const pkg = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  if (command === 'users') {
    return runUsersCommand(rest, process.env, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
    });
  }
  if (command !== 'serve') {
    process.stderr.write(USAGE);
    return command === undefined || command === '--help' || command === 'help' ? 0 : 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(serveHelp());
    return 0;
  }
  let config: ReturnType<typeof parseServeConfig>;
  try {
    config = parseServeConfig(rest, process.env);
  } catch (e: unknown) {
    process.stderr.write(`agenthooks: ${(e as Error).message}\n\n${serveHelp()}`);
    return 2;
  }
  if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) {
    // Read by V8 at each full GC, so setting it at start-up takes effect.
    setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  }
  const logger = createLogger({ level: config.logLevel });
  let app: App | undefined;
  let server: ReturnType<typeof createServer> | undefined;
  try {
    // Security material first, so a bad token, certificate or group fails before the store opens.
    const security = readTransportSecurity(config);
    app = createApp(config, logger);
    server = createServer(app, config, security);
    const addresses = await server.listen();
    logger.info('listening', { ...addresses });
  } catch (e: unknown) {
    const reason = e instanceof AgentHooksError ? e.reason : undefined;
    logger.error('failed to start', { reason, err: e });
    await server?.shutdown(Date.now());
    await app?.close(Date.now());
    return 1;
  }
  const started = { app, server };
  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info('signal received', { signal });
      shutdown(started, config.shutdownGraceMs, logger).then(
        () => resolve(0),
        (e: unknown) => {
          logger.error('shutdown failed', { err: e });
          resolve(1);
        },
      );
    };
    process.on('SIGHUP', () => {
      logger.info('signal received', { signal: 'SIGHUP' });
      started.app.reloadEnvironment();
    });
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/**
 * Drains the listeners and the app's background work together, both bound
 * by the same deadline (`--shutdown-grace` from now), then closes the app.
 */
async function shutdown(
  { app, server }: { app: App; server: ReturnType<typeof createServer> },
  graceMs: number,
  logger: ReturnType<typeof createLogger>,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  logger.info('draining', { graceMs });
  await Promise.all([server.shutdown(deadline), app.background.close(deadline)]);
  await app.close(deadline);
  logger.info('stopped');
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`agenthooks: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
