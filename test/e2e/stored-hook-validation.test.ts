/**
 * Stored hooks are re-validated when the sidecar reads them back (upstream
 * contract §1.7). Hooks are registered through a real sidecar, which is then
 * killed; their rows are edited on disk with better-sqlite3, as an older
 * version, a hand or corruption could; a new sidecar on the same file then
 * answers. A row that breaks a registration rule fails the calls that would
 * run the operation's hooks with FAILED_PRECONDITION, `STORED_HOOK_INVALID`,
 * over native gRPC and Connect alike, and its webhook is never called; a row
 * edited within the rules runs as edited.
 */
import { Code, ConnectError, createClient, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar, tempDbPath } from '../support/sidecar.js';

type HookClient = ReturnType<typeof createClient<typeof HookService>>;

function clientsOf(sidecar: SidecarProcess): Record<'grpc' | 'connect', HookClient> {
  const transports: Record<'grpc' | 'connect', Transport> = {
    grpc: createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
    connect: createConnectTransport({ baseUrl: `http://${sidecar.http}`, httpVersion: '1.1' }),
  };
  return {
    grpc: createClient(HookService, transports.grpc),
    connect: createClient(HookService, transports.connect),
  };
}

function decide(client: HookClient, operationId: string) {
  return client.decideToolCall({
    event: {
      context: {
        operationId,
        toolCallId: `call-${operationId}`,
        identifier: 'fs',
        apiName: 'writeFile',
        executor: Executor.SERVER,
      },
    },
  });
}

/** Returns the ConnectError a call rejects with, failing the test when it resolves. */
async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (e: unknown) {
    return ConnectError.from(e);
  }
  throw new Error('expected the call to fail, it answered');
}

/** Rewrites the stored config of one hook row, as someone editing the file would. */
function editStoredHook(
  db: string,
  operationId: string,
  hookId: string,
  edit: (config: { webhook: Record<string, unknown> }) => void,
): void {
  const conn = new Database(db);
  try {
    const row = conn
      .prepare<[string, string], { config: string }>(
        'SELECT config FROM hooks WHERE operation_id = ? AND hook_id = ?',
      )
      .get(operationId, hookId);
    if (row === undefined) throw new Error(`no stored hook ${hookId} of ${operationId}`);
    const config = JSON.parse(row.config) as { webhook: Record<string, unknown> };
    edit(config);
    const { changes } = conn
      .prepare('UPDATE hooks SET config = ? WHERE operation_id = ? AND hook_id = ?')
      .run(JSON.stringify(config), operationId, hookId);
    expect(changes).toBe(1);
  } finally {
    conn.close();
  }
}

describe('stored hooks re-validated on read', () => {
  let receiver: Receiver | undefined;
  let sidecar: SidecarProcess | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
    sidecar = undefined;
    await receiver?.close();
    receiver = undefined;
  });

  it('fails closed on a stored hook edited to break a rule, and runs one edited within them', async () => {
    // A control that runs answers deny, so a decision shows whether it ran.
    receiver = await startReceiver({ answer: { json: { decision: 'deny', reason: 'ran' } } });
    const db = tempDbPath();
    const first = await startSidecar({ db });
    const control = (id: string, path: string) => ({
      id,
      type: HookType.BEFORE_TOOL_CALL,
      webhook: {
        url: `${receiver?.url}${path}`,
        responseHandling: ResponseHandling.TOOL_CALL,
      },
    });
    const setup = clientsOf(first).grpc;
    await setup.registerHooks({ operationId: 'op-bad', hooks: [control('guard', '/bad')] });
    await setup.registerHooks({ operationId: 'op-good', hooks: [control('guard-ok', '/good')] });
    first.kill('SIGKILL');
    await first.exited;

    // A control may not filter its payload (CONTROL_PAYLOAD_OVERRIDE); a header is fine.
    editStoredHook(db, 'op-bad', 'guard', (c) => {
      c.webhook.eventFields = { names: ['userId'] };
    });
    editStoredHook(db, 'op-good', 'guard-ok', (c) => {
      c.webhook.headers = { 'X-Edited': 'yes' };
    });

    sidecar = await startSidecar({ db });
    const clients = clientsOf(sidecar);
    for (const [protocol, client] of Object.entries(clients)) {
      const err = await refusal(decide(client, 'op-bad'));
      expect([protocol, Code[err.code]]).toEqual([protocol, 'FailedPrecondition']);
      const info = err.findDetails(ErrorInfoSchema)[0];
      expect(info?.reason).toBe('STORED_HOOK_INVALID');
      expect(info?.metadata).toEqual({
        operationId: 'op-bad',
        hookId: 'guard',
        rule: 'CONTROL_PAYLOAD_OVERRIDE',
        field: 'hooks[0].webhook.eventFields',
      });
      expect(err.rawMessage).toContain('operation "op-bad"');
      expect(err.rawMessage).toContain('stored hook "guard"');
      expect(err.rawMessage).toContain('CONTROL_PAYLOAD_OVERRIDE');
    }
    // Notifications of the operation fail the same way, never as "no hooks".
    const dispatched = await refusal(
      clients.grpc.dispatch({
        event: {
          event: {
            case: 'onComplete',
            value: { operationId: 'op-bad', userId: 'u', reason: 'done' },
          },
        },
      }),
    );
    expect(dispatched.findDetails(ErrorInfoSchema)[0]?.reason).toBe('STORED_HOOK_INVALID');

    // The hook edited within the rules runs as edited.
    const good = await decide(clients.grpc, 'op-good');
    expect(good.decision?.outcome.case).toBe('deny');
    const [request] = await receiver.waitForRequests(1);
    expect(request?.path).toBe('/good');
    expect(request?.headers['x-edited']).toBe('yes');
    // The broken hook was never called: the one request is op-good's.
    expect(receiver.requests.map((r) => r.path)).toEqual(['/good']);

    // An operator sees the broken hook, and a purge removes it.
    const listed = await clients.connect.listHooks({ operationId: 'op-bad' });
    expect(listed.hooks.map((h) => [h.id, h.webhook?.eventFields?.names])).toEqual([
      ['guard', ['userId']],
    ]);
    const { hooksPurged } = await clients.grpc.unregisterHooks({
      operationId: 'op-bad',
      purge: true,
    });
    expect(hooksPurged).toBe(1);
    for (const client of Object.values(clients)) {
      const after = await decide(client, 'op-bad');
      expect(after.decision?.outcome.case).toBe('allow');
      expect(after.outcomes).toEqual([]);
    }
    expect(receiver.requests.map((r) => r.path)).toEqual(['/good']);
  });
});
