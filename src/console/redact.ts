/**
 * @module Redaction for the admin console: everything a view shows passes
 * through here first. URLs lose their password and query values, header
 * values keep only `${VAR}` templates and an auth scheme word, and values
 * of secret-looking keys are replaced whole. The rule fails closed: a key
 * the console does not know but that looks like a secret is redacted.
 */
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  type Hook,
  ModifyPoint,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { hookTypeLiteral } from '../delivery/event-json.js';
import type { ConfigEntry, HookView } from './views.js';

/** What a redacted value shows. */
export const REDACTED = '[redacted]';

/** Keys whose values are secrets (config keys and environment variable names). */
const SECRET_KEY =
  /token|secret|password|passwd|credential|private|signing|api[-_]?key|(^|[_-])key$/i;

/** Values that are secrets whatever their key: Standard Webhooks signing secrets. */
const SECRET_VALUE = /^\s*whsec_/i;

/** Keys that name a file holding a secret: the path is shown, not the file. */
const FILE_KEY = /file$|path$/i;

/** A `${NAME}` template reference. */
const TEMPLATE = /\$\{[A-Za-z_][A-Za-z0-9_]*\}/g;

/** Literal header text that is not a secret: an auth scheme and spaces. */
const SCHEME_ONLY = /^\s*(?:bearer|basic|token|digest)?\s*$/i;

/** Whether the value of `key` is a secret. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key) && !FILE_KEY.test(key);
}

/**
 * Returns `text` with the password of a URL and the values of its query
 * replaced; text that is not a URL with a scheme is returned unchanged.
 *
 * @example redactUrl('postgres://app:pw@db/x?password=pw') // 'postgres://app:[redacted]@db/x?password=[redacted]'
 */
export function redactUrl(text: string): string {
  // An application-relative URL (`/hooks?key=...`, resolved against the
  // operator's base URL): its query values go as an absolute URL's do.
  if (text.startsWith('/') && !text.startsWith('//')) return redactRelative(text);
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return text;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    // An unparsable URL may hold anything.
    return REDACTED;
  }
  if (url.password !== '') url.password = REDACTED;
  const query = [...url.searchParams.keys()];
  if (query.length > 0) {
    url.search = query.map((k) => `${encodeURIComponent(k)}=${REDACTED}`).join('&');
  }
  // URL encodes the brackets of the marker; show it as written.
  return url.toString().replaceAll(encodeURIComponent(REDACTED), REDACTED);
}

/** A path with its query values replaced, as {@link redactUrl} does for an absolute URL. */
function redactRelative(text: string): string {
  const at = text.indexOf('?');
  if (at < 0) return text;
  const hash = text.indexOf('#', at);
  const query = text.slice(at + 1, hash < 0 ? undefined : hash);
  const keys = query
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => pair.split('=')[0] as string);
  const redacted = keys.map((key) => `${key}=${REDACTED}`).join('&');
  return `${text.slice(0, at)}?${redacted}${hash < 0 ? '' : text.slice(hash)}`;
}

/** A URL inside free text. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi;

/** Returns `text` with every URL in it redacted as {@link redactUrl} does (for error messages). */
export function redactText(text: string): string {
  return text.replace(URL_IN_TEXT, (url) => redactUrl(url));
}

/** Returns a header value with every literal part other than an auth scheme redacted. */
export function redactHeaderValue(value: string): string {
  const literal = value.replace(TEMPLATE, '');
  return SCHEME_ONLY.test(literal) ? value : REDACTED;
}

/** Returns the shown value of a config or environment entry. */
export function redactValue(key: string, value: string): string {
  if (isSecretKey(key) || SECRET_VALUE.test(value)) return value === '' ? '' : REDACTED;
  return redactUrl(value);
}

/** Flattens a config object into sorted, redacted entries (`connections.maxConnections`). */
export function configEntries(config: object, prefix = ''): ConfigEntry[] {
  const entries: ConfigEntry[] = [];
  for (const [key, value] of Object.entries(config)) {
    const name = `${prefix}${key}`;
    if (value === undefined) continue;
    if (isSecretKey(key)) {
      entries.push({ key: name, value: REDACTED });
    } else if (Array.isArray(value)) {
      entries.push({ key: name, value: value.map((v) => shown(key, v)).join(', ') });
    } else if (value !== null && typeof value === 'object' && !('text' in value)) {
      entries.push(...configEntries(value, `${name}.`));
    } else {
      entries.push({ key: name, value: shown(key, value) });
    }
  }
  return entries.sort((a, b) => a.key.localeCompare(b.key));
}

/** One config value as text: a listen address by its text, secrets redacted. */
function shown(key: string, value: unknown): string {
  if (value !== null && typeof value === 'object' && 'text' in value) {
    return String((value as { text: unknown }).text);
  }
  return redactValue(key, String(value));
}

/** The console's view of a hook at `position` (from 1). */
export function hookView(hook: Hook, position: number, source: string): HookView {
  const webhook = hook.webhook;
  return {
    position,
    id: hook.id,
    type:
      hook.type === HookType.UNSPECIFIED
        ? `MODIFY_POINT_${ModifyPoint[hook.point] ?? 'UNSPECIFIED'}`
        : hookTypeLiteral(hook.type),
    source,
    plugin: hook.plugin === '' ? undefined : hook.plugin,
    matcher: hook.matcher,
    handler: hook.handler,
    url: webhook === undefined ? '' : redactUrl(webhook.url),
    // Unset enums are shown as the default they stand for (the spec's defaults).
    delivery: webhook === undefined ? '' : literal(Delivery, webhook.delivery, 'fetch'),
    responseHandling:
      webhook === undefined ? '' : literal(ResponseHandling, webhook.responseHandling, 'ignore'),
    onError: webhook === undefined ? '' : literal(OnError, webhook.onError, 'continue'),
    headers:
      webhook === undefined
        ? []
        : Object.entries(webhook.headers)
            .map(([key, value]) => ({ key, value: redactHeaderValue(value) }))
            .sort((a, b) => a.key.localeCompare(b.key)),
    signingSecret: webhook?.signingSecret ?? '',
  };
}

/** The lower-case name of an enum value; `unset` (value 0) shows as the default it stands for. */
function literal(names: Record<number, string>, value: number, unset: string): string {
  return value === 0 ? unset : (names[value] ?? 'unknown').toLowerCase();
}
