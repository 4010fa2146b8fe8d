/**
 * The hardening soak: for a bounded time, hostile callers register what the
 * limits refuse, idle and preface-less connections flood every listener of
 * a sidecar whose descriptor limit was lowered (prlimit), and observer
 * webhooks pile up on a receiver that never answers, all at once; a
 * well-behaved runtime keeps deciding meanwhile. It must see no failure,
 * and the sidecar's RSS must stay under the manifest's 256 MiB limit. The
 * tests of this file run one after another.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** How long the load runs. */
const SOAK_MS = 30_000;
/** The pod's memory limit in the shipped manifests. */
const RSS_LIMIT_BYTES = 256 * 1024 * 1024;
/** The lowered descriptor limit: the flood alone would exhaust it without the caps. */
const NOFILE = 512;
/** Raw connections each flood round opens per listener, past every cap. */
const FLOOD_PER_ROUND = 150;

/** RSS of a process, from /proc. */
function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) * 1024;
}

/** Opens `count` raw TCP connections that send nothing (or a partial request) and keep them. */
function flood(address: string, count: number, partial: string | undefined): Socket[] {
  const [host, port] = address.replace(/^\[|\]$/g, '').split(/:(?=\d+$)/) as [string, string];
  return Array.from({ length: count }, () => {
    const socket = connect({ host, port: Number(port) });
    socket.on('error', () => undefined);
    if (partial !== undefined) socket.write(partial);
    return socket;
  });
}

describe.sequential('hardening soak', () => {
  let sidecar: SidecarProcess;
  let good: Receiver;
  let never: Receiver;

  beforeAll(async () => {
    good = await startReceiver({ answer: { json: { decision: 'allow' } } });
    never = await startReceiver({ answer: { hang: true } });
    sidecar = await startSidecar({
      args: [
        '--health-listen',
        '127.0.0.1:0',
        '--max-connections',
        '64',
        '--handshake-timeout',
        '1',
        '--request-timeout',
        '2',
        '--idle-timeout',
        '3',
        '--max-detached-deliveries',
        '64',
        '--webhook-max-connections',
        '16',
      ],
    });
    const lowered = spawnSync('prlimit', ['--pid', String(sidecar.pid), `--nofile=${NOFILE}`]);
    expect(lowered.status, String(lowered.stderr)).toBe(0);
  });

  afterAll(async () => {
    await killSidecar(sidecar);
    await good?.close();
    await never?.close();
  });

  it('keeps deciding without a failure and under 256 MiB while hostile callers, idle connections and a dead receiver press on it', async () => {
    const runtime = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    await runtime.registerHooks({
      operationId: 'well-behaved',
      hooks: [
        {
          id: 'policy',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${good.url}/allow`, responseHandling: ResponseHandling.TOOL_CALL },
        },
        // An observer whose receiver never answers: detached deliveries pile up to their bound.
        {
          id: 'observer',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${never.url}/observe`, timeout: 60 },
        },
      ],
    });
    const deadline = Date.now() + SOAK_MS;
    let peakRss = rssBytes(sidecar.pid);

    // Hostile callers on their own connection: every request is one the limits refuse.
    const hostile = createClient(
      HookService,
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    );
    const hostileRequests = [
      () =>
        hostile.registerHooks({
          operationId: 'hostile',
          hooks: [
            {
              id: 'stall',
              type: HookType.BEFORE_TOOL_CALL,
              matcher: '[\\s\\S]{1,1000}[0-9]{40}',
              webhook: { url: `${never.url}/x` },
            },
          ],
        }),
      () => hostile.registerHooks({ operationId: 'x'.repeat(1024 * 1024), hooks: [] }),
      () =>
        hostile.registerHooks({
          operationId: 'hostile',
          hooks: [
            {
              id: 'huge-url',
              type: HookType.ON_COMPLETE,
              webhook: { url: `${never.url}/${'u'.repeat(3 * 1024 * 1024)}` },
            },
          ],
        }),
      () =>
        hostile.registerHooks({
          operationId: 'hostile',
          hooks: [{ id: 'metadata', type: HookType.ON_COMPLETE, webhook: { url: 'http://0:80/' } }],
        }),
    ];
    let hostileRefused = 0;
    const hostileLoop = (async () => {
      for (let i = 0; Date.now() < deadline; i++) {
        const request = hostileRequests[i % hostileRequests.length] as () => Promise<unknown>;
        await request().then(
          () => {
            throw new Error(`hostile request ${i % hostileRequests.length} was accepted`);
          },
          () => {
            hostileRefused += 1;
          },
        );
      }
    })();

    // Idle, preface-only and half-sent connections on every listener, round after round.
    const listeners: [string, string | undefined][] = [
      [sidecar.grpc, undefined],
      [sidecar.health as string, 'PRI * HTTP/2.0\r\n'],
      [sidecar.http as string, 'POST /agenthooks.v1.HookService/ListHooks HTTP/1.1\r\n'],
    ];
    let flooded = 0;
    const floodLoop = (async () => {
      while (Date.now() < deadline) {
        const sockets = listeners.flatMap(([address, partial]) =>
          flood(address, FLOOD_PER_ROUND, partial),
        );
        flooded += sockets.length;
        // Each round's sockets are let go once the sidecar closed them (or after 5 s).
        await Promise.all(
          sockets.map(
            (s) =>
              new Promise<void>((resolve) => {
                const done = () => resolve();
                s.once('close', done);
                setTimeout(() => {
                  s.destroy();
                }, 5_000).unref();
              }),
          ),
        );
      }
    })();

    // The runtime decides one call after another for the whole time.
    let decisions = 0;
    const failures: unknown[] = [];
    while (Date.now() < deadline) {
      try {
        const answer = await runtime.decideToolCall({
          event: {
            context: {
              operationId: 'well-behaved',
              toolCallId: `call-${decisions}`,
              identifier: 'search',
              apiName: 'query',
              executor: Executor.SERVER,
            },
          },
        });
        if (answer.decision?.outcome.case !== 'allow') failures.push(answer.decision);
      } catch (e: unknown) {
        failures.push(e);
      }
      decisions += 1;
      peakRss = Math.max(peakRss, rssBytes(sidecar.pid));
    }
    await Promise.all([hostileLoop, floodLoop]);

    expect(failures).toEqual([]);
    expect(decisions).toBeGreaterThan(100);
    expect(hostileRefused).toBeGreaterThan(10);
    expect(flooded).toBeGreaterThan(NOFILE);
    expect(peakRss).toBeLessThan(RSS_LIMIT_BYTES);
    // The dead receiver held no more sockets than the per-origin cap.
    expect(never.connections()).toBeLessThanOrEqual(16);
  }, 90_000);
});
