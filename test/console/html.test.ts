/**
 * The console's escaping and redaction: every value the `html` tag
 * interpolates is escaped unless `html` made it; secrets never reach a view.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { html, joinHtml, SafeHtml } from '../../src/console/html.js';
import {
  configEntries,
  REDACTED,
  redactHeaderValue,
  redactText,
  redactUrl,
  redactValue,
} from '../../src/console/redact.js';

describe('the html tag', () => {
  it('escapes every interpolated string, in text and in attributes', () => {
    const id = `"><script>alert('x')</script>&\``;
    expect(html`<td title="${id}">${id}</td>`.toString()).toBe(
      '<td title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&#96;">&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&#96;</td>',
    );
  });

  it('keeps what html made, escapes arrays element by element, and writes nothing for absent values', () => {
    const inner = html`<b>${'<i>'}</b>`;
    expect(
      html`<p>${inner}${['<a>', html`<br>`]}${undefined}${null}${false}${0}</p>`.toString(),
    ).toBe('<p><b>&lt;i&gt;</b>&lt;a&gt;<br>0</p>');
    expect(joinHtml(['<x>', inner]).toString()).toBe('&lt;x&gt;<b>&lt;i&gt;</b>');
  });

  it('cannot be handed raw HTML: SafeHtml is made by the tag only', () => {
    expect(() => new SafeHtml(Symbol('SafeHtml'), '<script>')).toThrow(TypeError);
  });

  it('never lets a tag, quote or ampersand of any string through', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const out = html`${s}`.toString();
        expect(out).not.toMatch(/[<>"'`]/);
        expect(html`<td class="${s}">`.toString()).toBe(`<td class="${out}">`);
        expect(out.replace(/&(amp|lt|gt|quot|#39|#96);/g, '')).not.toContain('&');
      }),
    );
  });
});

describe('redaction', () => {
  it('removes passwords and query values from URLs', () => {
    expect(redactUrl('postgres://app:s3cret@db:5432/agent?sslmode=require&password=p')).toBe(
      `postgres://app:${REDACTED}@db:5432/agent?sslmode=${REDACTED}&password=${REDACTED}`,
    );
    expect(redactUrl('https://hooks.example.com/in')).toBe('https://hooks.example.com/in');
    expect(redactUrl('/var/lib/agenthooks.db')).toBe('/var/lib/agenthooks.db');
  });

  it('removes query values from application-relative webhook URLs as from absolute ones', () => {
    expect(redactUrl('/rel?q=RELQ&token=t0k&flag#part')).toBe(
      `/rel?q=${REDACTED}&token=${REDACTED}&flag=${REDACTED}#part`,
    );
    expect(redactUrl('/hooks/in')).toBe('/hooks/in');
  });

  it('redacts the URLs inside an error message', () => {
    expect(redactText('plugins[0].hooks[1].webhook.url https://u:pw@h/x?k=v is refused')).toBe(
      `plugins[0].hooks[1].webhook.url https://u:${REDACTED}@h/x?k=${REDACTED} is refused`,
    );
  });

  it('keeps header templates and auth schemes, and redacts literal values', () => {
    expect(redactHeaderValue('Bearer ${AGENT_HOOK_WEBHOOK_TOKEN}')).toBe(
      'Bearer ${AGENT_HOOK_WEBHOOK_TOKEN}',
    );
    expect(redactHeaderValue('Bearer abc123')).toBe(REDACTED);
    expect(redactHeaderValue('${A}:${B}')).toBe(REDACTED);
  });

  it('redacts tokens, signing secrets and QStash tokens by name or by value', () => {
    expect(redactValue('AGENTHOOKS_AUTH_TOKEN', 't')).toBe(REDACTED);
    expect(redactValue('QSTASH_TOKEN', 'q')).toBe(REDACTED);
    expect(redactValue('AGENTHOOKS_SIGNING_SECRET_MAIN', 'whsec_x')).toBe(REDACTED);
    expect(redactValue('SOMETHING', 'whsec_abc')).toBe(REDACTED);
    expect(redactValue('AGENTHOOKS_DB', 'postgres://u:pw@h/d')).toBe(
      `postgres://u:${REDACTED}@h/d`,
    );
    expect(redactValue('AGENT_HOOK_WEBHOOK_EVENTS', 'beforeToolCall')).toBe('beforeToolCall');
    expect(redactValue('authTokenFile', '/run/secrets/token')).toBe('/run/secrets/token');
  });

  it('flattens a config, listen addresses by their text, secrets redacted', () => {
    const entries = configEntries({
      httpListen: { kind: 'tcp', host: '127.0.0.1', port: 8080, text: '127.0.0.1:8080' },
      authToken: 'tok',
      dbUrl: 'postgres://u:pw@h/d',
      connections: { maxConnections: 200 },
      webhookAllow: ['10.0.0.0/8'],
      absent: undefined,
    });
    expect(entries).toEqual([
      { key: 'authToken', value: REDACTED },
      { key: 'connections.maxConnections', value: '200' },
      { key: 'dbUrl', value: `postgres://u:${REDACTED}@h/d` },
      { key: 'httpListen', value: '127.0.0.1:8080' },
      { key: 'webhookAllow', value: '10.0.0.0/8' },
    ]);
  });
});
