/**
 * @module Bearer-token authentication of both transports. With a token
 * configured (`--auth-token-file` or `AGENTHOOKS_AUTH_TOKEN`), every call
 * must carry `authorization: Bearer <token>` (gRPC metadata or HTTP header);
 * a missing or wrong token answers UNAUTHENTICATED, reason
 * `UNAUTHENTICATED`. `grpc.health.v1` never asks for it (kubelet probes
 * cannot send one); reflection does unless `--reflection-public`. Tokens are
 * compared in constant time: both sides are hashed to equal-length SHA-256
 * digests and compared with `crypto.timingSafeEqual`, so neither the length
 * nor a common prefix of the expected token leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Code, ConnectError } from '@connectrpc/connect';
import { AgentHooksError } from '../errors.js';
import { errorInfo } from './errors.js';

/** `ErrorInfo.reason` of a call without a valid token. */
export const UNAUTHENTICATED_REASON = 'UNAUTHENTICATED';

/** Reason of a token file that cannot be used at start-up. */
export const INVALID_AUTH_TOKEN_REASON = 'INVALID_AUTH_TOKEN';

/** Header (gRPC metadata key) carrying the token. */
export const AUTHORIZATION_HEADER = 'authorization';

/** The scheme before the token, compared case-insensitively (RFC 9110 §11.1). */
const BEARER = /^bearer +/i;
/** Spaces and tabs around a header value. */
const OWS_AROUND = /^[ \t]+|[ \t]+$/g;

/** Reads one request header by its lower-case name (`Headers` is one, and so is a gRPC call's metadata, read through `request-gate.ts`). */
export interface HeaderReader {
  get(name: string): string | null | undefined;
}

/** Checks a call's request headers; throws UNAUTHENTICATED when the token is missing or wrong. */
export type TokenCheck = (header: HeaderReader) => void;

/** Where the token comes from: a file, or the value itself. */
export interface TokenSource {
  /** `--auth-token-file`: the token is the file's content, surrounding whitespace trimmed. */
  readonly authTokenFile?: string;
  /** `AGENTHOOKS_AUTH_TOKEN`: the token itself. */
  readonly authToken?: string;
}

/**
 * Reads the configured token; undefined when authentication is off.
 *
 * @throws AgentHooksError `INVALID_AUTH_TOKEN` when the file cannot be read
 *   or is blank (the message never holds the token).
 * @example readAuthToken({ authTokenFile: '/run/secrets/agenthooks-token' })
 */
export function readAuthToken(source: TokenSource): string | undefined {
  if (source.authToken !== undefined) return source.authToken.trim();
  if (source.authTokenFile === undefined) return undefined;
  let token: string;
  try {
    token = readFileSync(source.authTokenFile, 'utf8').trim();
  } catch (e: unknown) {
    throw new AgentHooksError(
      'failed_precondition',
      INVALID_AUTH_TOKEN_REASON,
      `cannot read --auth-token-file ${source.authTokenFile}`,
      { cause: e },
    );
  }
  if (token === '') {
    throw new AgentHooksError(
      'failed_precondition',
      INVALID_AUTH_TOKEN_REASON,
      `--auth-token-file ${source.authTokenFile} is empty`,
    );
  }
  return token;
}

/**
 * Returns the check of `token`, a constant-time comparison of the
 * `authorization: Bearer` value; undefined when there is no token, so that
 * calls need not even build their headers.
 *
 * @example
 * const check = createTokenCheck('s3cret');
 * check(new Headers({ authorization: 'Bearer s3cret' })); // passes
 * check(new Headers()); // throws ConnectError UNAUTHENTICATED
 */
export function createTokenCheck(token: string | undefined): TokenCheck | undefined {
  if (token === undefined) return undefined;
  const expected = digest(token);
  return function checkToken(header) {
    // Without the whitespace around it, as HTTP/1.1's parser hands it over
    // (RFC 9110 OWS), so that an HTTP/2 or gRPC caller is judged alike.
    const value = (header.get(AUTHORIZATION_HEADER) ?? '').replace(OWS_AROUND, '');
    const given = BEARER.test(value) ? value.replace(BEARER, '') : undefined;
    // Both digests are 32 bytes, so timingSafeEqual never throws on length.
    if (given === undefined || !timingSafeEqual(digest(given), expected)) {
      throw unauthenticated();
    }
  };
}

/** The UNAUTHENTICATED error of a call without a valid token. */
export function unauthenticated(): ConnectError {
  return new ConnectError('a valid bearer token is required', Code.Unauthenticated, undefined, [
    errorInfo(UNAUTHENTICATED_REASON),
  ]);
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
