/**
 * @module The error details of a Connect JSON error body (`{code, message,
 * details}`) as a Connect client reads them: the `google.rpc.ErrorInfo`
 * reason and the field paths of the `google.rpc.BadRequest`.
 */
import { fromBinary } from '@bufbuild/protobuf';
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
