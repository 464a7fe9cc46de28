// Holds every PromQL expression of a Prometheus rules file to the metric names
// the code exports (exported-metrics.ts): a rule over a name nothing exports
// never fires, and promtool, which checks syntax only, cannot tell. Names that
// recording rules of the same files define count as exported. Pure: the files'
// parsed contents and the names in, issues out.

import { extractMetricNames, type NamesIssue } from './promql-names.ts';

export interface RuleExpr {
  readonly file: string;
  /** The alert's or recording rule's name. */
  readonly rule: string;
  readonly expr: string;
  /** Set for a recording rule: the series name it makes. */
  readonly record?: string;
}

export type RuleIssue =
  | { readonly code: 'unexported'; readonly file: string; readonly rule: string; readonly name: string }
  | ({ readonly file: string; readonly rule: string; readonly expr: string } & NamesIssue)
  | { readonly code: 'malformed'; readonly file: string; readonly detail: string };

interface RulesFile {
  groups?: { name?: unknown; rules?: { alert?: unknown; record?: unknown; expr?: unknown }[] }[];
}

/** Every rule's expression in a rules file (the parsed YAML), or a `malformed` issue. */
export function listRuleExprs(file: string, doc: unknown): RuleExpr[] | RuleIssue {
  const groups = (doc as RulesFile | null)?.groups;
  if (!Array.isArray(groups)) return { code: 'malformed', file, detail: 'no groups list' };
  const out: RuleExpr[] = [];
  for (const g of groups) {
    for (const r of g.rules ?? []) {
      const name = typeof r.alert === 'string' ? r.alert : r.record;
      if (typeof name !== 'string' || typeof r.expr !== 'string')
        return { code: 'malformed', file, detail: `a rule of group ${String(g.name)} has no name or expr` };
      out.push({
        file,
        rule: name,
        expr: r.expr,
        ...(typeof r.record === 'string' ? { record: r.record } : {}),
      });
    }
  }
  return out;
}

export function checkRuleNames(exprs: readonly RuleExpr[], exported: ReadonlySet<string>): RuleIssue[] {
  const known = new Set([...exported, ...exprs.flatMap((e) => (e.record ? [e.record] : []))]);
  const issues: RuleIssue[] = [];
  for (const e of exprs) {
    const r = extractMetricNames(e.expr);
    if (!r.ok) {
      for (const i of r.issues) issues.push({ file: e.file, rule: e.rule, expr: e.expr, ...i });
      continue;
    }
    for (const name of r.names)
      if (!known.has(name)) issues.push({ code: 'unexported', file: e.file, rule: e.rule, name });
  }
  return issues;
}

export function formatRuleIssue(i: RuleIssue): string {
  switch (i.code) {
    case 'unexported':
      return `${i.file}: ${i.rule} reads ${i.name}, which no cacheroute process exports`;
    case 'unnamed-selector':
      return `${i.file}: ${i.rule}: ${i.selector} names no metric (write the name, not a regex on __name__)`;
    case 'syntax':
      return `${i.file}: ${i.rule}: PromQL syntax error at character ${i.at}: ${i.expr}`;
    case 'malformed':
      return `${i.file}: ${i.detail}`;
  }
}
