/**
 * @module The one place that turns errors into RPC statuses: domain errors
 * keep their reason and metadata in a `google.rpc.ErrorInfo` (and a
 * `BadRequest` for invalid fields); anything else becomes INTERNAL with a
 * generic message, its cause logged and never sent.
 */
import { create, type DescMethod, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
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

/** Reason of a request whose bytes (or JSON) cannot be decoded as the method's input message. */
export const MALFORMED_REQUEST_REASON = 'MALFORMED_REQUEST';

/** Reason of a call to a method the sidecar does not implement. */
export const UNIMPLEMENTED_REASON = 'UNIMPLEMENTED';

/**
 * A request message refused before it was decoded. The grpc-js codec
 * returns it instead of throwing (grpc-js would answer INTERNAL), and the
 * guard answers it with its error like every other bad request.
 */
export class RefusedRequest {
  constructor(
    /** The error the call is answered with. */
    readonly error: AgentHooksError,
  ) {}
}

/** A request message that could not be decoded: INVALID_ARGUMENT. */
export class MalformedRequest extends RefusedRequest {
  /**
   * @param problem What is wrong, appended to the message: for JSON, the
   *   offending field and why (`unknown field`), or protobuf-es's own text.
   * @param field JSON path of the offending field, when known; the error
   *   then carries it in a `BadRequest` like other invalid fields.
   */
  constructor(method: DescMethod, cause: unknown, problem?: string, field?: string) {
    const base = `the request is not a valid ${method.input.typeName} message`;
    const message = problem === undefined ? base : `${base}: ${problem}`;
    super(
      field === undefined
        ? new AgentHooksError('invalid_argument', MALFORMED_REQUEST_REASON, message, { cause })
        : new InvalidArgumentError(field, MALFORMED_REQUEST_REASON, message, { cause }),
    );
  }
}

/**
 * A request message larger than `--max-message-bytes` (decompressed, when it
 * came compressed): RESOURCE_EXHAUSTED, `MESSAGE_TOO_LARGE`, the bound in
 * `metadata.limit`. Over native gRPC grpc-js refuses the message itself, and
 * `grpc-refusals.ts` gives its status this error.
 */
export class TooLargeRequest extends RefusedRequest {
  /** @param bound What sets the limit, as the message names it. */
  constructor(limit: number, bound = '--max-message-bytes') {
    super(
      new AgentHooksError(
        'resource_exhausted',
        'MESSAGE_TOO_LARGE',
        `the request message is larger than ${bound} (${limit} bytes)`,
        { metadata: { limit: String(limit) } },
      ),
    );
  }
}

/** A compressed request message that does not decompress. */
export const NOT_DECOMPRESSIBLE = 'the message does not decompress';
/** A request message flagged compressed although the request names no encoding. */
export const COMPRESSED_WITHOUT_ENCODING =
  'the message is compressed, but the request names no encoding';
/** A request whose transport holds no message, or more than its unary method takes. */
export const NO_MESSAGE = 'the request has no message';
/** See {@link NO_MESSAGE}. */
export const EXTRA_MESSAGE = 'the request has more than one message';

/**
 * The error of a call whose timeout header (`grpc-timeout`,
 * `connect-timeout-ms`) is not a timeout: INVALID_ARGUMENT, `INVALID_TIMEOUT`,
 * the header in `metadata.header`.
 */
export function invalidTimeout(header: string, value: string): AgentHooksError {
  return new AgentHooksError(
    'invalid_argument',
    'INVALID_TIMEOUT',
    `${header}: not a timeout: ${JSON.stringify(value)}`,
    { metadata: { header } },
  );
}

/** When a call's deadline passed: before its request had arrived in full (its method never ran). */
export const BEFORE_REQUEST = 'before its request arrived';
/** When a call's deadline passed: while its method ran, before its answer went out. */
export const BEFORE_ANSWER = 'before it was answered';

/**
 * DEADLINE_EXCEEDED, reason `DEADLINE_EXCEEDED`: the call's deadline passed
 * `when` ({@link BEFORE_REQUEST} or {@link BEFORE_ANSWER}). Every protocol
 * answers a deadline with it, grpc-js's own included (`grpc-refusals.ts`).
 */
export function deadlineExceeded(when: string, cause?: unknown): AgentHooksError {
  return new AgentHooksError(
    'deadline_exceeded',
    'DEADLINE_EXCEEDED',
    `the call’s deadline passed ${when}`,
    cause === undefined ? undefined : { cause },
  );
}

/** Reason of a request message that would decode into too many values. */
export const MESSAGE_TOO_COMPLEX_REASON = 'MESSAGE_TOO_COMPLEX';

/**
 * A request message that would decode into more than `limit` nodes
 * (`message-nodes.ts`): RESOURCE_EXHAUSTED, refused before decoding it.
 */
export class TooComplexRequest extends RefusedRequest {
  constructor(method: DescMethod, limit: number) {
    super(
      new AgentHooksError(
        'resource_exhausted',
        MESSAGE_TOO_COMPLEX_REASON,
        `the ${method.input.typeName} message would decode into more than ${limit} values (messages, list elements, map entries); --max-message-nodes bounds them`,
        { metadata: { limit: String(limit) } },
      ),
    );
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

/**
 * The UNIMPLEMENTED error of a bidi stream (`DispatchStream`, `Handle`)
 * called on the HTTP listener: over HTTP/1.1 neither Connect nor gRPC-Web
 * carries one, so it is served on the gRPC listener only.
 */
export function grpcListenerOnly(method: DescMethod): AgentHooksError {
  return new AgentHooksError(
    'unimplemented',
    UNIMPLEMENTED_REASON,
    `${method.parent.typeName}.${method.name} is a bidirectional stream, served over native gRPC on the gRPC listener only`,
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
  resource_exhausted: Code.ResourceExhausted,
  internal: Code.Internal,
};

/**
 * Longest status message, `BadRequest` description, field path and
 * `ErrorInfo.metadata` value an error carries, in UTF-16 code units: an
 * error may quote what the client sent (a name, a header), and gRPC sends
 * the message and the details in the trailers, whose size HTTP/2 bounds (a
 * 40 KB name made the grpc-js client wait for trailers that never came).
 */
export const MAX_ERROR_TEXT = 512;

/** A lone surrogate: a string holding one cannot be encoded as UTF-8 or percent-encoded. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Whether `text` holds a lone surrogate (with the u flag, a pair is one code point). */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/**
 * `text` cut to {@link MAX_ERROR_TEXT} code units, with `…` to say so; a cut
 * never splits a surrogate pair, and a lone surrogate (quoted from a JSON
 * escape, say) becomes U+FFFD, so the text always fits a gRPC-Web trailer,
 * which connect percent-encodes.
 *
 * @example
 * clipErrorText('x'.repeat(1000)).length; // 513
 */
export function clipErrorText(text: string, max = MAX_ERROR_TEXT): string {
  let end = text.length;
  if (end > max) {
    end = max;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  }
  const cut = end < text.length ? `${text.slice(0, end)}…` : text;
  return hasLoneSurrogate(cut) ? cut.replace(/\p{Cs}/gu, '\ufffd') : cut;
}

function clipMetadata(metadata: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata)) out[key] = clipErrorText(value);
  return out;
}

/**
 * Returns the ConnectError to answer for `e`. A ConnectError passes through
 * (it already is a status); an AgentHooksError keeps its code, message and
 * ErrorInfo (an invalid argument's message is `<field>: <message>`, its
 * `BadRequest` description the message alone); anything else is INTERNAL.
 * Texts are cut to {@link MAX_ERROR_TEXT}.
 */
export function toConnectError(e: unknown): ConnectError {
  if (e instanceof ConnectError) {
    const text = clipErrorText(e.rawMessage);
    if (text === e.rawMessage) return e;
    const clipped = new ConnectError(text, e.code, e.metadata);
    clipped.details.push(...e.details);
    clipped.cause = e.cause;
    return clipped;
  }
  if (e instanceof AgentHooksError) {
    const details: ConstructorParameters<typeof ConnectError>[3] = [
      errorInfo(e.reason, clipMetadata(e.metadata)),
    ];
    for (const detail of e.details) {
      details.push({ desc: detail.desc, value: detail.value as never });
    }
    let message = e.message;
    if (e instanceof InvalidArgumentError) {
      // BadRequest keeps the upstream wording exactly; the status message leads
      // with the field, so a client that prints only the message still sees it.
      const field = clipErrorText(e.field);
      details.push({
        desc: BadRequestSchema,
        value: {
          fieldViolations: [{ field, description: clipErrorText(e.message), reason: e.reason }],
        },
      });
      if (!message.includes(`${e.field}: `)) message = `${field}: ${message}`;
    }
    return new ConnectError(clipErrorText(message), CODE_BY_KIND[e.kind], undefined, details, e);
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
