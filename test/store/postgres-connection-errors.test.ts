/**
 * @module A PostgreSQL server that ends a session in the same read as the
 * packet that completed its connect (as a server shutting down sends FATAL
 * 57P01 to a session that has just started): the store's pooled connection
 * must have an 'error' listener already, or the event would crash the
 * process. A TCP proxy in front of a private cluster
 * (`../users/postgres-cluster.ts`) appends that packet to the first
 * ReadyForQuery of the pool's first connection.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres.js';
import { type PostgresCluster, startPostgresCluster } from '../users/postgres-cluster.js';

/** An ErrorResponse (FATAL 57P01), as a server shutting down sends it. */
function adminShutdown(): Buffer {
  const fields = Buffer.concat([
    ...[
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ].map(([code, text]) => Buffer.from(`${code}${text}\0`, 'utf8')),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/**
 * A proxy to `port` that, on connection number `victim` (from 1), sends the
 * server's bytes through its first ReadyForQuery together with
 * {@link adminShutdown} in one write, then closes.
 */
async function startProxy(port: number, victim: number): Promise<{ server: Server; port: number }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    connections += 1;
    const doomed = connections === victim;
    const upstream = tcpConnect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    for (const s of [client, upstream]) {
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    if (!doomed) {
      upstream.pipe(client);
      return;
    }
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      // Walk whole messages (type byte, int32 length) up to the first ReadyForQuery.
      for (let at = 0; at + 5 <= pending.length; ) {
        const end = at + 1 + pending.readInt32BE(at + 1);
        if (end > pending.length) return;
        if (pending[at] === 'Z'.charCodeAt(0)) {
          client.end(Buffer.concat([pending.subarray(0, end), adminShutdown()]));
          upstream.destroy();
          return;
        }
        at = end;
      }
    });
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe('PostgreSQL store connections', () => {
  let cluster: PostgresCluster;

  beforeAll(async () => {
    cluster = await startPostgresCluster();
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('fails the call, not the process, when a session ends in the read that completed its connect', async () => {
    const url = new URL(await cluster.createDatabase());
    // Connection 1 is the migration's; 2 is the pool's first.
    const proxy = await startProxy(Number(url.port), 2);
    url.port = String(proxy.port);
    // An 'error' event without a listener is thrown from the socket's data handler.
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    const store = await openPostgresStore(url.toString());
    try {
      await expect(store.ping()).rejects.toMatchObject({ reason: 'STORE_UNAVAILABLE' });
      // The pool dropped that connection; the next one serves.
      await store.ping();
      expect((await store.listHooks('op-1')).hooks).toEqual([]);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await store.close();
      await new Promise<void>((resolve) => proxy.server.close(() => resolve()));
    }
  });
});
