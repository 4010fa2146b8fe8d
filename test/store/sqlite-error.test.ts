import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { AgentHooksError, StoreUnavailableError } from '../../src/errors.js';
import { storeErrorFromSqlite } from '../../src/store/sqlite-error.js';

const { SqliteError } = Database;

describe('storeErrorFromSqlite', () => {
  it.each([
    ['SQLITE_BUSY', 'STORE_LOCKED'],
    ['SQLITE_BUSY_SNAPSHOT', 'STORE_LOCKED'],
    ['SQLITE_LOCKED', 'STORE_LOCKED'],
    ['SQLITE_PROTOCOL', 'STORE_LOCKED'],
    ['SQLITE_READONLY', 'STORE_READ_ONLY'],
    ['SQLITE_READONLY_DBMOVED', 'STORE_READ_ONLY'],
    ['SQLITE_FULL', 'STORE_FULL'],
    ['SQLITE_CORRUPT', 'STORE_CORRUPT'],
    ['SQLITE_CORRUPT_INDEX', 'STORE_CORRUPT'],
    ['SQLITE_NOTADB', 'STORE_CORRUPT'],
    ['SQLITE_IOERR', 'STORE_UNAVAILABLE'],
    ['SQLITE_IOERR_FSYNC', 'STORE_UNAVAILABLE'],
    ['SQLITE_CANTOPEN', 'STORE_UNAVAILABLE'],
    ['SQLITE_CANTOPEN_ISDIR', 'STORE_UNAVAILABLE'],
    ['SQLITE_NOMEM', 'STORE_UNAVAILABLE'],
  ])('maps %s to an unavailable store with reason %s, keeping the cause', (code, reason) => {
    const cause = new SqliteError('sqlite says no', code);

    const error = storeErrorFromSqlite(cause, 'append hooks');

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).toMatchObject({ kind: 'unavailable', reason, cause });
    expect(error.message).toBe(`cannot append hooks: sqlite says no (${code})`);
  });

  it.each(['SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_ERROR', 'SQLITE_MISMATCH'])(
    'maps %s, a bug rather than an unavailable store, to an internal error',
    (code) => {
      const cause = new SqliteError('sqlite says no', code);

      expect(storeErrorFromSqlite(cause, 'append hooks')).toMatchObject({
        kind: 'internal',
        reason: 'STORE_INTERNAL',
        cause,
      });
    },
  );

  it.each([
    ['ENOSPC', 'STORE_FULL'],
    ['EROFS', 'STORE_READ_ONLY'],
    ['EACCES', 'STORE_UNAVAILABLE'],
    ['ENOTDIR', 'STORE_UNAVAILABLE'],
  ])('maps the file-system error %s to %s', (code, reason) => {
    const cause = Object.assign(new Error(`${code}: mkdir failed`), { code });

    expect(storeErrorFromSqlite(cause, 'open the store')).toMatchObject({
      kind: 'unavailable',
      reason,
      cause,
    });
  });

  it('maps any failure on a closed connection to STORE_CLOSED', () => {
    const db = new Database(':memory:');
    db.close();
    const cause = new TypeError('The database connection is not open');

    expect(storeErrorFromSqlite(cause, 'list hooks', db)).toMatchObject({
      kind: 'unavailable',
      reason: 'STORE_CLOSED',
      message: 'cannot list hooks: the store is closed',
      cause,
    });
  });

  it('passes a domain error through unchanged', () => {
    const domain = new AgentHooksError('failed_precondition', 'STORED_HOOK_CORRUPT', 'corrupt');

    expect(storeErrorFromSqlite(domain, 'list hooks')).toBe(domain);
  });

  it('maps an unexpected error to an internal error, never to "no hooks"', () => {
    const cause = new RangeError('Too many parameter values were provided');

    expect(storeErrorFromSqlite(cause, 'list hooks')).toMatchObject({
      kind: 'internal',
      reason: 'STORE_INTERNAL',
      cause,
    });
  });
});
