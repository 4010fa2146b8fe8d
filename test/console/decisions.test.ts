/**
 * The console's decisions without the audit store sink: the last decisions
 * of each operation are kept in memory from the audit log's feed, with the
 * ids the RPCs answered, and `/live/events` streams each new one as a
 * server-sent event. No browser: the JSON and the event stream as scripts
 * read them.
 */
import { createClient } from '@connectrpc/connect';
import { afterEach, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  OPS,
  runScript,
  SCRIPTED_RUN_ARGS,
  scriptReceiver,
  transportOf,
} from '../deploy/scripted-run.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** Longest wait for a decision to show. */
const DEADLINE_MS = 10_000;

interface Decision {
  decisionId: string;
  kind: string;
  toolCallId: string;
  decision: string;
  reason: string;
  classification: string;
  outcomes: { hookId: string; status: string }[];
}

describe('console decisions from the audit feed', () => {
  let sidecar: SidecarProcess | undefined;
  let receiver: Receiver | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('lists the decisions of a run with their ids, and streams a new one live', async () => {
    receiver = await startReceiver();
    scriptReceiver(receiver, 'not now');
    sidecar = await startSidecar({ admin: true, args: SCRIPTED_RUN_ARGS });
    const base = `http://${sidecar.admin}`;
    const run = await runScript(sidecar.grpc, receiver, { denyReason: 'not now' });

    const denied = (await (await fetch(`${base}/ops/${OPS.denied}.json`)).json()) as {
      decisions: Decision[];
    };
    expect(denied.decisions).toMatchObject([
      {
        decisionId: run.decisionIds['denied-0'],
        kind: 'DecideToolCall',
        toolCallId: 'denied-0',
        decision: 'deny',
        reason: 'not now',
        classification: 'hook_denied',
        outcomes: [{ hookId: 'deny-control', status: 'denied' }],
      },
    ]);
    const failOpen = (await (await fetch(`${base}/ops/${OPS.failOpen}.json`)).json()) as {
      decisions: Decision[];
    };
    expect(failOpen.decisions).toMatchObject([
      {
        decisionId: run.decisionIds['fail-open-0'],
        decision: 'allow',
        outcomes: [{ hookId: 'failing-control', status: 'failed' }],
      },
    ]);

    // The live stream: a decision made after it opened arrives as an event.
    const abort = new AbortController();
    const live = await fetch(`${base}/live/events`, { signal: abort.signal });
    expect(live.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const reader = (live.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain(': connected');
    const client = createClient(HookService, transportOf(sidecar.grpc));
    const answer = await client.decideToolCall({
      event: {
        context: {
          operationId: OPS.allowed,
          toolCallId: 'live-1',
          identifier: 'search',
          apiName: 'query',
          executor: Executor.SERVER,
        },
      },
    });
    let text = '';
    const deadline = Date.now() + DEADLINE_MS;
    while (!text.includes('\n\n') && Date.now() < deadline) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    abort.abort();
    const event = /^event: decision\nid: (\S+)\ndata: (.*)\n\n/.exec(text);
    expect(event?.[1]).toBe(answer.decisionId);
    expect(JSON.parse(event?.[2] ?? '{}')).toMatchObject({
      toolCallId: 'live-1',
      decision: 'allow',
    });
  });
});
