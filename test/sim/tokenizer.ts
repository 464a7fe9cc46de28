// The simulator's tokenizer: deterministic, reversible, no vocabulary file.
//
// Ids (VOCAB_SIZE = 32768):
//   0..3      special tokens <|endoftext|> <|system|> <|user|> <|assistant|>
//   4..259    byte fallback: byte b is id 4 + b
//   260..     words: id 260 + n is " " + spell(n), where spell writes n in
//             bijective base 100 with consonant-vowel syllables ("ba", "be",
//             ..., "zu"), so spell(0) = "ba", spell(99) = "zu", spell(100) = "baba".
//
// Encoding scans the text left to right: a special-token string becomes its
// id; a space followed by lowercase letters that spell a word id becomes that
// id (so " ba ko" is two tokens); anything else becomes its UTF-8 bytes. So
// `decode(encode(s)) === s` for every string, generation emits only word ids,
// and a text made of N space-prefixed words is exactly N tokens — the trace
// replay relies on that to map a 512-token block to 512 words.
//
// Generation is a hash of (seed, prompt ids, position): token i does not depend
// on max_new_tokens, so a longer generation extends a shorter one.

export const VOCAB_SIZE = 32768;
export const SPECIAL_TOKENS = ['<|endoftext|>', '<|system|>', '<|user|>', '<|assistant|>'] as const;
export const EOS_TOKEN_ID = 0;
export const ROLE_TOKEN_IDS = { system: 1, user: 2, assistant: 3 } as const;
const BYTE_BASE = 4;
export const WORD_BASE = BYTE_BASE + 256;
export const WORD_COUNT = VOCAB_SIZE - WORD_BASE;

const CONSONANTS = 'bcdfghjklmnprstvwxyz';
const VOWELS = 'aeiou';
const SYLLABLES: string[] = [];
for (const c of CONSONANTS) for (const v of VOWELS) SYLLABLES.push(c + v);
// Char code → consonant / vowel index (-1 when not one), for a slice-free readWord.
const CONSONANT_AT = new Int8Array(128).fill(-1);
const VOWEL_AT = new Int8Array(128).fill(-1);
for (let i = 0; i < CONSONANTS.length; i++) CONSONANT_AT[CONSONANTS.charCodeAt(i)] = i;
for (let i = 0; i < VOWELS.length; i++) VOWEL_AT[VOWELS.charCodeAt(i)] = i;

export function spellWord(n: number): string {
  let k = n + 1;
  let out = '';
  while (k > 0) {
    k -= 1;
    out = (SYLLABLES[k % 100] ?? '') + out;
    k = Math.floor(k / 100);
  }
  return out;
}

/** The word index spelled by `letters`, or -1 when it is not a word of the vocabulary. */
export function readWord(letters: string, from = 0): number {
  const len = letters.length - from;
  if (len <= 0 || len % 2 !== 0 || len > 6) return -1;
  let k = 0;
  for (let i = from; i < letters.length; i += 2) {
    const a = letters.charCodeAt(i);
    const b = letters.charCodeAt(i + 1);
    const c = a < 128 ? (CONSONANT_AT[a] ?? -1) : -1;
    const v = b < 128 ? (VOWEL_AT[b] ?? -1) : -1;
    if (c < 0 || v < 0) return -1;
    k = k * 100 + c * 5 + v + 1;
  }
  const n = k - 1;
  return n < WORD_COUNT ? n : -1;
}

const WORD_TEXT: string[] = Array.from({ length: WORD_COUNT }, (_, n) => ' ' + spellWord(n));

export function wordTokenId(n: number): number {
  return WORD_BASE + (n % WORD_COUNT);
}

export function isSpecialToken(id: number): boolean {
  return id >= 0 && id < BYTE_BASE;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PIECE = /<\|(?:endoftext|system|user|assistant)\|>| [a-z]+|[^ <]+| |</gy;

function pushBytes(out: number[], piece: string): void {
  for (const b of encoder.encode(piece)) out.push(BYTE_BASE + b);
}

export function encode(text: string): number[] {
  const out: number[] = [];
  PIECE.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = PIECE.exec(text)) !== null) {
    const piece = m[0];
    if (piece.startsWith('<|')) {
      out.push(SPECIAL_TOKENS.indexOf(piece as (typeof SPECIAL_TOKENS)[number]));
    } else if (piece.length > 1 && piece.charCodeAt(0) === 32) {
      const n = readWord(piece, 1);
      if (n >= 0) out.push(WORD_BASE + n);
      else pushBytes(out, piece);
    } else {
      pushBytes(out, piece);
    }
  }
  return out;
}

/** Decode ids; ids outside the vocabulary are dropped. */
export function decode(ids: readonly number[], skipSpecialTokens = false): string {
  let text = '';
  let bytes: number[] = [];
  const flush = (): void => {
    if (bytes.length > 0) text += decoder.decode(Uint8Array.from(bytes));
    bytes = [];
  };
  for (const id of ids) {
    if (id >= WORD_BASE && id < VOCAB_SIZE) {
      flush();
      text += WORD_TEXT[id - WORD_BASE] ?? '';
    } else if (id >= BYTE_BASE && id < WORD_BASE) {
      bytes.push(id - BYTE_BASE);
    } else if (isSpecialToken(id)) {
      flush();
      if (!skipSpecialTokens) text += SPECIAL_TOKENS[id] ?? '';
    }
  }
  flush();
  return text;
}

/** 32-bit FNV-1a over token ids, the prompt's fingerprint for generation. */
export function hashTokens(ids: readonly number[], seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (const id of ids) {
    h ^= id & 0xffff;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= id >>> 16;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** Output token ids for a prompt: word ids only, never EOS. */
export function generateTokens(promptIds: readonly number[], seed: number, count: number): number[] {
  const base = hashTokens(promptIds, seed | 0);
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++)
    out[i] = WORD_BASE + (mix32(base + Math.imul(i + 1, 0x9e3779b9)) % WORD_COUNT);
  return out;
}
