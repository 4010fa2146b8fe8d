/**
 * @module The PostgreSQL store: the store contract (`./contract.ts`) and what
 * only a shared server shows (several pools on one database, concurrent
 * migrations, schema compatibility, a server that stops), on a private
 * cluster started for this file (`../users/postgres-cluster.ts`) with a
 * fresh database per test.
 */
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { create, toJsonString } from '@bufbuild/protobuf';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  openPostgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
} from '../../src/store/postgres.js';
import {
  MIGRATIONS_TABLE,
  POSTGRES_MIGRATIONS,
  POSTGRES_SCHEMA_VERSION,
} from '../../src/store/postgres-migrations.js';
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';
import { describeStoreContract } from './contract.js';
import { parkedCall, toolResult, webhookHook } from './helpers.js';

let cluster: PostgresCluster;
/** URL of this test's fresh database. */
let url: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  cluster = await startPostgresCluster();
});

afterAll(async () => {
  await cluster?.stop();
});

beforeEach(async () => {
  url = await cluster.createDatabase();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup();
  }
});

/** Opens a store (its own pool) on this test's database; closed after the test. */
async function open(options?: PostgresStoreOptions): Promise<PostgresStore> {
  const store = await openPostgresStore(url, options);
  cleanups.push(() => store.close());
  return store;
}

/** Runs SQL on this test's database on a connection of its own. */
async function sql(text: string, values?: unknown[]): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await client.query(text, values);
  } finally {
    await client.end();
  }
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (e: unknown) {
    return e;
  }
  throw new Error('expected the call to reject');
}

describeStoreContract('PostgreSQL', {
  open: () => open(),
  exec: async (text) => {
    await sql(text);
  },
  bytesLiteral: (hex) => `'\\x${hex}'::bytea`,
  table: (name) => `agenthooks_${name}`,
});

describe('PostgreSQL store across pools and processes', () => {
  it('lets two stores on one database see each other’s writes at once', async () => {
    const a = await open();
    const b = await open();

    await a.appendHooks('op-1', 'parent-1', [webhookHook('a')]);
    expect((await b.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
    await b.appendHooks('op-1', undefined, [webhookHook('b')]);
    expect((await a.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a', 'b']);
    await b.markOperationCompleted('op-1', 1_000);
    expect((await a.operationState(['op-1'])).get('op-1')).toBe('completed');
    await a.upsertUsers([{ id: 'u', email: 'u@example.com' }]);
    expect(await b.lookupUserEmail('u')).toBe('u@example.com');
  });

  it('never interleaves concurrent batches of two stores and numbers them in commit order', async () => {
    const a = await open({ maxConnections: 4 });
    const b = await open({ maxConnections: 4 });
    const batches = Array.from({ length: 16 }, (_, i) =>
      Array.from({ length: 5 }, (_, j) => webhookHook(`b${i}-${j}`)),
    );

    const counts = await Promise.all(
      batches.map((hooks, i) => (i % 2 === 0 ? a : b).appendHooks('op-1', undefined, hooks)),
    );

    // Each append saw the others' whole batches: the counts are 5, 10, ... 80.
    expect([...counts].sort((x, y) => x - y)).toEqual(batches.map((_, i) => (i + 1) * 5));
    const ids = (await a.listHooks('op-1')).hooks.map((h) => h.id);
    expect(ids).toHaveLength(80);
    for (let at = 0; at < ids.length; at += 5) {
      const batch = ids[at]?.split('-')[0];
      expect(ids.slice(at, at + 5)).toEqual([0, 1, 2, 3, 4].map((j) => `${batch}-${j}`));
    }
    // The batch order is the order of the counts each append resolved to.
    const byCount = batches
      .map((hooks, i) => ({ first: hooks[0]?.id, count: counts[i] ?? 0 }))
      .sort((x, y) => x.count - y.count)
      .map((x) => x.first);
    expect(ids.filter((_, i) => i % 5 === 0)).toEqual(byCount);
  });

  it('keeps the config-size limit across stores under concurrent appends', async () => {
    const a = await open();
    const b = await open();
    const hook = (id: string) => webhookHook(id);
    const size = Buffer.byteLength(toJsonString(HookSchema, hook('x0')), 'utf8');
    // Room for exactly three hooks of this size.
    const limit = size * 3;

    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 === 0 ? a : b).appendHooks('op-1', undefined, [hook(`x${i}`)], {
          maxConfigBytes: limit,
        }),
      ),
    );

    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
    expect((await a.listHooks('op-1')).hooks).toHaveLength(3);
  });

  it('keeps the hook limit across stores under concurrent appends', async () => {
    const a = await open();
    const b = await open();

    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 === 0 ? a : b).appendHooks('op-1', undefined, [webhookHook(`x${i}`)], {
          maxHooks: 3,
        }),
      ),
    );

    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason.reason)).toEqual(
      Array(5).fill('TOO_MANY_HOOKS'),
    );
    expect((await a.listHooks('op-1')).hooks).toHaveLength(3);
  });

  it('publishes exactly once across two stores', async () => {
    const a = await open();
    const b = await open();
    await a.parkCall(parkedCall('call-1'));

    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? a : b).publishResult('call-1', toolResult(`r${i}`), 1_000 + i),
      ),
    );

    expect(outcomes.filter((o) => o.published)).toHaveLength(1);
    expect(new Set(outcomes.map((o) => o.finalResult.content)).size).toBe(1);
  });
});

describe('PostgreSQL store edge cases', () => {
  it('leaves no operation rows of a park that lost the race for the same tool call', async () => {
    const a = await open();
    const b = await open();
    for (let round = 0; round < 10; round++) {
      const call = `race-${round}`;
      const parked = await Promise.all([
        a.parkCall(parkedCall(call, [`opA-${round}`, `chainA-${round}`])),
        b.parkCall(parkedCall(call, [`opB-${round}`, `chainB-${round}`])),
      ]);
      // Both answer the one record that won.
      expect(parked[0].record).toEqual(parked[1].record);
      const winner = parked[0].record.operationId === `opA-${round}` ? 'A' : 'B';
      const loser = winner === 'A' ? 'B' : 'A';
      const { rows } = await sql(
        'SELECT id FROM agenthooks_operations WHERE id = ANY($1::text[])',
        [[`op${loser}-${round}`, `chain${loser}-${round}`]],
      );
      expect(rows, `round ${round}`).toEqual([]);
    }
  });

  it('checks the matcher budget when a stored hook holds U+0000 in its body', async () => {
    const store = await open();
    const withNul = create(HookSchema, {
      id: 'nul-body',
      type: HookType.AFTER_STEP,
      webhook: {
        url: 'https://hooks.example.com/nul',
        body: { fields: { note: { kind: { case: 'stringValue', value: 'a\u0000b' } } } },
      },
    });
    await store.appendHooks('op-1', undefined, [withNul]);
    const matcher = create(HookSchema, {
      id: 'guard',
      type: HookType.BEFORE_TOOL_CALL,
      matcher: '^fs/',
      webhook: { url: 'https://hooks.example.com/guard' },
    });
    const seen: string[][] = [];
    const count = await store.appendHooks('op-1', undefined, [matcher], {
      checkMatchers: (stored) => {
        seen.push([...stored]);
      },
    });
    expect(count).toBe(2);
    expect(seen).toEqual([[]]);
    // The stored matcher is read back for the next batch.
    await store.appendHooks('op-1', undefined, [create(HookSchema, { ...matcher, id: 'g2' })], {
      checkMatchers: (stored) => {
        seen.push([...stored]);
      },
    });
    expect(seen[1]).toEqual(['^fs/']);
  });

  it('answers no email for a user id holding U+0000, which no row can have', async () => {
    const store = await open();
    expect(await store.lookupUserEmail('user\u0000x')).toBeNull();
  });

  it('publishes when the write committed but its answer was lost with the connection', async () => {
    const proxy = await cuttingProxy(new URL(url));
    cleanups.push(() => proxy.close());
    const viaProxy = await openPostgresStore(proxy.url);
    cleanups.push(() => viaProxy.close());
    await viaProxy.parkCall(parkedCall('call-cut'));
    proxy.cutAfter('UPDATE agenthooks_parked_calls SET final_result');

    const outcome = await viaProxy.publishResult('call-cut', toolResult('the result'), 4_242);

    expect(proxy.cuts()).toBe(1);
    expect(outcome).toMatchObject({ published: true, publishedAt: 4_242 });
    const again = await viaProxy.publishResult('call-cut', toolResult('other'), 5_000);
    expect(again).toMatchObject({ published: false, publishedAt: 4_242 });
    expect(again.finalResult.content).toBe('the result');
  });

  it('does not take a publication another attempt made with the same bytes in the same millisecond', async () => {
    const proxy = await cuttingProxy(new URL(url));
    cleanups.push(() => proxy.close());
    const viaProxy = await openPostgresStore(proxy.url);
    cleanups.push(() => viaProxy.close());
    const direct = await openPostgresStore(url);
    cleanups.push(() => direct.close());
    await viaProxy.parkCall(parkedCall('call-same'));
    const held = proxy.holdAt('UPDATE agenthooks_parked_calls SET final_result');

    // The proxied write never reaches the server; while it hangs, another
    // attempt publishes the very same bytes at the very same time.
    const proxied = viaProxy.publishResult('call-same', toolResult('the result'), 4_242);
    await held;
    const other = await direct.publishResult('call-same', toolResult('the result'), 4_242);
    expect(other).toMatchObject({ published: true, publishedAt: 4_242 });
    proxy.cutHeld();

    const outcome = await proxied;
    expect(outcome).toMatchObject({ published: false, publishedAt: 4_242 });
    expect(outcome.finalResult.content).toBe('the result');
  });
});

/**
 * A TCP proxy to the cluster that, once armed with `cutAfter(text)`, forwards
 * the client's message holding `text`, then drops the server's answer to it
 * (the first answer holding a command tag) and closes both sides: a write
 * the server committed whose answer the client never gets. Armed with
 * `holdAt(text)` instead, it keeps that message from the server until
 * `cutHeld()` closes both sides: a write that never ran.
 */
async function cuttingProxy(target: URL): Promise<{
  url: string;
  cutAfter(text: string): void;
  /** Keeps the client's message holding `text` from the server; resolves once it came. */
  holdAt(text: string): Promise<void>;
  /** Closes both sides of the connection whose message {@link holdAt} kept. */
  cutHeld(): void;
  cuts(): number;
  close(): Promise<void>;
}> {
  let armed: string | undefined;
  let holding: { text: string; held: () => void } | undefined;
  let cutHeld: (() => void) | undefined;
  let cuts = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let cutting = false;
    client.on('data', (chunk: Buffer) => {
      if (holding !== undefined && chunk.includes(holding.text)) {
        const { held } = holding;
        holding = undefined;
        cutHeld = () => {
          client.destroy();
          upstream.destroy();
        };
        held();
        return;
      }
      if (armed !== undefined && chunk.includes(armed)) {
        armed = undefined;
        cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (cutting && chunk.includes('UPDATE ')) {
        cuts += 1;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    for (const socket of [client, upstream]) {
      socket.on('error', () => undefined);
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(socket);
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(target);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as AddressInfo).port);
  return {
    url: proxied.toString(),
    cutAfter: (text) => {
      armed = text;
    },
    holdAt: (text) =>
      new Promise<void>((held) => {
        holding = { text, held };
      }),
    cutHeld: () => cutHeld?.(),
    cuts: () => cuts,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('PostgreSQL migrations', () => {
  it('migrates an empty database once when two stores open it at the same time', async () => {
    const [a, b] = await Promise.all([open(), open()]);

    const { rows } = await sql(`SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`);
    expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    expect(a.schemaVersion).toBe(POSTGRES_SCHEMA_VERSION);
    expect(b.schemaVersion).toBe(POSTGRES_SCHEMA_VERSION);
    // One of them applied every migration, the other none.
    expect([a.migrationsApplied, b.migrationsApplied]).toContainEqual(
      POSTGRES_MIGRATIONS.map((m) => m.version),
    );
    expect([a.migrationsApplied, b.migrationsApplied]).toContainEqual([]);
    await a.appendHooks('op-1', undefined, [webhookHook('a')]);
    expect((await b.listHooks('op-1')).hooks).toHaveLength(1);
  });

  it('opens a current database without applying anything again', async () => {
    const first = await open();
    await first.appendHooks('op-1', undefined, [webhookHook('a')]);
    await first.close();

    const second = await open();

    expect((await second.listHooks('op-1')).hooks).toHaveLength(1);
    const { rows } = await sql(`SELECT count(*)::int AS n FROM ${MIGRATIONS_TABLE}`);
    expect(rows[0].n).toBe(POSTGRES_SCHEMA_VERSION);
  });

  it('keeps running on a newer schema whose minimum-compatible version allows this code', async () => {
    await (await open()).close();
    const newer = POSTGRES_SCHEMA_VERSION + 1;
    await sql(`INSERT INTO ${MIGRATIONS_TABLE} (version, min_compatible_version) VALUES ($1, $2)`, [
      newer,
      POSTGRES_SCHEMA_VERSION,
    ]);

    const store = await open();

    expect(store.schemaVersion).toBe(newer);
    expect(await store.appendHooks('op-1', undefined, [webhookHook('a')])).toBe(1);
  });

  it('refuses a schema whose minimum-compatible version is above this code’s', async () => {
    await (await open()).close();
    const newer = POSTGRES_SCHEMA_VERSION + 1;
    await sql(`INSERT INTO ${MIGRATIONS_TABLE} (version, min_compatible_version) VALUES ($1, $2)`, [
      newer,
      newer,
    ]);

    const error = await rejectionOf(openPostgresStore(url));

    expect(error).toMatchObject({
      reason: 'STORE_NEWER_THAN_CODE',
      kind: 'unavailable',
      metadata: {
        schemaVersion: String(newer),
        minCompatibleVersion: String(newer),
        supportedVersion: String(POSTGRES_SCHEMA_VERSION),
      },
    });
  });
});

/**
 * Holds the lock on the operation's row from a connection of its own, as
 * an append of another pod would, until `release()`.
 */
async function holdOperationLock(operationId: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT 1 FROM agenthooks_operations WHERE id = $1 FOR UPDATE', [operationId]);
  return {
    release: async () => {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    },
  };
}

/** Resolves once a connection of the store waits on a lock (polls pg_stat_activity). */
async function storeWaitsOnLock(): Promise<void> {
  for (;;) {
    const { rows } = await sql(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE application_name = 'agenthooks-store' AND wait_event_type = 'Lock'`,
    );
    if (rows[0].n > 0) return;
  }
}

describe('PostgreSQL store faults', () => {
  it('checks the store while another pod holds its probe row (a pod stalled mid-check)', async () => {
    const store = await open({ statementTimeoutMs: 300 });
    const stalled = new pg.Client({ connectionString: url });
    stalled.on('error', () => undefined);
    await stalled.connect();
    cleanups.push(() => stalled.end());
    await stalled.query('BEGIN');
    await stalled.query('INSERT INTO agenthooks_probe (id) VALUES (1)');
    // Not held on the stalled pod's row: the check answers within the statement timeout.
    await store.ping();
    await store.ping();
    await stalled.query('ROLLBACK');
  });

  it('fails an append that waits on another transaction’s lock past the statement timeout with STORE_LOCKED', async () => {
    const store = await open({ statementTimeoutMs: 300 });
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    const lock = await holdOperationLock('op-1');
    cleanups.push(() => lock.release());

    const error = await rejectionOf(store.appendHooks('op-1', undefined, [webhookHook('b')]));

    expect(error).toMatchObject({ reason: 'STORE_LOCKED', kind: 'unavailable' });
    await lock.release();
    expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
  });

  it('rejects a transaction whose connection is killed with STORE_UNAVAILABLE, and serves the next call', async () => {
    const store = await open();
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);
    const lock = await holdOperationLock('op-1');
    cleanups.push(() => lock.release());
    const append = rejectionOf(store.appendHooks('op-1', undefined, [webhookHook('b')]));
    await storeWaitsOnLock();

    await sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name = 'agenthooks-store' AND datname = current_database()`,
    );

    expect(await append).toMatchObject({
      name: 'StoreUnavailableError',
      reason: 'STORE_UNAVAILABLE',
    });
    await lock.release();
    expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
  });

  it('rejects with STORE_UNAVAILABLE, without the URL, when the server cannot be reached', async () => {
    const unreachable = 'postgres://agenthooks:private-password@127.0.0.1:1/postgres';

    const error = await rejectionOf(openPostgresStore(unreachable, { connectTimeoutMs: 2_000 }));

    expect(error).toMatchObject({ reason: 'STORE_UNAVAILABLE', kind: 'unavailable' });
    expect(String((error as Error).message)).not.toContain('private-password');
  });

  it('fails calls with StoreUnavailableError while the server is stopped, never empty answers, and recovers', async () => {
    const store = await open({ connectTimeoutMs: 2_000, statementTimeoutMs: 2_000 });
    await store.appendHooks('op-1', undefined, [webhookHook('a')]);

    await cluster.stopServer();
    let restarted = false;
    try {
      // One call at a time: a call made early and awaited late would reject
      // unhandled in between (vitest then fails the run).
      for (const call of [
        () => store.listHooks('op-1'),
        () => store.listHooks('never'),
        () => store.operationState(['op-1']),
        () => store.getParkedCall('call-1'),
        () => store.appendHooks('op-1', undefined, [webhookHook('b')]),
        () => store.ping(),
      ]) {
        const error = await rejectionOf(call());
        expect(error).toMatchObject({ name: 'StoreUnavailableError', reason: 'STORE_UNAVAILABLE' });
      }
      await cluster.startServer();
      restarted = true;
    } finally {
      if (!restarted) await cluster.startServer();
    }

    await store.ping();
    expect((await store.listHooks('op-1')).hooks.map((h) => h.id)).toEqual(['a']);
  });
});
