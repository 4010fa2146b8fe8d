/**
 * @module Parked tool calls (the spec's "Hook configuration lifetime" and
 * "Publish after the result hook"): a call that completes later or waits for
 * a human is recorded with its context and operation chain, so a later
 * decision or publication works on any restarted sidecar; a deferred result
 * runs the result controls, then is published into the call's placeholder
 * exactly once, and duplicates get the first final result, a denial included.
 */

import { randomUUID } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { create } from '@bufbuild/protobuf';
import type { Decision, HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type AfterToolCallEvent,
  AfterToolCallEventSchema,
  type HookEvent,
  HookEventSchema,
  HookType,
  type ToolCallContext,
  type ToolResult,
} from '../../gen/agenthooks/v1/events_pb.js';
import { ParkKind } from '../../gen/agenthooks/v1/service_pb.js';
import { AgentHooksError, hasReason, InvalidArgumentError } from '../errors.js';
import { extend } from '../extend.js';
import {
  type ParkedCallRecord,
  type ParkStore,
  parkedCallNotFoundError,
  toolCallContextUnavailableError,
} from '../store/store.js';
import { evaluateControls } from './control.js';
import { type DispatchDeps, detachedBytes, dispatchEvent } from './dispatch.js';
import { resolveChain, validateToolCallContext } from './tool-call.js';
import { isControlHook } from './validate.js';

/** What parking and publishing need beyond dispatch. */
export interface ParkDeps extends DispatchDeps {
  readonly parks: ParkStore;
  /** Current time in epoch milliseconds. */
  readonly now: () => number;
}

/** The answer of a publication. */
export interface Publication {
  /** The final result in the placeholder, identical for every caller. */
  readonly finalResult: ToolResult;
  /** True for the one call that wrote it. */
  readonly published: boolean;
  /** When it was published (epoch ms), the same for every caller. */
  readonly publishedAt: number;
  /** For the call that published: what its result controls decided, for the audit log. */
  readonly evaluation?: PublicationEvaluation;
}

/** The result controls' run of the call that published. */
export interface PublicationEvaluation {
  readonly context: ToolCallContext;
  readonly chain: readonly string[];
  readonly decision: Decision;
  readonly outcomes: readonly HookOutcome[];
}

/**
 * Records a parked call; idempotent per tool call id (a repeated park
 * returns the first record). Committed before it resolves.
 *
 * @throws InvalidArgumentError for a missing context field, chain entry or kind.
 */
export async function parkToolCall(
  deps: ParkDeps,
  context: ToolCallContext | undefined,
  requestedChain: readonly string[],
  kind: ParkKind,
): Promise<{ record: ParkedCallRecord; created: boolean }> {
  validateToolCallContext(context, 'context');
  const chain = resolveChain(requestedChain, context);
  if (kind !== ParkKind.DEFERRED && kind !== ParkKind.HUMAN_APPROVAL) {
    throw new InvalidArgumentError(
      'kind',
      'PARK_KIND_REQUIRED',
      'kind must be PARK_KIND_DEFERRED or PARK_KIND_HUMAN_APPROVAL',
    );
  }
  // The store refuses a new record on an expired operation (OPERATION_EXPIRED).
  return deps.parks.parkCall({
    toolCallId: context.toolCallId,
    operationId: context.operationId,
    chain,
    kind,
    context,
    parkedAt: deps.now(),
  });
}

/**
 * Returns the operation chain of a decision: the request's chain when it
 * names one; else, for a parked call of the same tool (identifier and
 * apiName), its recorded chain followed by the call's current operation (an
 * approval's continuation); else the call's own operation. An expired operation of the chain fails the decision
 * later, when its hooks are read (OPERATION_EXPIRED).
 *
 * @throws AgentHooksError a store error.
 */
export async function decisionChain(
  deps: ParkDeps,
  requested: readonly string[],
  context: ToolCallContext,
): Promise<string[]> {
  let chain: string[];
  if (requested.length > 0) {
    chain = resolveChain(requested, context);
  } else {
    const parked = await deps.parks.getParkedCall(context.toolCallId);
    // The record is this call's only when it parked the same tool: an id
    // another operation's model reused for another tool is no continuation.
    const same =
      parked !== undefined &&
      parked.context.identifier === context.identifier &&
      parked.context.apiName === context.apiName;
    chain = same ? [...parked.chain] : [context.operationId];
    if (chain.at(-1) !== context.operationId) chain.push(context.operationId);
  }
  // No separate expiry check: reading an expired operation's hooks fails
  // with OPERATION_EXPIRED in the same snapshot (the store's listHooks).
  return chain;
}

/** Default of {@link PublisherOptions.leaseMs} (`--publication-lease`): 30 seconds. */
export const DEFAULT_PUBLICATION_LEASE_MS = 30_000;

/** Renewals of a publication lease per lease duration, while its controls run. */
const RENEWALS_PER_LEASE = 3;

/** First pause before a failed lease release is tried again, in milliseconds (then doubling). */
const RELEASE_FIRST_PAUSE_MS = 100;

/** Longest pause between two tries of a lease release, in milliseconds. */
const RELEASE_MAX_PAUSE_MS = 2_000;

/** First pause of a duplicate waiting for another process's publication, in milliseconds. */
const WAIT_FIRST_PAUSE_MS = 10;

/** Longest pause between two looks of a waiting duplicate, in milliseconds. */
const WAIT_MAX_PAUSE_MS = 250;

/** Reason of a publication whose caller cancelled it, or whose deadline passed, while it waited. */
export const PUBLICATION_CANCELLED_REASON = 'CANCELLED';

/**
 * Instance ids of the publishers of this process (one per app; tests build
 * several), so that a lease of this process id is known to be alive.
 */
const PUBLISHERS_HERE = new Set<string>();

/**
 * This process's PID namespace, as the inode number `/proc/self/ns/pid`
 * links to; empty where it cannot be read (not Linux), which turns off the
 * same-host takeover.
 */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '';
  } catch {
    return '';
  }
}

/** Options of a {@link DeferredPublisher}. */
export interface PublisherOptions {
  /**
   * Names this process in the leases it takes (with a sequence number per
   * publication); logs and the store show it. Default
   * `<hostname>:<PID namespace>/<pid>/<8 random hex digits>`, which also
   * lets a process recognise the lease of a dead process of its own host and
   * PID namespace (see {@link DeferredPublisher}).
   */
  readonly holderId?: string;
  /**
   * How long a publication lease lasts without renewal, in milliseconds; the
   * holder renews it every third of it while its controls run, so a slow but
   * live holder keeps it however long its control chain takes, and a holder
   * that died is taken over this long after its last renewal. A positive
   * integer; default {@link DEFAULT_PUBLICATION_LEASE_MS}.
   */
  readonly leaseMs?: number;
}

/**
 * Publishes deferred results exactly once per tool call, and runs their
 * result controls once, across every process sharing the store: the call
 * that takes the parked call's publication lease runs the controls and
 * publishes; a duplicate, in this process or another, waits for the first
 * final result and returns it, and takes the lease over once it lapses (its
 * holder died mid-publication). Within this process, duplicates wait on the
 * publication in progress; across processes they look at the store, each
 * pause twice the last (from 10 ms up to 250 ms, never past the lease's
 * expiry). A lease whose holder was a process of this host and PID namespace
 * that is gone (a sidecar restarted beside its SQLite file, or in a pod that
 * shares its PID namespace) is taken over at once rather than when it lapses:
 * its process id is not running, or is this process's own under another
 * instance id. Two hosts of one hostname (pods on the host network, a fixed
 * container hostname) have different PID namespaces, so neither takes the
 * other's live lease early. The store's conditional write of the placeholder still
 * arbitrates the publication itself, so even a holder taken over while alive
 * (stalled longer than the lease) cannot publish twice.
 */
export class DeferredPublisher {
  readonly #running = new Map<string, Promise<Publication>>();
  /** Leases to release once the store answers again, by holder (see `#queueRelease`). */
  readonly #releases = new Map<
    string,
    { readonly deps: ParkDeps; readonly toolCallId: string; readonly lapsesAt: number }
  >();
  #releaseTimer: NodeJS.Timeout | undefined;
  readonly #holderId: string;
  readonly #leaseMs: number;
  #sequence = 0;

  /**
   * @throws RangeError when `leaseMs` is not a positive integer.
   */
  constructor(options: PublisherOptions = {}) {
    const leaseMs = options.leaseMs ?? DEFAULT_PUBLICATION_LEASE_MS;
    if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0) {
      throw new RangeError(`leaseMs must be a positive integer, got ${leaseMs}`);
    }
    this.#leaseMs = leaseMs;
    const instance = randomUUID().slice(0, 8);
    this.#holderId =
      options.holderId ?? `${hostname()}:${pidNamespace()}/${process.pid}/${instance}`;
    PUBLISHERS_HERE.add(this.#holderId.split('/')[2] ?? instance);
  }

  /**
   * Runs the result controls on `result`, then publishes the allowed result
   * or the denial into the placeholder, once. When the controls or the store
   * fail, nothing is published, the lease is released and the error
   * propagates; a later call can publish at once. A duplicate that waits
   * stops when its own call is cancelled or its deadline passes.
   *
   * @throws AgentHooksError TOOL_CALL_CONTEXT_UNAVAILABLE, PARKED_CALL_NOT_FOUND,
   *   OPERATION_EXPIRED, INVALID_ENVIRONMENT, CANCELLED, or a store error.
   */
  async publish(
    deps: ParkDeps,
    toolCallId: string,
    result: ToolResult,
    requestedChain: readonly string[],
    signal: AbortSignal,
  ): Promise<Publication> {
    let pause = WAIT_FIRST_PAUSE_MS;
    for (;;) {
      if (signal.aborted) throw waitCancelled(signal);
      const running = this.#running.get(toolCallId);
      if (running !== undefined) {
        // Wait for the publication in progress here; if it failed, claim ourselves.
        await untilSettled(running, signal);
        continue;
      }
      this.#sequence += 1;
      const holder = `${this.#holderId}/${this.#sequence}`;
      let claim = await this.#claim(deps, toolCallId, holder);
      if (claim === undefined) {
        throw await missingRecordError(deps, toolCallId, requestedChain);
      }
      if (claim.state === 'published') {
        return { finalResult: claim.finalResult, published: false, publishedAt: claim.publishedAt };
      }
      if (claim.state === 'held' && this.#diedHere(claim.holder)) {
        const taken = await this.#claim(deps, toolCallId, holder, claim.holder);
        // Published or claimed by another meanwhile: the next look answers.
        if (taken?.state !== 'claimed') continue;
        deps.logger.info('took over the publication lease of a process that is gone', {
          toolCallId,
          holder: claim.holder,
        });
        claim = taken;
      }
      if (claim.state === 'held') {
        // Another process publishes (or one of ours started since): look again soon.
        await pauseFor(Math.min(pause, claim.expiresInMs + 1), signal);
        pause = Math.min(pause * 2, WAIT_MAX_PAUSE_MS);
        continue;
      }
      const publication = this.#publishLeased(
        deps,
        claim.record,
        holder,
        result,
        requestedChain,
        signal,
      );
      this.#running.set(toolCallId, publication);
      try {
        return await publication;
      } finally {
        this.#running.delete(toolCallId);
      }
    }
  }

  /**
   * Claims the publication lease for `holder` (taking it over from
   * `replacing`). A claim that failed with the connection (`STORE_UNAVAILABLE`)
   * may still have committed, its answer lost: its release is queued (see
   * {@link #queueRelease}), so that no retry, here or on another replica,
   * waits for the lease to lapse. Any other failure committed nothing.
   */
  async #claim(
    deps: ParkDeps,
    toolCallId: string,
    holder: string,
    replacing?: string,
  ): ReturnType<ParkStore['claimPublication']> {
    try {
      return await deps.parks.claimPublication(toolCallId, holder, this.#leaseMs, replacing);
    } catch (e: unknown) {
      if (hasReason(e, 'STORE_UNAVAILABLE')) this.#queueRelease(deps, toolCallId, holder);
      throw e;
    }
  }

  /**
   * Releases `holder`'s lease once (its failure logged); when the store is
   * unreachable then (an outage), queues it for {@link #queueRelease}. Never throws.
   */
  async #release(deps: ParkDeps, toolCallId: string, holder: string): Promise<void> {
    try {
      await deps.parks.releasePublication(toolCallId, holder);
    } catch (err: unknown) {
      deps.logger.warn('cannot release a publication lease', { toolCallId, holder, err });
      if (hasReason(err, 'STORE_UNAVAILABLE')) this.#queueRelease(deps, toolCallId, holder);
    }
  }

  /**
   * Queues the release of `holder`'s lease until the store answers again or
   * the lease would have lapsed by itself: a publication that failed with an
   * outage must not hold every retry back for the whole lease. One timer
   * drains the queue for the publisher, pausing 100 ms and doubling up to
   * 2 s while the store stays unreachable; it is unref'd, and the queue holds
   * one entry per failed publication, each gone by its lease's end.
   */
  #queueRelease(deps: ParkDeps, toolCallId: string, holder: string): void {
    this.#releases.set(holder, { deps, toolCallId, lapsesAt: deps.now() + this.#leaseMs });
    if (this.#releaseTimer === undefined) this.#scheduleReleases(RELEASE_FIRST_PAUSE_MS);
  }

  #scheduleReleases(pauseMs: number): void {
    this.#releaseTimer = setTimeout(() => {
      void this.#drainReleases().then(
        (failed) => {
          this.#releaseTimer = undefined;
          if (this.#releases.size > 0) {
            this.#scheduleReleases(
              failed ? Math.min(pauseMs * 2, RELEASE_MAX_PAUSE_MS) : RELEASE_FIRST_PAUSE_MS,
            );
          }
        },
        () => {
          this.#releaseTimer = undefined;
        },
      );
    }, pauseMs);
    this.#releaseTimer.unref();
  }

  /** Tries each queued release once; resolves true when one failed again. */
  async #drainReleases(): Promise<boolean> {
    let failed = false;
    for (const [holder, { deps, toolCallId, lapsesAt }] of [...this.#releases]) {
      if (deps.now() >= lapsesAt) {
        this.#releases.delete(holder);
        continue;
      }
      try {
        await deps.parks.releasePublication(toolCallId, holder);
        this.#releases.delete(holder);
        deps.logger.info('released a publication lease after the store came back', {
          toolCallId,
          holder,
        });
      } catch {
        failed = true;
      }
    }
    return failed;
  }

  /**
   * True when `holder` names a process of this host and PID namespace that
   * is no longer running: the same hostname and namespace, with a process id
   * that is this process's own under an instance id no publisher of this
   * process has, or that no process has (`kill(pid, 0)` finds none). False
   * whenever in doubt (a namespace that could not be read, another host or
   * namespace); the lease then lapses by itself.
   */
  #diedHere(holder: string): boolean {
    const [host, pid, instance] = holder.split('/');
    const here = this.#holderId.split('/')[0] ?? '';
    if (host !== here || here.endsWith(':') || instance === undefined) return false;
    const id = Number(pid);
    if (!Number.isSafeInteger(id) || id <= 0) return false;
    if (id === process.pid) return !PUBLISHERS_HERE.has(instance);
    try {
      process.kill(id, 0);
      return false;
    } catch (e: unknown) {
      // EPERM: a process of another user runs under that id.
      return (e as NodeJS.ErrnoException).code === 'ESRCH';
    }
  }

  /**
   * Publishes under the lease `holder` took: renews it while the controls
   * run, and releases it when they or the store fail (the placeholder's
   * write releases it on success).
   */
  async #publishLeased(
    deps: ParkDeps,
    record: ParkedCallRecord,
    holder: string,
    result: ToolResult,
    requestedChain: readonly string[],
    signal: AbortSignal,
  ): Promise<Publication> {
    const { toolCallId } = record;
    // The placeholder's write ends the lease itself: a renewal that finds no
    // lease once the write started lost nothing if the write published. Such
    // a finding waits for the write's outcome (renewals go on meanwhile: a
    // slow write must not let the lease lapse).
    const progress: LeaseProgress = { writing: false, published: undefined };
    let lostWhileWriting = false;
    const lost = () =>
      deps.logger.warn('publication lease lost while the controls run', { toolCallId, holder });
    const renewal = setInterval(
      () => {
        deps.parks.renewPublication(toolCallId, holder, this.#leaseMs).then(
          (held) => {
            if (held) return;
            if (!progress.writing) lost();
            else if (progress.published === undefined) lostWhileWriting = true;
            else if (!progress.published) lost();
          },
          (e: unknown) => {
            deps.logger.warn('cannot renew a publication lease', { toolCallId, holder, err: e });
          },
        );
      },
      Math.max(1, Math.floor(this.#leaseMs / RENEWALS_PER_LEASE)),
    );
    try {
      const publication = await this.#publishOnce(
        deps,
        record,
        result,
        requestedChain,
        signal,
        progress,
      );
      progress.published = publication.published;
      if (lostWhileWriting && !publication.published) lost();
      return publication;
    } catch (e: unknown) {
      await this.#release(deps, toolCallId, holder);
      throw e;
    } finally {
      clearInterval(renewal);
    }
  }

  /** Runs the controls on `result` and writes the final result into the placeholder. */
  async #publishOnce(
    deps: ParkDeps,
    record: ParkedCallRecord,
    result: ToolResult,
    requestedChain: readonly string[],
    signal: AbortSignal,
    progress?: LeaseProgress,
  ): Promise<Publication> {
    // An expired operation of the chain fails the controls' hook read (OPERATION_EXPIRED).
    const chain =
      requestedChain.length > 0 ? resolveChain(requestedChain, record.context) : [...record.chain];
    // As a decision on the call's own operation reads it (decisionChain, by the
    // same rule): the record's chain, then the call's operation unless last, so
    // that it applies even when the chain it was parked with left it out.
    if (requestedChain.length === 0 && chain.at(-1) !== record.context.operationId) {
      chain.push(record.context.operationId);
    }
    const event: AfterToolCallEvent = create(AfterToolCallEventSchema, {
      context: record.context,
      mocked: false,
      result,
    });
    const { decision, outcomes } = await evaluateControls(
      deps,
      { type: HookType.AFTER_TOOL_CALL, event },
      chain,
      signal,
    );
    const final =
      decision.outcome.case === 'deny' && decision.outcome.value.blockedResult !== undefined
        ? decision.outcome.value.blockedResult
        : result;
    if (progress !== undefined) progress.writing = true;
    const publication = await deps.parks.publishResult(record.toolCallId, final, deps.now());
    if (publication.published) {
      // The call that published sends the afterToolCall notification, once.
      const notification = create(HookEventSchema, {
        event: {
          case: 'afterToolCall',
          value: { context: record.context, mocked: false, result: publication.finalResult },
        },
      });
      // Past the background scope's bounds it is not sent; the scope counts and logs that.
      deps.background.run(
        'afterToolCall notification of a published result',
        async (background) => {
          deps.tracing?.adopt(background, signal);
          await notifyPublished(deps, notification, background);
        },
        { fields: { operationId: record.context.operationId }, bytes: detachedBytes(notification) },
      );
    }
    if (!publication.published) return publication;
    return extend(publication, {
      evaluation: { context: record.context, chain, decision, outcomes },
    });
  }
}

/** Tries of a published result's notification while the store is out. */
const NOTIFY_TRIES = 6;

/**
 * Sends the `afterToolCall` notification of a result this call published.
 * Its hooks are read from the store before anything is sent, so a read that
 * fails with an outage (`STORE_UNAVAILABLE`: a PostgreSQL connection lost) is
 * tried again, 100 ms doubling to 2 s apart, {@link NOTIFY_TRIES} times in
 * all: nothing else would ever send it, since the publication has answered
 * `published: true` and its duplicates get `published: false`.
 */
async function notifyPublished(
  deps: ParkDeps,
  notification: HookEvent,
  signal: AbortSignal,
): Promise<void> {
  let pause = RELEASE_FIRST_PAUSE_MS;
  for (let tried = 1; ; tried++) {
    try {
      await dispatchEvent(deps, notification, signal);
      return;
    } catch (e: unknown) {
      if (!hasReason(e, 'STORE_UNAVAILABLE') || tried >= NOTIFY_TRIES || signal.aborted) throw e;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, pause);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
    pause = Math.min(2 * pause, RELEASE_MAX_PAUSE_MS);
  }
}

/** How far a leased publication got, for its lease renewals. */
interface LeaseProgress {
  /** The placeholder's write has started. */
  writing: boolean;
  /** Whether the write published; undefined until it answered. */
  published: boolean | undefined;
}

/**
 * Resolves once `publication` settles, whichever way.
 *
 * @throws AgentHooksError CANCELLED when `signal` aborts first.
 */
function untilSettled(publication: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(waitCancelled(signal));
    signal.addEventListener('abort', onAbort);
    const settled = () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    publication.then(settled, settled);
  });
}

/**
 * Resolves after `ms` milliseconds.
 *
 * @throws AgentHooksError CANCELLED when `signal` aborts first.
 */
function pauseFor(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(waitCancelled(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort);
  });
}

/**
 * The error of a duplicate whose call was cancelled, or whose deadline
 * passed, while it waited for the first publication; never an answer.
 */
function waitCancelled(signal: AbortSignal): AgentHooksError {
  return new AgentHooksError(
    'cancelled',
    PUBLICATION_CANCELLED_REASON,
    'the call was cancelled while it waited for the publication in progress',
    { cause: signal.reason },
  );
}

/**
 * The error of a publication without a parked record: fails closed when any
 * result control could apply (caller controls of the requested chain, or the
 * environment's), since its context cannot be rebuilt.
 */
async function missingRecordError(
  deps: ParkDeps,
  toolCallId: string,
  requestedChain: readonly string[],
): Promise<AgentHooksError> {
  const controls = (hooks: readonly { type: HookType; webhook?: unknown }[]) =>
    hooks.some((h) => h.type === HookType.AFTER_TOOL_CALL && isControlHook(h as never));
  let configured = controls(deps.environmentHooks());
  for (const op of requestedChain) {
    if (configured) break;
    configured = controls((await deps.registry.hooksOf(op)).hooks);
  }
  return configured
    ? toolCallContextUnavailableError(toolCallId, undefined)
    : parkedCallNotFoundError(toolCallId);
}
