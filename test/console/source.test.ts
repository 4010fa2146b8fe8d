/**
 * The console's source over the app's parts: an operation's hooks in run
 * order (its own, then the environment's, then the plugins'), an expired
 * operation shown as such, other store failures passed on.
 */
import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { type Hook, HookSchema } from '../../gen/agenthooks/v1/hooks_pb.js';
import type { EnvironmentSnapshot } from '../../src/config/environment.js';
import { RecentDecisions } from '../../src/console/decisions.js';
import { createConsoleSource } from '../../src/console/source.js';
import { AgentHooksError } from '../../src/errors.js';
import { OPERATION_EXPIRED } from '../../src/store/store.js';

function hook(id: string): Hook {
  return create(HookSchema, {
    id,
    type: HookType.BEFORE_TOOL_CALL,
    webhook: { url: `https://u:pw@hooks.example.com/${id}?t=secret`, headers: { 'x-key': 'k' } },
  });
}

function sourceWith(storedHooks: () => Promise<{ hooks: Hook[]; known: boolean }>) {
  return createConsoleSource({
    version: '1',
    startedAt: 0,
    config: {},
    environment: () =>
      ({
        generation: 2,
        env: { AGENT_HOOK_WEBHOOK_TOKEN: 'tok', AGENT_HOOK_WEBHOOK_EVENTS: 'beforeToolCall' },
        hooks: { ok: true, hooks: [hook('server-env-webhook:beforeToolCall')] },
      }) as EnvironmentSnapshot,
    plugins: () => ({ generation: 1, hooks: { ok: true, plugins: 0, hooks: [] } }),
    health: () => ({ liveness: 'SERVING', readiness: 'SERVING' }),
    store: () => ({ kind: 'postgres', serving: true, location: 'postgres://app:pw@db/agent' }),
    gauges: async () => ({ handlerStreams: 0, detachedInFlight: 0 }),
    storedHooks: storedHooks,
    parkedCalls: async () => [],
    decisions: new RecentDecisions(),
  });
}

describe('the console source', () => {
  it("lists the operation's hooks, then the environment's, redacted", async () => {
    const source = sourceWith(async () => ({ hooks: [hook('a'), hook('b')], known: true }));
    const view = await source.operation('op-1', 10);
    expect(view.hooks.map((h) => [h.position, h.id, h.source])).toEqual([
      [1, 'a', 'caller'],
      [2, 'b', 'caller'],
      [3, 'server-env-webhook:beforeToolCall', 'environment'],
    ]);
    expect(view.hooks[0]?.url).toBe('https://u:[redacted]@hooks.example.com/a?t=[redacted]');
    expect(view.hooks[0]?.headers).toEqual([{ key: 'x-key', value: '[redacted]' }]);
    expect(view.expired).toBe(false);
    expect(source.configuration().environment).toEqual([
      { key: 'AGENT_HOOK_WEBHOOK_EVENTS', value: 'beforeToolCall' },
      { key: 'AGENT_HOOK_WEBHOOK_TOKEN', value: '[redacted]' },
    ]);
  });

  it('shows the store without the password of its URL', async () => {
    const source = sourceWith(async () => ({ hooks: [], known: false }));
    expect((await source.status()).store).toEqual({
      kind: 'postgres',
      serving: true,
      location: 'postgres://app:[redacted]@db/agent',
    });
  });

  it('shows an operation that retention expired as expired, and passes other failures on', async () => {
    const expired = sourceWith(() =>
      Promise.reject(new AgentHooksError('failed_precondition', OPERATION_EXPIRED, 'expired')),
    );
    expect(await expired.operation('op-1', 10)).toMatchObject({ expired: true, known: true });
    const failing = sourceWith(() =>
      Promise.reject(new AgentHooksError('unavailable', 'STORE_UNAVAILABLE', 'down')),
    );
    await expect(failing.operation('op-1', 10)).rejects.toThrow('down');
  });
});
