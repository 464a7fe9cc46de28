import { describe, expect, it } from 'vitest';
import { countFailedRuleTests, countRuleTests, findUntestedAlerts } from './rule-tests.ts';

// promtool 2.42's report of one failed alert assertion and one failed expression
// assertion (whitespace as it prints it).
const FAILED_OUTPUT = `Unit Testing:  t.yaml
  FAILED:
    alertname: A, time: 5m, 
        exp:[], 
        got:[
            0:
              Labels:{a="b", alertname="A", severity="warning"}
              Annotations:{summary="x is 2"}
            ]
    expr: "x", time: 1m,
        exp: {__name__="x", a="c"} 2E+00
        got: {__name__="x", a="b"} 2E+00
`;

const TESTS = {
  rule_files: ['alerts.yaml'],
  tests: [
    {
      alert_rule_test: [
        { eval_time: '1m', alertname: 'A', exp_alerts: [] },
        { eval_time: '9m', alertname: 'A', exp_alerts: [{ exp_labels: { severity: 'warning' } }] },
        { eval_time: '9m', alertname: 'B', exp_alerts: [{ exp_labels: {} }] },
      ],
      promql_expr_test: [{ expr: 'x', eval_time: '1m', exp_samples: [] }],
    },
    { alert_rule_test: [{ eval_time: '1m', alertname: 'C' }] },
  ],
};

describe('countRuleTests', () => {
  it('counts every alert and expression assertion of every test group', () => {
    expect(countRuleTests(TESTS)).toBe(5);
  });

  it('is 0 for a file without tests', () => {
    expect(countRuleTests({ rule_files: [] })).toBe(0);
    expect(countRuleTests(null)).toBe(0);
  });
});

describe('countFailedRuleTests', () => {
  it('counts each assertion promtool reports failed', () => {
    expect(countFailedRuleTests({ code: 1, output: FAILED_OUTPUT }, 5)).toBe(2);
  });

  it('is 0 when promtool passes', () => {
    expect(countFailedRuleTests({ code: 0, output: 'Unit Testing:  t.yaml\n  SUCCESS\n' }, 5)).toBe(0);
  });

  it('counts all as failed when promtool fails without naming an assertion (the file did not load)', () => {
    const output =
      'Unit Testing:  t.yaml\n  FAILED:\n    1:12: group "g", rule 1, "A": could not parse expression\n';
    expect(countFailedRuleTests({ code: 1, output }, 5)).toBe(5);
  });
});

describe('findUntestedAlerts', () => {
  it('names each alert not seen firing, or not seen quiet (no exp_alerts is quiet)', () => {
    expect(findUntestedAlerts(['A', 'B', 'C', 'D'], [TESTS])).toEqual([
      { alert: 'B', missing: 'not firing' },
      { alert: 'C', missing: 'firing' },
      { alert: 'D', missing: 'firing' },
      { alert: 'D', missing: 'not firing' },
    ]);
  });
});
