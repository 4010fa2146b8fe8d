/**
 * @module The delivery options of `agenthooks serve`: `--qstash-url` and the
 * PostgreSQL user directory (`--users-postgres-url`, `--users-postgres-query`).
 */
import { describe, expect, it } from 'vitest';
import { parseServeConfig } from '../../src/config/config.js';

describe('delivery configuration', () => {
  it('defaults to the SDK QStash endpoint, the embedded users table and the default query', () => {
    const config = parseServeConfig([], {});
    expect(config.qstashUrl).toBe('https://qstash.upstash.io');
    expect(config.usersPostgresUrl).toBeUndefined();
    expect(config.usersPostgresQuery).toBe('SELECT email FROM users WHERE id = $1');
  });

  it('reads QSTASH_URL and the AGENTHOOKS_USERS_POSTGRES_* variables; flags win', () => {
    const env = {
      QSTASH_URL: 'http://127.0.0.1:8080',
      AGENTHOOKS_USERS_POSTGRES_URL: 'postgres://u:p@db:5432/app',
      AGENTHOOKS_USERS_POSTGRES_QUERY: 'SELECT mail FROM accounts WHERE uid = $1',
    };
    expect(parseServeConfig([], env)).toMatchObject({
      qstashUrl: 'http://127.0.0.1:8080',
      usersPostgresUrl: 'postgres://u:p@db:5432/app',
      usersPostgresQuery: 'SELECT mail FROM accounts WHERE uid = $1',
    });
    expect(
      parseServeConfig(
        ['--qstash-url', 'https://eu.example', '--users-postgres-url', 'postgresql://x/y'],
        env,
      ),
    ).toMatchObject({ qstashUrl: 'https://eu.example', usersPostgresUrl: 'postgresql://x/y' });
  });

  it.each([
    [['--qstash-url', 'ftp://x'], 'qstash-url'],
    [['--qstash-url', 'not a url'], 'qstash-url'],
    [['--users-postgres-url', 'mysql://u:secret@db/app'], 'users-postgres-url'],
    [['--users-postgres-query', 'SELECT email FROM users'], 'users-postgres-query'],
  ])('refuses %j, naming %s', (args, field) => {
    expect(() => parseServeConfig(args, {})).toThrow(expect.objectContaining({ field }));
  });

  it('never quotes a refused PostgreSQL URL, which may hold a password', () => {
    expect(() =>
      parseServeConfig(['--users-postgres-url', 'mysql://u:private-password@db/app'], {}),
    ).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('private-password') }),
    );
  });
});
