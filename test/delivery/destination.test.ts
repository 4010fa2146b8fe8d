/**
 * @module Destination policy of webhooks: the precedence of the operator's
 * allow and deny lists over the default deny of link-local and cloud
 * metadata addresses, and the check on the address actually connected to,
 * against real receivers on 127.0.0.1 and a real DNS responder. No test
 * sends a packet anywhere but loopback: denied addresses are refused before
 * any connection is made, and the bypass tables that go through a real
 * connection use only spellings of loopback and of the unspecified address
 * (which Linux connects to loopback); every other form is checked on the
 * policy alone, so that even a broken policy sends nothing off the host.
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

  it.each([
    'http://x',
    '10.0.0.0/33',
    'a b',
    '::1/200',
    '1.2.3.4/8/1',
    '127.1',
    '2130706433',
    '0x7f.1',
    '10/8',
    '*.10',
    'loopback/8',
  ])('refuses the rule %j', (rule) => {
    expect(() => new DestinationPolicy({ allow: [rule] })).toThrow(TypeError);
  });
});

/**
 * Spellings of one IPv4 address, as a URL host and as an address a name
 * resolves to: plain, IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) and
 * 6to4 (2002::/16).
 */
function embeddedForms(ipv4: string): string[] {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  const hi = ((a << 8) | b).toString(16);
  const lo = ((c << 8) | d).toString(16);
  return [
    ipv4,
    `::ffff:${ipv4}`,
    `::ffff:${hi}:${lo}`,
    `::${ipv4}`,
    `64:ff9b::${ipv4}`,
    `2002:${hi}:${lo}::1`,
  ];
}

/** Decimal, hex and octal shorthands of an IPv4 address that URL parsing accepts as a host. */
function shorthands(ipv4: string): string[] {
  const octets = ipv4.split('.').map(Number);
  const value = octets.reduce((n, octet) => n * 256 + octet, 0);
  return [
    String(value),
    `0x${value.toString(16)}`,
    octets.map((o) => `0${o.toString(8)}`).join('.'),
    `${octets[0]}.${value % 2 ** 24}`,
  ];
}

/** An address as a URL host: IPv6 in brackets. */
function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

describe('DestinationPolicy: unspecified addresses', () => {
  const UNSPECIFIED = [
    ...embeddedForms('0.0.0.0'),
    '0.1.2.3',
    '::',
    '0:0:0:0:0:0:0:0',
    '::ffff:0:0.0.0.0',
  ];
  const policies = {
    default: new DestinationPolicy(),
    'allowing everything': new DestinationPolicy({ allow: ['0.0.0.0/0', '::/0'] }),
    'allowing 0.0.0.0 by name': new DestinationPolicy({ allow: ['0.0.0.0', '::', 'zero.test'] }),
  };

  describe.each(Object.entries(policies))('under the %s policy', (_, policy) => {
    it.each(UNSPECIFIED)('denies %s as a URL host and as a resolved address', (address) => {
      const denied = { allowed: false, rule: 'unspecified' };
      expect(policy.check(urlHost(address))).toEqual(denied);
      expect(policy.check('zero.test', address)).toEqual(denied);
    });

    it.each(['0', '0x0', '0.0', '00.0.0.0', '0.0.0.0.'])('denies the URL host %s', (host) => {
      expect(policy.check(host)).toEqual({ allowed: false, rule: 'unspecified' });
    });
  });
});

describe('DestinationPolicy: IPv4 embedded in IPv6 and IPv4 shorthands', () => {
  const loopbackRecipe = new DestinationPolicy({ deny: ['127.0.0.0/8'] });

  it.each([
    ...embeddedForms('127.0.0.1'),
    '::ffff:0:127.0.0.1',
    // Teredo: client 127.0.0.1, obfuscated (RFC 4380 §4).
    '2001:0:4136:e378:8000:63bf:80ff:fffe',
  ])('judges %s by its IPv4 address under --webhook-deny 127.0.0.0/8', (address) => {
    expect(loopbackRecipe.check(urlHost(address))).toEqual({ allowed: false, rule: 'deny' });
    expect(loopbackRecipe.check('alias.test', address)).toEqual({ allowed: false, rule: 'deny' });
  });

  it.each([...shorthands('127.0.0.1'), '127.1', '0x7f.1', '127.0.0.1.'])(
    'reads the URL host %s as 127.0.0.1',
    (host) => {
      expect(loopbackRecipe.check(host)).toEqual({ allowed: false, rule: 'deny' });
    },
  );

  it('denies when either form is denied, so an allowed IPv6 network does not open an IPv4 one', () => {
    const p = new DestinationPolicy({ allow: ['::/0', '2002::/16', '64:ff9b::/96'] });
    for (const address of embeddedForms(METADATA_IP).slice(1)) {
      expect(p.check('x', address)).toEqual({ allowed: false, rule: 'default-deny' });
    }
    // And an allowed IPv4 address is allowed in every form.
    const creds = new DestinationPolicy({ allow: ['169.254.170.2'] });
    for (const address of embeddedForms('169.254.170.2')) {
      expect(creds.check('x', address)).toEqual({ allowed: true, rule: 'allow' });
    }
  });

  it('matches an address only against networks of its own family, an IPv4-mapped rule being IPv4', () => {
    const p = new DestinationPolicy({ allow: ['::/0'], deny: ['::ffff:10.0.0.0/104'] });
    expect(p.check('x', METADATA_IP)).toEqual({ allowed: false, rule: 'default-deny' });
    expect(p.check('x', '10.1.2.3')).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('x', '2001:db8::1')).toEqual({ allowed: true, rule: 'allow' });
  });

  it('keeps names that only look like numbers as names', () => {
    const p = new DestinationPolicy({ deny: ['deadbeef', '*.example.test'] });
    expect(p.check('deadbeef')).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('0x7f.example.test')).toEqual({ allowed: false, rule: 'deny' });
  });
});

describe('DestinationPolicy: named classes', () => {
  it.each([
    ['loopback', [...embeddedForms('127.0.0.1'), '127.255.255.254', '::1']],
    [
      'private',
      [
        ...embeddedForms('10.1.2.3'),
        '172.16.0.1',
        '172.31.255.255',
        '192.168.1.1',
        '100.64.0.1',
        '100.127.255.255',
        'fc00::1',
        'fd12:3456::1',
        'fec0::1',
      ],
    ],
    ['link-local', [...embeddedForms('169.254.1.1'), 'fe80::1']],
    [
      'metadata',
      [...embeddedForms('100.100.100.200'), '168.63.129.16', '192.0.0.192', 'fd20:ce::254'],
    ],
  ])('--webhook-deny %s covers every form of its networks', (name, addresses) => {
    for (const rule of [name, name.toUpperCase()]) {
      const p = new DestinationPolicy({ deny: [rule] });
      for (const address of addresses) {
        expect(p.check(urlHost(address)), address).toEqual({ allowed: false, rule: 'deny' });
        expect(p.check('alias.test', address), address).toEqual({ allowed: false, rule: 'deny' });
      }
    }
  });

  it.each([
    ['loopback', ['128.0.0.1', '2001:db8::1', 'a.loopback']],
    ['private', ['172.32.0.1', '100.128.0.1', '192.169.0.1', '11.0.0.1', 'fe00::1']],
    ['link-local', ['169.255.0.1', 'fec0::1']],
    ['metadata', ['100.100.100.201', '8.8.8.8']],
  ])('--webhook-deny %s leaves its neighbours alone', (name, targets) => {
    const p = new DestinationPolicy({ deny: [name] });
    for (const target of targets) {
      const verdict =
        target.includes(':') || /^[\d.]+$/.test(target) ? p.check('x', target) : p.check(target);
      expect(verdict, target).toEqual({ allowed: true, rule: 'default-allow' });
    }
  });

  it('--webhook-deny metadata covers the metadata host names and their subdomains', () => {
    const p = new DestinationPolicy({ deny: ['metadata'] });
    expect(p.check('metadata.google.internal')).toEqual({ allowed: false, rule: 'deny' });
    expect(p.check('x.metadata.goog')).toEqual({ allowed: false, rule: 'deny' });
  });

  it('--webhook-allow link-local opens the link-local networks, but not the other metadata endpoints', () => {
    const p = new DestinationPolicy({ allow: ['link-local'] });
    expect(p.check('x', '169.254.170.2')).toEqual({ allowed: true, rule: 'allow' });
    expect(p.check('x', '::ffff:169.254.170.2')).toEqual({ allowed: true, rule: 'allow' });
    expect(p.check('x', '100.100.100.200')).toEqual({ allowed: false, rule: 'default-deny' });
    const q = new DestinationPolicy({ allow: ['link-local'], deny: ['metadata'] });
    expect(q.check('x', METADATA_IP)).toEqual({ allowed: false, rule: 'deny' });
  });
});

describe('DestinationPolicy: the default deny list', () => {
  const policy = new DestinationPolicy();
  const METADATA_IPV4 = [METADATA_IP, '168.63.129.16', '100.100.100.200', '192.0.0.192'];

  it.each(METADATA_IPV4)('denies the metadata address %s in every form', (ipv4) => {
    const denied = { allowed: false, rule: 'default-deny' };
    for (const address of embeddedForms(ipv4)) {
      expect(policy.check(urlHost(address)), address).toEqual(denied);
      expect(policy.check('alias.test', address), address).toEqual(denied);
    }
    for (const host of shorthands(ipv4)) expect(policy.check(host), host).toEqual(denied);
  });

  it.each([
    'fd00:ec2::254',
    'fd00:ec2::23',
    'fd20:ce::254',
    'fd00:c1::a9fe:a9fe',
    'fd00:100::100:200',
  ])('denies the IPv6 metadata address %s', (address) => {
    const denied = { allowed: false, rule: 'default-deny' };
    expect(policy.check(urlHost(address))).toEqual(denied);
    expect(policy.check('alias.test', address)).toEqual(denied);
  });
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

describe('the guarded connection: loopback and unspecified spellings', () => {
  const LOOPBACK_HOSTS = [
    '0',
    '0.0.0.0',
    '[::]',
    '[::ffff:0.0.0.0]',
    '[::1]',
    '[::ffff:127.0.0.1]',
    '127.1',
    '0x7f.1',
    '2130706433',
  ];
  const LOOPBACK_ADDRESSES = ['0.0.0.0', '::', '::ffff:0.0.0.0', '::1', '::ffff:127.0.0.1'];

  it('reaches the receiver at 127.0.0.1 when loopback is allowed, so a refusal below is the policy', async () => {
    const r = await receiver();
    const result = await sender({}).notify(webhook(`${r.url}/hook`), PAYLOAD);
    expect(result).toMatchObject({ ok: true, status: 200 });
  });

  it.each(['127.0.0.0/8', 'loopback'])(
    'refuses http://0:PORT/ under --webhook-deny %s, and the receiver on 127.0.0.1 sees nothing',
    async (rule) => {
      const r = await receiver();
      const port = new URL(r.url).port;
      const result = await sender({
        destinations: new DestinationPolicy({ deny: [rule] }),
      }).notify(webhook(`http://0:${port}/hook`), PAYLOAD);
      expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
      expect(!result.ok && result.message).toBe(
        'Hook HTTP request failed: destination_denied: 0.0.0.0 is denied: unspecified address',
      );
      expect(r.connections()).toBe(0);
    },
  );

  it.each(LOOPBACK_HOSTS)(
    'refuses the URL host %s under --webhook-deny loopback before connecting',
    async (host) => {
      const r = await receiver();
      const { resolve, calls } = fixedResolver(['127.0.0.1']);
      const port = new URL(r.url).port;
      const result = await sender({
        resolver: resolve,
        destinations: new DestinationPolicy({ deny: ['loopback'] }),
      }).notify(webhook(`http://${host}:${port}/hook`), PAYLOAD);
      expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
      expect(calls).toEqual([]);
      expect(r.connections()).toBe(0);
    },
  );

  it.each(LOOPBACK_ADDRESSES)(
    'refuses a name resolving to %s under --webhook-deny loopback',
    async (address) => {
      const r = await receiver();
      const { resolve, calls } = fixedResolver([address]);
      const port = new URL(r.url).port;
      const result = await sender({
        resolver: resolve,
        destinations: new DestinationPolicy({ deny: ['loopback'] }),
      }).notify(webhook(`http://loopback-alias.test:${port}/hook`), PAYLOAD);
      expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
      expect(calls).toEqual(['loopback-alias.test']);
      expect(r.connections()).toBe(0);
    },
  );

  it('refuses a name resolving to 0.0.0.0 under the default policy', async () => {
    const r = await receiver();
    const { resolve } = fixedResolver(['0.0.0.0']);
    const port = new URL(r.url).port;
    const result = await sender({ resolver: resolve }).notify(
      webhook(`http://zero.test:${port}/hook`),
      PAYLOAD,
    );
    expect(result).toMatchObject({ ok: false, code: 'destination_denied' });
    expect(!result.ok && result.message).toContain('zero.test (0.0.0.0) is denied');
    expect(r.connections()).toBe(0);
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
