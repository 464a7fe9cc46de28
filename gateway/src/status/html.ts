// The status page: one self-contained HTML document (inline style and script,
// no external assets), rendered from the view by pure functions. Every value
// from the view goes through escapeHtml: model names, URLs and error messages
// come from cluster objects and upstream answers.
//
// Refresh: the inline script fetches `status?part=main` every 2 s and swaps
// <main> for it. The fragment is rendered by the same function as the page,
// so there is one renderer, escaped in one place, instead of a second one in
// the browser building the same tables from /status.json.

import { createHash } from 'node:crypto';
import { escapeHtml } from './escape.ts';
import { renderQualifications } from './qualification-plots.ts';
import type { AuthStatus, DeploymentStatus, EndpointStatus, ErrorView, StatusView } from './view.ts';

export const REFRESH_MS = 2000;

export { escapeHtml };

const STYLE = `
:root{color-scheme:light dark;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--mute:#6e7781;--line:#d0d7de}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:16px 24px;max-width:1400px}
header{display:flex;align-items:baseline;gap:16px;border-bottom:1px solid var(--line);margin-bottom:12px}
h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:20px 0 6px}
.mute{color:var(--mute)}.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.facts{display:flex;flex-wrap:wrap;gap:6px 24px;margin:4px 0 8px}.facts b{font-weight:600}
table{border-collapse:collapse;width:100%}th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{font-weight:600;font-size:12px;color:var(--mute)}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;border:1px solid currentColor;margin-right:4px}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}
meter{width:60px;height:10px;vertical-align:middle;margin-right:6px}
td.err{white-space:normal;max-width:320px}
#stale{display:none}body.stale #stale{display:inline}
h3{font-size:15px;margin:16px 0 4px}.plots{display:flex;flex-wrap:wrap;gap:8px 16px}
figure{margin:0}figcaption{font-size:12px;color:var(--mute)}svg text{fill:currentColor;font-size:11px}
`;

const SCRIPT = `
(() => {
  const main = document.querySelector('main');
  const tick = async () => {
    try {
      const res = await fetch('status?part=main', { cache: 'no-store' });
      if (!res.ok) throw new Error(String(res.status));
      main.innerHTML = await res.text();
      document.body.classList.remove('stale');
    } catch {
      document.body.classList.add('stale');
    }
    setTimeout(tick, ${REFRESH_MS});
  };
  setTimeout(tick, ${REFRESH_MS});
})();
`;

const sha256 = (s: string): string => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** Only the inline style and script above may run; fetches go to this origin only. */
export const STATUS_CSP = [
  "default-src 'none'",
  `style-src ${sha256(STYLE)}`,
  `script-src ${sha256(SCRIPT)}`,
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function renderStatusPage(view: StatusView): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cacheroute gateway status</title>
<style>${STYLE}</style>
</head>
<body>
<header><h1>cacheroute gateway</h1><span class="mute">refreshes every ${REFRESH_MS / 1000} s</span><span id="stale" class="bad">stale: the gateway did not answer</span></header>
<main>${renderStatusMain(view)}</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

export function renderStatusMain(view: StatusView): string {
  const body =
    view.deployments.length === 0
      ? '<p class="mute">No models are routed yet.</p>'
      : view.deployments.map(renderDeployment).join('\n');
  return `<p class="mute">as of <time data-field="generated-at">${escapeHtml(view.generatedAt)}</time></p>\n${renderAuth(view.auth)}\n${renderDiscoveryIssues(view.discoveryIssues)}${body}\n${renderQualifications(view.qualifications)}`;
}

function renderDiscoveryIssues(issues: StatusView['discoveryIssues']): string {
  if (issues.length === 0) return '';
  const items = issues.map(
    (i) => `<li class="bad">${escapeHtml(i.path)}: ${escapeHtml(i.code)}: ${escapeHtml(i.message)}</li>`,
  );
  return `<p data-field="discovery-issues">Left out of the routing table:</p><ul>${items.join('')}</ul>\n`;
}

function renderAuth(a: AuthStatus): string {
  if (a.mode === 'open')
    return '<p class="bad" data-field="auth">API keys are not checked (--auth open): anyone who reaches the API port may call every model.</p>';
  const issues = a.issues.map(
    (i) => `<li class="bad">${escapeHtml(i.tenant)}: ${escapeHtml(i.code)}: ${escapeHtml(i.message)}</li>`,
  );
  return `<p data-field="auth">API keys checked: ${a.tenants.length} tenant${a.tenants.length === 1 ? '' : 's'}.</p>${
    issues.length > 0 ? `<ul>${issues.join('')}</ul>` : ''
  }`;
}

function renderDeployment(d: DeploymentStatus): string {
  const a = d.admission;
  const admission = `${a.inFlight}/${a.limit} in flight${a.limit < a.maxConcurrency ? ` (max ${a.maxConcurrency})` : ''}, ${a.queued}/${a.maxQueue} queued`;
  const reuse = d.reuse.enabled
    ? `${d.reuse.fromStore} from store, ${d.reuse.sharedInFlight} shared in flight, ${d.reuse.fresh} generated (TTL ${d.reuse.ttlSeconds} s)`
    : 'off';
  const facts: [string, string][] = [
    ['policy', escapeHtml(d.policy)],
    ['admission', `${escapeHtml(admission)}${a.draining ? ' <span class="badge warn">draining</span>' : ''}`],
    [
      'predicted prefix hits',
      `${formatRate(d.routing.predictedTokenHitRate)} <span class="mute">(${d.routing.matchedTokens}/${d.routing.promptTokens} tokens)</span>`,
    ],
    ['result reuse', escapeHtml(reuse)],
    ['fingerprint', `<span class="mono">${escapeHtml(d.fingerprint)}</span>`],
    ['routable endpoints', `${d.routableEndpoints}/${d.endpoints.length}`],
  ];
  if (d.trafficShare !== null) facts.push(['traffic share', formatRate(d.trafficShare)]);
  for (const u of d.l3)
    facts.push([
      'shared L3',
      `<span data-field="l3">${u.blocks} blocks (${u.tokens} tokens) · ${escapeHtml(u.role)} · <span class="mono">${escapeHtml(shorten(u.fingerprint))}</span> · ${u.endpoints.length} endpoint${u.endpoints.length === 1 ? '' : 's'}</span> <span class="mute">(modelled from host-tier stores)</span>`,
    ]);
  if (d.sharedWith.length > 0)
    facts.push([
      'name also served in',
      `<span class="warn">${escapeHtml(d.sharedWith.join(', '))}</span> <span class="mute">(open clients must send x-cacheroute-namespace)</span>`,
    ]);
  if (d.lastError) facts.push(['last gateway error', `<span class="bad">${renderError(d.lastError)}</span>`]);
  return `<section data-deployment="${escapeHtml(d.deployment)}">
<h2>${escapeHtml(d.model)} <span class="mute">${escapeHtml(d.deployment)}</span></h2>
<div class="facts">${facts.map(([k, v]) => `<span><b>${k}</b> ${v}</span>`).join('')}</div>
<table>
<thead><tr><th>endpoint</th><th>role</th><th>state</th><th>fingerprint</th><th class="n">in flight</th><th class="n">runtime queue</th><th class="n">KV</th><th class="n">routed</th><th class="n">predicted hits</th><th class="n">served</th><th>cache hit rate</th><th>last error</th></tr></thead>
<tbody>
${d.endpoints.map(renderEndpoint).join('\n')}
</tbody>
</table>
</section>`;
}

function renderEndpoint(e: EndpointStatus): string {
  const state = [
    badge(e.ready, 'ready', 'not ready'),
    badge(e.verified, 'verified', 'unverified'),
    e.routable ? '' : '<span class="badge warn">not routed</span>',
    renderWarmupBadge(e),
  ].join('');
  const hit =
    e.cacheHitRate === null
      ? '<span class="mute">—</span>'
      : `<meter min="0" max="1" value="${e.cacheHitRate.toFixed(3)}"></meter>${formatRate(e.cacheHitRate)} <span class="mute">(${e.cachedTokens}/${e.promptTokens})</span>`;
  const cells = [
    `<td><span class="mono" title="${escapeHtml(e.url)}">${escapeHtml(e.id)}</span></td>`,
    `<td>${escapeHtml(e.role)}</td>`,
    `<td>${state}</td>`,
    `<td class="mono${e.isCurrent ? '' : ' warn'}" title="${e.isCurrent ? 'current' : 'not the deployment’s current fingerprint'}">${escapeHtml(shorten(e.fingerprint))}</td>`,
    `<td class="n" data-field="in-flight">${e.inFlight}</td>`,
    `<td class="n" data-field="runtime-queue">${e.runtimeQueue ?? '<span class="mute">—</span>'}</td>`,
    `<td class="n">${formatRate(e.kvUsage)}</td>`,
    `<td class="n" data-field="routed">${e.routed}</td>`,
    `<td class="n">${formatRate(e.predictedHitRate)}</td>`,
    `<td class="n" data-field="served">${e.served}</td>`,
    `<td data-field="cache-hit-rate">${hit}</td>`,
    `<td class="err" data-field="last-error">${renderLastError(e)}</td>`,
  ];
  return `<tr data-endpoint="${escapeHtml(e.id)}">${cells.join('')}</tr>`;
}

/** Warm-up: held (warming), or routed before it completed and why; nothing once warmed. */
function renderWarmupBadge(e: EndpointStatus): string {
  const w = e.warmup;
  if (!w || w.state === 'warmed') return '';
  const label = w.state === 'warming' ? 'warming' : 'routed unwarmed';
  return `<span class="badge warn" data-state="${w.state}">${label}</span>`;
}

/** The last error answer, then failed attempts (retried ones never reach a client). */
function renderLastError(e: EndpointStatus): string {
  const parts = e.lastError ? [`<span class="bad">${renderError(e.lastError)}</span>`] : [];
  if (e.kvIndex && e.kvIndex.reason !== '')
    parts.push(
      `<span class="warn" data-field="kv-index">KV index ${e.kvIndex.usable ? 'a floor only' : 'not used'}: ${escapeHtml(e.kvIndex.reason)}</span>`,
    );
  if (e.warmup && e.warmup.state !== 'warmed')
    parts.push(`<span class="warn" data-field="warmup">${escapeHtml(e.warmup.message)}</span>`);
  if (e.down !== null)
    parts.push(`<span class="bad" data-field="down">left out of picks: ${escapeHtml(e.down)}</span>`);
  const reasons = Object.entries(e.failedAttempts).filter(([, n]) => n > 0);
  const total = reasons.reduce((sum, [, n]) => sum + n, 0);
  if (total > 0)
    parts.push(
      `<span class="warn" data-field="failed-attempts">${total} failed attempt${total === 1 ? '' : 's'}: ${reasons.map(([r, n]) => `${r} ${n}`).join(', ')}</span>`,
    );
  return parts.length > 0 ? parts.join('<br>') : '<span class="mute">—</span>';
}

function renderError(e: ErrorView): string {
  return `${e.status} ${escapeHtml(e.code)}: ${escapeHtml(e.message)} <span class="mute">at ${escapeHtml(e.at)}</span>`;
}

function badge(on: boolean, yes: string, no: string): string {
  return on ? `<span class="badge ok">${yes}</span>` : `<span class="badge bad">${no}</span>`;
}

export function formatRate(r: number | null): string {
  return r === null ? '<span class="mute">—</span>' : `${(r * 100).toFixed(1)}%`;
}

function shorten(fp: string): string {
  return fp.length > 16 ? `${fp.slice(0, 12)}…` : fp;
}
