// The startup checks of the pinned SGLang that the arguments cacheroute can
// render (and the simulator can be launched with) run into, restated in
// TypeScript so the simulator refuses what SGLang refuses without a Python
// process. Each rule names the hook it restates and keeps SGLang's words;
// they run in SGLang's resolution order, so the first refusal is the one
// SGLang would print. `make conformance` runs a matrix of command lines
// through these rules and through SGLang's own checks (the kit's check-args)
// and fails on any disagreement.
//
// Not restated: checks that need the model's weights or config (HiSparse's
// model-class check needs the architecture, which the arguments do not carry;
// the API refuses a HiSparse spec without a supported model.family instead).
// Pure.
import type { SglangArgs } from './flags.ts';
import type { SglangArgIssue } from './parse-args.ts';

interface StartupRule {
  /** SGLang's function (python/sglang/srt/arg_groups/...) whose check this is. */
  readonly source: string;
  readonly path: readonly string[];
  /** SGLang's message when the rule refuses these arguments. */
  check(a: Resolved): string | undefined;
}

/** The few values SGLang resolves before these checks read them. */
interface Resolved {
  readonly args: SglangArgs;
  readonly transferBackend: string;
  readonly disableRadixCache: boolean;
}

// pd_disaggregation_hook.handle_pd_disaggregation: mooncake_tcp is mooncake over TCP,
// and a decode server's radix cache is off unless asked for.
function resolve(args: SglangArgs): Resolved {
  const transferBackend =
    args.disaggregation_transfer_backend === 'mooncake_tcp'
      ? 'mooncake'
      : args.disaggregation_transfer_backend;
  const disableRadixCache =
    args.disaggregation_mode === 'decode'
      ? !args.disaggregation_decode_enable_radix_cache
      : args.disable_radix_cache;
  return { args, transferBackend, disableRadixCache };
}

const isDecodeHostPoolPath = (a: SglangArgs): boolean =>
  a.enable_hierarchical_cache ||
  a.disaggregation_decode_enable_offload_kvcache ||
  (a.disaggregation_mode === 'decode' &&
    [null, 'host_pool'].includes((a['disaggregation_decode_retraction_backup'] as string | null) ?? null));

const isLoadPublishOn = (a: SglangArgs): boolean => {
  const mode = (a.load_publish_endpoint ?? '').trim().toLowerCase();
  return mode !== '' && mode !== 'off';
};

// serving_hook.handle_deprecated_args: --grpc-mode and --smg-grpc-mode run the legacy gRPC server
// instead of HTTP, and take precedence over --grpc-port (the native listener beside HTTP).
const isNativeGrpcOn = (a: SglangArgs): boolean =>
  a['grpc_port'] !== null && a['grpc_port'] !== undefined && !a['grpc_mode'] && !a['smg_grpc_mode'];

export const STARTUP_RULES: readonly StartupRule[] = [
  {
    source: 'serving_hook.handle_deprecated_args',
    path: ['grpc_port', 'api_key', 'admin_api_key'],
    check: ({ args: a }) =>
      isNativeGrpcOn(a) && (a.api_key || a.admin_api_key)
        ? '--grpc-port is incompatible with --api-key/--admin-api-key: the native gRPC listener bypasses HTTP auth middleware.'
        : undefined,
  },
  {
    source: 'pd_disaggregation_hook.handle_pd_disaggregation',
    path: ['disaggregation_decode_enable_radix_cache', 'enable_hisparse'],
    check: ({ args: a }) =>
      a.disaggregation_mode === 'decode' && a.disaggregation_decode_enable_radix_cache && a.enable_hisparse
        ? '--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse'
        : undefined,
  },
  {
    source: 'pd_disaggregation_hook.handle_pd_disaggregation',
    path: ['disaggregation_decode_enable_radix_cache', 'disaggregation_transfer_backend'],
    check: ({ args: a, transferBackend }) =>
      a.disaggregation_mode === 'decode' &&
      a.disaggregation_decode_enable_radix_cache &&
      transferBackend === 'fake'
        ? '--disaggregation-decode-enable-radix-cache is incompatible with --disaggregation-transfer-backend fake'
        : undefined,
  },
  {
    source: 'pd_disaggregation_hook.handle_pd_disaggregation',
    path: ['disaggregation_mode', 'disaggregation_transfer_backend'],
    check: ({ args: a, transferBackend }) =>
      a.disaggregation_mode === 'prefill' && transferBackend === 'fake'
        ? "Prefill server does not support 'fake' as the transfer backend"
        : undefined,
  },
  {
    source: 'hicache_hook.validate_hicache_host_memory_mode',
    path: ['hicache_host_memory_mode', 'hicache_storage_backend'],
    check: ({ args: a }) =>
      isDecodeHostPoolPath(a) &&
      a.hicache_host_memory_mode === 'buffer_only' &&
      a.hicache_storage_backend === null
        ? '--hicache-host-memory-mode buffer_only requires a storage backend (--hicache-storage-backend): ' +
          'host memory is only a staging buffer and all cached data lives in storage.'
        : undefined,
  },
  {
    source: 'hicache_hook.validate_hicache_host_memory_mode',
    path: ['hicache_host_memory_mode', 'disaggregation_mode'],
    check: ({ args: a }) =>
      isDecodeHostPoolPath(a) &&
      a.hicache_host_memory_mode === 'buffer_only' &&
      a.disaggregation_mode === 'decode'
        ? '--hicache-host-memory-mode buffer_only is not supported on decode instances: the decode-side ' +
          'prefetch and offload paths bypass the buffer-mode pipeline, fetching without its prefix context ' +
          'and never consuming its staged holds. Prefill instances share the standard scheduler path and ' +
          'are supported.'
        : undefined,
  },
  {
    source: 'kv_cache_hook.handle_cache_compatibility',
    path: ['enable_hierarchical_cache', 'disable_radix_cache'],
    check: ({ args: a, disableRadixCache }) =>
      a.enable_hierarchical_cache && disableRadixCache
        ? 'The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive and cannot ' +
          'be used at the same time. Please use only one of them.'
        : undefined,
  },
  {
    source: 'kv_cache_hook.handle_cache_compatibility',
    path: ['disaggregation_decode_enable_offload_kvcache'],
    check: ({ args: a }) => {
      if (!a.disaggregation_decode_enable_offload_kvcache) return undefined;
      if (a.disaggregation_mode !== 'decode') {
        return 'The argument disaggregation-decode-enable-offload-kvcache is only supported for decode side.';
      }
      return a.hicache_storage_backend === null
        ? 'The argument disaggregation-decode-enable-offload-kvcache is only supported when hicache-storage-backend is provided.'
        : undefined;
    },
  },
  {
    source: 'validation_hook.check_server_args',
    path: ['tp_size', 'nnodes'],
    check: ({ args: a }) =>
      a['ep_join_mode'] !== 'scale' && (a.tp_size * ((a['pp_size'] as number | null) ?? 1)) % a.nnodes !== 0
        ? 'tp_size must be divisible by number of nodes'
        : undefined,
  },
  {
    source: 'validation_hook.check_server_args',
    path: ['dp_size', 'nnodes'],
    check: ({ args: a }) =>
      a.dp_size > 1 && a.nnodes !== 1
        ? 'multi-node data-parallel replicas are not supported; use attention DP (--attn-dp-size) across nodes'
        : undefined,
  },
  {
    source: 'validation_hook.check_server_args',
    path: ['enable_priority_scheduling', 'schedule_policy'],
    check: ({ args: a }) =>
      a['enable_priority_scheduling'] === true && !['fcfs', 'lof'].includes(a.schedule_policy)
        ? `To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'. '${a.schedule_policy}' is not supported.`
        : undefined,
  },
  {
    source: 'validation_hook.check_load_publish_args',
    path: ['load_publish_endpoint', 'kv_events_config'],
    check: ({ args: a }) =>
      isLoadPublishOn(a) && !a.kv_events_config
        ? "--load-publish-endpoint requires --kv-events-config: routers discover the load range through /server_info's kv_events block, absent without a publisher."
        : undefined,
  },
  {
    source: 'hisparse_hook.validate_hisparse',
    path: ['enable_hisparse', 'disable_radix_cache'],
    check: ({ args: a, disableRadixCache }) =>
      a.enable_hisparse && !disableRadixCache
        ? 'Hierarchical sparse attention currently requires --disable-radix-cache.'
        : undefined,
  },
  {
    source: 'hisparse_hook.validate_hisparse_feature_combos',
    path: ['enable_hisparse', 'enable_mixed_chunk'],
    check: ({ args: a }) =>
      a.enable_hisparse && a.enable_mixed_chunk
        ? '--enable-hisparse does not support --enable-mixed-chunk yet.'
        : undefined,
  },
];

/** Every refusal, in the order SGLang's resolution meets them (SGLang stops at the first). */
export function checkSglangArgs(args: SglangArgs): SglangArgIssue[] {
  const resolved = resolve(args);
  const issues: SglangArgIssue[] = [];
  for (const rule of STARTUP_RULES) {
    const message = rule.check(resolved);
    if (message !== undefined) issues.push({ code: 'incompatible', path: rule.path, message });
  }
  return issues;
}
