// Mooncake-format traces of chosen shapes (pure, seeded): the routing bench's
// goals must hold on traces nobody tuned for, not only on the conversation
// slice, whose stamps come in 3-s steps (89% of requests share a stamp).
//
// Two independent choices:
// - arrivals: `poisson` (steady, exponential gaps), `bursts` (groups of 2..2m-2
//   requests at one instant, the groups a Poisson process: the slice's shape),
//   `mixed` (half the requests Poisson, half in groups spread over a few ms, as
//   clients that fan out land on a real gateway);
// - sharing: `sessions` (multi-turn conversations behind one of a few system
//   prompts: each turn's prompt is the last one, its answer and a new message;
//   a request opens a new session or continues one of the open ones),
//   `templates` (a Zipf-popular template prefix, then a request's own tail:
//   tool agents, few-shot prompts; no turns).
// Lengths count 512-token blocks (BLOCK_TOKENS), as the Mooncake release does;
// the last block of a prompt is cut to input_length.

import { BLOCK_TOKENS, type TraceRecord } from './replay-trace.ts';

export type Arrivals = 'poisson' | 'bursts' | 'mixed';
export type Sharing = 'sessions' | 'templates';

export interface SynthOptions {
  readonly n: number;
  readonly arrivals: Arrivals;
  readonly sharing: Sharing;
  /** Requests per second, on average (the bench stretches to its load anyway: the shape is what counts). */
  readonly rate: number;
  /** Mean requests in a group (`bursts`, `mixed`). */
  readonly meanBurst: number;
  /** Shared prefix blocks: a system prompt (`sessions`) or a template (`templates`). */
  readonly prefixBlocks: number;
  /** How many distinct system prompts or templates. */
  readonly prefixes: number;
  /** Mean new blocks a request adds (a user message, a template's variable tail). */
  readonly meanNewBlocks: number;
  /** Mean output tokens. */
  readonly meanOutput: number;
  /** Sessions open at once (`sessions`): the reuse distance. */
  readonly openSessions: number;
  /** Turns at which a session ends (`sessions`), so prompts stay bounded. */
  readonly maxTurns: number;
}

export const SYNTH_DEFAULTS: SynthOptions = {
  n: 2000,
  arrivals: 'poisson',
  sharing: 'sessions',
  rate: 20,
  meanBurst: 8,
  prefixBlocks: 4,
  prefixes: 4,
  meanNewBlocks: 3,
  meanOutput: 300,
  openSessions: 48,
  maxTurns: 8,
};

/** Exponential variate with the given mean. */
function exp(rng: () => number, mean: number): number {
  return -Math.log(1 - rng()) * mean;
}

/** At least 1, geometric-like around `mean`. */
function count(rng: () => number, mean: number): number {
  return Math.max(1, Math.round(exp(rng, mean)));
}

/** Arrival instants (ms, non-decreasing) of n requests. */
export function synthArrivals(rng: () => number, o: SynthOptions): number[] {
  const meanGapMs = 1000 / o.rate;
  const out: number[] = [];
  const groups = (share: number, jitterMs: number): number[] => {
    const times: number[] = [];
    const want = Math.round(o.n * share);
    let t = 0;
    while (times.length < want) {
      const size = 2 + Math.floor(rng() * Math.max(1, 2 * o.meanBurst - 3));
      t += exp(rng, (meanGapMs * o.meanBurst) / share);
      for (let k = 0; k < size && times.length < want; k++) times.push(t + rng() * jitterMs);
    }
    return times;
  };
  const steady = (share: number): number[] => {
    const times: number[] = [];
    let t = 0;
    const want = Math.round(o.n * share);
    while (times.length < want) times.push((t += exp(rng, meanGapMs / share)));
    return times;
  };
  if (o.arrivals === 'poisson') out.push(...steady(1));
  else if (o.arrivals === 'bursts') out.push(...groups(1, 0));
  else out.push(...steady(0.5), ...groups(0.5, 4));
  return out
    .slice(0, o.n)
    .map((t) => Math.round(t))
    .sort((a, b) => a - b);
}

interface Session {
  readonly blocks: number[];
  turns: number;
  /** Output tokens of the session's last turn: its answer is in the next prompt. */
  lastOutput: number;
}

/** n records of the chosen shape, timestamps from 0 (ms). */
export function synthTrace(rng: () => number, options: Partial<SynthOptions> = {}): TraceRecord[] {
  const o: SynthOptions = { ...SYNTH_DEFAULTS, ...options };
  let nextId = 0;
  const fresh = (k: number): number[] => Array.from({ length: k }, () => nextId++);
  const prefixes = Array.from({ length: Math.max(1, o.prefixes) }, () => fresh(o.prefixBlocks));
  // Zipf(1) popularity over prefixes: the first is the most used.
  const weights = prefixes.map((_p, i) => 1 / (i + 1));
  const total = weights.reduce((s, w) => s + w, 0);
  const pickPrefix = (): number[] => {
    let x = rng() * total;
    for (let i = 0; i < prefixes.length; i++) if ((x -= weights[i] as number) <= 0) return prefixes[i] ?? [];
    return prefixes[prefixes.length - 1] ?? [];
  };
  const open: Session[] = [];
  const records: TraceRecord[] = [];
  for (const timestamp of synthArrivals(rng, o)) {
    const output = count(rng, o.meanOutput);
    let blocks: number[];
    if (o.sharing === 'templates') {
      blocks = [...pickPrefix(), ...fresh(count(rng, o.meanNewBlocks))];
    } else {
      // Continue an open session most of the time; open one when few are open.
      const cont = open.length > 0 && rng() < open.length / (open.length + o.openSessions / 4);
      const i = cont ? Math.floor(rng() * open.length) : -1;
      const s = i >= 0 ? (open[i] as Session) : { blocks: [...pickPrefix()], turns: 0, lastOutput: 0 };
      // The last answer joins the history, then the new message.
      s.blocks.push(...fresh(Math.ceil(s.lastOutput / BLOCK_TOKENS) + count(rng, o.meanNewBlocks)));
      s.turns++;
      s.lastOutput = output;
      blocks = [...s.blocks];
      if (i < 0) open.push(s);
      if (s.turns >= o.maxTurns) open.splice(open.indexOf(s), 1);
      else if (open.length > o.openSessions) open.shift();
    }
    const input = (blocks.length - 1) * BLOCK_TOKENS + 1 + Math.floor(rng() * (BLOCK_TOKENS - 1));
    records.push({ timestamp, input_length: input, output_length: output, hash_ids: blocks });
  }
  return records;
}
