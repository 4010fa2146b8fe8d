/**
 * @module Destination policy of webhooks: the precedence of the operator's
 * allow and deny lists over the default deny of link-local and cloud
 * metadata addresses, and the check on the address actually connected to,
 * against real receivers on 127.0.0.1 and a real DNS responder. No test
 * sends a packet anywhere but loopback: denied addresses are refused before
 * any connection is made.
 */
import { create, type JsonObject } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { ResponseHandling, type Webhook, WebhookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { executeControl } from '../../src/delivery/control.js';
import {
  createDnsResolver,
  DestinationPolicy,
  type ResolvedAddress,
} from '../../src/delivery/destination.js';
import { WebhookSender, type WebhookSenderOptions } from '../../src/delivery/webhook.js';
import { type DnsResponder, startDnsResponder } from '../support/dns-responder.js';
import { type Receiver, type Reply, startReceiver } from '../support/receiver.js';

const PAYLOAD: JsonObject = { hookId: 'h1', hookType: 'afterStep' };
const METADATA_IP = '169.254.169.254';

let cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** Answers 200 and closes the connection, so that the next request connects (and resolves) again. */
const RESPOND_AND_CLOSE: Reply = { headers: { connection: 'close' }, body: 'ok' };

async function receiver(): Promise<Receiver> {
  const r = await startReceiver({ answer: RESPOND_AND_CLOSE });
  cleanups.push(() => r.close());
  return r;
}

function sender(options: WebhookSenderOptions): WebhookSender {
  const s = new WebhookSender(options);
  cleanups.push(() => s.close());
  return s;
}

/** A resolver that answers every name with `addresses` and counts its calls. */
function fixedResolver(addresses: readonly string[]) {
  const calls: string[] = [];
  const resolve = async (hostname: string): Promise<readonly ResolvedAddress[]> => {
    calls.push(hostname);
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, calls };
}

function webhook(url: string): Webhook {
  return create(WebhookSchema, { url });
}

describe('DestinationPolicy', () => {
  const policy = new DestinationPolicy();

  it.each([
    ['169.254.169.254', METADATA_IP],
    ['169.254.0.1', '169.254.0.1'],
    ['fe80::1', 'fe80::1'],
    ['fd00:ec2::254', 'fd00:ec2::254'],
    ['an IPv4-mapped metadata address', '::ffff:169.254.169.254'],
    ['the same in hex', '::ffff:a9fe:a9fe'],
  ])('denies %s by default', (_, address) => {
    expect(policy.check('example.test', address)).toEqual({ allowed: false, rule: 'default-deny' });
  });

  it.each([
    'metadata.google.internal',
    'METADATA.google.internal.',
    'computeMetadata.metadata.google.internal',
    'metadata.goog',
  ])('denies the metadata host name %s before resolving it', (host) => {
    expect(policy.check(host)).toEqual({ allowed: false, rule: 'default-deny' });
  });

  it.each([
    ['loopback', '127.0.0.1'],
    ['IPv6 loopback', '::1'],
    ['a private address', '10.1.2.3'],
    ['a public address', '93.184.216.34'],
  ])('allows %s by default', (_, address) => {
    expect(policy.check('example.test', address)).toEqual({ allowed: true, rule: 'default-allow' });
  });

  it('lets --webhook-allow win over the default deny, and --webhook-deny over both', () => {
    const p = new DestinationPolicy({
      allow: ['169.254.170.2', 'creds.internal', '169.254.169.0/24'],
      deny: ['169.254.169.254', '127.0.0.0/8', '*.blocked.test'],
    });
    expect(p.check('x', '169.254.170.2')).toEqual({ allowed: true, rule: 'allow' });
    // The host is allowed, so its link-local address is too.
    expect(p.check('creds.internal', '169.254.1.1')).toEqual({ allowed: true, rule: 'allow' });
    expect(p.check('x', '169.254.169.10')).toEqual({ allowed: true, rule: 'allow' });
    // An explicit deny wins over an allowed network and an allowed host.
    expect(p.check('x', METADATA_IP)).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('creds.internal', METADATA_IP)).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('localhost', '127.0.0.1')).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('api.blocked.test')).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('blocked.test')).toEqual({ allowed: true, rule: 'default-allow' });
    expect(p.check('x', '169.254.1.1')).toEqual({ allowed: false, rule: 'default-deny' });
  });

  it('checks an IP literal host as its own address, brackets and all', () => {
    expect(policy.check(METADATA_IP).allowed).toBe(false);
    expect(policy.check('[fe80::1]').allowed).toBe(false);
    expect(policy.check('[::1]').allowed).toBe(true);
  });

  it.each(['http://x', '10.0.0.0/33', 'a b', '::1/200', '1.2.3.4/8/1'])(
    'refuses the rule %j',
    (rule) => {
      expect(() => new DestinationPolicy({ allow: [rule] })).toThrow(TypeError);
    },
  );
});

describe('the guarded connection of WebhookSender', () => {
  it('refuses a URL with a denied IP literal before connecting, as destination_denied', async () => {
    const { resolve, calls } = fixedResolver(['127.0.0.1']);
    const result = await sender({ resolver: resolve }).notify(
      webhook(`http://${METADATA_IP}/latest/meta-data`),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
    expect(!result.ok && result.message).toBe(
      `Hook HTTP request failed: destination_denied: ${METADATA_IP} is denied: link-local or cloud metadata address`,
    );
    // An IP literal is never looked up.
    expect(calls).toEqual([]);
  });

  it('refuses a name that resolves to a denied address, and the receiver sees nothing', async () => {
    const r = await receiver();
    const { resolve, calls } = fixedResolver([METADATA_IP]);
    const port = new URL(r.url).port;
    const result = await sender({ resolver: resolve }).notify(
      webhook(`http://metadata-alias.test:${port}/hook`),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
    expect(calls).toEqual(['metadata-alias.test']);
    expect(r.connections()).toBe(0);
  });

  it('connects only to the permitted addresses of a name', async () => {
    const r = await receiver();
    const { resolve } = fixedResolver([METADATA_IP, '127.0.0.1']);
    const port = new URL(r.url).port;
    const result = await sender({ resolver: resolve }).notify(
      webhook(`http://mixed.test:${port}/hook`),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(r.requests).toHaveLength(1);
  });

  it('refuses loopback under --webhook-deny, and allows metadata-range hosts under --webhook-allow', async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    const denied = await sender({
      destinations: new DestinationPolicy({ deny: ['127.0.0.0/8'] }),
    }).notify(webhook(r.url), PAYLOAD);
    expect(denied).toMatchObject({ ok: false, code: 'destination_denied' });
    expect(!denied.ok && denied.message).toContain('--webhook-deny');
    expect(r.connections()).toBe(0);
    // A name resolving into the link-local range, allowed by name: the
    // resolver maps it to loopback, so the only traffic is local.
    const { resolve } = fixedResolver(['127.0.0.1']);
    const allowed = await sender({
      resolver: resolve,
      destinations: new DestinationPolicy({ allow: ['ecs-agent.test'], deny: [] }),
    }).notify(webhook(`http://ecs-agent.test:${port}/creds`), PAYLOAD);
    expect(allowed).toMatchObject({ ok: true });
  });

  it('reports a denied control as an error that follows onError, like any failure', async () => {
    const { resolve } = fixedResolver([METADATA_IP]);
    const s = sender({ resolver: resolve });
    const control = create(WebhookSchema, {
      url: 'http://policy.test/decide',
      responseHandling: ResponseHandling.TOOL_CALL,
    });
    const result = await executeControl(s, control, PAYLOAD);
    expect(result).toMatchObject({ status: 'error', code: 'destination_denied' });
  });
});

describe('createDnsResolver', () => {
  let dns: DnsResponder;

  afterEach(async () => {
    await dns.close();
  });

  it('follows an answer that changes between lookups (DNS rebinding) and the check follows it', async () => {
    dns = await startDnsResponder();
    dns.answer('rebind.test', ['127.0.0.1', METADATA_IP]);
    const r = await receiver();
    // The receiver closes each connection, so every request needs a new lookup.
    const port = new URL(r.url).port;
    const s = sender({ resolver: createDnsResolver(dns.server) });
    const url = `http://rebind.test:${port}/hook`;
    const first = await s.notify(webhook(url), PAYLOAD);
    expect(first).toMatchObject({ ok: true });
    // Wait for the receiver's side of the first connection to close, so the
    // second request cannot reuse it.
    await r.requests[0]?.socketClosed;
    const second = await s.notify(webhook(url), PAYLOAD);
    expect(second).toMatchObject({ ok: false, code: 'destination_denied' });
    expect(r.requests).toHaveLength(1);
    expect(dns.queries.filter((q) => q.type === 1).map((q) => q.answered)).toEqual([
      '127.0.0.1',
      METADATA_IP,
    ]);
  });

  it('fails a name the server does not know as a network error', async () => {
    dns = await startDnsResponder();
    const result = await sender({ resolver: createDnsResolver(dns.server) }).notify(
      webhook('http://unknown.test/hook'),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'network_error' });
  });
});
