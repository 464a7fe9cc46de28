// Mooncake trace → requests (pure). Each hash_id becomes a 512-token block of
// deterministic word tokens (test/sim/tokenizer.ts: one word = one token), so
// equal ids give equal token prefixes in both native (input_ids) and chat
// (text) modes; the last block is cut to input_length.

import { WORD_BASE, WORD_COUNT, decode } from '../sim/tokenizer.ts';

export const BLOCK_TOKENS = 512;

export interface TraceRecord {
  readonly timestamp: number;
  readonly input_length: number;
  readonly output_length: number;
  readonly hash_ids: readonly number[];
}

export type ParseResult = { ok: true; value: TraceRecord[] } | { ok: false; error: string };

export function parseTrace(jsonl: string, limit = Infinity, skip = 0): ParseResult {
  const out: TraceRecord[] = [];
  const lines = jsonl.split('\n');
  let seen = 0;
  for (let i = 0; i < lines.length && out.length < limit; i++) {
    const line = (lines[i] ?? '').trim();
    if (line === '') continue;
    if (seen++ < skip) continue;
    let r: unknown;
    try {
      r = JSON.parse(line);
    } catch {
      return { ok: false, error: `line ${i + 1}: invalid JSON` };
    }
    const rec = r as Partial<TraceRecord>;
    if (
      typeof rec.timestamp !== 'number' ||
      typeof rec.input_length !== 'number' ||
      typeof rec.output_length !== 'number' ||
      !Array.isArray(rec.hash_ids)
    ) {
      return {
        ok: false,
        error: `line ${i + 1}: expected {timestamp, input_length, output_length, hash_ids}`,
      };
    }
    out.push(rec as TraceRecord);
  }
  return { ok: true, value: out };
}

function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

const blockCache = new Map<number, number[]>();

/** The 512 token ids of block `hashId` (word tokens only). */
export function buildBlock(hashId: number): number[] {
  let b = blockCache.get(hashId);
  if (!b) {
    b = Array.from(
      { length: BLOCK_TOKENS },
      (_, j) => WORD_BASE + (mix32(Math.imul(hashId + 1, 0x9e3779b1) ^ mix32(j)) % WORD_COUNT),
    );
    if (blockCache.size < 200_000) blockCache.set(hashId, b);
  }
  return b;
}

/** Prompt token ids of a record: its blocks in order, cut to input_length. */
export function buildPromptIds(rec: TraceRecord): number[] {
  const out: number[] = [];
  for (const h of rec.hash_ids) {
    const need = rec.input_length - out.length;
    if (need <= 0) break;
    const block = buildBlock(h);
    for (let j = 0; j < Math.min(need, BLOCK_TOKENS); j++) out.push(block[j] ?? WORD_BASE);
  }
  return out;
}

/** The same prompt as text: one space-prefixed word per token. */
export function buildPromptText(rec: TraceRecord): string {
  return decode(buildPromptIds(rec));
}

/**
 * Infinite-cache bound of a slice: cached / prompt tokens if every prefix ever
 * seen stayed cached. A block is reusable when an earlier request had the same
 * block chain up to it with at least as many of its tokens; matching stops at
 * the first block that is not (prefix semantics), and at most input - 1 tokens
 * count, as SGLang always recomputes the last token.
 */
export function computeBound(records: readonly TraceRecord[]): {
  cached: number;
  prompt: number;
  hitRate: number;
} {
  const seen = new Map<string, number>();
  let cached = 0;
  let prompt = 0;
  for (const rec of records) {
    let matched = 0;
    let chain = '';
    let reusable = true;
    let remaining = rec.input_length;
    for (const h of rec.hash_ids) {
      if (remaining <= 0) break;
      const len = Math.min(BLOCK_TOKENS, remaining);
      chain = chain === '' ? String(h) : `${chain},${h}`;
      const before = seen.get(chain) ?? 0;
      if (reusable && before >= len) matched += len;
      else reusable = false;
      if (before < len) seen.set(chain, len);
      remaining -= len;
    }
    cached += Math.min(matched, Math.max(0, rec.input_length - 1));
    prompt += rec.input_length;
  }
  return { cached, prompt, hitRate: prompt > 0 ? cached / prompt : 0 };
}
