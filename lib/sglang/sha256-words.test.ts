import { hash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { digestWords, sha256Words } from './sha256-words.ts';

describe('sha256Words', () => {
  it("equals node:crypto's SHA-256 of the same big-endian bytes, at every padding boundary", () => {
    let seed = 256;
    const random = (): number => (seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
    // 0 to 40 words: one, two and three blocks, and each length where the padding spills into the next block.
    for (let count = 0; count <= 40; count++) {
      for (let round = 0; round < 4; round++) {
        const words = Int32Array.from({ length: count + 3 }, () => (random() * 2 ** 32) | 0);
        const bytes = Buffer.alloc(count * 4);
        for (let i = 0; i < count; i++) bytes.writeInt32BE(words[i] ?? 0, i * 4);
        sha256Words(words, count);
        const got = Buffer.alloc(32);
        digestWords.forEach((w, i) => got.writeInt32BE(w, i * 4));
        expect(got.toString('hex'), `${count} words`).toBe(hash('sha256', bytes, 'hex'));
      }
    }
  });
});
