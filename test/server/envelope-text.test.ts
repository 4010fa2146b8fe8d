import { describe, expect, it } from 'vitest';
import { EnvelopeText } from '../../src/server/http.js';

/** One enveloped message: flag byte, 4-byte big-endian length, the bytes. */
function frame(data: Buffer, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

/** Pushes `bytes` cut at `cuts`; answers the index of the first refused piece, or -1. */
function refusedAt(bytes: Buffer, cuts: number[]): number {
  const text = new EnvelopeText();
  const bounds = [0, ...cuts, bytes.length];
  for (let i = 0; i + 1 < bounds.length; i += 1) {
    if (!text.push(bytes.subarray(bounds[i], bounds[i + 1]))) return i;
  }
  return -1;
}

const GOOD = Buffer.from(`{"service":"${'é'.repeat(100)}"}`);
const BAD = Buffer.concat([Buffer.from('{"service":"'), Buffer.from([0xff]), Buffer.from('"}')]);

describe('EnvelopeText', () => {
  it('takes UTF-8 messages whatever their length byte, cut anywhere', () => {
    const body = Buffer.concat([frame(GOOD), frame(Buffer.from('{}')), frame(GOOD)]);
    expect(body[4]).toBeGreaterThan(0x7f);
    for (let cut = 0; cut <= body.length; cut += 1) {
      expect(refusedAt(body, [cut]), `cut at ${cut}`).toBe(-1);
    }
    expect(refusedAt(body, [1, 2, 3, 4, 5, 6, 100, 210, 211])).toBe(-1);
  });

  it('refuses a message that is not UTF-8 on the piece that completes it, not before', () => {
    const body = Buffer.concat([frame(GOOD), frame(BAD)]);
    const last = body.length - 1;
    expect(refusedAt(body, [3, last])).toBe(2);
    expect(refusedAt(body, [GOOD.length + 5 + 7])).toBe(1);
    expect(refusedAt(body, [])).toBe(0);
  });

  it('leaves compressed messages and end-of-stream frames to connect', () => {
    const body = Buffer.concat([frame(BAD, 1), frame(BAD, 2), frame(GOOD)]);
    expect(refusedAt(body, [4, 9, 20])).toBe(-1);
  });
});
