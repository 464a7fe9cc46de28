import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../test/support/samples.ts';
import { checkRuleNames, formatRuleIssue, listRuleExprs, type RuleExpr } from './check-rules.ts';
import { collectExportedMetrics } from './exported-metrics.ts';

const RULES = {
  groups: [
    {
      name: 'g',
      rules: [
        { record: 'job:requests:rate5m', expr: 'sum by (job) (rate(requests_total[5m]))' },
        { alert: 'High', expr: 'job:requests:rate5m > 10', for: '5m' },
        { alert: 'Typo', expr: 'rate(request_total[5m]) > 0 and up == 1' },
      ],
    },
  ],
};

describe('listRuleExprs', () => {
  it('lists alerts and recording rules with their expressions', () => {
    expect(listRuleExprs('r.yaml', RULES)).toEqual([
      {
        file: 'r.yaml',
        rule: 'job:requests:rate5m',
        expr: 'sum by (job) (rate(requests_total[5m]))',
        record: 'job:requests:rate5m',
      },
      { file: 'r.yaml', rule: 'High', expr: 'job:requests:rate5m > 10' },
      { file: 'r.yaml', rule: 'Typo', expr: 'rate(request_total[5m]) > 0 and up == 1' },
    ]);
  });

  it.each([
    [{}, 'no groups list'],
    [{ groups: [{ name: 'g', rules: [{ alert: 'A' }] }] }, 'a rule of group g has no name or expr'],
  ])('refuses a file that is not a rules file: %j', (doc, detail) => {
    expect(listRuleExprs('r.yaml', doc)).toEqual({ code: 'malformed', file: 'r.yaml', detail });
  });
});

describe('checkRuleNames', () => {
  const exprs = listRuleExprs('r.yaml', RULES) as RuleExpr[];

  it('flags a name nothing exports; a recording rule name counts as exported', () => {
    const issues = checkRuleNames(exprs, new Set(['requests_total', 'up']));
    expect(issues).toEqual([{ code: 'unexported', file: 'r.yaml', rule: 'Typo', name: 'request_total' }]);
    expect(issues.map(formatRuleIssue)).toEqual([
      'r.yaml: Typo reads request_total, which no cacheroute process exports',
    ]);
  });

  it('passes syntax errors and selectors without a literal name on', () => {
    const bad: RuleExpr[] = [
      { file: 'r.yaml', rule: 'Broken', expr: 'sum(rate(x[5m])' },
      { file: 'r.yaml', rule: 'Regex', expr: 'sum({__name__=~"requests_.*"})' },
    ];
    const issues = checkRuleNames(bad, new Set(['x']));
    expect(issues.map((i) => [i.code, 'rule' in i ? i.rule : ''])).toEqual([
      ['syntax', 'Broken'],
      ['unnamed-selector', 'Regex'],
    ]);
  });

  it("the chart's alerts read only names the code exports", async () => {
    const file = join(REPO_ROOT, 'charts', 'cacheroute', 'monitoring', 'alerts.yaml');
    const listed = listRuleExprs('alerts.yaml', parse(readFileSync(file, 'utf8')));
    if (!Array.isArray(listed)) throw new Error(formatRuleIssue(listed));
    expect(listed.length).toBeGreaterThan(0);
    const exported = await collectExportedMetrics();
    expect(checkRuleNames(listed, new Set(exported.keys())).map(formatRuleIssue)).toEqual([]);
  });
});
