// CachePolicy warm-up on the real SGLang 0.5.23 server (CPU, `kit serve`): the
// operator's warm-up requests (warmup-send.ts) leave the document in the
// runtime's radix cache as its own chat template renders it, so the first user
// chat request after warm-up, sent through the gateway, reports the document's
// tokens as cached on the warmed replica. The raw-text warm-up it replaced
// leaves nothing a chat request can reuse.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { sendWarmupDocuments } from '../../operator/src/controllers/cachepolicy/warmup-send.ts';
import type { WarmupTarget } from '../../operator/src/controllers/cachepolicy/warmup.ts';
import { build } from '../../gateway/src/app.ts';
import { StaticRoutingTable, type ModelRoute } from '../../gateway/src/routing/table.ts';
import { postJson } from '../support/sim/testing.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';

const SALT = 'policy-salt';
// About 200 tokens of shared knowledge: what a knowledge base puts in the system message.
const HANDBOOK = Array.from(
  { length: 40 },
  (_, i) => `Rule ${i}: route a prompt to the replica whose cache holds its prefix.`,
).join(' ');

type Usage = { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null };

describe('warm-up on the real SGLang server', () => {
  let real: RealSglang;
  let app: FastifyInstance;
  let gateway: string;

  const target = (salt: string): WarmupTarget => ({
    key: 'ns/real#0',
    namespace: 'ns',
    deployment: 'llama',
    pod: 'real',
    restartCount: 0,
    fingerprint: 'fp1',
    model: 'llama-8b',
    url: real.url,
    salt,
    role: 'standalone',
    l3: false,
    pageSize: 1,
  });

  beforeAll(async () => {
    real = await startRealSglang({
      args: ['--skip-server-warmup', '--enable-cache-report', '--served-model-name', 'llama-8b'],
    });
    const route: ModelRoute = {
      model: 'llama-8b',
      deployment: 'ns/llama',
      fingerprint: 'fp1',
      salt: SALT,
      routing: RoutingSettings.parse({ policy: 'round-robin' }),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints: [
        { id: 'ns/real', url: real.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true },
      ],
    };
    app = build({ table: new StaticRoutingTable([route]) });
    await app.listen({ port: 0, host: '127.0.0.1' });
    gateway = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await real?.stop();
  });

  const userChat = async (question: string): Promise<Usage> => {
    const r = await postJson(`${gateway}/v1/chat/completions`, {
      model: 'llama-8b',
      messages: [
        { role: 'system', content: HANDBOOK },
        { role: 'user', content: question },
      ],
      max_tokens: 2,
      temperature: 0,
    });
    expect(r.status).toBe(200);
    return (r.json as { usage: Usage }).usage;
  };

  it('the first user chat after warm-up reports the system message as cached', async () => {
    const signal = new AbortController().signal;
    const outcome = await sendWarmupDocuments(target(SALT), [HANDBOOK], {
      timeoutMs: 60_000,
      signal,
      apiKey: undefined,
    });
    // The tiny model's template writes no date: nothing varies.
    expect(outcome).toMatchObject({ ok: true, source: 'prefill', warnings: [] });
    // What the warm-up prefilled, as the runtime counts it (its own template and tokenizer).
    const rendered = (await postJson(`${real.url}/tokenize`, {
      messages: [{ role: 'system', content: HANDBOOK }],
    }).then((r) => r.json)) as { count: number };
    const usage = await userChat('Which replica gets my prompt?');
    const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
    // The whole system message but the warm-up's generation cue (<|assistant|>), which the
    // user's turn replaces (a token or two at the seam may differ, as the tokenizer merges them).
    expect(cached).toBeGreaterThanOrEqual(rendered.count - 4);
    expect(cached).toBeLessThan(rendered.count);
    expect(cached).toBeGreaterThan(150);
    expect(usage.prompt_tokens).toBeGreaterThan(cached);
    console.info(
      `warm-up on the real server: the first chat after warm-up had ${usage.prompt_tokens} prompt tokens, ${cached} cached (the system message renders to ${rendered.count})`,
    );
  });

  // The bug this guards: warm-up sent the document as raw text to /generate, which the
  // runtime caches as text, not as the chat template renders it: a chat request never matched.
  it('a raw-text warm-up of the same document leaves nothing a chat request reuses', async () => {
    const salt = 'raw-text-salt';
    const raw = await postJson(`${real.url}/generate`, {
      text: HANDBOOK,
      cache_salt: salt,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
    });
    expect(raw.status).toBe(200);
    const r = await postJson(`${real.url}/v1/chat/completions`, {
      model: 'llama-8b',
      messages: [
        { role: 'system', content: HANDBOOK },
        { role: 'user', content: 'Which replica gets my prompt?' },
      ],
      max_tokens: 2,
      cache_salt: salt,
    });
    const usage = (r.json as { usage: Usage }).usage;
    expect(usage.prompt_tokens_details?.cached_tokens ?? 0).toBeLessThan(5);
  });
});
