// `make test-monitoring`: the chart's alert rules (charts/cacheroute/monitoring)
// checked by promtool (`check rules`), unit-tested by promtool (`test rules`
// over each *.test.yaml), each alert seen both firing and not firing in those
// tests, and every metric name their expressions read held to what the code
// exports; the Grafana dashboards (monitoring/dashboards/*.json) validated
// structurally, each panel query checked by promtool and held to the exported
// names the same way (hack/monitoring/dashboards.ts). Ends with one JSON line;
// exits 1 on any problem.
//   node hack/test-monitoring.ts [monitoring dir]

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../test/support/samples.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { checkRuleNames, formatRuleIssue, listRuleExprs, type RuleExpr } from './monitoring/check-rules.ts';
import { buildPanelRulesFile, checkDashboard } from './monitoring/dashboards.ts';
import { collectExportedMetrics } from './monitoring/exported-metrics.ts';
import { runLiveReplay, type LiveReplayResult } from './monitoring/live-replay.ts';
import { findPromtool, runPromtool } from './monitoring/promtool.ts';
import { renderDashboardPictures } from './monitoring/render-panels.ts';
import { countFailedRuleTests, countRuleTests, findUntestedAlerts } from './monitoring/rule-tests.ts';

const args = parseArgs({
  options: { live: { type: 'boolean', default: false }, render: { type: 'string' } },
  allowPositionals: true,
});
const dir = args.positionals[0] ?? join(REPO_ROOT, 'charts', 'cacheroute', 'monitoring');

/** Panels that stay empty while nothing fails: their counters have no series before the first failure. */
const EMPTY_WHILE_HEALTHY: ReadonlyMap<string, string> = new Map([
  ['cacheroute-fleet panel 8', 'no runtime fails or is retried in the replay'],
  ['cacheroute-tasks panel 4', 'no Task reconcile fails in the replay'],
]);
const yamlFiles = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort();
const testFiles = yamlFiles.filter((f) => f.endsWith('.test.yaml'));
const ruleFiles = yamlFiles.filter((f) => !f.endsWith('.test.yaml'));
const read = (f: string): unknown => parse(readFileSync(join(dir, f), 'utf8'));
const problems: string[] = [];
const promtool = findPromtool();

if (ruleFiles.length === 0) problems.push(`${dir}: no rules file`);
const check = await runPromtool(promtool, ['check', 'rules', ...ruleFiles], dir);
if (check.code !== 0) problems.push(check.output.trim());

let ruleTests = 0;
let ruleTestsFailed = 0;
const testDocs = testFiles.map(read);
for (const [i, f] of testFiles.entries()) {
  const total = countRuleTests(testDocs[i]);
  const res = await runPromtool(promtool, ['test', 'rules', f], dir);
  ruleTests += total;
  ruleTestsFailed += countFailedRuleTests(res, total);
  if (res.code !== 0) problems.push(res.output.trim());
}

const exprs: RuleExpr[] = [];
for (const f of ruleFiles) {
  const listed = listRuleExprs(f, read(f));
  if (Array.isArray(listed)) exprs.push(...listed);
  else problems.push(formatRuleIssue(listed));
}
const alerts = exprs.filter((e) => e.record === undefined).map((e) => e.rule);
for (const u of findUntestedAlerts(alerts, testDocs))
  problems.push(`${u.alert}: no test sees it ${u.missing} (${testFiles.join(', ') || 'no *.test.yaml'})`);
// The dashboards: structure, then their queries as the rules' expressions are checked.
const dashboardDir = join(dir, 'dashboards');
const dashboardFiles = existsSync(dashboardDir)
  ? readdirSync(dashboardDir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];
if (dashboardFiles.length === 0) problems.push(`${dashboardDir}: no dashboards`);
const dashboards = dashboardFiles.map((f) =>
  checkDashboard(`dashboards/${f}`, JSON.parse(readFileSync(join(dashboardDir, f), 'utf8')) as unknown),
);
const panelExprs = dashboards.flatMap((d) => d.exprs);
problems.push(...dashboards.flatMap((d) => d.issues));
if (panelExprs.length > 0) {
  const scratch = mkdtempSync(join(tmpdir(), 'cacheroute-dashboards-'));
  try {
    writeFileSync(join(scratch, 'dashboard-queries.yaml'), buildPanelRulesFile(panelExprs));
    const syntax = await runPromtool(promtool, ['check', 'rules', 'dashboard-queries.yaml'], scratch);
    if (syntax.code !== 0) problems.push(`dashboard queries: ${syntax.output.trim()}`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

const exported = await collectExportedMetrics();
const nameIssues = checkRuleNames([...exprs, ...panelExprs], new Set(exported.keys()));
problems.push(...nameIssues.map(formatRuleIssue));

let live: LiveReplayResult | undefined;
if (args.values.live && problems.length === 0) {
  const scratch = mkdtempSync(join(tmpdir(), 'cacheroute-monitoring-'));
  const log = (m: string): void => void process.stderr.write(`test-monitoring: ${m}\n`);
  try {
    const render = args.values.render;
    live = await runLiveReplay({
      dir: scratch,
      panels: dashboards.flatMap((d) => d.panelQueries),
      log,
      ...(render === undefined
        ? {}
        : {
            turnPauseMs: 3_000,
            afterEvaluation: async (prometheus: string, since: number) => {
              const range = { start: Math.floor(since) - 10, end: Math.ceil(Date.now() / 1000), step: 2 };
              const pictures = dashboards.map((d) => ({
                uid: d.dashboard,
                title: d.title,
                panels: d.panelQueries,
              }));
              for (const f of await renderDashboardPictures(prometheus, pictures, render, range))
                log(`drew ${f}`);
            },
          }),
    });
    for (const empty of live.empty) {
      const why = EMPTY_WHILE_HEALTHY.get(empty.replace(/ ".*"$/, ''));
      if (why) log(`${empty}: empty, as expected (${why})`);
      else problems.push(`${empty}: no data after the replay (logs: ${scratch})`);
    }
  } catch (err) {
    problems.push(`live replay: ${(err as Error).message} (logs: ${scratch})`);
  }
  if (problems.length === 0) rmSync(scratch, { recursive: true, force: true });
}

for (const p of problems) process.stderr.write(`test-monitoring: ${p}\n`);
const summary = {
  rules: exprs.length,
  rule_tests: ruleTests,
  rule_tests_failed: ruleTestsFailed,
  unexported_names: nameIssues.filter((i) => i.code === 'unexported').length,
  dashboards: dashboards.length,
  panels: dashboards.reduce((n, d) => n + d.panels, 0),
  panels_with_data: live?.withData ?? null,
  panels_empty: live ? live.empty.length : null,
  replay_requests: live?.requests ?? null,
  replay_refused: live?.refused ?? null,
};
process.stdout.write(JSON.stringify(summary) + '\n');
process.exit(problems.length > 0 ? 1 : 0);
