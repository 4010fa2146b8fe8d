/** @module Unit tests of the reflection index built from gen/descriptors.binpb. */
import { readFileSync } from 'node:fs';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { ServerReflectionRequestSchema } from '../../gen/grpc/reflection/v1/reflection_pb.js';
import { createReflectionIndex, DESCRIPTOR_SET_URL } from '../../src/server/reflection.js';

/** The committed descriptor set, changed by `edit` and encoded again. */
function editedSet(edit: (set: ReturnType<typeof readSet>) => void): Uint8Array {
  const set = readSet();
  edit(set);
  return toBinary(FileDescriptorSetSchema, set);
}

function readSet() {
  return fromBinary(FileDescriptorSetSchema, readFileSync(DESCRIPTOR_SET_URL));
}

describe('createReflectionIndex', () => {
  it('serves the google.rpc error details with their source info by file name', () => {
    const index = createReflectionIndex([HookService, Health]);
    const answer = index.answer(
      create(ServerReflectionRequestSchema, {
        messageRequest: { case: 'fileByFilename', value: 'google/rpc/error_details.proto' },
      }),
    );
    const m = answer.messageResponse;
    expect(m?.case).toBe('fileDescriptorResponse');
    const bytes = m?.case === 'fileDescriptorResponse' ? m.value.fileDescriptorProto : undefined;
    const file = fromBinary(FileDescriptorProtoSchema, bytes?.[0] ?? new Uint8Array());
    expect(file.name).toBe('google/rpc/error_details.proto');
    expect(file.sourceCodeInfo?.location.length).toBeGreaterThan(0);
  });

  it('refuses a descriptor set without a served service', () => {
    const set = editedSet((s) => {
      s.file = s.file.filter((f) => f.name !== 'grpc/health/v1/health.proto');
    });
    expect(() => createReflectionIndex([HookService, Health], set)).toThrow(
      /grpc\.health\.v1\.Health is missing; run npm run generate/,
    );
  });

  it('refuses a descriptor set whose service lacks a method of the generated code', () => {
    const set = editedSet((s) => {
      const service = s.file
        .find((f) => f.name === 'agenthooks/v1/service.proto')
        ?.service.find((v) => v.name === 'HookService');
      if (service !== undefined) {
        service.method = service.method.filter((m) => m.name !== 'DecideToolCall');
      }
    });
    expect(() => createReflectionIndex([HookService], set)).toThrow(
      /agenthooks\.v1\.HookService lacks DecideToolCall/,
    );
  });
});
