// How long an endpoint's answers run, learned from the output lengths its KV
// events measured (kv-index/output-attribution.ts), and what a running answer
// has still to come given how far it got (ADR 0049).
//
// An answer stops on its own (an end-of-sequence, a stop string) or at its
// max_tokens. One that reached its max_tokens says only that it would have run
// at least that long: a censored observation. The survival curve
//   S(k) = P(an answer runs past k tokens)
// is the Kaplan-Meier product over the last WINDOW observations, each answer
// that stopped on its own a death at its length, each capped one censored
// there; then, for an answer capped at c that has streamed s tokens,
//   expected(c)     = E[min(L, c)]           = sum_{k<c} S(k)
//   remaining(s, c) = E[min(L, c) - s | L > s] = (sum_{s<=k<c} S(k)) / S(s)
// Where every answer ran to its cap (as in a workload whose max_tokens is its
// length), S stays 1 and remaining(s, c) = c - s: the time estimate as before.
// Where answers stop on their own long before their cap, the prediction is what
// such answers really run, and an answer that has run long is expected to run
// on as the longer ones did, not to be nearly done. Past the longest answer
// seen, S keeps its last value up to the cap (no cap: answers end there).

/** Observations the curve is drawn from: the latest this many. */
const WINDOW = 256;
/** Before this many observations the model says nothing. */
const MIN_OBSERVATIONS = 8;

interface Segment {
  /** From this length on... */
  readonly from: number;
  /** ...S(k) is this, up to the next segment's from. */
  readonly survival: number;
  /** sum_{j < from} S(j). */
  readonly area: number;
}

export class OutputLengthModel {
  /** Ring of the latest observations: length, and whether the answer stopped on its own. */
  readonly #lengths = new Float64Array(WINDOW);
  readonly #stopped = new Uint8Array(WINDOW);
  #count = 0;
  #next = 0;
  #curve: Segment[] | undefined;
  /** The longest answer in the window. */
  #horizon = 0;

  /**
   * One answer's measured output, within [min, max] tokens; `cap`: its max_tokens. It stopped on its
   * own unless it may have reached its cap (censored at what it surely ran).
   */
  learn(min: number, max: number, cap?: number): void {
    if (!(min >= 1) || !(max >= min)) return;
    const capped = cap !== undefined && max >= cap;
    const length = capped ? Math.min(cap, min) : Math.round((min + max) / 2);
    this.#lengths[this.#next] = length;
    this.#stopped[this.#next] = capped ? 0 : 1;
    this.#next = (this.#next + 1) % WINDOW;
    this.#count = Math.min(WINDOW, this.#count + 1);
    this.#curve = undefined;
  }

  get observations(): number {
    return this.#count;
  }

  /** E[min(L, cap)]: the output an answer capped at `cap` (none: unbounded) is predicted to run. */
  expected(cap?: number): number | undefined {
    return this.remaining(0, cap);
  }

  /** E[min(L, cap) - s | L > s] for an answer that has streamed `streamed` tokens. */
  remaining(streamed: number, cap?: number): number | undefined {
    if (this.#count < MIN_OBSERVATIONS) return undefined;
    const curve = (this.#curve ??= this.#build());
    const end = cap ?? this.#horizon;
    const s = Math.max(0, Math.floor(streamed));
    if (s >= end) return 0;
    const at = segmentAt(curve, s);
    if (at.survival <= 0) return 0;
    return (areaTo(curve, end) - areaTo(curve, s)) / at.survival;
  }

  #build(): Segment[] {
    const order = Array.from({ length: this.#count }, (_, i) => i).sort(
      (a, b) => (this.#lengths[a] ?? 0) - (this.#lengths[b] ?? 0),
    );
    this.#horizon = this.#lengths[order.at(-1) ?? 0] ?? 0;
    const curve: Segment[] = [{ from: 0, survival: 1, area: 0 }];
    let atRisk = this.#count;
    let survival = 1;
    for (let i = 0; i < order.length;) {
      const length = this.#lengths[order[i] ?? 0] ?? 0;
      let deaths = 0;
      let leaving = 0;
      for (; i < order.length && this.#lengths[order[i] ?? 0] === length; i++, leaving++)
        deaths += this.#stopped[order[i] ?? 0] ?? 0;
      // An answer of `length` tokens ran past length - 1 and not past length: S drops at `length`.
      if (deaths > 0) {
        const last = curve.at(-1) as Segment;
        const area = last.area + (length - last.from) * last.survival;
        survival *= 1 - deaths / atRisk;
        curve.push({ from: length, survival, area });
      }
      atRisk -= leaving;
    }
    return curve;
  }
}

/** The segment holding length `k` (the curve starts at 0 and is sorted by from). */
function segmentAt(curve: readonly Segment[], k: number): Segment {
  let lo = 0;
  let hi = curve.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((curve[mid] as Segment).from <= k) lo = mid;
    else hi = mid - 1;
  }
  return curve[lo] as Segment;
}

/** sum_{j < k} S(j). */
function areaTo(curve: readonly Segment[], k: number): number {
  const seg = segmentAt(curve, k);
  return seg.area + (k - seg.from) * seg.survival;
}
