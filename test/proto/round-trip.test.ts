import { equals, fromBinary, fromJson, toBinary, toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { loadEventFixtures } from '../support/fixtures.js';

describe('every fixture event round-trips through binary and proto3 JSON', () => {
  for (const fixture of loadEventFixtures()) {
    it(`round-trips ${fixture.file}`, () => {
      const binary = fromBinary(HookEventSchema, toBinary(HookEventSchema, fixture.event));
      expect(equals(HookEventSchema, binary, fixture.event)).toBe(true);
      const json = fromJson(HookEventSchema, toJson(HookEventSchema, fixture.event));
      expect(equals(HookEventSchema, json, fixture.event)).toBe(true);
      // The fixture's own JSON is canonical proto3 JSON.
      expect(toJson(HookEventSchema, fixture.event)).toEqual(fixture.eventJson);
    });
  }
});
