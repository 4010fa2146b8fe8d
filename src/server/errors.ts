/**
 * @module The one place that turns errors into RPC statuses: domain errors
 * keep their reason and metadata in a `google.rpc.ErrorInfo` (and a
 * `BadRequest` for invalid fields); anything else becomes INTERNAL with a
 * generic message, its cause logged and never sent.
 */
import { create, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { AnySchema, anyPack } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import { BadRequestSchema, ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { type Status, StatusSchema } from '../../gen/google/rpc/status_pb.js';
import {
  AgentHooksError,
  type ErrorKind,
  type ErrorReasonName,
  InvalidArgumentError,
} from '../errors.js';

/** `ErrorInfo.domain` of every error agenthooks sends. */
export const ERROR_DOMAIN = 'agenthooks';

/** Reason of an unexpected failure (a bug); its cause stays in the server log. */
export const INTERNAL_REASON: ErrorReasonName = 'INTERNAL';

/**
 * Returns the `google.rpc.ErrorInfo` detail of an error with `reason`, in the
 * agenthooks domain. The only way to build one: its type refuses a reason
 * that `agenthooks.v1.ErrorReason` does not declare.
 *
 * @example
 * new ConnectError('agenthooks is shutting down', Code.Unavailable, undefined, [
 *   errorInfo('SHUTTING_DOWN'),
 * ]);
 */
export function errorInfo(
  reason: ErrorReasonName,
  metadata: Record<string, string> = {},
): { desc: typeof ErrorInfoSchema; value: MessageInitShape<typeof ErrorInfoSchema> } {
  return { desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN, metadata } };
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
      errorInfo(e.reason, e.metadata),
    ];
    for (const detail of e.details) {
      details.push({ desc: detail.desc, value: detail.value as never });
    }
    if (e instanceof InvalidArgumentError) {
      details.push({
        desc: BadRequestSchema,
        value: { fieldViolations: [{ field: e.field, description: e.message, reason: e.reason }] },
      });
    }
    return new ConnectError(e.message, CODE_BY_KIND[e.kind], undefined, details, e);
  }
  return new ConnectError(
    'internal error',
    Code.Internal,
    undefined,
    [errorInfo(INTERNAL_REASON)],
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

/** Returns the `google.rpc.Status` of a ConnectError: its code, message and details. */
export function toStatus(err: ConnectError): Status {
  const details = err.details.map((d) => {
    if ('desc' in d) return anyPack(d.desc, create(d.desc, d.value));
    // An incoming detail (from a downstream call) already is an encoded Any.
    return create(AnySchema, { typeUrl: `type.googleapis.com/${d.type}`, value: d.value });
  });
  return create(StatusSchema, { code: err.code, message: err.rawMessage, details });
}

/** Renders a ConnectError as a gRPC status with serialized `google.rpc.Status` details. */
export function toGrpcStatus(err: ConnectError): GrpcStatus {
  const status = toStatus(err);
  return { code: err.code, message: err.rawMessage, details: toBinary(StatusSchema, status) };
}
