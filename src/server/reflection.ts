/**
 * @module gRPC server reflection (v1 and v1alpha), so `grpcurl` works with no
 * .proto files. The descriptors come from `gen/descriptors.binpb`, the
 * FileDescriptorSet that `npm run generate` builds from proto/ with source
 * info (`buf build --as-file-descriptor-set`): `grpcurl describe` shows the
 * proto comments, and the `google.rpc` error details that every error carries
 * (`ErrorInfo`, `BadRequest`, `Status`) resolve by symbol. `npm run build`
 * copies the file to dist/gen/, beside the compiled gen/.
 */
import { readFileSync } from 'node:fs';
import {
  create,
  createFileRegistry,
  createRegistry,
  type DescFile,
  type DescService,
  fromBinary,
  type MessageInitShape,
  type Registry,
  toBinary,
} from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { Code, type ServiceImpl } from '@connectrpc/connect';
import {
  type ServerReflectionRequest,
  type ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  type ServerReflection as ServerReflectionV1,
} from '../../gen/grpc/reflection/v1/reflection_pb.js';
import type { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';
import { DESCRIPTOR_SET_URL } from '../descriptor-set.js';
import { extend } from '../extend.js';

export { DESCRIPTOR_SET_URL } from '../descriptor-set.js';

/** A reflection answer as a plain init object, so v1 and v1alpha can both build their message from it. */
type ResponseInit = Exclude<
  MessageInitShape<typeof ServerReflectionResponseSchema>,
  { $typeName: string }
>;

/** Answers reflection questions about a fixed set of files and services. */
export class ReflectionIndex {
  readonly #registry: Registry;
  readonly #files = new Map<string, DescFile>();
  readonly #services: string[];
  /** Each file as sent, encoded on first use. */
  readonly #encoded = new Map<string, Uint8Array>();

  /** Indexes `files` and their transitive dependencies, and lists `services`. */
  constructor(files: readonly DescFile[], services: readonly string[]) {
    const visit = (f: DescFile) => {
      if (this.#files.has(f.proto.name)) return;
      this.#files.set(f.proto.name, f);
      for (const dep of f.dependencies) visit(dep);
    };
    for (const f of files) visit(f);
    this.#registry = createRegistry(...this.#files.values());
    this.#services = [...services];
  }

  /** Answers one request. */
  answer(request: ServerReflectionRequest): ResponseInit {
    const m = request.messageRequest;
    switch (m.case) {
      case 'listServices':
        return this.#ok({
          case: 'listServicesResponse',
          value: {
            service: this.#services.map((name) => ({
              name,
            })),
          },
        });
      case 'fileByFilename': {
        const file = this.#files.get(m.value);
        return file ? this.#filesOf(file) : this.#notFound(`file ${m.value} not found`);
      }
      case 'fileContainingSymbol': {
        const file = this.#fileOfSymbol(m.value);
        return file ? this.#filesOf(file) : this.#notFound(`symbol ${m.value} not found`);
      }
      case 'fileContainingExtension': {
        const extendee = this.#registry.getMessage(m.value.containingType);
        const ext = extendee && this.#registry.getExtensionFor(extendee, m.value.extensionNumber);
        return ext ? this.#filesOf(ext.file) : this.#notFound('extension not found');
      }
      case 'allExtensionNumbersOfType': {
        // As grpc-go's reflection answers it: a type the server does not know is not found.
        if (this.#registry.getMessage(m.value) === undefined) {
          return this.#notFound(`type ${m.value} not found`);
        }
        const numbers: number[] = [];
        for (const file of this.#files.values()) {
          for (const ext of file.extensions) {
            if (ext.extendee.typeName === m.value) numbers.push(ext.number);
          }
        }
        return this.#ok({
          case: 'allExtensionNumbersResponse',
          value: {
            baseTypeName: m.value,
            extensionNumber: numbers,
          },
        });
      }
      default:
        return {
          validHost: '',
          messageResponse: {
            case: 'errorResponse',
            value: {
              errorCode: Code.InvalidArgument,
              errorMessage: 'empty reflection request',
            },
          },
        };
    }
  }

  #fileOfSymbol(name: string): DescFile | undefined {
    const direct = this.#registry.get(name);
    if (direct !== undefined && 'file' in direct) return direct.file;
    // A method symbol is `package.Service.Method`.
    const dot = name.lastIndexOf('.');
    const service = this.#registry.getService(name.slice(0, dot));
    if (service?.methods.some((m) => m.name === name.slice(dot + 1))) return service.file;
    return undefined;
  }

  #filesOf(file: DescFile): ResponseInit {
    // The file first, then every transitive dependency, each once.
    const seen = new Set<string>();
    const ordered: DescFile[] = [];
    const visit = (f: DescFile) => {
      if (seen.has(f.proto.name)) return;
      seen.add(f.proto.name);
      ordered.push(f);
      for (const dep of f.dependencies) visit(dep);
    };
    visit(file);
    return this.#ok({
      case: 'fileDescriptorResponse',
      value: {
        fileDescriptorProto: ordered.map((f) => this.#encode(f)),
      },
    });
  }

  /** Serializes a file once; with source info, descriptor.proto alone is about 100 KB. */
  #encode(file: DescFile): Uint8Array {
    let bytes = this.#encoded.get(file.proto.name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.#encoded.set(file.proto.name, bytes);
    }
    return bytes;
  }

  #ok(messageResponse: ResponseInit['messageResponse']): ResponseInit {
    return { validHost: '', messageResponse };
  }

  #notFound(message: string): ResponseInit {
    return {
      validHost: '',
      messageResponse: {
        case: 'errorResponse',
        value: {
          errorCode: Code.NotFound,
          errorMessage: message,
        },
      },
    };
  }
}

/**
 * Creates the index that the sidecar serves: every file of the descriptor set
 * (our protos, the `google.rpc` error model, health, reflection and their
 * imports), with source info, listing `services`. Reads the set synchronously,
 * once, at start-up.
 *
 * @throws Error when the set is missing or does not match the generated code:
 *   a listed service or one of its methods is not in it (run `npm run generate`).
 * @example
 * const index = createReflectionIndex([
 *   HookService,
 *   Health,
 *   ServerReflectionV1,
 *   ServerReflectionV1Alpha,
 * ]);
 */
export function createReflectionIndex(
  services: readonly DescService[],
  descriptorSet: URL | Uint8Array = DESCRIPTOR_SET_URL,
): ReflectionIndex {
  const bytes = descriptorSet instanceof URL ? readFileSync(descriptorSet) : descriptorSet;
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, bytes));
  for (const service of services) {
    const described = registry.getService(service.typeName);
    const missing = service.methods.filter(
      (m) => !described?.methods.some((d) => d.name === m.name),
    );
    if (described === undefined || missing.length > 0) {
      throw new Error(
        `the descriptor set does not match the generated code: ${service.typeName} ${
          described === undefined ? 'is missing' : `lacks ${missing.map((m) => m.name).join(', ')}`
        }; run npm run generate`,
      );
    }
  }
  return new ReflectionIndex(
    [...registry.files],
    services.map((s) => s.typeName),
  );
}

/**
 * Creates the v1 reflection service over an index, which `index()` gives on
 * the first request (building it takes about 100 ms and a few MiB that a
 * sidecar nobody inspects need not spend).
 */
export function createReflectionService(
  index: () => ReflectionIndex,
): ServiceImpl<typeof ServerReflectionV1> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        // `create` copies a v1alpha request field by field: the wire format is the same.
        yield create(
          ServerReflectionResponseSchema,
          extend(index().answer(request), {
            originalRequest: request as MessageInitShape<typeof ServerReflectionRequestSchema>,
          }),
        );
      }
    },
  };
}

/**
 * Creates the v1alpha reflection service; its messages are the v1 messages
 * under another package name, so they share the wire format.
 */
export function createReflectionAlphaService(
  index: () => ReflectionIndex,
): ServiceImpl<typeof ServerReflectionV1Alpha> {
  return createReflectionService(index) as unknown as ServiceImpl<typeof ServerReflectionV1Alpha>;
}
