/**
 * @module The rules a webhook must follow to be sent, each written once and
 * applied in two places: by registration (`hooks/validate.ts`), on the
 * webhook as the caller sent it and the store keeps it, `${VAR}` templates
 * unresolved; and by delivery (`webhook.ts`, `control.ts`), before anything
 * is sent. So a webhook registration accepted fails at send time only
 * because of the effective environment: a template variable that is unset
 * or holds a character a header cannot carry, a relative URL without
 * `INTERNAL_APP_URL`/`APP_URL`, or a host that resolves to a denied address.
 *
 * Each check returns a {@link WebhookRuleViolation}, or `undefined` when the
 * rule holds; none throws. A violation carries a stable reason from
 * {@link WEBHOOK_RULE_REASON} (the `ErrorInfo.reason` of a refused
 * registration, and the `rule` of a delivery failure), the offending field's
 * path under the webhook, the registration message (the upstream wording
 * where the reference system has one, upstream contract §1.7) and the
 * delivery diagnostic. Neither text ever holds a header value, nor more of
 * a URL than its host.
 */
import { Delivery, ResponseHandling, type Webhook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { InvalidArgumentError } from '../errors.js';
import type { DestinationPolicy } from './destination.js';

/**
 * Reasons of the webhook rules. Reasons are stable; clients match on them,
 * not on the message.
 *
 * @example
 * if (hasReason(e, WEBHOOK_RULE_REASON.FORBIDDEN_HEADER)) { ... }
 */
export const WEBHOOK_RULE_REASON = {
  /** The webhook URL is not HTTP(S) or an application-relative path, or has credentials. */
  INVALID_WEBHOOK_URL: 'INVALID_WEBHOOK_URL',
  /** The webhook URL is longer than the limit (8 KiB, UTF-8). */
  WEBHOOK_URL_TOO_LONG: 'WEBHOOK_URL_TOO_LONG',
  /** The webhook URL's host is a denied address or name (unspecified, link-local, cloud metadata, `--webhook-deny`). */
  WEBHOOK_DESTINATION_DENIED: 'WEBHOOK_DESTINATION_DENIED',
  /** The webhook timeout is not in (0, 2147483.647] seconds. */
  INVALID_WEBHOOK_TIMEOUT: 'INVALID_WEBHOOK_TIMEOUT',
  /** The webhook has more headers than the limit (default 64). */
  TOO_MANY_HEADERS: 'TOO_MANY_HEADERS',
  /** A webhook header name is not an HTTP token. */
  INVALID_HEADER_NAME: 'INVALID_HEADER_NAME',
  /** A webhook header name is one agenthooks or the transport owns. */
  FORBIDDEN_HEADER: 'FORBIDDEN_HEADER',
  /** Two webhook header names differ only in case. */
  DUPLICATE_HEADER: 'DUPLICATE_HEADER',
  /** A webhook header value holds CR, LF, NUL, another control character but HTAB, or a character outside Latin-1. */
  INVALID_HEADER_VALUE: 'INVALID_HEADER_VALUE',
  /** A webhook header value has a `${` that is not a template of a variable in `allowedEnvVars`, or one left unresolved. */
  INVALID_HEADER_TEMPLATE: 'INVALID_HEADER_TEMPLATE',
  /** A header's name and value together are larger than the limit (default 8 KiB, UTF-8). */
  HEADER_TOO_LARGE: 'HEADER_TOO_LARGE',
  /** An `allowedEnvVars` entry is not an environment variable name. */
  INVALID_ENV_VAR_NAME: 'INVALID_ENV_VAR_NAME',
  /** A control hook (`responseHandling: toolCall`) uses QStash delivery. */
  CONTROL_REQUIRES_FETCH: 'CONTROL_REQUIRES_FETCH',
  /** The webhook's `signingSecret` names no secret the operator declared. */
  UNDECLARED_SIGNING_SECRET: 'UNDECLARED_SIGNING_SECRET',
  /** The webhook's `signingSecret` is not bound to the origin of its URL. */
  SIGNING_SECRET_NOT_BOUND: 'SIGNING_SECRET_NOT_BOUND',
} as const;

/** One of the {@link WEBHOOK_RULE_REASON} values. */
export type WebhookRuleReason = (typeof WEBHOOK_RULE_REASON)[keyof typeof WEBHOOK_RULE_REASON];

/** A webhook that breaks a rule: which field, why, and what to say at registration and at delivery. */
export interface WebhookRuleViolation {
  /** JSON (camelCase) path of the field under the webhook, such as `url` or `headers["Host"]`. */
  readonly field: string;
  /** Stable reason. */
  readonly reason: WebhookRuleReason;
  /** Message of a refused registration; the upstream wording where the reference system has one. */
  readonly message: string;
  /** Diagnostic of a refused delivery, after `Hook HTTP request failed: configuration: `. */
  readonly diagnostic: string;
}

/** Limits on a webhook's headers, applied at registration (the operator's policy). */
export interface HeaderLimits {
  /** Most headers one webhook may set. */
  readonly maxHeaders: number;
  /** Largest header, its name and value together, in UTF-8 bytes. */
  readonly maxHeaderBytes: number;
}

/** Default {@link HeaderLimits}: 64 headers of at most 8 KiB each. */
export const DEFAULT_HEADER_LIMITS: HeaderLimits = Object.freeze({
  maxHeaders: 64,
  maxHeaderBytes: 8_192,
});

/**
 * Size limits on a webhook, applied at registration only: a hook stored
 * before a limit existed (or under a larger one) is still delivered.
 */
export interface WebhookLimits extends HeaderLimits {
  /** Longest URL, as configured, in UTF-8 bytes. */
  readonly maxUrlBytes: number;
}

/** Longest webhook URL by default, in UTF-8 bytes (documented on `Webhook.url` in the proto). */
export const MAX_WEBHOOK_URL_BYTES = 8_192;

/** Default {@link WebhookLimits}: 8 KiB URLs, 64 headers of at most 8 KiB each. */
export const DEFAULT_WEBHOOK_LIMITS: WebhookLimits = Object.freeze({
  maxUrlBytes: MAX_WEBHOOK_URL_BYTES,
  ...DEFAULT_HEADER_LIMITS,
});

/** What {@link checkWebhook} checks beyond the rules every webhook follows. */
export interface WebhookCheckOptions {
  /** Checked against the host of an absolute URL. Absent: not checked. */
  readonly destinations?: DestinationPolicy | undefined;
  /** Limits on the URL and the headers. Absent: none. */
  readonly limits?: WebhookLimits | undefined;
}

/** Largest webhook timeout in seconds: the largest `setTimeout` delay, 2^31 - 1 ms. */
export const MAX_WEBHOOK_TIMEOUT_SECONDS = 2_147_483.647;

/** Registration messages; the upstream wording where the reference system has one. */
const MESSAGE = {
  INVALID_WEBHOOK_URL:
    'Webhook URL must be HTTP(S) or an application-relative path without credentials',
  WEBHOOK_DESTINATION_DENIED:
    'Webhook URL points at a denied destination (unspecified, link-local, cloud metadata or --webhook-deny)',
  INVALID_WEBHOOK_TIMEOUT: 'Webhook timeout must be a positive number of seconds up to 2147483.647',
  INVALID_HEADER_NAME: 'Invalid webhook header name',
  HEADER_LINE_BREAK: 'Webhook header values cannot contain CR, LF or NUL',
  INVALID_HEADER_VALUE:
    'Webhook header values can only hold tabs and characters from U+0020 to U+00FF but DEL',
  INVALID_HEADER_TEMPLATE:
    'Webhook header values can only use ${VAR} templates of variables listed in allowedEnvVars',
  UNRESOLVED_HEADER_TEMPLATE: 'Webhook header value has a ${VAR} template left unresolved',
  INVALID_ENV_VAR_NAME: 'Invalid allowedEnvVars entry',
  CONTROL_REQUIRES_FETCH: 'toolCall response handling requires fetch delivery',
} as const;

/** Delivery diagnostics that name no header. */
const DIAGNOSTIC = {
  URL_INVALID: 'URL is invalid',
  URL_BACKSLASH: 'URL contains a backslash',
  URL_PROTOCOL_RELATIVE: 'URL is protocol-relative',
  URL_NOT_HTTP: 'URL is not HTTP(S)',
  URL_CREDENTIALS: 'URL has credentials',
  TIMEOUT: 'timeout out of range',
  TOO_MANY_HEADERS: 'too many headers',
  INVALID_HEADER_NAME: 'invalid header name',
  INVALID_ENV_VAR_NAME: 'invalid allowedEnvVars entry',
  CONTROL_REQUIRES_FETCH: 'control cannot use qstash',
} as const;

/** Schemes a webhook URL may use. */
const HTTP_PROTOCOLS: ReadonlySet<string> = new Set(['http:', 'https:']);

/** A C0 control character or DEL, which no webhook URL may hold. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Start of an application-relative URL. */
const RELATIVE_PREFIX = '/';

/** Start of a protocol-relative URL, which is not application-relative. */
const PROTOCOL_RELATIVE_PREFIX = '//';

/** An HTTP field name is a `token` (RFC 9110 §5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Header names a webhook may not set, as the reference system refuses them at
 * send time (upstream contract §4.1): they belong to the HTTP transport, to
 * the browser-only `Sec-` space, or to QStash's own `Upstash-` options. And
 * two the HTTP client (undici, the reference's too) fails every request of:
 * `keep-alive` and `expect`, refused here rather than at each delivery.
 */
const FORBIDDEN_HEADER_NAME =
  /^(?:host|content-length|connection|transfer-encoding|trailer|upgrade|keep-alive|expect|proxy-.*|sec-.*|upstash-.*)$/i;

/**
 * A character a header value cannot hold: CR, LF, NUL and every other
 * control character but HTAB, DEL, and anything outside Latin-1 (RFC 9110
 * §5.5 field-value; undici refuses the rest).
 */
const INVALID_HEADER_VALUE_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

/** CR, LF and NUL, which would split or truncate a header line (upstream contract §4.1). */
const LINE_BREAK_OR_NUL = /[\r\n\0]/;

/** An environment variable name (upstream `agentHook.ts`: `/^[A-Z_]\w*$/i`). */
const ENV_VAR_NAME_SOURCE = '[A-Za-z_][A-Za-z0-9_]*';

const ENV_VAR_NAME = new RegExp(`^${ENV_VAR_NAME_SOURCE}$`);

/** A `${VAR}` template in a header value (upstream contract §4.1). */
const TEMPLATE = new RegExp(`\\$\\{(${ENV_VAR_NAME_SOURCE})\\}`, 'g');

/** What opens a template; any left after resolution is an error. */
const TEMPLATE_OPENER = '${';

/**
 * Stands in for a valid template when a value is checked for stray openers:
 * neither `$` nor `{`, so it cannot form a `${` with its neighbours.
 */
const TEMPLATE_STAND_IN = '_';

/**
 * Returns the first rule `url` breaks: it must be non-empty, without
 * backslashes or control characters, and either an application-relative path (`/` but not `//`)
 * or an absolute `http:`/`https:` URL without username or password
 * (upstream `agentHook.ts`). Environment hooks use the same rule.
 *
 * @example
 * checkWebhookUrl('https://hooks.example/in'); // undefined
 * checkWebhookUrl('ftp://hooks.example/in')?.reason; // 'INVALID_WEBHOOK_URL'
 */
export function checkWebhookUrl(url: string): WebhookRuleViolation | undefined {
  if (url === '') return urlViolation(DIAGNOSTIC.URL_INVALID);
  if (url.includes('\\')) return urlViolation(DIAGNOSTIC.URL_BACKSLASH);
  // The URL parser drops tabs and newlines anywhere and controls at the ends:
  // `/\t/other.example/` would pass as relative and resolve to another host.
  if (CONTROL_CHARACTER.test(url)) return urlViolation(DIAGNOSTIC.URL_INVALID);
  if (url.startsWith(RELATIVE_PREFIX)) {
    return url.startsWith(PROTOCOL_RELATIVE_PREFIX)
      ? urlViolation(DIAGNOSTIC.URL_PROTOCOL_RELATIVE)
      : undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (e: unknown) {
    // Only a TypeError ("Invalid URL") means the string does not parse.
    if (e instanceof TypeError) return urlViolation(DIAGNOSTIC.URL_INVALID);
    throw e;
  }
  if (!HTTP_PROTOCOLS.has(parsed.protocol)) return urlViolation(DIAGNOSTIC.URL_NOT_HTTP);
  if (parsed.username !== '' || parsed.password !== '') {
    return urlViolation(DIAGNOSTIC.URL_CREDENTIALS);
  }
  return undefined;
}

/**
 * Returns whether `url` is longer than `maxBytes` in UTF-8. Registration
 * checks it after {@link checkWebhookUrl}; delivery does not, so that a
 * hook stored before the limit keeps working.
 *
 * @example
 * checkWebhookUrlSize('https://hooks.example/in', 8192); // undefined
 */
export function checkWebhookUrlSize(
  url: string,
  maxBytes: number,
): WebhookRuleViolation | undefined {
  if (Buffer.byteLength(url, 'utf8') <= maxBytes) return undefined;
  return {
    field: 'url',
    reason: WEBHOOK_RULE_REASON.WEBHOOK_URL_TOO_LONG,
    message: `Webhook URL can be at most ${maxBytes} bytes (UTF-8)`,
    diagnostic: 'URL is too long',
  };
}

/**
 * Returns true when `url` follows {@link checkWebhookUrl}'s rule.
 *
 * @example isValidWebhookUrl('/api/hooks'); // true
 */
export function isValidWebhookUrl(url: string): boolean {
  return checkWebhookUrl(url) === undefined;
}

/**
 * Returns whether `url`'s host is a destination `policy` denies, for an
 * absolute URL that follows {@link checkWebhookUrl}: a denied IP literal or
 * host name is refused up front. An application-relative URL's host is
 * only known at send time, where the sender checks every connection.
 */
export function checkWebhookDestination(
  url: string,
  policy: DestinationPolicy,
): WebhookRuleViolation | undefined {
  if (url.startsWith(RELATIVE_PREFIX)) return undefined;
  const host = new URL(url).hostname;
  if (policy.check(host).allowed) return undefined;
  return {
    field: 'url',
    reason: WEBHOOK_RULE_REASON.WEBHOOK_DESTINATION_DENIED,
    message: MESSAGE.WEBHOOK_DESTINATION_DENIED,
    diagnostic: `${host} is denied`,
  };
}

/**
 * Returns whether a webhook timeout in seconds is out of range: set, it must
 * be finite, above 0 and at most {@link MAX_WEBHOOK_TIMEOUT_SECONDS}.
 */
export function checkWebhookTimeout(timeout: number | undefined): WebhookRuleViolation | undefined {
  if (
    timeout === undefined ||
    (Number.isFinite(timeout) && timeout > 0 && timeout <= MAX_WEBHOOK_TIMEOUT_SECONDS)
  ) {
    return undefined;
  }
  return {
    field: 'timeout',
    reason: WEBHOOK_RULE_REASON.INVALID_WEBHOOK_TIMEOUT,
    message: MESSAGE.INVALID_WEBHOOK_TIMEOUT,
    diagnostic: DIAGNOSTIC.TIMEOUT,
  };
}

/**
 * Returns true when a webhook may not set a header of this name: one of
 * `host, content-length, connection, transfer-encoding, trailer, upgrade,
 * keep-alive, expect`, or
 * any `proxy-*`, `sec-*` or `upstash-*` name, in any case.
 *
 * @example
 * isForbiddenHeaderName('Upstash-Retries'); // true
 * isForbiddenHeaderName('Authorization'); // false
 */
export function isForbiddenHeaderName(name: string): boolean {
  return FORBIDDEN_HEADER_NAME.test(name);
}

/**
 * Returns true when `value` can be sent as a header value: tabs and
 * characters U+0020 to U+00FF, DEL excepted.
 *
 * @example isValidHeaderValue('Bearer t'); // true
 */
export function isValidHeaderValue(value: string): boolean {
  return !INVALID_HEADER_VALUE_CHAR.test(value);
}

/**
 * Returns the first rule a webhook's headers break, as configured (templates
 * unresolved): with `limits`, the count first; then, header by header, the
 * name (an HTTP token, not forbidden, not a case-insensitive duplicate of an
 * earlier one), the value's characters, its templates (every `${` opens a
 * `${VAR}` template of a variable in `allowedEnvVars`), and with `limits`
 * the size. Delivery runs it before resolving templates, without limits.
 *
 * @example
 * checkWebhookHeaders({ headers: { Host: 'x' }, allowedEnvVars: [] })?.reason; // 'FORBIDDEN_HEADER'
 */
export function checkWebhookHeaders(
  webhook: Pick<Webhook, 'headers' | 'allowedEnvVars'>,
  limits?: HeaderLimits,
): WebhookRuleViolation | undefined {
  const headers = Object.entries(webhook.headers);
  if (limits !== undefined && headers.length > limits.maxHeaders) {
    return {
      field: 'headers',
      reason: WEBHOOK_RULE_REASON.TOO_MANY_HEADERS,
      message: `A webhook can set at most ${limits.maxHeaders} headers`,
      diagnostic: DIAGNOSTIC.TOO_MANY_HEADERS,
    };
  }
  const allowed = new Set(webhook.allowedEnvVars);
  const seen = new Set<string>();
  for (const [name, template] of headers) {
    const violation =
      checkHeaderName(name, seen) ??
      checkHeaderValue(name, template) ??
      checkHeaderTemplate(name, template, allowed);
    if (violation !== undefined) return violation;
    if (
      limits !== undefined &&
      Buffer.byteLength(name, 'utf8') + Buffer.byteLength(template, 'utf8') > limits.maxHeaderBytes
    ) {
      return headerViolation(
        name,
        WEBHOOK_RULE_REASON.HEADER_TOO_LARGE,
        `A webhook header's name and value can be at most ${limits.maxHeaderBytes} bytes`,
        `header ${name.toLowerCase()} is too large`,
      );
    }
  }
  return undefined;
}

/**
 * Replaces the `${VAR}` templates of a header value whose variable is in
 * `allowed` and set in `env`; any other template stays as written. The
 * result holds secrets: never log it.
 *
 * @example
 * resolveHeaderTemplate('Bearer ${TOKEN}', new Set(['TOKEN']), { TOKEN: 't' }); // 'Bearer t'
 */
export function resolveHeaderTemplate(
  template: string,
  allowed: ReadonlySet<string>,
  env: Readonly<Record<string, string | undefined>>,
): string {
  return template.replace(TEMPLATE, (match, variable: string) => {
    const replacement = allowed.has(variable) ? env[variable] : undefined;
    return replacement ?? match;
  });
}

/**
 * Returns the first rule a resolved header value breaks: no template may be
 * left (its variable unset, or a value that holds `${`), and the value must
 * be sendable ({@link isValidHeaderValue}). `name` is the configured name.
 */
export function checkResolvedHeader(name: string, value: string): WebhookRuleViolation | undefined {
  if (value.includes(TEMPLATE_OPENER)) {
    return headerViolation(
      name,
      WEBHOOK_RULE_REASON.INVALID_HEADER_TEMPLATE,
      MESSAGE.UNRESOLVED_HEADER_TEMPLATE,
      `header ${name.toLowerCase()} has an unresolved template`,
    );
  }
  return checkHeaderValue(name, value);
}

/**
 * Returns true for an environment variable name: a letter or `_`, then
 * letters, digits or `_` (the `allowedEnvVars` rule, upstream `agentHook.ts`).
 *
 * @example isEnvVarName('HOOK_TOKEN'); // true
 */
export function isEnvVarName(name: string): boolean {
  return ENV_VAR_NAME.test(name);
}

/** Returns the first `allowedEnvVars` entry that is not an environment variable name. */
export function checkAllowedEnvVars(names: readonly string[]): WebhookRuleViolation | undefined {
  const i = names.findIndex((name) => !isEnvVarName(name));
  if (i < 0) return undefined;
  return {
    field: `allowedEnvVars[${i}]`,
    reason: WEBHOOK_RULE_REASON.INVALID_ENV_VAR_NAME,
    message: MESSAGE.INVALID_ENV_VAR_NAME,
    diagnostic: DIAGNOSTIC.INVALID_ENV_VAR_NAME,
  };
}

/**
 * Returns whether a control (`responseHandling: toolCall`) uses QStash,
 * which cannot carry the receiver's answer back: a control is a direct fetch.
 */
export function checkControlDelivery(
  webhook: Pick<Webhook, 'responseHandling' | 'delivery'>,
): WebhookRuleViolation | undefined {
  if (
    webhook.responseHandling !== ResponseHandling.TOOL_CALL ||
    webhook.delivery !== Delivery.QSTASH
  ) {
    return undefined;
  }
  return {
    field: 'delivery',
    reason: WEBHOOK_RULE_REASON.CONTROL_REQUIRES_FETCH,
    message: MESSAGE.CONTROL_REQUIRES_FETCH,
    diagnostic: DIAGNOSTIC.CONTROL_REQUIRES_FETCH,
  };
}

/**
 * Returns the first rule a webhook breaks, as registration checks it, in
 * this order: `url`, its size (with `options.limits`), its destination (with `options.destinations`),
 * `timeout`, `headers` ({@link checkWebhookHeaders}, with `options.limits`)
 * and `allowedEnvVars`. The control rules depend on the hook too, and are
 * the caller's to check ({@link checkControlDelivery}).
 *
 * @example
 * const violation = checkWebhook(hook.webhook, { limits: DEFAULT_WEBHOOK_LIMITS });
 * if (violation !== undefined) throw webhookRuleError(violation, 'hooks[0].webhook');
 */
export function checkWebhook(
  webhook: Webhook,
  options: WebhookCheckOptions = {},
): WebhookRuleViolation | undefined {
  const urlViolation = checkWebhookUrl(webhook.url);
  if (urlViolation !== undefined) return urlViolation;
  return (
    (options.limits === undefined
      ? undefined
      : checkWebhookUrlSize(webhook.url, options.limits.maxUrlBytes)) ??
    (options.destinations === undefined
      ? undefined
      : checkWebhookDestination(webhook.url, options.destinations)) ??
    checkWebhookTimeout(webhook.timeout) ??
    checkWebhookHeaders(webhook, options.limits) ??
    checkAllowedEnvVars(webhook.allowedEnvVars)
  );
}

/**
 * Returns the registration error of a violation: an InvalidArgumentError
 * whose field is `webhookPath` joined with the violation's field.
 *
 * @example
 * webhookRuleError(violation, 'hooks[2].webhook').field; // 'hooks[2].webhook.url'
 */
export function webhookRuleError(
  violation: WebhookRuleViolation,
  webhookPath: string,
): InvalidArgumentError {
  return new InvalidArgumentError(
    `${webhookPath}.${violation.field}`,
    violation.reason,
    violation.message,
  );
}

function urlViolation(diagnostic: string): WebhookRuleViolation {
  return {
    field: 'url',
    reason: WEBHOOK_RULE_REASON.INVALID_WEBHOOK_URL,
    message: MESSAGE.INVALID_WEBHOOK_URL,
    diagnostic,
  };
}

function headerViolation(
  name: string,
  reason: WebhookRuleReason,
  message: string,
  diagnostic: string,
): WebhookRuleViolation {
  return { field: `headers[${JSON.stringify(name)}]`, reason, message, diagnostic };
}

/** A header name: an HTTP token, not forbidden, not already in `seen` (lower-cased; added to it). */
function checkHeaderName(name: string, seen: Set<string>): WebhookRuleViolation | undefined {
  if (!HEADER_NAME.test(name)) {
    return headerViolation(
      name,
      WEBHOOK_RULE_REASON.INVALID_HEADER_NAME,
      MESSAGE.INVALID_HEADER_NAME,
      DIAGNOSTIC.INVALID_HEADER_NAME,
    );
  }
  const lower = name.toLowerCase();
  if (isForbiddenHeaderName(name)) {
    return headerViolation(
      name,
      WEBHOOK_RULE_REASON.FORBIDDEN_HEADER,
      `Webhook header ${name} is not allowed`,
      `forbidden header ${lower}`,
    );
  }
  if (seen.has(lower)) {
    return headerViolation(
      name,
      WEBHOOK_RULE_REASON.DUPLICATE_HEADER,
      `Webhook header ${name} is set twice (header names are case-insensitive)`,
      `duplicate header ${lower}`,
    );
  }
  seen.add(lower);
  return undefined;
}

/** A header value's characters; CR, LF and NUL keep their own message. */
function checkHeaderValue(name: string, value: string): WebhookRuleViolation | undefined {
  if (isValidHeaderValue(value)) return undefined;
  return headerViolation(
    name,
    WEBHOOK_RULE_REASON.INVALID_HEADER_VALUE,
    LINE_BREAK_OR_NUL.test(value) ? MESSAGE.HEADER_LINE_BREAK : MESSAGE.INVALID_HEADER_VALUE,
    `header ${name.toLowerCase()} has an invalid value`,
  );
}

/**
 * A configured value's templates: every `${` must open a `${VAR}` template
 * of a variable in `allowed`. Any other `${` is left as written at send
 * time, where it is refused whatever the environment holds.
 */
function checkHeaderTemplate(
  name: string,
  template: string,
  allowed: ReadonlySet<string>,
): WebhookRuleViolation | undefined {
  if (!template.includes(TEMPLATE_OPENER)) return undefined;
  const stray = template
    .replace(TEMPLATE, (match, variable: string) =>
      allowed.has(variable) ? TEMPLATE_STAND_IN : match,
    )
    .includes(TEMPLATE_OPENER);
  if (!stray) return undefined;
  return headerViolation(
    name,
    WEBHOOK_RULE_REASON.INVALID_HEADER_TEMPLATE,
    MESSAGE.INVALID_HEADER_TEMPLATE,
    `header ${name.toLowerCase()} has an unresolved template`,
  );
}
