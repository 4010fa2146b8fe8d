/**
 * The admin console in headless Chromium (Debian's `chromium`, driven over
 * the DevTools protocol by puppeteer-core) against a real sidecar with a
 * bearer token: the operation page lists the hooks in order and the
 * decisions of a scripted run with their outcomes; a hook id and a deny
 * reason holding `<script>` render as text and run nothing; without the
 * token (or with a wrong one) the console answers 401; the live view shows
 * a decision made after it was opened. Decisions come from the audit log
 * (`--audit-store`: the store's listing, and its feed for the live view),
 * with the decision ids the RPCs answered. A screenshot of each page is written
 * under test-output/console/ for a reviewer.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@connectrpc/connect';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  OPS,
  runScript,
  SCRIPTED_RUN_ARGS,
  type ScriptedRun,
  scriptReceiver,
  transportOf,
} from '../deploy/scripted-run.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const TOKEN = 'console-test-token-5f2a9c';
const CHROMIUM = process.env.AGENTHOOKS_CHROMIUM ?? '/usr/bin/chromium';
const OUTPUT = join(import.meta.dirname, '..', '..', 'test-output', 'console');
/** A hook id and a deny reason an attacker chose. */
const EVIL_HOOK_ID = 'evil<script>window.__pwned=1</script>';
const EVIL_REASON = '<script>window.__pwned=2</script><img src=x onerror="window.__pwned=3">no';
/** Longest wait for the page to show something. */
const PAGE_TIMEOUT_MS = 10_000;

/** The `authorization` header of the token. */
const AUTH = { authorization: `Bearer ${TOKEN}` };

describe('the admin console', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;
  let browser: Browser | undefined;
  let base = '';
  let run: ScriptedRun | undefined;
  const dialogs: string[] = [];

  beforeAll(async () => {
    mkdirSync(OUTPUT, { recursive: true });
    receiver = await startReceiver();
    scriptReceiver(receiver, EVIL_REASON);
    sidecar = await startSidecar({
      admin: true,
      args: [...SCRIPTED_RUN_ARGS, '--audit-store'],
      env: { AGENTHOOKS_AUTH_TOKEN: TOKEN },
    });
    base = `http://${sidecar.admin}`;
    run = await runScript(sidecar.grpc, receiver, {
      denyHookId: EVIL_HOOK_ID,
      denyReason: EVIL_REASON,
      token: TOKEN,
    });
    // The store sink commits in groups at most 50 ms apart: wait for the run's last entries.
    await decisionsOf(OPS.allowed, 4);
    await decisionsOf(OPS.denied, 1);
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // CI runs as root, where Chromium's sandbox cannot start.
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  /** The operation's decisions as JSON, once it has at least `count` (polled, bounded). */
  async function decisionsOf(
    operationId: string,
    count: number,
  ): Promise<{ decisionId: string; kind: string; toolCallId: string; decision: string }[]> {
    const deadline = Date.now() + PAGE_TIMEOUT_MS;
    for (;;) {
      const res = await fetch(`${base}/ops/${encodeURIComponent(operationId)}.json`, {
        headers: AUTH,
      });
      const view = (await res.json()) as {
        decisions: { decisionId: string; kind: string; toolCallId: string; decision: string }[];
      };
      if (view.decisions.length >= count) return view.decisions;
      if (Date.now() > deadline) {
        throw new Error(`${operationId} has ${view.decisions.length} decisions, not ${count}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** A page that sends the token and records every dialog. */
  async function openPage(path: string): Promise<Page> {
    const page = await (browser as Browser).newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.setExtraHTTPHeaders(AUTH);
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const response = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    expect(response?.status()).toBe(200);
    return page;
  }

  it('answers 401 without the token and with a wrong one, 405 to anything but GET and HEAD', async () => {
    const none = await fetch(`${base}/ops/${OPS.denied}`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Basic');
    expect(await none.text()).not.toContain(OPS.denied);
    const wrong = await fetch(`${base}/`, { headers: { authorization: 'Bearer wrong' } });
    expect(wrong.status).toBe(401);
    const basicWrong = await fetch(`${base}/`, {
      headers: { authorization: `Basic ${Buffer.from('admin:wrong').toString('base64')}` },
    });
    expect(basicWrong.status).toBe(401);
    const basic = await fetch(`${base}/`, {
      headers: { authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}` },
    });
    expect(basic.status).toBe(200);
    // Never on an API listener.
    const api = await fetch(`http://${(sidecar as SidecarProcess).http}/config`, { headers: AUTH });
    expect(api.status).toBe(404);
    const post = await fetch(`${base}/`, { method: 'POST', headers: AUTH });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    // The browser without the header is refused too: headless Chromium, which
    // cannot ask for the Basic credentials, fails the navigation on the 401.
    const page = await (browser as Browser).newPage();
    const answer = await page.goto(`${base}/ops/${OPS.denied}`).then(
      (r) => String(r?.status()),
      (e: Error) => e.message,
    );
    expect(answer).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
    expect(await page.content()).not.toContain('deny-control');
    await page.close();
  });

  it("lists an operation's hooks in order and its decisions with their outcomes", async () => {
    const page = await openPage(`/ops/${OPS.allowed}`);
    const hookIds = await page.$$eval('table.hooks td.hook-id', (cells) =>
      cells.map((c) => c.textContent),
    );
    expect(hookIds).toEqual(['allow-control', 'observer', 'notify-step']);
    const rows = await page.$$eval('#decisions tbody tr', (trs) =>
      trs.map((tr) => ({
        outcome: tr.querySelector('td.outcome')?.textContent,
        hooks: [...tr.querySelectorAll('ol.outcomes li')].map((li) =>
          (li.textContent ?? '').replace(/\s+/g, ' ').trim(),
        ),
        text: tr.textContent ?? '',
      })),
    );
    const allowed = rows.filter((r) => r.text.includes('DecideToolCall'));
    expect(allowed).toHaveLength(3);
    for (const row of allowed) {
      expect(row.outcome).toBe('allow');
      // A 204 carries no decision: the control is counted as ignored, and the call allowed.
      expect(row.hooks[0]).toMatch(/^allow-control ignored HTTP 204 \d+\.\d ms$/);
      expect(row.hooks[1]).toMatch(/^observer skipped/);
    }
    // The newest first.
    expect(allowed[0]?.text).toContain('allowed-2');
    const parked = await page.$$eval('table.parked tbody tr', (trs) =>
      trs.map((tr) => tr.textContent ?? ''),
    );
    expect(parked.some((t) => t.includes('parked-0') && t.includes('published'))).toBe(true);
    expect(parked.some((t) => t.includes('parked-waiting') && t.includes('waiting'))).toBe(true);
    await page.screenshot({ path: join(OUTPUT, 'operation.png'), fullPage: true });
    await page.close();

    // The same view as JSON.
    const json = (await (
      await fetch(`${base}/ops/${OPS.allowed}.json`, { headers: AUTH })
    ).json()) as {
      hooks: { id: string; position: number }[];
      decisions: { decisionId: string; kind: string; toolCallId: string; decision: string }[];
    };
    expect(json.hooks.map((h) => [h.position, h.id])).toEqual([
      [1, 'allow-control'],
      [2, 'observer'],
      [3, 'notify-step'],
    ]);
    // The audit log's entries, newest first, with the ids the RPCs answered.
    const ids = (run as ScriptedRun).decisionIds;
    expect(json.decisions.map((d) => [d.kind, d.toolCallId, d.decision, d.decisionId])).toEqual([
      ['PublishDeferredResult', 'parked-0', 'allow', ids['parked-0']],
      ['DecideToolCall', 'allowed-2', 'allow', ids['allowed-2']],
      ['DecideToolCall', 'allowed-1', 'allow', ids['allowed-1']],
      ['DecideToolCall', 'allowed-0', 'allow', ids['allowed-0']],
    ]);
  });

  it('renders a hook id and a reason holding <script> as text and runs nothing', async () => {
    const page = await openPage(`/ops/${encodeURIComponent(OPS.denied)}`);
    const hookId = await page.$eval('table.hooks td.hook-id', (td) => td.textContent);
    expect(hookId).toBe(EVIL_HOOK_ID);
    const reason = await page.$eval('#decisions td.reason', (td) => td.textContent);
    expect(reason).toBe(EVIL_REASON);
    const outcome = await page.$eval('#decisions td.outcome', (td) => td.textContent);
    expect(outcome).toBe('deny (hook_denied)');
    // No element came from the caller's strings, and nothing ran.
    expect(await page.$$eval('script', (s) => s.length)).toBe(0);
    expect(await page.$$eval('main img', (s) => s.length)).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(dialogs).toEqual([]);
    await page.screenshot({ path: join(OUTPUT, 'operation-escaped.png'), fullPage: true });
    await page.close();
  });

  it('serves every page under a strict Content-Security-Policy, with no secret on it', async () => {
    for (const [path, file] of [
      ['/', 'status.png'],
      ['/config', 'config.png'],
      ['/environment', 'environment.png'],
      ['/ops', 'operations.png'],
    ] as const) {
      const page = await openPage(path);
      expect(await page.content()).not.toContain(TOKEN);
      await page.screenshot({ path: join(OUTPUT, file), fullPage: true });
      await page.close();
    }
    const res = await fetch(`${base}/config`, { headers: AUTH });
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const config = await res.text();
    expect(config).toContain('[redacted]');
    expect(config).not.toContain(TOKEN);
  });

  it('shows in the live view a decision made after the page was opened', async () => {
    const page = await openPage('/live');
    await page.waitForSelector('body[data-live="open"]', { timeout: PAGE_TIMEOUT_MS });
    expect(await page.$$eval('#live-decisions tbody tr', (trs) => trs.length)).toBe(0);
    const client = createClient(HookService, transportOf((sidecar as SidecarProcess).grpc, TOKEN));
    const answer = await client.decideToolCall({
      event: {
        context: {
          operationId: OPS.denied,
          toolCallId: 'live-call-1',
          identifier: 'search',
          apiName: 'query',
          executor: Executor.SERVER,
        },
      },
    });
    const row = await page.waitForSelector('#live-decisions tbody tr', {
      timeout: PAGE_TIMEOUT_MS,
    });
    const text = await row?.evaluate((tr) => tr.textContent ?? '');
    expect(text).toContain('live-call-1');
    expect(await row?.evaluate((tr) => tr.getAttribute('data-decision-id'))).toBe(
      answer.decisionId,
    );
    expect(text).toContain('deny (hook_denied)');
    // The reason arrived as text in the live view too.
    expect(await page.$eval('#live-decisions td.reason', (td) => td.textContent)).toBe(EVIL_REASON);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(dialogs).toEqual([]);
    await page.screenshot({ path: join(OUTPUT, 'live.png'), fullPage: true });
    await page.close();
  });
});
