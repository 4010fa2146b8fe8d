/**
 * @module The admin console's two static files, served from its own origin
 * (the Content-Security-Policy allows scripts and styles from `'self'`
 * only, never inline): the stylesheet and the live view's script. They are
 * constants here so that the build (`tsc` and the bundle) carries them with
 * no extra step.
 */

/** `/console.css`. */
export const CONSOLE_CSS = `:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fff; --muted: #59636e; --line: #d1d9e0; --on: #1a7f37; --off: #cf222e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1.2em; border-bottom: 1px solid var(--line); }
nav a { margin-right: 1em; color: inherit; }
nav a[aria-current="page"] { font-weight: 600; }
main { padding: 0 1.2em 2em; }
h1 { font-size: 1.4em; word-break: break-all; }
h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid var(--line); padding: .25em .5em; text-align: left; vertical-align: top; }
table.kv th { font-weight: 500; color: var(--muted); }
code { font: 12px ui-monospace, monospace; word-break: break-all; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 1em; color: #fff; font-size: 12px; }
.badge.on { background: var(--on); }
.badge.off { background: var(--off); }
.error { color: var(--off); }
tr.decision.deny td.outcome { color: var(--off); font-weight: 600; }
tr.decision.allow td.outcome { color: var(--on); }
ol.outcomes, ul.headers { margin: 0; padding-left: 1.2em; }
.status.failed { color: var(--off); }
.json { margin-top: 2em; color: var(--muted); }
form.lookup input { min-width: 24em; }
`;

/**
 * `/live.js`: follows `/live/events` and prepends one row per decision to
 * the `live-decisions` table. Rows are built with `textContent`, never
 * `innerHTML`, so a hook id or reason holding markup stays text.
 */
export const LIVE_JS = `'use strict';
(function () {
  var table = document.getElementById('live-decisions');
  var status = document.getElementById('live-status');
  if (!table || !status || typeof EventSource === 'undefined') return;
  var body = table.tBodies[0];
  var MAX_ROWS = 500;
  function cell(row, text, className) {
    var td = document.createElement('td');
    if (className) td.className = className;
    td.textContent = text;
    row.appendChild(td);
    return td;
  }
  function add(d) {
    var row = document.createElement('tr');
    row.className = 'decision ' + d.decision;
    row.setAttribute('data-decision-id', d.decisionId);
    cell(row, d.time);
    cell(row, d.kind);
    var op = cell(row, '');
    var link = document.createElement('a');
    link.href = '/ops/' + encodeURIComponent(d.operationId);
    link.textContent = d.operationId;
    op.appendChild(link);
    cell(row, d.toolCallId);
    cell(row, d.identifier + ' ' + d.apiName);
    cell(row, d.decision + (d.classification ? ' (' + d.classification + ')' : ''), 'outcome');
    cell(row, d.reason, 'reason');
    var hooks = cell(row, '');
    var list = document.createElement('ol');
    list.className = 'outcomes';
    d.outcomes.forEach(function (o) {
      var item = document.createElement('li');
      item.textContent = o.hookId + ' ' + o.status + (o.errorCode ? ' ' + o.errorCode : '') +
        (o.httpStatus ? ' HTTP ' + o.httpStatus : '') + ' ' + o.latencyMs.toFixed(1) + ' ms';
      list.appendChild(item);
    });
    hooks.appendChild(list);
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }
  var source = new EventSource('/live/events');
  source.addEventListener('open', function () {
    status.textContent = 'Connected: new decisions appear at the top.';
    document.body.setAttribute('data-live', 'open');
  });
  source.addEventListener('error', function () {
    status.textContent = 'Disconnected; retrying.';
    document.body.setAttribute('data-live', 'error');
  });
  source.addEventListener('decision', function (event) {
    try { add(JSON.parse(event.data)); } catch (e) { /* a malformed event is skipped */ }
  });
})();
`;
