/**
 * @module A webhook receiver for agenthooks, on `node:http` alone (no
 * dependencies): the receiver the example runtimes of `examples/` register.
 *
 * - `POST /control` is a control (a `beforeToolCall` or `afterToolCall` hook
 *   with `responseHandling: RESPONSE_HANDLING_TOOL_CALL`): it answers a
 *   decision, `deny` for `fs/deleteFile` and `allow` for anything else.
 * - Any other `POST` is a notification: it answers 204, and agenthooks
 *   ignores the answer anyway.
 * - A body that is not a JSON object gets a 400, which a control's `onError`
 *   decides about.
 *
 * It prints one JSON line per request, in the order the requests arrived:
 * `{"path":"/control","decision":{"decision":"deny",...},"payload":{...}}`,
 * the payload being the JSON agenthooks posted (`hookId`, `hookType`, the
 * event's fields). The first line says where it listens:
 * `{"listening":"http://127.0.0.1:9000"}`.
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
