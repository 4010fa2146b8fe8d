/**
 * @module The floor of the bench: the least a server can do and still do the
 * sidecar's work for one decision, on the same stack, so that a ratio to it
 * says what agenthooks itself costs. Run as its own child process like the
 * sidecar. It serves the real method paths of `agenthooks.v1.HookService`, so
 * one load generator command (ghz, vegeta) drives either server unchanged:
 * - gRPC `DecideToolCall` (grpc-js, protobuf-es codecs): decodes the request,
 *   makes `--controls` sequential undici POSTs of the tool call context JSON
 *   to the receiver's `/allow` (one pooled Agent), parses each answer, and
 *   answers allow with one outcome per control, the shape and size of the
 *   sidecar's answer;
 * - gRPC `DispatchStream`: decodes each event and acks it with its event id
 *   (the stream floor);
 * - Connect JSON `DecideToolCall` over HTTP/1.1 (`node:http`, protobuf-es
 *   JSON codecs) on a second port, with the same work as the gRPC method.
 * Prints `{"port": N, "httpPort": M}` once both listen on 127.0.0.1; stops on
 * SIGTERM.
 *
 * Usage: `node dist/bench/floor-server.js --receiver http://127.0.0.1:P --controls N`
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import {
  create,
  type DescMessage,
  fromBinary,
  fromJson,
  type JsonObject,
  type MessageShape,
  toBinary,
  toJson,
} from '@bufbuild/protobuf';
import { DurationSchema } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { Agent } from 'undici';
import {
  type HookOutcome,
  HookOutcomeSchema,
  HookOutcomeStatus,
  HookSource,
} from '../gen/agenthooks/v1/decisions_pb.js';
import { HookType, ToolCallContextSchema } from '../gen/agenthooks/v1/events_pb.js';
import { ModifyPoint } from '../gen/agenthooks/v1/hooks_pb.js';
import {
  type DecideToolCallRequest,
  DecideToolCallRequestSchema,
  type DecideToolCallResponse,
  DecideToolCallResponseSchema,
  type DispatchStreamRequest,
  DispatchStreamRequestSchema,
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
  HookService,
  type ModifyRequest,
  ModifyRequestSchema,
  type ModifyResponse,
  ModifyResponseSchema,
} from '../gen/agenthooks/v1/service_pb.js';
import { ALLOW_PATH, MODIFY_PATH } from './lib/messages.js';

const { values } = parseArgs({
  options: {
    receiver: { type: 'string', default: '' },
    controls: { type: 'string', default: '0' },
    'modify-hooks': { type: 'string', default: '0' },
  },
});
const modifyHooks = Number(values['modify-hooks']);
if (!Number.isInteger(modifyHooks) || modifyHooks < 0) {
  throw new Error('--modify-hooks must be >= 0');
}
const controls = Number(values.controls);
if (!Number.isInteger(controls) || controls < 0) throw new Error('--controls must be >= 0');
if ((controls > 0 || modifyHooks > 0) && values.receiver === '') {
  throw new Error('--receiver is needed with controls or modifying hooks');
}

/** Nanoseconds per second, for the outcome's duration. */
const NS_PER_S = 1_000_000_000n;
const receiver = values.receiver === '' ? undefined : new URL(values.receiver);
const agent = new Agent({ connections: 64 });
const hookIds = Array.from({ length: controls }, (_, i) => `policy-${i}`);

/** The headers of the sidecar's webhook requests (`fetchHeaders` in `src/delivery/webhook.ts`). */
const POST_HEADERS = {
  'content-type': 'application/json',
  accept: '*/*',
  'accept-language': '*',
  'sec-fetch-mode': 'cors',
  'user-agent': 'node',
};

/** POSTs a JSON body to the receiver; resolves with the answer's status and text. */
async function postJson(path: string, body: string): Promise<{ status: number; text: string }> {
  const response = await agent.request({
    origin: (receiver as URL).origin,
    path,
    method: 'POST',
    headers: POST_HEADERS,
    body,
  });
  return { status: response.statusCode, text: await response.body.text() };
}

/** A DELIVERED outcome of a hook whose request started at `started` (hrtime). */
function delivered(
  init: Pick<HookOutcome, 'hookId' | 'operationId'> &
    Partial<Pick<HookOutcome, 'hookType' | 'point' | 'critical'>>,
  httpStatus: number,
  started: bigint,
): HookOutcome {
  const elapsed = process.hrtime.bigint() - started;
  return create(HookOutcomeSchema, {
    ...init,
    source: HookSource.CALLER,
    status: HookOutcomeStatus.DELIVERED,
    httpStatus,
    duration: create(DurationSchema, {
      seconds: elapsed / NS_PER_S,
      nanos: Number(elapsed % NS_PER_S),
    }),
  });
}

/** Decides one tool call: the sidecar's work for `controls` controls that allow. */
async function decide(request: DecideToolCallRequest): Promise<DecideToolCallResponse> {
  const context = request.event?.context;
  if (context === undefined) throw new Error('event.context: required');
  const outcomes: HookOutcome[] = [];
  if (receiver !== undefined && controls > 0) {
    const base = toJson(ToolCallContextSchema, context) as JsonObject;
    for (const hookId of hookIds) {
      const started = process.hrtime.bigint();
      const body = JSON.stringify({ ...base, hookId, hookType: 'beforeToolCall' });
      const { status, text } = await postJson(ALLOW_PATH, body);
      const answer = JSON.parse(text) as { decision?: unknown };
      if (answer.decision !== 'allow') throw new Error(`${hookId}: did not allow`);
      outcomes.push(
        delivered(
          {
            hookId,
            hookType: HookType.BEFORE_TOOL_CALL,
            operationId: context.operationId,
            critical: true,
          },
          status,
          started,
        ),
      );
    }
  }
  return create(DecideToolCallResponseSchema, {
    decision: { outcome: { case: 'allow', value: { controlsConsulted: controls } } },
    outcomes,
  });
}

/** Acks one stream event, as the sidecar does for an event no hook matches. */
/**
 * `Modify` as the leanest server would do it: checks the context is a JSON
 * object, POSTs it with the hook's fields to each hook, checks each answer
 * is a JSON object, and answers the last one as the result.
 */
async function modify(request: ModifyRequest): Promise<ModifyResponse> {
  const context = request.contextJson;
  const parsed: unknown = JSON.parse(context);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error('contextJson: not a JSON object');
  }
  let result = '{}';
  const outcomes: HookOutcome[] = [];
  for (let i = 0; i < modifyHooks && receiver !== undefined; i++) {
    const started = process.hrtime.bigint();
    const hookId = `modify-${i}`;
    const body = `${context.slice(0, context.lastIndexOf('}'))},"hookId":${JSON.stringify(hookId)},"point":"transformContext","plugin":""}`;
    const { status, text } = await postJson(MODIFY_PATH, body);
    const answer: unknown = JSON.parse(text);
    if (typeof answer !== 'object' || answer === null) throw new Error(`${hookId}: not an object`);
    result = text;
    outcomes.push(
      delivered(
        { hookId, point: ModifyPoint.TRANSFORM_CONTEXT, operationId: request.operationId },
        status,
        started,
      ),
    );
  }
  return create(ModifyResponseSchema, { outcome: { case: 'resultJson', value: result }, outcomes });
}

function ack(request: DispatchStreamRequest): DispatchStreamResponse {
  return create(DispatchStreamResponseSchema, { eventId: request.eventId });
}

function codec<D extends DescMessage>(schema: D) {
  return {
    serialize: (message: MessageShape<D>) => Buffer.from(toBinary(schema, message)),
    deserialize: (bytes: Buffer) => fromBinary(schema, bytes),
  };
}

const decideCodec = codec(DecideToolCallRequestSchema);
const decideAnswer = codec(DecideToolCallResponseSchema);
const streamIn = codec(DispatchStreamRequestSchema);
const streamOut = codec(DispatchStreamResponseSchema);
const modifyIn = codec(ModifyRequestSchema);
const modifyOut = codec(ModifyResponseSchema);
const decidePath = `/${HookService.typeName}/${HookService.method.decideToolCall.name}`;
const modifyPath = `/${HookService.typeName}/${HookService.method.modify.name}`;
const streamPath = `/${HookService.typeName}/${HookService.method.dispatchStream.name}`;

/** A unary grpc-js handler answering `answer`'s response, or INTERNAL with its error. */
function unary<Req, Res>(answer: (request: Req) => Promise<Res>) {
  return (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
    answer(call.request).then(
      (response) => callback(null, response),
      (e: unknown) =>
        callback({ code: grpc.status.INTERNAL, details: String(e) } as grpc.ServiceError),
    );
  };
}

const server = new grpc.Server({
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
});
server.addService(
  {
    DecideToolCall: {
      path: decidePath,
      requestStream: false,
      responseStream: false,
      requestSerialize: decideCodec.serialize,
      requestDeserialize: decideCodec.deserialize,
      responseSerialize: decideAnswer.serialize,
      responseDeserialize: decideAnswer.deserialize,
      originalName: 'decideToolCall',
    },
    Modify: {
      path: modifyPath,
      requestStream: false,
      responseStream: false,
      requestSerialize: modifyIn.serialize,
      requestDeserialize: modifyIn.deserialize,
      responseSerialize: modifyOut.serialize,
      responseDeserialize: modifyOut.deserialize,
      originalName: 'modify',
    },
    DispatchStream: {
      path: streamPath,
      requestStream: true,
      responseStream: true,
      requestSerialize: streamIn.serialize,
      requestDeserialize: streamIn.deserialize,
      responseSerialize: streamOut.serialize,
      responseDeserialize: streamOut.deserialize,
      originalName: 'dispatchStream',
    },
  } as grpc.ServiceDefinition,
  {
    DecideToolCall: unary(decide),
    Modify: unary(modify),
    DispatchStream: (
      call: grpc.ServerDuplexStream<DispatchStreamRequest, DispatchStreamResponse>,
    ) => {
      call.on('data', (message: DispatchStreamRequest) => call.write(ack(message)));
      call.on('end', () => call.end());
      call.on('error', () => call.end());
    },
  },
);

/** Connect JSON (unary, HTTP/1.1): the same decision with JSON codecs. */
const http = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const fail = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'internal', message }));
    };
    if (req.method !== 'POST' || req.url !== decidePath) {
      fail(404, 'not found');
      return;
    }
    let request: DecideToolCallRequest;
    try {
      request = fromJson(
        DecideToolCallRequestSchema,
        JSON.parse(Buffer.concat(chunks).toString('utf8')),
      );
    } catch (e: unknown) {
      fail(400, String(e));
      return;
    }
    decide(request).then(
      (response) => {
        const body = JSON.stringify(toJson(DecideToolCallResponseSchema, response));
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
      },
      (e: unknown) => fail(500, String(e)),
    );
  });
});

server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) {
    process.stderr.write(`floor server: ${err.message}\n`);
    process.exit(1);
  }
  http.listen(0, '127.0.0.1', () => {
    const address = http.address();
    const httpPort = typeof address === 'object' && address !== null ? address.port : 0;
    process.stdout.write(`${JSON.stringify({ port, httpPort })}\n`);
  });
});
process.once('SIGTERM', () => {
  server.forceShutdown();
  http.close();
  // A normal exit, so `--cpu-prof` writes its profile.
  process.exit(0);
});
