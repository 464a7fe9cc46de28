import { describe, expect, it } from 'vitest';
import { computeUncachedPriority } from './uncached-priority.ts';

describe('computeUncachedPriority', () => {
  it.each([
    ['log2', [0, 1, 2, 3, 4, 1023, 1024], [0, 0, 1, 1, 2, 9, 10]],
    ['log8', [1, 7, 8, 63, 64, 511, 512, 4096], [0, 0, 1, 1, 2, 2, 3, 4]],
    ['exact', [0, 1, 250, 9000], [1, 1, 250, 9000]],
    ['two', [1, 2047, 2048, 90_000], [0, 0, 1, 1]],
  ] as const)('%s: fewer uncached tokens, a lower value (served first)', (bucketing, tokens, want) => {
    expect(tokens.map((t) => computeUncachedPriority(t, bucketing))).toEqual(want);
  });
});
