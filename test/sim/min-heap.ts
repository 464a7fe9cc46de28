// A binary min-heap (LRU eviction order of the radix tree).

export class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => number;

  constructor(compare: (a: T, b: T) => number) {
    this.#less = compare;
  }

  push(item: T): void {
    const a = this.#items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ai = a[i] as T;
      const ap = a[p] as T;
      if (this.#less(ai, ap) >= 0) break;
      a[i] = ap;
      a[p] = ai;
      i = p;
    }
  }

  pop(): T | undefined {
    const a = this.#items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.#less(a[l] as T, a[m] as T) < 0) m = l;
        if (r < a.length && this.#less(a[r] as T, a[m] as T) < 0) m = r;
        if (m === i) break;
        const t = a[i] as T;
        a[i] = a[m] as T;
        a[m] = t;
        i = m;
      }
    }
    return top;
  }
}
