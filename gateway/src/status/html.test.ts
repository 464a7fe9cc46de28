import { describe, expect, it } from 'vitest';
import { escapeHtml, renderStatusMain, renderStatusPage, STATUS_CSP } from './html.ts';
import type { DeploymentStatus, EndpointStatus, StatusView } from './view.ts';

const endpoint = (over: Partial<EndpointStatus> = {}): EndpointStatus => ({
  id: 'sim0',
  url: 'http://10.244.0.5:30000',
  role: 'standalone',
  ready: true,
  verified: true,
  routable: true,
  warmup: null,
  fingerprint: 'sha256:0123456789abcdef0123',
  isCurrent: true,
  inFlight: 1,
  runtimeQueue: 2,
  kvUsage: 0.5,
  routed: 4,
  predictedHitRate: 0.5,
  served: 3,
  promptTokens: 200,
  cachedTokens: 150,
  cacheHitRate: 0.75,
  lastError: null,
  failedAttempts: { connect: 0, timeout: 0, status: 0, interrupted: 0 },
  down: null,
  kvIndex: null,
  ...over,
});

const view = (
  ep: EndpointStatus = endpoint(),
  model = 'llama',
  l3: DeploymentStatus['l3'] = [],
): StatusView => ({
  generatedAt: '2026-01-02T03:04:05.000Z',
  auth: { mode: 'keys', tenants: [], issues: [] },
  discoveryIssues: [],
  qualifications: [],
  deployments: [
    {
      model,
      deployment: 'ns/llama',
      fingerprint: 'fp1',
      policy: 'cache-aware',
      trafficShare: null,
      sharedWith: [],
      admission: { limit: 8, maxConcurrency: 8, inFlight: 1, queued: 0, maxQueue: 16, draining: false },
      routing: { promptTokens: 200, matchedTokens: 100, predictedTokenHitRate: 0.5 },
      reuse: { enabled: false, ttlSeconds: 300, fromStore: 0, sharedInFlight: 0, fresh: 0 },
      routableEndpoints: 1,
      l3,
      endpoints: [ep],
      lastError: null,
    },
  ],
});

describe('escapeHtml', () => {
  it.each([
    ['<script>alert(1)</script>', '&lt;script&gt;alert(1)&lt;/script&gt;'],
    [`"a" & 'b'`, '&quot;a&quot; &amp; &#39;b&#39;'],
    ['plain', 'plain'],
  ])('%s', (input, out) => expect(escapeHtml(input)).toBe(out));
});

describe('renderStatusPage', () => {
  it('is one self-contained document: no external URL anywhere', () => {
    const html = renderStatusPage(view());
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).not.toMatch(/\b(src|href)=/);
    expect(html).not.toMatch(/@import|url\(/);
    expect(html).toContain('<script>');
    expect(html).toContain("fetch('status?part=main'");
  });

  it('shows an endpoint row with its numbers', () => {
    const html = renderStatusMain(view());
    expect(html).toContain('<tr data-endpoint="sim0">');
    expect(html).toContain('<td class="n" data-field="served">3</td>');
    expect(html).toContain('75.0%');
    expect(html).toContain('(150/200)');
    expect(html).toContain('1/8 in flight, 0/16 queued');
    expect(html).toContain('badge ok">ready');
  });

  it("shows the Deployment's shared L3 as the gateway models it, and nothing without one", () => {
    const unit = {
      role: 'standalone',
      fingerprint: 'fp1',
      blocks: 12,
      tokens: 192,
      endpoints: ['sim0', 'sim1'],
    };
    expect(renderStatusMain(view(endpoint(), 'llama', [unit]))).toContain(
      '<span data-field="l3">12 blocks (192 tokens) · standalone · <span class="mono">fp1</span> · 2 endpoints</span>',
    );
    expect(renderStatusMain(view())).not.toContain('data-field="l3"');
  });

  it('shows failed attempts by reason, and nothing when there were none', () => {
    expect(renderStatusMain(view())).not.toContain('failed attempt');
    const html = renderStatusMain(
      view(endpoint({ failedAttempts: { connect: 2, timeout: 0, status: 1, interrupted: 0 } })),
    );
    expect(html).toContain('data-field="failed-attempts">3 failed attempts: connect 2, status 1</span>');
  });

  it('says why an endpoint is left out of picks', () => {
    expect(renderStatusMain(view())).not.toContain('data-field="down"');
    const html = renderStatusMain(view(endpoint({ down: 'ECONNREFUSED' })));
    expect(html).toContain('data-field="down">left out of picks: ECONNREFUSED</span>');
  });

  it('says why an endpoint is held for warm-up or routed before it was warmed', () => {
    expect(renderStatusMain(view())).not.toContain('data-field="warmup"');
    const held = renderStatusMain(
      view(
        endpoint({ routable: false, warmup: { state: 'warming', message: 'warm-up Warming; held <60 s>' } }),
      ),
    );
    expect(held).toContain('<span class="badge warn" data-state="warming">warming</span>');
    expect(held).toContain('data-field="warmup">warm-up Warming; held &lt;60 s&gt;</span>');
    const late = renderStatusMain(
      view(endpoint({ warmup: { state: 'timed-out', message: 'routed anyway' } })),
    );
    expect(late).toContain('routed unwarmed');
  });

  it('says loudly when API keys are not checked, and lists tenants left out', () => {
    expect(renderStatusMain({ ...view(), auth: { mode: 'open', tenants: [], issues: [] } })).toContain(
      '<p class="bad" data-field="auth">API keys are not checked',
    );
    const keys = renderStatusMain({
      ...view(),
      auth: { mode: 'keys', tenants: [], issues: [{ tenant: 'ns/t', code: 'NoKeys', message: '<none>' }] },
    });
    expect(keys).not.toContain('not checked');
    expect(keys).toContain('<li class="bad">ns/t: NoKeys: &lt;none&gt;</li>');
  });

  it('lists what discovery left out of the table, escaped', () => {
    expect(renderStatusMain(view())).not.toContain('discovery-issues');
    const html = renderStatusMain({
      ...view(),
      discoveryIssues: [
        { code: 'RuntimeOutOfBounds', path: 'Deployment ns/x', model: 'x', message: 'reports <lies>' },
      ],
    });
    expect(html).toContain('<li class="bad">Deployment ns/x: RuntimeOutOfBounds: reports &lt;lies&gt;</li>');
  });

  it('shows a dash, not 0%, when nothing was measured', () => {
    const html = renderStatusMain(view(endpoint({ cacheHitRate: null, runtimeQueue: null })));
    expect(html).toMatch(/data-field="cache-hit-rate"><span class="mute">—/);
    expect(html).not.toContain('>0.0%');
  });

  it('escapes every value from the cluster and from upstream answers', () => {
    const evil = '<img src=x onerror=alert(1)>"\'&';
    const html = renderStatusPage(
      view(
        endpoint({
          id: evil,
          url: evil,
          fingerprint: evil,
          lastError: { at: evil, status: 500, code: evil, message: evil },
        }),
        evil,
      ),
    );
    expect(html).not.toContain('<img');
    expect(html).not.toContain('onerror=alert(1)>');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
  });

  it('the CSP admits only the page’s own inline style and script', () => {
    expect(STATUS_CSP).toContain("default-src 'none'");
    expect(STATUS_CSP).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(STATUS_CSP).not.toContain('unsafe-inline');
  });
});
