/**
 * @module The admin console's pages: plain functions from a view to
 * {@link SafeHtml}, every value interpolated through the `html` tag (so
 * escaped). No inline script or style: the stylesheet is `/console.css` and
 * the live view's script `/live.js` (see `./assets.ts`), which the
 * Content-Security-Policy allows from the console's own origin only.
 */
import { type HtmlValue, html, type SafeHtml } from './html.js';
import type {
  ConfigEntry,
  ConfigView,
  DecisionView,
  EnvironmentView,
  HookView,
  OperationView,
  ParkedCallView,
  StatusView,
} from './views.js';

/** The navigation links, in order. */
const NAV: readonly (readonly [string, string])[] = [
  ['/', 'Status'],
  ['/config', 'Configuration'],
  ['/environment', 'Environment and plugins'],
  ['/ops', 'Operations'],
  ['/live', 'Live decisions'],
];

/** Wraps a page's body in the console's layout. */
export function layout(
  title: string,
  path: string,
  body: SafeHtml,
  scripts: string[] = [],
): SafeHtml {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · agenthooks admin</title>
<link rel="stylesheet" href="/console.css">
${scripts.map((src) => html`<script src="${src}" defer></script>`)}
</head>
<body>
<header><strong>agenthooks</strong> admin
<nav>${NAV.map(([href, label]) => html`<a href="${href}"${href === path ? html` aria-current="page"` : ''}>${label}</a>`)}</nav>
</header>
<main>
<h1>${title}</h1>
${body}
<p class="json">JSON: <a href="${jsonHref(path)}">${jsonHref(path)}</a></p>
</main>
</body>
</html>
`;
}

/** The JSON endpoint beside a page. */
function jsonHref(path: string): string {
  if (path === '/') return '/status.json';
  if (path === '/live') return '/live/events';
  return `${path}.json`;
}

/** The status page. */
export function statusPage(view: StatusView): SafeHtml {
  return layout(
    'Status',
    '/',
    html`<table class="kv">
<tr><th>Version</th><td>${view.version}</td></tr>
<tr><th>Started</th><td>${view.startedAt} (${view.uptimeSeconds} s ago)</td></tr>
<tr><th>Liveness</th><td>${badge(view.liveness === 'SERVING', view.liveness)}</td></tr>
<tr><th>Readiness</th><td>${badge(view.readiness === 'SERVING', view.readiness)}</td></tr>
<tr><th>Store</th><td>${view.store.kind} ${badge(view.store.serving, view.store.serving ? 'serving' : 'not serving')} <code>${view.store.location}</code></td></tr>
<tr><th>Handle streams</th><td>${view.handlerStreams}</td></tr>
<tr><th>Detached deliveries in flight</th><td>${view.detachedInFlight}</td></tr>
</table>`,
  );
}

/** The effective configuration page. */
export function configPage(view: ConfigView): SafeHtml {
  return layout(
    'Configuration',
    '/config',
    html`<p>Secrets (tokens, passwords in URLs, signing secrets, QStash tokens) are shown as <code>[redacted]</code>.</p>
<h2>Options</h2>
${entriesTable(view.entries)}
<h2>Effective environment (hook variables)</h2>
${view.environment.length === 0 ? html`<p>None set.</p>` : entriesTable(view.environment)}`,
  );
}

/** The environment hooks and operator plugins page. */
export function environmentPage(view: EnvironmentView): SafeHtml {
  const env = view.environment;
  const plugins = view.plugins;
  return layout(
    'Environment and plugins',
    '/environment',
    html`<h2>Environment hooks</h2>
<table class="kv">
<tr><th>Last reload</th><td>generation ${env.generation} ${badge(env.valid, env.valid ? 'valid' : 'invalid')}</td></tr>
${env.envFile === undefined ? '' : html`<tr><th>Env file</th><td><code>${env.envFile}</code></td></tr>`}
${env.error === undefined ? '' : html`<tr><th>Error</th><td class="error">${env.error}</td></tr>`}
</table>
${hooksTable(env.hooks)}
<h2>Operator plugins</h2>
<table class="kv">
<tr><th>Last reload</th><td>generation ${plugins.generation} ${badge(plugins.valid, plugins.valid ? 'valid' : 'invalid')}</td></tr>
${plugins.pluginsFile === undefined ? '' : html`<tr><th>Plugins file</th><td><code>${plugins.pluginsFile}</code></td></tr>`}
<tr><th>Plugins</th><td>${plugins.plugins}</td></tr>
${plugins.error === undefined ? '' : html`<tr><th>Error</th><td class="error">${plugins.error}</td></tr>`}
</table>
${hooksTable(plugins.hooks)}`,
  );
}

/** The operation lookup form. */
export function operationsPage(): SafeHtml {
  return layout('Operations', '/ops', operationForm(''));
}

function operationForm(value: string): SafeHtml {
  return html`<form method="get" action="/ops" class="lookup">
<label for="op">Operation id</label> <input id="op" name="id" value="${value}" required>
<button type="submit">Show</button>
</form>`;
}

/** The path of an operation's page. */
export function operationPath(operationId: string): string {
  return `/ops/${encodeURIComponent(operationId)}`;
}

/** An operation's page: hooks in order, parked calls, recent decisions. */
export function operationPage(view: OperationView): SafeHtml {
  return layout(
    `Operation ${view.operationId}`,
    operationPath(view.operationId),
    html`${operationForm(view.operationId)}
<table class="kv">
<tr><th>Operation</th><td><code>${view.operationId}</code> ${view.expired ? html`<span class="badge off">expired by retention</span>` : view.known ? '' : html`<span class="badge off">unknown to the store</span>`}</td></tr>
${view.parentOperationId === undefined ? '' : html`<tr><th>Parent</th><td><a href="${operationPath(view.parentOperationId)}">${view.parentOperationId}</a></td></tr>`}
</table>
<h2>Hooks in order</h2>
${hooksTable(view.hooks)}
<h2>Parked calls</h2>
${parkedTable(view.parkedCalls)}
<h2>Recent decisions</h2>
${decisionsTable(view.decisions, 'decisions')}`,
  );
}

/** The live view: decisions as they are made (needs JavaScript). */
export function livePage(): SafeHtml {
  return layout(
    'Live decisions',
    '/live',
    html`<p id="live-status">This view needs JavaScript: it follows <a href="/live/events">/live/events</a> (server-sent events).</p>
${decisionsTable([], 'live-decisions')}`,
    ['/live.js'],
  );
}

/** A page for an error (404, 405, 503). */
export function errorPage(title: string, message: string): SafeHtml {
  return layout(title, '', html`<p class="error">${message}</p>`);
}

function badge(ok: boolean, text: string): SafeHtml {
  return html`<span class="badge ${ok ? 'on' : 'off'}">${text}</span>`;
}

function entriesTable(entries: readonly ConfigEntry[]): SafeHtml {
  return html`<table class="kv">${entries.map((e) => html`<tr><th>${e.key}</th><td><code>${e.value}</code></td></tr>`)}</table>`;
}

function hooksTable(hooks: readonly HookView[]): SafeHtml {
  if (hooks.length === 0) return html`<p>No hooks.</p>`;
  return html`<table class="list hooks">
<thead><tr><th>#</th><th>Hook id</th><th>Type</th><th>Source</th><th>Matcher</th><th>Delivery</th><th>Response</th><th>onError</th><th>Signing secret</th></tr></thead>
<tbody>${hooks.map(
    (h) => html`<tr>
<td>${h.position}</td><td class="hook-id"><code>${h.id}</code></td><td>${h.type}</td><td>${h.source}${h.plugin === undefined ? '' : html` (${h.plugin})`}</td>
<td>${h.matcher === undefined ? '' : html`<code>${h.matcher}</code>`}</td>
<td>${h.handler ? 'handler' : ''}${h.handler && h.url !== '' ? ' + ' : ''}${h.url === '' ? '' : html`${h.delivery} <code>${h.url}</code>`}${headersList(h.headers)}</td>
<td>${h.responseHandling}</td><td>${h.onError}</td><td>${h.signingSecret}</td>
</tr>`,
  )}</tbody></table>`;
}

function headersList(headers: readonly ConfigEntry[]): HtmlValue {
  if (headers.length === 0) return '';
  return html`<ul class="headers">${headers.map((h) => html`<li><code>${h.key}: ${h.value}</code></li>`)}</ul>`;
}

function parkedTable(calls: readonly ParkedCallView[]): SafeHtml {
  if (calls.length === 0) return html`<p>No parked calls.</p>`;
  return html`<table class="list parked">
<thead><tr><th>Tool call</th><th>Kind</th><th>Tool</th><th>State</th><th>Parked</th><th>Published</th><th>Chain</th></tr></thead>
<tbody>${calls.map(
    (c) =>
      html`<tr><td><code>${c.toolCallId}</code></td><td>${c.kind}</td><td>${c.identifier} ${c.apiName}</td><td>${c.state}</td><td>${c.parkedAt}</td><td>${c.publishedAt ?? ''}</td><td>${c.chain.join(' → ')}</td></tr>`,
  )}</tbody></table>`;
}

/** The decisions table; `live.js` appends rows of the same shape to the `live-decisions` one. */
function decisionsTable(decisions: readonly DecisionView[], id: string): SafeHtml {
  return html`<table class="list decisions" id="${id}">
<thead><tr><th>Time</th><th>RPC</th><th>Operation</th><th>Tool call</th><th>Tool</th><th>Decision</th><th>Reason</th><th>Hooks (outcome, latency)</th></tr></thead>
<tbody>${decisions.map(decisionRow)}</tbody></table>
${decisions.length === 0 && id === 'decisions' ? html`<p>No recent decisions.</p>` : ''}`;
}

function decisionRow(d: DecisionView): SafeHtml {
  return html`<tr class="decision ${d.decision}" data-decision-id="${d.decisionId}">
<td>${d.time}</td><td>${d.kind}</td><td><a href="${operationPath(d.operationId)}">${d.operationId}</a></td><td><code>${d.toolCallId}</code></td>
<td>${d.identifier} ${d.apiName}</td><td class="outcome">${d.decision}${d.classification === '' ? '' : html` (${d.classification})`}</td>
<td class="reason">${d.reason}</td>
<td><ol class="outcomes">${d.outcomes.map(
    (o) =>
      html`<li><code class="hook-id">${o.hookId}</code> <span class="status ${o.status}">${o.status}</span>${o.errorCode === '' ? '' : html` ${o.errorCode}`}${o.httpStatus === 0 ? '' : html` HTTP ${o.httpStatus}`} ${o.latencyMs.toFixed(1)} ms</li>`,
  )}</ol></td></tr>`;
}
