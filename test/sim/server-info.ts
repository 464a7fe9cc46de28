// The parts of /server_info and /model_info that are SGLang's bookkeeping
// rather than the simulator's state (utils/common.py build_server_info,
// http_server.server_info/model_info, scheduler_components/internal_state.py),
// held to a real 0.5.23 server by test/conformance/differential.test.ts.

import type { SimServer } from './server.ts';

/**
 * ServerArgs fields with no launch flag (so not in the flag catalogue the
 * simulator parses with), at their 0.5.23 defaults; the watermark secrets as
 * redact_watermark_secrets leaves them.
 */
const FIELDS_WITHOUT_FLAGS: Readonly<Record<string, unknown>> = {
  _radix_eviction_policy_explicitly_set: false,
  _speculative_draft_quantization_explicitly_set: false,
  _swa_full_tokens_ratio_explicitly_set: false,
  aux_hidden_state_capture: null,
  enable_cp_tp_group_sharing: false,
  grpc_worker_threads: 4,
  speculative_boundary_reduction: 'rs+rsv',
  stat_loggers: null,
  uses_mamba_radix_cache: false,
  watermark_context_window: 4,
  watermark_default_enabled: false,
  watermark_enforce_all: false,
  watermark_key: '<redacted>',
  watermark_key_b: '<redacted>',
  watermark_max_probability: 1.0,
  watermark_mixing_probability: 0.5,
};

/** Parser-only dests that ServerArgs does not keep (prepare_server_args consumes --config). */
const NOT_SERVER_ARGS = new Set(['config']);

const GRAPH_PHASES = ['prefill', 'decode', 'target_verify', 'draft_prefill', 'draft_decode', 'draft_extend'];
const NO_GRAPHS = Object.fromEntries(GRAPH_PHASES.map((p) => [p, 0]));
/** 128 KiB of KV a token: the 8B model the latency defaults describe (config.ts). */
const KV_BYTES_PER_TOKEN = 131_072;

/** The resolved ServerArgs as /server_info lists them: every field, flag or not. */
export function buildServerArgs(server: SimServer): Record<string, unknown> {
  const args = Object.fromEntries(
    Object.entries(server.config.sglang).filter(([k]) => !NOT_SERVER_ARGS.has(k)),
  );
  return {
    ...args,
    ...FIELDS_WITHOUT_FLAGS,
    served_model_name: server.serving.servedModelName,
    tokenizer_path: server.serving.tokenizerPath,
    max_running_requests: server.serving.maxRunningRequests,
    chunked_prefill_size: server.serving.chunkedPrefillSize,
    page_size: server.serving.pageSize,
    context_length: server.serving.contextLength,
  };
}

function kvCacheGb(server: SimServer): number {
  return Math.round(((server.serving.maxTotalTokens * KV_BYTES_PER_TOKEN) / 1e9) * 1000) / 1000;
}

/** The scheduler's startup_time: the simulator loads nothing, so every phase took 0 s. */
function buildStartupTime(): Record<string, unknown> {
  return { load_weight: 0, kv_cache_allocation: 0, scheduler_e2e: 0, cuda_graph: NO_GRAPHS };
}

/** internal_state.get_internal_state: the resolved args plus topology, memory and throughput. */
export function buildInternalState(server: SimServer, lastGenThroughput: number): Record<string, unknown> {
  const a = server.config.sglang;
  return {
    ...buildServerArgs(server),
    world_size: a.tp_size * Number(a.pp_size ?? 1) * a.dp_size,
    startup_time: buildStartupTime(),
    effective_max_running_requests_per_dp: server.serving.maxRunningRequests,
    last_gen_throughput: lastGenThroughput,
    memory_usage: {
      weight: 0,
      kvcache: kvCacheGb(server),
      startup_available: 0,
      token_capacity: server.serving.maxTotalTokens,
      token_capacity_swa: null,
      graph: NO_GRAPHS,
    },
    decode_cuda_graph_bs: [],
    decode_cuda_graph_memory_gb: 0,
  };
}

/** The top-level fields build_server_info and server_info add to the args. */
export function buildServerInfoExtras(server: SimServer): Record<string, unknown> {
  return {
    launch_command: buildLaunchCommand(server),
    // A bound signal handler in ServerArgs; the internal states drop it, the top level shows null.
    custom_sigquit_handler: null,
    startup_time: { ...buildStartupTime(), tokenizer_e2e: 0 },
    frontend: 'python',
    hicache_object_layout: buildHicacheObjectLayout(server),
  };
}

/** ServerArgs.launch_command: the flags as given (rebuilt from the explicit ones, in parse order). */
function buildLaunchCommand(server: SimServer): string {
  const args = server.config.sglang as Readonly<Record<string, unknown>>;
  return [...server.config.explicit]
    .map((dest) => {
      const flag = `--${dest.replaceAll('_', '-')}`;
      const v = args[dest];
      if (v === true) return flag;
      return `${flag} ${typeof v === 'string' ? v : JSON.stringify(v)}`;
    })
    .join(' ');
}

/** Scheduler._hicache_l3_layout (scheduler.py): the host tier's shape, or why there is none. */
function buildHicacheObjectLayout(server: SimServer): Record<string, unknown> {
  const a = server.config.sglang;
  const page = server.serving.pageSize;
  if (!a.enable_hierarchical_cache) {
    return {
      enabled: false,
      backend: null,
      page_size: page,
      hicache_object_layout: { pools: [] },
      reason: 'Hierarchical cache is disabled',
    };
  }
  // Only a Mooncake storage backend describes an L3 layout; the simulator has none.
  return {
    enabled: false,
    backend: a.hicache_storage_backend ?? null,
    page_size: page,
    hicache_object_layout: { pools: [] },
    reason: 'Mooncake storage is not attached',
  };
}

/** The memory section of /v1/loads and the KV share of internal states. */
export function buildKvCacheGb(server: SimServer): number {
  return kvCacheGb(server);
}

// The embedding plan /model_info reports for a generation model (configs/embedding_model_spec.py).
const CAPTURE_BATCH_SIZES = [
  4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
  352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 1280, 1536, 1792, 2048, 2304, 2560,
  2816, 3072, 3328, 3584, 3840, 4096,
];

export function buildModelInfo(server: SimServer): Record<string, unknown> {
  const a = server.config.sglang;
  return {
    model_path: a.model_path,
    served_model_name: server.serving.servedModelName,
    tokenizer_path: server.serving.tokenizerPath,
    is_generation: true,
    preferred_sampling_params: null,
    weight_version: 'default',
    load_format: a.load_format ?? 'auto',
    reasoning_parser: a.reasoning_parser ?? null,
    tool_call_parser: a.tool_call_parser ?? null,
    disaggregation_mode: a.disaggregation_mode,
    has_image_understanding: false,
    has_audio_understanding: false,
    model_type: 'llama',
    architectures: ['LlamaForCausalLM'],
    embedding: {
      family: 'none',
      task: 'none',
      execution: 'none',
      attention: 'none',
      pooling: 'model_defined',
      normalize: false,
      postprocessor: 'none',
      tokenizer_special_tokens: 'model_default',
      supports_dimensions: false,
      supports_token_embeddings: false,
      supports_multimodal: false,
      requires_embedding_flag: false,
      auto_enable_embedding: false,
      bcg_eligibility: 'disabled',
      safe_disable_kv_cache: false,
      safe_disable_radix_cache: false,
      safe_disable_chunked_prefill: false,
      enabled: false,
      matryoshka_dimensions: [],
      bcg: {
        prefill_backend: 'disabled',
        enabled: false,
        capture_token_budget: server.serving.chunkedPrefillSize,
        capture_batch_sizes: CAPTURE_BATCH_SIZES,
      },
      cache: {
        kv_cache_disabled: false,
        radix_cache_disabled: a.disable_radix_cache,
        chunked_prefill_disabled: false,
      },
    },
  };
}

/** /v1/models' one card (protocol.ModelCard): created is the answer's time, parent null. */
export function buildModelCard(server: SimServer, nowEpochSeconds: number): Record<string, unknown> {
  const model = server.serving.servedModelName;
  return {
    id: model,
    object: 'model',
    created: Math.floor(nowEpochSeconds),
    owned_by: 'sglang',
    root: model,
    parent: null,
    max_model_len: server.serving.contextLength,
  };
}
