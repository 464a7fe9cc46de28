// Seeded RNG for property loops: same seed, same run.
export { createSeededRandom as createRng } from '#kube/seeded-random.ts';

export function pickInt(rng: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** A seeded shuffle (Fisher–Yates) of a copy of `items`. */
export function shuffle<T>(rng: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = pickInt(rng, 0, i);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
