import { describe, expect, it } from 'vitest';
import { extractMetricNames, unquote } from './promql-names.ts';

const names = (expr: string): readonly string[] => {
  const r = extractMetricNames(expr);
  if (!r.ok) throw new Error(`${expr}: ${JSON.stringify(r.issues)}`);
  return r.names;
};

describe('extractMetricNames', () => {
  it.each([
    ['up', ['up']],
    ['up == 0', ['up']],
    ['sglang:token_usage{job="cacheroute-sglang"} > 0.95', ['sglang:token_usage']],
    ['rate(cacheroute_gateway_requests_total{code=~"502|504"}[5m])', ['cacheroute_gateway_requests_total']],
    [
      'max by (namespace) (leader_election_master_status{job="x"}) < 1 or absent(leader_election_master_status{job="x"})',
      ['leader_election_master_status'],
    ],
    [
      'histogram_quantile(0.9, sum by (le) (rate(cacheroute_gateway_queue_seconds_bucket[5m] offset 1h)))',
      ['cacheroute_gateway_queue_seconds_bucket'],
    ],
    ['max_over_time(workqueue_depth[1h:5m])', ['workqueue_depth']],
    ['a / on (endpoint) group_left (model) b', ['a', 'b']],
    ['{__name__="workqueue_adds_total", name="deployment"}', ['workqueue_adds_total']],
    ["{__name__='single_quoted'}", ['single_quoted']],
    ['{"utf8.name", job="x"}', ['utf8.name']],
    ['{"__name__"="quoted_label_matcher"}', ['quoted_label_matcher']],
    // Not metrics: functions, grouping and matcher label names, string arguments, numbers.
    ['label_replace(up, "dst", "$1", "src", "rate(.*)")', ['up']],
    ['sum without (instance) (rate(x_total[5m])) / 60', ['x_total']],
    ['time() - 1', []],
    ['vector(1)', []],
  ])('%s reads %j', (expr, want) => {
    expect(names(expr)).toEqual(want);
  });

  it.each([
    ['{job="x"}', '{job="x"}'],
    ['{__name__=~"cacheroute_.*"}', '{__name__=~"cacheroute_.*"}'],
    ['sum({__name__!="up"})', '{__name__!="up"}'],
  ])('%s has a selector without a literal name', (expr, selector) => {
    expect(extractMetricNames(expr)).toEqual({
      ok: false,
      issues: [{ code: 'unnamed-selector', selector }],
    });
  });

  it.each(['sum(rate(x[5m])', 'up{job=}', 'rate(x[5m]) >'])('%s is a syntax error', (expr) => {
    const r = extractMetricNames(expr);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.issues.some((i) => i.code === 'syntax')).toBe(true);
  });
});

describe('unquote', () => {
  it.each([
    ['"a\\"b"', 'a"b'],
    ["'it\\'s'", "it's"],
    ['`raw\\n`', 'raw\\n'],
    ['\'say "hi"\'', 'say "hi"'],
  ])('%s is %s', (literal, want) => {
    expect(unquote(literal)).toBe(want);
  });
});
