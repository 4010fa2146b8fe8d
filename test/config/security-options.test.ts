/** @module The security options of `agenthooks serve`: defaults, sources and refusals. */
import { describe, expect, it } from 'vitest';
import { parseServeConfig } from '../../src/config/config.js';

describe('security options', () => {
  it('is safe by default', () => {
    const config = parseServeConfig([], {});
    expect(config).toMatchObject({
      callerEnvAllowlist: [],
      webhookAllow: [],
      webhookDeny: [],
      dnsServer: undefined,
      authTokenFile: undefined,
      authToken: undefined,
      reflectionPublic: false,
      socketMode: 0o660,
      socketGroup: undefined,
      tls: undefined,
      maxMessageBytes: 16 * 1024 * 1024,
      maxHooksPerOperation: 1_000,
    });
  });

  it('reads lists from flags (repeated or comma-separated) and from variables', () => {
    const fromFlags = parseServeConfig(
      [
        '--caller-env-allowlist',
        'A,B',
        '--caller-env-allowlist',
        'C',
        '--webhook-allow',
        '169.254.170.2',
      ],
      {},
    );
    expect(fromFlags.callerEnvAllowlist).toEqual(['A', 'B', 'C']);
    expect(fromFlags.webhookAllow).toEqual(['169.254.170.2']);
    const fromEnv = parseServeConfig([], {
      AGENTHOOKS_CALLER_ENV_ALLOWLIST: 'HOOK_TOKEN, OTHER',
      AGENTHOOKS_WEBHOOK_DENY: '10.0.0.0/8,*.internal.test',
      AGENTHOOKS_REFLECTION_PUBLIC: 'true',
      AGENTHOOKS_AUTH_TOKEN: 'tok',
      AGENTHOOKS_SOCKET_MODE: '600',
      AGENTHOOKS_TLS_CERT: '/c.pem',
      AGENTHOOKS_TLS_KEY: '/k.pem',
      AGENTHOOKS_TLS_CLIENT_CA: '/ca.pem',
    });
    expect(fromEnv).toMatchObject({
      callerEnvAllowlist: ['HOOK_TOKEN', 'OTHER'],
      webhookDeny: ['10.0.0.0/8', '*.internal.test'],
      reflectionPublic: true,
      authToken: 'tok',
      socketMode: 0o600,
      tls: { certFile: '/c.pem', keyFile: '/k.pem', clientCaFile: '/ca.pem' },
    });
    expect(parseServeConfig(['--reflection-public'], {}).reflectionPublic).toBe(true);
  });

  it.each([
    [['--caller-env-allowlist', '1BAD'], {}, 'caller-env-allowlist'],
    // A caller's header template would send a signing key or the API token to its receiver.
    [
      ['--caller-env-allowlist', 'HOOK_TOKEN,AGENTHOOKS_SIGNING_SECRET_R'],
      {},
      'caller-env-allowlist',
    ],
    [['--caller-env-allowlist', 'AGENTHOOKS_AUTH_TOKEN'], {}, 'caller-env-allowlist'],
    [['--webhook-allow', 'http://x'], {}, 'webhook-allow'],
    [['--webhook-deny', '10.0.0.0/40'], {}, 'webhook-deny'],
    [['--dns-server', 'nohost'], {}, 'dns-server'],
    [['--auth-token-file', '/t'], { AGENTHOOKS_AUTH_TOKEN: 'x' }, 'auth-token-file'],
    [[], { AGENTHOOKS_AUTH_TOKEN: '   ' }, 'AGENTHOOKS_AUTH_TOKEN'],
    // Set but empty (a Secret key that is present and empty) is not "no token".
    [[], { AGENTHOOKS_AUTH_TOKEN: '' }, 'AGENTHOOKS_AUTH_TOKEN'],
    [[], { AGENTHOOKS_AUTH_TOKEN_FILE: '' }, 'AGENTHOOKS_AUTH_TOKEN_FILE'],
    [['--auth-token-file', ''], {}, 'auth-token-file'],
    // A near miss of a variable the sidecar reads would leave its setting at the default.
    [[], { AGENTHOOKS_AUTH_TOKEN_FIL: '/t' }, 'AGENTHOOKS_AUTH_TOKEN_FIL'],
    [[], { AGENTHOOKS_REFLECTON_PUBLIC: 'true' }, 'AGENTHOOKS_REFLECTON_PUBLIC'],
    [[], { AGENTHOOKS_REFLECTION_PUBLIC: 'yes' }, 'reflection-public'],
    [['--socket-mode', '0999'], {}, 'socket-mode'],
    [['--tls-cert', '/c.pem'], {}, 'tls-key'],
    [['--tls-client-ca', '/ca.pem'], {}, 'tls-client-ca'],
    [['--max-message-bytes', '0'], {}, 'max-message-bytes'],
    [['--max-hooks-per-operation', '1.5'], {}, 'max-hooks-per-operation'],
  ])('refuses %j with %j, naming %s', (args, env, field) => {
    expect(() => parseServeConfig(args, env)).toThrow(expect.objectContaining({ field }));
  });

  it("names the variable a near miss likely means, and leaves the family's other names alone", () => {
    expect(() => parseServeConfig([], { AGENTHOOKS_AUTH_TOKEN_FIL: '/t' })).toThrow(
      'unknown variable AGENTHOOKS_AUTH_TOKEN_FIL; did you mean AGENTHOOKS_AUTH_TOKEN_FILE?',
    );
    // Clients, examples and tools use the prefix too; operators name their signing secrets.
    const others = {
      AGENTHOOKS_ADDRESS: '127.0.0.1:50051',
      AGENTHOOKS_TARGET: '127.0.0.1:50051',
      AGENTHOOKS_OPERATION_ID: 'op',
      AGENTHOOKS_IMAGE_TMP: '/tmp',
      AGENTHOOKS_CHROMIUM: '/usr/bin/chromium',
      AGENTHOOKS_DEBIAN_MIRROR: 'http://deb.debian.org/debian',
      AGENTHOOKS_STORAGE_DRIVER: 'vfs',
      // Kubernetes' service links of a Service named agenthooks-users-postgres.
      AGENTHOOKS_USERS_POSTGRES_PORT: 'tcp://10.0.0.7:5432',
      AGENTHOOKS_USERS_POSTGRES_SERVICE_HOST: '10.0.0.7',
      AGENTHOOKS_USERS_POSTGRES_PORT_5432_TCP_ADDR: '10.0.0.7',
    };
    expect(() => parseServeConfig([], others)).not.toThrow();
  });

  it('refuses an API beyond loopback without a token, unless --allow-unauthenticated says so', () => {
    for (const args of [
      ['--grpc-listen', '0.0.0.0:50051'],
      ['--http-listen', '[::]:8080'],
      ['--admin-listen', '10.0.0.5:8081'],
    ]) {
      expect(() => parseServeConfig(args, {}), args.join(' ')).toThrow(
        expect.objectContaining({
          field: (args[0] as string).slice(2),
          message: expect.stringContaining(
            'would serve the API beyond loopback without a bearer token',
          ),
        }),
      );
      expect(() => parseServeConfig([...args, '--allow-unauthenticated'], {})).not.toThrow();
      expect(() => parseServeConfig(args, { AGENTHOOKS_AUTH_TOKEN: 't' })).not.toThrow();
    }
    // Every spelling of an address beyond loopback is refused; a client certificate
    // (--tls-client-ca) authenticates as a token does.
    for (const host of [
      '[::]',
      '[0:0:0:0:0:0:0:0]',
      '[::ffff:0.0.0.0]',
      '0',
      '10.0.0.1',
      'example.com',
    ]) {
      expect(() => parseServeConfig(['--grpc-listen', `${host}:50051`], {}), host).toThrow(
        expect.objectContaining({ field: 'grpc-listen' }),
      );
    }
    const tls = ['--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--tls-client-ca', '/ca.pem'];
    expect(() => parseServeConfig(['--grpc-listen', '0.0.0.0:50051', ...tls], {})).not.toThrow();
    // A bad value of the opt-in is refused even where it is not needed.
    expect(() => parseServeConfig([], { AGENTHOOKS_ALLOW_UNAUTHENTICATED: 'ture' })).toThrow(
      expect.objectContaining({ field: 'allow-unauthenticated' }),
    );
    // Loopback (however it is written), unix sockets and the health and metrics
    // listeners need no token.
    expect(() =>
      parseServeConfig(
        [
          '--grpc-listen',
          '127.0.0.1:50051',
          '--grpc-listen',
          'unix:/tmp/a.sock',
          '--grpc-listen',
          '[0::1]:50053',
          '--grpc-listen',
          '[::ffff:7f00:1]:50054',
          '--grpc-listen',
          '127.1:50055',
          '--grpc-listen',
          'localhost.:50056',
          '--http-listen',
          'localhost:8080',
          '--health-listen',
          '0.0.0.0:50052',
          '--metrics-listen',
          '0.0.0.0:9090',
        ],
        {},
      ),
    ).not.toThrow();
  });

  it('never quotes the token in an error', () => {
    try {
      parseServeConfig(['--auth-token-file', '/t'], { AGENTHOOKS_AUTH_TOKEN: 'very-secret' });
    } catch (e: unknown) {
      expect((e as Error).message).not.toContain('very-secret');
    }
  });
});
