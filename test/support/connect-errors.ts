/**
 * @module What a client reads of an error from the sidecar: its code, plain
 * message, `google.rpc.ErrorInfo` reason and the field paths of its
 * `google.rpc.BadRequest`, from a thrown `ConnectError` (any protocol) or
 * from a Connect JSON error body (`{code, message, details}`).
 */
import { fromBinary } from '@bufbuild/protobuf';
import { type Code, ConnectError } from '@connectrpc/connect';
import { BadRequestSchema, ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';

/** One entry of a Connect JSON error's `details`: the message's type name and its base64 bytes. */
export interface ConnectErrorDetail {
  readonly type: string;
  readonly value: string;
}

/** What {@link connectErrorDetails} reads. */
export interface ConnectErrorReading {
  /** The `ErrorInfo` reason; undefined when the error carries none. */
  readonly reason: string | undefined;
  /** The field paths of the `BadRequest`'s violations; empty when it carries none. */
  readonly fields: string[];
}

/**
 * Reads the reason and the violated fields out of a Connect JSON error's `details`.
 *
 * @example connectErrorDetails(body.details) // { reason: 'INVALID_WEBHOOK_URL', fields: ['hooks[0].webhook.url'] }
 */
export function connectErrorDetails(
  details: readonly ConnectErrorDetail[] | undefined,
): ConnectErrorReading {
  const info = details?.find((d) => d.type === 'google.rpc.ErrorInfo');
  const badRequest = details?.find((d) => d.type === 'google.rpc.BadRequest');
  return {
    reason:
      info === undefined
        ? undefined
        : fromBinary(ErrorInfoSchema, Buffer.from(info.value, 'base64')).reason,
    fields:
      badRequest === undefined
        ? []
        : fromBinary(BadRequestSchema, Buffer.from(badRequest.value, 'base64')).fieldViolations.map(
            (v) => v.field,
          ),
  };
}

/** What {@link readConnectError} reads of a thrown error. */
export interface ConnectErrorAnswer extends ConnectErrorReading {
  readonly code: Code;
  /** The message without Connect's `[code]` prefix. */
  readonly message: string;
}

/**
 * Reads a thrown error as a Connect client sees it (anything else becomes
 * Connect's `unknown`).
 *
 * @example readConnectError(await client.registerHooks(bad).catch((e) => e)).reason
 */
export function readConnectError(e: unknown): ConnectErrorAnswer {
  const err = ConnectError.from(e);
  return {
    code: err.code,
    message: err.rawMessage,
    reason: err.findDetails(ErrorInfoSchema)[0]?.reason,
    fields: err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => v.field)),
  };
}
