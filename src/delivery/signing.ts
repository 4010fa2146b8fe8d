/**
 * @module Signed webhooks in the Standard Webhooks format
 * (https://www.standardwebhooks.com/, as the `standardwebhooks` and `svix`
 * libraries verify it): the operator's declared signing secrets, the rule
 * that binds a hook's secret to its destination origin, and the signer.
 *
 * Secrets are declared in the effective environment (the process
 * environment overlaid by `--hooks-env-file`, so a mounted Secret works), one pair
 * of variables per name:
 * - `AGENTHOOKS_SIGNING_SECRET_<NAME>`: one `whsec_<base64>` secret, or two
 *   separated by spaces while it rotates (both sign every request);
 * - `AGENTHOOKS_SIGNING_ORIGINS_<NAME>`: the comma-separated origins
 *   (`scheme://host[:port]`) it may sign for.
 * `<NAME>` is what a hook's `webhook.signingSecret` names; `DEFAULT` also
 * signs every hook that names none, to its bound origins. The declaration is
 * checked strictly ({@link signingSecrets}): a malformed one makes the
 * environment invalid, and no message ever holds a secret.
 *
 * The rule ({@link checkSigningSecret}) is written once and applied at
 * registration (`hooks/validate.ts`, environment hooks, operator plugins) and
 * again at each delivery (`webhook.ts`), against the declaration of the
 * moment: a hook whose secret is gone or no longer bound fails rather than
 * go out unsigned.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import type { Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { type AgentHooksError, invalidEnvironment } from '../errors.js';
import { WEBHOOK_RULE_REASON, type WebhookRuleViolation } from './webhook-rules.js';

/** Prefix of the variable holding a named secret (or two, while it rotates). */
export const SIGNING_SECRET_PREFIX = 'AGENTHOOKS_SIGNING_SECRET_';

/** Prefix of the variable holding the origins a named secret may sign for. */
export const SIGNING_ORIGINS_PREFIX = 'AGENTHOOKS_SIGNING_ORIGINS_';

/** The name of the operator-wide default secret, used by hooks that name none. */
export const DEFAULT_SIGNING_SECRET = 'DEFAULT';

/** Standard Webhooks header names (lower case, as sent). */
export const SIGNATURE_HEADERS = {
  ID: 'webhook-id',
  TIMESTAMP: 'webhook-timestamp',
  SIGNATURE: 'webhook-signature',
} as const;

/** A secret's text prefix (Standard Webhooks, "Signature scheme"). */
const SECRET_PREFIX = 'whsec_';

/** Standard Webhooks asks for secrets of 24 to 64 random bytes. */
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;

/** Secrets one name may hold at once: the current one and, while rotating, its successor. */
const MAX_SECRETS_PER_NAME = 2;

/** A secret's name: what follows the variable prefix. */
const SECRET_NAME = /^[A-Za-z0-9_]+$/;

/** Canonical standard base64 (with padding). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The signature version prefix (Standard Webhooks `v1`, HMAC-SHA256). */
const SIGNATURE_VERSION = 'v1';

/** Prefix of a generated message id. */
const MESSAGE_ID_PREFIX = 'msg_';

/** What stands for a key wherever an object holding one is printed. */
const REDACTED = '[signing key]';

/**
 * One decoded signing key. Printing it (`inspect`, `JSON.stringify`,
 * `String`) shows `[signing key]`, never the bytes, so a log line of an
 * object that holds one cannot leak it.
 */
export class SigningKey {
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  /** Whether `other` is the same key (its bytes). */
  equals(other: SigningKey | undefined): boolean {
    return other !== undefined && this.#bytes.equals(other.#bytes);
  }

  /** Returns `v1,<base64 HMAC-SHA256 of content>`. */
  sign(content: string): string {
    return `${SIGNATURE_VERSION},${createHmac('sha256', this.#bytes).update(content, 'utf8').digest('base64')}`;
  }

  toJSON(): string {
    return REDACTED;
  }

  toString(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

/** One declared secret name: its keys and the origins it may sign for. */
export interface SigningSecret {
  readonly name: string;
  /** One key, or two while rotating; every request is signed with each. */
  readonly keys: readonly SigningKey[];
  /** Origins as `URL.origin` prints them (`https://a.example`, `http://127.0.0.1:8080`). */
  readonly origins: ReadonlySet<string>;
}

/** The declaration of one environment: the secrets by name, or why it is invalid. */
export type SigningSecrets =
  | { readonly ok: true; readonly secrets: ReadonlyMap<string, SigningSecret> }
  | { readonly ok: false; readonly error: AgentHooksError };

/** What signs one request: the keys of the secret that applies, or nothing. */
export type SigningDecision =
  | { readonly sign: false }
  | { readonly sign: true; readonly name: string; readonly keys: readonly SigningKey[] };

const NOT_SIGNED: SigningDecision = Object.freeze({ sign: false });

/** Parsed declarations of frozen environments (a snapshot's), computed once per snapshot. */
const parsed = new WeakMap<object, SigningSecrets>();

/**
 * Returns the signing secrets declared in `env`. A frozen environment (the
 * effective environment's snapshots) is parsed once; any other is parsed at
 * each call, so that a changed `process.env` is seen. Never throws.
 *
 * Invalid, as `INVALID_ENVIRONMENT` naming the variables (never a value): a
 * secret without its origins variable or the reverse, a name outside
 * `[A-Za-z0-9_]`, an empty list, more than two secrets, a secret that is not
 * `whsec_` followed by canonical base64 of 24 to 64 bytes, the same secret
 * twice, an origin that is not `http(s)://host[:port]` (no path, query,
 * fragment or credentials).
 *
 * @example
 * signingSecrets({
 *   AGENTHOOKS_SIGNING_SECRET_BILLING: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
 *   AGENTHOOKS_SIGNING_ORIGINS_BILLING: 'https://billing.example',
 * }).ok; // true
 */
export function signingSecrets(env: Readonly<Record<string, string | undefined>>): SigningSecrets {
  const frozen = Object.isFrozen(env);
  if (frozen) {
    const cached = parsed.get(env);
    if (cached !== undefined) return cached;
  }
  const result = parseSigningSecrets(env);
  if (frozen) parsed.set(env, result);
  return result;
}

function parseSigningSecrets(env: Readonly<Record<string, string | undefined>>): SigningSecrets {
  const names = new Set<string>();
  for (const variable of Object.keys(env)) {
    if (env[variable] === undefined) continue;
    if (variable.startsWith(SIGNING_SECRET_PREFIX)) {
      names.add(variable.slice(SIGNING_SECRET_PREFIX.length));
    } else if (variable.startsWith(SIGNING_ORIGINS_PREFIX)) {
      names.add(variable.slice(SIGNING_ORIGINS_PREFIX.length));
    }
  }
  const secrets = new Map<string, SigningSecret>();
  /** Each key declared so far (its bytes in hex), with the variable that declares it. */
  const seenKeys = new Map<string, string>();
  for (const name of [...names].sort()) {
    const secretVar = `${SIGNING_SECRET_PREFIX}${name}`;
    const originsVar = `${SIGNING_ORIGINS_PREFIX}${name}`;
    const fail = (what: string, variables: readonly string[]): SigningSecrets => ({
      ok: false,
      error: invalidEnvironment(
        `Invalid Agent Hook environment: signing secret ${JSON.stringify(name)}: ${what}`,
        variables,
      ),
    });
    if (!SECRET_NAME.test(name)) {
      return fail('the name must be letters, digits or _', [secretVar, originsVar]);
    }
    const secretText = env[secretVar];
    const originsText = env[originsVar];
    if (secretText === undefined)
      return fail(`${originsVar} is set without ${secretVar}`, [secretVar]);
    if (originsText === undefined) {
      return fail(`${secretVar} is set without ${originsVar}`, [originsVar]);
    }
    const texts = secretText.split(/\s+/).filter((t) => t !== '');
    if (texts.length === 0) return fail(`${secretVar} is empty`, [secretVar]);
    if (texts.length > MAX_SECRETS_PER_NAME) {
      return fail(`${secretVar} holds more than ${MAX_SECRETS_PER_NAME} secrets`, [secretVar]);
    }
    const keys: SigningKey[] = [];
    for (const [i, text] of texts.entries()) {
      const bytes = decodeSecret(text);
      if (bytes === undefined) {
        return fail(
          `secret ${i + 1} of ${secretVar} is not whsec_ followed by base64 of ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`,
          [secretVar],
        );
      }
      const key = bytes.toString('hex');
      const declaredIn = seenKeys.get(key);
      if (declaredIn === secretVar) {
        return fail(`secret ${i + 1} of ${secretVar} is declared twice`, [secretVar]);
      }
      if (declaredIn !== undefined) {
        // One key under two names would sign, for either name, to the origins of both.
        return fail(
          `secret ${i + 1} of ${secretVar} is also declared in ${declaredIn}: each key signs for one name's origins`,
          [declaredIn, secretVar],
        );
      }
      seenKeys.set(key, secretVar);
      keys.push(new SigningKey(bytes));
    }
    const origins = new Set<string>();
    const entries = originsText
      .split(',')
      .map((o) => o.trim())
      .filter((o) => o !== '');
    if (entries.length === 0) return fail(`${originsVar} is empty`, [originsVar]);
    for (const [i, entry] of entries.entries()) {
      const origin = parseOrigin(entry);
      if (origin === undefined) {
        return fail(
          `origin ${i + 1} of ${originsVar} is not http(s)://host[:port] without a path`,
          [originsVar],
        );
      }
      origins.add(origin);
    }
    secrets.set(name, Object.freeze({ name, keys: Object.freeze(keys), origins }));
  }
  return { ok: true, secrets };
}

/** The key bytes of `whsec_<base64>`, or undefined when it is not one. */
function decodeSecret(text: string): Buffer | undefined {
  if (!text.startsWith(SECRET_PREFIX)) return undefined;
  const base64 = text.slice(SECRET_PREFIX.length);
  if (!BASE64.test(base64)) return undefined;
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length < MIN_SECRET_BYTES || bytes.length > MAX_SECRET_BYTES) return undefined;
  // Canonical: unused bits of the last character zero, so one key has one text.
  if (bytes.toString('base64') !== base64) return undefined;
  return bytes;
}

/** `URL.origin` of a bare `http(s)://host[:port]` (a trailing `/` allowed), or undefined. */
function parseOrigin(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username !== '' || url.password !== '') return undefined;
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') return undefined;
  if (text.endsWith('?') || text.endsWith('#')) return undefined;
  return url.origin;
}

/**
 * The rule of a hook's signing secret, for a request to `origin` (a
 * `URL.origin`, or undefined when a relative URL has no base): a named
 * secret must be declared ({@link WEBHOOK_RULE_REASON.UNDECLARED_SIGNING_SECRET})
 * and bound to the origin ({@link WEBHOOK_RULE_REASON.SIGNING_SECRET_NOT_BOUND});
 * with no name, the `DEFAULT` secret signs when it is bound to the origin.
 * Returns the keys to sign with, nothing to sign, or the violation.
 *
 * @throws AgentHooksError `INVALID_ENVIRONMENT` when the declaration is invalid:
 *   no request may go out while nobody can tell whether it must be signed.
 */
export function checkSigningSecret(
  webhook: Pick<Webhook, 'signingSecret'>,
  origin: string | undefined,
  secrets: SigningSecrets,
): SigningDecision | WebhookRuleViolation {
  if (!secrets.ok) throw secrets.error;
  const name = webhook.signingSecret;
  if (name === '') {
    if (secrets.secrets.size === 0) return NOT_SIGNED;
    const fallback = secrets.secrets.get(DEFAULT_SIGNING_SECRET);
    if (fallback === undefined || origin === undefined || !fallback.origins.has(origin)) {
      return NOT_SIGNED;
    }
    return { sign: true, name: fallback.name, keys: fallback.keys };
  }
  const secret = secrets.secrets.get(name);
  if (secret === undefined) {
    return {
      field: 'signingSecret',
      reason: WEBHOOK_RULE_REASON.UNDECLARED_SIGNING_SECRET,
      message: `Signing secret ${JSON.stringify(name)} is not declared by the operator`,
      diagnostic: `signing secret ${JSON.stringify(name)} is not declared`,
    };
  }
  if (origin === undefined || !secret.origins.has(origin)) {
    return {
      field: 'signingSecret',
      reason: WEBHOOK_RULE_REASON.SIGNING_SECRET_NOT_BOUND,
      message: `Signing secret ${JSON.stringify(name)} is not bound to the webhook URL's origin`,
      diagnostic: `signing secret ${JSON.stringify(name)} is not bound to ${origin ?? 'a relative URL without a base'}`,
    };
  }
  return { sign: true, name, keys: secret.keys };
}

/** True when `decision` is a {@link WebhookRuleViolation}. */
export function isSigningViolation(
  decision: SigningDecision | WebhookRuleViolation,
): decision is WebhookRuleViolation {
  return 'reason' in decision;
}

/**
 * Returns a new message id (`msg_` and a random UUID without dashes). A
 * message keeps its id on a fallback resend, so a receiver can drop the
 * duplicate.
 */
export function newMessageId(): string {
  return `${MESSAGE_ID_PREFIX}${randomUUID().replaceAll('-', '')}`;
}

/**
 * Returns the `webhook-signature` value: `v1,<base64 HMAC-SHA256>` of
 * `${id}.${timestamp}.${body}` with each key, separated by spaces.
 *
 * @example
 * signature(keys, 'msg_1', 1700000000, '{"a":1}'); // 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='
 */
export function signature(
  keys: readonly SigningKey[],
  id: string,
  timestamp: number,
  body: string,
): string {
  const content = `${id}.${timestamp}.${body}`;
  return keys.map((key) => key.sign(content)).join(' ');
}

/**
 * Returns the three Standard Webhooks headers of one request, signed now:
 * `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature`.
 * `body` must be exactly the bytes sent.
 */
export function signatureHeaders(
  keys: readonly SigningKey[],
  id: string,
  body: string,
  nowMs: number = Date.now(),
): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    [SIGNATURE_HEADERS.ID]: id,
    [SIGNATURE_HEADERS.TIMESTAMP]: String(timestamp),
    [SIGNATURE_HEADERS.SIGNATURE]: signature(keys, id, timestamp, body),
  };
}

/** Variables holding the base of relative URLs, fetch's order then QStash's (`webhook.ts`). */
const RELATIVE_BASE_VARS = ['INTERNAL_APP_URL', 'APP_URL'] as const;

/**
 * The registration check of a webhook's `signingSecret` against the
 * declaration in `env`: nothing to check when it names none (the `DEFAULT`
 * secret signs only where it is bound); otherwise the secret must be
 * declared and bound to the URL's origin, for a relative URL to the origin
 * of each base it may be resolved against (`INTERNAL_APP_URL`, `APP_URL`,
 * whichever are set; none set is not bound).
 *
 * @throws AgentHooksError `INVALID_ENVIRONMENT` when a secret is named and the declaration is invalid.
 */
export function checkSigningRegistration(
  webhook: Pick<Webhook, 'signingSecret' | 'url'>,
  env: Readonly<Record<string, string | undefined>>,
): WebhookRuleViolation | undefined {
  if (webhook.signingSecret === '') return undefined;
  const secrets = signingSecrets(env);
  const origins: (string | undefined)[] = [];
  if (webhook.url.startsWith('/')) {
    for (const name of RELATIVE_BASE_VARS) {
      const base = env[name];
      if (base === undefined || base === '') continue;
      origins.push(originOf(webhook.url, base));
    }
    if (origins.length === 0) origins.push(undefined);
  } else {
    origins.push(originOf(webhook.url));
  }
  for (const origin of origins) {
    const decision = checkSigningSecret(webhook, origin, secrets);
    if (isSigningViolation(decision)) return decision;
  }
  return undefined;
}

/** `URL.origin` of `url` (against `base`), or undefined when it does not parse. */
function originOf(url: string, base?: string): string | undefined {
  try {
    return new URL(url, base).origin;
  } catch {
    return undefined;
  }
}
