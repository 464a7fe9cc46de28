// Every dashboard panel asked of a real Prometheus: a panel has data when one of
// its queries returns at least one series now. make test-monitoring runs it after
// a replay through the local system, so a panel over a metric nothing feeds, a
// label the scrape does not set, or a join that matches nothing shows up empty.

import type { PanelQueries } from './dashboards.ts';
import { queryInstant } from './prometheus-api.ts';

/** Series the instant query returns now; throws with Prometheus' error. */
export async function countSeries(prometheus: string, expr: string): Promise<number> {
  return (await queryInstant(prometheus, expr)).length;
}

export interface PanelEvaluation {
  readonly panels: number;
  readonly withData: number;
  /** `dashboard panel id "title"` of each panel whose every query came back empty. */
  readonly empty: readonly string[];
}

export async function evaluatePanels(
  prometheus: string,
  panels: readonly PanelQueries[],
): Promise<PanelEvaluation> {
  const empty: string[] = [];
  for (const p of panels) {
    let series = 0;
    for (const expr of p.exprs) series += await countSeries(prometheus, expr);
    if (series === 0) empty.push(`${p.dashboard} panel ${p.panel} "${p.title}"`);
  }
  return { panels: panels.length, withData: panels.length - empty.length, empty };
}
