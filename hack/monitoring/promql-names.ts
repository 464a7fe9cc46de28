// The metric names a PromQL expression reads, from Prometheus' own grammar
// (@prometheus-io/lezer-promql, the parser of Prometheus' web UI) rather than a
// regex: function names, label names, string arguments of label_replace and
// keywords are never mistaken for metrics. Every vector selector contributes its
// name, written bare (`up`), as a quoted name (`{"up"}`) or as an exact
// `__name__="up"` matcher. A selector without a literal name (no name, or a regex
// on __name__) cannot be held to what the code exports, so it is an issue, as is
// a syntax error.

import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';

export type NamesIssue =
  | { readonly code: 'syntax'; readonly at: number }
  | { readonly code: 'unnamed-selector'; readonly selector: string };

export type NamesResult =
  | { readonly ok: true; readonly names: readonly string[] }
  | { readonly ok: false; readonly issues: readonly NamesIssue[] };

export function extractMetricNames(expr: string): NamesResult {
  const tree = parser.parse(expr);
  const names = new Set<string>();
  const issues: NamesIssue[] = [];
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) {
        issues.push({ code: 'syntax', at: ref.from });
        return false;
      }
      if (ref.name !== 'VectorSelector') return undefined;
      const name = readSelectorName(ref.node, expr);
      if (name === undefined)
        issues.push({ code: 'unnamed-selector', selector: expr.slice(ref.from, ref.to) });
      else names.add(name);
      // On into its matchers: an error there (`{job=}`) is an error node below the selector.
      return undefined;
    },
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, names: [...names].sort() };
}

/** The selector's metric name when it is a literal; undefined otherwise. */
function readSelectorName(selector: SyntaxNode, src: string): string | undefined {
  const text = (n: SyntaxNode): string => src.slice(n.from, n.to);
  const identifier = selector.getChild('Identifier');
  if (identifier) return text(identifier);
  const matchers = selector.getChild('LabelMatchers');
  if (!matchers) return undefined;
  // `{"name", job="x"}`: a bare quoted name among the matchers is the metric name.
  const quoted = matchers.getChild('QuotedLabelName');
  if (quoted) return unquote(text(quoted));
  for (const m of [
    ...matchers.getChildren('UnquotedLabelMatcher'),
    ...matchers.getChildren('QuotedLabelMatcher'),
  ]) {
    const label = m.getChild('LabelName') ?? m.getChild('QuotedLabelName');
    const value = m.getChild('StringLiteral');
    if (!label || !value) continue;
    const labelName = label.name === 'QuotedLabelName' ? unquote(text(label)) : text(label);
    if (labelName !== '__name__') continue;
    // Only `=` names one metric; `!=`, `=~` and `!~` select a set nobody can check.
    return m.getChild('MatchOp')?.getChild('EqlSingle') ? unquote(text(value)) : undefined;
  }
  return undefined;
}

/** A PromQL string literal's value: "double" (JSON escapes), 'single' or `raw`. */
export function unquote(literal: string): string {
  const quote = literal[0];
  const body = literal.slice(1, -1);
  if (quote === '`') return body;
  if (quote === "'") return JSON.parse(`"${body.replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string;
  return JSON.parse(literal) as string;
}
