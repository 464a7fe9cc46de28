import { describe, expect, it } from 'vitest';
import { computeUncachedPriority, isLowValuesFirst } from './uncached-priority.ts';

describe('computeUncachedPriority', () => {
  it.each([
    ['log2', [0, 1, 2, 3, 4, 1023, 1024], [0, 0, 1, 1, 2, 9, 10]],
    ['log8', [1, 7, 8, 63, 64, 511, 512, 4096], [0, 0, 1, 1, 2, 2, 3, 4]],
    ['exact', [0, 1, 250, 9000], [1, 1, 250, 9000]],
  ] as const)('%s: fewer uncached tokens, a lower value (served first)', (bucketing, tokens, want) => {
    expect(isLowValuesFirst(bucketing)).toBe(true);
    expect(tokens.map((t) => computeUncachedPriority(t, bucketing))).toEqual(want);
  });

  it("two: the product's stamp, a higher value (served first under SGLang's default sign)", () => {
    expect(isLowValuesFirst('two')).toBe(false);
    expect([1, 2047, 2048, 90_000].map((t) => computeUncachedPriority(t, 'two'))).toEqual([1, 1, 0, 0]);
  });
});
