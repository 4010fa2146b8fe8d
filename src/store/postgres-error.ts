/**
 * @module Maps the failures of `pg` to agenthooks domain errors, in one
 * place, so that no PostgreSQL code escapes `src/store/`. Messages carry the
 * SQLSTATE or system error code only: a server message can quote stored
 * values, and a connection error can name the host.
 */
import { DatabaseError } from 'pg';
import { AgentHooksError } from '../errors.js';
import { storeInternalError, storeUnavailableError } from './store.js';

/**
 * Messages of the errors `pg` raises itself (no SQLSTATE) when the
 * connection is gone or a client-side timeout fired: the store cannot be
 * reached, which is not a bug of this code.
 */
const CONNECTION_FAILURE_MESSAGES: readonly RegExp[] = [
  // The pool's connectionTimeoutMillis ran out.
  /timeout exceeded when trying to connect/i,
  // The socket closed under a query, or while connecting.
  /Connection terminated/i,
  // query_timeout (client side) ran out: the server stopped answering.
  /Query read timeout/i,
  // A client whose connection failed is used again.
  /not queryable/i,
];

/**
 * Returns the domain error for a failure of `action` on the PostgreSQL
 * store; the original error is kept as `cause`. Domain errors pass through
 * unchanged. A failure that says nothing about the store's health (a
 * constraint, an SQL error, a bug) becomes an `internal` error with reason
 * `STORE_INTERNAL`.
 *
 * @param action What was attempted, in the infinitive (`append hooks`), for the message.
 * @example
 * try { await pool.query(sql); } catch (e: unknown) { throw storeErrorFromPostgres(e, 'list hooks'); }
 */
export function storeErrorFromPostgres(e: unknown, action: string): AgentHooksError {
  if (e instanceof AgentHooksError) {
    return e;
  }
  if (e instanceof DatabaseError && typeof e.code === 'string') {
    const code = e.code;
    const detail = `PostgreSQL failed (${code})`;
    // SQLSTATE classes: https://www.postgresql.org/docs/current/errcodes-appendix.html
    switch (code.slice(0, 2)) {
      // Connection exception; invalid authorization; no such database;
      // operator intervention (shutdown, crash, not accepting connections,
      // but 57014 below); system error (I/O).
      case '08':
      case '28':
      case '3D':
      case '58':
        return storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
      case '57':
        // statement_timeout or lock_timeout cancelled the statement, which
        // waited on another transaction's lock or on an overloaded server:
        // the analogue of SQLite's busy timeout. Retryable.
        return code === '57014'
          ? storeUnavailableError('STORE_LOCKED', action, detail, e)
          : storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
      // Serialization failure or deadlock: retryable contention.
      case '40':
        return storeUnavailableError('STORE_LOCKED', action, detail, e);
      // Insufficient resources: 53100 is a full disk; out of memory and too
      // many connections leave the store unusable for now.
      case '53':
        return code === '53100'
          ? storeUnavailableError('STORE_FULL', action, detail, e)
          : storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
      // Internal error class: XX001 data_corrupted, XX002 index_corrupted.
      case 'XX':
        return code === 'XX001' || code === 'XX002'
          ? storeUnavailableError('STORE_CORRUPT', action, detail, e)
          : storeUnavailableError('STORE_UNAVAILABLE', action, detail, e);
      default:
        // 55P03 lock_not_available (lock_timeout, NOWAIT).
        if (code === '55P03') return storeUnavailableError('STORE_LOCKED', action, detail, e);
        // 25006 read_only_sql_transaction: a standby, or a read-only default.
        if (code === '25006') return storeUnavailableError('STORE_READ_ONLY', action, detail, e);
        // Constraint, syntax, data and other SQL errors are bugs of this
        // code (or a schema changed by hand), not an unavailable store.
        return new AgentHooksError('internal', 'STORE_INTERNAL', `cannot ${action}: ${detail}`, {
          cause: e,
        });
    }
  }
  const code = systemErrorCode(e);
  if (code !== undefined) {
    // ECONNREFUSED, ECONNRESET, ETIMEDOUT, ENOTFOUND, EPIPE, EHOSTUNREACH...:
    // the socket to the server failed.
    return storeUnavailableError(
      'STORE_UNAVAILABLE',
      action,
      `PostgreSQL unreachable (${code})`,
      e,
    );
  }
  if (e instanceof Error && CONNECTION_FAILURE_MESSAGES.some((re) => re.test(e.message))) {
    return storeUnavailableError('STORE_UNAVAILABLE', action, 'PostgreSQL unreachable', e);
  }
  // Anything else is a bug in this code; fail closed, never as "no hooks".
  return storeInternalError(action, e);
}

/** The `code` of a Node system error (`ECONNREFUSED`), else undefined. */
function systemErrorCode(e: unknown): string | undefined {
  if (!(e instanceof Error)) return undefined;
  const code = (e as NodeJS.ErrnoException).code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : undefined;
}
