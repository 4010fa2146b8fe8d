/**
 * @module Property tests of request validation: for arbitrary generated
 * hooks (any ids, types and enum numbers, hostile URLs, headers, variable
 * names and matchers), `validateHooks` either accepts the batch or throws an
 * `InvalidArgumentError` naming a field under the batch, never anything else.
 */
import { create } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import { DestinationPolicy } from '../../src/delivery/destination.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { REASON, validateHooks } from '../../src/hooks/validate.js';

/** Runs per property: bounded so the suite stays fast. */
const NUM_RUNS = 1_000;

/** Every reason validation may give. */
const REASONS = new Set<string>(Object.values(REASON));

const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', '*', 'server-env-webhook:x', '\r\n', '\0', '${TOKEN}', 'é', '\ud800'),
);

const url = fc.oneof(
  fc.webUrl(),
  fc.constantFrom(
    '',
    '/api/hook',
    '//evil.test/x',
    'http://169.254.169.254/latest/meta-data',
    'http://[fd00:ec2::254]/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://metadata.google.internal/',
    'http://user:pass@h.test/',
    'ftp://h.test/',
    'http://h.test\\x',
    'http://[::1',
    'http://0x7f.1/',
    'https://h.test:99999/',
  ),
  text,
);

const matcher = fc.oneof(
  text,
  fc.string({ unit: fc.constantFrom(...'ab()[]{}?*+|^$\\.-,:=!<>k1'.split('')), maxLength: 20 }),
  fc.constantFrom('(a+)+$', '(a)\\1', '(?=a)', 'a'.repeat(1_100), '\\p{L}', '[z-a]'),
);

const enumNumber = fc.oneof(fc.integer({ min: -2, max: 5 }), fc.integer());

const webhook = fc.record(
  {
    url,
    headers: fc.dictionary(text, text, { maxKeys: 4 }),
    allowedEnvVars: fc.array(fc.oneof(text, fc.constantFrom('HOOK_TOKEN', 'PATH', '1BAD')), {
      maxLength: 3,
    }),
    timeout: fc.oneof(
      fc.double(),
      fc.constantFrom(0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2_147_483.648),
    ),
    delivery: enumNumber,
    fallback: enumNumber,
    responseHandling: enumNumber,
    onError: enumNumber,
  },
  { requiredKeys: ['url'] },
);

const hook = fc
  .record(
    {
      id: text,
      type: enumNumber,
      matcher,
      handler: fc.boolean(),
      webhook,
    },
    { requiredKeys: [] },
  )
  .map((init) => create(HookSchema, init as Parameters<typeof create<typeof HookSchema>>[1]));

describe('validateHooks', () => {
  it('accepts a batch or throws InvalidArgumentError with a known reason, for any hooks', () => {
    const options = fc.record(
      {
        callerEnvAllowlist: fc.constant(new Set(['HOOK_TOKEN'])),
        destinations: fc.constant(new DestinationPolicy({ deny: ['10.0.0.0/8'] })),
        limits: fc.record({ maxHeaders: fc.integer({ min: 0, max: 5 }) }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.array(hook, { maxLength: 4 }), options, (hooks, opts) => {
        try {
          validateHooks(hooks, 'hooks', opts);
        } catch (e: unknown) {
          expect(e).toBeInstanceOf(InvalidArgumentError);
          const err = e as InvalidArgumentError;
          expect(REASONS.has(err.reason), err.reason).toBe(true);
          expect(err.field).toMatch(/^hooks\[\d+\]/);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
