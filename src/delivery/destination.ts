/**
 * @module Where webhooks may connect. Caller hooks choose their own URLs, so
 * a hook could point the sidecar at the pod's cloud metadata service
 * (`169.254.169.254`) and read the node's credentials. The
 * {@link DestinationPolicy} refuses link-local and cloud metadata addresses
 * by default, with operator allow and deny lists of hosts and CIDRs on top.
 * Precedence, first match wins:
 *
 * 1. `--webhook-deny` (a host name or an address in a listed network): denied;
 * 2. `--webhook-allow`: allowed;
 * 3. the default deny list (link-local `169.254.0.0/16` and `fe80::/10`,
 *    `fd00:ec2::254`, `metadata.google.internal`, `metadata.goog`): denied;
 * 4. anything else (loopback and private networks included): allowed.
 *
 * The check runs on the address actually connected to: the undici connector
 * of {@link createGuardedConnector} resolves the host name itself, checks
 * every address, and hands `net.connect` only the permitted ones, so a DNS
 * answer that changes between registration and delivery (DNS rebinding)
 * does not get around it, and a denied address is never connected to.
 */
import { promises as dns } from 'node:dns';
import { BlockList, isIP, isIPv6, type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';

/** Networks denied unless allowed: link-local (IPv4 and IPv6) and AWS's IPv6 metadata address. */
export const DEFAULT_DENIED_NETWORKS: readonly string[] = [
  '169.254.0.0/16',
  'fe80::/10',
  'fd00:ec2::254/128',
];

/** Host names denied unless allowed, with their subdomains: Google Cloud's metadata server. */
export const DEFAULT_DENIED_HOSTS: readonly string[] = [
  'metadata.google.internal',
  'metadata.goog',
];

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

/** An address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  /** 4 or 6. */
  readonly family: number;
}

/** Resolves a host name to its addresses; rejects when it cannot. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** Which rule decided a {@link DestinationVerdict}. */
export type DestinationRule = 'deny' | 'allow' | 'default-deny' | 'default-allow';

/** The policy's answer for one destination. */
export interface DestinationVerdict {
  readonly allowed: boolean;
  readonly rule: DestinationRule;
}

/** Options of a {@link DestinationPolicy}: operator rules, each a host name, an address or a CIDR. */
export interface DestinationPolicyOptions {
  /** `--webhook-allow`: wins over the default deny list. */
  readonly allow?: readonly string[];
  /** `--webhook-deny`: wins over everything. */
  readonly deny?: readonly string[];
}

/** A parsed set of rules: networks and host names. */
class RuleSet {
  readonly #networks = new BlockList();
  readonly #hosts = new Set<string>();
  readonly #suffixes: string[] = [];

  constructor(rules: readonly string[], subdomainsOfEveryHost = false) {
    for (const text of rules) {
      const rule = text.trim().toLowerCase();
      if (addNetwork(this.#networks, rule)) continue;
      const host = rule.replace(/\.$/, '');
      if (!HOST_RULE.test(host)) throw new TypeError(`not a host, address or CIDR: ${text}`);
      if (host.startsWith('*.')) {
        this.#suffixes.push(host.slice(1));
      } else {
        this.#hosts.add(host);
        if (subdomainsOfEveryHost) this.#suffixes.push(`.${host}`);
      }
    }
  }

  /** True when the host name is listed (case and a trailing dot ignored). */
  hasHost(hostname: string): boolean {
    const host = normalizeHost(hostname);
    return this.#hosts.has(host) || this.#suffixes.some((suffix) => host.endsWith(suffix));
  }

  /** True when the address is in a listed network; IPv4-mapped IPv6 counts as IPv4. */
  hasAddress(address: string): boolean {
    const ip = unmapIPv4(address);
    const family = isIP(ip);
    if (family === 0) return false;
    return this.#networks.check(ip, family === 4 ? 'ipv4' : 'ipv6');
  }

  /** True when the host name or the address is listed. */
  has(hostname: string, address: string | undefined): boolean {
    return this.hasHost(hostname) || (address !== undefined && this.hasAddress(address));
  }
}

/**
 * Decides whether a webhook may connect to an address; see the module
 * comment for the precedence.
 *
 * @example
 * const policy = new DestinationPolicy({ allow: ['169.254.170.2'], deny: ['10.0.0.0/8'] });
 * policy.check('metadata', '169.254.169.254'); // { allowed: false, rule: 'default-deny' }
 * policy.check('creds', '169.254.170.2'); // { allowed: true, rule: 'allow' }
 */
export class DestinationPolicy {
  readonly #allow: RuleSet;
  readonly #deny: RuleSet;
  readonly #defaultDeny: RuleSet;

  /** @throws TypeError naming a rule that is neither a host name, an address nor a CIDR. */
  constructor(options: DestinationPolicyOptions = {}) {
    this.#allow = new RuleSet(options.allow ?? []);
    this.#deny = new RuleSet(options.deny ?? []);
    this.#defaultDeny = new RuleSet([...DEFAULT_DENIED_NETWORKS, ...DEFAULT_DENIED_HOSTS], true);
  }

  /**
   * The verdict for connecting to `address` for a URL whose host is
   * `hostname`; without `address`, the verdict of the host name alone
   * (before resolution), where `default-allow` means "check the addresses".
   * An IP literal host is its own address.
   */
  check(hostname: string, address?: string): DestinationVerdict {
    const host = stripBrackets(hostname);
    const ip = address ?? (isIP(host) !== 0 ? host : undefined);
    if (this.#deny.has(host, ip)) return { allowed: false, rule: 'deny' };
    if (this.#allow.has(host, ip)) return { allowed: true, rule: 'allow' };
    if (this.#defaultDeny.has(host, ip)) return { allowed: false, rule: 'default-deny' };
    return { allowed: true, rule: 'default-allow' };
  }
}

/**
 * A connection refused by the {@link DestinationPolicy} before it was made.
 * Its message names the host and address, never a URL path or query.
 */
export class DestinationDeniedError extends Error {
  override readonly name = 'DestinationDeniedError';
  readonly code = DESTINATION_DENIED_CODE;
  /** A short diagnostic for the delivery failure, such as `169.254.169.254 (default deny list)`. */
  readonly diagnostic: string;

  constructor(hostname: string, address: string | undefined, rule: DestinationRule) {
    const target =
      address === undefined || address === hostname ? hostname : `${hostname} (${address})`;
    const why = rule === 'deny' ? '--webhook-deny' : 'link-local or cloud metadata address';
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

/** Adds `rule` to `list` when it is an address or a CIDR; false otherwise. */
function addNetwork(list: BlockList, rule: string): boolean {
  const [base = '', prefixText, ...rest] = rule.split('/');
  if (rest.length > 0) return false;
  const ip = unmapIPv4(stripBrackets(base));
  const family = isIP(ip);
  if (family === 0) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const max = family === 4 ? 32 : 128;
  if (prefixText === undefined) {
    list.addAddress(ip, type);
    return true;
  }
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > max) {
    throw new TypeError(`invalid CIDR prefix: ${rule}`);
  }
  list.addSubnet(ip, prefix, type);
  return true;
}

/** `[::1]` to `::1`; anything else as is. */
function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** A host name lower-cased, without a trailing dot. */
function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

/** `::ffff:a9fe:a9fe` or `::ffff:169.254.169.254` to `169.254.169.254`; anything else as is. */
function unmapIPv4(address: string): string {
  if (!isIPv6(address)) return address;
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical);
  if (mapped === null) return address;
  const hi = Number.parseInt(mapped[1] as string, 16);
  const lo = Number.parseInt(mapped[2] as string, 16);
  return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
}
