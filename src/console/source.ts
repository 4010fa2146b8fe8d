/**
 * @module The admin console's {@link ConsoleSource}, built over what the
 * composition root owns, each part given as a function so that the console
 * never holds a store or a registry itself: health, the effective
 * environment and plugins snapshots, the stored hooks and parked calls of an
 * operation, and the decisions.
 */
import type { Hook } from '../../gen/agenthooks/v1/hooks_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import type { EnvironmentSnapshot } from '../config/environment.js';
import type { PluginsSnapshot } from '../config/plugins.js';
import { AgentHooksError } from '../errors.js';
import { extend } from '../extend.js';
import { OPERATION_EXPIRED, type ParkedCallRecord } from '../store/store.js';
import { configEntries, hookView, redactText, redactUrl, redactValue } from './redact.js';
import type {
  ConsoleSource,
  DecisionSource,
  EnvironmentView,
  HookView,
  StatusView,
} from './views.js';

/** Variables of the effective environment the configuration page lists (values redacted). */
const LISTED_VARIABLE = /^(?:AGENT_HOOK_|AGENTHOOKS_|QSTASH_)/;

/** What {@link createConsoleSource} reads. */
export interface ConsoleSourceDeps {
  readonly version: string;
  /** Epoch milliseconds of the start. */
  readonly startedAt: number;
  /** The validated configuration; shown redacted. */
  readonly config: object;
  readonly envFile?: string | undefined;
  readonly pluginsFile?: string | undefined;
  readonly environment: () => EnvironmentSnapshot;
  readonly plugins: () => PluginsSnapshot;
  /** `SERVING` or `NOT_SERVING` of liveness and readiness. */
  readonly health: () => { readonly liveness: string; readonly readiness: string };
  readonly store: () => {
    readonly kind: string;
    readonly serving: boolean;
    readonly location: string;
  };
  readonly gauges: () => Promise<{
    readonly handlerStreams: number;
    readonly detachedInFlight: number;
  }>;
  /** The operation's caller hooks as stored, in registration order. */
  readonly storedHooks: (operationId: string) => Promise<{
    readonly hooks: readonly Hook[];
    readonly known: boolean;
    readonly parentOperationId?: string | undefined;
  }>;
  readonly parkedCalls: (operationId: string, limit: number) => Promise<ParkedCallRecord[]>;
  readonly decisions: DecisionSource;
  readonly now?: () => number;
}

/** Builds the console's source. */
export function createConsoleSource(deps: ConsoleSourceDeps): ConsoleSource {
  const now = deps.now ?? Date.now;
  const environmentView = (): EnvironmentView => {
    const env = deps.environment();
    const plugins = deps.plugins();
    return {
      environment: {
        generation: env.generation,
        valid: env.hooks.ok,
        error: env.hooks.ok ? undefined : redactText(env.hooks.error.message),
        envFile: deps.envFile,
        hooks: env.hooks.ok ? env.hooks.hooks.map((h, i) => hookView(h, i + 1, 'environment')) : [],
      },
      plugins: {
        generation: plugins.generation,
        valid: plugins.hooks.ok,
        error: plugins.hooks.ok ? undefined : redactText(plugins.hooks.error.message),
        pluginsFile: deps.pluginsFile,
        plugins: plugins.hooks.ok ? plugins.hooks.plugins : 0,
        hooks: plugins.hooks.ok
          ? plugins.hooks.hooks.map((h, i) => hookView(h, i + 1, 'plugin'))
          : [],
      },
    };
  };
  return {
    async status(): Promise<StatusView> {
      const health = deps.health();
      const store = deps.store();
      const gauges = await deps.gauges();
      const at = now();
      return {
        version: deps.version,
        startedAt: new Date(deps.startedAt).toISOString(),
        uptimeSeconds: Math.round((at - deps.startedAt) / 1000),
        liveness: health.liveness,
        readiness: health.readiness,
        // A PostgreSQL URL may hold a password.
        store: extend(store, { location: redactUrl(store.location) }),
        handlerStreams: gauges.handlerStreams,
        detachedInFlight: gauges.detachedInFlight,
      };
    },
    configuration() {
      const env = deps.environment().env;
      return {
        entries: configEntries(deps.config),
        environment: Object.keys(env)
          .filter((name) => LISTED_VARIABLE.test(name) && env[name] !== undefined)
          .sort()
          .map((name) => ({ key: name, value: redactValue(name, env[name] ?? '') })),
      };
    },
    environment: environmentView,
    async operation(operationId, limit) {
      const [stored, parked, decisions] = await Promise.all([
        deps.storedHooks(operationId).catch((e: unknown) => {
          // An expired operation is a state to show, not a failure of the console.
          if (e instanceof AgentHooksError && e.reason === OPERATION_EXPIRED) return undefined;
          throw e;
        }),
        deps.parkedCalls(operationId, limit),
        deps.decisions.recent(operationId, limit),
      ]);
      const shared = environmentView();
      const hooks: HookView[] = (stored?.hooks ?? []).map((h, i) =>
        hookView(h, i + 1, h.plugin === '' ? 'caller' : 'plugin'),
      );
      // Environment hooks run after the operation's own; the plugins after both (modifying points).
      for (const h of [...shared.environment.hooks, ...shared.plugins.hooks]) {
        hooks.push(extend(h, { position: hooks.length + 1 }));
      }
      return {
        operationId,
        known: stored?.known ?? true,
        expired: stored === undefined,
        parentOperationId: stored?.parentOperationId === '' ? undefined : stored?.parentOperationId,
        hooks,
        parkedCalls: parked.map((c) => ({
          toolCallId: c.toolCallId,
          kind: `PARK_KIND_${ParkKind[c.kind] ?? 'UNSPECIFIED'}`,
          identifier: c.context.identifier,
          apiName: c.context.apiName,
          chain: [...c.chain],
          parkedAt: new Date(c.parkedAt).toISOString(),
          publishedAt:
            c.publishedAt === undefined ? undefined : new Date(c.publishedAt).toISOString(),
          state: c.finalResult === undefined ? 'waiting' : 'published',
        })),
        decisions,
      };
    },
    decisions: deps.decisions,
  };
}
