/**
 * @module The counters and histograms of the decision path keep their
 * counts in cells of their own; what `/metrics` renders must be what
 * prom-client's own Counter and Histogram render for the same calls, at
 * every scrape.
 */
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CellCounter, CellHistogram, Metrics } from '../src/metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];
const COUNTER = { name: 't_calls_total', help: 'calls', labelNames: ['method', 'code'] as const };
const HISTOGRAM = {
  name: 't_duration_seconds',
  help: 'latency',
  labelNames: ['method', 'code'] as const,
  buckets: BUCKETS,
};

/** A call on both metrics, or a scrape. */
type Step =
  | { kind: 'inc'; method: string; code: string }
  | { kind: 'observe'; method: string; code: string; value: number }
  | { kind: 'scrape' };

const label = fc.constantFrom('DecideToolCall', 'Modify', 'a"b\\c\nd', '');
const value = fc.oneof(
  fc.constantFrom(...BUCKETS, 0, 10.5, -1, 1e-9),
  fc.double({ min: -1, max: 20, noNaN: true }),
);
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('inc' as const), method: label, code: label }),
  fc.record({ kind: fc.constant('observe' as const), method: label, code: label, value }),
  fc.constant({ kind: 'scrape' as const }),
);

describe('metric cells', () => {
  it('render what prom-client renders for the same calls, at every scrape', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), async (steps) => {
        const ours = new Registry();
        const counter = new CellCounter({ ...COUNTER, registers: [ours] });
        const histogram = new CellHistogram({ ...HISTOGRAM, registers: [ours] });
        const theirs = new Registry();
        const refCounter = new Counter({ ...COUNTER, registers: [theirs] });
        const refHistogram = new Histogram({ ...HISTOGRAM, registers: [theirs] });
        for (const s of [...steps, { kind: 'scrape' } as const]) {
          if (s.kind === 'inc') {
            counter.inc(s.method, s.code);
            refCounter.inc({ method: s.method, code: s.code });
          } else if (s.kind === 'observe') {
            histogram.observe(s.method, s.code, s.value);
            refHistogram.observe({ method: s.method, code: s.code }, s.value);
          } else {
            expect(await ours.metrics()).toBe(await theirs.metrics());
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keep three labels in the order they are named', async () => {
    const ours = new Registry();
    const counter = new CellCounter({
      name: 't_outcomes_total',
      help: 'outcomes',
      labelNames: ['hook_type', 'source', 'outcome'],
      registers: [ours],
    });
    counter.inc('beforeToolCall', 'caller', 'allowed');
    counter.inc('beforeToolCall', 'caller', 'allowed');
    counter.inc('beforeToolCall', 'env', 'failed');
    expect(await ours.metrics()).toBe(
      [
        '# HELP t_outcomes_total outcomes',
        '# TYPE t_outcomes_total counter',
        't_outcomes_total{hook_type="beforeToolCall",source="caller",outcome="allowed"} 2',
        't_outcomes_total{hook_type="beforeToolCall",source="env",outcome="failed"} 1',
        '',
      ].join('\n'),
    );
  });

  it('leave a value that is not a number out of a histogram, where prom-client would throw', async () => {
    const ours = new Registry();
    const histogram = new CellHistogram({ ...HISTOGRAM, registers: [ours] });
    histogram.observe('m', 'OK', Number.NaN);
    histogram.observe('m', 'OK', Number.POSITIVE_INFINITY);
    expect(await ours.metrics()).not.toContain('t_duration_seconds_count');
    histogram.observe('m', 'OK', 0.5);
    expect(await ours.metrics()).toContain('t_duration_seconds_count{method="m",code="OK"} 1');
  });

  it('forget every count and observation on a reset of the registry, collected or not', async () => {
    const ours = new Registry();
    const counter = new CellCounter({ ...COUNTER, registers: [ours] });
    const histogram = new CellHistogram({ ...HISTOGRAM, registers: [ours] });
    counter.inc('m', 'OK');
    await ours.metrics();
    counter.inc('m', 'CANCELLED');
    histogram.observe('m', 'OK', 0.5);
    ours.resetMetrics();
    const text = await ours.metrics();
    expect(text).not.toContain('t_duration_seconds_count');
    expect(text).not.toContain('t_calls_total{');
    counter.inc('m', 'OK');
    expect(await ours.metrics()).toContain('t_calls_total{method="m",code="OK"} 1');
  });

  it("are the sidecar's decision metrics, counted as the calls come", async () => {
    const metrics = new Metrics();
    metrics.rpc('DecideToolCall', 'OK', 0.002);
    metrics.decision('beforeToolCall', 'allow');
    metrics.hookOutcome('beforeToolCall', 'caller', 'allowed');
    metrics.webhookResult('control', 'ok');
    metrics.storeCall('listHooks', 'ok', 0.00003);
    const text = await metrics.registry.metrics();
    for (const line of [
      'agenthooks_rpc_calls_total{method="DecideToolCall",code="OK"} 1',
      'agenthooks_rpc_duration_seconds_bucket{le="0.0025",method="DecideToolCall",code="OK"} 1',
      'agenthooks_rpc_duration_seconds_count{method="DecideToolCall",code="OK"} 1',
      'agenthooks_decisions_total{phase="beforeToolCall",outcome="allow"} 1',
      'agenthooks_hook_outcomes_total{hook_type="beforeToolCall",source="caller",outcome="allowed"} 1',
      'agenthooks_webhook_results_total{kind="control",code="ok"} 1',
      'agenthooks_store_operation_duration_seconds_bucket{le="0.00005",operation="listHooks",result="ok"} 1',
    ]) {
      expect(text).toContain(line);
    }
  });

  it("show each audit sink's buffered entries as last set, at the scrape", async () => {
    const metrics = new Metrics();
    metrics.auditBuffered('store', 3);
    metrics.auditBuffered('http', 7);
    metrics.auditBuffered('store', 1);
    const text = await metrics.registry.metrics();
    expect(text).toContain('agenthooks_audit_buffered_entries{sink="store"} 1');
    expect(text).toContain('agenthooks_audit_buffered_entries{sink="http"} 7');
    metrics.auditBuffered('http', 0);
    expect(await metrics.registry.metrics()).toContain(
      'agenthooks_audit_buffered_entries{sink="http"} 0',
    );
  });

  it('add counts to one label, as prom-client counts them, and refuse a negative one', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const config = { name: 't_written_total', help: 'written', labelNames: ['sink'] as const };
    const counter = new CellCounter({ ...config, registers: [ours] });
    const reference = new Counter({ ...config, registers: [theirs] });
    for (const [sink, n] of [
      ['store', 120],
      ['http', 3],
      ['store', 0.5],
    ] as const) {
      counter.add(n, sink);
      reference.inc({ sink }, n);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(() => counter.add(-1, 'store')).toThrow(RangeError);
    expect(() => counter.add(Number.NaN, 'store')).toThrow(RangeError);
  });
});
