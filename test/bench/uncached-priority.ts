// What-if (issue 31, ADR 0056; not adopted): the priority a gateway would stamp
// on a request for SGLang's priority scheduling (--enable-priority-scheduling
// --schedule-low-priority-values-first), from the uncached part of its prompt on
// the endpoint it picked: fewer uncached tokens, a lower value, served first.
// Figures: docs/benchmarks.md, "Tried, not merged: the runtime orders its own
// queue by a stamped priority".
// Pure.

export const UNCACHED_BUCKETINGS = ['log2', 'log8', 'exact', 'two'] as const;
export type UncachedBucketing = (typeof UNCACHED_BUCKETINGS)[number];

/** What `two` serves first: a prompt whose uncached part is a conversation's turn, not a document. */
export const SHORT_UNCACHED_TOKENS = 2048;

export const isUncachedBucketing = (s: string): s is UncachedBucketing =>
  (UNCACHED_BUCKETINGS as readonly string[]).includes(s);

/**
 * - log2: one bucket per doubling (1, 2-3, 4-7, ...): about 15 values on long prompts.
 * - log8: one per factor of 8 (under 8, under 64, under 512, under 4,096, ...): a few.
 * - exact: the token count itself, shortest-first within the runtime's queue.
 * - two: under SHORT_UNCACHED_TOKENS first, the rest after, each in arrival order.
 */
export function computeUncachedPriority(uncachedTokens: number, bucketing: UncachedBucketing): number {
  const n = Math.max(1, Math.floor(uncachedTokens));
  switch (bucketing) {
    case 'log2':
      return Math.floor(Math.log2(n));
    case 'log8':
      return Math.floor(Math.log2(n) / 3);
    case 'exact':
      return n;
    case 'two':
      return n < SHORT_UNCACHED_TOKENS ? 0 : 1;
  }
}
