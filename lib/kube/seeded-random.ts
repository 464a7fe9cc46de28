// A seeded PRNG for whatever must replay identically from its seed: a qualification's
// generated workload and bootstrap interval (reproducible from the stored record), and the
// tests' property loops.

/** mulberry32: a small, fast, seedable PRNG; uniform in [0, 1). */
export function createSeededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
