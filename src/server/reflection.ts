/**
 * @module gRPC server reflection (v1 and v1alpha), built from the protobuf-es
 * descriptors of the services we serve, so `grpcurl` works with no .proto
 * files.
 */
import {
  create,
  createRegistry,
  type DescFile,
  type MessageInitShape,
  type Registry,
  toBinary,
} from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { Code, type ServiceImpl } from '@connectrpc/connect';
import {
  type ServerReflectionRequest,
  type ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  type ServerReflection as ServerReflectionV1,
} from '../../gen/grpc/reflection/v1/reflection_pb.js';
import type { ServerReflection as ServerReflectionV1Alpha } from '../../gen/grpc/reflection/v1alpha/reflection_pb.js';

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
        fileDescriptorProto: ordered.map((f) => toBinary(FileDescriptorProtoSchema, f.proto)),
      },
    });
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

/** Creates the v1 reflection service over an index. */
export function createReflectionService(
  index: ReflectionIndex,
): ServiceImpl<typeof ServerReflectionV1> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        // `create` copies a v1alpha request field by field: the wire format is the same.
        yield create(ServerReflectionResponseSchema, {
          ...index.answer(request),
          originalRequest: request as MessageInitShape<typeof ServerReflectionRequestSchema>,
        });
      }
    },
  };
}

/**
 * Creates the v1alpha reflection service; its messages are the v1 messages
 * under another package name, so they share the wire format.
 */
export function createReflectionAlphaService(
  index: ReflectionIndex,
): ServiceImpl<typeof ServerReflectionV1Alpha> {
  return createReflectionService(index) as unknown as ServiceImpl<typeof ServerReflectionV1Alpha>;
}
