// Per-request dumps of the virtual tier bench (`bench-tier-virtual.ts --dump-requests DIR`) and
// their reading: one JSONL line per request (virtual-tier.ts writes them), and a comparison of
// two rows of the same trace request by request (e.g. R=8 against R=1): which requests got
// slower, why by their parts (gateway hold, runtime queue, prefill batch; another runtime, a
// lower hit), and which of them moved the TTFT median. Pure; the CLI reads files and prints
// (dump-compare.ts). Replaces the throwaway scripts that read the R=1 median (ADR 0056).

import { z } from 'zod';
import { percentile } from './replay-stats.ts';

/** What the deciding replica knew of one runtime, or what was true of it then. */
const EndpointSeen = z.object({
  /** The prompt's prefix the runtime held (KV index, device tokens). */
  cached: z.number(),
  /** Predicted uncached prompt tokens not yet past prefill: the replica's own plus its peers' as heard. */
  backlog: z.number(),
  /** Requests in flight: the replica's own plus its peers' as heard. */
  inFlight: z.number(),
  /** The runtime's pushed counts (as refreshed), absent when not used. */
  waitingUncached: z.number().optional(),
  running: z.number().optional(),
});
export type EndpointSeen = z.infer<typeof EndpointSeen>;

/** The tier's actual state of one runtime at the decision: every replica's shares, the engine's queue. */
const EndpointTruth = z.object({
  backlog: z.number(),
  inFlight: z.number(),
  waiting: z.number(),
  running: z.number(),
});
export type EndpointTruth = z.infer<typeof EndpointTruth>;

/** The decision's part of a line: who picked what, by which rule, knowing what. */
const DumpDecision = z.object({
  /** The request's index in the trace (the same request in every row and draw). */
  i: z.number().int(),
  id: z.string(),
  /** Virtual ms the request reached its replica. */
  arrivalMs: z.number(),
  replica: z.number().int(),
  runtime: z.string(),
  /** The policy's rule and costs (per runtime, in `runtimes` order), when it explains its picks. */
  reason: z.string().optional(),
  cost: z.array(z.number()).optional(),
  /** The tier standing the replica decided with (absent with one replica). */
  unheardMs: z.number().optional(),
  unheardPicks: z.number().optional(),
  bursty: z.boolean().optional(),
  runtimes: z.array(z.string()),
  knew: z.array(EndpointSeen),
  truth: z.array(EndpointTruth),
});
export type DumpDecision = z.infer<typeof DumpDecision>;

export const DumpLine = DumpDecision.extend({
  /** Held by the policy before select (holdMs) and by the gateway queue what-if, ms. */
  holdMs: z.number(),
  /** Virtual ms the runtime received it, started its prefill (admitted), produced its first token. */
  sentMs: z.number(),
  prefillStartMs: z.number(),
  firstTokenMs: z.number(),
  promptTokens: z.number().int(),
  cachedTokens: z.number().int(),
  outputTokens: z.number().int(),
  ttftMs: z.number(),
  e2eMs: z.number(),
});
export type DumpLine = z.infer<typeof DumpLine>;

/** A dump file's lines, each checked; the first bad line is the error. */
export function parseDump(text: string): { ok: true; lines: DumpLine[] } | { ok: false; error: string } {
  const lines: DumpLine[] = [];
  const raw = text.split('\n');
  for (let n = 0; n < raw.length; n++) {
    const s = raw[n]?.trim();
    if (!s) continue;
    let json: unknown;
    try {
      json = JSON.parse(s);
    } catch {
      return { ok: false, error: `line ${n + 1}: not JSON` };
    }
    const parsed = DumpLine.safeParse(json);
    if (!parsed.success) return { ok: false, error: `line ${n + 1}: ${parsed.error.issues[0]?.message}` };
    lines.push(parsed.data);
  }
  return { ok: true, lines };
}

/** A request's prefill batch: the requests one runtime prefilled in the same step as it. */
export interface Batch {
  readonly size: number;
  /** Uncached prompt tokens of the whole batch. */
  readonly uncached: number;
  /** The step's length, ms. */
  readonly ms: number;
  /** The trace indices of the requests in it. */
  readonly members: readonly number[];
}

export function uncachedOf(l: DumpLine): number {
  return l.promptTokens - l.cachedTokens;
}

/** Each request's prefill batch, by index: requests of one runtime whose first tokens came together. */
export function findBatches(lines: readonly DumpLine[]): Map<number, Batch> {
  const groups = new Map<string, DumpLine[]>();
  for (const l of lines) {
    const k = `${l.runtime}@${l.firstTokenMs}`;
    const g = groups.get(k);
    if (g) g.push(l);
    else groups.set(k, [l]);
  }
  const out = new Map<number, Batch>();
  for (const g of groups.values()) {
    const first = g[0] as DumpLine;
    const batch: Batch = {
      size: g.length,
      uncached: g.reduce((s, l) => s + uncachedOf(l), 0),
      ms: first.firstTokenMs - Math.max(...g.map((l) => l.prefillStartMs)),
      members: g.map((l) => l.i),
    };
    for (const l of g) out.set(l.i, batch);
  }
  return out;
}

/** The part of a request's TTFT that grew most between two rows. */
export type SlowPart = 'hold' | 'queue' | 'batch';

/** One request in both rows: how its TTFT changed, and by which part. */
export interface RequestDelta {
  readonly i: number;
  readonly ttftA: number;
  readonly ttftB: number;
  /** ttftB - ttftA, and its parts: gateway hold, wait in the runtime's queue, the prefill step. */
  readonly delta: number;
  readonly holdDelta: number;
  readonly queueDelta: number;
  readonly batchDelta: number;
  readonly part: SlowPart;
  /** B sent it to another runtime than A did. */
  readonly otherRuntime: boolean;
  /** B's hit was smaller than A's (tokens). */
  readonly lostHit: number;
  readonly batchSizeA: number;
  readonly batchSizeB: number;
  /**
   * B's batch-mates that A prefilled elsewhere or at another step: the requests whose placement
   * in B made this one's prefill longer; the largest uncached first.
   */
  readonly newMates: readonly number[];
  /**
   * B's batch-mates that reached another replica at the same instant as this one: picks made on
   * one view, none in the others' (the peers' picks in transit; ADR 0046).
   */
  readonly sameInstantMates: number;
}

function queueOf(l: DumpLine): number {
  return l.prefillStartMs - l.sentMs;
}

/** Each request in both rows, matched by trace index, its TTFT's change split into its parts. */
export function compareRequests(a: readonly DumpLine[], b: readonly DumpLine[]): RequestDelta[] {
  const batchesA = findBatches(a);
  const batchesB = findBatches(b);
  const byIndex = new Map(a.map((l) => [l.i, l]));
  const byIndexB = new Map(b.map((l) => [l.i, l]));
  const out: RequestDelta[] = [];
  for (const lb of b) {
    const la = byIndex.get(lb.i);
    if (!la) continue;
    const ba = batchesA.get(la.i) as Batch;
    const bb = batchesB.get(lb.i) as Batch;
    const holdDelta = lb.holdMs - la.holdMs;
    const queueDelta = queueOf(lb) - queueOf(la);
    const batchDelta = lb.firstTokenMs - lb.prefillStartMs - (la.firstTokenMs - la.prefillStartMs);
    const parts: [SlowPart, number][] = [
      ['hold', holdDelta],
      ['queue', queueDelta],
      ['batch', batchDelta],
    ];
    const part = parts.reduce((m, p) => (p[1] > m[1] ? p : m))[0];
    out.push({
      i: lb.i,
      ttftA: la.ttftMs,
      ttftB: lb.ttftMs,
      delta: lb.ttftMs - la.ttftMs,
      holdDelta,
      queueDelta,
      batchDelta,
      part,
      otherRuntime: la.runtime !== lb.runtime,
      lostHit: Math.max(0, la.cachedTokens - lb.cachedTokens),
      batchSizeA: ba.size,
      batchSizeB: bb.size,
      newMates: bb.members
        .filter((m) => m !== lb.i && !ba.members.includes(m))
        .sort((x, y) => uncachedOf(byIndexB.get(y) as DumpLine) - uncachedOf(byIndexB.get(x) as DumpLine)),
      sameInstantMates: bb.members.filter((m) => {
        const mate = byIndexB.get(m) as DumpLine;
        return m !== lb.i && mate.arrivalMs === lb.arrivalMs && mate.replica !== lb.replica;
      }).length,
    });
  }
  return out;
}

/** Where a slower request's time went: its runtime (same as A's or not), hit, and the part that grew. */
export function causeOf(d: RequestDelta): string {
  return `${d.otherRuntime ? 'other runtime' : 'same runtime'}, ${d.lostHit > 0 ? 'lower hit' : 'same hit'}, ${d.part}`;
}

export interface CauseGroup {
  readonly cause: string;
  readonly count: number;
  /** Sum of the TTFT added, ms. */
  readonly addedMs: number;
}

/** Requests slower in B by more than `minMs`, grouped by cause, most added time first. */
export function groupSlower(deltas: readonly RequestDelta[], minMs: number): CauseGroup[] {
  const groups = new Map<string, { count: number; addedMs: number }>();
  for (const d of deltas) {
    if (!(d.delta > minMs)) continue;
    const c = causeOf(d);
    const g = groups.get(c) ?? { count: 0, addedMs: 0 };
    g.count++;
    g.addedMs += d.delta;
    groups.set(c, g);
  }
  return [...groups].map(([cause, g]) => ({ cause, ...g })).sort((x, y) => y.addedMs - x.addedMs);
}

/**
 * What moved B's TTFT median above A's: the requests under A's median in A and above it in B
 * (`up`) against those that went the other way (`down`). B's median is above A's exactly when
 * more went up than down; `up` are the requests to read.
 */
export function medianCrossers(deltas: readonly RequestDelta[]): {
  medianA: number;
  medianB: number;
  up: RequestDelta[];
  down: RequestDelta[];
} {
  const medianA = percentile(
    deltas.map((d) => d.ttftA),
    50,
  );
  const medianB = percentile(
    deltas.map((d) => d.ttftB),
    50,
  );
  return {
    medianA,
    medianB,
    up: deltas.filter((d) => d.ttftA <= medianA && d.ttftB > medianA),
    down: deltas.filter((d) => d.ttftA > medianA && d.ttftB <= medianA),
  };
}

/** Where the deciding replica's view of the runtime it chose differed from the tier's truth. */
export interface ViewGap {
  /** Backlog tokens on the chosen runtime the replica did not know of (truth - knew; < 0: it overcounted). */
  readonly unseenBacklog: number;
  /** In-flight requests on it the replica did not know of. */
  readonly unseenInFlight: number;
  /** The chosen runtime was the cheapest by the truth's backlog (with the replica's own uncached costs). */
  readonly cheapestByTruth: boolean;
}

/**
 * The chosen runtime as the replica saw it against the truth: the backlog it missed, and whether
 * the pick would still be cheapest with the true backlog in place of the one it knew (cost minus
 * known backlog plus true backlog; only where the policy gave its costs).
 */
export function viewGapOf(l: DumpLine): ViewGap {
  const w = l.runtimes.indexOf(l.runtime);
  const knew = l.knew[w] as EndpointSeen;
  const truth = l.truth[w] as EndpointTruth;
  const seenBacklog = (k: EndpointSeen): number => Math.max(k.backlog, k.waitingUncached ?? 0);
  let cheapestByTruth = true;
  if (l.cost) {
    // The policy weighs max(known backlog, the runtime's pushed count): swap the known for the true.
    const trueCost = l.cost.map((c, k) => {
      const seen = l.knew[k] as EndpointSeen;
      const trueBacklog = Math.max((l.truth[k] as EndpointTruth).backlog, seen.waitingUncached ?? 0);
      return c - seenBacklog(seen) + trueBacklog;
    });
    cheapestByTruth = (trueCost[w] as number) <= Math.min(...trueCost);
  }
  return {
    unseenBacklog: truth.backlog - knew.backlog,
    unseenInFlight: truth.inFlight - knew.inFlight,
    cheapestByTruth,
  };
}

/** How a row's replicas decided against the truth: what they missed, and when it mattered. */
export interface ViewSummary {
  readonly decisions: number;
  /** Decisions made at an instant another request of the trace arrived at, before it (same arrival). */
  readonly sameInstant: number;
  /** Decisions whose chosen runtime had backlog the replica did not know of; how many at a shared instant. */
  readonly unseen: number;
  readonly unseenSameInstant: number;
  /** Picks that would not be cheapest with the true backlog in place (viewGapOf); how many at a shared instant. */
  readonly misPicks: number;
  readonly misPicksSameInstant: number;
}

/**
 * A row's decisions against the truth (one replica's view is the truth but for the runtime's
 * pushed load): a tier's unseen backlog that comes only from requests that arrived at one instant
 * is picks made on one view, not the exchange's lag.
 */
export function summarizeViews(lines: readonly DumpLine[]): ViewSummary {
  const firstAt = new Map<number, number>();
  for (const l of [...lines].sort((x, y) => x.i - y.i))
    if (!firstAt.has(l.arrivalMs)) firstAt.set(l.arrivalMs, l.i);
  let sameInstant = 0;
  let unseen = 0;
  let unseenSameInstant = 0;
  let misPicks = 0;
  let misPicksSameInstant = 0;
  for (const l of lines) {
    const shared = firstAt.get(l.arrivalMs) !== l.i;
    const gap = viewGapOf(l);
    if (shared) sameInstant++;
    if (gap.unseenBacklog > 0) {
      unseen++;
      if (shared) unseenSameInstant++;
    }
    if (!gap.cheapestByTruth) {
      misPicks++;
      if (shared) misPicksSameInstant++;
    }
  }
  return { decisions: lines.length, sameInstant, unseen, unseenSameInstant, misPicks, misPicksSameInstant };
}

/**
 * Why a request's TTFT is over a line: `too-long`, its uncached part alone takes longer than the
 * line to prefill (over it whatever the routing); `hit`, it had half its prompt or more cached
 * and waited; `miss`, any other (ADR 0054's reading of the R=1 tails).
 */
export type OverLineCause = 'too-long' | 'hit' | 'miss';

export interface OverLine {
  readonly i: number;
  readonly cause: OverLineCause;
  readonly ttftMs: number;
  readonly uncached: number;
  /** Sent to prefill start: the queue it waited in. */
  readonly queueMs: number;
}

/** The requests whose TTFT is over `lineMs`, slowest first, each with its cause (OverLineCause). */
export function findOverLine(
  lines: readonly DumpLine[],
  lineMs: number,
  prefillTokensPerMs: number,
): OverLine[] {
  return lines
    .filter((l) => l.ttftMs > lineMs)
    .map((l) => {
      const uncached = uncachedOf(l);
      const cause: OverLineCause =
        uncached / prefillTokensPerMs > lineMs
          ? 'too-long'
          : 2 * l.cachedTokens >= l.promptTokens
            ? 'hit'
            : 'miss';
      return { i: l.i, cause, ttftMs: l.ttftMs, uncached, queueMs: l.prefillStartMs - l.sentMs };
    })
    .sort((x, y) => y.ttftMs - x.ttftMs);
}
