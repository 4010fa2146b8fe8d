/**
 * @module Rolling upgrades on the PostgreSQL store, with real sidecar
 * processes on a private cluster (`../users/postgres-cluster.ts`): two
 * sidecars started at once on an empty database migrate it once; a sidecar
 * starts and serves on a schema one migration newer whose
 * minimum-compatible marker still admits it (the newer release simulated by
 * its history row, as an expand-only migration leaves it), while the pods
 * already running keep serving; and a marker above this build refuses it
 * at start with STORE_NEWER_THAN_CODE.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MIGRATIONS_TABLE,
  POSTGRES_MIGRATIONS,
  POSTGRES_SCHEMA_VERSION,
} from '../../src/store/postgres-migrations.js';
import { type AnyClient, hookClient, unary } from '../support/grpc-client.js';
import {
  killSidecar,
  launchNode,
  MAIN_JS,
  type SidecarProcess,
  startSidecar,
  withTimeout,
} from '../support/sidecar.js';
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';

/** How long a refused start may take to exit, in milliseconds. */
const EXIT_DEADLINE_MS = 20_000;

describe('rolling upgrades on one PostgreSQL store', () => {
  let cluster: PostgresCluster;
  let url: string;
  const sidecars: SidecarProcess[] = [];
  const clients: AnyClient[] = [];

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

  async function start(): Promise<{ sidecar: SidecarProcess; client: AnyClient }> {
    const sidecar = await startSidecar({ db: false, env: { AGENTHOOKS_DB: url } });
    sidecars.push(sidecar);
    const client = hookClient(sidecar.grpc);
    clients.push(client);
    return { sidecar, client };
  }

  /** The `store opened` log line of a sidecar. */
  function opened(sidecar: SidecarProcess): Record<string, unknown> | undefined {
    return sidecar.logs.find((l) => l.msg === 'store opened');
  }

  /** Registers a hook on `operationId` through `client` and lists it back. */
  async function serves(client: AnyClient, operationId: string): Promise<string[]> {
    await unary(client, 'RegisterHooks', {
      operationId,
      hooks: [
        { id: 'notify', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: 'http://127.0.0.1:9/n' } },
      ],
    });
    const listed = await unary<{ hooks: { id: string }[] }>(client, 'ListHooks', { operationId });
    return listed.hooks.map((h) => h.id);
  }

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    url = await cluster.createDatabase();
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) client.close();
    for (const sidecar of sidecars) await killSidecar(sidecar);
    await cluster?.stop();
  });

  it('migrates an empty database once when two sidecars start at the same time', async () => {
    const [a, b] = await Promise.all([start(), start()]);

    const { rows } = await sql(`SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`);
    expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    const applied = [a, b].map(({ sidecar }) => opened(sidecar)?.migrationsApplied);
    expect(applied).toContainEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    expect(applied).toContainEqual([]);
    expect(await serves(a.client, 'op-a')).toEqual(['notify']);
    expect(await serves(b.client, 'op-a')).toEqual(['notify', 'notify']);
  }, 60_000);

  it('starts and serves on a schema one migration newer that still admits it; running pods keep serving', async () => {
    // What a newer release's expand-only migration leaves: its row, the minimum unchanged.
    await sql(`INSERT INTO ${MIGRATIONS_TABLE} (version, min_compatible_version) VALUES ($1, $2)`, [
      POSTGRES_SCHEMA_VERSION + 1,
      POSTGRES_SCHEMA_VERSION,
    ]);

    const c = await start();

    expect(opened(c.sidecar)).toMatchObject({
      schemaVersion: POSTGRES_SCHEMA_VERSION + 1,
      migrationsApplied: [],
    });
    expect(await serves(c.client, 'op-c')).toEqual(['notify']);
    expect(await serves(clients[0] as AnyClient, 'op-c')).toEqual(['notify', 'notify']);
  }, 60_000);

  it('refuses to start on a schema whose minimum-compatible marker is above this build, with STORE_NEWER_THAN_CODE', async () => {
    await sql(`INSERT INTO ${MIGRATIONS_TABLE} (version, min_compatible_version) VALUES ($1, $2)`, [
      POSTGRES_SCHEMA_VERSION + 2,
      POSTGRES_SCHEMA_VERSION + 2,
    ]);

    const refused = launchNode({
      args: [
        MAIN_JS,
        'serve',
        '--grpc-listen',
        '127.0.0.1:0',
        '--http-listen',
        'off',
        '--admin-listen',
        'off',
      ],
      env: { AGENTHOOKS_DB: url },
    });
    const code = await withTimeout(refused.exited, EXIT_DEADLINE_MS, 'the sidecar did not exit');

    expect(code).toBe(1);
    expect(refused.logs.find((l) => l.msg === 'failed to start')).toMatchObject({
      reason: 'STORE_NEWER_THAN_CODE',
    });
    // The pods already running do not re-read the marker: they keep serving until replaced.
    expect(await serves(clients[0] as AnyClient, 'op-d')).toEqual(['notify']);
  }, 60_000);
});
