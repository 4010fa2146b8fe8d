import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ENVIRONMENT_VARIABLES,
  OPTIONS,
  optionSyntax,
  parseServeConfig,
  serveHelp,
} from '../../src/config/config.js';
import { DEFAULT_RETENTION_MS, DEFAULT_TOMBSTONE_RETENTION_MS } from '../../src/store/retention.js';

/** Escapes a text for use in a regular expression. */
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

const README = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

/** Every Markdown table row of the README, as trimmed cells. */
const README_ROWS = README.split('\n')
  .filter((line) => line.startsWith('|'))
  .map((line) =>
    line
      .slice(1, -1)
      .split(' | ')
      .map((cell) => cell.trim()),
  );

describe('serve configuration', () => {
  it('uses the documented defaults with no flags and no variables', () => {
    const config = parseServeConfig([], {});
    expect(config.grpcListen.map((a) => a.text)).toEqual(['127.0.0.1:50051']);
    expect(config.httpListen?.text).toBe('127.0.0.1:8080');
    expect(config.healthListen).toBeUndefined();
    expect(config.dbPath).toBe('./data/agenthooks.db');
    expect(config.shutdownGraceMs).toBe(10_000);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads every option from its variable, and a flag wins over it', () => {
    const env = {
      AGENTHOOKS_GRPC_LISTEN: 'unix:/tmp/a.sock, 0.0.0.0:9000',
      AGENTHOOKS_HEALTH_LISTEN: '0.0.0.0:9001',
      AGENTHOOKS_HTTP_LISTEN: 'off',
      AGENTHOOKS_ALLOW_UNAUTHENTICATED: 'true',
      AGENTHOOKS_DB: '/var/lib/agenthooks/db',
      AGENTHOOKS_SHUTDOWN_GRACE: '2.5',
      AGENTHOOKS_LOG_LEVEL: 'debug',
    };
    const fromEnv = parseServeConfig([], env);
    expect(fromEnv.grpcListen).toEqual([
      { kind: 'unix', path: '/tmp/a.sock', text: 'unix:/tmp/a.sock' },
      { kind: 'tcp', host: '0.0.0.0', port: 9000, text: '0.0.0.0:9000' },
    ]);
    expect(fromEnv.healthListen).toMatchObject({ host: '0.0.0.0', port: 9001 });
    expect(fromEnv.httpListen).toBeUndefined();
    expect(fromEnv.dbPath).toBe('/var/lib/agenthooks/db');
    expect(fromEnv.shutdownGraceMs).toBe(2500);
    expect(fromEnv.logLevel).toBe('debug');
    const flags = parseServeConfig(
      ['--grpc-listen', '[::1]:7000', '--grpc-listen', 'unix:/x', '--db', 'x.db'],
      env,
    );
    expect(flags.grpcListen.map((a) => a.text)).toEqual(['[::1]:7000', 'unix:/x']);
    expect(flags.grpcListen[0]).toMatchObject({ host: '::1', port: 7000 });
    expect(flags.dbPath).toBe('x.db');
  });

  it('takes a PostgreSQL URL for --db, from the flag without a password or from the variable', () => {
    const url = 'postgresql://agenthooks@db:5432/agenthooks?sslmode=verify-full';
    expect(parseServeConfig(['--db', url], {})).toMatchObject({ dbUrl: url, dbPath: undefined });
    const withPassword = 'postgres://agenthooks:s3cret@db/agenthooks';
    expect(parseServeConfig([], { AGENTHOOKS_DB: withPassword })).toMatchObject({
      dbUrl: withPassword,
      dbPath: undefined,
    });
    expect(parseServeConfig([], {}).dbUrl).toBeUndefined();
  });

  it.each([
    'postgres://agenthooks:s3cret@db/agenthooks',
    'postgresql://agenthooks@db/agenthooks?sslmode=require&password=s3cret',
  ])('refuses a password in the --db flag (%s) and points at the safe places', (url) => {
    let error: unknown;
    try {
      parseServeConfig(['--db', url], {});
    } catch (e: unknown) {
      error = e;
    }
    expect(error).toMatchObject({ field: 'db', reason: 'INVALID_FLAG' });
    const message = (error as Error).message;
    for (const hint of ['--db', 'AGENTHOOKS_DB', 'PGPASSWORD', 'PGPASSFILE']) {
      expect(message).toContain(hint);
    }
    expect(message).not.toContain('s3cret');
  });

  it.each([
    'postgres://reader:s3cret@directory/users',
    'postgresql://reader@directory/users?password=s3cret',
  ])('refuses a password in the --users-postgres-url flag (%s), not in its variable', (url) => {
    let error: unknown;
    try {
      parseServeConfig(['--users-postgres-url', url], {});
    } catch (e: unknown) {
      error = e;
    }
    expect(error).toMatchObject({ field: 'users-postgres-url', reason: 'INVALID_FLAG' });
    const message = (error as Error).message;
    for (const hint of ['AGENTHOOKS_USERS_POSTGRES_URL', 'PGPASSWORD', 'PGPASSFILE']) {
      expect(message).toContain(hint);
    }
    expect(message).not.toContain('s3cret');
    expect(parseServeConfig([], { AGENTHOOKS_USERS_POSTGRES_URL: url }).usersPostgresUrl).toBe(url);
    const withoutPassword = 'postgres://reader@directory/users';
    expect(parseServeConfig(['--users-postgres-url', withoutPassword], {}).usersPostgresUrl).toBe(
      withoutPassword,
    );
  });

  it('refuses a publication lease under 100 ms, which it would renew every few milliseconds', () => {
    expect(() => parseServeConfig(['--publication-lease', '99ms'], {})).toThrow(
      expect.objectContaining({ field: 'publication-lease', reason: 'INVALID_FLAG' }),
    );
    expect(parseServeConfig(['--publication-lease', '100ms'], {}).publicationLeaseMs).toBe(100);
  });

  it('rounds a duration to whole milliseconds, and refuses one that rounds to nothing', () => {
    // 2.3 * 3,600,000 is 8,279,999.999... in floating point.
    expect(parseServeConfig(['--retention', '2.3h'], {}).retentionMs).toBe(8_280_000);
    expect(() => parseServeConfig(['--retention', '0.1ms'], {})).toThrow(
      expect.objectContaining({ field: 'retention', reason: 'INVALID_FLAG' }),
    );
  });

  it('reads both retentions as durations, defaulting to the retention module defaults', () => {
    const defaults = parseServeConfig([], {});
    expect(defaults.retentionMs).toBe(DEFAULT_RETENTION_MS);
    expect(defaults.tombstoneRetentionMs).toBe(DEFAULT_TOMBSTONE_RETENTION_MS);

    const env = { AGENTHOOKS_RETENTION: '12h', AGENTHOOKS_TOMBSTONE_RETENTION: '30d' };
    const fromEnv = parseServeConfig([], env);
    expect(fromEnv.retentionMs).toBe(12 * 3_600_000);
    expect(fromEnv.tombstoneRetentionMs).toBe(30 * 86_400_000);
    expect(parseServeConfig(['--tombstone-retention', '500ms'], env).tombstoneRetentionMs).toBe(
      500,
    );
  });

  it('takes the largest --max-streams-per-connection and --request-timeout a connection and a timer can hold', () => {
    const limits = parseServeConfig(
      ['--max-streams-per-connection', '4294967295', '--request-timeout', '2147483'],
      {},
    ).connections;
    expect(limits).toMatchObject({
      maxStreamsPerConnection: 4_294_967_295,
      requestTimeoutMs: 2_147_483_000,
    });
    expect(parseServeConfig([], {}).connections.maxStreamsPerConnection).toBe(250);
  });

  it('reads --db-start-timeout as a duration, off (retry until open) by default', () => {
    expect(parseServeConfig([], {}).dbStartTimeoutMs).toBeUndefined();
    expect(parseServeConfig(['--db-start-timeout', 'off'], {}).dbStartTimeoutMs).toBeUndefined();
    expect(parseServeConfig([], { AGENTHOOKS_DB_START_TIMEOUT: '5m' }).dbStartTimeoutMs).toBe(
      300_000,
    );
    expect(parseServeConfig(['--db-start-timeout', '90'], {}).dbStartTimeoutMs).toBe(90_000);
  });

  it.each([
    ['--db-start-timeout', '0'],
    ['--db-start-timeout', 'forever'],
    ['--tombstone-retention', '0'],
    ['--tombstone-retention', '0.4ms'],
    ['--tombstone-retention', '1w'],
    ['--tombstone-retention', '7 days'],
    ['--tombstone-retention', '99999999999999d'],
    ['--max-streams-per-connection', '0'],
    // Past 32 bits: Node would throw at the first connection.
    ['--max-streams-per-connection', '4294967296'],
    // Past a Node timer's 2^31 - 1 ms: it would fire at once.
    ['--request-timeout', '2147484'],
  ])('refuses %s %s with INVALID_FLAG naming the flag', (flag, value) => {
    expect(() => parseServeConfig([flag, value], {})).toThrow(
      expect.objectContaining({ field: flag.slice(2), reason: 'INVALID_FLAG' }),
    );
  });

  it.each([
    [['--grpc-listen', 'nohost'], 'grpc-listen'],
    [['--grpc-listen', '1.2.3.4:70000'], 'grpc-listen'],
    [['--http-listen', 'unix:/a'], 'http-listen'],
    [['--shutdown-grace=-1'], 'shutdown-grace'],
    [['--log-level', 'loud'], 'log-level'],
    // An empty database alone takes 64 KiB.
    [['--db-max-size', '65536'], 'db-max-size'],
    [['--nope', 'x'], 'args'],
  ])('refuses %j, naming %s', (args, field) => {
    expect(() => parseServeConfig(args, {})).toThrow(expect.objectContaining({ field }));
  });

  it.each(OPTIONS.map((o) => o.env))(
    'refuses %s set but empty, naming it, rather than read it as unset',
    (name) => {
      expect(() => parseServeConfig([], { [name]: '' })).toThrow(
        expect.objectContaining({ field: name, reason: 'INVALID_FLAG' }),
      );
    },
  );

  it.each([
    'AGENTHOOKS_AUTH_TOKEN',
    'AGENTHOOKS_AUDIT_HTTP_AUTHORIZATION',
    'AGENTHOOKS_SIGNING_SECRET_BILLING',
  ])('refuses %s, a variable it reads besides the options, set but empty', (name) => {
    expect(() => parseServeConfig([], { [name]: '' })).toThrow(
      expect.objectContaining({ field: name, reason: 'INVALID_FLAG' }),
    );
  });

  it('refuses an empty env file, listeners or mask instead of falling back to a default', () => {
    const cases: [Record<string, string>, string][] = [
      // Read as unset: no env file, so no environment hooks and readiness SERVING.
      [{ AGENTHOOKS_ENV_FILE: '' }, 'AGENTHOOKS_ENV_FILE'],
      // Read as unset: the TCP defaults instead of a manifest's unix socket or off.
      [{ AGENTHOOKS_GRPC_LISTEN: '', AGENTHOOKS_HTTP_LISTEN: '' }, 'AGENTHOOKS_GRPC_LISTEN'],
      [{ AGENTHOOKS_ADMIN_LISTEN: '' }, 'AGENTHOOKS_ADMIN_LISTEN'],
      // Read as unset: payloads recorded unmasked.
      [{ AGENTHOOKS_AUDIT_MASK: '', AGENTHOOKS_AUDIT_PAYLOADS: 'true' }, 'AGENTHOOKS_AUDIT_MASK'],
    ];
    for (const [env, field] of cases) {
      expect(() => parseServeConfig([], env)).toThrow(
        `${field} is set but empty; unset it to use its default`,
      );
    }
    // The environment hooks' own variables keep their rule: an empty URL is an invalid environment.
    expect(parseServeConfig([], { AGENT_HOOK_WEBHOOK_URL: '' }).grpcListen).toHaveLength(1);
  });

  it.each(
    OPTIONS.filter((o) => o.boolean !== true).flatMap((o) => [
      [[`--${o.flag}`, ''], o.flag],
      [[`--${o.flag}=`], o.flag],
    ]),
  )('refuses %j, an empty value, naming %s', (args, flag) => {
    expect(() => parseServeConfig(args as string[], {})).toThrow(
      expect.objectContaining({ field: flag, reason: 'INVALID_FLAG' }),
    );
  });

  it('refuses an empty value among the values of a list flag', () => {
    expect(() =>
      parseServeConfig(['--grpc-listen', '127.0.0.1:1', '--grpc-listen', ''], {}),
    ).toThrow(expect.objectContaining({ field: 'grpc-listen' }));
  });

  it.each([
    // Past a Node timer's 2^31 - 1 ms each would fire after 1 ms.
    ['--handler-timeout', '10000000'],
    ['--store-check-interval', '10000000'],
    ['--shutdown-grace', '2147484'],
    ['--db-busy-timeout', '2147484'],
    ['--handshake-timeout', '2147484'],
    ['--idle-timeout', '2147484'],
    ['--keepalive-time', '2147484'],
    ['--publication-lease', '100d'],
    ['--db-start-timeout', '25d'],
    // Less than a millisecond: a raw RangeError at start, or a timer of 1 ms.
    ['--db-busy-timeout', '0.0001'],
    ['--shutdown-grace', '0.0001'],
    ['--handler-timeout', '0.0004'],
  ])('refuses %s %s, a delay no timer keeps, naming the flag', (flag, value) => {
    expect(() => parseServeConfig([flag, value], {})).toThrow(
      expect.objectContaining({ field: flag.slice(2), reason: 'INVALID_FLAG' }),
    );
  });

  it('takes delays from a millisecond (or 0 where 0 means no wait) to 24.8 days', () => {
    const longest = parseServeConfig(
      [
        '--handler-timeout',
        '2147483.647',
        '--shutdown-grace',
        '0',
        '--db-busy-timeout',
        '0.001',
        '--publication-lease',
        '24d',
        '--db-start-timeout',
        '2147483647ms',
      ],
      {},
    );
    expect(longest).toMatchObject({
      handlerTimeoutMs: 2_147_483_647,
      shutdownGraceMs: 0,
      dbBusyTimeoutMs: 1,
      publicationLeaseMs: 24 * 86_400_000,
      dbStartTimeoutMs: 2_147_483_647,
    });
    expect(parseServeConfig(['--db-busy-timeout', '0'], {}).dbBusyTimeoutMs).toBe(0);
    // A retention is an age, not a timer's delay: longer ones stay.
    expect(parseServeConfig(['--retention', '90d'], {}).retentionMs).toBe(90 * 86_400_000);
  });

  it.each([
    [['--admin-listen', 'off', '--admin-listen', '127.0.0.1:8081'], 'admin-listen'],
    [['--shutdown-grace', '5', '--shutdown-grace=10'], 'shutdown-grace'],
    [['--audit-payloads', '--audit-payloads'], 'audit-payloads'],
  ])('refuses %j, a flag of one value given twice, naming %s', (args, flag) => {
    expect(() => parseServeConfig(args, {})).toThrow(
      `--${flag} is given more than once; it takes one value`,
    );
  });

  it('takes a list flag more than once', () => {
    const config = parseServeConfig(
      ['--webhook-deny', '10.0.0.0/8', '--webhook-deny', 'example.com'],
      {},
    );
    expect(config.webhookDeny).toEqual(['10.0.0.0/8', 'example.com']);
  });

  it.each([
    ['--shutdown-grace', '0x10'],
    ['--handler-timeout', '1e3'],
    ['--max-connections', '0x10'],
    ['--max-message-bytes', '1e6'],
    ['--db-max-size', '0x100000'],
    ['--stream-max-in-flight', '0b11'],
    ['--audit-buffer', '+5'],
  ])('refuses %s %s, a number not written in decimal', (flag, value) => {
    expect(() => parseServeConfig([flag, value], {})).toThrow(
      expect.objectContaining({ field: flag.slice(2), reason: 'INVALID_FLAG' }),
    );
  });

  it('refuses a number not written in decimal in a variable too', () => {
    expect(() => parseServeConfig([], { AGENTHOOKS_SHUTDOWN_GRACE: '0x10' })).toThrow(
      expect.objectContaining({ field: 'shutdown-grace' }),
    );
    expect(parseServeConfig([], { AGENTHOOKS_SHUTDOWN_GRACE: '16' }).shutdownGraceMs).toBe(16_000);
  });

  it('refuses --env-file, which Node takes for itself, and names --hooks-env-file', () => {
    for (const args of [
      ['--env-file', '/etc/agenthooks.env'],
      ['--env-file=/etc/agenthooks.env'],
    ]) {
      expect(() => parseServeConfig(args, {})).toThrow(
        expect.objectContaining({
          field: 'env-file',
          message: expect.stringContaining('--hooks-env-file'),
        }),
      );
    }
    expect(parseServeConfig(['--hooks-env-file', '/etc/agenthooks.env'], {}).envFile).toBe(
      '/etc/agenthooks.env',
    );
    expect(parseServeConfig([], { AGENTHOOKS_ENV_FILE: '/etc/agenthooks.env' }).envFile).toBe(
      '/etc/agenthooks.env',
    );
  });

  it('documents every option in serve --help and in the README table', () => {
    const help = serveHelp();
    for (const o of OPTIONS) {
      expect(help).toContain(optionSyntax(o));
      expect(help).toContain(o.env);
      const row = [
        `\`${optionSyntax(o)}\``,
        `\`${o.env}\``,
        o.default === undefined ? 'off' : `\`${o.default}\``,
        o.help,
      ];
      expect(README_ROWS).toContainEqual(row);
    }
  });

  it('documents every variable it reads besides the options, in serve --help and the README', () => {
    const help = serveHelp();
    for (const v of ENVIRONMENT_VARIABLES) {
      expect(help).toMatch(new RegExp(`^  ${v.name} +${escapeRegExp(v.help)}$`, 'm'));
      expect(README_ROWS).toContainEqual([`\`${v.name}\``, v.help]);
    }
  });

  it('keeps every help line in two columns, whatever the longest name', () => {
    const help = serveHelp().split('\n');
    const starts = new Set(
      help
        .filter((line) => /^ {2}\S/.test(line))
        .map((line) => (/^ {2}\S+(?: \S+)? +/.exec(line) as RegExpExecArray)[0].length),
    );
    expect([...starts]).toHaveLength(1);
  });
});
