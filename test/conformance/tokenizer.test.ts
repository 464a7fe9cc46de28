// The gateway's tokenizer (gateway/src/tokenize) next to the real SGLang
// 0.5.23 server on CPU (`kit serve`, the tiny Llama with its own byte-level
// BPE tokenizer and chat template): our ids equal its POST /tokenize for text
// and chat, the prompt_tokens of /generate, /v1/completions and
// /v1/chat/completions, and the token_ids of the KV blocks it publishes for
// those prompts. Configurations the tiny model lacks: tokenizer-configs.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type ChatMessage, type Tokenizer } from '../../gateway/src/tokenize/index.ts';
import { withFreshPorts } from '../support/fresh-ports.ts';
import { kvEventsConfigArgs } from '../support/kv-events-config.ts';
import { postJson } from '../support/sim/testing.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { drainReplay, type DecodedMessage } from '../support/sglang-kit-events.ts';
import { runKit } from '../support/sglang-kit.ts';
import { buildLongText, CHATS, LONG, TEXTS } from './tokenizer-cases.ts';
import { runOracle } from './tokenizer-oracle.ts';

const PAGE = 16;

async function tokenizeOnServer(url: string, body: unknown): Promise<unknown> {
  const r = await postJson(`${url}/tokenize`, body);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return (r.json as { tokens: unknown }).tokens;
}

async function encodeChat(tok: Tokenizer, messages: readonly ChatMessage[]): Promise<number[]> {
  const r = await tok.encodeChat(messages);
  if (!r.ok) throw new Error(JSON.stringify(r.error));
  return r.value;
}

/** Every stored block's whole prefix (root to block), as text keys: what the server cached. */
function storedPrefixes(stream: readonly DecodedMessage[]): Set<string> {
  const blocks = new Map<bigint, { parent: bigint | null; tokens: number[] }>();
  for (const e of stream.flatMap((m) => m.events ?? [])) {
    if (e.type !== 'BlockStored') continue;
    let parent = e.parent_block_hash;
    e.block_hashes.forEach((h, i) => {
      blocks.set(h, { parent, tokens: e.token_ids.slice(i * e.block_size, (i + 1) * e.block_size) });
      parent = h;
    });
  }
  const prefixOf = (h: bigint): number[] => {
    const b = blocks.get(h);
    if (!b) return [];
    return [...(b.parent === null ? [] : prefixOf(b.parent)), ...b.tokens];
  };
  return new Set([...blocks.keys()].map((h) => prefixOf(h).join(',')));
}

describe('the gateway tokenizer next to the real SGLang server (tiny Llama)', () => {
  let server: RealSglang;
  let tok: Tokenizer;
  let modelDir: string;
  let kvPort: number;
  let replayPort: number;
  /** Ids of every prompt the server scheduled, for the KV-event check. */
  const scheduled: number[][] = [];

  beforeAll(async () => {
    modelDir = (await runKit(['make-model'])).trim().split('\n').at(-1) ?? '';
    const loaded = await loadTokenizer(modelDir);
    if (!loaded.ok) throw new Error(loaded.error.message);
    tok = loaded.value;
    // SGLang says nothing of event ports bound on 0: ports free now, again if one was lost (fresh-ports.ts).
    server = await withFreshPorts(
      2,
      ([kv = 0, replay = 0]) => {
        [kvPort, replayPort] = [kv, replay];
        return startRealSglang({
          args: [
            '--served-model-name',
            'tiny',
            '--page-size',
            String(PAGE),
            ...kvEventsConfigArgs({ kv, replay }),
          ],
        });
      },
      { what: 'sglang (KV events)' },
    );
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('covers short and 2,000-token prompts', async () => {
    const long = await tok.encodeText(LONG);
    expect(long.length).toBeGreaterThan(1_900);
    expect(long.length).toBeLessThan(2_600); // the model's context is 4,096
    expect(tok.chatTemplate?.format).toBe('string');
  });

  it('encodes text prompts as POST /tokenize does', async () => {
    const theirs = await tokenizeOnServer(server.url, { prompt: [...TEXTS, ''] });
    const ours = await Promise.all([...TEXTS, ''].map((t) => tok.encodeText(t)));
    expect(ours).toEqual(theirs);
  });

  it.each(CHATS.map((c, i) => [i, c] as const))(
    'encodes chat %i as POST /tokenize with messages does',
    async (_i, messages) => {
      expect(await encodeChat(tok, messages)).toEqual(await tokenizeOnServer(server.url, { messages }));
    },
  );

  it('a 40,000-character chat (SGLang encodes it in parallel chunks) too', async () => {
    const messages = [{ role: 'user', content: buildLongText(14_000) }];
    expect(messages[0]?.content.length).toBeGreaterThan(40_000);
    expect(await encodeChat(tok, messages)).toEqual(await tokenizeOnServer(server.url, { messages }));
  });

  it('counts what /generate, /v1/completions and /v1/chat/completions report as prompt_tokens', async () => {
    const once = { max_new_tokens: 1, temperature: 0 };
    for (const text of TEXTS) {
      const ids = await tok.encodeText(text);
      const gen = await postJson(`${server.url}/generate`, { text, sampling_params: once });
      expect(gen.status, JSON.stringify(gen.json)).toBe(200);
      expect((gen.json as { meta_info: { prompt_tokens: number } }).meta_info.prompt_tokens).toBe(ids.length);
      scheduled.push(ids);
    }
    for (const prompt of TEXTS.slice(0, 8)) {
      const r = await postJson(`${server.url}/v1/completions`, { model: 'tiny', prompt, max_tokens: 1 });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect((r.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(
        (await tok.encodeText(prompt)).length,
      );
    }
    for (const messages of CHATS) {
      const ids = await encodeChat(tok, messages);
      const r = await postJson(`${server.url}/v1/chat/completions`, {
        model: 'tiny',
        messages,
        max_tokens: 1,
      });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect((r.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(ids.length);
      scheduled.push(ids);
    }
  });

  it('equals the token_ids of the KV blocks the server stored for those prompts', async () => {
    expect(scheduled.length).toBe(TEXTS.length + CHATS.length);
    const stream = await drainReplay({
      endpoint: `tcp://127.0.0.1:${kvPort}`,
      replay: `tcp://127.0.0.1:${replayPort}`,
      topic: 'kv',
    });
    const prefixes = storedPrefixes(stream);
    const fullPages = scheduled.filter((ids) => ids.length >= PAGE);
    expect(fullPages.length).toBeGreaterThan(25);
    for (const ids of fullPages) {
      const pages = ids.slice(0, Math.floor(ids.length / PAGE) * PAGE);
      expect(prefixes.has(pages.join(',')), `no stored chain for ${ids.slice(0, 8).join(',')}...`).toBe(true);
    }
  });

  it("agrees with the in-process oracle of tokenizer-configs.test.ts (SGLang's own /tokenize handler) on this model", async () => {
    const requests = [{ prompt: TEXTS.slice(0, 10) }, ...CHATS.slice(0, 8).map((messages) => ({ messages }))];
    const oracle = await runOracle(requests.map((body) => ({ dir: modelDir, body })));
    const theirs = await Promise.all(requests.map((body) => tokenizeOnServer(server.url, body)));
    expect(oracle).toEqual(theirs.map((tokens) => ({ tokens })));
  });
});
