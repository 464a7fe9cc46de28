// The warm-up's requests against the SGLang simulator (test/sim, held to SGLang
// 0.5.23 by the conformance suite); the real server's effect is in
// test/conformance/warmup-real.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bootstrapPortOf,
  postJson,
  startSim,
  type RunningSim,
} from '../../../../test/support/sim/testing.ts';
import type { WarmupTarget } from './warmup.ts';
import { digestRenderings, firstDifference, renderDocument } from './render.ts';
import { sendWarmupDocuments } from './warmup-send.ts';

const KEY = 'k'.repeat(64);
const HANDBOOK = ' ba be bi bo bu ca ce ci co cu da de di do du';

const target = (url: string, o: Partial<WarmupTarget> = {}): WarmupTarget => ({
  key: 'ns/p#0',
  namespace: 'ns',
  deployment: 'llama',
  pod: 'p',
  restartCount: 0,
  fingerprint: 'f1',
  model: 'm',
  url,
  salt: 'salt-a',
  role: 'standalone',
  l3: false,
  pageSize: 1,
  ...o,
});

type Usage = { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } | null };

async function chat(url: string, salt: string, messages: unknown[], extra: object = {}): Promise<Usage> {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ messages, max_tokens: 1, cache_salt: salt, ...extra }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { usage: Usage }).usage;
}

describe('sendWarmupDocuments on a standalone runtime', () => {
  let sim: RunningSim;
  beforeAll(async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report', '--api-key', KEY]);
  });
  afterAll(() => sim.close());

  it('leaves each document as a cached system-message prefix for chat requests under the salt', async () => {
    const signal = new AbortController().signal;
    const other = ' ga ge gi go gu';
    expect(
      await sendWarmupDocuments(target(sim.url), [HANDBOOK, other], { timeoutMs: 5000, signal, apiKey: KEY }),
    ).toMatchObject({ ok: true, source: 'prefill', warnings: [] });
    const system = { role: 'system', content: HANDBOOK };
    const first = await chat(sim.url, 'salt-a', [system, { role: 'user', content: ' ha' }]);
    // Everything of the system message (its role token and text) was cached before the first request.
    const warm = await chat(sim.url, 'salt-b', [system]);
    expect(first.prompt_tokens_details?.cached_tokens).toBe(warm.prompt_tokens - 1);
    // Under another salt nothing was: the cache salt separates it.
    expect(warm.prompt_tokens_details?.cached_tokens).toBe(0);
    const second = await chat(sim.url, 'salt-a', [
      { role: 'system', content: other },
      { role: 'user', content: ' x' },
    ]);
    expect(second.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
  });

  it('says what failed: a runtime that refuses the key', async () => {
    const outcome = await sendWarmupDocuments(target(sim.url), [HANDBOOK], {
      timeoutMs: 5000,
      signal: new AbortController().signal,
      apiKey: 'w'.repeat(64),
    });
    const error = outcome.ok ? '' : outcome.error;
    expect(error).toMatch(/HTTP 401/);
    expect(error).not.toContain('w'.repeat(64));
  });
});

describe('sendWarmupDocuments with a shared L3 tier (ADR 0042)', () => {
  let sim: RunningSim;
  beforeAll(async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report']);
  });
  afterAll(() => sim.close());
  const signal = new AbortController().signal;
  const opts = { timeoutMs: 5000, signal, apiKey: undefined };

  it('does not prefill a replica that renders the documents as delivered: it loads them from L3', async () => {
    const rendered = await renderDocument(sim.url, HANDBOOK, opts);
    if (!rendered.ok) throw new Error(rendered.error);
    const delivered = digestRenderings([rendered.tokens]);
    const before = sim.server.engine.counters.requests;
    const outcome = await sendWarmupDocuments(
      target(sim.url, { l3: true, pageSize: 16, deliveredRendering: delivered }),
      [HANDBOOK],
      opts,
    );
    expect(outcome).toEqual({
      ok: true,
      source: 'storage',
      rendered: delivered,
      tokens: 0,
      storedTokens: 0,
      warnings: [],
    });
    expect(sim.server.engine.counters.requests).toBe(before);
  });

  it('warns when the L3 settings keep a first request from loading: best_effort, a short document', async () => {
    const rendered = await renderDocument(sim.url, HANDBOOK, opts);
    if (!rendered.ok) throw new Error(rendered.error);
    const t = target(sim.url, {
      l3: true,
      pageSize: 16,
      deliveredRendering: digestRenderings([rendered.tokens]),
      prefetch: { policy: 'best_effort', threshold: 256 },
    });
    const outcome = await sendWarmupDocuments(t, [HANDBOOK], opts);
    expect(outcome.ok && outcome.warnings).toEqual([
      expect.stringMatching(/^hicache.storage.prefetchPolicy best_effort: a request does not wait/),
      expect.stringMatching(
        new RegExp(
          `^warmup.documents\\[0\\] renders to ${rendered.tokens.length} tokens, under the L3 prefetch threshold \\(256\\)`,
        ),
      ),
    ]);
    // SGLang's defaults, and a document past the threshold: nothing to say.
    const fine = await sendWarmupDocuments(
      { ...t, prefetch: { policy: 'timeout', threshold: rendered.tokens.length } },
      [HANDBOOK],
      opts,
    );
    expect(fine.ok && fine.warnings).toEqual([]);
  });

  it('prefills one whose rendering differs from the delivery, and then wants the tier to confirm it', async () => {
    const before = sim.server.engine.counters.requests;
    const outcome = await sendWarmupDocuments(
      target(sim.url, { l3: true, pageSize: 16, deliveredRendering: 'rendered-another-day' }),
      [HANDBOOK],
      opts,
    );
    // This simulator serves no /metrics: nothing can confirm the backup, and the warm-up says why.
    expect(outcome).toEqual({
      ok: false,
      error: expect.stringContaining(
        'its /metrics did not answer, so an L3 delivery cannot be confirmed',
      ) as unknown,
    });
    expect(sim.server.engine.counters.requests).toBe(before);
  });
});

describe('render.ts', () => {
  it('finds where two renderings part, and digests them in order', () => {
    expect(firstDifference([1, 2, 3], [1, 2, 3])).toBe(-1);
    expect(firstDifference([1, 2, 3], [1, 9, 3])).toBe(1);
    expect(firstDifference([1, 2], [1, 2, 3])).toBe(2);
    expect(digestRenderings([[1, 2], [3]])).not.toBe(digestRenderings([[1], [2, 3]]));
    expect(digestRenderings([[1, 2], [3]])).toBe(digestRenderings([[1, 2], [3]]));
  });
});

describe('sendWarmupDocuments on a prefill/decode pair', () => {
  // The bug this guards: a disaggregated prefill refuses a request without a bootstrap
  // room, so a chat warm-up must go to the prefill and its decode partner at once.
  it('warms the prefill through its decode partner with the bootstrap fields', async () => {
    const prefill = await startSim([
      '--model-path',
      'm',
      '--enable-cache-report',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    const bsPort = bootstrapPortOf(prefill);
    const decode = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'decode',
      '--sim-pd-timeout-ms',
      '2000',
    ]);
    try {
      const t = target(prefill.url, {
        pair: { decodePod: 'd', decodeUrl: decode.url, bootstrapHost: '127.0.0.1', bootstrapPort: bsPort },
      });
      const signal = new AbortController().signal;
      expect(
        await sendWarmupDocuments(t, [HANDBOOK], { timeoutMs: 5000, signal, apiKey: undefined }),
      ).toMatchObject({ ok: true, source: 'prefill' });
      expect(prefill.server.engine.counters.requests).toBe(1);
      expect(decode.server.engine.counters.requests).toBe(1);
      // A user's chat through the same pair finds the system message cached on the prefill.
      const body = {
        messages: [
          { role: 'system', content: HANDBOOK },
          { role: 'user', content: ' ha' },
        ],
        max_tokens: 1,
        cache_salt: 'salt-a',
        bootstrap_host: '127.0.0.1',
        bootstrap_port: bsPort,
        bootstrap_room: 99,
      };
      const [p] = await Promise.all([
        postJson(`${prefill.url}/v1/chat/completions`, body),
        postJson(`${decode.url}/v1/chat/completions`, body),
      ]);
      const usage = (p.json as { usage: Usage }).usage;
      expect(usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
    } finally {
      await prefill.close();
      await decode.close();
    }
  });
});
