/**
 * @module The one place that turns errors into RPC statuses: domain errors
 * keep their reason and metadata in a `google.rpc.ErrorInfo` (and a
 * `BadRequest` for invalid fields); anything else becomes INTERNAL with a
 * generic message, its cause logged and never sent.
 */

import type { DescMethod } from '@bufbuild/protobuf';
import { create, toBinary } from '@bufbuild/protobuf';
import { AnySchema, anyPack } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import { BadRequestSchema, ErrorInfoSchema, StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { AgentHooksError, type ErrorKind, InvalidArgumentError } from '../errors.js';

/** `ErrorInfo.domain` of every error agenthooks sends. */
export const ERROR_DOMAIN = 'agenthooks';

/** Reason of an unexpected failure (a bug); its cause stays in the server log. */
export const INTERNAL_REASON = 'INTERNAL';

/** Reason of a request whose bytes (or JSON) cannot be decoded as the method's input message. */
export const MALFORMED_REQUEST_REASON = 'MALFORMED_REQUEST';

/** Reason of a call to a method the sidecar does not implement. */
export const UNIMPLEMENTED_REASON = 'UNIMPLEMENTED';

/**
 * A request message that could not be decoded. The grpc-js codec returns
 * it instead of throwing (grpc-js would answer INTERNAL), and the guard
 * answers it with INVALID_ARGUMENT like every other bad request.
 */
export class MalformedRequest {
  /** The INVALID_ARGUMENT error the call is answered with. */
  readonly error: AgentHooksError;

  /**
   * @param problem What is wrong, appended to the message: for JSON, the
   *   offending field and why (`unknown field`), or protobuf-es's own text.
   * @param field JSON path of the offending field, when known; the error
   *   then carries it in a `BadRequest` like other invalid fields.
   */
  constructor(method: DescMethod, cause: unknown, problem?: string, field?: string) {
    const base = `the request is not a valid ${method.input.typeName} message`;
    const message = problem === undefined ? base : `${base}: ${problem}`;
    this.error =
      field === undefined
        ? new AgentHooksError('invalid_argument', MALFORMED_REQUEST_REASON, message, { cause })
        : new InvalidArgumentError(field, MALFORMED_REQUEST_REASON, message, { cause });
  }
}

/** The UNIMPLEMENTED error of a method the sidecar does not serve. */
export function unimplementedError(method: DescMethod): AgentHooksError {
  return new AgentHooksError(
    'unimplemented',
    UNIMPLEMENTED_REASON,
    `${method.parent.typeName}.${method.name} is not implemented`,
  );
}

/** Codes that say the sidecar failed, not the client: logged with their cause. */
const SERVER_SIDE_CODES: ReadonlySet<Code> = new Set([
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
  Code.Unknown,
]);

/** True for a code that reports a failure of the sidecar rather than of the client's request. */
export function isServerSide(code: Code): boolean {
  return SERVER_SIDE_CODES.has(code);
}

/** Returns the gRPC name of a status code, such as `UNAVAILABLE` (`OK` for 0). */
export function codeName(code: Code | 0): string {
  if (code === 0) return 'OK';
  // gRPC spells it CANCELLED; Connect's enum member is Canceled.
  if (code === Code.Canceled) return 'CANCELLED';
  return (Code[code] ?? 'UNKNOWN').replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

const CODE_BY_KIND: Record<ErrorKind, Code> = {
  invalid_argument: Code.InvalidArgument,
  failed_precondition: Code.FailedPrecondition,
  not_found: Code.NotFound,
  unavailable: Code.Unavailable,
  unimplemented: Code.Unimplemented,
  cancelled: Code.Canceled,
  deadline_exceeded: Code.DeadlineExceeded,
  internal: Code.Internal,
};

/**
 * Returns the ConnectError to answer for `e`. A ConnectError passes through
 * (it already is a status); an AgentHooksError keeps its code, message and
 * ErrorInfo; anything else is INTERNAL.
 */
export function toConnectError(e: unknown): ConnectError {
  if (e instanceof ConnectError) return e;
  if (e instanceof AgentHooksError) {
    const details: ConstructorParameters<typeof ConnectError>[3] = [
      {
        desc: ErrorInfoSchema,
        value: { reason: e.reason, domain: ERROR_DOMAIN, metadata: e.metadata },
      },
    ];
    for (const detail of e.details) {
      details.push({ desc: detail.desc, value: detail.value as never });
    }
    if (e instanceof InvalidArgumentError) {
      details.push({
        desc: BadRequestSchema,
        value: { fieldViolations: [{ field: e.field, description: e.message }] },
      });
    }
    return new ConnectError(e.message, CODE_BY_KIND[e.kind], undefined, details, e);
  }
  return new ConnectError(
    'internal error',
    Code.Internal,
    undefined,
    [{ desc: ErrorInfoSchema, value: { reason: INTERNAL_REASON, domain: ERROR_DOMAIN } }],
    e,
  );
}

/** The gRPC status of an error, as `grpc-status-details-bin` carries it. */
export interface GrpcStatus {
  /** gRPC status code (the numeric value of Connect's Code). */
  readonly code: number;
  /** Status message. */
  readonly message: string;
  /** Serialized `google.rpc.Status`, with the error's details. */
  readonly details: Uint8Array;
}

/** Renders a ConnectError as a gRPC status with serialized `google.rpc.Status` details. */
export function toGrpcStatus(err: ConnectError): GrpcStatus {
  const details = err.details.map((d) => {
    if ('desc' in d) return anyPack(d.desc, create(d.desc, d.value));
    // An incoming detail (from a downstream call) already is an encoded Any.
    return create(AnySchema, { typeUrl: `type.googleapis.com/${d.type}`, value: d.value });
  });
  const status = create(StatusSchema, { code: err.code, message: err.rawMessage, details });
  return { code: err.code, message: err.rawMessage, details: toBinary(StatusSchema, status) };
}
