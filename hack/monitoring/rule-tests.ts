// What promtool's rule unit tests cover and how they fared. promtool prints no
// count of test cases, so they are counted from the tests file (each
// alert_rule_test and promql_expr_test entry is one assertion) and failures
// from its report, which names each failed assertion on a line of its own.
// Pure: parsed YAML and promtool's output in.

export interface PromtoolResult {
  readonly code: number;
  readonly output: string;
}

interface AlertAssertion {
  alertname?: unknown;
  exp_alerts?: unknown[] | null;
}

interface RuleTestsFile {
  tests?: { alert_rule_test?: AlertAssertion[]; promql_expr_test?: unknown[] }[];
}

const testsOf = (doc: unknown): NonNullable<RuleTestsFile['tests']> =>
  (doc as RuleTestsFile | null)?.tests ?? [];

/** The assertions in a promtool tests file. */
export function countRuleTests(doc: unknown): number {
  return testsOf(doc).reduce(
    (n, t) => n + (t.alert_rule_test?.length ?? 0) + (t.promql_expr_test?.length ?? 0),
    0,
  );
}

/**
 * Failed assertions in `promtool test rules` output: each is reported as
 * `alertname: X, time: T,` or `expr: "...", time: T,` at the start of a line.
 * A failing run that names none (the file did not load) failed all of `total`.
 */
export function countFailedRuleTests(result: PromtoolResult, total: number): number {
  if (result.code === 0) return 0;
  const named = result.output.split('\n').filter((l) => /^\s+(alertname|expr): .*, time: /.test(l)).length;
  return named > 0 ? Math.min(named, total) : total;
}

/**
 * Alerts the tests do not see both ways: each needs an assertion that it fires
 * (expected alerts) and one that it does not (none expected).
 */
export function findUntestedAlerts(
  alerts: readonly string[],
  testDocs: readonly unknown[],
): { alert: string; missing: 'firing' | 'not firing' }[] {
  const firing = new Set<string>();
  const quiet = new Set<string>();
  for (const doc of testDocs)
    for (const t of testsOf(doc))
      for (const a of t.alert_rule_test ?? []) {
        if (typeof a.alertname !== 'string') continue;
        ((a.exp_alerts ?? []).length > 0 ? firing : quiet).add(a.alertname);
      }
  return alerts.flatMap((alert) => [
    ...(firing.has(alert) ? [] : [{ alert, missing: 'firing' as const }]),
    ...(quiet.has(alert) ? [] : [{ alert, missing: 'not firing' as const }]),
  ]);
}
