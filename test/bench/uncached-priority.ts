// The priority a gateway stamps on a request for SGLang's priority scheduling,
// from the uncached part of its prompt on the endpoint it picked. `two` is the
// product's stamp (gateway/src/picker/runtime-priority.ts, ADR 0057: SGLang's
// default sign, the larger value first, a tenant's priority 0); the others are
// what-ifs (issue 31, ADR 0056; not adopted) on runtimes started with
// --schedule-low-priority-values-first: fewer uncached tokens, a lower value,
// served first. Figures: docs/benchmarks.md, "Tried, not merged: the runtime
// orders its own queue by a stamped priority".
// Pure.
import { computeRuntimePriority, SHORT_UNCACHED_TOKENS } from '../../gateway/src/picker/runtime-priority.ts';

export const UNCACHED_BUCKETINGS = ['log2', 'log8', 'exact', 'two'] as const;
export type UncachedBucketing = (typeof UNCACHED_BUCKETINGS)[number];

export { SHORT_UNCACHED_TOKENS };

export const isUncachedBucketing = (s: string): s is UncachedBucketing =>
  (UNCACHED_BUCKETINGS as readonly string[]).includes(s);

/** The runtime's sign for a bucketing: `two` is the product's (larger first), the what-ifs' lower first. */
export const isLowValuesFirst = (b: UncachedBucketing): boolean => b !== 'two';

/**
 * - log2: one bucket per doubling (1, 2-3, 4-7, ...): about 15 values on long prompts.
 * - log8: one per factor of 8 (under 8, under 64, under 512, under 4,096, ...): a few.
 * - exact: the token count itself, shortest-first within the runtime's queue.
 * - two: the product's stamp for a tenant of priority 0: under SHORT_UNCACHED_TOKENS first (1),
 *   the rest after (0), each in arrival order.
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
      return computeRuntimePriority(0, n);
  }
}
