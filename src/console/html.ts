/**
 * @module Escaped HTML for the admin console. {@link html} is a tagged
 * template whose every interpolated value is escaped, unless it is already
 * {@link SafeHtml} made by `html` itself: there is no other way to build a
 * `SafeHtml`, so an unescaped caller string (hook id, URL, reason) cannot be
 * written into a page by accident. Arrays are joined, each element escaped
 * the same way; `undefined`, `null` and `false` write nothing.
 */

/** Characters escaped in text and in double-quoted attribute values (OWASP XSS rule #1 and #2). */
const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** The characters of {@link ESCAPES}. */
const SPECIAL = /[&<>"'`]/g;

/** A value `html` may interpolate. */
export type HtmlValue =
  | SafeHtml
  | string
  | number
  | bigint
  | boolean
  | null
  | undefined
  | HtmlValue[];

/** A piece of HTML that `html` made: its text is safe to write as it is. */
export class SafeHtml {
  readonly #text: string;

  /** Only {@link html} and {@link joinHtml} make these (the token is module-private). */
  constructor(token: symbol, text: string) {
    if (token !== MAKER) throw new TypeError('SafeHtml is made by the html template tag only');
    this.#text = text;
  }

  /** The HTML text. */
  toString(): string {
    return this.#text;
  }
}

/** The private token of {@link SafeHtml}'s constructor. */
const MAKER = Symbol('SafeHtml');

/**
 * Escapes `text` for HTML text and double-quoted attribute values.
 *
 * @example escapeHtml('<script>') // '&lt;script&gt;'
 */
export function escapeHtml(text: string): string {
  return text.replace(SPECIAL, (c) => ESCAPES[c] as string);
}

/**
 * Builds HTML from a template, escaping every interpolated value.
 *
 * @example
 * html`<td>${hook.id}</td>` // a hook id of `<b>` renders as the text `<b>`
 */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let text = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    text += render(values[i]) + (strings[i + 1] ?? '');
  }
  return new SafeHtml(MAKER, text);
}

/** Joins pieces of HTML (each escaped unless already safe) with nothing between them. */
export function joinHtml(values: readonly HtmlValue[]): SafeHtml {
  return new SafeHtml(MAKER, values.map(render).join(''));
}

function render(value: HtmlValue): string {
  if (value instanceof SafeHtml) return value.toString();
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === undefined || value === null || value === false) return '';
  return escapeHtml(String(value));
}
