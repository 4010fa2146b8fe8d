/**
 * @module The floor of the gRPC scenarios, run as its own child process like
 * the sidecar: a bare `@grpc/grpc-js` server with a unary echo of
 * `DecideToolCallRequest` and a bidi echo of `DispatchStreamRequest`, both
 * with the protobuf-es codecs (`toBinary`/`fromBinary` of the schemas in
 * `gen/`) the sidecar uses. It prints `{"port": N}` once it listens on
 * 127.0.0.1 (port 0) and stops on SIGTERM.
 *
 * Usage: `node dist/bench/echo-server.js`
 */
import * as grpc from '@grpc/grpc-js';
import {
  type DecideToolCallRequest,
  DecideToolCallRequestSchema,
  type DispatchStreamRequest,
  DispatchStreamRequestSchema,
} from '../gen/agenthooks/v1/service_pb.js';
import { echoDefinition } from './lib/grpc-codec.js';

const server = new grpc.Server();
server.addService(echoDefinition(DecideToolCallRequestSchema, DispatchStreamRequestSchema), {
  unary: (
    call: grpc.ServerUnaryCall<DecideToolCallRequest, DecideToolCallRequest>,
    callback: grpc.sendUnaryData<DecideToolCallRequest>,
  ) => callback(null, call.request),
  stream: (call: grpc.ServerDuplexStream<DispatchStreamRequest, DispatchStreamRequest>) => {
    call.on('data', (message: DispatchStreamRequest) => call.write(message));
    call.on('end', () => call.end());
    call.on('error', () => call.end());
  },
});
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) {
    process.stderr.write(`echo server: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.once('SIGTERM', () => {
  server.forceShutdown();
  // A normal exit, so `--cpu-prof` writes its profile.
  process.exit(0);
});
