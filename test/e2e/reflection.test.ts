/**
 * Server reflection of the built sidecar, as `grpcurl` uses it: a reflection
 * client written over `@grpc/grpc-js` with the protobuf-es reflection
 * messages resolves the `google.rpc` error details by symbol and reads the
 * proto comments from the `source_code_info` of the files it gets, over v1
 * and v1alpha.
 */
import {
  create,
  createFileRegistry,
  type DescMessage,
  type FileRegistry,
  fromBinary,
  type MessageShape,
  toBinary,
} from '@bufbuild/protobuf';
import {
  type FileDescriptorProto,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
} from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as v1 from '../../gen/grpc/reflection/v1/reflection_pb.js';
import * as v1alpha from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** Field numbers of FileDescriptorProto and its parts, as `SourceCodeInfo.Location.path` uses them. */
const PATH = { messageType: 4, enumType: 5, service: 6, method: 2, enumValue: 2, field: 2 };

type Version = 'v1' | 'v1alpha';

/** The request and response messages of one reflection version. */
const SCHEMAS = {
  v1: { request: v1.ServerReflectionRequestSchema, response: v1.ServerReflectionResponseSchema },
  v1alpha: {
    request: v1alpha.ServerReflectionRequestSchema,
    response: v1alpha.ServerReflectionResponseSchema,
  },
} as const;

type Request = MessageShape<(typeof SCHEMAS)[Version]['request']>;
type Response = MessageShape<(typeof SCHEMAS)[Version]['response']>;

/** Serializers of a grpc-js call from protobuf-es schemas. */
function codec<Desc extends DescMessage>(schema: Desc) {
  return {
    serialize: (m: MessageShape<Desc>) => Buffer.from(toBinary(schema, m)),
    deserialize: (b: Buffer) => fromBinary(schema, b),
  };
}

/** Sends `requests` on one ServerReflectionInfo stream and resolves with every answer. */
function reflect(
  client: grpc.Client,
  version: Version,
  requests: Request['messageRequest'][],
): Promise<Response[]> {
  const { request, response } = SCHEMAS[version];
  const req = codec(request as DescMessage);
  const res = codec(response as DescMessage);
  const call = client.makeBidiStreamRequest(
    `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
    req.serialize,
    res.deserialize,
  );
  return new Promise((resolve, reject) => {
    const answers: Response[] = [];
    call.on('data', (answer: Response) => answers.push(answer));
    call.on('error', reject);
    call.on('end', () => resolve(answers));
    for (const messageRequest of requests) {
      call.write(create(request as DescMessage, { messageRequest }));
    }
    call.end();
  });
}

/** The files of a fileDescriptorResponse, the requested file first. */
function filesOf(answer: Response | undefined): FileDescriptorProto[] {
  const m = answer?.messageResponse;
  if (m?.case !== 'fileDescriptorResponse') {
    throw new Error(`expected files, got ${JSON.stringify(m)}`);
  }
  return m.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b));
}

/** The leading comment at `path` in a file's source info, as `grpcurl describe` prints it. */
function leadingComment(file: FileDescriptorProto, path: number[]): string | undefined {
  return file.sourceCodeInfo?.location.find(
    (l) => l.path.length === path.length && l.path.every((n, i) => n === path[i]),
  )?.leadingComments;
}

/**
 * A registry of a reflection answer's files. The answer lists the requested
 * file first; a FileDescriptorSet lists dependencies first, so sort them.
 *
 * @throws Error when a dependency is missing from the answer.
 */
function registryOf(files: FileDescriptorProto[]): FileRegistry {
  const byName = new Map(files.map((f) => [f.name, f]));
  const ordered: FileDescriptorProto[] = [];
  const seen = new Set<string>();
  const visit = (file: FileDescriptorProto) => {
    if (seen.has(file.name)) return;
    seen.add(file.name);
    for (const name of file.dependency) {
      const dep = byName.get(name);
      if (dep === undefined) throw new Error(`${file.name} imports ${name}, which is not served`);
      visit(dep);
    }
    ordered.push(file);
  };
  files.forEach(visit);
  return createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
}

describe('server reflection of the sidecar process', () => {
  let sidecar: SidecarProcess;
  let client: grpc.Client;

  beforeAll(async () => {
    sidecar = await startSidecar({ http: false });
    client = new grpc.Client(sidecar.grpc, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
  });

  for (const version of ['v1', 'v1alpha'] as const) {
    it(`resolves google.rpc.ErrorInfo, BadRequest and Status by symbol over ${version}`, async () => {
      const answers = await reflect(client, version, [
        { case: 'fileContainingSymbol', value: 'google.rpc.ErrorInfo' },
        { case: 'fileContainingSymbol', value: 'google.rpc.BadRequest.FieldViolation' },
        { case: 'fileContainingSymbol', value: 'google.rpc.Status' },
      ]);
      expect(answers).toHaveLength(3);
      const [errorInfo, badRequest, status] = answers.map(filesOf);
      expect(errorInfo?.[0]?.name).toBe('google/rpc/error_details.proto');
      expect(errorInfo?.[0]?.messageType.map((m) => m.name)).toEqual(
        expect.arrayContaining(['ErrorInfo', 'BadRequest', 'RetryInfo', 'LocalizedMessage']),
      );
      expect(badRequest?.[0]?.name).toBe('google/rpc/error_details.proto');
      expect(status?.map((f) => f.name)).toEqual([
        'google/rpc/status.proto',
        'google/protobuf/any.proto',
      ]);
      // The upstream options come along, so a client maps the files to its googleapis code.
      expect(status?.[0]?.options?.goPackage).toBe(
        'google.golang.org/genproto/googleapis/rpc/status;status',
      );
    });

    it(`lists a known type's extension numbers and answers NOT_FOUND for an unknown type over ${version}`, async () => {
      const [known, unknown] = await reflect(client, version, [
        { case: 'allExtensionNumbersOfType', value: 'agenthooks.v1.HookEvent' },
        { case: 'allExtensionNumbersOfType', value: 'agenthooks.v1.NoSuchType' },
      ]);
      expect(known?.messageResponse).toMatchObject({
        case: 'allExtensionNumbersResponse',
        value: { baseTypeName: 'agenthooks.v1.HookEvent', extensionNumber: [] },
      });
      expect(unknown?.messageResponse).toMatchObject({
        case: 'errorResponse',
        value: { errorCode: grpc.status.NOT_FOUND },
      });
    });

    it(`serves the proto comments of HookService and ErrorReason over ${version}`, async () => {
      const answers = await reflect(client, version, [
        { case: 'fileContainingSymbol', value: 'agenthooks.v1.HookService.DecideToolCall' },
        { case: 'fileContainingSymbol', value: 'agenthooks.v1.ErrorReason' },
      ]);
      const files = filesOf(answers[0]);
      const service = files[0];
      expect(service?.name).toBe('agenthooks/v1/service.proto');
      const serviceIndex = service?.service.findIndex((s) => s.name === 'HookService') ?? -1;
      const methodIndex =
        service?.service[serviceIndex]?.method.findIndex((m) => m.name === 'DecideToolCall') ?? -1;
      expect(methodIndex).toBeGreaterThanOrEqual(0);
      const comment = leadingComment(service as FileDescriptorProto, [
        PATH.service,
        serviceIndex,
        PATH.method,
        methodIndex,
      ]);
      expect(comment).toContain('Decides a tool call before it runs');

      // The dependencies make a complete set: StreamError.status is google.rpc.Status.
      const registry = registryOf(files);
      expect(
        registry.getMessage('agenthooks.v1.StreamError')?.field.status?.message?.typeName,
      ).toBe('google.rpc.Status');

      const errors = filesOf(answers[1])[0] as FileDescriptorProto;
      expect(errors.name).toBe('agenthooks/v1/errors.proto');
      const values = errors.enumType[0]?.value ?? [];
      const locked = values.findIndex((v) => v.name === 'STORE_LOCKED');
      expect(locked).toBeGreaterThan(0);
      expect(leadingComment(errors, [PATH.enumType, 0, PATH.enumValue, locked])).toContain(
        'UNAVAILABLE',
      );
    });
  }
});
