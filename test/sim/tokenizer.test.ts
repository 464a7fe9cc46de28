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
