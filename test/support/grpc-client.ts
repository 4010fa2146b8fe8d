/**
 * @module `@grpc/grpc-js` clients built from our `.proto` files with
 * `@grpc/proto-loader`: a different protobuf implementation from the
 * sidecar's, as an outside runtime would use. Also helpers to move messages
 * between protobuf-es and proto-loader's object form through the wire format.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type DescMessage, fromBinary, type MessageShape, toBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  type BadRequest,
  BadRequestSchema,
  type ErrorInfo,
  ErrorInfoSchema,
} from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';

const PROTO_ROOT = join(import.meta.dirname, '..', '..', 'proto');

function protoFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(PROTO_ROOT, dir), { withFileTypes: true })) {
      const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.proto')) out.push(rel);
    }
  };
  walk('');
  return out;
}

/** proto-loader's definition of every file under `proto/`. */
export const packageDefinition = protoLoader.loadSync(protoFiles(), {
  includeDirs: [PROTO_ROOT],
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
});

/** A message in proto-loader's object form; its shape is only known at run time. */
// biome-ignore lint/suspicious/noExplicitAny: proto-loader objects are untyped.
export type LoaderObject = Record<string, any>;

/** A client generated at run time by proto-loader; its methods are untyped. */
// biome-ignore lint/suspicious/noExplicitAny: proto-loader clients are untyped.
export type AnyClient = grpc.Client & Record<string, any>;

function clientClass(
  path: string,
): new (
  address: string,
  creds: grpc.ChannelCredentials,
) => AnyClient {
  let node: unknown = grpc.loadPackageDefinition(packageDefinition);
  for (const part of path.split('.')) node = (node as Record<string, unknown>)[part];
  return node as new (
    address: string,
    creds: grpc.ChannelCredentials,
  ) => AnyClient;
}

/** Creates a HookService client. `address` is `host:port` or `unix:/path`. */
export function hookClient(address: string): AnyClient {
  return new (clientClass('agenthooks.v1.HookService'))(address, grpc.credentials.createInsecure());
}

/** Creates a grpc.health.v1.Health client. */
export function healthClient(address: string): AnyClient {
  return new (clientClass('grpc.health.v1.Health'))(address, grpc.credentials.createInsecure());
}

/** Creates a grpc.reflection.v1.ServerReflection client. */
export function reflectionClient(address: string, version: 'v1' | 'v1alpha' = 'v1'): AnyClient {
  return new (clientClass(`grpc.reflection.${version}.ServerReflection`))(
    address,
    grpc.credentials.createInsecure(),
  );
}

/** How a test client connects: its channel credentials and a bearer token. */
export interface ClientSecurity {
  /** Channel credentials; default plaintext. */
  readonly credentials?: grpc.ChannelCredentials;
  /** Sent as `authorization: Bearer <token>` with every call. */
  readonly token?: string;
}

/**
 * Creates a client of `service` (such as `agenthooks.v1.HookService`) with
 * the given credentials, sending the token on every call through an interceptor.
 */
export function securedClient(
  service: string,
  address: string,
  security: ClientSecurity = {},
): AnyClient {
  const Client = clientClass(service) as unknown as new (
    address: string,
    creds: grpc.ChannelCredentials,
    options: grpc.ClientOptions,
  ) => AnyClient;
  const { token } = security;
  const interceptors: grpc.Interceptor[] =
    token === undefined
      ? []
      : [
          (options, nextCall) =>
            new grpc.InterceptingCall(nextCall(options), {
              start(metadata, listener, next) {
                metadata.set('authorization', `Bearer ${token}`);
                next(metadata, listener);
              },
            }),
        ];
  return new Client(address, security.credentials ?? grpc.credentials.createInsecure(), {
    interceptors,
  });
}

/** Calls a unary method and resolves with its response, or rejects with the ServiceError. */
export function unary<T = Record<string, unknown>>(
  client: AnyClient,
  method: string,
  request: unknown,
  options: grpc.CallOptions = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    client[method](
      request,
      new grpc.Metadata(),
      options,
      (err: grpc.ServiceError | null, res: T) => (err ? reject(err) : resolve(res)),
    );
  });
}

/**
 * Converts a protobuf-es message to proto-loader's object form, through the
 * binary wire format (encode with protobuf-es, decode with protobufjs).
 */
export function toLoaderObject<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
): Record<string, unknown> {
  const method = loaderMethod(schema.typeName, 'input');
  return method.requestDeserialize(Buffer.from(toBinary(schema, message))) as Record<
    string,
    unknown
  >;
}

/** Converts a proto-loader response object to a protobuf-es message through the wire format. */
export function fromLoaderObject<Desc extends DescMessage>(
  schema: Desc,
  object: object,
): MessageShape<Desc> {
  const method = loaderMethod(schema.typeName, 'output');
  return fromBinary(schema, method.responseSerialize(object));
}

/** Finds a proto-loader method whose input (or output) is the named message type. */
function loaderMethod(
  typeName: string,
  side: 'input' | 'output',
): protoLoader.MethodDefinition<object, object> {
  for (const service of [HookService, Health]) {
    for (const m of service.methods) {
      if ((side === 'input' ? m.input : m.output).typeName !== typeName) continue;
      const def = packageDefinition[service.typeName] as protoLoader.ServiceDefinition;
      const method = def[m.name];
      if (method !== undefined) return method as protoLoader.MethodDefinition<object, object>;
    }
  }
  throw new Error(`no RPC has ${side} ${typeName}`);
}

/** Reads the `google.rpc.ErrorInfo` of a gRPC error from `grpc-status-details-bin`. */
export function errorInfoOf(err: grpc.ServiceError): ErrorInfo | undefined {
  const bin = err.metadata?.get('grpc-status-details-bin')[0];
  if (!(bin instanceof Buffer)) return undefined;
  const status = fromBinary(StatusSchema, bin);
  for (const detail of status.details) {
    const info = anyUnpack(detail, ErrorInfoSchema);
    if (info !== undefined) return info;
  }
  return undefined;
}

/** Reads the `google.rpc.BadRequest` of a gRPC error from `grpc-status-details-bin`. */
export function badRequestOf(err: grpc.ServiceError): BadRequest | undefined {
  const bin = err.metadata?.get('grpc-status-details-bin')[0];
  if (!(bin instanceof Buffer)) return undefined;
  const status = fromBinary(StatusSchema, bin);
  for (const detail of status.details) {
    const badRequest = anyUnpack(detail, BadRequestSchema);
    if (badRequest !== undefined) return badRequest;
  }
  return undefined;
}

/** Writes a plain JSON object as proto-loader's `google.protobuf.Struct` object form. */
export function toLoaderStruct(value: Record<string, unknown>): LoaderObject {
  return {
    fields: Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toLoaderValue(v)])),
  };
}

function toLoaderValue(value: unknown): LoaderObject {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toLoaderValue) } };
  return { structValue: toLoaderStruct(value as Record<string, unknown>) };
}
