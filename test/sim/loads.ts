// GET /v1/loads, as SGLang 0.5.23 answers it (entrypoints/v1_loads.py,
// managers/load_snapshot.py LoadSnapshot.to_dict). Pure.
//
// JSON: {timestamp (ISO 8601), version, accelerator, num_accelerators, loads:
// [per DP rank: every core field, then the memory, disaggregation and queues
// sections]}; `include` picks sections (core alone, or any of memory, spec,
// lora, disagg, queues, all). An unknown section raises in to_dict, outside
// the handler's try: SGLang answers 500 "Internal Server Error" (text).
// format=prometheus: one gauge `sglang_<field>` (sections `sglang_<section>_<field>`,
// spec and disagg abbreviated) per numeric field, labelled by dp_rank only.

import type { EngineSnapshot } from './engine.ts';

export interface LoadInput {
  readonly snapshot: EngineSnapshot;
  readonly nowEpochSeconds: number;
  readonly maxRunningRequests: number;
  /** Prompt tokens of the requests still waiting (none of them cached yet, as far as the queue knows). */
  readonly waitingPromptTokens: number;
  readonly pdMode: 'null' | 'prefill' | 'decode';
  readonly pd: { readonly prefillInflight: number; readonly decodeTransfer: number };
  /** Device memory of the KV pool, GB (the simulator has no weights or graphs). */
  readonly kvCacheGb: number;
  /** The engine's decode moment sums (null until a decode step ran, as SGLang's). */
  readonly decodeMoments: readonly number[];
}

const VALID_SECTIONS = new Set(['core', 'memory', 'spec', 'lora', 'disagg', 'queues', 'all']);
const SECTIONS: readonly (readonly [field: string, include: string])[] = [
  ['memory', 'memory'],
  ['speculative', 'spec'],
  ['lora', 'lora'],
  ['disaggregation', 'disagg'],
  ['queues', 'queues'],
];
const PROMETHEUS_PREFIX: Readonly<Record<string, string>> = { speculative: 'spec', disaggregation: 'disagg' };

export class InvalidSections extends Error {}

/** DP rank 0's LoadSnapshot, every section the simulator has (no speculative, no LoRA). */
export function buildLoadSnapshot(i: LoadInput): Record<string, unknown> {
  const s = i.snapshot;
  const c = s.counters;
  return {
    timestamp: i.nowEpochSeconds,
    dp_rank: 0,
    num_running_reqs: s.numRunningReqs,
    num_waiting_reqs: s.numWaitingReqs,
    num_waiting_uncached_tokens: i.waitingPromptTokens,
    num_used_tokens: s.numUsedTokens,
    num_total_tokens: s.numUsedTokens,
    // Equal to num_total_tokens outside disaggregated decode.
    num_active_tokens: s.numUsedTokens,
    num_prealloc_ready_tokens: 0,
    max_total_num_tokens: s.maxTotalNumTokens,
    max_running_requests: i.maxRunningRequests,
    token_usage: s.tokenUsage,
    gen_throughput: s.genThroughput,
    cache_hit_rate: s.cacheHitRate,
    utilization: s.tokenUsage,
    total_prefill_uncached_tokens: Math.max(0, c.promptTokens - c.cachedTokens),
    total_prefill_busy_us: Math.round((c.prefillBusyMs ?? 0) * 1000),
    decode_moments: (i.decodeMoments[0] ?? 0) > 0 ? [...i.decodeMoments] : null,
    memory: { weight_gb: 0, kv_cache_gb: i.kvCacheGb, graph_gb: 0, token_capacity: s.maxTotalNumTokens },
    disaggregation: {
      mode: i.pdMode,
      prefill_bootstrap_queue_reqs: 0,
      prefill_inflight_queue_reqs: i.pd.prefillInflight,
      decode_prealloc_queue_reqs: 0,
      decode_transfer_queue_reqs: i.pd.decodeTransfer,
      decode_retracted_queue_reqs: 0,
      kv_transfer_speed_gb_s: 0,
      kv_transfer_latency_ms: 0,
    },
    queues: { waiting: s.numWaitingReqs, grammar: 0, paused: 0, retracted: 0, prealloc_ready: 0 },
  };
}

/** LoadSnapshot.to_dict(include): throws InvalidSections for an unknown one. */
export function selectSections(
  load: Readonly<Record<string, unknown>>,
  include: readonly string[] | null,
): Record<string, unknown> {
  const sectionFields = new Set(SECTIONS.map(([f]) => f));
  const core = Object.fromEntries(Object.entries(load).filter(([k]) => !sectionFields.has(k)));
  const all = include === null || include.includes('all');
  if (!all) {
    const bad = include.filter((s) => !VALID_SECTIONS.has(s));
    if (bad.length > 0) throw new InvalidSections(`Invalid include sections: ${bad.join(', ')}`);
    if (include.length === 1 && include[0] === 'core') return core;
  }
  for (const [field, name] of SECTIONS) {
    const section = load[field];
    if (section === undefined || section === null || (!all && !include.includes(name))) continue;
    core[field] = section;
  }
  return core;
}

/** The include list of a query (`?include=a,b`), null when absent. */
export function parseInclude(raw: string | null): string[] | null {
  return raw ? raw.split(',').map((s) => s.trim()) : null;
}

export function renderLoadsPrometheus(loads: readonly Readonly<Record<string, unknown>>[]): string {
  const samples = new Map<string, [number, number][]>();
  const add = (name: string, rank: number, v: unknown): void => {
    if (typeof v !== 'number') return;
    const list = samples.get(name) ?? [];
    list.push([rank, v]);
    samples.set(name, list);
  };
  for (const load of loads) {
    const rank = Number(load['dp_rank'] ?? 0);
    for (const [key, value] of Object.entries(load)) {
      if (key === 'dp_rank') continue;
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        const prefix = PROMETHEUS_PREFIX[key] ?? key;
        for (const [sub, v] of Object.entries(value as Record<string, unknown>))
          add(`sglang_${prefix}_${sub}`, rank, v);
      } else add(`sglang_${key}`, rank, value);
    }
  }
  const lines: string[] = [];
  for (const [name, list] of samples) {
    lines.push(`# TYPE ${name} gauge`);
    for (const [rank, v] of list) lines.push(`${name}{dp_rank="${rank}"} ${v}`);
  }
  return lines.join('\n') + '\n';
}
