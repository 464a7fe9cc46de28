// The KV index's storage: SGLang's int64 block hashes, each held as two
// int32 halves (high, low) in typed arrays, with the block's tiers, its
// parent and whether it is only implied (block-index.ts), in first-stored
// order. ADR 0045.
//
// Why not a Map<bigint, entry>: a 220 KB prompt stores ~2,800 pages at page
// size 16, and every page was a bigint key, an entry object and a Map slot
// (94-117 bytes a block, all of it for the collector to trace), and each
// lookup hashed and compared a heap bigint. Here a block is ~34 bytes in
// arrays the collector never walks, and a lookup is integer arithmetic.
//
// - Entries live in a slab (index = entry id, stable while the block is held;
//   freed ids are reused). A doubly linked list through the slab keeps
//   first-stored order, as a Map's iteration order did: evictOldest takes the
//   head; updating a held block does not move it; a block removed and stored
//   again goes to the tail.
// - Buckets: open addressing, linear probing, at most half full; deletion
//   shifts the following run back (no tombstones). The bucket of a key is a
//   seeded mix of both halves: the hashes come from the runtime, and a runtime
//   that chose colliding hashes would otherwise make every lookup a long scan.

export const NO_ENTRY = -1;

const INITIAL_CAPACITY = 1024;
const FLAG_PARENT = 1;
const FLAG_IMPLIED = 2;

// A random seed per process: which keys share a bucket cannot be chosen from outside.
const SEED = (Math.random() * 0x1_0000_0000) | 0;

/** The bucket mix of (hi, lo): murmur3's 32-bit body and finaliser over two words. */
function mix(hi: number, lo: number): number {
  let h = SEED;
  let k = Math.imul(lo, 0xcc9e2d51);
  k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  h ^= k;
  h = (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0;
  k = Math.imul(hi, 0xcc9e2d51);
  k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  h ^= k;
  h = (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0;
  h ^= 8;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

export class BlockTable {
  #hi = new Int32Array(INITIAL_CAPACITY);
  #lo = new Int32Array(INITIAL_CAPACITY);
  #parentHi = new Int32Array(INITIAL_CAPACITY);
  #parentLo = new Int32Array(INITIAL_CAPACITY);
  #media = new Uint8Array(INITIAL_CAPACITY);
  #flags = new Uint8Array(INITIAL_CAPACITY);
  #prev = new Int32Array(INITIAL_CAPACITY);
  #next = new Int32Array(INITIAL_CAPACITY);
  /** entry + 1; 0 is an empty bucket. */
  #buckets = new Int32Array(INITIAL_CAPACITY * 2);
  #mask = INITIAL_CAPACITY * 2 - 1;
  #head = NO_ENTRY;
  #tail = NO_ENTRY;
  /** Freed entries, linked through #next. */
  #free = NO_ENTRY;
  /** Entries ever used in the slab (ids below it were handed out). */
  #used = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** The entry holding (hi, lo), or NO_ENTRY. */
  find(hi: number, lo: number): number {
    const buckets = this.#buckets;
    const mask = this.#mask;
    for (let b = mix(hi, lo) & mask; ; b = (b + 1) & mask) {
      const slot = buckets[b] ?? 0;
      if (slot === 0) return NO_ENTRY;
      const e = slot - 1;
      if (this.#lo[e] === lo && this.#hi[e] === hi) return e;
    }
  }

  /** A new entry for (hi, lo), which the table must not hold, last in order; tiers 0, no parent. */
  insert(hi: number, lo: number): number {
    if (this.#free === NO_ENTRY && this.#used === this.#hi.length) this.#growSlab();
    if ((this.#size + 1) * 2 > this.#buckets.length) this.#rehash(this.#buckets.length * 2);
    let e: number;
    if (this.#free !== NO_ENTRY) {
      e = this.#free;
      this.#free = this.#next[e] ?? NO_ENTRY;
    } else e = this.#used++;
    this.#hi[e] = hi;
    this.#lo[e] = lo;
    this.#media[e] = 0;
    this.#flags[e] = 0;
    this.#prev[e] = this.#tail;
    this.#next[e] = NO_ENTRY;
    if (this.#tail === NO_ENTRY) this.#head = e;
    else this.#next[this.#tail] = e;
    this.#tail = e;
    this.#place(e);
    this.#size++;
    return e;
  }

  /** Drops entry `e` (its id may be handed out again). */
  delete(e: number): void {
    this.#unplace(e);
    const prev = this.#prev[e] ?? NO_ENTRY;
    const next = this.#next[e] ?? NO_ENTRY;
    if (prev === NO_ENTRY) this.#head = next;
    else this.#next[prev] = next;
    if (next === NO_ENTRY) this.#tail = prev;
    else this.#prev[next] = prev;
    this.#next[e] = this.#free;
    this.#free = e;
    this.#size--;
  }

  /** The first-stored entry still held, or NO_ENTRY. */
  oldest(): number {
    return this.#head;
  }

  /** Empties the table and gives its memory back. */
  clear(): void {
    this.#hi = new Int32Array(INITIAL_CAPACITY);
    this.#lo = new Int32Array(INITIAL_CAPACITY);
    this.#parentHi = new Int32Array(INITIAL_CAPACITY);
    this.#parentLo = new Int32Array(INITIAL_CAPACITY);
    this.#media = new Uint8Array(INITIAL_CAPACITY);
    this.#flags = new Uint8Array(INITIAL_CAPACITY);
    this.#prev = new Int32Array(INITIAL_CAPACITY);
    this.#next = new Int32Array(INITIAL_CAPACITY);
    this.#buckets = new Int32Array(INITIAL_CAPACITY * 2);
    this.#mask = INITIAL_CAPACITY * 2 - 1;
    this.#head = this.#tail = this.#free = NO_ENTRY;
    this.#used = this.#size = 0;
  }

  hiOf(e: number): number {
    return this.#hi[e] ?? 0;
  }

  loOf(e: number): number {
    return this.#lo[e] ?? 0;
  }

  /** Bit i set: STORAGE_MEDIA[i] holds the block. */
  mediaOf(e: number): number {
    return this.#media[e] ?? 0;
  }

  setMedia(e: number, media: number): void {
    this.#media[e] = media;
  }

  hasParent(e: number): boolean {
    return ((this.#flags[e] ?? 0) & FLAG_PARENT) !== 0;
  }

  parentHiOf(e: number): number {
    return this.#parentHi[e] ?? 0;
  }

  parentLoOf(e: number): number {
    return this.#parentLo[e] ?? 0;
  }

  setParent(e: number, hi: number, lo: number): void {
    this.#parentHi[e] = hi;
    this.#parentLo[e] = lo;
    this.#flags[e] = (this.#flags[e] ?? 0) | FLAG_PARENT;
  }

  clearParent(e: number): void {
    this.#flags[e] = (this.#flags[e] ?? 0) & ~FLAG_PARENT;
  }

  isImplied(e: number): boolean {
    return ((this.#flags[e] ?? 0) & FLAG_IMPLIED) !== 0;
  }

  setImplied(e: number, implied: boolean): void {
    const f = this.#flags[e] ?? 0;
    this.#flags[e] = implied ? f | FLAG_IMPLIED : f & ~FLAG_IMPLIED;
  }

  #place(e: number): void {
    const buckets = this.#buckets;
    const mask = this.#mask;
    let b = mix(this.#hi[e] ?? 0, this.#lo[e] ?? 0) & mask;
    while (buckets[b] !== 0) b = (b + 1) & mask;
    buckets[b] = e + 1;
  }

  /** Removes `e`'s bucket, shifting back the entries after it that probed past it. */
  #unplace(e: number): void {
    const buckets = this.#buckets;
    const mask = this.#mask;
    let hole = mix(this.#hi[e] ?? 0, this.#lo[e] ?? 0) & mask;
    while (buckets[hole] !== e + 1) hole = (hole + 1) & mask;
    for (let b = (hole + 1) & mask; ; b = (b + 1) & mask) {
      const slot = buckets[b] ?? 0;
      if (slot === 0) break;
      const home = mix(this.#hi[slot - 1] ?? 0, this.#lo[slot - 1] ?? 0) & mask;
      // The entry at b may move to the hole unless its home lies cyclically in (hole, b].
      const stays = hole <= b ? home > hole && home <= b : home > hole || home <= b;
      if (stays) continue;
      buckets[hole] = slot;
      hole = b;
    }
    buckets[hole] = 0;
  }

  #growSlab(): void {
    const n = this.#hi.length * 2;
    this.#hi = grownInt32(this.#hi, n);
    this.#lo = grownInt32(this.#lo, n);
    this.#parentHi = grownInt32(this.#parentHi, n);
    this.#parentLo = grownInt32(this.#parentLo, n);
    this.#media = grownUint8(this.#media, n);
    this.#flags = grownUint8(this.#flags, n);
    this.#prev = grownInt32(this.#prev, n);
    this.#next = grownInt32(this.#next, n);
  }

  #rehash(buckets: number): void {
    this.#buckets = new Int32Array(buckets);
    this.#mask = buckets - 1;
    for (let e = this.#head; e !== NO_ENTRY; e = this.#next[e] ?? NO_ENTRY) this.#place(e);
  }
}

function grownInt32(a: Int32Array, n: number): Int32Array<ArrayBuffer> {
  const b = new Int32Array(n);
  b.set(a);
  return b;
}

function grownUint8(a: Uint8Array, n: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(n);
  b.set(a);
  return b;
}
