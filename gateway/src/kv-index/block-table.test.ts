import { describe, expect, it } from 'vitest';
import { createSeededRandom } from '#kube/seeded-random.ts';
import { BlockTable, NO_ENTRY } from './block-table.ts';

type Key = readonly [hi: number, lo: number];
const id = ([hi, lo]: Key): string => `${hi}:${lo}`;

/** Keys in first-stored order, as the table's eviction order sees them. */
function drainOrder(t: BlockTable): string[] {
  const out: string[] = [];
  for (let e = t.oldest(); e !== NO_ENTRY; e = t.oldest()) {
    out.push(id([t.hiOf(e), t.loOf(e)]));
    t.delete(e);
  }
  return out;
}

describe('BlockTable', () => {
  it('finds, updates and forgets keys as a Map does, in first-stored order, through growth and reuse', () => {
    const random = createSeededRandom(43);
    const t = new BlockTable();
    const model = new Map<string, { key: Key; media: number }>();
    // Few distinct halves: many keys share a high or a low half, and the table grows past its first size.
    const pick = (): Key => [(random() * 64) | 0, ((random() * 4096) | 0) - 2048];
    const wrong: string[] = [];
    for (let step = 0; step < 60_000; step++) {
      const key = pick();
      const e = t.find(key[0], key[1]);
      const held = model.get(id(key));
      if ((e !== NO_ENTRY) !== (held !== undefined)) wrong.push(`step ${step}: ${id(key)} found ${e}`);
      const r = random();
      if (r < 0.55 && e === NO_ENTRY) {
        const media = 1 + ((random() * 15) | 0);
        t.setMedia(t.insert(key[0], key[1]), media);
        model.set(id(key), { key, media });
      } else if (r < 0.8 && e !== NO_ENTRY) {
        t.delete(e);
        model.delete(id(key));
      } else if (r < 0.9 && e !== NO_ENTRY) {
        // An update keeps the key's place in the order, as Map.get(k).x = ... does.
        t.setMedia(e, 1);
        if (held) held.media = 1;
      } else if (r < 0.92) {
        const oldest = t.oldest();
        const first = model.keys().next();
        if ((oldest === NO_ENTRY) !== (first.done === true)) wrong.push(`step ${step}: oldest ${oldest}`);
        if (oldest !== NO_ENTRY && !first.done) {
          const got = id([t.hiOf(oldest), t.loOf(oldest)]);
          if (got !== first.value) wrong.push(`step ${step}: oldest ${got}, not ${first.value}`);
          t.delete(oldest);
          model.delete(first.value);
        }
      }
      if (t.size !== model.size) wrong.push(`step ${step}: size ${t.size}, not ${model.size}`);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(model.size).toBeGreaterThan(1024);
    for (const { key, media } of model.values()) expect(t.mediaOf(t.find(key[0], key[1]))).toBe(media);
    expect(drainOrder(t)).toEqual([...model.keys()]);
    expect(t.size).toBe(0);
  });

  it('keeps parents and the implied flag per entry, and clear() forgets everything', () => {
    const t = new BlockTable();
    const a = t.insert(-1, 0x7fff_ffff);
    const b = t.insert(0, -0x8000_0000);
    t.setParent(b, -1, 0x7fff_ffff);
    t.setImplied(a, true);
    expect([t.hasParent(a), t.hasParent(b), t.parentHiOf(b), t.parentLoOf(b)]).toEqual([
      false,
      true,
      -1,
      0x7fff_ffff,
    ]);
    expect([t.isImplied(a), t.isImplied(b)]).toEqual([true, false]);
    t.clearParent(b);
    t.setImplied(a, false);
    expect([t.hasParent(b), t.isImplied(a)]).toEqual([false, false]);
    t.clear();
    expect([t.size, t.find(-1, 0x7fff_ffff), t.oldest()]).toEqual([0, NO_ENTRY, NO_ENTRY]);
  });
});
