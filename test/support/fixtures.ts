/** @module Loads the hand-written event fixtures of `test/fixtures/events/`. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromJson, type JsonObject } from '@bufbuild/protobuf';
import { type HookEvent, HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';

/** Folder of the event fixtures. */
export const EVENT_FIXTURES_DIR = join(import.meta.dirname, '..', 'fixtures', 'events');

/** One event fixture: the event a runtime sends and the JSON a receiver gets. */
export interface EventFixture {
  /** File name, such as `afterToolCall.full.json`. */
  readonly file: string;
  /** Upstream hook type literal, from the file name. */
  readonly hookType: string;
  /** `full` or `minimal`. */
  readonly variant: string;
  readonly description: string;
  readonly hookId: string;
  /** The event, proto3 JSON of `agenthooks.v1.HookEvent`. */
  readonly eventJson: JsonObject;
  /** The event, decoded. */
  readonly event: HookEvent;
  /** The exact payload a reference receiver gets. */
  readonly payload: JsonObject;
}

/** Loads every event fixture, sorted by file name. */
export function loadEventFixtures(): EventFixture[] {
  return readdirSync(EVENT_FIXTURES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const raw = JSON.parse(readFileSync(join(EVENT_FIXTURES_DIR, file), 'utf8')) as {
        description: string;
        hookId: string;
        event: JsonObject;
        payload: JsonObject;
      };
      const [hookType = '', variant = ''] = file.split('.');
      return {
        file,
        hookType,
        variant,
        description: raw.description,
        hookId: raw.hookId,
        eventJson: raw.event,
        event: fromJson(HookEventSchema, raw.event),
        payload: raw.payload,
      };
    });
}
