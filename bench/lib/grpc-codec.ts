/**
 * @module The one gRPC client of the bench: `@grpc/grpc-js` with protobuf-es
 * codecs (`toBinary`/`fromBinary` of the generated schemas in `gen/`), so the
 * client costs the same against the echo baselines and the sidecar. Servers
 * (the echo baseline) build their method definitions with the same codecs.
 */
import { type DescMessage, fromBinary, type MessageShape, toBinary } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';

/** The service every bench call goes to. */
const HOOK_SERVICE = 'agenthooks.v1.HookService';

/** Deadline of every benchmark call; a call that takes longer fails the scenario. */
export const CALL_DEADLINE_MS = 30_000;

/** Channel options of every bench client: one HTTP/2 connection, no message size cap. */
export const CLIENT_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
};

/** Returns a grpc-js serializer of protobuf-es messages of `schema`. */
export function serializer<D extends DescMessage>(schema: D): (m: MessageShape<D>) => Buffer {
  return (message) => Buffer.from(toBinary(schema, message));
}

/** Returns a grpc-js deserializer into protobuf-es messages of `schema`. */
export function deserializer<D extends DescMessage>(schema: D): (b: Buffer) => MessageShape<D> {
  return (bytes) => fromBinary(schema, bytes);
}

/** Creates a plaintext client on `address` (`host:port`). */
export function createClient(address: string): grpc.Client {
  return new grpc.Client(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
}

/** A unary method bound to a client: call it with a request, get the response. */
export type UnaryCall<Req, Res> = (request: Req) => Promise<Res>;

/**
 * Binds a unary method (`path` such as `/agenthooks.v1.HookService/DecideToolCall`)
 * with protobuf-es codecs of its input and output schemas.
 */
export function unaryMethod<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  path: string,
  input: I,
  output: O,
): UnaryCall<MessageShape<I>, MessageShape<O>> {
  const serialize = serializer(input);
  const deserialize = deserializer(output);
  const metadata = new grpc.Metadata();
  return (request) =>
    new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        path,
        serialize,
        deserialize,
        request,
        metadata,
        { deadline: Date.now() + CALL_DEADLINE_MS },
        (err, response) => {
          if (err !== null || response === undefined)
            reject(err ?? new Error(`${path}: no response`));
          else resolve(response);
        },
      );
    });
}

/** Opens a bidi stream on `path` with protobuf-es codecs. */
export function bidiStream<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  path: string,
  input: I,
  output: O,
): grpc.ClientDuplexStream<MessageShape<I>, MessageShape<O>> {
  return client.makeBidiStreamRequest(path, serializer(input), deserializer(output));
}

/** Waits until the client's channel is connected (or fails after `timeoutMs`). */
export function waitForReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve()));
  });
}

/**
 * Returns grpc-js method definitions of a unary and a bidi echo method whose
 * messages are `unary` and `stream`, with protobuf-es codecs on both sides.
 */
export function echoDefinition<U extends DescMessage, S extends DescMessage>(
  unary: U,
  stream: S,
): grpc.ServiceDefinition {
  return {
    Unary: {
      path: ECHO_UNARY_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: serializer(unary),
      requestDeserialize: deserializer(unary),
      responseSerialize: serializer(unary),
      responseDeserialize: deserializer(unary),
      originalName: 'unary',
    },
    Stream: {
      path: ECHO_STREAM_PATH,
      requestStream: true,
      responseStream: true,
      requestSerialize: serializer(stream),
      requestDeserialize: deserializer(stream),
      responseSerialize: serializer(stream),
      responseDeserialize: deserializer(stream),
      originalName: 'stream',
    },
  } as grpc.ServiceDefinition;
}

/** Path of the unary echo method of the baseline server. */
export const ECHO_UNARY_PATH = '/bench.v1.Echo/Unary';
/** Path of the bidi echo method of the baseline server. */
export const ECHO_STREAM_PATH = '/bench.v1.Echo/Stream';

/**
 * Binds a unary method of `agenthooks.v1.HookService` with its protobuf-es
 * codecs.
 *
 * @example const decide = hookMethod(client, HookService.method.decideToolCall);
 */
export function hookMethod<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: { readonly name: string; readonly input: I; readonly output: O },
): UnaryCall<MessageShape<I>, MessageShape<O>> {
  return unaryMethod(client, `/${HOOK_SERVICE}/${method.name}`, method.input, method.output);
}
