import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../test/support/samples.ts';
import { checkRuleNames } from './check-rules.ts';
import { buildPanelRulesFile, checkDashboard, expandGrafanaVariables } from './dashboards.ts';
import { collectExportedMetrics } from './exported-metrics.ts';

const DS = { type: 'prometheus', uid: '${datasource}' };

function buildDashboard(panels: unknown[], variables: unknown[] = []): Record<string, unknown> {
  return {
    uid: 'test',
    title: 'test',
    schemaVersion: 39,
    tags: [],
    time: { from: 'now-1h', to: 'now' },
    templating: { list: [{ type: 'datasource', name: 'datasource', query: 'prometheus' }, ...variables] },
    panels,
  };
}

function buildPanel(id: number, x: number, y: number, exprs: string[]): Record<string, unknown> {
  return {
    id,
    type: 'timeseries',
    title: `p${id}`,
    datasource: DS,
    gridPos: { x, y, w: 12, h: 8 },
    targets: exprs.map((expr, i) => ({ refId: String.fromCharCode(65 + i), expr, datasource: DS })),
  };
}

const deploymentVar = {
  type: 'query',
  name: 'deployment',
  datasource: DS,
  definition: 'label_values(sglang:num_running_reqs{job="cacheroute-sglang", priority=""}, deployment)',
  allValue: '.*',
};

describe('expandGrafanaVariables', () => {
  it('expands declared variables in all three spellings and Grafana builtins', () => {
    const values = new Map([['deployment', '.*']]);
    expect(
      expandGrafanaVariables(
        'rate(x{d=~"$deployment", e=~"${deployment}", f=~"[[deployment]]"}[$__rate_interval])',
        values,
      ),
    ).toBe('rate(x{d=~".*", e=~".*", f=~".*"}[2m])');
    expect(expandGrafanaVariables('x{d=~"$nope"}', values)).toBe('x{d=~"$nope"}');
  });
});

describe('checkDashboard', () => {
  it('lists every panel query, expanded, and each variable query selector', () => {
    const c = checkDashboard(
      'd.json',
      buildDashboard(
        [buildPanel(1, 0, 0, ['sum(up{d=~"$deployment"})', 'rate(y[$__rate_interval])'])],
        [deploymentVar],
      ),
    );
    expect(c.issues).toEqual([]);
    expect(c.panels).toBe(1);
    expect(c.exprs.map((e) => e.expr)).toEqual([
      'sglang:num_running_reqs{job="cacheroute-sglang", priority=""}',
      'sum(up{d=~".*"})',
      'rate(y[2m])',
    ]);
  });

  it('reports overlapping panels, a reused id or refId and an undeclared variable', () => {
    const twice = buildPanel(1, 6, 4, ['up', 'up']);
    (twice['targets'] as { refId: string }[])[1]!.refId = 'A';
    const c = checkDashboard('d.json', buildDashboard([buildPanel(1, 0, 0, ['x{d=~"$deployment"}']), twice]));
    expect(c.issues).toEqual([
      'd.json: panel 1 "p1" A: $deployment is not a declared variable (templating.list)',
      'd.json: panel id 1 is used twice',
      'd.json: panels 1 and 1 overlap',
      'd.json: panel 1: refId A is used twice',
    ]);
  });

  // ADR 0057: with priority scheduling SGLang writes its queue gauges once more per priority.
  it('reports a queue gauge read without priority="": it would count each request twice', () => {
    const exprs = [
      'sum(sglang:num_queue_reqs)',
      'sum(sglang:num_queue_reqs{job="j"})',
      'sum(sglang:num_queue_reqs{job="j", priority=""})',
      'sum(sglang:num_queue_reqs_total)',
    ];
    const c = checkDashboard('d.json', buildDashboard([buildPanel(1, 0, 0, exprs)]));
    expect(c.issues).toEqual([
      'd.json: panel 1 "p1" A: sglang:num_queue_reqs reads SGLang\'s per-priority breakdown too: add priority=""',
      'd.json: panel 1 "p1" B: sglang:num_queue_reqs{job="j"} reads SGLang\'s per-priority breakdown too: add priority=""',
    ]);
  });

  it('refuses JSON Grafana would not read as a dashboard of ours', () => {
    const wide = buildPanel(1, 20, 0, ['up']);
    const c = checkDashboard('d.json', buildDashboard([wide]));
    expect(c.issues).toEqual(['d.json: panels.0.gridPos: a panel ends past the 24th column']);
    expect(checkDashboard('d.json', { title: 'x' }).issues.length).toBeGreaterThan(0);
  });

  it('builds one recording rule per query for promtool', () => {
    const rules = parse(buildPanelRulesFile([{ file: 'f', rule: 'r', expr: 'up' }])) as unknown;
    expect(rules).toEqual({
      groups: [{ name: 'dashboard-queries', rules: [{ record: 'dashboard_query:0', expr: 'up' }] }],
    });
  });
});

describe("the chart's dashboards", () => {
  const dir = join(REPO_ROOT, 'charts', 'cacheroute', 'monitoring', 'dashboards');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

  it('are the fleet, one-Deployment and Tasks dashboards, each valid, reading only exported metrics', async () => {
    const checks = files.map((f) =>
      checkDashboard(f, JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown),
    );
    expect(checks.map((c) => c.dashboard).sort()).toEqual([
      'cacheroute-deployment',
      'cacheroute-fleet',
      'cacheroute-tasks',
    ]);
    expect(checks.flatMap((c) => c.issues)).toEqual([]);
    const exported = new Set((await collectExportedMetrics()).keys());
    expect(
      checkRuleNames(
        checks.flatMap((c) => c.exprs),
        exported,
      ),
    ).toEqual([]);
  });
});
