import { describe, expect, it } from 'vitest';
import { VOCAB_SIZE, WORD_BASE, decode, encode, generateTokens, readWord, spellWord } from './tokenizer.ts';

describe('tokenizer', () => {
  it.each([
    [0, 'ba'],
    [1, 'be'],
    [99, 'zu'],
    [100, 'baba'],
    [10099, 'zuzu'],
    [10100, 'bababa'],
  ])('spells word %i as %s and reads it back', (n, word) => {
    expect(spellWord(n)).toBe(word);
    expect(readWord(word)).toBe(n);
  });

  it('rejects letters that are not a vocabulary word', () => {
    expect(readWord('hello')).toBe(-1);
    expect(readWord('zuzuzu')).toBe(-1); // beyond the vocabulary
  });

  it('maps N space-prefixed words to exactly N tokens', () => {
    const words = Array.from({ length: 512 }, (_, i) => ' ' + spellWord(i * 37));
    const ids = encode(words.join(''));
    expect(ids).toHaveLength(512);
    expect(ids[0]).toBe(WORD_BASE);
  });

  it.each(['Hello, world!', ' ba be bi', 'naïve 日本 <|user|> hi <| x', '', '   ', 'ba', '<|assistant|>'])(
    'round-trips %j',
    (text) => {
      expect(decode(encode(text))).toBe(text);
    },
  );

  it('encodes special tokens and can skip them when decoding', () => {
    expect(encode('<|user|> ba<|assistant|>')).toEqual([2, WORD_BASE, 3]);
    expect(decode([2, WORD_BASE, 3], true)).toBe(' ba');
  });

  it('generates deterministic word tokens that extend with max_new_tokens', () => {
    const prompt = encode(' ba be');
    const a = generateTokens(prompt, 7, 10);
    expect(generateTokens(prompt, 7, 10)).toEqual(a);
    expect(generateTokens(prompt, 7, 4)).toEqual(a.slice(0, 4));
    expect(generateTokens(prompt, 8, 10)).not.toEqual(a);
    expect(generateTokens(encode(' bi'), 7, 10)).not.toEqual(a);
    for (const id of a) expect(id >= WORD_BASE && id < VOCAB_SIZE).toBe(true);
    expect(encode(decode(a))).toEqual(a);
  });
});

// The pattern encode() took pieces with before it became a scan (one match object and slice a word):
// the scan must cut and map every text the same way.
function encodeByPattern(text: string): number[] {
  const piece = /<\|(?:endoftext|system|user|assistant)\|>| [a-z]+|[^ <]+| |</gy;
  const specials = ['<|endoftext|>', '<|system|>', '<|user|>', '<|assistant|>'];
  const out: number[] = [];
  const bytes = (p: string): void => {
    for (const b of new TextEncoder().encode(p)) out.push(4 + b);
  };
  for (let m = piece.exec(text); m !== null; m = piece.exec(text)) {
    const p = m[0];
    if (p.startsWith('<|')) out.push(specials.indexOf(p));
    else if (p.length > 1 && p.charCodeAt(0) === 32) {
      const n = readWord(p, 1);
      if (n >= 0) out.push(WORD_BASE + n);
      else bytes(p);
    } else bytes(p);
  }
  return out;
}

describe('encode', () => {
  it('cuts every text as the pattern did: words, specials, bytes, non-ASCII', () => {
    const alphabet = [
      ' ',
      ' ',
      ' ',
      'ba',
      'ko',
      'zu',
      'x',
      'q',
      'é',
      '日',
      '<',
      '|',
      '<|user|>',
      '<|assistant|',
      'A',
      '\n',
      '🙂',
    ];
    let seed = 7;
    const random = (): number => (seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
    for (let t = 0; t < 2_000; t++) {
      const parts = Array.from(
        { length: 1 + Math.floor(random() * 30) },
        () => alphabet[Math.floor(random() * alphabet.length)],
      );
      const text = parts.join('');
      expect(encode(text), JSON.stringify(text)).toEqual(encodeByPattern(text));
    }
    expect(encode(' baba ba zuzuzu <|system|>')).toEqual(encodeByPattern(' baba ba zuzuzu <|system|>'));
  });
});
