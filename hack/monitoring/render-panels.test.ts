import { describe, expect, it } from 'vitest';
import { formatLegend, renderDashboardSvg } from './render-panels.ts';

describe('formatLegend', () => {
  it("fills Grafana's {{label}} placeholders from the series' labels", () => {
    expect(formatLegend('{{model}} {{ state }}', { model: 'llama-8b', state: 'routable' })).toBe(
      'llama-8b routable',
    );
    expect(formatLegend('x {{missing}}', {})).toBe('x ');
  });
});

describe('renderDashboardSvg', () => {
  it("draws every panel with its title and series names, rows in the dashboard's order", async () => {
    const panel = (id: number, title: string, y: number) => ({
      dashboard: 'd',
      panel: id,
      title,
      exprs: ['up'],
      legends: ['{{job}}'],
      gridPos: { x: 0, y, w: 12, h: 8 },
    });
    const svg = await renderDashboardSvg('cacheroute / test', [
      { panel: panel(2, 'Second row', 8), points: [{ t: 1_000, v: 1, series: 'job-b' }] },
      {
        panel: panel(1, 'First row', 0),
        points: [
          { t: 1_000, v: 2, series: 'job-a' },
          { t: 2_000, v: 3, series: 'job-a' },
        ],
      },
    ]);
    expect(svg.startsWith('<svg')).toBe(true);
    for (const text of ['cacheroute / test', 'First row', 'Second row', 'job-a', 'job-b'])
      expect(svg).toContain(text);
    expect(svg.indexOf('First row')).toBeLessThan(svg.indexOf('Second row'));
  });
});
