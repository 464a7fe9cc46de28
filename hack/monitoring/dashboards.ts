// The chart's Grafana dashboards (charts/cacheroute/monitoring/dashboards/*.json)
// held to what they must be without Grafana itself (AGPL, so never run here):
// their JSON in the shape Grafana reads (a zod schema of the parts we use),
// panels on the 24-column grid without overlap, unique ids and refIds, every
// template variable a query uses declared, and every query as PromQL: Grafana's
// variables are expanded as Grafana would at "All" (expandGrafanaVariables), so
// promtool can check the syntax (as recording rules: buildPanelRulesFile) and
// check-rules.ts the metric names. Pure: parsed JSON in, panels and issues out.

import { stringify } from 'yaml';
import { z } from 'zod';
import { PRIORITY_BROKEN_DOWN_GAUGES } from '#sglang/metrics-text.ts';
import type { RuleExpr } from './check-rules.ts';

const Datasource = z.object({ type: z.literal('prometheus'), uid: z.literal('${datasource}') });

const Target = z.object({
  refId: z.string().min(1),
  expr: z.string().min(1),
  legendFormat: z.string().optional(),
  datasource: Datasource,
});

const GridPos = z
  .object({
    x: z.number().int().min(0).max(23),
    y: z.number().int().min(0),
    w: z.number().int().min(1).max(24),
    h: z.number().int().min(1),
  })
  .refine((g) => g.x + g.w <= 24, 'a panel ends past the 24th column');

const Panel = z.object({
  id: z.number().int().positive(),
  type: z.enum(['timeseries', 'stat', 'gauge', 'bargauge', 'table']),
  title: z.string().min(1),
  description: z.string().optional(),
  datasource: Datasource,
  gridPos: GridPos,
  targets: z.array(Target).min(1),
  fieldConfig: z
    .object({ defaults: z.record(z.string(), z.unknown()), overrides: z.array(z.unknown()) })
    .optional(),
});

const Variable = z.discriminatedUnion('type', [
  z
    .object({ type: z.literal('datasource'), name: z.string().min(1), query: z.literal('prometheus') })
    .loose(),
  z
    .object({
      type: z.literal('query'),
      name: z.string().min(1),
      datasource: Datasource,
      definition: z.string().min(1),
      allValue: z.string().optional(),
    })
    .loose(),
]);

export const Dashboard = z
  .object({
    uid: z.string().regex(/^[a-z0-9-]{1,40}$/, 'a uid of at most 40 lowercase letters, digits and dashes'),
    title: z.string().min(1),
    schemaVersion: z.number().int().min(36),
    tags: z.array(z.string()),
    time: z.object({ from: z.string(), to: z.string() }),
    templating: z.object({ list: z.array(Variable) }),
    panels: z.array(Panel).min(1),
  })
  .loose();
export type Dashboard = z.infer<typeof Dashboard>;

/** Grafana's own variables: what they expand to on a dashboard (any valid value does for a check). */
const BUILTINS: Readonly<Record<string, string>> = {
  __rate_interval: '2m',
  __interval: '30s',
  __range: '1h',
};

/** `$name`, `${name}` and `[[name]]` replaced as Grafana does with "All" selected (or the builtin's value). */
export function expandGrafanaVariables(expr: string, values: ReadonlyMap<string, string>): string {
  const lookup = (name: string, whole: string): string => values.get(name) ?? BUILTINS[name] ?? whole;
  return expr
    .replace(/\$\{(\w+)(?::\w+)?\}/g, (whole, name: string) => lookup(name, whole))
    .replace(/\[\[(\w+)\]\]/g, (whole, name: string) => lookup(name, whole))
    .replace(/\$(\w+)/g, (whole, name: string) => lookup(name, whole));
}

/** The selector inside a variable's `label_values(selector, label)`, or none. */
function labelValuesSelector(definition: string): string | undefined {
  const m = /^label_values\((.+),\s*\w+\)$/.exec(definition.trim());
  return m?.[1];
}

/** One panel and its queries, expanded: what a Prometheus is asked to show it has data. */
export interface PanelQueries {
  readonly dashboard: string;
  readonly panel: number;
  readonly title: string;
  readonly exprs: readonly string[];
  /** Each query's legendFormat (`{{label}}` placeholders), beside `exprs`. */
  readonly legends: readonly string[];
  /** Grafana's unit for the panel's values, when set. */
  readonly unit?: string;
  readonly gridPos: { readonly x: number; readonly y: number; readonly w: number; readonly h: number };
}

export interface DashboardCheck {
  readonly dashboard: string;
  readonly title: string;
  readonly panels: number;
  readonly panelQueries: readonly PanelQueries[];
  /** Each panel query (and each variable query's selector), expanded, as check-rules.ts reads them. */
  readonly exprs: readonly RuleExpr[];
  readonly issues: readonly string[];
}

const overlaps = (a: z.infer<typeof GridPos>, b: z.infer<typeof GridPos>): boolean =>
  a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/**
 * Selectors of a gauge SGLang also writes per priority that do not pick the total (`priority=""`):
 * with a Deployment's spec.serving.priorityScheduling such a sum counts each request twice.
 */
export function findPriorityBreakdownReads(expr: string): string[] {
  const out: string[] = [];
  for (const name of PRIORITY_BROKEN_DOWN_GAUGES) {
    for (const m of expr.matchAll(new RegExp(`${name}(?![\\w:])(\\{[^}]*\\})?`, 'g')))
      if (!/(^|[{,\s])priority\s*=\s*""/.test(m[1] ?? '')) out.push(m[0]);
  }
  return out;
}

export function checkDashboard(file: string, doc: unknown): DashboardCheck {
  const parsed = Dashboard.safeParse(doc);
  if (!parsed.success)
    return {
      dashboard: file,
      title: file,
      panels: 0,
      panelQueries: [],
      exprs: [],
      issues: parsed.error.issues.map((i) => `${file}: ${i.path.join('.') || 'dashboard'}: ${i.message}`),
    };
  const d = parsed.data;
  const issues: string[] = [];
  const values = new Map<string, string>();
  for (const v of d.templating.list)
    values.set(v.name, v.type === 'query' ? (v.allValue ?? '.*') : 'prometheus');
  const exprs: RuleExpr[] = [];
  const use = (rule: string, raw: string): string | undefined => {
    const expr = expandGrafanaVariables(raw, values);
    const left = /\$\{?\w+|\[\[\w+\]\]/.exec(expr);
    if (left) {
      issues.push(`${file}: ${rule}: ${left[0]} is not a declared variable (templating.list)`);
      return undefined;
    }
    for (const sel of findPriorityBreakdownReads(expr))
      issues.push(`${file}: ${rule}: ${sel} reads SGLang's per-priority breakdown too: add priority=""`);
    exprs.push({ file, rule, expr });
    return expr;
  };
  const panelQueries: PanelQueries[] = [];
  for (const v of d.templating.list) {
    if (v.type !== 'query') continue;
    const selector = labelValuesSelector(v.definition);
    if (selector === undefined) issues.push(`${file}: variable ${v.name}: not label_values(selector, label)`);
    else use(`variable ${v.name}`, selector);
  }
  const ids = new Set<number>();
  for (const [i, p] of d.panels.entries()) {
    if (ids.has(p.id)) issues.push(`${file}: panel id ${p.id} is used twice`);
    ids.add(p.id);
    for (const q of d.panels.slice(0, i))
      if (overlaps(p.gridPos, q.gridPos)) issues.push(`${file}: panels ${q.id} and ${p.id} overlap`);
    const refs = new Set<string>();
    const expanded: string[] = [];
    const legends: string[] = [];
    for (const t of p.targets) {
      if (refs.has(t.refId)) issues.push(`${file}: panel ${p.id}: refId ${t.refId} is used twice`);
      refs.add(t.refId);
      const expr = use(`panel ${p.id} "${p.title}" ${t.refId}`, t.expr);
      if (expr === undefined) continue;
      expanded.push(expr);
      legends.push(t.legendFormat ?? '');
    }
    const unit = p.fieldConfig?.defaults['unit'];
    panelQueries.push({
      dashboard: d.uid,
      panel: p.id,
      title: p.title,
      exprs: expanded,
      legends,
      ...(typeof unit === 'string' ? { unit } : {}),
      gridPos: p.gridPos,
    });
  }
  return { dashboard: d.uid, title: d.title, panels: d.panels.length, panelQueries, exprs, issues };
}

/** One recording rule per query, so `promtool check rules` parses each with Prometheus' own parser. */
export function buildPanelRulesFile(exprs: readonly RuleExpr[]): string {
  return stringify({
    groups: [
      {
        name: 'dashboard-queries',
        rules: exprs.map((e, i) => ({ record: `dashboard_query:${i}`, expr: e.expr })),
      },
    ],
  });
}
