/**
 * @module `agenthooks users import FILE.jsonl`: through the functions, and
 * through the built CLI as a child process (`npm run build` first; `npm test`
 * builds in `pretest`).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite.js';
import { createStoreUserDirectory } from '../../src/users/directory.js';
import {
  importUsersFile,
  parseUsersJsonl,
  runUsersCommand,
  USERS_FILE_INVALID,
} from '../../src/users/import.js';

const run = promisify(execFile);

/** The built CLI. */
const MAIN = join(import.meta.dirname, '..', '..', 'dist', 'src', 'main.js');

const GOOD = [
  '{"id": "user_1", "email": "ada@example.com"}',
  '',
  '{"id": "user_2", "email": null}',
  '{"email": "grace@example.com", "id": "007"}\r',
  '',
].join('\n');

let dir: string;
const stores: SqliteStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agenthooks-users-'));
});

afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

function open(path = join(dir, 'agenthooks.db')): SqliteStore {
  const store = openSqliteStore(path);
  stores.push(store);
  return store;
}

/** Runs the built CLI; resolves with its exit code and output, whatever the code. */
async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (e: unknown) {
    const failed = e as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('parseUsersJsonl', () => {
  it('reads one user per line, skipping blank lines and CRLF endings', () => {
    expect(parseUsersJsonl(GOOD, 'users.jsonl')).toEqual([
      { id: 'user_1', email: 'ada@example.com' },
      { id: 'user_2', email: null },
      { id: '007', email: 'grace@example.com' },
    ]);
  });

  it('names every invalid line and never quotes its content', () => {
    const text = [
      '{"id": "ok", "email": "a@example.com"}',
      '{"id": "x", "email": "secret@example.com"',
      '["not", "an", "object"]',
      '{"id": "", "email": null}',
      '{"id": 7, "email": null}',
      '{"id": "u"}',
      '{"id": "u", "email": 5}',
      '{"id": "u", "email": ""}',
      '{"id": "u", "email": null, "mail": "x"}',
    ].join('\n');
    let error: unknown;
    try {
      parseUsersJsonl(text, 'users.jsonl');
    } catch (e: unknown) {
      error = e;
    }
    expect(error).toMatchObject({
      reason: USERS_FILE_INVALID,
      message:
        'users.jsonl: 8 invalid lines, nothing imported: line 2: not valid JSON; ' +
        'line 3: not a JSON object; line 4: "id" must be a non-empty string; ' +
        'line 5: "id" must be a non-empty string; line 6: "email" is required (a string or null); ' +
        'line 7: "email" must be a non-empty string or null; ' +
        'line 8: "email" must be a non-empty string or null; ' +
        'line 9: unknown key "mail" (expected "id" and "email")',
    });
    expect((error as Error).message).not.toContain('secret@example.com');
  });

  it('names at most 20 lines and counts the rest', () => {
    const text = Array.from({ length: 25 }, () => 'nope').join('\n');
    expect(() => parseUsersJsonl(text, 'u.jsonl')).toThrow(/line 20: not valid JSON; and 5 more$/);
  });
});

describe('importUsersFile', () => {
  it('upserts every user, which the store directory then finds', async () => {
    const store = open();
    await store.upsertUsers([{ id: 'user_1', email: 'old@example.com' }]);
    expect(await importUsersFile(file('users.jsonl', GOOD), store)).toBe(3);
    const directory = createStoreUserDirectory(store);
    expect(await directory.lookupEmail('user_1')).toBe('ada@example.com');
    expect(await directory.lookupEmail('user_2')).toBeNull();
    expect(await directory.lookupEmail('007')).toBe('grace@example.com');
    expect(await directory.lookupEmail('unknown')).toBeNull();
  });

  it('imports nothing when one line is invalid', async () => {
    const store = open();
    const path = file('users.jsonl', `${GOOD}\n{"id": "user_9"}\n`);
    await expect(importUsersFile(path, store)).rejects.toThrow(
      /users\.jsonl: 1 invalid line, nothing imported: line 6: "email" is required/,
    );
    expect(await store.lookupUserEmail('user_1')).toBeNull();
  });

  it('refuses a file that is not UTF-8', async () => {
    const store = open();
    const path = file('users.jsonl', Buffer.from([0x7b, 0xff, 0x7d, 0x0a]));
    await expect(importUsersFile(path, store)).rejects.toMatchObject({
      reason: USERS_FILE_INVALID,
      message: `${path}: not valid UTF-8`,
    });
  });
});

describe('runUsersCommand', () => {
  it('imports into --db and reports the count', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const db = join(dir, 'nested', 'x.db');
    const code = await runUsersCommand(
      ['import', file('u.jsonl', GOOD), '--db', db],
      {},
      {
        stdout: (t) => out.push(t),
        stderr: (t) => err.push(t),
      },
    );
    expect({ code, out, err }).toEqual({
      code: 0,
      out: [`imported 3 users into ${db}\n`],
      err: [],
    });
    expect(await open(db).lookupUserEmail('user_1')).toBe('ada@example.com');
  });

  it('uses AGENTHOOKS_DB without --db', async () => {
    const db = join(dir, 'env.db');
    const code = await runUsersCommand(
      ['import', file('u.jsonl', GOOD)],
      { AGENTHOOKS_DB: db },
      {
        stdout: () => undefined,
        stderr: () => undefined,
      },
    );
    expect(code).toBe(0);
    expect(await open(db).lookupUserEmail('007')).toBe('grace@example.com');
  });

  it('refuses a PostgreSQL AGENTHOOKS_DB without quoting it, and creates nothing', async () => {
    const err: string[] = [];
    const out = { stdout: () => undefined, stderr: (t: string) => err.push(t) };
    const url = 'postgres://agenthooks:s3cret@127.0.0.1:1/agenthooks';
    const code = await runUsersCommand(
      ['import', file('u.jsonl', GOOD)],
      { AGENTHOOKS_DB: url },
      out,
    );
    expect(code).toBe(2);
    expect(err.join('')).toContain('AGENTHOOKS_DB names a PostgreSQL database');
    expect(err.join('')).not.toContain('s3cret');
    expect(existsSync('postgres:')).toBe(false);
  });

  it('exits 2 for a bad command line, 1 for a missing file, and creates no database', async () => {
    const quiet = { stdout: () => undefined, stderr: () => undefined };
    const db = join(dir, 'never.db');
    expect(await runUsersCommand(['export'], {}, quiet)).toBe(2);
    expect(await runUsersCommand(['import'], {}, quiet)).toBe(2);
    expect(await runUsersCommand(['import', 'a', 'b', '--db', db], {}, quiet)).toBe(2);
    expect(await runUsersCommand(['import', '--nope', 'a'], {}, quiet)).toBe(2);
    expect(
      await runUsersCommand(['import', join(dir, 'missing.jsonl'), '--db', db], {}, quiet),
    ).toBe(1);
    expect(existsSync(db)).toBe(false);
  });
});

describe('agenthooks users import (built CLI)', () => {
  it('imports a JSONL file into a temporary database and exits 0', async () => {
    const db = join(dir, 'cli.db');
    const result = await cli(['users', 'import', file('users.jsonl', GOOD), '--db', db]);
    expect(result).toEqual({ code: 0, stdout: `imported 3 users into ${db}\n`, stderr: '' });
    const store = open(db);
    expect(await store.lookupUserEmail('user_1')).toBe('ada@example.com');
    expect(await store.lookupUserEmail('user_2')).toBeNull();
  });

  it('exits non-zero naming the bad line and imports nothing', async () => {
    const db = join(dir, 'cli.db');
    const seeded = open(db);
    await seeded.upsertUsers([{ id: 'user_1', email: 'kept@example.com' }]);
    await seeded.close();
    const path = file('users.jsonl', `${GOOD}\nnot json\n`);
    const result = await cli(['users', 'import', path, '--db', db]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `agenthooks: ${path}: 1 invalid line, nothing imported: line 6: not valid JSON\n`,
    );
    const store = open(db);
    expect(await store.lookupUserEmail('user_1')).toBe('kept@example.com');
    expect(await store.lookupUserEmail('007')).toBeNull();
  });

  it('reads the database path from AGENTHOOKS_DB', async () => {
    const db = join(dir, 'from-env.db');
    const result = await cli(['users', 'import', file('users.jsonl', GOOD)], {
      AGENTHOOKS_DB: db,
    });
    expect(result.code).toBe(0);
    expect(await open(db).lookupUserEmail('007')).toBe('grace@example.com');
  });
});
