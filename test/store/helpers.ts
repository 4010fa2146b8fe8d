/**
 * @module Fixtures of the store tests: a temporary folder per test holding
 * real database files, and connections closed after each test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import Database from 'better-sqlite3';
import { afterEach, beforeEach } from 'vitest';
import {
  Executor,
  HookType,
  type ToolCallContext,
  ToolCallContextSchema,
  type ToolResult,
  ToolResultSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import {
  type Hook,
  HookSchema,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import {
  openSqliteStore,
  type SqliteStore,
  type SqliteStoreOptions,
} from '../../src/store/sqlite.js';
import type { NewParkedCall } from '../../src/store/store.js';

/** What {@link useTempStore} hands each test. */
export interface TempStore {
  /** Path of a file in this test's temporary folder (`agenthooks.db` by default). */
  path(name?: string): string;
  /** Opens the store at {@link TempStore.path}; it is closed after the test. */
  open(options?: SqliteStoreOptions, name?: string): SqliteStore;
  /** Opens a plain better-sqlite3 connection on the same file; it is closed after the test. */
  raw(name?: string): Database.Database;
}

/** Gives each test of the calling file a fresh temporary folder, removed afterwards. */
export function useTempStore(): TempStore {
  let dir: string | undefined;
  const cleanups: Array<() => unknown> = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-store-'));
  });
  afterEach(async () => {
    // Newest first: raw connections (which may hold a lock) close before the store.
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup();
    }
    if (dir !== undefined) {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  const path = (name = 'agenthooks.db'): string => {
    if (dir === undefined) {
      throw new Error('useTempStore() fixtures are only available inside a test');
    }
    return join(dir, name);
  };
  return {
    path,
    open(options, name) {
      const store = openSqliteStore(path(name), options);
      cleanups.push(() => store.close());
      return store;
    },
    raw(name) {
      const db = new Database(path(name));
      db.pragma('busy_timeout = 0');
      cleanups.push(() => db.close());
      return db;
    },
  };
}

/** A header value holding a `${VAR}` template, which the store keeps as given. */
export const TEMPLATED_HEADER = 'Bearer ${API_TOKEN}';

/** Builds a webhook hook whose `authorization` header is {@link TEMPLATED_HEADER}. */
export function webhookHook(id: string, type: HookType = HookType.AFTER_STEP): Hook {
  return create(HookSchema, {
    id,
    type,
    webhook: {
      url: `https://hooks.example.com/${id}`,
      headers: { authorization: TEMPLATED_HEADER },
      allowedEnvVars: ['API_TOKEN'],
    },
  });
}

/** Builds a `beforeToolCall` control hook that blocks when its webhook fails. */
export function controlHook(id: string): Hook {
  return create(HookSchema, {
    id,
    type: HookType.BEFORE_TOOL_CALL,
    matcher: '^github/',
    handler: false,
    webhook: {
      url: '/controls/tool-call',
      timeout: 2.5,
      responseHandling: ResponseHandling.TOOL_CALL,
      onError: OnError.BLOCK,
    },
  });
}

/** Returns what `fn` throws, failing the test when it returns. */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e: unknown) {
    return e;
  }
  throw new Error('expected the call to throw');
}

/** Builds the context of a server tool call made by `operationId`, with a few arguments. */
export function toolCallContext(toolCallId: string, operationId = 'op-1'): ToolCallContext {
  return create(ToolCallContextSchema, {
    toolCallId,
    assistantMessageId: 'msg-1',
    identifier: 'github',
    apiName: 'create_issue',
    args: { title: 'Flaky test', labels: ['ci'], priority: 2 },
    callIndex: 1,
    stepIndex: 2,
    operationId,
    executor: Executor.SERVER,
    threadId: 'thread-1',
  });
}

/** Builds a tool result with the given content. */
export function toolResult(content: string, success = true): ToolResult {
  return create(ToolResultSchema, {
    content,
    success,
    state: { type: 'done' },
    error: { kind: { case: 'stringValue', value: success ? '' : 'tool_failed' } },
    executionTime: 12.5,
  });
}

/** Builds a record to park: a deferred call of `chain[0]` (default `op-1`) parked at `parkedAt`. */
export function parkedCall(
  toolCallId: string,
  chain: readonly string[] = ['op-1'],
  parkedAt = 1_000,
): NewParkedCall {
  const operationId = chain[0] ?? 'op-1';
  return {
    toolCallId,
    operationId,
    chain,
    kind: ParkKind.DEFERRED,
    context: toolCallContext(toolCallId, operationId),
    parkedAt,
  };
}
