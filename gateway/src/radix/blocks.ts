// Token blocks: the unit the approximate prefix tree matches on.
//
// A block is `blockTokens` consecutive token ids; only complete blocks count,
// as SGLang matches page-aligned prefixes. Each block is reduced to a 52-bit
// key (two 32-bit FNV-1a style hashes folded into a safe integer). Keys need
// only be distinct among siblings of one tree node, so a collision costs at
// most one wrong affinity guess, never a wrong answer.

export type BlockKey = number;

const FNV_PRIME = 0x01000193;

export function computeBlockKeys(tokens: ArrayLike<number>, blockTokens: number): BlockKey[] {
  if (!Number.isInteger(blockTokens) || blockTokens < 1) throw new RangeError('blockTokens must be >= 1');
  const count = Math.floor(tokens.length / blockTokens);
  const keys = new Array<BlockKey>(count);
  for (let b = 0; b < count; b++) {
    let h1 = 0x811c9dc5;
    let h2 = 0x9e3779b9;
    const start = b * blockTokens;
    for (let i = start; i < start + blockTokens; i++) {
      const t = (tokens[i] ?? 0) >>> 0;
      h1 = Math.imul(h1 ^ t, FNV_PRIME);
      h2 = Math.imul(h2 ^ ((t << 7) | (t >>> 25)), 0x85ebca6b) ^ (h2 >>> 13);
    }
    // 32 bits of h1 and 20 bits of h2: an integer below 2^52.
    keys[b] = (h1 >>> 0) * 0x100000 + ((h2 >>> 12) & 0xfffff);
  }
  return keys;
}

/**
 * Approximate tokens for text when no token ids are available (OpenAI bodies
 * carry text; the gateway has no tokenizer). Every `charsPerToken` UTF-16
 * units become one pseudo-token. Matching stays exact on text; only the unit
 * differs from the runtime's, which callers correct for with the ratio of the
 * runtime's reported prompt_tokens to this count.
 */
export function computeTextTokens(text: string, charsPerToken = 4): Uint32Array {
  const n = Math.ceil(text.length / charsPerToken);
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    let h = 0x811c9dc5;
    const start = i * charsPerToken;
    const end = Math.min(text.length, start + charsPerToken);
    for (let j = start; j < end; j++) h = Math.imul(h ^ text.charCodeAt(j), FNV_PRIME);
    out[i] = h >>> 0;
  }
  return out;
}
