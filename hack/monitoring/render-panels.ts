// Pictures of the dashboards for docs/operations.md, drawn from the same queries
// (Grafana is AGPL: not run here). Each panel's queries are asked of Prometheus
// over a time range (query_range) and drawn as a line chart with Vega-Lite, laid
// out as the dashboard lays its panels out (rows by gridPos.y), one SVG per
// dashboard. `make dashboard-pictures` runs it after make test-monitoring's replay.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { PanelQueries } from './dashboards.ts';
import { queryRange, type QueryRange } from './prometheus-api.ts';

export interface Point {
  readonly t: number;
  readonly v: number;
  readonly series: string;
}

/** `{{label}}` placeholders replaced by the series' labels, as Grafana's legendFormat does. */
export function formatLegend(format: string, metric: Readonly<Record<string, string>>): string {
  if (format === '') return JSON.stringify(metric);
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: string) => metric[name] ?? '');
}

/** A panel's points over the range: every series of every query, named by its legend. */
export async function collectPanelPoints(
  prometheus: string,
  panel: PanelQueries,
  range: QueryRange,
): Promise<Point[]> {
  const points: Point[] = [];
  for (const [i, expr] of panel.exprs.entries()) {
    for (const s of await queryRange(prometheus, expr, range)) {
      const series = formatLegend(panel.legends[i] ?? '', s.metric);
      for (const [t, v] of s.values) {
        const value = Number(v);
        if (Number.isFinite(value)) points.push({ t: t * 1000, v: value, series });
      }
    }
  }
  return points;
}

const PANEL_WIDTH_PX = 26; // per grid column (24 columns)
const PANEL_HEIGHT_PX = 18; // per grid row

function buildPanelSpec(panel: PanelQueries, points: readonly Point[]): Record<string, unknown> {
  const percent = panel.unit === 'percentunit';
  return {
    title: { text: panel.title, fontSize: 11, anchor: 'start' },
    width: panel.gridPos.w * PANEL_WIDTH_PX,
    height: panel.gridPos.h * PANEL_HEIGHT_PX - 40,
    data: { values: points.length > 0 ? points : [{ t: 0, v: 0, series: 'no data' }] },
    mark: { type: 'line', strokeWidth: 1.5 },
    encoding: {
      x: { field: 't', type: 'temporal', title: null, axis: { format: '%H:%M:%S', labelFontSize: 8 } },
      y: {
        field: 'v',
        type: 'quantitative',
        title: panel.unit ?? null,
        axis: { labelFontSize: 8, ...(percent ? { format: '%' } : {}) },
      },
      color: {
        field: 'series',
        type: 'nominal',
        legend: { orient: 'bottom', labelFontSize: 8, title: null, columns: 2, labelLimit: 260 },
      },
    },
  };
}

/** One SVG: the dashboard's panels in rows, as its grid places them. */
export async function renderDashboardSvg(
  title: string,
  panels: readonly { panel: PanelQueries; points: readonly Point[] }[],
): Promise<string> {
  const rows = new Map<number, { panel: PanelQueries; points: readonly Point[] }[]>();
  for (const p of panels) rows.set(p.panel.gridPos.y, [...(rows.get(p.panel.gridPos.y) ?? []), p]);
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, fontSize: 14, anchor: 'start' },
    background: 'white',
    config: { view: { stroke: '#ddd' }, concat: { spacing: 18 } },
    vconcat: [...rows.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, row]) => ({
        hconcat: row
          .sort((a, b) => a.panel.gridPos.x - b.panel.gridPos.x)
          .map((p) => buildPanelSpec(p.panel, p.points)),
        resolve: { scale: { color: 'independent' } },
      })),
    resolve: { scale: { color: 'independent' } },
  } as unknown as TopLevelSpec;
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}

/** Every dashboard's picture into `outDir`, named dashboard-<uid>.svg; returns the files written. */
export async function renderDashboardPictures(
  prometheus: string,
  dashboards: readonly { uid: string; title: string; panels: readonly PanelQueries[] }[],
  outDir: string,
  range: QueryRange,
): Promise<string[]> {
  const written: string[] = [];
  for (const d of dashboards) {
    const panels = [];
    for (const panel of d.panels)
      panels.push({ panel, points: await collectPanelPoints(prometheus, panel, range) });
    const file = join(outDir, `dashboard-${d.uid}.svg`);
    writeFileSync(file, await renderDashboardSvg(d.title, panels));
    written.push(file);
  }
  return written;
}
