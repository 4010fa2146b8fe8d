/**
 * @module A webhook receiver for agenthooks, on `node:http` alone (no
 * dependencies): the receiver the example runtimes of `examples/` register.
 *
 * - `POST /control` is a control (a `beforeToolCall` or `afterToolCall` hook
 *   with `responseHandling: RESPONSE_HANDLING_TOOL_CALL`): it answers a
 *   decision, `deny` for `fs/deleteFile` and `allow` for anything else.
 * - `POST /redact` is a modifying hook at `transformContext`: it answers
 *   `{ "messages": [...] }` with every card number in a message's text
 *   content replaced by `[redacted]`, or `{}` (no change) when there is none.
 * - `POST /stop` is a modifying hook at `shouldStopAfterTurn`, a turn budget:
 *   it answers `{ "stop": true }` from iteration 2 on, `{ "stop": false }`
 *   before.
 * - Any other `POST` is a notification: it answers 204, and agenthooks
 *   ignores the answer anyway.
 * - A body that is not a JSON object gets a 400, which a control's or a
 *   modifying hook's `onError` decides about.
 *
 * It prints one JSON line per request, in the order the requests arrived:
 * `{"path":"/control","decision":{"decision":"deny",...},"payload":{...}}`
 * for a control, `{"path":"/redact","result":{"messages":[...]},"payload":{...}}`
 * for a modifying hook, `{"path":"/events","payload":{...}}` for a
 * notification; the payload is the JSON agenthooks posted (`hookId`,
 * `hookType` and the event's fields, or for a modifying hook the point's
 * context with `operationId`, `hookId`, `point` and `plugin`). The first line says where it
 * listens: `{"listening":"http://127.0.0.1:9000"}`.
 *
 * Environment: PORT (default 9000; 0 picks a free port) and HOST (default
 * 127.0.0.1). SIGINT or SIGTERM stops it.
 *
 * ```sh
 * node examples/receiver/receiver.mjs
 * ```
 */
import http from 'node:http';

const HOST = process.env.HOST || '127.0.0.1';
const PORT = Number(process.env.PORT ?? 9000);
const CONTROL_PATH = '/control';
const DENY_REASON = 'Deleting files is not allowed.';
/** Turns an agent loop may take: the stop endpoint ends the loop after this many. */
const TURN_BUDGET = 2;
/** A card number: 13 to 19 digits, which may be grouped by single spaces or dashes. */
const CARD_NUMBER = /\b\d(?:[ -]?\d){12,18}\b/g;
const REDACTED = '[redacted]';

/**
 * Decides a tool call: denies deleting files, allows the rest. A deny's
 * `reason` is what the model and the tool card show; without one agenthooks
 * uses `Blocked by beforeToolCall hook.`.
 */
function decide(payload) {
  if (payload.identifier === 'fs' && payload.apiName === 'deleteFile') {
    return { decision: 'deny', reason: DENY_REASON };
  }
  return { decision: 'allow' };
}

/**
 * Redacts card numbers in the text content of the context's messages
 * (`transformContext`). Answers only what changed: the whole `messages`, which
 * replace the runtime's, or `{}` for no change. Other members of a message
 * (`id`, `role`, `toolCalls`) stay as they are.
 */
function redact(payload) {
  if (!Array.isArray(payload.messages)) return {};
  let changed = false;
  const messages = payload.messages.map((message) => {
    if (typeof message?.content !== 'string') return message;
    const content = message.content.replace(CARD_NUMBER, REDACTED);
    if (content === message.content) return message;
    changed = true;
    return { ...message, content };
  });
  return changed ? { messages } : {};
}

/** Ends the agent loop once it used its turn budget (`shouldStopAfterTurn`). */
function stopAfterTurn(payload) {
  return { stop: Number(payload.iteration) >= TURN_BUDGET };
}

/** The modifying hooks, by path: each returns the result its hook answers. */
const MODIFIERS = new Map([
  ['/redact', redact],
  ['/stop', stopAfterTurn],
]);

/** Answers one request once its body is complete. */
function answer(req, res, body) {
  let payload;
  try {
    payload = JSON.parse(body);
  } catch {
    payload = undefined;
  }
  // agenthooks always posts an object; `null`, an array or a number would crash the rules below.
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end('expected a JSON object');
    return;
  }
  if (req.url === CONTROL_PATH) {
    const decision = decide(payload);
    console.log(JSON.stringify({ path: req.url, decision, payload }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(decision));
    return;
  }
  const modify = MODIFIERS.get(req.url);
  if (modify !== undefined) {
    const result = modify(payload);
    console.log(JSON.stringify({ path: req.url, result, payload }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result));
    return;
  }
  console.log(JSON.stringify({ path: req.url, payload }));
  res.writeHead(204);
  res.end();
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' });
    res.end();
    return;
  }
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => answer(req, res, Buffer.concat(chunks).toString('utf8')));
});

server.listen(PORT, HOST, () => {
  const { address, port } = server.address();
  console.log(JSON.stringify({ listening: `http://${address}:${port}` }));
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    server.close();
    // agenthooks keeps its connections alive; close them so that the process ends now.
    server.closeAllConnections();
  });
}
