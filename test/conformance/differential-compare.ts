// How a real answer and the simulator's are compared, step by step of the
// differential script. Pure: observations in, mismatches out.

import type { Observation } from './differential-script.ts';
import { diffJson, diffMetricFamilies, jsonType, parseMetricFamilies, type Mismatch } from './shape-diff.ts';

/**
 * Metric families of the real server the simulator does not model, each for a
 * reason: it has no CUDA graphs, SWA or Mamba pools, speculative decoding, DP
 * attention, LoRA, grammar backend, HTTP middleware or OS process of a
 * scheduler. A family named here is skipped on both sides.
 */
export const METRICS_NOT_SIMULATED: ReadonlyMap<string, string> = new Map([
  ['sglang:cuda_graph_passes_total', 'no CUDA graphs'],
  ['sglang:is_cuda_graph', 'no CUDA graphs'],
  ['sglang:graph_memory_usage_gb', 'no CUDA graphs'],
  ['sglang:startup_cuda_graph_time_seconds', 'no CUDA graphs'],
  ['sglang:swa_available_tokens', 'no sliding-window pool'],
  ['sglang:swa_evictable_tokens', 'no sliding-window pool'],
  ['sglang:swa_token_usage', 'no sliding-window pool'],
  ['sglang:swa_used_tokens', 'no sliding-window pool'],
  ['sglang:prealloc_swa_token_usage', 'no sliding-window pool'],
  ['sglang:mamba_available_tokens', 'no Mamba state pool'],
  ['sglang:mamba_evictable_tokens', 'no Mamba state pool'],
  ['sglang:mamba_usage', 'no Mamba state pool'],
  ['sglang:mamba_used_tokens', 'no Mamba state pool'],
  ['sglang:spec_accept_length', 'no speculative decoding'],
  ['sglang:spec_accept_rate', 'no speculative decoding'],
  ['sglang:spec_block_accept_length', 'no speculative decoding'],
  ['sglang:spec_cap_length', 'no speculative decoding'],
  ['sglang:spec_num_draft_tokens', 'no speculative decoding'],
  ['sglang:spec_num_steps', 'no speculative decoding'],
  ['sglang:dp_attention_pairs_total', 'no DP attention'],
  ['sglang:dp_attention_steps_total', 'no DP attention'],
  ['sglang:dp_attention_sync_wait_seconds', 'no DP attention'],
  ['sglang:dp_attention_token_imbalance_ratio', 'no DP attention'],
  ['sglang:dp_attention_tokens_total', 'no DP attention'],
  ['sglang:http_requests_active', "SGLang's HTTP middleware, not the server's model"],
  ['sglang:http_requests_total', "SGLang's HTTP middleware, not the server's model"],
  ['sglang:http_responses_total', "SGLang's HTTP middleware, not the server's model"],
  ['sglang:process_cpu_seconds_total', 'OS processes of SGLang (tokenizer, scheduler, detokenizer)'],
  [
    'sglang:scheduler_process_cpu_seconds_total',
    'OS processes of SGLang (tokenizer, scheduler, detokenizer)',
  ],
  ['sglang:scheduler_idle_seconds_total', "the scheduler loop's own accounting"],
  ['sglang:scheduler_stage_seconds_total', "the scheduler loop's own accounting"],
  ['sglang:per_stage_req_latency_seconds', "the scheduler loop's own accounting"],
  ['sglang:fwd_occupancy', "the scheduler loop's own accounting"],
  ['sglang:new_token_ratio', "the scheduler's retraction heuristic"],
  ['sglang:realtime_tokens_total', "the scheduler's per-mode token accounting"],
  ['sglang:prefill_effective_tokens_total', "the scheduler's per-mode token accounting"],
  ['sglang:decode_sum_seq_lens', "the scheduler's per-mode token accounting"],
  ['sglang:num_paused_reqs', 'no weight sync'],
  ['sglang:num_decode_deferred_kv_release_reqs', 'no deferred KV release'],
  ['sglang:num_decode_host_receive_queue_reqs', 'no decode host receive'],
  ['sglang:pending_prealloc_token_usage', 'no decode prealloc pool'],
  ['sglang:prealloc_full_token_usage', 'no decode prealloc pool'],
  ['sglang:num_unique_running_routing_keys', 'no routing-key accounting'],
  ['sglang:routing_key_all_req_count', 'no routing-key accounting'],
  ['sglang:routing_key_running_req_count', 'no routing-key accounting'],
  ['sglang:routing_keys_active', 'no routing-key accounting'],
  ['sglang:startup_time_seconds', 'no start-up phases'],
  ['sglang:startup_available_gpu_memory_gb', 'no device memory'],
  ['sglang:weight_memory_usage_gb', 'no device memory'],
  ['sglang:kv_cache_memory_usage_gb', 'no device memory'],
  ['sglang:get_loads_duration_seconds', "the /v1/loads handler's own timing"],
  ['sglang:request_time_per_output_token_seconds', 'latency histograms beyond TTFT/ITL/e2e/queue'],
  ['sglang:eviction_duration_seconds', 'the duration of a tree operation'],
  ['sglang:load_back_duration_seconds', 'the duration of a tree operation'],
  ['sglang:hicache_backup_duration_seconds', 'the duration of a tree operation'],
  ['sglang:hicache_backup_bytes_total', 'bytes of KV: the simulator counts tokens'],
  ['sglang:load_back_bytes_total', 'bytes of KV: the simulator counts tokens'],
]);

/** Label values that must agree on both servers. */
const VALUE_LABELS = [
  'engine_type',
  'tp_rank',
  'pp_rank',
  'dp_rank',
  'moe_ep_rank',
  'cache_source',
  'is_streaming',
  'pool',
  'cache_type',
  'reason',
  'le',
  // With --enable-priority-scheduling: "" on the totals, each priority a request was seen with.
  'priority',
];

/** Server args SGLang resolves against the device (here: the CPU the real server runs on). */
function keysOf(v: unknown, keep: ReadonlySet<string>): unknown {
  if (jsonType(v) !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, keep.has(k) ? x : 0]),
  );
}

const SERVER_INFO_VALUES = new Set([
  'model_path',
  'tokenizer_path',
  'served_model_name',
  'version',
  'status',
  'tp_size',
  'dp_size',
  'page_size',
  'disaggregation_mode',
  'enable_hierarchical_cache',
  'enable_metrics',
  'enable_cache_report',
  'max_total_num_tokens',
  'internal_states',
]);

function compareServerInfo(real: unknown, sim: unknown): Mismatch[] {
  // Every key, but values only where they identify the runtime: the rest are
  // resolved against the device, and the real one runs on a CPU.
  const shape = (v: unknown): unknown => {
    const top = keysOf(v, SERVER_INFO_VALUES) as Record<string, unknown>;
    const states = top['internal_states'];
    if (Array.isArray(states)) top['internal_states'] = states.map((s) => keysOf(s, new Set()));
    return top;
  };
  return diffJson(shape(real), shape(sim), 'server_info');
}

/** The kind of an SSE event, for comparing streams chunk kind by chunk kind. */
export function eventKind(e: unknown): string {
  if (e === '[DONE]') return 'done';
  if (jsonType(e) !== 'object') return 'text';
  const o = e as Record<string, unknown>;
  if ('error' in o) return 'error';
  const choices = o['choices'];
  if (Array.isArray(choices)) {
    if (choices.length === 0) return 'usage' in o ? 'usage' : 'empty';
    const c = choices[0] as Record<string, unknown>;
    const delta = c['delta'] as Record<string, unknown> | undefined;
    if (c['finish_reason'] !== null && c['finish_reason'] !== undefined) return 'finish';
    if (delta && 'role' in delta) return 'role';
    return 'content';
  }
  const meta = o['meta_info'] as Record<string, unknown> | undefined;
  return meta?.['finish_reason'] ? 'finish' : 'content';
}

function collapse(kinds: readonly string[]): string {
  return kinds.filter((k, i) => i === 0 || kinds[i - 1] !== k).join(' ');
}

function compareStreams(name: string, real: readonly unknown[], sim: readonly unknown[]): Mismatch[] {
  const out: Mismatch[] = [];
  const [ka, kb] = [real.map(eventKind), sim.map(eventKind)];
  if (collapse(ka) !== collapse(kb))
    out.push({ path: `${name} chunks`, real: collapse(ka), sim: collapse(kb) });
  for (const kind of new Set([...ka, ...kb])) {
    const a = real[ka.indexOf(kind)];
    const b = sim[kb.indexOf(kind)];
    if (a !== undefined && b !== undefined) out.push(...diffJson(a, b, `${name}<${kind}>`));
  }
  return out;
}

function cachedTokens(o: Observation | undefined): number {
  const b = o?.body as Record<string, unknown> | undefined;
  const meta = b?.['meta_info'] as Record<string, unknown> | undefined;
  if (meta) return Number(meta['cached_tokens'] ?? 0);
  const usage = b?.['usage'] as Record<string, unknown> | undefined;
  const details = usage?.['prompt_tokens_details'] as Record<string, unknown> | undefined;
  return Number(details?.['cached_tokens'] ?? 0);
}

/** Steps whose cached-token count must be zero (false) or positive (true) on both. */
const CACHE_EXPECTATIONS: readonly [string, boolean][] = [
  ['cache_first', false],
  ['cache_repeat', true],
  ['cache_salt_a', false],
  ['cache_salt_a_repeat', true],
  ['cache_salt_b', false],
  ['cache_chat_repeat', true],
];

/** Plain-text bodies that must be equal word for word. */
const EXACT_TEXT = new Set(['flush_cache', 'health', 'health_generate', 'ready']);

export function compareObservations(
  real: ReadonlyMap<string, Observation>,
  sim: ReadonlyMap<string, Observation>,
): Mismatch[] {
  const out: Mismatch[] = [];
  for (const [name, a] of real) {
    const b = sim.get(name);
    if (!b) {
      out.push({ path: name, real: 'answered', sim: 'absent' });
      continue;
    }
    if (a.status !== b.status)
      out.push({ path: `${name} status`, real: String(a.status), sim: String(b.status) });
    if (a.contentType !== b.contentType) {
      out.push({ path: `${name} content-type`, real: a.contentType, sim: b.contentType });
    }
    if (a.events && b.events) out.push(...compareStreams(name, a.events, b.events));
    else if (name === 'server_info') out.push(...compareServerInfo(a.body, b.body));
    else if (name === 'metrics' || name === 'loads_prometheus') {
      const fa = parseMetricFamilies(String(a.body));
      const fb = parseMetricFamilies(String(b.body));
      const notSimulated = new Set(METRICS_NOT_SIMULATED.keys());
      out.push(...diffMetricFamilies(fa, fb, `${name} `, { notSimulated, valueLabels: VALUE_LABELS }));
    } else if (typeof a.body === 'string' || typeof b.body === 'string') {
      if (jsonType(a.body) !== jsonType(b.body) || (EXACT_TEXT.has(name) && a.body !== b.body)) {
        out.push({ path: `${name} body`, real: JSON.stringify(a.body), sim: JSON.stringify(b.body) });
      }
    } else out.push(...diffJson(a.body, b.body, name));
  }
  for (const [name, cached] of CACHE_EXPECTATIONS) {
    if (!real.has(name)) continue;
    const [a, b] = [cachedTokens(real.get(name)) > 0, cachedTokens(sim.get(name)) > 0];
    if (a !== cached || b !== cached) {
      out.push({ path: `${name} cached_tokens > 0`, real: String(a), sim: String(b) });
    }
  }
  return out;
}
