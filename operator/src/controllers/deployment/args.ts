import { UNSTAMPED_RUNTIME_PRIORITY, type DeploymentSpec } from '#api';
import { renderSglangArgs, type SglangArgsInput } from '#sglang/flags.ts';
import type { RuntimeIdentity } from '../../sglang-client/identity.ts';
import { MODEL_DIR } from './model-cache/names.ts';
import type { RoleEngine } from './roles.ts';

export const SGLANG_PORT = 30000;

/**
 * SGLang's ServerArgs for one engine. Metrics and cache reports are always on:
 * the gateway routes on them and Task usage is read from them.
 */
export function buildServerArgs(spec: DeploymentSpec, engine: RoleEngine): SglangArgsInput {
  const args: SglangArgsInput = {
    model_path: MODEL_DIR,
    served_model_name: spec.model.servedName,
    host: '0.0.0.0',
    port: SGLANG_PORT,
    tp_size: spec.parallelism.tensor,
    dp_size: spec.parallelism.data,
    // 1 renders nothing: single-node command lines (and their fingerprints) are as before.
    nnodes: spec.parallelism.nodes,
    enable_metrics: true,
    enable_cache_report: true,
    page_size: spec.serving?.pageSize,
    max_running_requests: spec.serving?.maxRunningRequests,
    max_total_tokens: spec.serving?.maxTotalTokens,
    mem_fraction_static: spec.serving?.memFractionStatic,
    context_length: spec.serving?.contextLength,
    chunked_prefill_size: spec.serving?.chunkedPrefillSize,
    schedule_policy: spec.serving?.schedulePolicy,
    // Preemption off: a running request is never retracted for a stamp (the simulator models none either).
    enable_priority_scheduling: spec.serving?.priorityScheduling,
    disable_priority_preemption: spec.serving?.priorityScheduling,
    // An unstamped request ranks among the stamps instead of after all of them (ADR 0057).
    default_priority_value:
      spec.serving?.priorityScheduling === true ? UNSTAMPED_RUNTIME_PRIORITY : undefined,
  };
  if (spec.model.tokenizerPath !== undefined) args.tokenizer_path = spec.model.tokenizerPath;
  Object.assign(
    args,
    eventArgs(spec),
    radixArgs(engine),
    hicacheArgs(engine),
    hisparseArgs(engine),
    disaggregationArgs(spec, engine),
  );
  return args;
}

/** The ports an engine's event publishers bind: KV events, their replay, load (one per DP rank each). */
export interface EventPorts {
  kv: number;
  replay: number;
  load: number | undefined;
}

export function computeEventPorts(spec: DeploymentSpec): EventPorts | undefined {
  const e = spec.events;
  if (!e?.kvCache) return undefined;
  const ranks = spec.parallelism.data;
  // Each range holds one port per rank; replay after KV, load after replay (what
  // SGLang's `auto` picks too: kv_events.resolve_load_pub_range).
  return { kv: e.port, replay: e.port + ranks, load: e.load ? e.port + 2 * ranks : undefined };
}

function eventArgs(spec: DeploymentSpec): SglangArgsInput {
  const ports = computeEventPorts(spec);
  if (!ports) return {};
  const config = {
    publisher: 'zmq',
    endpoint: `tcp://*:${ports.kv}`,
    replay_endpoint: `tcp://*:${ports.replay}`,
    topic: 'kv',
  };
  return {
    kv_events_config: JSON.stringify(config),
    load_publish_endpoint: ports.load === undefined ? undefined : 'auto',
  };
}

function radixArgs(engine: RoleEngine): SglangArgsInput {
  if (engine.role !== 'decode') return { disable_radix_cache: engine.radixCache === 'disabled' };
  // HiSparse requires the radix cache disabled, and says so (hisparse_hook.validate_hisparse).
  if (engine.profile === 'hisparse') return { disable_radix_cache: true };
  // A decode server keeps no radix cache unless asked. HiCache extends the radix cache, and SGLang
  // refuses it without one (kv_cache_hook.handle_cache_compatibility), so a hicache decode part has
  // one unless the spec turns it off (which the API refuses for profile hicache).
  const enabled =
    engine.radixCache === 'enabled' || (engine.radixCache === undefined && engine.profile === 'hicache');
  return { disaggregation_decode_enable_radix_cache: enabled };
}

function hicacheArgs(engine: RoleEngine): SglangArgsInput {
  if (engine.profile !== 'hicache') return {};
  const h = engine.hicache;
  return {
    enable_hierarchical_cache: true,
    hicache_ratio: h?.ratio,
    hicache_size: h?.sizeGB,
    hicache_host_memory_mode: h?.hostMemoryMode,
    hicache_write_policy: h?.writePolicy,
    hicache_io_backend: h?.ioBackend,
    hicache_mem_layout: h?.memLayout,
    hicache_storage_backend: h?.storage?.backend,
    hicache_storage_prefetch_policy: h?.storage?.prefetchPolicy,
    hicache_storage_backend_extra_config: h?.storage?.extraConfig,
  };
}

function hisparseArgs(engine: RoleEngine): SglangArgsInput {
  if (engine.profile !== 'hisparse') return {};
  const h = engine.hisparse ?? {};
  const config = Object.fromEntries(
    Object.entries({
      top_k: h.topK,
      device_buffer_size: h.deviceBufferSize,
      host_to_device_ratio: h.hostToDeviceRatio,
      swap_in_block_size: h.swapInBlockSize,
    }).filter(([, v]) => v !== undefined),
  );
  return {
    enable_hisparse: true,
    hisparse_config: Object.keys(config).length > 0 ? JSON.stringify(config) : undefined,
  };
}

function disaggregationArgs(spec: DeploymentSpec, engine: RoleEngine): SglangArgsInput {
  const d = spec.disaggregation;
  if (!d || engine.role === 'standalone') return {};
  return {
    disaggregation_mode: engine.role,
    disaggregation_transfer_backend: d.transferBackend,
    // The bootstrap server runs on the prefill side; decode learns it per request.
    disaggregation_bootstrap_port: engine.role === 'prefill' ? d.bootstrapPort : undefined,
    disaggregation_ib_device: d.ibDevice,
  };
}

/** The container's arguments: rendered flags, then the user's extra arguments verbatim. */
export function buildArgv(spec: DeploymentSpec, engine: RoleEngine): string[] {
  return [...renderSglangArgs(buildServerArgs(spec, engine)), ...(spec.runtime.extraArgs ?? [])];
}

/** What a runtime launched with these arguments must report about itself. */
export function computeDeclaredIdentity(spec: DeploymentSpec, engine: RoleEngine): RuntimeIdentity {
  const args = buildServerArgs(spec, engine);
  return {
    modelPath: MODEL_DIR,
    servedModelName: spec.model.servedName,
    tokenizerPath: spec.model.tokenizerPath ?? MODEL_DIR,
    version: spec.runtime.version,
    hicache: args.enable_hierarchical_cache === true,
    hisparse: args.enable_hisparse === true,
    radixCache:
      engine.role === 'decode'
        ? args.disaggregation_decode_enable_radix_cache === true
        : args.disable_radix_cache !== true,
    disaggregationMode: engine.role === 'standalone' ? 'null' : engine.role,
    tensorParallel: spec.parallelism.tensor,
    priorityScheduling: args.enable_priority_scheduling === true,
  };
}
