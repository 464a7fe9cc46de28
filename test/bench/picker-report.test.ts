import { describe, expect, it } from 'vitest';
import type { OverheadStats } from './bench-overhead.ts';
import type { TierMetrics } from './tier-report.ts';
import {
  comparePickerRow,
  judgePickerGoals,
  judgePickerOverhead,
  renderPickerLines,
} from './picker-report.ts';
import { buildRouterResult as row } from '../support/bench/router-result.ts';

const spread = (over: Partial<TierMetrics>): TierMetrics => ({
  hit_rate: 0,
  ttft_p50_ms: 0,
  ttft_p99_ms: 0,
  itl_p50_ms: 0,
  itl_p99_ms: 0,
  e2e_p50_ms: 0,
  e2e_p99_ms: 0,
  ...over,
});

describe('comparePickerRow (the picker row against the standalone gateway, one run)', () => {
  it('gives each metric as picker / standalone, with the spreads carried into the ratio', () => {
    const standalone = row({
      hit_rate: 0.5,
      ttft_p50_ms: 100,
      itl_p50_ms: 10,
      spread: spread({ hit_rate: 0.01, ttft_p50_ms: 2 }),
    });
    const picker = row({
      hit_rate: 0.49,
      ttft_p50_ms: 110,
      itl_p50_ms: 10,
      spread: spread({ hit_rate: 0.0098, ttft_p50_ms: 1.1 }),
    });
    const c = comparePickerRow({ 'cache-aware': standalone, picker });
    // 0.49 / 0.5; relative spreads add: 0.02 + 0.02 of 0.98.
    expect(c?.hit_rate).toEqual({ ratio: 0.98, spread: 0.0392 });
    // 110 / 100; 0.01 + 0.02 of 1.1.
    expect(c?.ttft_p50_ms).toEqual({ ratio: 1.1, spread: 0.033 });
    expect(c?.itl_p50_ms).toEqual({ ratio: 1, spread: 0 });
    expect(c?.e2e_p99_ms).toEqual({ ratio: 1, spread: 0 });
  });

  it('is absent unless both rows ran', () => {
    expect(comparePickerRow({ 'cache-aware': row({}) })).toBeUndefined();
    expect(comparePickerRow({ 'cache-aware': row({}), picker: { failed: 'x' } })).toBeUndefined();
    expect(comparePickerRow({ 'cache-aware': { skipped: 'x' }, picker: row({}) })).toBeUndefined();
  });

  it('gives no ratio over a zero baseline', () => {
    const c = comparePickerRow({ 'cache-aware': row({ hit_rate: 0 }), picker: row({ hit_rate: 0.1 }) });
    expect(c?.hit_rate).toBeNull();
  });
});

describe("judgePickerGoals (issue 32: hit >= 0.98 and TTFT p50 <= 1.02 of the standalone gateway's)", () => {
  it('judges both ratios and shows the spread in the detail', () => {
    const goals = judgePickerGoals({
      'cache-aware': row({ hit_rate: 0.5, ttft_p50_ms: 100 }),
      picker: row({ hit_rate: 0.495, ttft_p50_ms: 103 }),
    });
    expect(goals).toEqual([
      {
        goal: "picker hit rate >= 0.98 of the standalone gateway's",
        met: true,
        detail: '0.495 / 0.500 = 0.990 ±0.000',
      },
      {
        goal: "picker TTFT p50 <= 1.02 of the standalone gateway's",
        met: false,
        detail: '103 / 100 ms = 1.030 ±0.000',
      },
    ]);
  });

  it('cannot judge when a row is missing', () => {
    expect(judgePickerGoals({ 'cache-aware': row({}) }).map((g) => g.met)).toEqual([null, null]);
  });

  it('says nothing when the picker row was not asked for', () => {
    expect(judgePickerGoals({ 'cache-aware': row({}) }, false)).toEqual([]);
  });
});

describe("judgePickerOverhead (Envoy + picker adds no more p99 than smg's, same run)", () => {
  const stats = (p99: number, cpu?: number, errors = 0): OverheadStats => ({
    sent: 100,
    ok: 100 - errors,
    errors,
    p50_ms: 1,
    p99_ms: p99,
    max_ms: p99,
    rps: 500,
    ...(cpu === undefined ? {} : { cpu_ms_per_req: cpu }),
  });

  it("compares Envoy + picker's added p99 with smg's and names Envoy alone (the floor)", () => {
    const g = judgePickerOverhead(
      {
        direct: stats(2),
        'envoy-static': stats(2.5, 0.1),
        'envoy-picker': stats(4, 0.6),
        smg: stats(3, 0.3),
      },
      500,
    );
    expect(g).toEqual({
      goal: "Envoy + picker added latency p99 <= smg's at 500 req/s",
      met: false,
      detail:
        'Envoy + picker +2.000 ms, 0.6 ms CPU/request; smg +1.000 ms, 0.3 ms CPU/request; ' +
        'Envoy alone (static route, the floor) +0.500 ms, 0.1 ms CPU/request',
    });
    expect(judgePickerOverhead({ direct: stats(2), 'envoy-picker': stats(3), smg: stats(3) }, 500)?.met).toBe(
      true,
    );
  });

  it('is not met with errors through Envoy', () => {
    expect(
      judgePickerOverhead({ direct: stats(2), 'envoy-picker': stats(2, undefined, 3), smg: stats(3) }, 500)
        ?.met,
    ).toBe(false);
  });

  it('cannot judge without smg, and is absent without Envoy + picker', () => {
    expect(judgePickerOverhead({ direct: stats(2), 'envoy-picker': stats(3) }, 500)?.met).toBeNull();
    expect(judgePickerOverhead({ direct: stats(2), smg: stats(3) }, 500)).toBeUndefined();
  });
});

describe('renderPickerLines (the table)', () => {
  it('prints each ratio with its spread', () => {
    const c = comparePickerRow({
      'cache-aware': row({ hit_rate: 0.5, ttft_p50_ms: 100 }),
      picker: row({ hit_rate: 0.49, ttft_p50_ms: 110 }),
    });
    const text = renderPickerLines(c).join('\n');
    expect(text).toContain('picker / standalone gateway');
    expect(text).toMatch(/hit 0\.980 ±0\.000/);
    expect(text).toMatch(/ttft p50 1\.100 ±0\.000/);
    expect(renderPickerLines(undefined)).toEqual([]);
  });
});
