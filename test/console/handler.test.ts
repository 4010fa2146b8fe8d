/**
 * The admin console's HTTP handler in process, on a real `node:http`
 * listener on 127.0.0.1: routing, JSON beside each page, HEAD, read-only
 * methods, the token check, and a view that cannot be read (503, with the
 * cause kept out of the answer).
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RecentDecisions } from '../../src/console/decisions.js';
import { CONSOLE_CSP, createConsoleHandler } from '../../src/console/handler.js';
import type { ConsoleSource, OperationView } from '../../src/console/views.js';
import { recordingLogger } from '../support/recording-logger.js';

const TOKEN = 'handler-token';

function source(operation: (id: string) => Promise<OperationView>): ConsoleSource {
  return {
    async status() {
      return {
        version: '0.0.0',
        startedAt: new Date(0).toISOString(),
        uptimeSeconds: 1,
        liveness: 'SERVING',
        readiness: 'SERVING',
        store: { kind: 'sqlite', serving: true, location: '/tmp/x.db' },
        handlerStreams: 0,
        detachedInFlight: 0,
      };
    },
    configuration: () => ({ entries: [{ key: 'k', value: 'v' }], environment: [] }),
    environment: () => ({
      environment: { generation: 1, valid: true, hooks: [] },
      plugins: { generation: 1, valid: false, error: 'bad <plugins>', plugins: 0, hooks: [] },
    }),
    operation: (id) => operation(id),
    decisions: new RecentDecisions(),
  };
}

function emptyOperation(id: string): Promise<OperationView> {
  return Promise.resolve({
    operationId: id,
    known: false,
    expired: false,
    hooks: [],
    parkedCalls: [],
    decisions: [],
  });
}

describe('the console handler', () => {
  let server: http.Server | undefined;

  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  const { logger, lines } = recordingLogger();

  async function serve(src: ConsoleSource, token?: string): Promise<string> {
    const handler = createConsoleHandler({
      source: src,
      checkToken:
        token === undefined
          ? undefined
          : (header) => {
              if (header.get('authorization') !== `Bearer ${token}`) throw new Error('no');
            },
      logger,
    });
    server = http.createServer(handler.handle);
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('serves each page and the JSON beside it, and 404 elsewhere', async () => {
    const base = await serve(source(emptyOperation));
    const page = await fetch(`${base}/environment`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    expect(await page.text()).toContain('bad &lt;plugins&gt;');
    expect(await (await fetch(`${base}/environment.json`)).json()).toMatchObject({
      plugins: { valid: false, error: 'bad <plugins>' },
    });
    expect(await (await fetch(`${base}/?format=json`)).json()).toMatchObject({ version: '0.0.0' });
    expect(await (await fetch(`${base}/ops/a%2Fb.json`)).json()).toMatchObject({
      operationId: 'a/b',
    });
    expect(await (await fetch(`${base}/ops?id=x.json&format=json`)).json()).toMatchObject({
      operationId: 'x.json',
    });
    expect((await fetch(`${base}/ops/%E0%A4%A`)).status).toBe(400);
    // U+0000, which a store cannot look up: a bad id, as over the RPCs.
    expect((await fetch(`${base}/ops/op%00x.json`)).status).toBe(400);
    expect((await fetch(`${base}/ops.json?id=op%00x`)).status).toBe(400);
    expect((await fetch(`${base}/nope`)).status).toBe(404);
    const css = await fetch(`${base}/console.css`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const head = await fetch(`${base}/config`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('answers 405 to every method but GET and HEAD, and 401 first without the token', async () => {
    const base = await serve(source(emptyOperation), TOKEN);
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const res = await fetch(`${base}/`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(405);
    }
    expect((await fetch(`${base}/`, { method: 'DELETE' })).status).toBe(401);
    expect((await fetch(`${base}/console.css`)).status).toBe(401);
  });

  it('answers 503 when a view cannot be read, without its cause', async () => {
    const base = await serve(source(() => Promise.reject(new Error('postgres://u:pw@db is down'))));
    const res = await fetch(`${base}/ops/op-1`);
    expect(res.status).toBe(503);
    const body = await res.text();
    expect(body).not.toContain('pw@db');
    expect(body).toContain('could not read this view');
    // The cause goes to the log, once.
    expect(lines.filter((l) => l.msg === 'admin console request failed')).toHaveLength(1);
  });
});
