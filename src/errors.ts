/**
 * @module Domain errors of agenthooks. Each carries a stable `reason` (the
 * `google.rpc.ErrorInfo` reason clients match on, UPPER_SNAKE, at most 63
 * characters) and a `kind` that `src/server/errors.ts` maps to a gRPC status.
 * Match on `reason`, not on `instanceof`. Every reason is a value name of the
 * proto enum `agenthooks.v1.ErrorReason` (proto/agenthooks/v1/errors.proto),
 * and the types here refuse any other string.
 */
import type { DescMessage, Message } from '@bufbuild/protobuf';
import { ErrorReason } from '../gen/agenthooks/v1/errors_pb.js';
import { extend } from './extend.js';

/**
 * An `ErrorInfo.reason`: the name of an `agenthooks.v1.ErrorReason` value
 * other than the zero value. Add a reason to the proto enum (with its comment)
 * before using it here.
 *
 * @example const reason: ErrorReasonName = 'STORE_LOCKED';
 */
export type ErrorReasonName = Exclude<keyof typeof ErrorReason, 'ERROR_REASON_UNSPECIFIED'>;

/**
 * Returns true when `name` is an {@link ErrorReasonName}, for reasons that
 * arrive as plain strings (a peer's ErrorInfo, a config file).
 *
 * @example isErrorReasonName('STORE_LOCKED') // true
 */
export function isErrorReasonName(name: string): name is ErrorReasonName {
  return (
    name !== 'ERROR_REASON_UNSPECIFIED' &&
    Object.hasOwn(ErrorReason, name) &&
    typeof ErrorReason[name as keyof typeof ErrorReason] === 'number'
  );
}

/** A typed detail sent with an error's status, such as the outcomes of hooks that ran. */
export interface ErrorDetail {
  readonly desc: DescMessage;
  readonly value: Message;
}

/** The status family of a domain error; the server maps each to one gRPC code. */
export type ErrorKind =
  | 'invalid_argument'
  | 'failed_precondition'
  | 'not_found'
  | 'unavailable'
  | 'unimplemented'
  | 'cancelled'
  | 'deadline_exceeded'
  | 'resource_exhausted'
  | 'internal';

/** Options of an {@link AgentHooksError}. */
export interface AgentHooksErrorOptions {
  /** Underlying error, kept for logs and never sent to clients. */
  readonly cause?: unknown;
  /** `ErrorInfo.metadata`; keys are lowerCamelCase. */
  readonly metadata?: Record<string, string>;
  /** Further typed details sent with the status (protobuf messages), such as partial outcomes. */
  readonly details?: readonly ErrorDetail[];
}

/**
 * Base class of every error agenthooks raises on purpose.
 *
 * @example
 * throw new AgentHooksError('unavailable', 'STORE_LOCKED', 'the database is locked', { cause: e });
 */
export class AgentHooksError extends Error {
  override readonly name: string = 'AgentHooksError';
  readonly kind: ErrorKind;
  readonly reason: ErrorReasonName;
  readonly metadata: Record<string, string>;
  readonly details: readonly ErrorDetail[];

  constructor(
    kind: ErrorKind,
    reason: ErrorReasonName,
    message: string,
    options: AgentHooksErrorOptions = {},
  ) {
    super(message, { cause: options.cause });
    this.kind = kind;
    this.reason = reason;
    this.metadata = { ...options.metadata };
    this.details = options.details ?? [];
  }
}

/**
 * A request field is invalid. `field` is the path of the offending field in
 * the request, such as `hooks[2].webhook.url`; the message is the upstream
 * validation message where the reference system has one.
 */
export class InvalidArgumentError extends AgentHooksError {
  override readonly name = 'InvalidArgumentError';
  readonly field: string;

  constructor(
    field: string,
    reason: ErrorReasonName,
    message: string,
    options: AgentHooksErrorOptions = {},
  ) {
    super(
      'invalid_argument',
      reason,
      message,
      extend(options, {
        metadata: { field, ...options.metadata },
      }),
    );
    this.field = field;
  }
}

/** The store cannot be used (locked, read-only, full, corrupt, closed). */
export class StoreUnavailableError extends AgentHooksError {
  override readonly name = 'StoreUnavailableError';

  constructor(reason: ErrorReasonName, message: string, options: AgentHooksErrorOptions = {}) {
    super('unavailable', reason, message, options);
  }
}

/** Returns true when `e` is an {@link AgentHooksError} with the given reason. */
export function hasReason(e: unknown, reason: ErrorReasonName): boolean {
  return e instanceof AgentHooksError && e.reason === reason;
}

/** Reason of an invalid effective environment: environment hooks, env file or signing secrets. */
export const INVALID_ENVIRONMENT = 'INVALID_ENVIRONMENT';

/** `ErrorInfo.reason` of an unknown flag or a bad option value (`serve --help` names them). */
export const INVALID_FLAG = 'INVALID_FLAG';

/** `ErrorInfo.metadata` key listing the offending variable names, comma-separated. */
export const VARIABLES_METADATA_KEY = 'variables';

/**
 * Returns the environment error `message`, naming `variables` in its
 * metadata. `message` and `variables` never hold a variable's value.
 *
 * @example
 * invalidEnvironment('Invalid Agent Hook environment: env file /etc/ah.env cannot be read', [], { cause: e });
 */
export function invalidEnvironment(
  message: string,
  variables: readonly string[],
  options: { readonly cause?: unknown; readonly metadata?: Record<string, string> } = {},
): AgentHooksError {
  const metadata: Record<string, string> = { ...options.metadata };
  if (variables.length > 0) metadata[VARIABLES_METADATA_KEY] = variables.join(',');
  return new AgentHooksError('failed_precondition', INVALID_ENVIRONMENT, message, {
    cause: options.cause,
    metadata,
  });
}

/**
 * The error of a call, or a stream, the sidecar ends because it is shutting
 * down: `UNAVAILABLE`, reason `SHUTTING_DOWN` (another sidecar can take it).
 */
export function shuttingDown(): AgentHooksError {
  return new AgentHooksError('unavailable', 'SHUTTING_DOWN', 'agenthooks is shutting down');
}
