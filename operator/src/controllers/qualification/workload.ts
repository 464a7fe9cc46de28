// The requests of one pass, pure and deterministic: the same spec (and trace)
// gives the same texts, so a warm pass repeats its cold pass exactly and both
// arms see the same prompts. Sizes are in words; the runtime reports tokens.
import { z } from 'zod';
import type { QualificationSpec, RequestRate, WorkloadGenerator } from '#api/qualification.ts';
import { createSeededRandom } from '#kube/seeded-random.ts';

export interface WorkloadRequest {
  /** Stable id within the pass, e.g. conv-2-turn-1. */
  id: string;
  text: string;
}

const WORDS = (
  'cache page token prefix tree block host device tier layer model weight batch queue route ' +
  'shard replica node pod river stone cloud field light paper garden window market bridge ' +
  'forest signal harbor engine lantern meadow canyon orbit pixel vector matrix kernel socket ' +
  'thread buffer stream packet ledger summit valley island desert planet comet harvest'
).split(' ');

function words(random: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(random() * WORDS.length)] ?? 'token');
  return out.join(' ');
}

/** Conversations sharing one system prompt, turn-major so turn t can reuse turn t-1 within a pass. */
function sharedPrefix(g: NonNullable<WorkloadGenerator['sharedPrefix']>, seed: number): WorkloadRequest[] {
  const random = createSeededRandom(seed);
  const system = `System: ${words(random, g.systemPromptWords)}\n`;
  const turns = Array.from({ length: g.conversations }, () =>
    Array.from({ length: g.turns }, () => `User: ${words(random, g.turnWords)}\n`),
  );
  const out: WorkloadRequest[] = [];
  for (let t = 0; t < g.turns; t++)
    for (let c = 0; c < g.conversations; c++)
      out.push({ id: `conv-${c}-turn-${t}`, text: system + (turns[c] ?? []).slice(0, t + 1).join('') });
  return out;
}

function documents(g: NonNullable<WorkloadGenerator['documents']>, seed: number): WorkloadRequest[] {
  const random = createSeededRandom(seed ^ 0x5bd1e995);
  const out: WorkloadRequest[] = [];
  for (let d = 0; d < g.documents; d++) {
    const doc = `Document: ${words(random, g.documentWords)}\n`;
    for (let q = 0; q < g.questionsPerDocument; q++)
      out.push({ id: `doc-${d}-q-${q}`, text: `${doc}Question: ${words(random, g.questionWords)}\n` });
  }
  return out;
}

export function generateWorkload(g: WorkloadGenerator): WorkloadRequest[] {
  return [
    ...(g.sharedPrefix ? sharedPrefix(g.sharedPrefix, g.seed) : []),
    ...(g.documents ? documents(g.documents, g.seed) : []),
  ];
}

const MooncakeLine = z.looseObject({
  hash_ids: z.array(z.number().int().nonnegative()).min(1),
  input_length: z.number().int().positive().optional(),
});

export type WorkloadResult = { ok: true; requests: WorkloadRequest[] } | { ok: false; message: string };

/**
 * Mooncake JSONL: each hash id becomes the same block of text wherever it
 * appears, so lines sharing leading hash ids share a prefix. The last block is
 * cut to input_length when the line gives one.
 */
export function parseMooncakeTrace(text: string, blockWords: number, maxRequests: number): WorkloadResult {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const out: WorkloadRequest[] = [];
  for (const [i, line] of lines.slice(0, maxRequests).entries()) {
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return { ok: false, message: `trace line ${i + 1} is not JSON` };
    }
    const parsed = MooncakeLine.safeParse(raw);
    if (!parsed.success)
      return { ok: false, message: `trace line ${i + 1}: needs hash_ids, a non-empty list of block ids` };
    const ids = parsed.data.hash_ids;
    const last = parsed.data.input_length
      ? Math.max(1, Math.min(blockWords, parsed.data.input_length - (ids.length - 1) * blockWords))
      : blockWords;
    const blocks = ids.map((h, j) => {
      const block = words(createSeededRandom(h + 1), blockWords);
      return j === ids.length - 1 ? block.split(' ').slice(0, last).join(' ') : block;
    });
    out.push({ id: `line-${i + 1}`, text: blocks.join(' ') });
  }
  if (out.length === 0) return { ok: false, message: 'the trace has no request line' };
  return { ok: true, requests: out };
}

/** The pass of a spec; `traceText` is the trace ConfigMap's value when the workload is a trace. */
export function buildWorkload(
  spec: Pick<QualificationSpec, 'workload'>,
  traceText: string | undefined,
): WorkloadResult {
  const { generator, trace } = spec.workload;
  if (generator) return { ok: true, requests: generateWorkload(generator) };
  if (!trace) return { ok: false, message: 'workload needs a generator or a trace' };
  if (traceText === undefined)
    return {
      ok: false,
      message: `ConfigMap ${trace.configMapRef.name} key ${trace.configMapRef.key} not found`,
    };
  return parseMooncakeTrace(traceText, trace.blockWords, trace.maxRequests);
}

/**
 * How a pass sends its requests: a closed loop keeps `concurrency` in flight;
 * an open loop sends request i at offsetsMs[i] after the pass starts, answered
 * or not (the same offsets in every pass of both arms).
 */
export type Pace = { kind: 'closed'; concurrency: number } | { kind: 'open'; offsetsMs: number[] };

/**
 * Offsets (ms from the pass's start) of n Poisson arrivals at `requestsPerSecond`:
 * the first at 0, then exponential gaps from a seeded PRNG, so a schedule is the
 * same wherever it is computed.
 */
export function poissonArrivals(n: number, rate: RequestRate): number[] {
  const random = createSeededRandom(rate.seed ^ 0x2545f491);
  const out: number[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    if (i > 0) at += (-Math.log(1 - random()) / rate.requestsPerSecond) * 1000;
    out.push(Math.round(at * 100) / 100);
  }
  return out;
}

/** The pace of a spec's passes over `n` requests (the API admits exactly one of the two). */
export function paceOf(spec: Pick<QualificationSpec, 'concurrency' | 'workload'>, n: number): Pace {
  const rate = spec.workload.requestRate;
  if (rate) return { kind: 'open', offsetsMs: poissonArrivals(n, rate) };
  return { kind: 'closed', concurrency: spec.concurrency ?? 1 };
}
