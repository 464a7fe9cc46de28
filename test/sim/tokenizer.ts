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

/** The word index spelled by `letters[from, end)`, or -1 when it is not a word of the vocabulary. */
export function readWord(letters: string, from = 0, end = letters.length): number {
  const len = end - from;
  if (len <= 0 || len % 2 !== 0 || len > 6) return -1;
  let k = 0;
  for (let i = from; i < end; i += 2) {
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
const SPACE = 0x20;
const LESS_THAN = 0x3c;
const LOWER_A = 0x61;
const LOWER_Z = 0x7a;

/** The bytes of `text[from, end)` as byte-fallback ids (ASCII without an encoder). */
function pushBytes(out: number[], text: string, from: number, end: number): void {
  let ascii = true;
  for (let i = from; i < end && ascii; i++) ascii = text.charCodeAt(i) < 0x80;
  if (ascii) for (let i = from; i < end; i++) out.push(BYTE_BASE + text.charCodeAt(i));
  else for (const b of encoder.encode(text.slice(from, end))) out.push(BYTE_BASE + b);
}

/** The special token's id at `text[i]` (which is '<'), or -1. */
function specialAt(text: string, i: number): number {
  for (let id = 0; id < SPECIAL_TOKENS.length; id++)
    if (text.startsWith(SPECIAL_TOKENS[id] ?? '', i)) return id;
  return -1;
}

export function encode(text: string): number[] {
  const out: number[] = [];
  encodeInto(out, text);
  return out;
}

/**
 * encode(text), appended to `out`. One scan, no match objects or slices a word (a 220 KB prompt is
 * ~45,000 words): pieces as the pattern <|special|> | " "[a-z]+ | [^ <]+ | " " | "<" takes them.
 */
export function encodeInto(out: number[], text: string): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === LESS_THAN) {
      const special = specialAt(text, i);
      if (special >= 0) {
        out.push(special);
        i += (SPECIAL_TOKENS[special] ?? '').length;
      } else {
        out.push(BYTE_BASE + LESS_THAN);
        i++;
      }
    } else if (c === SPACE) {
      let j = i + 1;
      for (let l = text.charCodeAt(j); j < n && l >= LOWER_A && l <= LOWER_Z; l = text.charCodeAt(++j));
      if (j === i + 1) out.push(BYTE_BASE + SPACE);
      else {
        const word = readWord(text, i + 1, j);
        if (word >= 0) out.push(WORD_BASE + word);
        else pushBytes(out, text, i, j);
      }
      i = j;
    } else {
      let j = i + 1;
      for (let l = text.charCodeAt(j); j < n && l !== SPACE && l !== LESS_THAN; l = text.charCodeAt(++j));
      pushBytes(out, text, i, j);
      i = j;
    }
  }
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
