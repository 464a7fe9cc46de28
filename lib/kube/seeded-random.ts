// A seeded PRNG for whatever must replay identically from its seed: a qualification's
// generated workload and bootstrap interval (reproducible from the stored record), and the
// tests' property loops; and a keyed draw for whatever must fall the same way for the same key
// (a session's traffic split, a replica's pick among near-equal runtimes).

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

/**
 * FNV-1a over the key's UTF-16 units, then murmur3's finaliser (FNV alone spreads keys
 * that differ only at the end, `user-17` and `user-18`, poorly), as a fraction in [0, 1).
 */
export function hashToUnit(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 2 ** 32;
}
