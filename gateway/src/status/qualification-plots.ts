// The Qualifications on the status page, drawn as inline SVG by pure functions
// (no script, no external asset: the page's CSP allows neither; SVG
// presentation attributes are not styles). Per Qualification:
//   - three latency distributions (TTFT, inter-token, end-to-end), one curve an
//     arm and pass: x the latency, y the share of requests at or below it;
//   - the cached-token share of every sample, cold and warm, per arm.
// Each mark carries data-arm and data-pass (and data-sample), so a test in a
// real browser can find and measure it. Every text from the cluster is escaped.
import { CDF_STEPS } from '#api/qualification.ts';
import { escapeHtml } from './escape.ts';
import type { ArmPlotData, PassCurves, QualificationView } from '../discovery/qualification-view.ts';

const W = 360;
const H = 220;
const M = { left: 48, right: 12, top: 12, bottom: 36 };
const PLOT_W = W - M.left - M.right;
const PLOT_H = H - M.top - M.bottom;
/** One colour an arm (the first two are the comparison; more never happen: a Qualification has two). */
const ARM_COLOURS = ['#0969da', '#bc4c00', '#8250df', '#1a7f37'];
const PASSES = ['cold', 'warm'] as const;
type Pass = (typeof PASSES)[number];
/** Cold dashed, warm solid. */
const DASH: Readonly<Record<Pass, string>> = { cold: ' stroke-dasharray="5 3"', warm: '' };

export const LATENCY_PLOTS = [
  { id: 'ttft', key: 'ttftMs', title: 'Time to first token' },
  { id: 'itl', key: 'interTokenMs', title: 'Inter-token latency' },
  { id: 'e2e', key: 'e2eMs', title: 'End-to-end latency' },
] as const satisfies readonly { id: string; key: keyof PassCurves; title: string }[];

const colour = (i: number): string => ARM_COLOURS[i % ARM_COLOURS.length] ?? '#000';
const fixed = (x: number): string => String(Math.round(x * 100) / 100);

function formatMs(ms: number): string {
  if (ms >= 100) return String(Math.round(ms));
  if (ms >= 10) return ms.toFixed(1);
  return ms.toFixed(2);
}

/** A plot's frame: axes, ticks and their labels. */
function frame(
  xTicks: readonly { at: number; label: string }[],
  yTicks: readonly { at: number; label: string }[],
  xLabel: string,
  yLabel: string,
  endAnchored = false,
): string {
  const x0 = M.left;
  const y0 = M.top + PLOT_H;
  const parts = [
    `<line x1="${x0}" y1="${y0}" x2="${x0 + PLOT_W}" y2="${y0}" stroke="currentColor" stroke-opacity="0.5"/>`,
    `<line x1="${x0}" y1="${M.top}" x2="${x0}" y2="${y0}" stroke="currentColor" stroke-opacity="0.5"/>`,
    // A latency axis's last label ends at its tick, so it stays inside the figure.
    ...xTicks.map(
      (t, i) =>
        `<text x="${fixed(t.at)}" y="${y0 + 14}" text-anchor="${endAnchored && i === xTicks.length - 1 ? 'end' : 'middle'}">${escapeHtml(t.label)}</text>`,
    ),
    ...yTicks.map(
      (t) =>
        `<text x="${x0 - 4}" y="${fixed(t.at + 4)}" text-anchor="end">${escapeHtml(t.label)}</text>` +
        `<line x1="${x0}" y1="${fixed(t.at)}" x2="${x0 + PLOT_W}" y2="${fixed(t.at)}" stroke="currentColor" stroke-opacity="0.1"/>`,
    ),
    `<text x="${x0 + PLOT_W / 2}" y="${H - 4}" text-anchor="middle">${escapeHtml(xLabel)}</text>`,
    `<text x="12" y="${M.top + PLOT_H / 2}" text-anchor="middle" transform="rotate(-90 12 ${M.top + PLOT_H / 2})">${escapeHtml(yLabel)}</text>`,
  ];
  return parts.join('');
}

/** Arm names and what cold and warm look like, in the plot's lower right. */
function legend(arms: readonly ArmPlotData[]): string {
  const x = M.left + PLOT_W - 118;
  const rows = arms.flatMap((a, i) =>
    PASSES.map((pass, j) => {
      const y = M.top + PLOT_H - 10 - (arms.length * 2 - 1 - (i * 2 + j)) * 13;
      return (
        `<g data-legend-arm="${escapeHtml(a.name)}" data-pass="${pass}">` +
        `<line x1="${x}" y1="${y - 4}" x2="${x + 18}" y2="${y - 4}" stroke="${colour(i)}" stroke-width="2"${DASH[pass]}/>` +
        `<text x="${x + 22}" y="${y}">${escapeHtml(a.name)} ${pass}</text></g>`
      );
    }),
  );
  return rows.join('');
}

function svg(id: string, title: string, body: string): string {
  return `<figure data-plot="${id}"><figcaption>${escapeHtml(title)}</figcaption><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}">${body}</svg></figure>`;
}

const empty = (what: string): string =>
  `<text x="${M.left + PLOT_W / 2}" y="${M.top + PLOT_H / 2}" text-anchor="middle" data-field="no-data">${escapeHtml(what)}</text>`;

/** One latency's distribution: a curve an arm and pass through (value at quantile i/N, i/N). */
export function renderLatencyPlot(
  plot: (typeof LATENCY_PLOTS)[number],
  arms: readonly ArmPlotData[],
): string {
  const series = arms.flatMap((a, i) =>
    PASSES.flatMap((pass) => {
      const curve = a[pass]?.[plot.key];
      return curve ? [{ arm: a.name, i, pass, curve }] : [];
    }),
  );
  const max = Math.max(0, ...series.flatMap((s) => s.curve));
  const xMax = max > 0 ? max : 1;
  const sx = (v: number) => M.left + (v / xMax) * PLOT_W;
  const sy = (q: number) => M.top + (1 - q) * PLOT_H;
  const xTicks = [0, 0.5, 1].map((f) => ({ at: sx(f * xMax), label: formatMs(f * xMax) }));
  const yTicks = [0, 0.5, 1].map((q) => ({ at: sy(q), label: `${q * 100}%` }));
  const marks = series.map((s) => {
    const points = s.curve.map((v, k) => `${fixed(sx(v))},${fixed(sy(k / CDF_STEPS))}`).join(' ');
    const median = formatMs(s.curve[CDF_STEPS / 2] ?? 0);
    return `<polyline data-arm="${escapeHtml(s.arm)}" data-pass="${s.pass}" points="${points}" fill="none" stroke="${colour(s.i)}" stroke-width="2"${DASH[s.pass]}><title>${escapeHtml(`${s.arm} ${s.pass}: median ${median} ms, max ${formatMs(s.curve[CDF_STEPS] ?? 0)} ms`)}</title></polyline>`;
  });
  const body =
    frame(xTicks, yTicks, `${plot.title} (ms)`, 'requests at or below', true) +
    (series.length === 0 ? empty('no requests measured yet') : marks.join('') + legend(arms));
  return svg(plot.id, plot.title, body);
}

/** The cached-token share of each sample's cold and warm pass, per arm. */
export function renderCachedSharePlot(arms: readonly ArmPlotData[]): string {
  const n = Math.max(1, ...arms.flatMap((a) => a.samples.map((s) => s.sample)));
  // Samples 1..n across the width; a lone sample sits in the middle.
  const sx = (k: number) => M.left + (n === 1 ? PLOT_W / 2 : ((k - 1) / (n - 1)) * (PLOT_W - 16) + 8);
  const sy = (share: number) => M.top + (1 - share) * PLOT_H;
  const xTicks = Array.from({ length: n }, (_, k) => ({ at: sx(k + 1), label: String(k + 1) }));
  const yTicks = [0, 0.5, 1].map((q) => ({ at: sy(q), label: `${q * 100}%` }));
  const marks: string[] = [];
  arms.forEach((a, i) => {
    for (const pass of PASSES) {
      const points = a.samples.flatMap((s) => {
        const share = pass === 'cold' ? s.coldCachedShare : s.warmCachedShare;
        return share === undefined ? [] : [{ sample: s.sample, share, failed: s.failed }];
      });
      if (points.length > 1)
        marks.push(
          `<polyline data-arm="${escapeHtml(a.name)}" data-pass="${pass}" points="${points.map((p) => `${fixed(sx(p.sample))},${fixed(sy(p.share))}`).join(' ')}" fill="none" stroke="${colour(i)}" stroke-width="1.5"${DASH[pass]}/>`,
        );
      for (const p of points)
        marks.push(
          `<circle data-arm="${escapeHtml(a.name)}" data-pass="${pass}" data-sample="${p.sample}"${p.failed ? ' data-failed="true"' : ''} cx="${fixed(sx(p.sample))}" cy="${fixed(sy(p.share))}" r="4" fill="${pass === 'warm' ? colour(i) : 'none'}" stroke="${p.failed ? '#cf222e' : colour(i)}" stroke-width="2"><title>${escapeHtml(`${a.name} ${pass}, sample ${p.sample}: ${Math.round(p.share * 100)}% of prompt tokens cached${p.failed ? ' (sample failed)' : ''}`)}</title></circle>`,
        );
    }
  });
  const body =
    frame(xTicks, yTicks, 'sample', 'prompt tokens cached') +
    (marks.length === 0 ? empty('no samples yet') : marks.join('') + legend(arms));
  return svg('cached-share', 'Cached-token share by sample', body);
}

function hasData(arms: readonly ArmPlotData[]): boolean {
  return arms.some((a) => a.samples.length > 0 || a.cold !== null || a.warm !== null);
}

function renderQualification(q: QualificationView): string {
  const facts: [string, string][] = [
    ['phase', escapeHtml(q.phase ?? 'Pending')],
    ['progress', escapeHtml(q.progress ?? '—')],
    ['arms', escapeHtml(q.arms.map((a) => (a.profile ? `${a.name} (${a.profile})` : a.name)).join(' vs '))],
  ];
  if (q.evidence) facts.push(['evidence', `<span data-field="evidence">${escapeHtml(q.evidence)}</span>`]);
  if (q.verdict) facts.push(['verdict', `<span data-field="verdict">${escapeHtml(q.verdict)}</span>`]);
  const plots = hasData(q.arms)
    ? `<div class="plots">${LATENCY_PLOTS.map((p) => renderLatencyPlot(p, q.arms)).join('')}${renderCachedSharePlot(q.arms)}</div>`
    : '<p class="mute" data-field="no-samples">No sample recorded yet: nothing to plot.</p>';
  return `<section data-qualification="${escapeHtml(`${q.namespace}/${q.name}`)}">
<h3>${escapeHtml(q.name)} <span class="mute">${escapeHtml(q.namespace)}</span></h3>
<div class="facts">${facts.map(([k, v]) => `<span><b>${k}</b> ${v}</span>`).join('')}</div>
${plots}
</section>`;
}

/** The Qualifications' section of the page; empty when there are none (a static --routes gateway). */
export function renderQualifications(views: readonly QualificationView[]): string {
  if (views.length === 0) return '';
  return `<h2 data-field="qualifications">Qualifications</h2>
<p class="mute">Each arm on its own endpoint, cold pass then identical warm pass (docs/qualification.md). Dashed: cold; solid: warm.</p>
${views.map(renderQualification).join('\n')}`;
}
