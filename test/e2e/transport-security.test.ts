/**
 * @module Transport security of the sidecar process: the bearer token on
 * both transports (health open, reflection behind the token unless public),
 * the unix socket's mode and group checked with a runtime running as another
 * user (`setpriv`), and TLS and mutual TLS with certificates made by
 * `openssl` at test time.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import * as https from 'node:https';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookService, ListHooksRequestSchema } from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  type ClientSecurity,
  errorInfoOf,
  type LoaderObject,
  securedClient,
  unary,
} from '../support/grpc-client.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';
import { createTestPki, type TestPki } from '../support/tls-certs.js';

const TOKEN = 'test-token-0123456789abcdef';

/** gRPC status codes used here. */
const UNAVAILABLE = 14;
const UNAUTHENTICATED = 16;

/** A GID no account here uses: the socket's group, given to the runtime as its own group. */
const RUNTIME_GID = 4242;
/** The `nobody` user and the `nogroup` group: a user outside the socket's group. */
const NOBODY = 65534;

/** How long a call may take before the test gives up on it. */
const CALL_DEADLINE_MS = 5_000;

const HOOK_SERVICE = 'agenthooks.v1.HookService';
const HEALTH = 'grpc.health.v1.Health';
const REFLECTION = 'grpc.reflection.v1.ServerReflection';

/** Calls a unary method and resolves with its error (or undefined on success). */
async function callError(
  client: AnyClient,
  method: string,
  request: unknown,
): Promise<grpc.ServiceError | undefined> {
  try {
    await unary(client, method, request, { deadline: Date.now() + CALL_DEADLINE_MS });
    return undefined;
  } catch (e: unknown) {
    return e as grpc.ServiceError;
  }
}

/** Opens a streaming call, half-closes it and resolves with its final status. */
function streamStatus(
  client: AnyClient,
  method: string,
  first?: LoaderObject,
): Promise<grpc.StatusObject> {
  return new Promise((resolve) => {
    const call = client[method]({
      deadline: Date.now() + CALL_DEADLINE_MS,
    }) as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
    call.on('data', () => {});
    call.on('error', () => {});
    call.on('status', resolve);
    if (first !== undefined) call.write(first);
    call.end();
  });
}

/** Lists services over reflection; resolves with the names or rejects with the status. */
function listServices(client: AnyClient): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const call = client.ServerReflectionInfo({ deadline: Date.now() + CALL_DEADLINE_MS });
    call.on('data', (res: LoaderObject) => {
      resolve(res.listServicesResponse.service.map((s: { name: string }) => s.name));
      call.end();
    });
    call.on('error', reject);
    call.write({ listServices: '' });
  });
}

describe('bearer token', () => {
  let sidecar: SidecarProcess;
  const clients: AnyClient[] = [];
  const client = (service: string, security: ClientSecurity = {}) => {
    const c = securedClient(service, sidecar.grpc, security);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-token-'));
    const file = join(dir, 'token');
    writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
    sidecar = await startSidecar({ args: ['--auth-token-file', file] });
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    await killSidecar(sidecar);
  });

  it('answers every HookService RPC UNAUTHENTICATED without the token, and with a wrong one', async () => {
    for (const security of [{}, { token: 'wrong' }, { token: `${TOKEN}x` }]) {
      const hooks = client(HOOK_SERVICE, security);
      for (const method of HookService.methods) {
        const status =
          method.methodKind === 'unary'
            ? await callError(hooks, method.name, {})
            : await streamStatus(hooks, method.name);
        expect(status?.code, `${method.name} with ${JSON.stringify(security)}`).toBe(
          UNAUTHENTICATED,
        );
        if (method.methodKind === 'unary') {
          expect(errorInfoOf(status as grpc.ServiceError)).toMatchObject({
            reason: 'UNAUTHENTICATED',
            domain: 'agenthooks',
          });
        }
      }
    }
  });

  it('serves calls that carry the token', async () => {
    const hooks = client(HOOK_SERVICE, { token: TOKEN });
    await unary(hooks, 'RegisterHooks', {
      operationId: 'op-auth',
      hooks: [{ id: 'h', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: '/hook' } }],
    });
    const listed = await unary<LoaderObject>(hooks, 'ListHooks', { operationId: 'op-auth' });
    expect(listed.hooks.map((h: LoaderObject) => h.id)).toEqual(['h']);
    // A stream with the token gets as far as validation.
    const handle = await streamStatus(hooks, 'Handle', { attach: { operationIds: [] } });
    expect(handle.code).toBe(3);
  });

  it('keeps health open without a token', async () => {
    const health = client(HEALTH);
    expect(await unary<LoaderObject>(health, 'Check', { service: '' })).toEqual({
      status: 'SERVING',
    });
  });

  it('refuses reflection without the token and serves it with', async () => {
    await expect(listServices(client(REFLECTION))).rejects.toMatchObject({ code: UNAUTHENTICATED });
    expect(await listServices(client(REFLECTION, { token: TOKEN }))).toContain(HOOK_SERVICE);
  });

  it('applies the same rule over the Connect protocol on HTTP', async () => {
    const post = (path: string, headers: Record<string, string> = {}) =>
      fetch(`http://${sidecar.http}/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(
          path.includes('Health') ? { service: '' } : { operationId: 'op-auth' },
        ),
      });
    const refused = await post(`${HOOK_SERVICE}/ListHooks`);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('unauthenticated');
    const wrong = await post(`${HOOK_SERVICE}/ListHooks`, { authorization: 'Bearer nope' });
    expect(wrong.status).toBe(401);
    await wrong.body?.cancel();
    const served = await post(`${HOOK_SERVICE}/ListHooks`, { authorization: `Bearer ${TOKEN}` });
    expect(served.status).toBe(200);
    await served.body?.cancel();
    const health = await post(`${HEALTH}/Check`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'SERVING' });
  });

  it('checks the token before the body: undecodable JSON without it is UNAUTHENTICATED too', async () => {
    const notUtf8 = Buffer.concat([
      Buffer.from('{"operationId":"op-'),
      Buffer.from([0xff]),
      Buffer.from('"}'),
    ]);
    const bodies = [
      notUtf8,
      Buffer.from('{"operationId": '),
      Buffer.from('{"nope": 1}'),
      // Its error quotes the key: over 1 KiB, connect compresses it for a client that accepts it.
      Buffer.from(`{"${'k'.repeat(1200)}": 1}`),
    ];
    for (const body of bodies) {
      // Plain and compressed: connect decompresses before it decodes.
      for (const [encoding, bytes] of [
        ['identity', body],
        ['gzip', gzipSync(body)],
      ] as const) {
        const connect = await fetch(`http://${sidecar.http}/${HOOK_SERVICE}/ListHooks`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-encoding': encoding,
            'accept-encoding': 'gzip',
          },
          body: bytes,
        });
        expect(connect.status, `${encoding} ${body.toString('latin1').slice(0, 40)}`).toBe(401);
        expect(((await connect.json()) as { code: string }).code).toBe('unauthenticated');
      }
      const frame = Buffer.alloc(5);
      frame.writeUInt32BE(body.length, 1);
      // Content types are case-insensitive.
      for (const contentType of ['application/grpc-web+json', 'Application/gRPC-Web+JSON']) {
        const web = await fetch(`http://${sidecar.http}/${HOOK_SERVICE}/ListHooks`, {
          method: 'POST',
          headers: { 'content-type': contentType, 'grpc-accept-encoding': 'gzip' },
          body: Buffer.concat([frame, body]),
        });
        const trailer = Buffer.from(await web.arrayBuffer()).toString('latin1');
        expect(
          web.headers.get('grpc-status') ?? /grpc-status:\s*(\d+)/.exec(trailer)?.[1],
          contentType,
        ).toBe(String(UNAUTHENTICATED));
      }
    }
  });

  it("answers UNAUTHENTICATED before connect's transport errors, which tell nothing to a caller without the token", async () => {
    const url = `http://${sidecar.http}/${HOOK_SERVICE}/ListHooks`;
    const send = (headers: Record<string, string>, body: Uint8Array) =>
      fetch(url, { method: 'POST', headers, body });
    const json = { 'content-type': 'application/json' };
    const transportErrors: { label: string; headers: Record<string, string>; body: Buffer }[] = [
      {
        label: 'corrupt gzip',
        headers: { ...json, 'content-encoding': 'gzip' },
        body: Buffer.from('{}'),
      },
      {
        label: 'unknown encoding',
        headers: { ...json, 'content-encoding': 'zstd' },
        body: Buffer.from('{}'),
      },
      // Past --max-message-bytes (16 MiB by default).
      { label: 'too large', headers: json, body: Buffer.alloc(16 * 1024 * 1024 + 1, 0x20) },
    ];
    for (const { label, headers, body } of transportErrors) {
      const refused = await send(headers, body);
      expect(refused.status, label).toBe(401);
      expect(((await refused.json()) as { code: string }).code, label).toBe('unauthenticated');
      // With the token, connect's own answer is unchanged.
      const authorized = await send({ ...headers, authorization: `Bearer ${TOKEN}` }, body);
      expect(authorized.status, `${label} with the token`).not.toBe(401);
    }
    // gRPC-Web: a frame cut short; Connect streaming: a bidi stream over HTTP/1.1.
    const web = await send(
      { 'content-type': 'application/grpc-web+proto' },
      Buffer.from([0, 0, 0, 0, 100, 1, 2, 3]),
    );
    expect(web.status).toBe(200);
    const trailer = Buffer.from(await web.arrayBuffer()).toString('latin1');
    expect(/grpc-status:\s*(\d+)/.exec(trailer)?.[1]).toBe(String(UNAUTHENTICATED));
    const bidi = await fetch(`http://${sidecar.http}/${HOOK_SERVICE}/DispatchStream`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
      body: Buffer.alloc(0),
    });
    expect(bidi.status).toBe(200);
    const end = Buffer.from(await bidi.arrayBuffer());
    expect(end[0]).toBe(0b10);
    expect(JSON.parse(end.subarray(5).toString('utf8'))).toMatchObject({
      error: { code: 'unauthenticated' },
    });
    // What is no call (a GET, a preflight, a protocol connect does not speak) keeps
    // connect's answer, the same with the token or without: a refusal framed for
    // gRPC-Web text would not reach its client as one.
    for (const [method, contentType, status] of [
      ['POST', 'application/grpc-web-text', 415],
      ['GET', 'application/json', 405],
      ['OPTIONS', 'application/json', 405],
    ] as const) {
      for (const authorization of [undefined, `Bearer ${TOKEN}`]) {
        const answer = await fetch(url, {
          method,
          headers: {
            'content-type': contentType,
            ...(authorization === undefined ? {} : { authorization }),
          },
          ...(method === 'POST' ? { body: Buffer.from('AAAAAAA=') } : {}),
        });
        expect(answer.status, `${method} ${contentType} ${authorization ?? ''}`).toBe(status);
        await answer.arrayBuffer();
      }
    }
  });

  it('takes the token from AGENTHOOKS_AUTH_TOKEN, and serves reflection openly with --reflection-public', async () => {
    const open = await startSidecar({
      http: false,
      args: ['--reflection-public'],
      env: { AGENTHOOKS_AUTH_TOKEN: TOKEN },
    });
    const reflection = securedClient(REFLECTION, open.grpc);
    const hooks = securedClient(HOOK_SERVICE, open.grpc);
    try {
      expect(await listServices(reflection)).toContain(HOOK_SERVICE);
      expect((await callError(hooks, 'ListHooks', { operationId: 'x' }))?.code).toBe(
        UNAUTHENTICATED,
      );
    } finally {
      reflection.close();
      hooks.close();
      await killSidecar(open);
    }
  });
});

describe('unix socket mode and group', () => {
  /** Runs a ListHooks over the socket as user `nobody` with `gid` as its only group. */
  function listHooksAs(gid: number, socketPath: string, scriptDir: string) {
    const grpcMain = createRequire(import.meta.url).resolve('@grpc/grpc-js');
    const script = join(scriptDir, 'runtime.cjs');
    writeFileSync(
      script,
      `const grpc = require(${JSON.stringify(grpcMain)});
const [target, request] = process.argv.slice(2);
const client = new grpc.Client(target, grpc.credentials.createInsecure());
client.makeUnaryRequest('/agenthooks.v1.HookService/ListHooks', (b) => b, (b) => b,
  Buffer.from(request, 'base64'), new grpc.Metadata(), { deadline: Date.now() + ${CALL_DEADLINE_MS} },
  (err) => {
    process.stdout.write(err ? 'error ' + err.code + ' ' + err.details : 'ok');
    process.exit(err ? 1 : 0);
  });
`,
    );
    const request = Buffer.from(
      toBinary(ListHooksRequestSchema, create(ListHooksRequestSchema, { operationId: 'op-unix' })),
    ).toString('base64');
    return new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        'setpriv',
        [
          `--reuid=${NOBODY}`,
          `--regid=${gid}`,
          '--clear-groups',
          process.execPath,
          script,
          `unix:${socketPath}`,
          request,
        ],
        (error, stdout, stderr) => {
          resolve({ code: error === null ? 0 : (error.code as number), out: `${stdout}${stderr}` });
        },
      );
    });
  }

  it('gives the socket mode 0660 and the configured group: a runtime in the group connects, another user cannot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-sock-'));
    // Anyone may reach the folder; the socket's own mode and group decide.
    chmodSync(dir, 0o755);
    const socketPath = join(dir, 'agenthooks.sock');
    const sidecar = await startSidecar({
      http: false,
      args: ['--grpc-listen', `unix:${socketPath}`, '--socket-group', String(RUNTIME_GID)],
    });
    try {
      const stat = statSync(socketPath);
      expect(stat.isSocket()).toBe(true);
      expect(stat.mode & 0o777).toBe(0o660);
      expect(stat.gid).toBe(RUNTIME_GID);
      expect(stat.uid).toBe(process.getuid?.());
      const member = await listHooksAs(RUNTIME_GID, socketPath, dir);
      expect(member).toEqual({ code: 0, out: 'ok' });
      const outsider = await listHooksAs(NOBODY, socketPath, dir);
      expect(outsider.code).toBe(1);
      expect(outsider.out).toMatch(new RegExp(`^error ${UNAVAILABLE} `));
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('takes --socket-mode and a group name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-sock-'));
    const socketPath = join(dir, 'agenthooks.sock');
    const sidecar = await startSidecar({
      http: false,
      args: [
        '--grpc-listen',
        `unix:${socketPath}`,
        '--socket-mode',
        '0600',
        '--socket-group',
        'nogroup',
      ],
    });
    try {
      const stat = statSync(socketPath);
      expect(stat.mode & 0o777).toBe(0o600);
      expect(stat.gid).toBe(NOBODY);
    } finally {
      await killSidecar(sidecar);
    }
  });
});

describe('TLS', () => {
  let pki: TestPki;

  beforeAll(() => {
    pki = createTestPki();
  });

  /** Checks health over gRPC with `credentials`; resolves with the status or the error code. */
  async function healthWith(
    address: string,
    credentials: grpc.ChannelCredentials,
  ): Promise<string | number> {
    const health = securedClient(HEALTH, address, { credentials });
    try {
      const res = await unary<LoaderObject>(
        health,
        'Check',
        { service: '' },
        {
          deadline: Date.now() + CALL_DEADLINE_MS,
        },
      );
      return res.status as string;
    } catch (e: unknown) {
      return (e as grpc.ServiceError).code;
    } finally {
      health.close();
    }
  }

  /** GETs /healthz over HTTPS; resolves with the status code or the error code. */
  function healthz(address: string, options: https.RequestOptions): Promise<number | string> {
    const [host, port] = address.split(':') as [string, string];
    return new Promise((resolve) => {
      const req = https.get({ host, port: Number(port), path: '/healthz', ...options }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    });
  }

  it('serves TLS: a client with the CA connects, a plaintext client and one without the CA fail', async () => {
    const sidecar = await startSidecar({
      args: ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey],
    });
    try {
      const ca = pki.read(pki.caCert);
      expect(await healthWith(sidecar.grpc, grpc.credentials.createSsl(ca))).toBe('SERVING');
      const hooks = securedClient(HOOK_SERVICE, sidecar.grpc, {
        credentials: grpc.credentials.createSsl(ca),
      });
      expect(
        await unary<LoaderObject>(hooks, 'ListHooks', { operationId: 'op-tls' }),
      ).toMatchObject({});
      hooks.close();
      expect(await healthWith(sidecar.grpc, grpc.credentials.createInsecure())).toBe(UNAVAILABLE);
      expect(await healthWith(sidecar.grpc, grpc.credentials.createSsl())).toBe(UNAVAILABLE);
      expect(await healthz(sidecar.http as string, { ca })).toBe(200);
      expect(await healthz(sidecar.http as string, {})).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    } finally {
      await killSidecar(sidecar);
    }
  });

  /** The flags of mutual TLS with the test PKI: its server certificate, and its CA for clients. */
  const mutualTls = () => [
    '--tls-cert',
    pki.serverCert,
    '--tls-key',
    pki.serverKey,
    '--tls-client-ca',
    pki.caCert,
  ];

  it('serves mutual TLS: a client without a certificate fails, one with a certificate the CA signed connects', async () => {
    const sidecar = await startSidecar({ args: mutualTls() });
    try {
      const ca = pki.read(pki.caCert);
      const key = pki.read(pki.clientKey);
      const cert = pki.read(pki.clientCert);
      expect(await healthWith(sidecar.grpc, grpc.credentials.createSsl(ca))).toBe(UNAVAILABLE);
      expect(await healthWith(sidecar.grpc, grpc.credentials.createSsl(ca, key, cert))).toBe(
        'SERVING',
      );
      expect(await healthz(sidecar.http as string, { ca })).not.toBe(200);
      expect(await healthz(sidecar.http as string, { ca, key, cert })).toBe(200);
    } finally {
      await killSidecar(sidecar);
    }
  });

  it('starts beyond loopback with mutual TLS and no token, and does not warn that the API is unauthenticated', async () => {
    const sidecar = await startSidecar({ args: ['--grpc-listen', '0.0.0.0:0', ...mutualTls()] });
    try {
      expect(sidecar.logs.map((l) => l.msg)).not.toContain(
        'the API is served without a token on addresses other than loopback',
      );
    } finally {
      await killSidecar(sidecar);
    }
  });
});
