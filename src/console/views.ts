/**
 * @module What the admin console shows, as plain JSON-ready objects: the
 * same object renders as an HTML page and answers the page's `.json`
 * endpoint. {@link ConsoleSource} is what the console reads them from; the
 * composition root (`src/app.ts`) implements it over the store, the registry,
 * the effective environment, the plugins and the health state. Every view is
 * read-only and already redacted: no token, password or signing secret ever
 * reaches one.
 */

/** Health and store state (`/` and `/status.json`). */
export interface StatusView {
  /** Package version. */
  readonly version: string;
  /** Process start, ISO 8601. */
  readonly startedAt: string;
  /** Seconds since the start. */
  readonly uptimeSeconds: number;
  /** `SERVING` or `NOT_SERVING` (`/livez`). */
  readonly liveness: string;
  /** `SERVING` or `NOT_SERVING` (`/readyz`): follows the store. */
  readonly readiness: string;
  readonly store: {
    /** `sqlite` or `postgres`. */
    readonly kind: string;
    /** Whether the last health check passed. */
    readonly serving: boolean;
    /** The database file, or the PostgreSQL URL without its password. */
    readonly location: string;
  };
  /** Handle streams attached now. */
  readonly handlerStreams: number;
  /** Detached deliveries in flight. */
  readonly detachedInFlight: number;
}

/** One configuration value (`/config` and `/config.json`). */
export interface ConfigEntry {
  /** Configuration key, as in the validated config (`httpListen`, `connections.maxConnections`). */
  readonly key: string;
  /** The value as text; secrets are replaced by `[redacted]`. */
  readonly value: string;
}

/** The effective configuration. */
export interface ConfigView {
  readonly entries: readonly ConfigEntry[];
  /** Hook-related variables of the effective environment, secrets redacted. */
  readonly environment: readonly ConfigEntry[];
}

/** A hook as the console shows it: templates and names, never resolved secrets. */
export interface HookView {
  /** Position in the run order, from 1. */
  readonly position: number;
  readonly id: string;
  /** Event type literal (`beforeToolCall`) or modifying point (`MODIFY_POINT_TRANSFORM_CONTEXT`). */
  readonly type: string;
  /** `caller`, `environment` or `plugin`. */
  readonly source: string;
  readonly plugin?: string;
  readonly matcher?: string;
  /** Whether a local handler serves it. */
  readonly handler: boolean;
  /** Webhook URL, password and query values redacted; empty for a handler-only hook. */
  readonly url: string;
  readonly delivery: string;
  readonly responseHandling: string;
  readonly onError: string;
  /** Header names and templates; literal values other than an auth scheme are redacted. */
  readonly headers: readonly ConfigEntry[];
  /** Name of the signing secret, never the secret. */
  readonly signingSecret: string;
}

/** Environment hooks and operator plugins in force, and the last reload (`/environment`). */
export interface EnvironmentView {
  readonly environment: {
    readonly generation: number;
    /** Whether the effective environment is valid; while not, decisions fail closed. */
    readonly valid: boolean;
    /** The error of an invalid environment (its message names variables, never values). */
    readonly error?: string;
    /** The env file, if one is configured. */
    readonly envFile?: string;
    readonly hooks: readonly HookView[];
  };
  readonly plugins: {
    readonly generation: number;
    readonly valid: boolean;
    readonly error?: string;
    readonly pluginsFile?: string;
    /** Number of plugins in the file. */
    readonly plugins: number;
    readonly hooks: readonly HookView[];
  };
}

/** A parked call of an operation. */
export interface ParkedCallView {
  readonly toolCallId: string;
  /** `PARK_KIND_DEFERRED` or `PARK_KIND_HUMAN_APPROVAL`. */
  readonly kind: string;
  readonly identifier: string;
  readonly apiName: string;
  readonly chain: readonly string[];
  /** ISO 8601. */
  readonly parkedAt: string;
  /** ISO 8601, once a result was published. */
  readonly publishedAt?: string;
  /** `waiting` or `published`. */
  readonly state: string;
}

/** One hook's part in a decision. */
export interface DecisionHookView {
  readonly hookId: string;
  readonly hookType: string;
  readonly source: string;
  /** `delivered`, `handled`, `skipped`, `failed` or `allowed`. */
  readonly status: string;
  readonly errorCode: string;
  readonly message: string;
  readonly httpStatus: number;
  /** Milliseconds the hook took. */
  readonly latencyMs: number;
}

/** One decision, as the audit log records it. */
export interface DecisionView {
  readonly decisionId: string;
  /** ISO 8601. */
  readonly time: string;
  /** The RPC: `DecideToolCall`, `DecideToolResult`, `PublishDeferredResult`, or a modifying call. */
  readonly kind: string;
  readonly operationId: string;
  readonly toolCallId: string;
  readonly identifier: string;
  readonly apiName: string;
  /** Modifying point, for a modifying call; else empty. */
  readonly point: string;
  /** Each hook consulted, in the order they ran. */
  readonly outcomes: readonly DecisionHookView[];
  /** `allow`, `deny`, `mock`, or for a publication `published`/`duplicate`. */
  readonly decision: string;
  readonly reason: string;
  /** `hook_denied` or `hook_control_error` for a deny; else empty. */
  readonly classification: string;
}

/** An operation (`/ops/<id>` and `/ops/<id>.json`). */
export interface OperationView {
  readonly operationId: string;
  /** Whether the store knows the operation. */
  readonly known: boolean;
  /** Retention expired it: its hooks are gone, and only its tombstone is left. */
  readonly expired: boolean;
  readonly parentOperationId?: string;
  /** Its caller hooks, then the environment hooks and plugins that apply to every operation. */
  readonly hooks: readonly HookView[];
  readonly parkedCalls: readonly ParkedCallView[];
  /** Most recent first. */
  readonly decisions: readonly DecisionView[];
}

/** Where decisions come from: the audit log's store listing and its in-process feed. */
export interface DecisionSource {
  /** The operation's most recent decisions, newest first, at most `limit`. */
  recent(operationId: string, limit: number): Promise<DecisionView[]>;
  /** Calls `listener` with each decision made from now on; returns the unsubscribe function. */
  subscribe(listener: (decision: DecisionView) => void): () => void;
}

/** What the console reads. */
export interface ConsoleSource {
  status(): Promise<StatusView>;
  configuration(): ConfigView;
  environment(): EnvironmentView;
  /**
   * The operation's view, with at most `limit` parked calls and decisions.
   *
   * @throws when the store cannot be read (the console answers 503).
   */
  operation(operationId: string, limit: number): Promise<OperationView>;
  readonly decisions: DecisionSource;
}
