/**
 * @module Where webhooks may connect. Caller hooks choose their own URLs, so
 * a hook could point the sidecar at the pod's cloud metadata service
 * (`169.254.169.254`) and read the node's credentials. The
 * {@link DestinationPolicy} refuses link-local and cloud metadata addresses
 * by default, with operator allow and deny lists on top. A rule is a host
 * name (`*.suffix` for its subdomains), an address, a CIDR, or the name of a
 * class in {@link DESTINATION_CLASSES}: `loopback`, `private`, `link-local`,
 * `metadata`. Precedence, first match wins:
 *
 * 1. an unspecified address (`0.0.0.0/8`, `::`): always denied, whatever the
 *    allow list says, because `connect()` to it reaches the host itself on
 *    Linux (`http://0:8080/` is `127.0.0.1:8080`);
 * 2. `--webhook-deny`: denied;
 * 3. `--webhook-allow`: allowed;
 * 4. the default deny list {@link DEFAULT_DENY_RULES} (`link-local` and
 *    `metadata`): denied;
 * 5. anything else (loopback and private networks included): allowed.
 *
 * An address is judged in every form it has: an IPv6 address that embeds an
 * IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
 * `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
 * `2002:AABB:CCDD::/48`, Teredo `2001::/32`) is judged as itself and as each
 * embedded IPv4 address, and it is denied when any form is. A URL host is
 * read as WHATWG URL parsing reads it, which is what undici connects to:
 * `0`, `2130706433`, `0x7f.1` and `127.1` are `0.0.0.0` and `127.0.0.1`.
 *
 * The check runs on the address actually connected to: the undici connector
 * of {@link createGuardedConnector} resolves the host name itself, checks
 * every address, and hands `net.connect` only the permitted ones, so a DNS
 * answer that changes between registration and delivery (DNS rebinding)
 * does not get around it, and a denied address is never connected to.
 */
import { promises as dns } from 'node:dns';
import { BlockList, isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';

/** Names of the address classes a rule may name. */
export type DestinationClass = 'loopback' | 'private' | 'link-local' | 'metadata';

/**
 * The rules each class stands for. IPv6 forms that embed an IPv4 address
 * need no entry of their own: every address is also judged by the IPv4
 * address it embeds.
 */
export const DESTINATION_CLASSES: Readonly<Record<DestinationClass, readonly string[]>> = {
  // RFC 1122 §3.2.1.3 and RFC 4291 §2.5.3.
  loopback: ['127.0.0.0/8', '::1/128'],
  // RFC 1918, shared address space for carrier-grade NAT (RFC 6598), unique
  // local (RFC 4193) and the deprecated site-local (RFC 3879) addresses.
  private: [
    '10.0.0.0/8',
    '172.16.0.0/12',
    '192.168.0.0/16',
    '100.64.0.0/10',
    'fc00::/7',
    'fec0::/10',
  ],
  // RFC 3927 and RFC 4291 §2.5.6.
  'link-local': ['169.254.0.0/16', 'fe80::/10'],
  metadata: [
    // AWS, GCP, Azure, Oracle Cloud, DigitalOcean and most others.
    '169.254.169.254',
    // Azure's WireServer, which hands out VM extension settings.
    '168.63.129.16',
    // Alibaba Cloud, inside the shared address space `100.64.0.0/10`.
    '100.100.100.200',
    // Oracle Cloud Infrastructure Classic.
    '192.0.0.192',
    // AWS IMDS and EKS Pod Identity over IPv6.
    'fd00:ec2::254',
    'fd00:ec2::23',
    // GCP, Oracle Cloud and Alibaba Cloud over IPv6.
    'fd20:ce::254',
    'fd00:c1::a9fe:a9fe',
    'fd00:100::100:200',
    // GCP's metadata server by name.
    'metadata.google.internal',
    '*.metadata.google.internal',
    'metadata.goog',
    '*.metadata.goog',
  ],
};

/** Rules denied unless allowed: link-local networks and cloud metadata endpoints. */
export const DEFAULT_DENY_RULES: readonly string[] = ['link-local', 'metadata'];

/** `code` of the error a guarded connection fails with; matched along the cause chain. */
export const DESTINATION_DENIED_CODE = 'AGENTHOOKS_DESTINATION_DENIED';

/** How many `cause` links are followed to find a {@link DestinationDeniedError}. */
const MAX_CAUSE_DEPTH = 5;

/** Time one DNS query to a `--dns-server` may take, in milliseconds. */
const DNS_TIMEOUT_MS = 2_000;

/** Attempts per DNS query to a `--dns-server`. */
const DNS_TRIES = 2;

/** A host name rule: letters, digits, `-`, `_`, dots; `*.` in front means any subdomain. */
const HOST_RULE = /^(\*\.)?[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;

/**
 * The last label of a host that WHATWG URL parsing reads as an IPv4 address
 * (its "ends in a number" check): decimal digits, or `0x` and hex digits.
 */
const NUMERIC_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/i;

/** Length of the IPv4-mapped prefix `::ffff:0:0/96`. */
const IPV4_MAPPED_PREFIX = 96;

/** `0.0.0.0/8`: "this network" (RFC 1122 §3.2.1.3), never a destination. */
const UNSPECIFIED_IPV4 = new BlockList();
UNSPECIFIED_IPV4.addSubnet('0.0.0.0', 8, 'ipv4');

/** An address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  /** 4 or 6. */
  readonly family: number;
}

/** Resolves a host name to its addresses; rejects when it cannot. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** Which rule decided a {@link DestinationVerdict}. */
export type DestinationRule = 'unspecified' | 'deny' | 'allow' | 'default-deny' | 'default-allow';

/** The policy's answer for one destination. */
export interface DestinationVerdict {
  readonly allowed: boolean;
  readonly rule: DestinationRule;
}

/**
 * Options of a {@link DestinationPolicy}: operator rules, each a host name
 * (`*.suffix` too), an address, a CIDR or a class of {@link DESTINATION_CLASSES}.
 */
export interface DestinationPolicyOptions {
  /** `--webhook-allow`: wins over the default deny list, not over an unspecified address. */
  readonly allow?: readonly string[];
  /** `--webhook-deny`: wins over the allow list. */
  readonly deny?: readonly string[];
}

/**
 * A parsed set of rules: networks and host names. IPv4 and IPv6 networks are
 * kept apart, so that an address matches only networks of its own family
 * (Node's `BlockList` would match `169.254.169.254` against `::/0` through its
 * IPv4-mapped form); an IPv4-mapped rule is stored as the IPv4 network it is.
 */
class RuleSet {
  readonly #ipv4 = new BlockList();
  readonly #ipv6 = new BlockList();
  readonly #hosts = new Set<string>();
  readonly #suffixes: string[] = [];

  constructor(rules: readonly string[]) {
    for (const text of rules) this.#add(text);
  }

  /** True when the host name is listed (case and a trailing dot ignored). */
  hasHost(hostname: string): boolean {
    const host = normalizeHost(hostname);
    return this.#hosts.has(host) || this.#suffixes.some((suffix) => host.endsWith(suffix));
  }

  /** True when the address, as written, is in a listed network. */
  hasAddress(address: string): boolean {
    const family = isIP(address);
    if (family === 0) return false;
    return family === 4 ? this.#ipv4.check(address, 'ipv4') : this.#ipv6.check(address, 'ipv6');
  }

  /** True when the host name or the address is listed. */
  has(hostname: string, address: string | undefined): boolean {
    return this.hasHost(hostname) || (address !== undefined && this.hasAddress(address));
  }

  #add(text: string): void {
    const rule = text.trim().toLowerCase();
    if (Object.hasOwn(DESTINATION_CLASSES, rule)) {
      for (const member of DESTINATION_CLASSES[rule as DestinationClass]) this.#add(member);
      return;
    }
    if (this.#addNetwork(rule)) return;
    const host = rule.replace(/\.$/, '');
    if (!HOST_RULE.test(host)) throw new TypeError(`not a host, address, CIDR or class: ${text}`);
    // A URL never has such a host name: URL parsing reads it as an IPv4
    // address (`127.1`, `0x7f.1`) or refuses it (`a.10`).
    if (NUMERIC_LABEL.test(host)) {
      throw new TypeError(`not a host name or a dotted-decimal address: ${text}`);
    }
    if (host.startsWith('*.')) {
      this.#suffixes.push(host.slice(1));
    } else {
      this.#hosts.add(host);
    }
  }

  /** Adds `rule` when it is an address or a CIDR; false otherwise. */
  #addNetwork(rule: string): boolean {
    const [base = '', prefixText, ...rest] = rule.split('/');
    if (rest.length > 0) return false;
    const text = stripBrackets(base);
    const family = isIP(text);
    if (family === 0) return false;
    const max = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? max : Number(prefixText);
    if (prefixText !== undefined && (!/^\d{1,3}$/.test(prefixText) || prefix > max)) {
      throw new TypeError(`invalid CIDR prefix: ${rule}`);
    }
    const groups = family === 6 ? (parseIPv6(text) as number[]) : undefined;
    if (groups !== undefined && prefix >= IPV4_MAPPED_PREFIX && isIPv4Mapped(groups)) {
      const address = ipv4(groups[6] ?? 0, groups[7] ?? 0);
      this.#ipv4.addSubnet(address, prefix - IPV4_MAPPED_PREFIX, 'ipv4');
    } else if (family === 4) {
      this.#ipv4.addSubnet(text, prefix, 'ipv4');
    } else {
      this.#ipv6.addSubnet(text, prefix, 'ipv6');
    }
    return true;
  }
}

/**
 * Decides whether a webhook may connect to an address; see the module
 * comment for the precedence.
 *
 * @example
 * const policy = new DestinationPolicy({ allow: ['169.254.170.2'], deny: ['loopback', 'private'] });
 * policy.check('metadata', '169.254.169.254'); // { allowed: false, rule: 'default-deny' }
 * policy.check('creds', '169.254.170.2'); // { allowed: true, rule: 'allow' }
 * policy.check('[::ffff:127.0.0.1]'); // { allowed: false, rule: 'deny' }
 * policy.check('0'); // { allowed: false, rule: 'unspecified' }
 */
export class DestinationPolicy {
  readonly #allow: RuleSet;
  readonly #deny: RuleSet;
  readonly #defaultDeny: RuleSet;

  /** @throws TypeError naming a rule that is neither a host name, an address, a CIDR nor a class. */
  constructor(options: DestinationPolicyOptions = {}) {
    this.#allow = new RuleSet(options.allow ?? []);
    this.#deny = new RuleSet(options.deny ?? []);
    this.#defaultDeny = new RuleSet(DEFAULT_DENY_RULES);
  }

  /**
   * The verdict for connecting to `address` for a URL whose host is
   * `hostname`; without `address`, the verdict of the host name alone
   * (before resolution), where `default-allow` means "check the addresses".
   * An IP literal host, in any spelling URL parsing accepts, is its own
   * address. The address is judged in each of its forms (itself and every
   * IPv4 address it embeds) and denied when any form is.
   */
  check(hostname: string, address?: string): DestinationVerdict {
    const host = canonicalHost(hostname);
    const ip = address ?? (isIP(host) !== 0 ? host : undefined);
    const forms = ip === undefined ? [] : addressForms(ip);
    if (forms.some(isUnspecified)) return { allowed: false, rule: 'unspecified' };
    if (forms.length === 0) return this.#verdict(host, undefined);
    const verdicts = forms.map((form) => this.#verdict(host, form));
    // Denied when any form is, naming the operator's deny before the default one.
    const denied = verdicts.filter((v) => !v.allowed);
    return (
      denied.find((v) => v.rule === 'deny') ??
      denied[0] ??
      verdicts.find((v) => v.rule === 'allow') ??
      (verdicts[0] as DestinationVerdict)
    );
  }

  /** The verdict for one form of the address, by precedence. */
  #verdict(host: string, ip: string | undefined): DestinationVerdict {
    if (this.#deny.has(host, ip)) return { allowed: false, rule: 'deny' };
    if (this.#allow.has(host, ip)) return { allowed: true, rule: 'allow' };
    if (this.#defaultDeny.has(host, ip)) return { allowed: false, rule: 'default-deny' };
    return { allowed: true, rule: 'default-allow' };
  }
}

/** Why each denying rule denies, as the diagnostic says it. */
const DENIAL_REASONS: Readonly<Partial<Record<DestinationRule, string>>> = {
  unspecified: 'unspecified address',
  deny: '--webhook-deny',
  'default-deny': 'link-local or cloud metadata address',
};

/**
 * A connection refused by the {@link DestinationPolicy} before it was made.
 * Its message names the host and address, never a URL path or query.
 */
export class DestinationDeniedError extends Error {
  override readonly name = 'DestinationDeniedError';
  readonly code = DESTINATION_DENIED_CODE;
  /** A short diagnostic for the delivery failure, such as `0.0.0.0 is denied: unspecified address`. */
  readonly diagnostic: string;

  constructor(hostname: string, address: string | undefined, rule: DestinationRule) {
    const target =
      address === undefined || address === hostname ? hostname : `${hostname} (${address})`;
    const why = DENIAL_REASONS[rule] ?? DENIAL_REASONS['default-deny'];
    super(`webhook destination ${target} is denied: ${why}`);
    this.diagnostic = `${target} is denied: ${why}`;
  }
}

/**
 * Returns true when `e`, or an error along its `cause` chain, is a
 * {@link DestinationDeniedError} (matched on `code`).
 */
export function isDestinationDenied(e: unknown): e is DestinationDeniedError {
  return destinationDeniedError(e) !== undefined;
}

/** The {@link DestinationDeniedError} along `e`'s cause chain, if any. */
export function destinationDeniedError(e: unknown): DestinationDeniedError | undefined {
  let current = e;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    if ((current as { code?: unknown }).code === DESTINATION_DENIED_CODE) {
      return current as DestinationDeniedError;
    }
    current = current.cause;
  }
  return undefined;
}

/**
 * The system resolver (`getaddrinfo`, as `net.connect` uses it: `/etc/hosts`
 * and the pod's DNS), every address of both families.
 */
export const systemResolver: Resolver = async function systemResolver(hostname) {
  return dns.lookup(hostname, { all: true, verbatim: true });
};

/**
 * A resolver that asks one DNS server directly (`--dns-server HOST:PORT`),
 * for A and AAAA records; it fails only when both queries fail.
 *
 * @example
 * const resolve = createDnsResolver('127.0.0.1:5353');
 * await resolve('rebind.test'); // [{ address: '127.0.0.1', family: 4 }]
 */
export function createDnsResolver(server: string): Resolver {
  const resolver = new dns.Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES });
  resolver.setServers([server]);
  return async function resolveWithServer(hostname) {
    const [v4, v6] = await Promise.allSettled([
      resolver.resolve4(hostname),
      resolver.resolve6(hostname),
    ]);
    if (v4.status === 'rejected' && v6.status === 'rejected') throw v4.reason;
    return [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ];
  };
}

/**
 * Returns an undici connector that applies `policy` to every connection:
 * an IP literal host is checked as is; a host name is checked by name,
 * then resolved with `resolver` and only its permitted addresses are handed
 * to `net.connect` (through its `lookup` option), so the address connected to
 * is always one the policy allowed. A refusal fails the connection with a
 * {@link DestinationDeniedError} before any packet is sent.
 *
 * @example
 * const agent = new Agent({ connect: createGuardedConnector(new DestinationPolicy()) });
 */
export function createGuardedConnector(
  policy: DestinationPolicy,
  resolver: Resolver = systemResolver,
): buildConnector.connector {
  const lookup: LookupFunction = function guardedLookup(hostname, options, callback) {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    resolver(hostname).then(
      (resolved) => {
        const candidates = family === 0 ? resolved : resolved.filter((a) => a.family === family);
        if (candidates.length === 0) {
          const e = Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
          callback(e as NodeJS.ErrnoException, '', 0);
          return;
        }
        const permitted = candidates.filter((a) => policy.check(hostname, a.address).allowed);
        const first = candidates[0] as ResolvedAddress;
        const allowedFirst = permitted[0];
        if (allowedFirst === undefined) {
          const verdict = policy.check(hostname, first.address);
          callback(new DestinationDeniedError(hostname, first.address, verdict.rule), '', 0);
          return;
        }
        if (options.all === true) {
          // With `all`, Node's callback takes the list in place of the address.
          (callback as unknown as (e: null, list: ResolvedAddress[]) => void)(null, [...permitted]);
        } else {
          callback(null, allowedFirst.address, allowedFirst.family);
        }
      },
      (e: unknown) => callback(e as NodeJS.ErrnoException, '', 0),
    );
  };
  const connect = buildConnector({ lookup });
  return function guardedConnect(options, callback) {
    const host = stripBrackets(options.hostname);
    const verdict = policy.check(host);
    if (!verdict.allowed) {
      callback(
        new DestinationDeniedError(host, isIP(host) !== 0 ? host : undefined, verdict.rule),
        null,
      );
      return;
    }
    connect(options, callback);
  };
}

/** `[::1]` to `::1`; anything else as is. */
function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** A host name lower-cased, without a trailing dot. */
function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

/**
 * A URL host as undici connects to it: brackets removed, and a host that
 * WHATWG URL parsing reads as an IPv4 address (`0`, `2130706433`, `0x7f.1`,
 * `127.1`, `127.0.0.1.`) in dotted-decimal. Other hosts are returned as is.
 */
function canonicalHost(hostname: string): string {
  const host = stripBrackets(hostname.trim());
  if (isIP(host) !== 0 || !NUMERIC_LABEL.test(host)) return host;
  try {
    const parsed = new URL(`http://${host}/`).hostname;
    return isIPv4(parsed) ? parsed : host;
  } catch (e: unknown) {
    // A host URL parsing refuses (`1.2.3.4.5`) is never connected to.
    if (e instanceof TypeError) return host;
    throw e;
  }
}

/** True for `0.0.0.0/8` and `::`. */
function isUnspecified(address: string): boolean {
  if (isIPv4(address)) return UNSPECIFIED_IPV4.check(address, 'ipv4');
  return parseIPv6(address)?.every((group) => group === 0) ?? false;
}

/**
 * The forms an address is judged in: itself, then every IPv4 address an
 * IPv6 address embeds. An IPv6 zone (`fe80::1%eth0`) is dropped. Empty when
 * `address` is not an IP address.
 */
function addressForms(address: string): string[] {
  const ip = address.replace(/%.*$/, '');
  if (isIPv4(ip)) return [ip];
  const groups = parseIPv6(ip);
  if (groups === undefined) return [];
  return [ip, ...embeddedIPv4(groups)];
}

/** The IPv4 addresses an IPv6 address embeds, given as 8 groups of 16 bits. */
function embeddedIPv4(g: readonly number[]): string[] {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const zeroTo = (end: number) => g.slice(0, end).every((group) => group === 0);
  // IPv4-mapped `::ffff:0:0/96` (RFC 4291 §2.5.5.2).
  if (isIPv4Mapped(g)) return [ipv4(g6, g7)];
  // IPv4-translated `::ffff:0:0:0/96` (RFC 2765 §2.1).
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return [ipv4(g6, g7)];
  // IPv4-compatible `::/96` (RFC 4291 §2.5.5.1), which excludes `::` and `::1`.
  if (zeroTo(6)) return g6 === 0 && g7 <= 1 ? [] : [ipv4(g6, g7)];
  // NAT64 well-known prefix `64:ff9b::/96` (RFC 6052 §2.1).
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return [ipv4(g6, g7)];
  }
  // 6to4 `2002::/16` (RFC 3056 §2): the next 32 bits are the IPv4 address.
  if (g0 === 0x2002) return [ipv4(g1, g2)];
  // Teredo `2001::/32` (RFC 4380 §4): the server, then the client with its bits inverted.
  if (g0 === 0x2001 && g1 === 0) return [ipv4(g2, g3), ipv4(~g6 & 0xffff, ~g7 & 0xffff)];
  return [];
}

/** True for an IPv4-mapped address, `::ffff:0:0/96`. */
function isIPv4Mapped(g: readonly number[]): boolean {
  return g.slice(0, 5).every((group) => group === 0) && g[5] === 0xffff;
}

/** Dotted-decimal IPv4 from its two 16-bit halves. */
function ipv4(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
}

/** The 8 groups of an IPv6 address (a dotted-quad tail included); undefined if it is not one. */
function parseIPv6(address: string): number[] | undefined {
  if (!isIPv6(address)) return undefined;
  let text = address;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad !== null) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left = '', right] = text.split('::');
  const parse = (part: string) =>
    part === '' ? [] : part.split(':').map((h) => Number.parseInt(h, 16));
  const head = parse(left);
  if (right === undefined) return head;
  const tail = parse(right);
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}
