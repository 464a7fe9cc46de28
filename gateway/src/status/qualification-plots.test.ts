import { describe, expect, it } from 'vitest';
import type { KubeObject } from '#kube/objects.ts';
import { renderStatusMain } from './html.ts';
import type { StatusView } from './view.ts';
import {
  renderCachedSharePlot,
  renderLatencyPlot,
  renderQualifications,
  LATENCY_PLOTS,
} from './qualification-plots.ts';
import {
  buildQualificationViews,
  MAX_QUALIFICATIONS_SHOWN,
  type QualificationView,
} from '../discovery/qualification-view.ts';

const curve = (base: number) => Array.from({ length: 21 }, (_, i) => base + i);

const pass = (base: number, cachedShare: number) => ({
  requests: 14,
  failures: 0,
  promptTokens: 2000,
  completionTokens: 56,
  cachedTokens: Math.round(2000 * cachedShare),
  cachedTokensDevice: Math.round(2000 * cachedShare),
  cachedTokensHost: 0,
  cachedTokensStorage: 0,
  cachedShare,
  cdf: { ttftMs: curve(base), interTokenMs: curve(base / 10), e2eMs: curve(base * 2) },
});

function qualification(name: string, createdAt: string, status: Record<string, unknown>): KubeObject {
  return {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Qualification',
    metadata: { namespace: 'team-a', name, creationTimestamp: createdAt },
    status,
  };
}

const arm = (name: string, profile: string, failedSecond = false) => ({
  name,
  deployment: name,
  profile,
  samplesDone: 2,
  samplesFailed: failedSecond ? 1 : 0,
  progress: '2/2',
  cold: pass(300, 0.4),
  warm: pass(20, 0.98),
  samples: [
    { sample: 1, failed: false, coldCachedShare: 0.4, warmCachedShare: 0.98 },
    { sample: 2, failed: failedSecond, coldCachedShare: 0.38, warmCachedShare: 0.97 },
  ],
});

const done = qualification('dense-vs-hicache', '2026-12-05T10:00:00Z', {
  phase: 'Succeeded',
  evidence: 'Simulator',
  progress: '4/4',
  arms: [arm('dense', 'dense'), arm('hicache', 'hicache', true)],
  verdict: {
    metric: 'TTFT',
    pass: 'Warm',
    medianDifferenceMs: -9.77,
    lowMs: -11.97,
    highMs: -7.81,
    confidence: 0.95,
    resamples: 2000,
    faster: 'hicache',
    summary: 'hicache is faster',
  },
});

const views = (...objects: KubeObject[]): QualificationView[] => buildQualificationViews(objects).views;

describe('buildQualificationViews', () => {
  it('reads the curves and sample points from status, newest first', () => {
    const refused = qualification('mismatched', '2026-12-05T09:00:00Z', { phase: 'Refused' });
    const [first, second] = views(refused, done);
    expect(first?.name).toBe('dense-vs-hicache');
    expect(first?.arms.map((a) => a.name)).toEqual(['dense', 'hicache']);
    expect(first?.arms[0]?.warm?.ttftMs).toEqual(curve(20));
    expect(first?.arms[1]?.samples[1]).toMatchObject({ sample: 2, failed: true });
    expect(first?.verdict).toBe('hicache is faster');
    expect(second).toMatchObject({ name: 'mismatched', phase: 'Refused', arms: [] });
  });

  it('names a Qualification whose status does not parse, and leaves it out', () => {
    const bad = qualification('bad', '2026-12-05T10:00:00Z', { arms: [{ name: 'x', cold: { cdf: 1 } }] });
    const built = buildQualificationViews([bad, done]);
    expect(built.views.map((v) => v.name)).toEqual(['dense-vs-hicache']);
    expect(built.issues).toHaveLength(1);
    expect(built.issues[0]?.path).toBe('Qualification team-a/bad');
  });

  it('keeps the newest few', () => {
    const many = Array.from({ length: MAX_QUALIFICATIONS_SHOWN + 3 }, (_, i) =>
      qualification(`q${i}`, `2026-12-05T10:${String(i).padStart(2, '0')}:00Z`, {}),
    );
    const shown = views(...many);
    expect(shown).toHaveLength(MAX_QUALIFICATIONS_SHOWN);
    expect(shown[0]?.name).toBe(`q${MAX_QUALIFICATIONS_SHOWN + 2}`);
  });
});

const count = (html: string, re: RegExp): number => html.match(re)?.length ?? 0;

describe('the plots', () => {
  const [q] = views(done);
  const arms = q?.arms ?? [];

  it('draws one curve an arm and pass through every quantile, with the arms named', () => {
    for (const plot of LATENCY_PLOTS) {
      const svg = renderLatencyPlot(plot, arms);
      expect(svg).toContain(`data-plot="${plot.id}"`);
      for (const a of ['dense', 'hicache'])
        for (const p of ['cold', 'warm']) {
          const points = new RegExp(`<polyline data-arm="${a}" data-pass="${p}" points="([^"]+)"`).exec(svg);
          expect(points?.[1]?.split(' ')).toHaveLength(21);
          expect(svg).toContain(`>${a} ${p}</text>`);
        }
    }
  });

  it('puts the slowest value at the right edge and the fastest request at 0%', () => {
    const svg = renderLatencyPlot(LATENCY_PLOTS[0], arms);
    // TTFT: the largest value anywhere is cold's 320 ms, at the plot's right edge (x = 348).
    const cold = /data-arm="dense" data-pass="cold" points="([^"]+)"/.exec(svg)?.[1]?.split(' ') ?? [];
    expect(cold.at(-1)).toBe('348,12');
    expect(cold[0]?.endsWith(',184')).toBe(true);
  });

  it('draws a point a sample and pass, and marks a failed sample', () => {
    const svg = renderCachedSharePlot(arms);
    expect(count(svg, /<circle /g)).toBe(8);
    expect(count(svg, /data-failed="true"/g)).toBe(2);
    expect(svg).toContain('data-arm="hicache" data-pass="warm" data-sample="2" data-failed="true"');
  });

  it('draws no mark and says so without data', () => {
    const none = arms.map((a) => ({ ...a, cold: null, warm: null, samples: [] }));
    const svg = renderLatencyPlot(LATENCY_PLOTS[0], none) + renderCachedSharePlot(none);
    expect(svg).not.toMatch(/<polyline|<circle/);
    expect(count(svg, /data-field="no-data"/g)).toBe(2);
    const refused = views(qualification('mismatched', '2026-12-05T09:00:00Z', { phase: 'Refused' }));
    const html = renderQualifications(refused);
    expect(html).toContain('data-field="no-samples"');
    expect(html).not.toContain('<svg');
  });

  it('shows no section without Qualifications, and escapes names', () => {
    expect(renderQualifications([])).toBe('');
    const odd = { ...(q as QualificationView), name: '<b>x</b>', namespace: 'a"b' };
    const html = renderQualifications([odd]);
    expect(html).toContain('&lt;b&gt;x&lt;/b&gt;');
    expect(html).not.toContain('<b>x</b>');
  });

  it('goes on the page with no style attribute (the CSP admits only the page’s own style)', () => {
    const view: StatusView = {
      generatedAt: '2026-01-02T03:04:05.000Z',
      auth: { mode: 'keys', tenants: [], issues: [] },
      discoveryIssues: [],
      deployments: [],
      qualifications: views(done),
    };
    const html = renderStatusMain(view);
    expect(html).toContain('data-qualification="team-a/dense-vs-hicache"');
    expect(count(html, /<figure data-plot=/g)).toBe(4);
    expect(html).not.toMatch(/\sstyle=/);
  });
});
