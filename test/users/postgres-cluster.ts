/**
 * @module A private, throw-away PostgreSQL cluster for tests: Debian's server
 * binaries (`/usr/lib/postgresql/<version>/bin`, installed by `.ci/run`) run
 * `initdb` in a temporary folder and start the server on a free port of
 * 127.0.0.1 with trust authentication. PostgreSQL refuses to run as root, so
 * under root (CI) every server command runs as the unprivileged `nobody` user
 * through `runuser`, with the folder owned by it.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

/** Where Debian installs each PostgreSQL version's server binaries. */
const POSTGRES_ROOT = '/usr/lib/postgresql';

/** The unprivileged user the server runs as when the tests run as root. */
const SERVER_USER = 'nobody';

/** Superuser that `initdb` creates; trust authentication, no password. */
export const SUPERUSER = 'agenthooks';

/** How long `pg_ctl` waits for the server to start or stop, in seconds. */
const PG_CTL_WAIT_SECONDS = '30';

/** A running private cluster. */
export interface PostgresCluster {
  /** Connection URL of the `postgres` database as {@link SUPERUSER}. */
  readonly url: string;
  /** Runs SQL statements as the superuser. */
  sql(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  /** Creates a fresh, empty database and resolves to its connection URL as {@link SUPERUSER}. */
  createDatabase(): Promise<string>;
  /**
   * Stops the server and keeps its folder, for {@link PostgresCluster.startServer}:
   * `fast` (the default) ends sessions cleanly; `immediate` ends the server
   * without a checkpoint, as a crash would, so the next start recovers.
   */
  stopServer(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts the stopped server again, on the same port. */
  startServer(): Promise<void>;
  /** Stops the server (fast shutdown) and removes its folder. */
  stop(): Promise<void>;
}

/** Options of {@link startPostgresCluster}. */
export interface PostgresClusterOptions {
  /**
   * Keeps PostgreSQL's default durability (`fsync` on), as a deployment
   * runs it, for the bench. Default false: tests skip the flushes.
   */
  readonly durable?: boolean;
}

/**
 * Creates and starts a private cluster.
 *
 * @throws Error when no server binaries are installed; the tests never skip.
 */
export async function startPostgresCluster(
  options: PostgresClusterOptions = {},
): Promise<PostgresCluster> {
  const bin = findServerBin();
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { uid, gid } = await userIds(SERVER_USER);
    chownSync(dir, uid, gid);
  }
  const server = async (command: string, args: string[]): Promise<void> => {
    const [file, argv] = asRoot
      ? ['runuser', ['-u', SERVER_USER, '--', join(bin, command), ...args]]
      : [join(bin, command), args];
    // The working directory must be readable by the server user.
    await run(file, argv, { cwd: dir });
  };
  try {
    await server('initdb', [
      '-D',
      data,
      '-U',
      SUPERUSER,
      '--auth=trust',
      '--encoding=UTF8',
      ...(options.durable === true ? [] : ['--no-sync']),
    ]);
    const port = await freePort();
    const startServer = (): Promise<void> =>
      server('pg_ctl', [
        '-D',
        data,
        '-l',
        join(dir, 'server.log'),
        '-w',
        '-t',
        PG_CTL_WAIT_SECONDS,
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1${options.durable === true ? '' : ' -c fsync=off'}`,
        'start',
      ]);
    await startServer();
    const urlOf = (database: string): string =>
      `postgres://${SUPERUSER}@127.0.0.1:${port}/${database}`;
    const url = urlOf('postgres');
    // The admin connection is opened per statement, so it survives stopServer().
    const sql = async (text: string, values?: unknown[]): Promise<pg.QueryResult> => {
      const admin = new pg.Client({ connectionString: url });
      // end() resolves once the socket closed; errors after that are not this test's.
      admin.on('error', () => undefined);
      await admin.connect();
      try {
        return await admin.query(text, values);
      } finally {
        await admin.end();
      }
    };
    let databases = 0;
    return {
      url,
      sql,
      createDatabase: async () => {
        databases += 1;
        const name = `test_${databases}`;
        await sql(`CREATE DATABASE ${name}`);
        return urlOf(name);
      },
      stopServer: (mode = 'fast') =>
        server('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', PG_CTL_WAIT_SECONDS, 'stop']),
      startServer,
      stop: async () => {
        await server('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', PG_CTL_WAIT_SECONDS, 'stop']);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e: unknown) {
    const log = join(dir, 'server.log');
    const detail = existsSync(log) ? `\n${readFileSync(log, 'utf8')}` : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`cannot start a PostgreSQL cluster: ${(e as Error).message}${detail}`, {
      cause: e,
    });
  }
}

/** The `bin` folder of the newest installed PostgreSQL server. */
function findServerBin(): string {
  const versions = existsSync(POSTGRES_ROOT)
    ? readdirSync(POSTGRES_ROOT)
        .filter((v) => existsSync(join(POSTGRES_ROOT, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const newest = versions[0];
  if (newest === undefined) {
    throw new Error(
      `no PostgreSQL server under ${POSTGRES_ROOT}/*/bin; install Debian's postgresql package (.ci/run does)`,
    );
  }
  return join(POSTGRES_ROOT, newest, 'bin');
}

async function userIds(name: string): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([
    run('id', ['-u', name]).then((r) => Number(r.stdout.trim())),
    run('id', ['-g', name]).then((r) => Number(r.stdout.trim())),
  ]);
  return { uid, gid };
}

/** A port of 127.0.0.1 that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}
