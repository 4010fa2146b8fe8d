/**
 * @module The PostgreSQL user directory against a real PostgreSQL server: a
 * private cluster started for this file (see `./postgres-cluster.ts`).
 */

import { create } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { EmailEnricher } from '../../src/delivery/email.js';
import { buildWebhookPayload } from '../../src/delivery/payload.js';
import { createUserDirectory, type UserDirectory } from '../../src/users/directory.js';
import {
  createPostgresUserDirectory,
  DEFAULT_POOL_SIZE,
  DEFAULT_USERS_POSTGRES_QUERY,
} from '../../src/users/postgres.js';
import { type PostgresCluster, startPostgresCluster } from './postgres-cluster.js';

let cluster: PostgresCluster;
const directories: UserDirectory[] = [];

beforeAll(async () => {
  cluster = await startPostgresCluster();
  await cluster.sql('CREATE TABLE users (id text PRIMARY KEY, email text)');
  await cluster.sql(
    `INSERT INTO users (id, email) VALUES
       ('user_1', 'ada@example.com'), ('user_2', NULL), ('user_3', ''), ('007', 'bond@example.com')`,
  );
  await cluster.sql('CREATE TABLE accounts (uid integer PRIMARY KEY, mail text)');
  await cluster.sql("INSERT INTO accounts (uid, mail) VALUES (42, 'grace@example.com')");
});

afterAll(async () => {
  await Promise.all(directories.map((d) => d.close()));
  await cluster?.stop();
});

function directory(query?: string, url = cluster.url): UserDirectory {
  const d = createPostgresUserDirectory({ url, query });
  directories.push(d);
  return d;
}

describe('PostgreSQL user directory', () => {
  it('runs the default query: a hit, an unknown user, a NULL and an empty email', async () => {
    expect(DEFAULT_USERS_POSTGRES_QUERY).toBe('SELECT email FROM users WHERE id = $1');
    const d = directory();
    expect(await d.lookupEmail('user_1')).toBe('ada@example.com');
    expect(await d.lookupEmail('007')).toBe('bond@example.com');
    expect(await d.lookupEmail('nobody')).toBeNull();
    expect(await d.lookupEmail('user_2')).toBeNull();
    expect(await d.lookupEmail('user_3')).toBeNull();
  });

  it('passes the id as a parameter, never as SQL', async () => {
    const d = directory();
    expect(await d.lookupEmail("' OR '1'='1")).toBeNull();
    expect(await d.lookupEmail('user_1; DROP TABLE users')).toBeNull();
    expect(await d.lookupEmail('user_1')).toBe('ada@example.com');
  });

  it('runs a configured query and takes the first column of the first row', async () => {
    const d = directory('SELECT mail, uid FROM accounts WHERE uid = $1::integer');
    expect(await d.lookupEmail('42')).toBe('grace@example.com');
    expect(await d.lookupEmail('43')).toBeNull();
  });

  it('rejects a failing query with USER_DIRECTORY_UNAVAILABLE and no URL or id in the message', async () => {
    const d = directory('SELECT email FROM missing_table WHERE id = $1');
    const error = await d.lookupEmail('user_1').catch((e: unknown) => e);
    expect(error).toMatchObject({
      reason: 'USER_DIRECTORY_UNAVAILABLE',
      message: 'cannot look up a user email in PostgreSQL (42P01)',
    });
    expect(String((error as Error).message)).not.toContain(cluster.url);
  });

  it('rejects when the server cannot be reached, with the connection URL nowhere in the message', async () => {
    const url = 'postgres://agenthooks:private-password@127.0.0.1:1/postgres';
    const d = directory(undefined, url);
    const error = (await d.lookupEmail('user_1').catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ reason: 'USER_DIRECTORY_UNAVAILABLE' });
    expect(error.message).not.toContain('private-password');
  });

  it('pools its connections: 200 concurrent lookups use at most the pool size', async () => {
    // Other tests' directories keep idle connections open: count this one's only.
    const connections = async (): Promise<number> => {
      const { rows } = await cluster.sql(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'agenthooks'",
      );
      return (rows[0] as { n: number }).n;
    };
    const before = await connections();
    const d = directory();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => d.lookupEmail(i % 2 === 0 ? 'user_1' : 'nobody')),
    );
    expect(results.filter((r) => r === 'ada@example.com')).toHaveLength(100);
    const opened = (await connections()) - before;
    expect(opened).toBeGreaterThan(0);
    expect(opened).toBeLessThanOrEqual(DEFAULT_POOL_SIZE);
  });

  it('closes its pool: the connections go away and later lookups reject', async () => {
    const d = createPostgresUserDirectory({ url: cluster.url });
    await d.lookupEmail('user_1');
    await d.close();
    await d.close();
    await expect(d.lookupEmail('user_1')).rejects.toMatchObject({
      reason: 'USER_DIRECTORY_UNAVAILABLE',
    });
  });

  it('is what createUserDirectory builds from a configured URL, and feeds the enricher', async () => {
    const d = createUserDirectory(
      { usersPostgresUrl: cluster.url, usersPostgresQuery: DEFAULT_USERS_POSTGRES_QUERY },
      {
        users: {
          lookupUserEmail: () => Promise.reject(new Error('the embedded table is not used')),
        },
      },
    );
    directories.push(d);
    let queries = 0;
    const counted: UserDirectory = {
      lookupEmail: (id) => {
        queries += 1;
        return d.lookupEmail(id);
      },
      close: () => d.close(),
    };
    const enricher = new EmailEnricher({ directory: counted });
    const event = create(HookEventSchema, {
      event: {
        case: 'onComplete',
        value: { agentId: 'a', operationId: 'op', userId: 'user_1', reason: 'done' },
      },
    });
    const payload = buildWebhookPayload(event, 'h', undefined);
    const results = await Promise.all(
      Array.from({ length: 100 }, () => enricher.enrich(event, payload, undefined)),
    );
    expect(queries).toBe(1);
    for (const r of results) expect(r?.userEmail).toBe('ada@example.com');
  });
});
