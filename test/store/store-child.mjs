/**
 * @module A store in another process, for the store tests that need one: a
 * second writer racing this one, or a sidecar running as an unprivileged user
 * (read-only faults, which root cannot be subjected to). It imports the BUILT
 * store (`npm run build` first) and answers one JSON line per command read
 * from stdin: `{"id": 1, "cmd": "open", ...}` ->
 * `{"id": 1, "ok": true, "value": ...}` or
 * `{"id": 1, "ok": false, "error": {"kind", "reason", "message", "code"}}`.
 * Messages travel as canonical proto3 JSON. It exits when stdin ends.
 */
import { createInterface } from 'node:readline';
import { fromJson, toJson } from '@bufbuild/protobuf';
import { ToolCallContextSchema, ToolResultSchema } from '../../dist/gen/agenthooks/v1/events_pb.js';
import { HookSchema } from '../../dist/gen/agenthooks/v1/hooks_pb.js';
import { openSqliteStore } from '../../dist/src/store/sqlite.js';

/** The store this process has open, if any. */
let store;

/** Returns the open store, or fails the command. */
function opened() {
  if (store === undefined) throw new Error('no store is open; send "open" first');
  return store;
}

/** A record with its messages as proto3 JSON. */
function recordToJson(record) {
  if (record === undefined) return null;
  return {
    ...record,
    context: toJson(ToolCallContextSchema, record.context),
    ...(record.finalResult === undefined
      ? {}
      : { finalResult: toJson(ToolResultSchema, record.finalResult) }),
  };
}

const COMMANDS = {
  open: ({ path, options }) => {
    store = openSqliteStore(path, options);
    return { uid: process.getuid?.() };
  },
  close: async () => {
    await opened().close();
    store = undefined;
    return null;
  },
  ping: () => opened().ping(),
  park: async ({ record }) => {
    const outcome = await opened().parkCall({
      ...record,
      context: fromJson(ToolCallContextSchema, record.context),
    });
    return { created: outcome.created, record: recordToJson(outcome.record) };
  },
  get: async ({ toolCallId }) => recordToJson(await opened().getParkedCall(toolCallId)),
  publish: async ({ toolCallId, result, publishedAt }) => {
    const outcome = await opened().publishResult(
      toolCallId,
      fromJson(ToolResultSchema, result),
      publishedAt,
    );
    return {
      published: outcome.published,
      finalResult: toJson(ToolResultSchema, outcome.finalResult),
    };
  },
  appendHooks: ({ operationId, hooks }) =>
    opened().appendHooks(
      operationId,
      undefined,
      hooks.map((hook) => fromJson(HookSchema, hook)),
    ),
  listHooks: async ({ operationId }) =>
    (await opened().listHooks(operationId)).hooks.map((hook) => hook.id),
  complete: ({ operationId, at }) => opened().markOperationCompleted(operationId, at),
  state: async ({ operationIds }) =>
    Object.fromEntries(await opened().operationState(operationIds)),
};

/** What a failed command reports: the fields tests match on. */
function errorToJson(e) {
  return {
    name: e?.name,
    kind: e?.kind,
    reason: e?.reason,
    message: e instanceof Error ? e.message : String(e),
    code: e?.cause?.code ?? e?.code,
  };
}

function reply(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const lines = createInterface({ input: process.stdin });
// Commands run in arrival order, each started at once: several in flight
// race each other the way concurrent RPCs do.
lines.on('line', (line) => {
  const { id, cmd, ...args } = JSON.parse(line);
  const command = COMMANDS[cmd];
  Promise.resolve()
    .then(() => {
      if (command === undefined) throw new Error(`unknown command ${cmd}`);
      return command(args);
    })
    .then(
      (value) => reply({ id, ok: true, value: value ?? null }),
      (e) => reply({ id, ok: false, error: errorToJson(e) }),
    );
});
lines.on('close', () => {
  Promise.resolve(store?.close()).finally(() => process.exit(0));
});
reply({ id: 0, ok: true, value: { ready: true, uid: process.getuid?.() } });
